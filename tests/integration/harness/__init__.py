"""Shared plumbing for permitd's integration tests, one module per concern.

Everything here talks to real processes: the redis-server the `stack`
fixture started (tests/stack/stack.sh, address in $PERMITD_STACK_DIR/env),
private redis-servers for tests that kill or stop Redis, and permitd
binaries started on free ports. No mocks.

  stack      where things are, the stack's env, free ports, unique names,
             wait_for, main
  redis      a minimal RESP client, private redis-servers, the key layout
  cluster    the same client over a Redis Cluster (PERMITD_TEST_REDIS_MODE)
  permitd    one permitd process: start, wait for /healthz, stop, logs
  http       keep-alive HTTP/1.1 client with Connect helpers, chunked and
             raw-socket POSTs, decisions, hammer
  proto      protobuf binary encode/decode for the permit.v1 messages
  asserts    unittest assertions on Connect replies
  mariadb    the stock mariadb client, private mariadbds

This file re-exports every name the tests use, so `import harness` and
`from harness import ...` read as they did when the harness was one file.
PERMITD_BIN is read from here at each Permitd start, so patching
harness.PERMITD_BIN points every Permitd at another binary.
"""
from .stack import (PERMITD_BIN, SOURCE_DIR, STACK_DIR, free_port, lua_script, main,  # noqa: F401
                    stack_env, unique, wait_for)
from .redis import (STATE, PrivateRedis, Redis, RedisError, hash_tag, put_policy,  # noqa: F401
                    read_state, state_key, state_version, write_state)
from .http import (Http, Reply, chunked_post, content_type, decision, error_code, gz,  # noqa: F401
                   hammer, one_response, parse_http_response, raw_chunked_post)
from .proto import ACQUIRE_RESPONSE, PEEK_RESPONSE, pb_decode, pb_encode, pb_named  # noqa: F401
from .asserts import ConnectAssertions  # noqa: F401
from .mariadb import (MysqlError, PrivateMariaDB, migrate_with_client, mysql,  # noqa: F401
                    mysql_url_parts)
from .permitd import Permitd  # noqa: F401
from .cluster import (ClusterRedis, blob_entries, in_blob, index_blob, index_entry,  # noqa: F401
                      index_hash, index_key, index_tag, indexed, keyslot, redis_mode,
                      redis_ready, stack_redis_url)
