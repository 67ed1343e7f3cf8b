#!/usr/bin/env python3
"""Writes the seed corpus of every fuzzer into tests/fuzz/corpus/<area>/.

Each seed is one realistic input, led by the byte the fuzzer reads first to
choose what to do with the rest (the mode, or the message type: see the
comment at the top of each fuzz_<area>.c and the table in messages.h).
Run it again after changing a mode or the message table; the files it
writes are named after their content, so reruns add nothing twice.

    python3 tests/fuzz/seeds.py
"""
import gzip
import hashlib
import os

HERE = os.path.dirname(os.path.abspath(__file__))

# messages.h: fuzz_messages[], in order.
MESSAGES = [
    "AcquireRequest", "PeekRequest", "AcquireBatchRequest", "ListPoliciesRequest",
    "GetPolicyRequest", "CreatePolicyRequest", "UpdatePolicyRequest",
    "DeletePolicyRequest", "ListPolicyHistoryRequest", "GetBucketRequest",
    "ResetBucketRequest", "GetPolicyStatsRequest", "LoginRequest", "LogoutRequest",
    "WhoAmIRequest", "AcquireResponse", "PeekResponse", "AcquireBatchResponse",
    "ListPoliciesResponse", "GetPolicyResponse", "ListPolicyHistoryResponse",
    "GetBucketResponse", "GetPolicyStatsResponse", "LoginResponse",
    "AllTypes", "Legacy",    # tests/unit/proto: every field kind json.c maps
]


def msg(name):
    return bytes([MESSAGES.index(name)])


def write(area, name, data):
    d = os.path.join(HERE, "corpus", area)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    digest = hashlib.sha1(data).hexdigest()[:10]
    with open(os.path.join(d, "%s-%s" % (name, digest)), "wb") as f:
        f.write(data)


# ---- fuzz_connect: mode % 6, limit index (mode / 6) % 5, level (mode / 30) % 10

def connect_mode(kind, limit=4, level=6):
    return bytes([kind + 6 * limit + 30 * level]) if kind == 3 else bytes([kind + 6 * limit])


BODY = b'{"bucket":"api","app":"web","key":"user-42","permits":"1"}'

for ct in ["application/json", "application/proto", "application/json; charset=utf-8",
           "Application/JSON;charset=\"UTF-8\"", " application/proto ; charset=utf-8 ",
           "application/connect+json", "application/json; charset=latin1", "text/plain"]:
    write("connect", "content-type", bytes([0]) + ct.encode())
for t in ["5000", "1", "0", "9999999999", "10000000000", "-1", "250ms", " 100"]:
    write("connect", "timeout", bytes([1]) + t.encode())
blob = gzip.compress(BODY, mtime=0)
write("connect", "gunzip", connect_mode(2, 4) + blob)
write("connect", "gunzip-limit100", connect_mode(2, 2) + gzip.compress(BODY * 4, mtime=0))
write("connect", "gunzip-empty", connect_mode(2, 0) + gzip.compress(b"", mtime=0))
write("connect", "gunzip-truncated", connect_mode(2, 4) + blob[:-6])
write("connect", "gunzip-badcrc", connect_mode(2, 4) + blob[:-8] + b"\0\0\0\0" + blob[-4:])
write("connect", "gunzip-two-members", connect_mode(2, 4) + blob + blob)
write("connect", "gunzip-member-then-garbage", connect_mode(2, 4) + blob + b"GARBAGE")
write("connect", "gunzip-member-then-part", connect_mode(2, 4) + blob + blob[:10])
write("connect", "gzip-round-trip", connect_mode(3, 4, 6) + BODY)
write("connect", "gzip-round-trip-over", connect_mode(3, 1, 1) + BODY)
for b in ["cGVybWl0ZA==", "cGVybWl0ZA", "AAECAwQFBgc-_w", "AAECAwQFBgc+/w==", "Zg==", "Zg",
          "Z===", "Zm9v\nYmFy", ""]:
    write("connect", "base64-decode", bytes([4]) + b.encode())
write("connect", "base64-encode", bytes([5]) + bytes(range(0, 256, 7)))

# ---- fuzz_config: mode % 4; listen host buffer 256 when (mode / 4) % 2

for u in ["redis://127.0.0.1:6379", "redis://:s3cret@redis:6380/2",
          "redis://permitd:pw@[::1]:6379/0", "redis://pw@cache", "redis://h/15",
          "unix:///run/redis/redis.sock?db=3", "redis+unix:///tmp/r.sock",
          "redis://:6379", "redis://h:0", "redis://h:6379/65536"]:
    write("config", "redis-url", bytes([0]) + u.encode())
for u in ["mysql://permitd:pw@127.0.0.1:3306/permitd",
          "mysql://u:p%40ss%2F@localhost/db?socket=/run/mysqld/mysqld.sock",
          "mysql://u@[::1]:3307/policies", "mysql://u:p@h/db?ssl=1", "mysql://:p@h/db",
          "mysql://u:p@h:65536/db", "postgres://u:p@h/db", "mysql://u:p@h/%00",
          "mysql://u:p%00x@h/db",
          "mysql://u:p@h/db?ssl-mode=VERIFY_IDENTITY&ssl-ca=/ca.pem&ssl-cert=/c.pem&ssl-key=/c.key",
          "mysql://u:p@localhost/db?socket=/s&ssl-mode=disabled",
          "mysql://u:p@h/db?ssl-mode=VERIFY_CA&ssl-ca=%2Fmy%20ca.pem&ssl-mode=REQUIRED"]:
    write("config", "mysql-url", bytes([1]) + u.encode())
for a in ["127.0.0.1:8080", ":8080", "[::1]:8081", "0.0.0.0:0", "localhost:65536", "nohost"]:
    write("config", "listen", bytes([2 + 4]) + a.encode())
write("config", "listen-tight", bytes([2 + 8 * 3]) + b"host:1")
for argv in [
    ["--listen=127.0.0.1:9090", "--redis-url", "redis://r:6379/1", "--threads", "4"],
    ["--admin-listen", "[::1]:9091", "--redis-prefix=app:", "--log-level=debug"],
    ["--mysql-url=mysql://permitd:pw@db:3306/permitd", "--sync-interval-ms", "1000"],
    ["--max-body-bytes=1048576", "--max-connections=10", "--connection-timeout=5",
     "--redis-timeout-ms=20", "--mysql-timeout-ms=100"],
    ["--help"], ["--version"], ["--threads"], ["--threads=0"], ["--bogus=1"], ["stray"],
    ["--redis-prefix={x}"], ["--admin-ui-dir=/srv/ui"],
]:
    write("config", "argv", bytes([3]) + b"\0".join(a.encode() for a in argv))

# ---- fuzz_json: message index, then the JSON text

JSON = [
    ("AcquireRequest", '{"bucket":"api","app":"web","key":"user-42","permits":"3"}'),
    ("AcquireRequest", '{"bucket":"api","app":"web","permits":1}'),
    ("AcquireRequest", '{"bucket":"api","app":"web","key":null,"permits":"-9223372036854775808"}'),
    ("AcquireRequest", '{"bucket":"api","app":"web","extra":{"nested":[1,2]}}'),
    ("AcquireRequest", '{"bucket":"api","app":"web","permits":1e3}'),
    ("AcquireRequest", '{"bucket":"api","bucket":"twice"}'),
    ("PeekRequest", '{"bucket":"api.v2","app":"mobile-app","key":"10.0.0.1"}'),
    ("AcquireBatchRequest", '{"requests":[{"bucket":"api","app":"web","key":"a"},'
                            '{"bucket":"api","app":"web","key":"b","permits":"2"}],'
                            '"allOrNothing":true}'),
    ("AcquireBatchRequest", '{"requests":[{"bucket":"api","app":"web"}],"all_or_nothing":false}'),
    ("ListPoliciesRequest", '{"includeBuckets":true}'),
    ("GetPolicyRequest", '{"name":"api"}'),
    ("CreatePolicyRequest", '{"policy":{"name":"api","apps":["web","*"],"maxPermits":"100",'
                            '"rate":"0.5","description":"API calls \\u00e9","enabled":true,'
                            '"failureMode":"open"}}'),
    ("UpdatePolicyRequest", '{"policy":{"name":"api","apps":["web"],"max_permits":10,'
                            '"rate":"0.016666666667","failure_mode":"closed","version":"7"}}'),
    ("DeletePolicyRequest", '{"name":"api","version":"3"}'),
    ("ListPolicyHistoryRequest", '{"name":"api","limit":10}'),
    ("GetBucketRequest", '{"name":"api","key":"user-42"}'),
    ("ResetBucketRequest", '{"name":"api"}'),
    ("GetPolicyStatsRequest", '{"name":"api","seconds":60}'),
    ("LoginRequest", '{"username":"admin","password":"correct horse"}'),
    ("LogoutRequest", '{}'),
    ("WhoAmIRequest", '{}'),
    ("AcquireResponse", '{"allowed":true,"remaining":"9","limit":"10","retryAfterMs":"0",'
                        '"resetAfterMs":"100"}'),
    ("AcquireBatchResponse", '{"results":[{"response":{"allowed":true,"remaining":"1"}},'
                             '{"error":{"code":"not_found","message":"no policy \\"x\\""}}]}'),
    ("GetBucketResponse", '{"bucket":{"policy":"api","tokens":2.5,"remaining":"2",'
                          '"limit":"10","resetAfterMs":"750"}}'),
    ("GetBucketResponse", '{"bucket":{"tokens":"NaN"}}'),
    ("GetPolicyStatsResponse", '{"endUnix":"1700000000","allowed":["1","2"],"denied":[0,3]}'),
    ("ListPolicyHistoryResponse", '{"changes":[{"action":"update","actor":"admin",'
                                  '"changedAt":"2024-01-01T00:00:00Z",'
                                  '"oldValue":"{}","newValue":"{\\"name\\":\\"api\\"}"}]}'),
    ("AllTypes", '{"fInt32":-5,"fSint32":7,"fSfixed32":"-8","fInt64":"-9007199254740993",'
                 '"fSint64":"5","fSfixed64":"6","fUint32":4294967295,"fFixed32":1,'
                 '"fUint64":"18446744073709551615","fFixed64":"2","fFloat":1.5,'
                 '"fDouble":-0.1,"fBool":true,"fString":"h\u00e9llo","fBytes":"AAEC/w==",'
                 '"color":"COLOR_RED","inner":{"name":"n","count":3},"rInt64":["1",2],'
                 '"rString":["a","b"],"rInner":[{"name":"x"}],"rColor":["COLOR_GREEN",1],'
                 '"rBytes":["-_8","AA"],"rDouble":["NaN","Infinity",1e300],'
                 '"rBool":[true,false],"counts":{"a":"1"},"byId":{"7":{"name":"seven"}},'
                 '"byFlag":{"true":"yes"},"colors":{"k":"COLOR_GREEN"},"choiceName":"pick"}'),
    ("AllTypes", '{"f_int32":1,"choice_inner":{"count":2},"colors":{"x":"COLOR_PURPLE"},'
                 '"r_color":["COLOR_NONE"],"f_float":"3.4028235e38"}'),
    ("AllTypes", '{"byId":{"1":{},"01":{"name":"dup"}},"choiceId":"9","fFloat":1e-45}'),
    ("Legacy", '{"id":"1","count":2,"label":"none","enabled":false,"blob":"YWJj"}'),
    ("Legacy", '{"count":1}'),
]
for name, text in JSON:
    write("json", name, msg(name) + text.encode())


# ---- fuzz_proto: message index, then the protobuf bytes

def varint(n):
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7f
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def f_varint(num, v):
    return varint(num << 3) + varint(v)


def f_bytes(num, b):
    if isinstance(b, str):
        b = b.encode()
    return varint(num << 3 | 2) + varint(len(b)) + b


def f_double(num, x):
    import struct
    return varint(num << 3 | 1) + struct.pack("<d", x)


def f_float(num, x):
    import struct
    return varint(num << 3 | 5) + struct.pack("<f", x)


acquire = f_bytes(1, "api") + f_bytes(2, "web") + f_bytes(3, "user-42") + f_varint(4, 3)
policy = (f_bytes(1, "api") + f_bytes(2, "web") + f_bytes(2, "*") + f_varint(3, 100) +
          f_bytes(4, "0.5") + f_bytes(5, "API calls") + f_varint(6, 1) + f_bytes(7, "open") +
          f_varint(8, 7))
PROTO = [
    ("AcquireRequest", acquire),
    ("AcquireRequest", f_bytes(1, "api") + f_bytes(2, "web") + f_varint(4, -1)),
    ("AcquireRequest", acquire + f_varint(99, 1)),                  # unknown field
    ("AcquireRequest", f_bytes(1, b"b\xc3\xa9") + f_bytes(2, b"\xff\xfe")),  # bad UTF-8
    ("PeekRequest", f_bytes(1, "api") + f_bytes(2, "web") + f_bytes(3, "10.0.0.1")),
    ("AcquireBatchRequest", f_bytes(1, acquire) + f_bytes(1, f_bytes(1, "api")) + f_varint(2, 1)),
    ("CreatePolicyRequest", f_bytes(1, policy)),
    ("UpdatePolicyRequest", f_bytes(1, policy + f_bytes(5, b"caf\xc0\xa9"))),
    ("DeletePolicyRequest", f_bytes(1, "api") + f_varint(2, 3)),
    ("ListPolicyHistoryRequest", f_bytes(1, "api") + f_varint(2, 10)),
    ("GetBucketRequest", f_bytes(1, "api") + f_bytes(2, "k")),
    ("GetPolicyStatsRequest", f_bytes(1, "api") + f_varint(2, 300)),
    ("LoginRequest", f_bytes(1, "admin") + f_bytes(2, "pw")),
    ("AcquireResponse", f_varint(1, 1) + f_varint(2, 9) + f_varint(3, 10) + f_varint(5, 100)),
    ("AcquireBatchResponse", f_bytes(1, f_bytes(1, f_varint(1, 1))) +
                             f_bytes(1, f_bytes(2, f_bytes(1, "not_found")))),
    ("GetBucketResponse", f_bytes(1, f_bytes(1, "api") + f_double(3, 2.5) + f_varint(4, 2))),
    ("GetPolicyStatsResponse", f_varint(1, 1700000000) +
                               f_bytes(2, varint(1) + varint(2)) + f_varint(3, 4)),
    ("ListPoliciesResponse", f_bytes(1, policy) + f_bytes(2, f_bytes(1, "api"))),
    ("AllTypes", f_varint(1, 1) + f_float(11, 0.1) + f_double(12, -2.5) + f_bytes(14, "s") +
                 f_bytes(15, b"\x00\xff") + f_varint(16, 2) + f_bytes(17, f_bytes(1, "in")) +
                 f_bytes(18, varint(1) + varint(300)) + f_bytes(25, f_bytes(1, "a") + f_varint(2, 5)) +
                 f_bytes(25, f_bytes(1, "a") + f_varint(2, 6)) + f_bytes(26, f_varint(1, 7)) +
                 f_varint(29, 42)),
    ("AllTypes", f_varint(16, 99) + f_bytes(31, f_bytes(1, "k") + f_varint(2, 7))),
    ("Legacy", f_varint(5, 1) + f_bytes(2, "none") + f_varint(3, 0) + f_bytes(4, b"abc")),
    ("Legacy", f_varint(1, 3)),
]
for name, data in PROTO:
    write("proto", name, msg(name) + data)


# ---- fuzz_grpc: what a gRPC client sends on one connection (fuzz_grpc.c) ----
# The mode byte's bit 0 puts the client preface and an empty SETTINGS first;
# the frames below are written by hand, their header blocks in HPACK
# literals without Huffman coding (what any decoder takes).

def h2_frame(ftype, flags, stream, payload=b""):
    return len(payload).to_bytes(3, "big") + bytes([ftype, flags]) + stream.to_bytes(4, "big") + payload


def hpack(headers):
    out = b""
    for name, value in headers:
        name, value = name.encode(), value.encode()
        out += b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value
    return out


def grpc_headers(path, extra=()):
    return hpack([(":method", "POST"), (":scheme", "http"), (":path", path),
                  (":authority", "permitd"), ("content-type", "application/grpc"),
                  ("te", "trailers")] + list(extra))


def grpc_message(body, flag=0, length=None):
    return bytes([flag]) + (len(body) if length is None else length).to_bytes(4, "big") + body


ACQUIRE = f_bytes(1, "api") + f_bytes(2, "app") + f_varint(4, 1)
PATH = "/permit.v1.RateLimitService/Acquire"
HEADERS, DATA, RST, SETTINGS, PING, GOAWAY, WINDOW = 1, 0, 3, 4, 6, 7, 8
END_STREAM, END_HEADERS = 1, 4
call = h2_frame(HEADERS, END_HEADERS, 1, grpc_headers(PATH)) + \
    h2_frame(DATA, END_STREAM, 1, grpc_message(ACQUIRE))
GRPC = [
    ("acquire", 0b0101, call),
    ("acquire-fail", 0b1101, call),
    ("timeout", 0b0101, h2_frame(HEADERS, END_HEADERS, 1, grpc_headers(PATH, [("grpc-timeout", "50m")])) +
                        h2_frame(DATA, END_STREAM, 1, grpc_message(ACQUIRE))),
    ("bad-prefix", 0b0101, h2_frame(HEADERS, END_HEADERS, 1, grpc_headers(PATH)) +
                           h2_frame(DATA, END_STREAM, 1, grpc_message(ACQUIRE, length=99))),
    ("compressed", 0b0101, h2_frame(HEADERS, END_HEADERS, 1, grpc_headers(PATH)) +
                           h2_frame(DATA, END_STREAM, 1, grpc_message(ACQUIRE, flag=1))),
    ("over-limit", 0b0011, call),
    ("split-data", 0b0101, h2_frame(HEADERS, END_HEADERS, 1, grpc_headers(PATH)) +
                           h2_frame(DATA, 0, 1, grpc_message(ACQUIRE)[:3]) +
                           h2_frame(DATA, END_STREAM, 1, grpc_message(ACQUIRE)[3:])),
    ("reset", 0b0101, h2_frame(HEADERS, END_HEADERS, 1, grpc_headers(PATH)) +
                      h2_frame(RST, 0, 1, (8).to_bytes(4, "big"))),
    ("streams", 0b0101, b"".join(h2_frame(HEADERS, END_HEADERS, s, grpc_headers(PATH)) +
                                 h2_frame(DATA, END_STREAM, s, grpc_message(ACQUIRE))
                                 for s in range(1, 22, 2))),
    ("control", 0b0101, h2_frame(PING, 0, 0, b"12345678") + h2_frame(WINDOW, 0, 0, (1000).to_bytes(4, "big")) +
                        call + h2_frame(GOAWAY, 0, 0, (1).to_bytes(4, "big") + (0).to_bytes(4, "big"))),
    ("no-preface", 0b0100, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + h2_frame(SETTINGS, 0, 0) + call),
    ("http1", 0b0100, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
]
for name, mode, data in GRPC:
    write("grpc", name, bytes([mode]) + data)
