/*
 * test_policy.c - name rules and the Redis key layout.
 */
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
    policy_redis_key(buf, "rl:", "api", POLICY_KEY_BUCKET, "user-1");
    CHECK_STR(buf, "rl:{api}:k:user-1");
    /* A brace inside the key cannot move the hash tag: Redis hashes the
     * first {...} only. */
    policy_redis_key(buf, "p:", "api", POLICY_KEY_BUCKET, "{evil}");
    CHECK_STR(buf, "p:{api}:k:{evil}");
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
    n = policy_redis_key(buf, prefix, name, POLICY_KEY_BUCKET, key);
    CHECK_INT(n, 128 + 1 + 128 + 4 + 256);
    CHECK_INT(strlen(buf), n);
    CHECK_INT(memcmp(buf + 128, "{", 1), 0);
    CHECK_INT(memcmp(buf + 128 + 1 + 128, "}:k:", 4), 0);

    memset(key, 'k', sizeof(key) - 1);
    key[sizeof(key) - 1] = '\0';
    memset(buf, '#', sizeof(buf));
    n = policy_redis_key(buf, prefix, name, POLICY_KEY_BUCKET, key);
    CHECK_INT(n, POLICY_REDIS_KEY_MAX - 1);
    CHECK_INT(strlen(buf), n);
    CHECK_INT(buf[POLICY_REDIS_KEY_MAX], '#');      /* nothing past the NUL */
}

int main(void)
{
    TEST_RUN(test_policy_names);
    TEST_RUN(test_policy_keys);
    TEST_RUN(test_policy_redis_layout);
    TEST_RUN(test_policy_redis_key_bounds);
    return TEST_REPORT();
}
