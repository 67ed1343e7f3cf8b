/*
 * sha256.c - SHA-256 through nettle (the library GnuTLS, and so
 * libmicrohttpd's TLS, already brings): one message at a time, in memory,
 * as lowercase hex. A hand-written compression function is code to review
 * and get wrong; nettle's is reviewed, tested and uses the CPU's SHA
 * instructions where there are any. This file only adapts its API to the
 * one permitd needs: the admin sessions' hashes (store.c) and the
 * migration files' checksums (migrate_files.c).
 */
#include <stdint.h>

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
