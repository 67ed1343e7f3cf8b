/*
 * sha256.c - SHA-256 through nettle (the library GnuTLS, and so
 * libmicrohttpd's TLS, already brings): one message at a time, in memory,
 * as lowercase hex. A hand-written compression function is code to review
 * and get wrong; nettle's is reviewed, tested and uses the CPU's SHA
 * instructions where there are any. This file only adapts its API to the
 * one permitd needs: the admin sessions' hashes (store.c), the
 * migration files' checksums (migrate_files.c), and the app keys' hashes
 * (decisions/appkeys.c), compared with nettle's constant-time memeql_sec.
 */
#include <stdint.h>

#include <nettle/memops.h>
#include <nettle/sha2.h>

#include "core/sha256.h"

void sha256_hex(const void *in, size_t len, char hex[SHA256_HEX_LEN + 1])
{
    static const char digits[] = "0123456789abcdef";
    struct sha256_ctx ctx;
    uint8_t digest[SHA256_DIGEST_SIZE];

    sha256_init(&ctx);
    sha256_update(&ctx, len, in);
    sha256_digest(&ctx, sizeof(digest), digest);
    for (size_t i = 0; i < sizeof(digest); i++) {
        hex[2 * i] = digits[digest[i] >> 4];
        hex[2 * i + 1] = digits[digest[i] & 0xf];
    }
    hex[SHA256_HEX_LEN] = '\0';
}

void sha256_raw(const void *in, size_t len, unsigned char out[SHA256_RAW_LEN])
{
    struct sha256_ctx ctx;

    sha256_init(&ctx);
    sha256_update(&ctx, len, in);
    sha256_digest(&ctx, SHA256_RAW_LEN, out);
}

int sha256_equal(const unsigned char a[SHA256_RAW_LEN], const unsigned char b[SHA256_RAW_LEN])
{
    return memeql_sec(a, b, SHA256_RAW_LEN) != 0;
}
