/*
 * test_auth.c - administrators' passwords and session tokens
 * (server/control/auth.c): argon2id hashes that verify the right password
 * and nothing else, malformed hashes refused, the dummy hash that unknown
 * users are checked against, session tokens (length, alphabet, no repeats)
 * and finding the token in a Cookie header.
 *
 * argon2id's parameters are fixed (19 MiB, 2 passes), so each hash or
 * verification costs tens of milliseconds: the tests do a handful.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "control/auth.h"
#include "test.h"

/* The PHC prefix every hash permitd writes starts with: the algorithm and
 * the parameters auth.c fixes (OWASP's minimum for argon2id). */
#define PREFIX "$argon2id$v=19$m=19456,t=2,p=1$"

static void test_auth_hash_then_verify(void)
{
    char hash[AUTH_HASH_MAX], again[AUTH_HASH_MAX];
    struct permitd_error err = {0, ""};

    CHECK_INT(auth_hash_password("correct horse", hash, &err), PERMITD_OK);
    CHECK(strncmp(hash, PREFIX, strlen(PREFIX)) == 0);
    CHECK(strlen(hash) < AUTH_HASH_MAX);
    CHECK_INT(auth_verify_password(hash, "correct horse"), 1);
    CHECK_INT(auth_verify_password(hash, "correct horsf"), 0);
    CHECK_INT(auth_verify_password(hash, "correct hors"), 0);
    CHECK_INT(auth_verify_password(hash, ""), 0);

    /* A fresh salt each time: the same password never hashes the same. */
    CHECK_INT(auth_hash_password("correct horse", again, &err), PERMITD_OK);
    CHECK(strcmp(hash, again) != 0);
    CHECK(strncmp(again, PREFIX, strlen(PREFIX)) == 0);
}

/* Anything that is not an argon2id PHC string of a whole hash is a miss,
 * never a match and never a crash. */
static void test_auth_malformed_hash_refused(void)
{
    char hash[AUTH_HASH_MAX], bad[AUTH_HASH_MAX];
    struct permitd_error err = {0, ""};
    size_t len;

    CHECK_INT(auth_hash_password("pw", hash, &err), PERMITD_OK);
    len = strlen(hash);

    CHECK_INT(auth_verify_password("", "pw"), 0);
    CHECK_INT(auth_verify_password("pw", "pw"), 0);
    CHECK_INT(auth_verify_password("$argon2id$", "pw"), 0);
    /* Cut short: the digest incomplete. */
    memcpy(bad, hash, len - 4);
    bad[len - 4] = '\0';
    CHECK_INT(auth_verify_password(bad, "pw"), 0);
    /* Another variant of argon2 named in the string. */
    strcpy(bad, "$argon2i$");
    strcat(bad, hash + strlen("$argon2id$"));
    CHECK_INT(auth_verify_password(bad, "pw"), 0);
    /* One character of the digest changed. */
    strcpy(bad, hash);
    bad[len - 2] = bad[len - 2] == 'A' ? 'B' : 'A';
    CHECK_INT(auth_verify_password(bad, "pw"), 0);
    /* The original still verifies: nothing above touched it. */
    CHECK_INT(auth_verify_password(hash, "pw"), 1);
}

/* The dummy hash is a real argon2id hash with the same parameters as the
 * real ones (so checking an unknown user costs what checking a known one
 * does), made once, and of a password nobody knows. */
static void test_auth_dummy_hash(void)
{
    const char *d = auth_dummy_hash();

    CHECK(d != NULL);
    CHECK(strncmp(d, PREFIX, strlen(PREFIX)) == 0);
    CHECK(strlen(d) > strlen(PREFIX) + 40);
    CHECK(auth_dummy_hash() == d);
    CHECK_INT(auth_verify_password(d, ""), 0);
    CHECK_INT(auth_verify_password(d, "admin"), 0);
}

/* 64 lower-case hex characters from 256 random bits: no two alike, and
 * every hex digit turns up in a few of them. */
static void test_auth_token(void)
{
    enum { N = 64 };
    static char tokens[N][AUTH_TOKEN_LEN + 1];
    struct permitd_error err = {0, ""};
    int seen[16] = {0};

    for (int i = 0; i < N; i++) {
        memset(tokens[i], 'x', sizeof(tokens[i]));
        CHECK_INT(auth_new_token(tokens[i], &err), PERMITD_OK);
        CHECK_INT(strlen(tokens[i]), AUTH_TOKEN_LEN);
        for (int k = 0; k < AUTH_TOKEN_LEN; k++) {
            char c = tokens[i][k];
            CHECK((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
            if (isxdigit((unsigned char)c) && !isupper((unsigned char)c))
                seen[c <= '9' ? c - '0' : c - 'a' + 10]++;
        }
        for (int j = 0; j < i; j++)
            CHECK(strcmp(tokens[i], tokens[j]) != 0);
    }
    /* 4096 digits: each of the 16 is expected 256 times; fewer than 128
     * would mean the bits are not uniform (a chance below 1e-20). */
    for (int d = 0; d < 16; d++)
        CHECK(seen[d] > 128);
}

static void test_auth_cookie_token(void)
{
    char out[AUTH_TOKEN_LEN + 1];

    CHECK_INT(auth_cookie_token("permitd_session=abc", out, sizeof(out)), 0);
    CHECK_STR(out, "abc");
    CHECK_INT(auth_cookie_token("theme=dark; permitd_session=f00d; lang=en", out, sizeof(out)), 0);
    CHECK_STR(out, "f00d");
    CHECK_INT(auth_cookie_token("a=1;permitd_session=x1", out, sizeof(out)), 0);
    CHECK_STR(out, "x1");
    /* A longer name that starts with ours is another cookie. */
    CHECK_INT(auth_cookie_token("permitd_session_old=zz; permitd_session=yy", out, sizeof(out)),
              0);
    CHECK_STR(out, "yy");
    CHECK_INT(auth_cookie_token("permitd_session_old=zz", out, sizeof(out)), -1);
    CHECK_INT(auth_cookie_token("xpermitd_session=zz", out, sizeof(out)), -1);
    CHECK_INT(auth_cookie_token("permitd_session=", out, sizeof(out)), -1);
    CHECK_INT(auth_cookie_token("permitd_session", out, sizeof(out)), -1);
    CHECK_INT(auth_cookie_token("", out, sizeof(out)), -1);
    CHECK_INT(auth_cookie_token(NULL, out, sizeof(out)), -1);
    /* A value that does not fit is refused, not cut. */
    CHECK_INT(auth_cookie_token("permitd_session=12345678", out, 8), -1);
    CHECK_INT(auth_cookie_token("permitd_session=1234567", out, 8), 0);
    CHECK_STR(out, "1234567");
}

int main(void)
{
    TEST_RUN(test_auth_hash_then_verify);
    TEST_RUN(test_auth_malformed_hash_refused);
    TEST_RUN(test_auth_dummy_hash);
    TEST_RUN(test_auth_token);
    TEST_RUN(test_auth_cookie_token);
    return TEST_REPORT();
}
