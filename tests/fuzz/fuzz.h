/*
 * fuzz.h - what every libFuzzer target in tests/fuzz shares.
 *
 * A fuzzer states the invariants of the code it drives with FUZZ_CHECK():
 * a broken one prints where and why and aborts, which libFuzzer reports as
 * a crash and saves the input for. Inputs are raw bytes; fuzz_cstr() turns
 * them into the NUL-terminated strings the parsers take.
 */
#ifndef PERMITD_FUZZ_H
#define PERMITD_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define FUZZ_CHECK(expr) do { \
    if (!(expr)) { \
        fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, #expr); \
        abort(); \
    } \
} while (0)

/* A new NUL-terminated copy of data[0, size) (free()); NULL bytes inside
 * stay, so the C string may end early, as a header or argv would. */
static inline char *fuzz_cstr(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);

    FUZZ_CHECK(s != NULL);
    if (size > 0)
        memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

/* Whether s[0, len) is well-formed UTF-8 (RFC 3629). Written apart from
 * server/transport/json.c on purpose, so the two can disagree. */
static inline int fuzz_utf8(const unsigned char *s, size_t len)
{
    size_t i = 0;

    while (i < len) {
        unsigned c = s[i], need;
        unsigned long cp;

        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xc2 && c <= 0xdf) {
            need = 1;
            cp = c & 0x1f;
        } else if (c >= 0xe0 && c <= 0xef) {
            need = 2;
            cp = c & 0x0f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            need = 3;
            cp = c & 0x07;
        } else {
            return 0;
        }
        if (len - i <= need)
            return 0;
        for (unsigned k = 1; k <= need; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return 0;
            cp = cp << 6 | (s[i + k] & 0x3f);
        }
        if ((need == 2 && cp < 0x800) || (need == 3 && cp < 0x10000) ||
            cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        i += need + 1;
    }
    return 1;
}

#endif
