/*
 * base64.c - RFC 4648 base64 encoding and tolerant decoding.
 */
#include "core/base64.h"

static const char alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
}

long base64_decode(const char *in, size_t len, unsigned char *out)
{
    unsigned int acc = 0;
    int bits = 0;
    size_t o = 0;

    size_t pad = 0;

    /* Padding may only close the text, at most two '=', and when there is
     * any it must complete the last group of four. */
    while (pad < 2 && len > 0 && in[len - 1] == '=') {
        len--;
        pad++;
    }
    if ((pad > 0 && (len + pad) % 4 != 0) || len % 4 == 1)
        return -1;
    for (size_t i = 0; i < len; i++) {
        int v = value((unsigned char)in[i]);
        if (v < 0)
            return -1;
        acc = (acc << 6) | (unsigned int)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (unsigned char)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    return (long)o;
}

size_t base64_encode(const unsigned char *in, size_t len, char *out)
{
    size_t o = 0, i = 0;

    for (; i + 2 < len; i += 3) {
        unsigned int v = (unsigned int)in[i] << 16 | (unsigned int)in[i + 1] << 8 | in[i + 2];
        out[o++] = alphabet[v >> 18];
        out[o++] = alphabet[(v >> 12) & 63];
        out[o++] = alphabet[(v >> 6) & 63];
        out[o++] = alphabet[v & 63];
    }
    if (i < len) {
        unsigned int v = (unsigned int)in[i] << 16;
        if (i + 1 < len)
            v |= (unsigned int)in[i + 1] << 8;
        out[o++] = alphabet[v >> 18];
        out[o++] = alphabet[(v >> 12) & 63];
        out[o++] = i + 1 < len ? alphabet[(v >> 6) & 63] : '=';
        out[o++] = '=';
    }
    out[o] = '\0';
    return o;
}
