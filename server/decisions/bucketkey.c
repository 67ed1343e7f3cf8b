/*
 * bucketkey.c - a valid bucket key from a client's bytes (see
 * bucketkey.h): kept when the key rules take it, hashed otherwise.
 */
#include <string.h>

#include "core/sha256.h"
#include "core/utf8.h"
#include "decisions/bucketkey.h"

/* 1 when value is a key limiter_check() takes (policy_check_key()'s rules,
 * and well-formed UTF-8), checked in one pass with no message built. */
static int valid(const char *value)
{
    size_t i = 0;

    while (value[i] != '\0') {
        unsigned char c = (unsigned char)value[i];
        size_t n = 1;
        if (i >= POLICY_KEY_MAX || c < 0x20 || c == 0x7f)
            return 0;
        if (c >= 0x80 && (n = utf8_char_len((const unsigned char *)value + i)) == 0)
            return 0;
        i += n;
    }
    return i <= POLICY_KEY_MAX;
}

void bucketkey_from_untrusted(const char *value, int hash, char out[POLICY_KEY_MAX + 1])
{
    size_t p = strlen(BUCKETKEY_HASH_PREFIX);

    if (value[0] == '\0' || (!hash && strncmp(value, BUCKETKEY_HASH_PREFIX, p) != 0 &&
                             valid(value))) {
        memcpy(out, value, strlen(value) + 1);      /* valid(): at most POLICY_KEY_MAX */
        return;
    }
    memcpy(out, BUCKETKEY_HASH_PREFIX, p);
    sha256_hex(value, strlen(value), out + p);
}
