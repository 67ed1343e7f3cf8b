/*
 * test_bucketkey.c - server/decisions/bucketkey.c: a client's value kept
 * when it is a valid key, hashed when the key rules would refuse it (too
 * long, control characters, bad UTF-8), when it poses as a hash, and
 * always when hashing is asked; the result always passes limiter_check().
 */
#include <string.h>

#include "decisions/bucketkey.h"
#include "decisions/limiter.h"
#include "core/sha256.h"
#include "test.h"

static void check_valid(const char *key)
{
    struct limiter_request r = {"pol", "app", key, 1, NULL, NULL, NULL};
    struct permitd_error err;

    CHECK_INT(limiter_check(&r, &err), PERMITD_OK);
}

static void check_hashed(const char *value, const char *key)
{
    char hex[SHA256_HEX_LEN + 1];

    sha256_hex(value, strlen(value), hex);
    CHECK_INT(strncmp(key, "h:", 2), 0);
    CHECK_STR(key + 2, hex);
    check_valid(key);
}

static void test_bucketkey_valid_values_kept(void)
{
    char out[POLICY_KEY_MAX + 1], v[POLICY_KEY_MAX + 2];

    bucketkey_from_untrusted("tenant-a", 0, out);
    CHECK_STR(out, "tenant-a");
    bucketkey_from_untrusted("cl\xc3\xa9 with space", 0, out);
    CHECK_STR(out, "cl\xc3\xa9 with space");
    bucketkey_from_untrusted("", 0, out);
    CHECK_STR(out, "");
    bucketkey_from_untrusted("", 1, out);          /* no value: the shared bucket */
    CHECK_STR(out, "");
    memset(v, 'k', POLICY_KEY_MAX);
    v[POLICY_KEY_MAX] = '\0';
    bucketkey_from_untrusted(v, 0, out);            /* exactly the limit */
    CHECK_STR(out, v);
    check_valid(out);
}

static void test_bucketkey_refused_values_hashed(void)
{
    char out[POLICY_KEY_MAX + 1], v[301], w[301];

    memset(v, 'x', 300);
    v[300] = '\0';
    bucketkey_from_untrusted(v, 0, out);            /* too long */
    check_hashed(v, out);
    memcpy(w, v, sizeof(w));
    w[299] = 'y';                                   /* same first 256 bytes: another bucket */
    bucketkey_from_untrusted(w, 0, out);
    check_hashed(w, out);
    bucketkey_from_untrusted("a\tb", 0, out);       /* a TAB */
    check_hashed("a\tb", out);
    bucketkey_from_untrusted("a\x7f", 0, out);
    check_hashed("a\x7f", out);
    bucketkey_from_untrusted("k\xff", 0, out);      /* not UTF-8 */
    check_hashed("k\xff", out);
    bucketkey_from_untrusted("h:0000", 0, out);     /* poses as a hash */
    check_hashed("h:0000", out);
}

static void test_bucketkey_hash_asked(void)
{
    char out[POLICY_KEY_MAX + 1];

    bucketkey_from_untrusted("sk_live_secret", 1, out);
    check_hashed("sk_live_secret", out);
    CHECK(strstr(out, "secret") == NULL);
}

int main(void)
{
    TEST_RUN(test_bucketkey_valid_values_kept);
    TEST_RUN(test_bucketkey_refused_values_hashed);
    TEST_RUN(test_bucketkey_hash_asked);
    return TEST_REPORT();
}
