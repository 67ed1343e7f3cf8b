/*
 * test_cluster.c - the pure parts of server/stores/cluster.c: key slots, slot maps
 * from CLUSTER SHARDS and CLUSTER SLOTS replies, redirects.
 *
 * Key slot vectors were computed once with `redis-cli CLUSTER KEYSLOT`
 * against redis-server 7.0.15 in cluster mode and are hard-coded. Replies
 * are RESP bytes fed through hiredis's own reader (hiredis 0.14 has no
 * reply builder), so the trees are exactly what a connection would give;
 * the first SHARDS and SLOTS replies are verbatim captures from the 3+3
 * cluster of tests/stack/redis-cluster.sh. discover() talks to a server and
 * is tested in tests/integration/test_cluster.py.
 */
#include <stdarg.h>
#include <stdlib.h>

#include <hiredis/hiredis.h>

#include "stores/cluster.h"
#include "test.h"

/* ---------------------------------------------------------- helpers */

/* RESP bytes -> a reply tree (free with freeReplyObject()). */
static redisReply *parse_resp(const char *bytes, size_t len)
{
    redisReader *rd = redisReaderCreate();
    void *reply = NULL;

    if (redisReaderFeed(rd, bytes, len) != REDIS_OK ||
        redisReaderGetReply(rd, &reply) != REDIS_OK || reply == NULL) {
        fprintf(stderr, "test_cluster: the test's RESP does not parse\n");
        abort();
    }
    redisReaderFree(rd);
    return reply;
}

/* A RESP writer for the replies the tests build. */
struct resp {
    char buf[32768];
    size_t len;
};

static void put(struct resp *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct resp *r, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    r->len += (size_t)vsnprintf(r->buf + r->len, sizeof(r->buf) - r->len, fmt, ap);
    va_end(ap);
    if (r->len >= sizeof(r->buf))
        abort();
}

static void arr(struct resp *r, int n) { put(r, "*%d\r\n", n); }
static void num(struct resp *r, long long v) { put(r, ":%lld\r\n", v); }
static void str(struct resp *r, const char *s) { put(r, "$%zu\r\n%s\r\n", strlen(s), s); }

/* A CLUSTER SHARDS node, as Redis 7.0 writes it (7 fields). */
static void shard_node(struct resp *r, const char *id, int port, const char *ip,
                       const char *endpoint, const char *role, const char *health)
{
    arr(r, 14);
    str(r, "id"); str(r, id);
    str(r, "port"); num(r, port);
    str(r, "ip"); str(r, ip);
    str(r, "endpoint"); str(r, endpoint);
    str(r, "role"); str(r, role);
    str(r, "replication-offset"); num(r, 0);
    str(r, "health"); str(r, health);
}

#define ID_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define ID_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define ID_C "cccccccccccccccccccccccccccccccccccccccc"
#define ID_D "dddddddddddddddddddddddddddddddddddddddd"

/* Parses r as SHARDS (slots = 0) or SLOTS (slots = 1); the rc, and the map. */
static int parse_as(const struct resp *r, int slots, struct cluster_map **m,
                    struct permitd_error *err)
{
    redisReply *reply = parse_resp(r->buf, r->len);
    int rc = slots ? cluster_map_parse_slots(reply, "seed.example", m, err)
                   : cluster_map_parse_shards(reply, "seed.example", 0, m, err);

    freeReplyObject(reply);
    return rc;
}

/* ---------------------------------------------------------- key slots */

static void test_cluster_keyslot_vectors(void)
{
    static const struct { const char *key; size_t len; unsigned slot; } v[] = {
        {"", 0, 0},
        {"foo", 3, 12182},
        {"bar", 3, 5061},
        {"123456789", 9, 12739},             /* CRC16/XMODEM check value 0x31C3 */
        {"{}", 2, 15257},                    /* empty tag: the whole key */
        {"{a}{b}", 6, 15495},                /* first tag only: "a" */
        {"a{}b{c}", 7, 7353},                /* the first {...} is empty: whole key */
        {"{user1000}.following", 20, 3443},
        {"foo{}{bar}", 10, 8363},
        {"foo{{bar}}zap", 13, 4015},         /* tag "{bar" */
        {"foo{bar}{zap}", 13, 5061},         /* tag "bar", as "bar" */
        {"{", 1, 4092},
        {"}", 1, 12090},
        {"a{b", 3, 13340},                   /* no closing brace */
        {"{}a", 3, 10875},
        {"user:{42}:x", 11, 8000},
        {"\x00\xff\x80" "abc", 6, 6721},     /* binary bytes, a NUL among them */
        {"a\x00" "b{\x01\x02}", 7, 4979},    /* a binary tag */
        {"\xff", 1, 7920},
        {"{\x00}", 3, 0},                    /* tag "\0": CRC 0 */
    };

    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        unsigned got = cluster_keyslot(v[i].key, v[i].len);
        if (got != v[i].slot)
            fprintf(stderr, "  vector %zu: got %u, want %u\n", i, got, v[i].slot);
        CHECK_INT(got, v[i].slot);
    }
}

static void test_cluster_keyslot_length_bounded(void)
{
    /* Bytes past len do not count, braces included. */
    CHECK_INT(cluster_keyslot("foo{bar}", 3), 12182);
    CHECK_INT(cluster_keyslot("{bar}", 4), cluster_keyslot("{bar", 4));
    CHECK(cluster_keyslot("{bar}", 4) != 5061);
    CHECK_INT(cluster_keyslot("permitd:{api}:k:1", 17), cluster_keyslot("permitd:{api}:b", 15));
}

/* ---------------------------------------------------------- CLUSTER SHARDS */

/* Verbatim from `CLUSTER SHARDS` on a fresh 3+3 cluster (redis 7.0.15). */
static const char shards_capture[] =
    "*3\r\n*4\r\n$5\r\nslots\r\n*2\r\n:10923\r\n:16383\r\n$5\r\nnodes\r\n*2\r\n*14\r\n$2\r\nid\r\n"
    "$40\r\nc670f18d3d45b990de5b95bfe38d7161eafb5b21\r\n$4\r\nport\r\n:35006\r\n$2\r\nip\r\n"
    "$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$6\r\nmaster\r\n"
    "$18\r\nreplication-offset\r\n:0\r\n$6\r\nhealth\r\n$6\r\nonline\r\n*14\r\n$2\r\nid\r\n"
    "$40\r\n9481ae3e07ee7efaa599d7b984058a33bc40d3fc\r\n$4\r\nport\r\n:37464\r\n$2\r\nip\r\n"
    "$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$7\r\nreplica\r\n"
    "$18\r\nreplication-offset\r\n:0\r\n$6\r\nhealth\r\n$7\r\nloading\r\n"
    "*4\r\n$5\r\nslots\r\n*2\r\n:5461\r\n:10922\r\n$5\r\nnodes\r\n*2\r\n*14\r\n$2\r\nid\r\n"
    "$40\r\n86c45ed81f42e9673e4e46d940b24c496fc4284b\r\n$4\r\nport\r\n:33802\r\n$2\r\nip\r\n"
    "$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$6\r\nmaster\r\n"
    "$18\r\nreplication-offset\r\n:0\r\n$6\r\nhealth\r\n$6\r\nonline\r\n*14\r\n$2\r\nid\r\n"
    "$40\r\n8fbf78d427b7c4039cad94b15d857d0752ff5a92\r\n$4\r\nport\r\n:36426\r\n$2\r\nip\r\n"
    "$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$7\r\nreplica\r\n"
    "$18\r\nreplication-offset\r\n:0\r\n$6\r\nhealth\r\n$7\r\nloading\r\n"
    "*4\r\n$5\r\nslots\r\n*2\r\n:0\r\n:5460\r\n$5\r\nnodes\r\n*2\r\n*14\r\n$2\r\nid\r\n"
    "$40\r\n094b23acb8b99af28629e42b7ca2f142f983423a\r\n$4\r\nport\r\n:25388\r\n$2\r\nip\r\n"
    "$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$6\r\nmaster\r\n"
    "$18\r\nreplication-offset\r\n:0\r\n$6\r\nhealth\r\n$6\r\nonline\r\n*14\r\n$2\r\nid\r\n"
    "$40\r\n917fef7b3d4b93a462456d3153c7eae27479f231\r\n$4\r\nport\r\n:22536\r\n$2\r\nip\r\n"
    "$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$7\r\nreplica\r\n"
    "$18\r\nreplication-offset\r\n:0\r\n$6\r\nhealth\r\n$7\r\nloading\r\n";

static void test_cluster_shards_capture(void)
{
    redisReply *reply = parse_resp(shards_capture, sizeof(shards_capture) - 1);
    struct permitd_error err = {0, ""};
    struct cluster_map *m = NULL;
    const struct cluster_node *n, *reps;
    char ranges[64];

    CHECK_INT(cluster_map_parse_shards(reply, "seed.example", 0, &m, &err), PERMITD_OK);
    freeReplyObject(reply);
    if (m == NULL) {
        fprintf(stderr, "  %s\n", err.message);
        return;
    }
    CHECK_INT(cluster_map_masters(m), 3);
    n = cluster_map_master(m, 0);
    CHECK_STR(n->id, "c670f18d3d45b990de5b95bfe38d7161eafb5b21");
    CHECK_STR(n->host, "127.0.0.1");
    CHECK_INT(n->port, 35006);
    CHECK_INT(n->health, CLUSTER_HEALTH_ONLINE);
    CHECK_INT(cluster_map_slot_ranges(m, 0, ranges, sizeof(ranges)), 16384 - 10923);
    CHECK_STR(ranges, "10923-16383");
    CHECK_INT(cluster_map_slot_ranges(m, 1, ranges, sizeof(ranges)), 10922 - 5461 + 1);
    CHECK_STR(ranges, "5461-10922");
    CHECK_INT(cluster_map_slot_ranges(m, 2, ranges, sizeof(ranges)), 5461);
    CHECK_STR(ranges, "0-5460");
    CHECK_INT(cluster_map_slot_ranges(m, -1, ranges, sizeof(ranges)), 0);
    CHECK_STR(ranges, "");

    CHECK_INT(cluster_map_replicas(m, 2, &reps), 1);
    CHECK_STR(reps[0].id, "917fef7b3d4b93a462456d3153c7eae27479f231");
    CHECK_INT(reps[0].port, 22536);
    CHECK_INT(reps[0].health, CLUSTER_HEALTH_LOADING);

    /* "foo" is slot 12182: the first shard's master. */
    n = cluster_map_node_for_slot(m, cluster_keyslot("foo", 3));
    CHECK(n != NULL && n->port == 35006);
    CHECK_INT(cluster_map_master_index(m, 0), 2);
    CHECK_INT(cluster_map_master_index(m, 5460), 2);
    CHECK_INT(cluster_map_master_index(m, 5461), 1);
    CHECK_INT(cluster_map_master_index(m, 16383), 0);
    CHECK_INT(cluster_map_master_index(m, 16384), -1);
    CHECK(cluster_map_node_for_slot(m, 16384) == NULL);
    CHECK(cluster_map_master(m, 3) == NULL);
    CHECK_INT(cluster_map_replicas(m, 3, &reps), 0);
    cluster_map_free(m);
}

/* A failover: the promoted replica is the master, the old master a failed
 * replica; a shard with two ranges; an empty shard; slots nobody serves. */
static void test_cluster_shards_failover_and_gaps(void)
{
    struct resp r = {.len = 0};
    struct permitd_error err = {0, ""};
    struct cluster_map *m = NULL;
    const struct cluster_node *reps;
    char ranges[64];

    arr(&r, 3);
    arr(&r, 4);
    str(&r, "slots"); arr(&r, 4); num(&r, 0); num(&r, 100); num(&r, 200); num(&r, 300);
    str(&r, "nodes"); arr(&r, 2);
    shard_node(&r, ID_A, 7000, "10.0.0.1", "10.0.0.1", "replica", "failed");
    shard_node(&r, ID_B, 7001, "10.0.0.2", "10.0.0.2", "master", "online");
    arr(&r, 4);   /* fields in another order, an unknown one too */
    str(&r, "nodes"); arr(&r, 1);
    shard_node(&r, ID_C, 7002, "10.0.0.3", "10.0.0.3", "master", "online");
    str(&r, "slots"); arr(&r, 0);
    arr(&r, 6);
    str(&r, "future-field"); str(&r, "x");
    str(&r, "slots"); arr(&r, 2); num(&r, 16383); num(&r, 16383);
    str(&r, "nodes"); arr(&r, 1);
    shard_node(&r, ID_D, 7003, "10.0.0.4", "10.0.0.4", "master", "failed");

    CHECK_INT(parse_as(&r, 0, &m, &err), PERMITD_OK);
    if (m == NULL) {
        fprintf(stderr, "  %s\n", err.message);
        return;
    }
    CHECK_INT(cluster_map_masters(m), 2);   /* the empty shard is not in it */
    CHECK_STR(cluster_map_master(m, 0)->id, ID_B);
    CHECK_INT(cluster_map_replicas(m, 0, &reps), 1);
    CHECK_STR(reps[0].id, ID_A);
    CHECK_INT(reps[0].health, CLUSTER_HEALTH_FAILED);
    CHECK_INT(cluster_map_slot_ranges(m, 0, ranges, sizeof(ranges)), 202);
    CHECK_STR(ranges, "0-100,200-300");
    /* A failed master still owns its slots until a replica takes them. */
    CHECK_INT(cluster_map_master(m, 1)->health, CLUSTER_HEALTH_FAILED);
    CHECK_INT(cluster_map_slot_ranges(m, 1, ranges, sizeof(ranges)), 1);
    CHECK_STR(ranges, "16383");
    CHECK_INT(cluster_map_slot_ranges(m, -1, ranges, sizeof(ranges)), 16384 - 203);
    CHECK_STR(ranges, "101-199,301-16382");
    CHECK(cluster_map_node_for_slot(m, 150) == NULL);
    CHECK_INT(cluster_map_master_index(m, 150), -1);
    CHECK_INT(cluster_map_node_for_slot(m, 250)->port, 7001);
    cluster_map_free(m);
}

/* Just after a failover, a shard lists its failed old master as a master
 * beside the promoted replica (Redis 7.0): the map takes the healthy one,
 * whichever comes first; two healthy masters stay an error. */
static void test_cluster_shards_failed_old_master_beside_new(void)
{
    for (int order = 0; order < 2; order++) {
        struct resp r = {.len = 0};
        struct permitd_error err = {0, ""};
        struct cluster_map *m = NULL;

        arr(&r, 1);
        arr(&r, 4);
        str(&r, "slots"); arr(&r, 2); num(&r, 0); num(&r, 16383);
        str(&r, "nodes"); arr(&r, 2);
        if (order == 0)
            shard_node(&r, ID_A, 7000, "10.0.0.1", "10.0.0.1", "master", "failed");
        shard_node(&r, ID_B, 7001, "10.0.0.2", "10.0.0.2", "master", "online");
        if (order == 1)
            shard_node(&r, ID_A, 7000, "10.0.0.1", "10.0.0.1", "master", "failed");
        CHECK_INT(parse_as(&r, 0, &m, &err), PERMITD_OK);
        if (m == NULL) {
            fprintf(stderr, "  %s\n", err.message);
            continue;
        }
        CHECK_INT(cluster_map_masters(m), 1);
        CHECK_STR(cluster_map_master(m, 0)->id, ID_B);
        CHECK_INT(cluster_map_node_for_slot(m, 9999)->port, 7001);
        cluster_map_free(m);
    }
}

static void test_cluster_shards_endpoints(void)
{
    struct resp r = {.len = 0};
    struct permitd_error err = {0, ""};
    struct cluster_map *m = NULL;

    arr(&r, 3);
    arr(&r, 4);
    str(&r, "slots"); arr(&r, 2); num(&r, 0); num(&r, 0);
    str(&r, "nodes"); arr(&r, 1);
    shard_node(&r, ID_A, 7000, "10.0.0.1", "?", "master", "online");          /* unknown */
    arr(&r, 4);
    str(&r, "slots"); arr(&r, 2); num(&r, 1); num(&r, 1);
    str(&r, "nodes"); arr(&r, 1);
    shard_node(&r, ID_B, 7001, "10.0.0.2", "redis-b.example", "master", "online");
    arr(&r, 4);
    str(&r, "slots"); arr(&r, 2); num(&r, 2); num(&r, 2);
    str(&r, "nodes"); arr(&r, 1);
    shard_node(&r, ID_C, 7002, "::1", "", "master", "online");

    CHECK_INT(parse_as(&r, 0, &m, &err), PERMITD_OK);
    if (m == NULL) {
        fprintf(stderr, "  %s\n", err.message);
        return;
    }
    CHECK_STR(cluster_map_node_for_slot(m, 0)->host, "10.0.0.1");
    CHECK_STR(cluster_map_node_for_slot(m, 1)->host, "redis-b.example");
    CHECK_STR(cluster_map_node_for_slot(m, 2)->host, "::1");
    cluster_map_free(m);
}

/* Each malformed SHARDS reply is refused, with a message naming what. */
static void test_cluster_shards_malformed(void)
{
    struct permitd_error err;
    struct cluster_map *m;
    struct resp r;

#define BAD(build, ...) do { \
        static const char *const want_[] = {__VA_ARGS__}; \
        memset(&r, 0, sizeof(r)); \
        memset(&err, 0, sizeof(err)); \
        m = (struct cluster_map *)&r;   /* must be reset to NULL */ \
        build; \
        CHECK_INT(parse_as(&r, 0, &m, &err), PERMITD_EINTERNAL); \
        CHECK(m == NULL); \
        for (size_t w_ = 0; w_ < sizeof(want_) / sizeof(want_[0]); w_++) \
            CHECK_CONTAINS(err.message, want_[w_]); \
    } while (0)
/* Expressions, so a test can chain them with commas. */
#define SHARD(slots_build, nodes_build) \
    (arr(&r, 4), str(&r, "slots"), slots_build, str(&r, "nodes"), nodes_build)
#define ONE_NODE(...) (arr(&r, 1), shard_node(&r, __VA_ARGS__))

    BAD(put(&r, "-ERR This instance has cluster support disabled\r\n"),
        "CLUSTER SHARDS", "cluster support disabled");
    BAD(num(&r, 3), "CLUSTER SHARDS", "an integer, not an array");
    BAD((arr(&r, 1), arr(&r, 3), str(&r, "slots"), arr(&r, 0), str(&r, "nodes")),
        "shard 1", "not a map");
    BAD((arr(&r, 1), arr(&r, 2), str(&r, "slots"), arr(&r, 0)), "shard 1", "\"nodes\"",
        "missing");
    BAD((arr(&r, 1), arr(&r, 2), num(&r, 1), arr(&r, 0)), "shard 1", "field name 1");
    BAD((arr(&r, 1), SHARD(str(&r, "0-10"), ONE_NODE(ID_A, 1, "h", "h", "master", "online"))),
        "\"slots\" is a string");
    BAD((arr(&r, 1), SHARD((arr(&r, 3), num(&r, 0), num(&r, 1), num(&r, 2)),
                           ONE_NODE(ID_A, 1, "h", "h", "master", "online"))),
        "3 numbers", "pairs");
    BAD((arr(&r, 1), SHARD((arr(&r, 2), num(&r, 0), str(&r, "9")),
                           ONE_NODE(ID_A, 1, "h", "h", "master", "online"))),
        "item 2 is a string");
    BAD((arr(&r, 1), SHARD((arr(&r, 2), num(&r, 0), num(&r, 16384)),
                           ONE_NODE(ID_A, 1, "h", "h", "master", "online"))),
        "shard 1", "0-16384", "0-16383");
    BAD((arr(&r, 1), SHARD((arr(&r, 2), num(&r, 9), num(&r, 3)),
                           ONE_NODE(ID_A, 1, "h", "h", "master", "online"))),
        "9-3");
    BAD((arr(&r, 1), SHARD((arr(&r, 2), num(&r, -1), num(&r, 3)),
                           ONE_NODE(ID_A, 1, "h", "h", "master", "online"))),
        "-1-3");
    BAD((arr(&r, 1), SHARD((arr(&r, 2), num(&r, 0), num(&r, 9)),
                           ONE_NODE(ID_A, 0, "h", "h", "master", "online"))),
        "shard 1: node 1", "\"port\" 0");
    BAD((arr(&r, 1), SHARD((arr(&r, 2), num(&r, 0), num(&r, 9)),
                           ONE_NODE(ID_A, 70000, "h", "h", "master", "online"))),
        "\"port\" 70000");
    BAD((arr(&r, 1), SHARD((arr(&r, 2), num(&r, 0), num(&r, 9)),
                           ONE_NODE(ID_A, 1, "h", "h", "leader", "online"))),
        "node 1", "role \"leader\"");
    BAD((arr(&r, 1), SHARD((arr(&r, 2), num(&r, 0), num(&r, 9)),
                           ONE_NODE("not-hex!", 1, "h", "h", "master", "online"))),
        "node id \"not-hex!\"");
    BAD((arr(&r, 1), SHARD((arr(&r, 2), num(&r, 0), num(&r, 9)),
                           ONE_NODE(ID_A "a", 1, "h", "h", "master", "online"))),
        "\"id\" (41 bytes)");
    /* A node that has never met another names no address of its own: the
     * host asked stands in (a one-node cluster; SLOTS does the same), and
     * only with no host asked is it an error. */
    memset(&r, 0, sizeof(r));
    arr(&r, 1), SHARD((arr(&r, 2), num(&r, 0), num(&r, 16383)),
                      ONE_NODE(ID_A, 7000, "", "", "master", "online"));
    CHECK_INT(parse_as(&r, 0, &m, &err), PERMITD_OK);
    if (m != NULL) {
        CHECK_STR(cluster_map_master(m, 0)->host, "seed.example");
        CHECK_INT(cluster_map_master(m, 0)->port, 7000);
        cluster_map_free(m);
    }
    {
        redisReply *reply = parse_resp(r.buf, r.len);
        m = NULL;
        CHECK_INT(cluster_map_parse_shards(reply, NULL, 0, &m, &err), PERMITD_EINTERNAL);
        CHECK(m == NULL);
        CHECK_CONTAINS(err.message, "neither \"endpoint\" nor \"ip\"");
        freeReplyObject(reply);
    }
    BAD((arr(&r, 1), SHARD((arr(&r, 2), num(&r, 0), num(&r, 9)),
                           (arr(&r, 1), arr(&r, 4), str(&r, "tls-port"), num(&r, 1),
                            str(&r, "ip"), str(&r, "h")))),
        "no \"port\"", "TLS");
    BAD((arr(&r, 1), SHARD((arr(&r, 2), num(&r, 0), num(&r, 9)),
                           (arr(&r, 1), arr(&r, 2), str(&r, "port"), str(&r, "6379")))),
        "\"port\" is a string, not an integer");
    BAD((arr(&r, 1), SHARD((arr(&r, 2), num(&r, 0), num(&r, 9)), (arr(&r, 1), num(&r, 5)))),
        "node 1 is an integer, not a map");
    BAD((arr(&r, 1), SHARD((arr(&r, 2), num(&r, 0), num(&r, 9)),
                           ONE_NODE(ID_A, 1, "h", "h", "replica", "online"))),
        "serves slots 0-9 but lists no master");
    BAD((arr(&r, 1), SHARD((arr(&r, 2), num(&r, 0), num(&r, 9)),
                           (arr(&r, 2), shard_node(&r, ID_A, 1, "h", "h", "master", "online"),
                            shard_node(&r, ID_B, 2, "h", "h", "master", "online")))),
        "two masters", "h:1", "h:2");
    BAD((arr(&r, 2),
         SHARD((arr(&r, 2), num(&r, 0), num(&r, 9)), ONE_NODE(ID_A, 1, "a", "a", "master", "online")),
         SHARD((arr(&r, 2), num(&r, 9), num(&r, 20)), ONE_NODE(ID_B, 2, "b", "b", "master", "online"))),
        "shard 2", "slot 9 is claimed by both a:1 and b:2");
#undef ONE_NODE
#undef SHARD
#undef BAD
}

/* ---------------------------------------------------------- CLUSTER SLOTS */

/* Verbatim from `CLUSTER SLOTS` on the same cluster (replicas not listed
 * yet: Redis 7.0 leaves out a replica that has never received a write). */
static const char slots_capture[] =
    "*3\r\n*3\r\n:0\r\n:5460\r\n*4\r\n$9\r\n127.0.0.1\r\n:25388\r\n"
    "$40\r\n094b23acb8b99af28629e42b7ca2f142f983423a\r\n*0\r\n"
    "*3\r\n:5461\r\n:10922\r\n*4\r\n$9\r\n127.0.0.1\r\n:33802\r\n"
    "$40\r\n86c45ed81f42e9673e4e46d940b24c496fc4284b\r\n*0\r\n"
    "*3\r\n:10923\r\n:16383\r\n*4\r\n$9\r\n127.0.0.1\r\n:35006\r\n"
    "$40\r\nc670f18d3d45b990de5b95bfe38d7161eafb5b21\r\n*0\r\n";

static void test_cluster_slots_capture(void)
{
    redisReply *reply = parse_resp(slots_capture, sizeof(slots_capture) - 1);
    struct permitd_error err = {0, ""};
    struct cluster_map *m = NULL;
    char ranges[64];

    CHECK_INT(cluster_map_parse_slots(reply, "127.0.0.1", &m, &err), PERMITD_OK);
    freeReplyObject(reply);
    if (m == NULL) {
        fprintf(stderr, "  %s\n", err.message);
        return;
    }
    CHECK_INT(cluster_map_masters(m), 3);
    CHECK_STR(cluster_map_master(m, 0)->id, "094b23acb8b99af28629e42b7ca2f142f983423a");
    CHECK_INT(cluster_map_master(m, 0)->health, CLUSTER_HEALTH_UNKNOWN);
    CHECK_INT(cluster_map_slot_ranges(m, 0, ranges, sizeof(ranges)), 5461);
    CHECK_STR(ranges, "0-5460");
    CHECK_INT(cluster_map_node_for_slot(m, cluster_keyslot("foo", 3))->port, 35006);
    CHECK_INT(cluster_map_slot_ranges(m, -1, NULL, 0), 0);
    CHECK_INT(cluster_map_replicas(m, 0, NULL), 0);
    cluster_map_free(m);
}

/* A master in two entries is one master; replicas; the 2-element node of
 * Redis 3 (no id); an empty host means the host asked. */
static void test_cluster_slots_forms(void)
{
    struct resp r = {.len = 0};
    struct permitd_error err = {0, ""};
    struct cluster_map *m = NULL;
    const struct cluster_node *reps;
    char ranges[64];

    arr(&r, 3);
    arr(&r, 4); num(&r, 0); num(&r, 99);
    arr(&r, 4); str(&r, "10.0.0.1"); num(&r, 7000); str(&r, ID_A); arr(&r, 0);
    arr(&r, 4); str(&r, "10.0.0.2"); num(&r, 7001); str(&r, ID_B); arr(&r, 0);
    arr(&r, 4); num(&r, 100); num(&r, 199);
    arr(&r, 2); str(&r, ""); num(&r, 7002);
    arr(&r, 2); str(&r, "10.0.0.4"); num(&r, 7003);
    arr(&r, 4); num(&r, 500); num(&r, 599);
    arr(&r, 4); str(&r, "10.0.0.1"); num(&r, 7000); str(&r, ID_A); arr(&r, 0);
    arr(&r, 4); str(&r, "10.0.0.2"); num(&r, 7001); str(&r, ID_B); arr(&r, 0);

    CHECK_INT(parse_as(&r, 1, &m, &err), PERMITD_OK);
    if (m == NULL) {
        fprintf(stderr, "  %s\n", err.message);
        return;
    }
    CHECK_INT(cluster_map_masters(m), 2);
    CHECK_INT(cluster_map_slot_ranges(m, 0, ranges, sizeof(ranges)), 200);
    CHECK_STR(ranges, "0-99,500-599");
    CHECK_INT(cluster_map_replicas(m, 0, &reps), 1);   /* not twice */
    CHECK_STR(reps[0].host, "10.0.0.2");
    CHECK_STR(cluster_map_master(m, 1)->host, "seed.example");
    CHECK_STR(cluster_map_master(m, 1)->id, "");
    CHECK_INT(cluster_map_master(m, 1)->port, 7002);
    CHECK_INT(cluster_map_slot_ranges(m, -1, ranges, sizeof(ranges)), 16384 - 300);
    CHECK_STR(ranges, "200-499,600-16383");
    cluster_map_free(m);
}

static void test_cluster_slots_malformed(void)
{
    struct permitd_error err;
    struct cluster_map *m;
    struct resp r;

#define BAD(build, ...) do { \
        static const char *const want_[] = {__VA_ARGS__}; \
        memset(&r, 0, sizeof(r)); \
        memset(&err, 0, sizeof(err)); \
        m = (struct cluster_map *)&r; \
        build; \
        CHECK_INT(parse_as(&r, 1, &m, &err), PERMITD_EINTERNAL); \
        CHECK(m == NULL); \
        for (size_t w_ = 0; w_ < sizeof(want_) / sizeof(want_[0]); w_++) \
            CHECK_CONTAINS(err.message, want_[w_]); \
    } while (0)
#define NODE(host, port) (arr(&r, 3), str(&r, host), num(&r, port), str(&r, ID_A))

    BAD(put(&r, "-ERR This instance has cluster support disabled\r\n"),
        "CLUSTER SLOTS", "cluster support disabled");
    BAD(str(&r, "x"), "CLUSTER SLOTS", "a string, not an array");
    BAD((arr(&r, 1), arr(&r, 2), num(&r, 0), num(&r, 1)), "entry 1 is too short");
    BAD((arr(&r, 1), arr(&r, 3), str(&r, "0"), num(&r, 1), NODE("h", 1)),
        "entry 1", "start slot is a string");
    BAD((arr(&r, 1), arr(&r, 3), num(&r, 0), num(&r, 16384), NODE("h", 1)), "0-16384");
    BAD((arr(&r, 1), arr(&r, 3), num(&r, 0), num(&r, 1), num(&r, 7)),
        "entry 1: master", "an integer");
    BAD((arr(&r, 1), arr(&r, 3), num(&r, 0), num(&r, 1), NODE("h", 0)),
        "entry 1: master", "\"port\" 0");
    BAD((arr(&r, 1), arr(&r, 4), num(&r, 0), num(&r, 1), NODE("h", 1), (arr(&r, 1), str(&r, "x"))),
        "entry 1: replica 1", "too short");
    BAD((arr(&r, 2), arr(&r, 3), num(&r, 0), num(&r, 10), NODE("a", 1),
         arr(&r, 3), num(&r, 10), num(&r, 20), (arr(&r, 3), str(&r, "b"), num(&r, 2), str(&r, ID_B))),
        "entry 2", "slot 10 is claimed by both a:1 and b:2");
#undef NODE
#undef BAD
}

static void test_cluster_slot_ranges_cut_short(void)
{
    struct resp r = {.len = 0};
    struct permitd_error err = {0, ""};
    struct cluster_map *m = NULL;
    char small[12];

    /* Every even slot of 0..98: 50 ranges of one slot. */
    arr(&r, 50);
    for (int s = 0; s < 100; s += 2) {
        arr(&r, 3); num(&r, s); num(&r, s);
        arr(&r, 3); str(&r, "h"); num(&r, 1); str(&r, ID_A);
    }
    CHECK_INT(parse_as(&r, 1, &m, &err), PERMITD_OK);
    CHECK_INT(cluster_map_slot_ranges(m, 0, small, sizeof(small)), 50);
    CHECK_STR(small, "0,2,4,6...");
    CHECK_INT(cluster_map_slot_ranges(m, -1, small, sizeof(small)), 16384 - 50);
    CHECK_STR(small, "1,3,5,7...");
    cluster_map_free(m);
}

static void test_cluster_map_free_null(void)
{
    char buf[16];

    cluster_map_free(NULL);
    CHECK_INT(cluster_map_masters(NULL), 0);
    CHECK(cluster_map_node_for_slot(NULL, 0) == NULL);
    CHECK_INT(cluster_map_slot_ranges(NULL, -1, buf, sizeof(buf)), CLUSTER_SLOTS);
    CHECK_STR(buf, "0-16383");
}

/* ---------------------------------------------------------- redirects */

static void test_cluster_redirect_forms(void)
{
    static const struct {
        const char *s;
        enum cluster_redirect_kind kind;
        unsigned slot;
        const char *host;
        int port;
    } v[] = {
        {"MOVED 3999 127.0.0.1:6381", CLUSTER_REDIRECT_MOVED, 3999, "127.0.0.1", 6381},
        {"ASK 3999 127.0.0.1:6381", CLUSTER_REDIRECT_ASK, 3999, "127.0.0.1", 6381},
        {"MOVED 0 redis-3.example:7000", CLUSTER_REDIRECT_MOVED, 0, "redis-3.example", 7000},
        {"MOVED 16383 ::1:6381", CLUSTER_REDIRECT_MOVED, 16383, "::1", 6381},   /* as Redis writes v6 */
        {"ASK 12 [::1]:6381", CLUSTER_REDIRECT_ASK, 12, "::1", 6381},
        {"MOVED 12 [fe80::1%eth0]:65535", CLUSTER_REDIRECT_MOVED, 12, "fe80::1%eth0", 65535},
        {"MOVED 12 :6381", CLUSTER_REDIRECT_MOVED, 12, "", 6381},               /* unknown endpoint */
    };

    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        struct cluster_redirect rd;
        CHECK_INT(cluster_redirect_parse(v[i].s, strlen(v[i].s), &rd), v[i].kind);
        CHECK_INT(rd.kind, v[i].kind);
        CHECK_INT(rd.slot, v[i].slot);
        CHECK_STR(rd.host, v[i].host);
        CHECK_INT(rd.port, v[i].port);
    }
}

static void test_cluster_redirect_not_one(void)
{
    static const char *const v[] = {
        "", "MOVED", "MOVED ", "MOVED 3999", "MOVED 3999 ", "MOVED 3999 h", "MOVED 3999 h:",
        "MOVED 16384 h:1", "MOVED 99999999999999999999 h:1", "MOVED -1 h:1", "MOVED x h:1",
        "MOVED 12  h:1", "MOVED 12 h:1 ", "MOVED 12 h:0", "MOVED 12 h:65536", "MOVED 12 h:1x",
        "MOVED 12 h:+1", "MOVED 12 h:-1", "MOVED 12 [::1:1", "MOVED 12 ::1]:1", "MOVED 12 h\t:1",
        "moved 12 h:1", "MOVEDX 12 h:1", "ASKING 12 h:1", "ASK12 h:1", " MOVED 12 h:1",
        "ERR unknown command 'X'", "NOSCRIPT No matching script",
        "CROSSSLOT Keys in request don't hash to the same slot",
        "TRYAGAIN Multiple keys request during rehashing of slot",
        "CLUSTERDOWN The cluster is down",
    };

    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        struct cluster_redirect rd;
        rd.kind = CLUSTER_REDIRECT_ASK;
        if (cluster_redirect_parse(v[i], strlen(v[i]), &rd) != CLUSTER_REDIRECT_NONE)
            fprintf(stderr, "  \"%s\" parsed as a redirect\n", v[i]);
        CHECK_INT(rd.kind, CLUSTER_REDIRECT_NONE);
    }
}

/* Only len bytes count: hiredis's error text need not end where a C
 * string would. */
static void test_cluster_redirect_length_bounded(void)
{
    struct cluster_redirect rd;
    const char s[] = "MOVED 3999 127.0.0.1:63819999";

    CHECK_INT(cluster_redirect_parse(s, strlen(s) - 4, &rd), CLUSTER_REDIRECT_MOVED);
    CHECK_INT(rd.port, 6381);
    CHECK_INT(cluster_redirect_parse(s, 10, &rd), CLUSTER_REDIRECT_NONE);
}

/* rediss+cluster://: a node's "tls-port" is where permitd connects; a node
 * without one is refused; plaintext keeps "port". */
static void test_cluster_shards_tls_port(void)
{
    struct permitd_error err = {0, ""};
    struct cluster_map *m = NULL;
    struct resp r;
    redisReply *reply;

    memset(&r, 0, sizeof(r));
    arr(&r, 1), arr(&r, 4), str(&r, "slots"), (arr(&r, 2), num(&r, 0), num(&r, 16383)),
        str(&r, "nodes"), arr(&r, 1), arr(&r, 10), str(&r, "id"), str(&r, ID_A),
        str(&r, "port"), num(&r, 6379), str(&r, "tls-port"), num(&r, 6380), str(&r, "ip"),
        str(&r, "h"), str(&r, "role"), str(&r, "master");
    reply = parse_resp(r.buf, r.len);
    CHECK_INT(cluster_map_parse_shards(reply, NULL, 1, &m, &err), PERMITD_OK);
    if (m != NULL)
        CHECK_INT(cluster_map_master(m, 0)->port, 6380);
    cluster_map_free(m);
    m = NULL;
    CHECK_INT(cluster_map_parse_shards(reply, NULL, 0, &m, &err), PERMITD_OK);
    if (m != NULL)
        CHECK_INT(cluster_map_master(m, 0)->port, 6379);
    cluster_map_free(m);
    freeReplyObject(reply);

    memset(&r, 0, sizeof(r));
    arr(&r, 1), arr(&r, 4), str(&r, "slots"), (arr(&r, 2), num(&r, 0), num(&r, 9)),
        str(&r, "nodes"), arr(&r, 1), shard_node(&r, ID_A, 7000, "h", "h", "master", "online");
    reply = parse_resp(r.buf, r.len);
    m = NULL;
    CHECK_INT(cluster_map_parse_shards(reply, NULL, 1, &m, &err), PERMITD_EINTERNAL);
    CHECK_CONTAINS(err.message, "no \"tls-port\"");
    freeReplyObject(reply);
}

int main(void)
{
    TEST_RUN(test_cluster_keyslot_vectors);
    TEST_RUN(test_cluster_keyslot_length_bounded);
    TEST_RUN(test_cluster_shards_capture);
    TEST_RUN(test_cluster_shards_tls_port);
    TEST_RUN(test_cluster_shards_failover_and_gaps);
    TEST_RUN(test_cluster_shards_endpoints);
    TEST_RUN(test_cluster_shards_failed_old_master_beside_new);
    TEST_RUN(test_cluster_shards_malformed);
    TEST_RUN(test_cluster_slots_capture);
    TEST_RUN(test_cluster_slots_forms);
    TEST_RUN(test_cluster_slots_malformed);
    TEST_RUN(test_cluster_slot_ranges_cut_short);
    TEST_RUN(test_cluster_map_free_null);
    TEST_RUN(test_cluster_redirect_forms);
    TEST_RUN(test_cluster_redirect_not_one);
    TEST_RUN(test_cluster_redirect_length_bounded);
    return TEST_REPORT();
}
