/*
 * test_sha256.c - FIPS 180-4's examples, and the lengths around the
 * padding's edges (55, 56, 64 bytes, and 119, 120, 128 in a second block),
 * against known digests; every length up to 200 writes exactly 64 hex
 * digits and a NUL. (These were once also the tests of migrate.c's own
 * copy of SHA-256; the migrations now use this module.)
 */
#include "core/sha256.h"
#include "test.h"

static void test_sha256_known_digests(void)
{
    char hex[SHA256_HEX_LEN + 1];
    char a[1000];

    sha256_hex("", 0, hex);
    CHECK_STR(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    sha256_hex("abc", 3, hex);
    CHECK_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56, hex);
    CHECK_STR(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    memset(a, 'a', sizeof(a));
    sha256_hex(a, 55, hex);
    CHECK_STR(hex, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
    sha256_hex(a, 64, hex);
    CHECK_STR(hex, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
    sha256_hex(a, 1000, hex);
    CHECK_STR(hex, "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3");
    sha256_hex(a, 119, hex);
    CHECK_STR(hex, "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb");
    sha256_hex(a, 120, hex);
    CHECK_STR(hex, "2f3d335432c70b580af0e8e1b3674a7c020d683aa5f73aaaedfdc55af904c21c");
    sha256_hex(a, 128, hex);
    CHECK_STR(hex, "6836cf13bac400e9105071cd6af47084dfacad4e5e302c94bfed24e013afb73e");
}

static void test_sha256_hex_shape(void)
{
    char hex[SHA256_HEX_LEN + 2];
    char a[200];

    memset(a, 'a', sizeof(a));
    for (size_t n = 0; n <= sizeof(a); n++) {
        memset(hex, 'X', sizeof(hex));
        sha256_hex(a, n, hex);
        CHECK_INT(strlen(hex), SHA256_HEX_LEN);
        CHECK_INT(strspn(hex, "0123456789abcdef"), SHA256_HEX_LEN);
        CHECK_INT(hex[SHA256_HEX_LEN + 1], 'X');     /* nothing written past the NUL */
    }
}

int main(void)
{
    TEST_RUN(test_sha256_known_digests);
    TEST_RUN(test_sha256_hex_shape);
    return TEST_REPORT();
}
