/*
 * test_base64.c - both alphabets, padding, rejection.
 */
#include "core/base64.h"
#include "test.h"

static void test_base64_round_trip(void)
{
    const unsigned char in[] = {0x00, 0xfb, 0xff, 0x10, 0x7e};
    char enc[16];
    unsigned char dec[16];

    for (size_t n = 0; n <= sizeof(in); n++) {
        size_t e = base64_encode(in, n, enc);
        CHECK_INT(e, base64_encoded_len(n));
        CHECK_INT(base64_decode(enc, e, dec), (long)n);
        CHECK(memcmp(dec, in, n) == 0);
    }
    base64_encode((const unsigned char *)"hello", 5, enc);
    CHECK_STR(enc, "aGVsbG8=");
}

static void test_base64_alphabets_and_padding(void)
{
    unsigned char dec[16];

    CHECK_INT(base64_decode("aGVsbG8", 7, dec), 5);            /* unpadded */
    CHECK(memcmp(dec, "hello", 5) == 0);
    CHECK_INT(base64_decode("-_8=", 4, dec), 2);               /* URL-safe */
    CHECK_INT(dec[0], 0xfb);
    CHECK_INT(dec[1], 0xff);
    CHECK_INT(base64_decode("+/8=", 4, dec), 2);               /* standard */
    CHECK_INT(dec[0], 0xfb);
    CHECK_INT(base64_decode("a", 1, dec), -1);
    CHECK_INT(base64_decode("ab=c", 4, dec), -1);
    CHECK_INT(base64_decode("ab c", 4, dec), -1);
    CHECK_INT(base64_decode("", 0, dec), 0);
}

int main(void)
{
    TEST_RUN(test_base64_round_trip);
    TEST_RUN(test_base64_alphabets_and_padding);
    return TEST_REPORT();
}
