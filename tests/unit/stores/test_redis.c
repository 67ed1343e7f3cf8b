/*
 * test_redis.c - reading what Redis answers, without a Redis.
 *
 * lua/bucket.lua answers a decision as one string of little-endian doubles
 * (eight per item); redis_answer_numbers() reads it for the blocking calls
 * and the pipes alike, and must refuse anything that is not whole numbers,
 * or a reply cut short, rather than hand a wrong decision on. Error
 * replies decide between unavailable (failure_mode applies), a script
 * reload (NOSCRIPT) and internal.
 */
#include <math.h>
#include <stdint.h>

#include "stores/redis.h"
#include "test.h"

/* n doubles as bucket.lua's string.pack("<d...") writes them. */
static size_t pack(char *out, const double *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t bits;
        memcpy(&bits, &v[i], sizeof(bits));
        for (int k = 0; k < 8; k++)
            out[8 * i + (size_t)k] = (char)(bits >> (8 * k) & 0xff);
    }
    return 8 * n;
}

static void test_redis_answer_well_formed(void)
{
    /* A decision: status, allowed, remaining, limit, retry, reset, window, micro. */
    const double v[8] = {0, 1, 9, 10, 0, 100, 10, 9000000};
    long long out[8];
    char s[64];
    size_t len = pack(s, v, 8);

    memset(out, 0x55, sizeof(out));
    CHECK_INT(redis_answer_numbers(s, len, out, 8, NULL), PERMITD_OK);
    for (int i = 0; i < 8; i++)
        CHECK_INT(out[i], (long long)v[i]);

    /* Negative statuses (a negated Connect code) and large whole numbers. */
    {
        const double w[3] = {-5, -9007199254740992.0, 4611686018427387904.0};
        len = pack(s, w, 3);
        CHECK_INT(redis_answer_numbers(s, len, out, 3, NULL), PERMITD_OK);
        CHECK_INT(out[0], -5);
        CHECK_INT(out[1], -9007199254740992LL);
        CHECK_INT(out[2], 4611686018427387904LL);
    }
}

/* Fewer numbers than asked for read 0 (an older script); more are checked
 * and dropped. */
static void test_redis_answer_short_and_long(void)
{
    const double v[4] = {0, 1, 2, 3};
    long long out[6];
    char s[64];
    size_t len = pack(s, v, 4);

    memset(out, 0x55, sizeof(out));
    CHECK_INT(redis_answer_numbers(s, len, out, 6, NULL), PERMITD_OK);
    CHECK_INT(out[3], 3);
    CHECK_INT(out[4], 0);
    CHECK_INT(out[5], 0);

    memset(out, 0x55, sizeof(out));
    CHECK_INT(redis_answer_numbers(s, len, out, 2, NULL), PERMITD_OK);
    CHECK_INT(out[0], 0);
    CHECK_INT(out[1], 1);
    CHECK_INT(out[2], 0x5555555555555555LL);    /* untouched past nout */

    CHECK_INT(redis_answer_numbers("", 0, out, 2, NULL), PERMITD_OK);
    CHECK_INT(out[0], 0);
    CHECK_INT(out[1], 0);
}

/* A reply that is not a whole number of doubles is refused, its length
 * named (a string cut short, or one that is not the script's). */
static void test_redis_answer_wrong_lengths(void)
{
    const double v[2] = {0, 1};
    struct permitd_error err = {0, ""};
    long long out[2];
    char s[16];

    pack(s, v, 2);
    CHECK_INT(redis_answer_numbers(s, 15, out, 2, &err), PERMITD_EINTERNAL);
    CHECK_INT(err.code, PERMITD_EINTERNAL);
    CHECK_CONTAINS(err.message, "15 bytes");
    CHECK_INT(redis_answer_numbers(s, 1, out, 2, &err), PERMITD_EINTERNAL);
    CHECK_CONTAINS(err.message, "1 bytes");
    CHECK_INT(redis_answer_numbers("OK", 2, out, 2, NULL), PERMITD_EINTERNAL);
}

/* A number that is not whole, or not in a long long's range, is refused
 * and named: Redis itself would have cut 1.5 to 1 in an integer reply. */
static void test_redis_answer_non_integral(void)
{
    const double bad[] = {1.5, -0.25, NAN, INFINITY, -INFINITY, 9223372036854775808.0,
                          -1e300};
    struct permitd_error err = {0, ""};
    long long out[2];
    char s[16];

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const double v[2] = {0, bad[i]};
        size_t len = pack(s, v, 2);
        err.message[0] = '\0';
        CHECK_INT(redis_answer_numbers(s, len, out, 2, &err), PERMITD_EINTERNAL);
        CHECK_CONTAINS(err.message, "number 1");
    }
    {
        const double v[1] = {2.5};
        size_t len = pack(s, v, 1);
        CHECK_INT(redis_answer_numbers(s, len, out, 2, &err), PERMITD_EINTERNAL);
        CHECK_CONTAINS(err.message, "2.5");
    }
    /* The most negative long long is whole and in range. */
    {
        const double v[1] = {-9223372036854775808.0};
        size_t len = pack(s, v, 1);
        CHECK_INT(redis_answer_numbers(s, len, out, 1, NULL), PERMITD_OK);
        CHECK_INT(out[0], INT64_MIN);
    }
}

/* Error replies: a Redis that cannot serve now is unavailable (failure_mode
 * applies), a lost script is NOSCRIPT, anything else is a fault of ours. */
/* Issue 20: a decision script answers 112-byte RECORDs, ten doubles and
 * 32 bytes of lease id, or in a compact call 64-byte ones (the first 8
 * doubles), each read into REDIS_RECORD_WORDS words per record (a short
 * one's last two numbers and lease words zero), the length told by the
 * number of items asked; a length that is not whole records, or a number
 * that is not whole, fails; bucket.lua's settle (16 bytes) still reads as
 * two numbers. */
static void test_redis_answer_records(void)
{
    const double v[10] = {0, 1, 1, 2, 0, 0, 30, 1000000, 29999, 1};
    const char lease[33] = "0123456789abcdef0123456789abcdef";
    char s[2 * REDIS_RECORD_BYTES], got[33];
    long long out[2 * REDIS_RECORD_WORDS];
    struct permitd_error err = {0, ""};

    pack(s, v, 10);
    memcpy(s + 80, lease, 32);
    memcpy(s + REDIS_RECORD_BYTES, s, REDIS_RECORD_BYTES);
    s[REDIS_RECORD_BYTES + 80] = 'f';
    memset(out, 0x55, sizeof(out));
    CHECK_INT(redis_answer_read(REDIS_SCRIPT_CONCURRENCY, s, sizeof(s), out,
                                2 * REDIS_RECORD_WORDS, NULL), PERMITD_OK);
    for (int i = 0; i < 10; i++)
        CHECK_INT(out[REDIS_RECORD_WORDS + i], (long long)v[i]);
    memcpy(got, &out[REDIS_RECORD_LEASE], 32);
    got[32] = '\0';
    CHECK_STR(got, lease);
    memcpy(got, &out[REDIS_RECORD_WORDS + REDIS_RECORD_LEASE], 32);
    CHECK(got[0] == 'f' && memcmp(got + 1, lease + 1, 31) == 0);
    CHECK_INT(redis_answer_records(s, REDIS_RECORD_BYTES - 8, REDIS_RECORD_BYTES, out,
                                   REDIS_RECORD_WORDS, &err), PERMITD_EINTERNAL);
    CHECK_CONTAINS(err.message, "104 bytes");
    {
        const double frac[10] = {0, 1, 0.5, 2, 0, 0, 30, 0, 0, 0};
        pack(s, frac, 10);
        CHECK_INT(redis_answer_records(s, REDIS_RECORD_BYTES, REDIS_RECORD_BYTES, out,
                                       REDIS_RECORD_WORDS, &err), PERMITD_EINTERNAL);
    }
    {
        /* a compact call's two short RECORDs (128 bytes: 2 items asked,
         * 64 each): every number read, the two a short one lacks and the
         * lease 0, whatever out held; 7 of them (448 bytes) are not 4 of
         * 112 when 7 items were asked */
        const double w[8] = {0, 0, 7, 9, 1500, 2000, 60, 7000000};
        long long seven[7 * REDIS_RECORD_WORDS];
        char s7[7 * REDIS_RECORD_SHORT];
        pack(s, v, 8);
        pack(s + REDIS_RECORD_SHORT, w, 8);
        memset(out, 0x55, sizeof(out));
        CHECK_INT(redis_answer_read(REDIS_SCRIPT_FIXED_WINDOW, s, 2 * REDIS_RECORD_SHORT, out,
                                    2 * REDIS_RECORD_WORDS, NULL), PERMITD_OK);
        for (int i = 0; i < 8; i++) {
            CHECK_INT(out[i], (long long)v[i]);
            CHECK_INT(out[REDIS_RECORD_WORDS + i], (long long)w[i]);
        }
        for (int i = 8; i < REDIS_RECORD_WORDS; i++) {
            CHECK_INT(out[i], 0);
            CHECK_INT(out[REDIS_RECORD_WORDS + i], 0);
        }
        for (int k = 0; k < 7; k++)
            pack(s7 + k * REDIS_RECORD_SHORT, w, 8);
        CHECK_INT(redis_answer_read(REDIS_SCRIPT_BUCKET, s7, sizeof(s7), seven,
                                    7 * REDIS_RECORD_WORDS, NULL), PERMITD_OK);
        CHECK_INT(seven[6 * REDIS_RECORD_WORDS + 4], 1500);
        CHECK_INT(seven[6 * REDIS_RECORD_WORDS + 9], 0);
        CHECK_INT(redis_answer_records(s, 2 * REDIS_RECORD_SHORT - 8, REDIS_RECORD_SHORT, out,
                                       2 * REDIS_RECORD_WORDS, &err), PERMITD_EINTERNAL);
        CHECK_CONTAINS(err.message, "120 bytes is not a whole number of 64-byte records");
    }
    {
        const double settle[2] = {3, 1};
        pack(s, settle, 2);
        CHECK_INT(redis_answer_read(REDIS_SCRIPT_BUCKET, s, 16, out, 2, NULL), PERMITD_OK);
        CHECK_INT(out[0], 3);
        CHECK_INT(out[1], 1);
    }
}

static void test_redis_error_replies(void)
{
    CHECK_INT(redis_error_status("LOADING Redis is loading the dataset in memory"),
              PERMITD_EUNAVAILABLE);
    CHECK_INT(redis_error_status("BUSY Redis is busy running a script"), PERMITD_EUNAVAILABLE);
    CHECK_INT(redis_error_status("READONLY You can't write against a read only replica."),
              PERMITD_EUNAVAILABLE);
    CHECK_INT(redis_error_status("MASTERDOWN Link with MASTER is down"), PERMITD_EUNAVAILABLE);
    CHECK_INT(redis_error_status("TRYAGAIN Multiple keys request during rehashing"),
              PERMITD_EUNAVAILABLE);
    CHECK_INT(redis_error_status("ERR Error running script (call to f_0123): bad argument"),
              PERMITD_EINTERNAL);
    CHECK_INT(redis_error_status("WRONGTYPE Operation against a key holding the wrong kind"),
              PERMITD_EINTERNAL);
    CHECK_INT(redis_error_status("NOSCRIPT No matching script. Please use EVAL."),
              PERMITD_EINTERNAL);
    CHECK_INT(redis_error_status(""), PERMITD_EINTERNAL);
    CHECK_INT(redis_error_status("loading"), PERMITD_EINTERNAL);     /* codes are upper case */

    CHECK_INT(redis_error_noscript("NOSCRIPT No matching script. Please use EVAL."), 1);
    CHECK_INT(redis_error_noscript("ERR NOSCRIPT"), 0);
    CHECK_INT(redis_error_noscript("LOADING"), 0);
    CHECK_INT(redis_error_noscript(""), 0);
}

int main(void)
{
    TEST_RUN(test_redis_answer_well_formed);
    TEST_RUN(test_redis_answer_short_and_long);
    TEST_RUN(test_redis_answer_wrong_lengths);
    TEST_RUN(test_redis_answer_non_integral);
    TEST_RUN(test_redis_answer_records);
    TEST_RUN(test_redis_error_replies);
    return TEST_REPORT();
}
