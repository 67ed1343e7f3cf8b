/*
 * sha256.h - SHA-256 (FIPS 180-4, computed by nettle), the one hash of
 * permitd: for the admin session ids stored in MySQL (hashed here, so a
 * session token never travels to MySQL, where a statement log would keep
 * it, only its hash does), for the checksums `permitd migrate` records
 * of every applied migration file, and for the app keys (only their
 * hashes are stored, and compared in constant time).
 */
#ifndef PERMITD_SHA256_H
#define PERMITD_SHA256_H

#include <stddef.h>

#define SHA256_HEX_LEN 64
#define SHA256_RAW_LEN 32

/* Writes the SHA-256 of len bytes at in as 64 lowercase hex digits and a
 * NUL into hex (SHA256_HEX_LEN + 1 bytes): what MySQL's SHA2(x, 256)
 * answers. */
void sha256_hex(const void *in, size_t len, char hex[SHA256_HEX_LEN + 1]);

/* The same digest as 32 bytes into out: for the app keys' table, where
 * every request hashes the key it brings (decisions/appkeys.c). */
void sha256_raw(const void *in, size_t len, unsigned char out[SHA256_RAW_LEN]);

/* 1 when the two digests are equal, else 0, in a time that does not
 * depend on where they differ (nettle's memeql_sec): what a secret's hash
 * is compared with. */
int sha256_equal(const unsigned char a[SHA256_RAW_LEN], const unsigned char b[SHA256_RAW_LEN]);

#endif
