/*
 * test_policy.c - name rules and the Redis key layout.
 */
#include <stdio.h>
#include <string.h>

#include "core/embed.h"
#include "stores/cluster.h"
#include "stores/policy.h"
#include "test.h"

static void test_policy_names(void)
{
    struct permitd_error err;
    char long_name[200];

    CHECK_INT(policy_check_name("bucket", "api", &err), PERMITD_OK);
    CHECK_INT(policy_check_name("bucket", "a.b_c-9", &err), PERMITD_OK);
    CHECK_INT(policy_check_name("bucket", "9lives", &err), PERMITD_OK);

    CHECK_INT(policy_check_name("bucket", "", &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "bucket");
    CHECK_INT(policy_check_name("bucket", "bad name!", &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "bucket: \"bad name!\"");
    CHECK_INT(policy_check_name("app", "-lead", &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "app");
    CHECK_INT(policy_check_name("app", "a,b", &err), PERMITD_EINVAL);
    CHECK_INT(policy_check_name("app", "*", &err), PERMITD_EINVAL);
    CHECK_INT(policy_check_name("bucket", "a{b}", &err), PERMITD_EINVAL);

    memset(long_name, 'a', 128);
    long_name[128] = '\0';
    CHECK_INT(policy_check_name("bucket", long_name, &err), PERMITD_OK);
    long_name[128] = 'a';
    long_name[129] = '\0';
    CHECK_INT(policy_check_name("bucket", long_name, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "129");
}

static void test_policy_keys(void)
{
    struct permitd_error err;
    char key[300];

    CHECK_INT(policy_check_key("key", "", &err), PERMITD_OK);
    CHECK_INT(policy_check_key("key", "user:42@example.com {x}", &err), PERMITD_OK);
    CHECK_INT(policy_check_key("key", "bad\nkey", &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "key");
    CHECK_CONTAINS(err.message, "\\x0a");
    memset(key, 'k', 257);
    key[257] = '\0';
    CHECK_INT(policy_check_key("key", key, &err), PERMITD_EINVAL);
}

static void test_policy_redis_layout(void)
{
    char buf[POLICY_REDIS_KEY_MAX];

    CHECK_INT(policy_redis_key(buf, "permitd:", "api", POLICY_KEY_HASH, NULL), 20);
    CHECK_STR(buf, "permitd:{api}:policy");
    policy_redis_key(buf, "permitd:", "api", POLICY_KEY_BUCKET, "");
    CHECK_STR(buf, "permitd:{api}:b");
    policy_redis_key(buf, "permitd:", "api", POLICY_KEY_BUCKET_COLOCATED, "");
    CHECK_STR(buf, "permitd:{api}:b");
    /* A keyed bucket's hash tag holds its key (its own slot); with
     * colocate, the policy's tag (the policy's slot). */
    policy_redis_key(buf, "rl:", "api", POLICY_KEY_BUCKET, "user-1");
    CHECK_STR(buf, "rl:{api:user-1}:k");
    policy_redis_key(buf, "rl:", "api", POLICY_KEY_BUCKET_COLOCATED, "user-1");
    CHECK_STR(buf, "rl:{api}:k:user-1");
    /* A brace inside the key: the tag is the first '{' to the next '}',
     * whatever the key holds. Colocated, the key cannot move the tag at all;
     * spread, a '}' in the key ends the tag early (deterministically), and
     * a '{' is just a byte of it. */
    policy_redis_key(buf, "p:", "api", POLICY_KEY_BUCKET_COLOCATED, "{evil}");
    CHECK_STR(buf, "p:{api}:k:{evil}");
    policy_redis_key(buf, "p:", "api", POLICY_KEY_BUCKET, "{evil}");
    CHECK_STR(buf, "p:{api:{evil}}:k");
    policy_redis_key(buf, "p:", "api", POLICY_KEY_BUCKET, "a}b");
    CHECK_STR(buf, "p:{api:a}b}:k");
}

/* Keyed buckets of one policy land in different slots (CLUSTER KEYSLOT:
 * cluster_keyslot()), unless colocate keeps them in the policy's; keys
 * that share their text before a '}' share a slot. */
static void test_policy_buckets_spread_over_slots(void)
{
    char buf[POLICY_REDIS_KEY_MAX];
    unsigned seen[16384 / 32] = {0}, distinct = 0, policy;
    size_t n;

    n = policy_redis_key(buf, "permitd:", "api", POLICY_KEY_BUCKET, "");
    policy = cluster_keyslot(buf, n);
    CHECK_INT(policy, policy_slot("api"));
    for (int i = 0; i < 1000; i++) {
        char key[32];
        unsigned slot;
        snprintf(key, sizeof(key), "user-%d", i);
        n = policy_redis_key(buf, "permitd:", "api", POLICY_KEY_BUCKET, key);
        slot = cluster_keyslot(buf, n);
        if (!(seen[slot / 32] & (1u << (slot % 32)))) {
            seen[slot / 32] |= 1u << (slot % 32);
            distinct++;
        }
        n = policy_redis_key(buf, "permitd:", "api", POLICY_KEY_BUCKET_COLOCATED, key);
        CHECK_INT(cluster_keyslot(buf, n), policy);
    }
    CHECK(distinct > 900);      /* 1000 keys over 16384 slots: ~970 distinct */
    n = policy_redis_key(buf, "permitd:", "api", POLICY_KEY_BUCKET, "a}b");
    {
        unsigned a = cluster_keyslot(buf, n);
        n = policy_redis_key(buf, "permitd:", "api", POLICY_KEY_BUCKET, "a}zzz");
        CHECK_INT(cluster_keyslot(buf, n), a);
        CHECK_INT(a, cluster_keyslot("api:a", 5));
    }
}

/* The SCAN patterns find both layouts of a policy's keyed buckets and
 * nothing of another policy; glob characters in the prefix are escaped. */
static void test_policy_bucket_patterns(void)
{
    char pat[2][POLICY_PATTERN_MAX];

    policy_bucket_patterns(pat, "permitd:", "api");
    CHECK_STR(pat[0], "permitd:{api}:k:*");
    CHECK_STR(pat[1], "permitd:{api:*}:k");
    policy_bucket_patterns(pat, "a*[b]?:", "x.y");
    CHECK_STR(pat[0], "a\\*\\[b\\]\\?:{x.y}:k:*");
    CHECK_STR(pat[1], "a\\*\\[b\\]\\?:{x.y:*}:k");
}

/* The longest names the rules allow fit whole; anything longer is cut at the
 * buffer's end, never written past it. */
static void test_policy_redis_key_bounds(void)
{
    char buf[POLICY_REDIS_KEY_MAX + 16], prefix[129], name[129], key[600];
    size_t n;

    memset(prefix, 'p', 128);
    prefix[128] = '\0';
    memset(name, 'n', 128);
    name[128] = '\0';
    memset(key, 'k', 256);
    key[256] = '\0';
    memset(buf, '#', sizeof(buf));
    n = policy_redis_key(buf, prefix, name, POLICY_KEY_BUCKET_COLOCATED, key);
    CHECK_INT(n, 128 + 1 + 128 + 4 + 256);
    CHECK_INT(strlen(buf), n);
    CHECK_INT(memcmp(buf + 128, "{", 1), 0);
    CHECK_INT(memcmp(buf + 128 + 1 + 128, "}:k:", 4), 0);
    n = policy_redis_key(buf, prefix, name, POLICY_KEY_BUCKET, key);
    CHECK_INT(n, 128 + 1 + 128 + 1 + 256 + 3);
    CHECK_INT(memcmp(buf + n - 3, "}:k", 3), 0);

    memset(key, 'k', sizeof(key) - 1);
    key[sizeof(key) - 1] = '\0';
    memset(buf, '#', sizeof(buf));
    n = policy_redis_key(buf, prefix, name, POLICY_KEY_BUCKET, key);
    CHECK_INT(n, POLICY_REDIS_KEY_MAX - 1);
    CHECK_INT(strlen(buf), n);
    CHECK_INT(buf[POLICY_REDIS_KEY_MAX], '#');      /* nothing past the NUL */
}

/* Issue 20: each algorithm's limits; the error names the field that does
 * not fit, and the algorithm. */
static void test_policy_limits(void)
{
    struct permitd_error err;
    struct policy_limits l;
    char buf[POLICY_DURATION_TEXT];

    /* token_bucket: "" is the token bucket; rate required, no window, no lease */
    CHECK_INT(policy_check_limits("", 10, "0.5", "", "", &l, &err), PERMITD_OK);
    CHECK_INT(l.algorithm, POLICY_TOKEN_BUCKET);
    CHECK_STR(l.rate, "0.5");
    CHECK_INT(l.window_ms, 0);
    CHECK_INT(l.lease_ms, 0);
    CHECK_INT(policy_check_limits("token_bucket", 10, "", "", "", &l, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "rate: is required for a token_bucket policy");
    CHECK_INT(policy_check_limits("token_bucket", 10, "0", "", "", &l, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "rate: must be more than 0");
    CHECK_INT(policy_check_limits("token_bucket", 10, "1", "1m", "", &l, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "window: a token_bucket policy takes no window (\"1m\")");
    CHECK_INT(policy_check_limits("", 10, "1", "", "30s", &l, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "lease_ttl: only a concurrency policy");
    CHECK_CONTAINS(err.message, "token_bucket");

    /* fixed_window: a duration or a calendar unit; no rate, no lease */
    CHECK_INT(policy_check_limits("fixed_window", 100, "", "90s", "", &l, &err), PERMITD_OK);
    CHECK_INT(l.algorithm, POLICY_FIXED_WINDOW);
    CHECK_INT(l.window_ms, 90000);
    CHECK_INT(l.calendar, POLICY_CALENDAR_NONE);
    CHECK_STR(l.rate, "");
    CHECK_INT(policy_check_limits("fixed_window", 10000, "", "month", "", &l, &err), PERMITD_OK);
    CHECK_INT(l.calendar, POLICY_CALENDAR_MONTH);
    CHECK_INT(l.window_ms, 0);
    CHECK_INT(policy_check_limits("fixed_window", 100, "", "", "", &l, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "window: is required for a fixed_window policy");
    CHECK_CONTAINS(err.message, "month");
    CHECK_INT(policy_check_limits("fixed_window", 100, "5", "1m", "", &l, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "rate: a fixed_window policy takes no rate (\"5\")");
    CHECK_INT(policy_check_limits("fixed_window", 100, "", "1m", "5s", &l, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "lease_ttl: only a concurrency policy takes a lease_ttl, not a "
                                "fixed_window one");
    CHECK_INT(policy_check_limits("fixed_window", 100, "", "week", "", &l, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "window: \"week\" is no duration");
    CHECK_INT(policy_check_limits("fixed_window", 100, "", "0s", "", &l, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "window: \"0s\"");

    /* sliding_window and sliding_log: a duration only */
    CHECK_INT(policy_check_limits("sliding_window", 100, "", "1h", "", &l, &err), PERMITD_OK);
    CHECK_INT(l.window_ms, 3600000);
    CHECK_INT(policy_check_limits("sliding_window", 100, "", "day", "", &l, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "window: \"day\" is a calendar unit, which only a fixed_window "
                                "policy takes");
    CHECK_CONTAINS(err.message, "sliding_window");
    CHECK_INT(l.calendar, POLICY_CALENDAR_NONE);
    CHECK_INT(policy_check_limits("sliding_log", 100, "", "", "", &l, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "window: is required for a sliding_log policy");
    CHECK_INT(policy_check_limits("sliding_log", 10, "1", "1s", "", &l, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "rate: a sliding_log policy takes no rate");

    /* sliding_log: at most POLICY_LOG_MAX_PERMITS */
    CHECK_INT(policy_check_limits("sliding_log", POLICY_LOG_MAX_PERMITS, "", "1m", "", &l, &err),
              PERMITD_OK);
    CHECK_INT(policy_check_limits("sliding_log", POLICY_LOG_MAX_PERMITS + 1, "", "1m", "", &l,
                                  &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "max_permits: 10001 is more than 10000");
    CHECK_CONTAINS(err.message, "sliding_log");
    CHECK_INT(policy_check_limits("sliding_window", POLICY_LOG_MAX_PERMITS + 1, "", "1m", "", &l,
                                  &err), PERMITD_OK);

    /* concurrency: lease_ttl defaults to 30 s; no rate, no window */
    CHECK_INT(policy_check_limits("concurrency", 5, "", "", "", &l, &err), PERMITD_OK);
    CHECK_INT(l.lease_ms, POLICY_LEASE_DEFAULT_MS);
    CHECK_INT(l.lease_ms, 30000);
    CHECK_INT(policy_check_limits("concurrency", 5, "", "", "2m", &l, &err), PERMITD_OK);
    CHECK_INT(l.lease_ms, 120000);
    CHECK_INT(policy_check_limits("concurrency", 5, "", "1m", "", &l, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "window: a concurrency policy takes no window");
    CHECK_INT(policy_check_limits("concurrency", 5, "", "", "soon", &l, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "lease_ttl: \"soon\" is no duration");

    /* every algorithm: max_permits 1..2^53, a known name */
    CHECK_INT(policy_check_limits("concurrency", 0, "", "", "", &l, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "max_permits: 0 is less than 1");
    CHECK_INT(policy_check_limits("leaky_bucket", 5, "", "", "", &l, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "algorithm: \"leaky_bucket\" is no algorithm");

    /* the window as answers carry it */
    policy_format_window(buf, 60000, POLICY_CALENDAR_NONE);
    CHECK_STR(buf, "1m");
    policy_format_window(buf, 0, POLICY_CALENDAR_DAY);
    CHECK_STR(buf, "day");
    policy_format_window(buf, 0, POLICY_CALENDAR_NONE);
    CHECK_STR(buf, "");
}

/* Issue 20: algorithms by name, durations, and one key letter per
 * algorithm in the same three layouts as the token bucket's. */
static void test_policy_algorithms(void)
{
    struct permitd_error err;
    enum policy_algorithm a = POLICY_CONCURRENCY;
    enum policy_calendar c = POLICY_CALENDAR_NONE;

    CHECK_INT(policy_algorithm_parse("algorithm", "", &a, &err), PERMITD_OK);
    CHECK_INT(a, POLICY_TOKEN_BUCKET);
    for (int i = 0; i < POLICY_ALGORITHMS; i++) {
        CHECK_INT(policy_algorithm_parse("algorithm", policy_algorithm_name(i), &a, &err),
                  PERMITD_OK);
        CHECK_INT(a, i);
    }
    CHECK_STR(policy_algorithm_name(POLICY_SLIDING_LOG), "sliding_log");
    CHECK_INT(policy_algorithm_parse("policy.algorithm", "leaky", &a, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "policy.algorithm \"leaky\"");
    CHECK_CONTAINS(err.message, "fixed_window");
    CHECK_INT(policy_algorithm_parse("algorithm", "Token_Bucket", &a, &err), PERMITD_EINVAL);

    CHECK_INT(policy_calendar_parse("month", &c), PERMITD_OK);
    CHECK_INT(c, POLICY_CALENDAR_MONTH);
    CHECK_STR(policy_calendar_name(c), "month");
    CHECK_INT(policy_calendar_parse("1m", &c), PERMITD_ENOTFOUND);
    CHECK_INT(policy_calendar_parse("", &c), PERMITD_ENOTFOUND);
}

static void test_policy_durations(void)
{
    struct permitd_error err;
    int64_t ms = 0;
    char buf[POLICY_DURATION_TEXT];

    CHECK_INT(policy_parse_duration("window", "1s", &ms, &err), PERMITD_OK);
    CHECK_INT(ms, 1000);
    CHECK_INT(policy_parse_duration("window", "250ms", &ms, &err), PERMITD_OK);
    CHECK_INT(ms, 250);
    CHECK_INT(policy_parse_duration("window", "90s", &ms, &err), PERMITD_OK);
    CHECK_INT(ms, 90000);
    CHECK_INT(policy_parse_duration("window", "1m", &ms, &err), PERMITD_OK);
    CHECK_INT(ms, 60000);
    CHECK_INT(policy_parse_duration("window", "1h", &ms, &err), PERMITD_OK);
    CHECK_INT(ms, 3600000);
    CHECK_INT(policy_parse_duration("window", "400d", &ms, &err), PERMITD_OK);
    CHECK_INT(ms, POLICY_DURATION_MAX_MS);
    const char *bad[] = {"", "1", "s", "0s", "-1s", "1.5s", "1 s", "1S", "401d", "1sec",
                         "99999999999999999d", "1s "};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        CHECK_INT(policy_parse_duration("lease_ttl", bad[i], &ms, &err), PERMITD_EINVAL);
        CHECK_CONTAINS(err.message, "lease_ttl");
    }
    CHECK_CONTAINS(err.message, "no duration");

    policy_format_duration(buf, 60000);
    CHECK_STR(buf, "1m");
    policy_format_duration(buf, 1500);
    CHECK_STR(buf, "1500ms");
    policy_format_duration(buf, 86400000);
    CHECK_STR(buf, "1d");
    policy_format_duration(buf, 90000);
    CHECK_STR(buf, "90s");
}

static void test_policy_bucket_keys(void)
{
    char buf[POLICY_REDIS_KEY_MAX], tb[POLICY_REDIS_KEY_MAX];

    policy_bucket_key(buf, "P", "api", POLICY_TOKEN_BUCKET, 0, "u1");
    policy_redis_key(tb, "P", "api", POLICY_KEY_BUCKET, "u1");
    CHECK_STR(buf, tb);
    policy_bucket_key(buf, "P", "api", POLICY_TOKEN_BUCKET, 1, "u1");
    CHECK_STR(buf, "P{api}:k:u1");
    policy_bucket_key(buf, "P", "api", POLICY_TOKEN_BUCKET, 0, "");
    CHECK_STR(buf, "P{api}:b");

    CHECK_INT(policy_bucket_key(buf, "P", "api", POLICY_FIXED_WINDOW, 0, "u1"), 11);
    CHECK_STR(buf, "P{api:u1}:f");
    policy_bucket_key(buf, "P", "api", POLICY_SLIDING_WINDOW, 1, "u1");
    CHECK_STR(buf, "P{api}:s:u1");
    policy_bucket_key(buf, "P", "api", POLICY_SLIDING_LOG, 0, NULL);
    CHECK_STR(buf, "P{api}:l");
    policy_bucket_key(buf, "P", "api", POLICY_CONCURRENCY, 0, "u1");
    CHECK_STR(buf, "P{api:u1}:c");
    CHECK_INT(cluster_keyslot(buf, strlen(buf)), cluster_keyslot("api:u1", 6));
}

/* The bucket index (issues 22, 41): each slot's tag hashes to that slot,
 * the set is P{T}ix:NAME in the slot of the bucket it indexes, the group
 * list P{T}il:NAME in the first slot of its group of 64, and
 * lua/bucket.lua's tables (INDEX_TAGS, CRC16) say the same as policy.c:
 * the script names the sets the settle pass reads. */
static void test_policy_index_keys_agree_with_bucket_lua(void)
{
    const struct embedded_file *f = embed_find(lua_script_files, "bucket.lua");
    const char *tags, *crc;
    char key[POLICY_REDIS_KEY_MAX], bucket[POLICY_REDIS_KEY_MAX];
    size_t bad = 0;

    CHECK(f != NULL);
    tags = strstr(f->data, "local INDEX_TAGS = [[\n");
    crc = strstr(f->data, "local CRC16 = '");
    CHECK(tags != NULL && crc != NULL);
    tags += strlen("local INDEX_TAGS = [[\n");
    crc += strlen("local CRC16 = '");
    for (unsigned s = 0; s < POLICY_SLOTS; s++) {
        const char *t = policy_index_tag(s);
        bad += strlen(t) != POLICY_INDEX_TAG_LEN || cluster_keyslot(t, 3) != s ||
               memcmp(tags + 3 * s + s / 64, t, 3) != 0;
    }
    CHECK_INT((int)bad, 0);
    /* Two decimal escapes an entry, its high byte then its low. */
    for (unsigned x = 0; x < 256; x++) {
        unsigned v = x << 8, hi, lo;
        int used = 0;
        for (int i = 0; i < 8; i++)
            v = (v & 0x8000 ? (v << 1) ^ 0x1021 : v << 1) & 0xffff;
        if (sscanf(crc, "\\%u\\%u%n", &hi, &lo, &used) != 2 || used == 0) {
            bad++;
            break;
        }
        bad += hi != v >> 8 || lo != (v & 0xff);
        crc += used;
    }
    CHECK(*crc == '\'');
    CHECK_INT((int)bad, 0);

    /* A spread bucket's index is in its slot, named for its policy. */
    size_t n = policy_redis_key(bucket, "p:", "api", POLICY_KEY_BUCKET, "user-7");
    unsigned slot = cluster_keyslot(bucket, n);
    n = policy_index_key(key, "p:", "api", slot);
    CHECK_INT((int)cluster_keyslot(key, n), (int)slot);
    CHECK(strncmp(key, "p:{", 3) == 0);
    CHECK_STR(key + 3 + POLICY_INDEX_TAG_LEN, "}ix:api");

    /* Its group's list (issue 41) is in the group's first slot, and
     * neither it nor the hashes of before are bucket keys to the index
     * build. */
    n = policy_index_group_key(key, "p:", "api", slot, POLICY_INDEX_LIST);
    CHECK_INT((int)cluster_keyslot(key, n), (int)(slot - slot % POLICY_INDEX_GROUP));
    CHECK_STR(key + 3 + POLICY_INDEX_TAG_LEN, "}il:api");
    CHECK_INT(policy_is_bucket_key("p:", key, n), 0);
    policy_index_group_key(bucket, "p:", "api", slot - slot % POLICY_INDEX_GROUP + 63,
                           POLICY_INDEX_LIST);
    CHECK_STR(bucket, key);
    policy_index_group_key(bucket, "p:", "api", (slot + POLICY_INDEX_GROUP) % POLICY_SLOTS,
                           POLICY_INDEX_LIST);
    CHECK(strcmp(bucket, key) != 0);
    policy_index_group_key(bucket, "p:", "api", slot, POLICY_INDEX_HASHES);
    CHECK_STR(bucket + 3 + POLICY_INDEX_TAG_LEN, "}ig:api");
    CHECK(strncmp(bucket, key, 3 + POLICY_INDEX_TAG_LEN) == 0);
    strcat(bucket, ":0");
    CHECK_INT(policy_is_bucket_key("p:", bucket, strlen(bucket)), 0);
    policy_index_group_key(key, "p:", "k", 0, POLICY_INDEX_LIST);
    CHECK_INT(policy_is_bucket_key("p:", key, strlen(key)), 0);
    policy_index_group_key(key, "p:", "k", 0, POLICY_INDEX_HASHES);
    strcat(key, ":0");
    CHECK_INT(policy_is_bucket_key("p:", key, strlen(key)), 0);

    /* What the prune's SCAN for index keys may meet: each kind, and bucket
     * keys whose KEY looks like one (a hostile client's) are none. */
    CHECK_INT(policy_index_key_kind("p:", "p:{abc}ix:api"), 'x');
    CHECK_INT(policy_index_key_kind("p:", "p:{abc}il:api"), 'l');
    CHECK_INT(policy_index_key_kind("p:", "p:{abc}ig:api"), 'g');
    CHECK_INT(policy_index_key_kind("p:", "p:{abc}ig:api:12"), 'g');
    CHECK_INT(policy_index_key_kind("p:", "p:{abc}il:api:12"), 0);
    CHECK_INT(policy_index_key_kind("p:", "p:{abc}ig:api:"), 0);
    CHECK_INT(policy_index_key_kind("p:", "p:{ab:}il:x}:k"), 0);     /* {ab:KEY}:k, KEY "}il:x" */
    CHECK_INT(policy_index_key_kind("p:", "p:{api}:k:a}il:b"), 0);
    CHECK_INT(policy_index_key_kind("p:", "p:{abc}il:"), 0);
    CHECK_INT(policy_index_key_kind("p:", "q:{abc}il:api"), 0);
    CHECK_INT(policy_index_key_kind("p:", "p:{abc}iq:api"), 0);
    CHECK_INT(policy_index_key_kind("p:", "p:{ab"), 0);

    /* Whether a settle reads a list's new blobs again: blob L is split
     * from blob L - 2^floor(log2 L) (5 from 1, 8 from 0, 13 from 5). */
    CHECK_INT(policy_index_split_unread(0, 5, 5), 0);         /* nothing grew */
    CHECK_INT(policy_index_split_unread(0, 5, 6), 1);         /* 5 from 1, read in this reading */
    CHECK_INT(policy_index_split_unread(5, 8, 9), 0);         /* 8 from 0: read in full before */
    CHECK_INT(policy_index_split_unread(5, 8, 14), 1);        /* 13 from 5: being read */
    CHECK_INT(policy_index_split_unread(8, 9, 16), 0);        /* 9..15 from 1..7 */
    CHECK_INT(policy_index_split_unread(1, 3, 4), 1);         /* 3 from 1: being read */
    CHECK_INT(policy_index_split_unread(0, 0, 0), 0);

    /* An entry back into its key: each layout, and what is no entry. */
    CHECK_INT((int)policy_index_entry_key(key, "p:", "api", "user-7", 6), 16);
    CHECK_STR(key, "p:{api:user-7}:k");
    CHECK_INT((int)policy_index_entry_key(key, "p:", "api", "a}b", 3), 13);
    CHECK_STR(key, "p:{api:a}b}:k");
    CHECK_INT((int)policy_index_entry_key(key, "p:", "api", "\1u", 2), 11);
    CHECK_STR(key, "p:{api}:k:u");
    CHECK_INT((int)policy_index_entry_key(key, "p:", "api", "\2", 1), 9);
    CHECK_STR(key, "p:{api}:b");
    CHECK_INT((int)policy_index_entry_key(key, "p:", "api", "\2x", 2), 0);
    CHECK_INT((int)policy_index_entry_key(key, "p:", "api", "", 0), 0);
    char longest[POLICY_REDIS_KEY_MAX + 1];
    memset(longest, 'x', POLICY_REDIS_KEY_MAX);
    CHECK_INT((int)policy_index_entry_key(key, "p:", "api", longest, POLICY_REDIS_KEY_MAX), 0);

    /* Which keys the index build takes for buckets. */
    CHECK_INT(policy_is_bucket_key("p:", "p:{api}:b", 9), 1);
    CHECK_INT(policy_is_bucket_key("p:", "p:{api:u}:k", 11), 1);
    CHECK_INT(policy_is_bucket_key("p:", "p:{api}:k:u", 11), 1);
    CHECK_INT(policy_is_bucket_key("p:", "p:{api}:policy", 14), 0);
    CHECK_INT(policy_is_bucket_key("p:", "p:{api:u}:f", 11), 0);
    CHECK_INT(policy_is_bucket_key("p:", key, strlen(key)), 0);
    CHECK_INT(policy_is_bucket_key("p:", "p:{api:u}:k\x1fr1", 15), 0);
    CHECK_INT(policy_is_bucket_key("p:", "q:{api}:b", 9), 0);
}

int main(void)
{
    TEST_RUN(test_policy_names);
    TEST_RUN(test_policy_keys);
    TEST_RUN(test_policy_redis_layout);
    TEST_RUN(test_policy_redis_key_bounds);
    TEST_RUN(test_policy_buckets_spread_over_slots);
    TEST_RUN(test_policy_bucket_patterns);
    TEST_RUN(test_policy_algorithms);
    TEST_RUN(test_policy_limits);
    TEST_RUN(test_policy_durations);
    TEST_RUN(test_policy_bucket_keys);
    TEST_RUN(test_policy_index_keys_agree_with_bucket_lua);
    return TEST_REPORT();
}
