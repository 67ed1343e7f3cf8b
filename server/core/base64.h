/*
 * base64.h - RFC 4648 base64, both alphabets.
 */
#ifndef PERMITD_BASE64_H
#define PERMITD_BASE64_H

#include <stddef.h>

/* Decodes standard or URL-safe base64, padded or not (both alphabets are
 * accepted in one pass, as the proto3 JSON mapping and Connect GET ask).
 * out must hold base64_decoded_max(len) bytes. Returns the decoded length,
 * or -1 when in is not base64. */
long base64_decode(const char *in, size_t len, unsigned char *out);

static inline size_t base64_decoded_max(size_t len)
{
    return (len + 3) / 4 * 3;
}

/* Encodes len bytes as standard padded base64 into out, which must hold
 * base64_encoded_len(len) + 1 bytes; NUL-terminates. Returns the length. */
size_t base64_encode(const unsigned char *in, size_t len, char *out);

static inline size_t base64_encoded_len(size_t len)
{
    return (len + 2) / 3 * 4;
}

#endif
