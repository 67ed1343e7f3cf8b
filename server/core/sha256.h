/*
 * sha256.h - SHA-256 (FIPS 180-4, computed by nettle), the one hash of
 * permitd: for the admin session ids stored in MySQL (hashed here, so a
 * session token never travels to MySQL, where a statement log would keep
 * it, only its hash does) and for the checksums `permitd migrate` records
 * of every applied migration file.
 */
#ifndef PERMITD_SHA256_H
#define PERMITD_SHA256_H

#include <stddef.h>

#define SHA256_HEX_LEN 64

/* Writes the SHA-256 of len bytes at in as 64 lowercase hex digits and a
 * NUL into hex (SHA256_HEX_LEN + 1 bytes): what MySQL's SHA2(x, 256)
 * answers. */
void sha256_hex(const void *in, size_t len, char hex[SHA256_HEX_LEN + 1]);

#endif
