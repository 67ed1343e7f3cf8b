/*
 * fuzz_connect.c - libFuzzer target for the Connect framing that is
 * reachable without a live HTTP request: Content-Type and
 * Connect-Timeout-Ms parsing, gzip request bodies (connect_gunzip) and
 * base64 (server/core/base64.c, used by the JSON codec for bytes and by Connect
 * GET for ?message=...&base64=1).
 *
 * The first input byte picks what is fuzzed and how; the rest is the
 * header value, the body or the text. Each mode checks the function's
 * contract from connect.h/base64.h against a plain re-statement of it:
 *   0  Content-Type     accepted exactly when the type is application/proto
 *                       or application/json (any case) and every parameter
 *                       is charset=utf-8
 *   1  timeout          accepted exactly when 1-10 ASCII digits, not 0;
 *                       value exact
 *   2  gunzip           result equals zlib's own inflate of the same bytes,
 *                       never over the limit, nothing leaked on failure
 *   3  gzip round trip  the rest is compressed here and must come back
 *                       byte for byte (or be refused as too large)
 *   4  base64 decode    decoded -> encoded -> decoded is stable, lengths fit
 *   5  base64 encode    encode -> decode gives the input back
 */
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <zlib.h>

#include "core/base64.h"
#include "transport/connect.h"
#include "fuzz.h"

/* The decompression limits tried: nothing, tiny, and the server's default. */
static const size_t limits[] = { 0, 1, 100, 4096, 65536 };
#define NLIMITS (sizeof(limits) / sizeof(limits[0]))

/* Re-statement of connect_parse_content_type()'s contract. */
static int expect_content_type(const char *ct, enum connect_codec *codec)
{
    size_t n;

    while (*ct == ' ')
        ct++;
    n = strcspn(ct, "; ");
    if (n == 17 && strncasecmp(ct, "application/proto", 17) == 0)
        *codec = CONNECT_CODEC_PROTO;
    else if (n == 16 && strncasecmp(ct, "application/json", 16) == 0)
        *codec = CONNECT_CODEC_JSON;
    else
        return -1;
    ct += n;
    /* parameters separated by ';', spaces around them ignored */
    for (;;) {
        const char *start, *end;

        while (*ct == ' ' || *ct == ';')
            ct++;
        if (*ct == '\0')
            return 0;
        start = ct;
        end = ct + strcspn(ct, ";");
        ct = end;
        while (end > start && end[-1] == ' ')
            end--;
        if (!((end - start == 13 && strncasecmp(start, "charset=utf-8", 13) == 0) ||
              (end - start == 15 && strncasecmp(start, "charset=\"utf-8\"", 15) == 0)))
            return -1;
    }
}

static void fuzz_content_type(const uint8_t *data, size_t size)
{
    char *ct = fuzz_cstr(data, size);
    enum connect_codec got = (enum connect_codec)-1, want = (enum connect_codec)-1;
    struct permitd_error err = { 0 };
    int rc = connect_parse_content_type(ct, &got, &err);

    FUZZ_CHECK(rc == PERMITD_OK || rc == PERMITD_EINVAL);
    FUZZ_CHECK((rc == PERMITD_OK ? 0 : -1) == expect_content_type(ct, &want));
    if (rc == PERMITD_OK)
        FUZZ_CHECK(got == want);
    else
        FUZZ_CHECK(err.code == PERMITD_EINVAL && strstr(err.message, "Content-Type \"") != NULL);
    FUZZ_CHECK(connect_parse_content_type(NULL, &got, NULL) == PERMITD_EINVAL);
    free(ct);
}

static void fuzz_timeout(const uint8_t *data, size_t size)
{
    char *s = fuzz_cstr(data, size);
    struct permitd_error err = { 0 };
    size_t n = strlen(s), digits = 0;
    int64_t ms = -1;
    int rc = connect_parse_timeout(s, &ms, &err);

    while (digits < n && s[digits] >= '0' && s[digits] <= '9')
        digits++;
    if (n >= 1 && n <= 10 && digits == n && strtoll(s, NULL, 10) > 0) {
        FUZZ_CHECK(rc == PERMITD_OK);
        FUZZ_CHECK(ms == strtoll(s, NULL, 10));
        FUZZ_CHECK(ms >= 1 && ms <= 9999999999LL);
    } else {
        FUZZ_CHECK(rc == PERMITD_EINVAL && err.code == PERMITD_EINVAL);
        FUZZ_CHECK(err.message[0] != '\0');
        FUZZ_CHECK(memchr(err.message, '\0', sizeof(err.message)) != NULL);
    }
    free(s);
}

/* zlib's inflate of the gzip members in, one after the other (RFC 1952),
 * into at most cap bytes (out holds cap + 1): 0 and the output, 1 when more
 * than cap came out, -1 when a member is corrupt or truncated or what
 * follows one is not a member. Deliberately the simplest use of zlib, as
 * the reference. */
static int reference_gunzip(const uint8_t *in, size_t inlen, size_t cap,
                            unsigned char *out, size_t *outlen)
{
    z_stream zs;
    size_t got = 0;
    int zr;

    memset(&zs, 0, sizeof(zs));
    FUZZ_CHECK(inflateInit2(&zs, 16 + MAX_WBITS) == Z_OK);
    zs.next_in = (Bytef *)in;
    zs.avail_in = (uInt)inlen;
    for (;;) {
        zs.next_out = out + got;
        zs.avail_out = (uInt)(cap + 1 - got);
        zr = inflate(&zs, Z_FINISH);
        got = (size_t)(zs.next_out - out);
        if (got > cap) {
            inflateEnd(&zs);
            return 1;
        }
        if (zr != Z_STREAM_END || zs.avail_in == 0)
            break;
        inflateReset(&zs);
    }
    *outlen = got;
    inflateEnd(&zs);
    return zr == Z_STREAM_END ? 0 : -1;
}

static void check_gunzip(const uint8_t *in, size_t inlen, size_t max)
{
    struct permitd_error err = { 0 };
    char *out = (char *)&err;    /* must become NULL or a buffer */
    size_t outlen = 12345, reflen = 0;
    unsigned char *ref = malloc(max + 1);
    int rc, want;

    FUZZ_CHECK(ref != NULL);
    rc = connect_gunzip((const char *)in, inlen, max, &out, &outlen, &err);
    want = reference_gunzip(in, inlen, max, ref, &reflen);
    if (rc == PERMITD_OK) {
        FUZZ_CHECK(want == 0);
        FUZZ_CHECK(out != NULL);
        FUZZ_CHECK(outlen <= max);
        FUZZ_CHECK(outlen == reflen);
        FUZZ_CHECK(outlen == 0 || memcmp(out, ref, outlen) == 0);
    } else {
        FUZZ_CHECK(out == NULL && outlen == 0);
        FUZZ_CHECK(err.message[0] != '\0');
        if (rc == PERMITD_EEXHAUSTED)
            FUZZ_CHECK(want == 1);
        else
            FUZZ_CHECK(rc == PERMITD_EINVAL && want == -1);
    }
    free(out);
    free(ref);
}

/* Compresses data with zlib's gzip wrapper; a new buffer (free()). */
static unsigned char *gzip(const uint8_t *data, size_t size, int level, size_t *outlen)
{
    z_stream zs;
    unsigned char *out;
    size_t cap;

    memset(&zs, 0, sizeof(zs));
    FUZZ_CHECK(deflateInit2(&zs, level, Z_DEFLATED, 16 + MAX_WBITS, 8,
                            Z_DEFAULT_STRATEGY) == Z_OK);
    cap = deflateBound(&zs, (uLong)size);
    out = malloc(cap);
    FUZZ_CHECK(out != NULL);
    zs.next_in = (Bytef *)data;
    zs.avail_in = (uInt)size;
    zs.next_out = out;
    zs.avail_out = (uInt)cap;
    FUZZ_CHECK(deflate(&zs, Z_FINISH) == Z_STREAM_END);
    *outlen = zs.total_out;
    deflateEnd(&zs);
    return out;
}

static void fuzz_gzip_round_trip(const uint8_t *data, size_t size, size_t max, int level)
{
    struct permitd_error err = { 0 };
    size_t zlen, outlen = 0;
    unsigned char *z = gzip(data, size, level, &zlen);
    char *out = NULL;
    int rc = connect_gunzip((const char *)z, zlen, max, &out, &outlen, &err);

    if (size <= max) {
        FUZZ_CHECK(rc == PERMITD_OK);
        FUZZ_CHECK(outlen == size);
        FUZZ_CHECK(size == 0 || memcmp(out, data, size) == 0);
    } else {
        FUZZ_CHECK(rc == PERMITD_EEXHAUSTED && out == NULL);
    }
    /* cut short, the stream must be refused, not half-read */
    if (zlen > 1) {
        char *cut = NULL;
        size_t cutlen = 0;
        rc = connect_gunzip((const char *)z, zlen / 2, max, &cut, &cutlen, &err);
        FUZZ_CHECK(rc == PERMITD_EINVAL || rc == PERMITD_EEXHAUSTED);
        FUZZ_CHECK(cut == NULL);
    }
    free(out);
    free(z);
}

static void fuzz_base64_decode(const uint8_t *data, size_t size)
{
    unsigned char *out = malloc(base64_decoded_max(size) + 1);
    long n;

    FUZZ_CHECK(out != NULL);
    n = base64_decode((const char *)data, size, out);
    FUZZ_CHECK(n >= -1);
    if (n >= 0) {
        char *enc;
        unsigned char *back;
        size_t elen;
        long m;

        FUZZ_CHECK((size_t)n <= base64_decoded_max(size));
        /* every byte was from either alphabet, or closing padding */
        for (size_t i = 0; i < size; i++)
            FUZZ_CHECK(isalnum(data[i]) || strchr("+/-_=", data[i]) != NULL);
        enc = malloc(base64_encoded_len((size_t)n) + 1);
        FUZZ_CHECK(enc != NULL);
        elen = base64_encode(out, (size_t)n, enc);
        FUZZ_CHECK(elen == base64_encoded_len((size_t)n) && enc[elen] == '\0');
        back = malloc(base64_decoded_max(elen) + 1);
        FUZZ_CHECK(back != NULL);
        m = base64_decode(enc, elen, back);
        FUZZ_CHECK(m == n);
        FUZZ_CHECK(n == 0 || memcmp(back, out, (size_t)n) == 0);
        /* the same text unpadded decodes the same */
        while (elen > 0 && enc[elen - 1] == '=')
            elen--;
        m = base64_decode(enc, elen, back);
        FUZZ_CHECK(m == n);
        FUZZ_CHECK(n == 0 || memcmp(back, out, (size_t)n) == 0);
        free(back);
        free(enc);
    }
    free(out);
}

static void fuzz_base64_encode(const uint8_t *data, size_t size)
{
    char *enc = malloc(base64_encoded_len(size) + 1);
    unsigned char *back;
    size_t elen;
    long n;

    FUZZ_CHECK(enc != NULL);
    elen = base64_encode(data, size, enc);
    FUZZ_CHECK(elen == base64_encoded_len(size) && strlen(enc) == elen);
    for (size_t i = 0; i < elen; i++)
        FUZZ_CHECK(isalnum((unsigned char)enc[i]) || strchr("+/=", enc[i]) != NULL);
    back = malloc(base64_decoded_max(elen) + 1);
    FUZZ_CHECK(back != NULL);
    n = base64_decode(enc, elen, back);
    FUZZ_CHECK(n == (long)size);
    FUZZ_CHECK(size == 0 || memcmp(back, data, size) == 0);
    /* and in the URL-safe alphabet */
    for (size_t i = 0; i < elen; i++)
        enc[i] = enc[i] == '+' ? '-' : enc[i] == '/' ? '_' : enc[i];
    n = base64_decode(enc, elen, back);
    FUZZ_CHECK(n == (long)size);
    FUZZ_CHECK(size == 0 || memcmp(back, data, size) == 0);
    free(back);
    free(enc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t mode;

    if (size == 0)
        return 0;
    mode = data[0];
    data++;
    size--;
    switch (mode % 6) {
    case 0:
        fuzz_content_type(data, size);
        break;
    case 1:
        fuzz_timeout(data, size);
        break;
    case 2:
        check_gunzip(data, size, limits[(mode / 6) % NLIMITS]);
        break;
    case 3:
        fuzz_gzip_round_trip(data, size, limits[(mode / 6) % NLIMITS], (mode / 30) % 10);
        break;
    case 4:
        fuzz_base64_decode(data, size);
        break;
    case 5:
        fuzz_base64_encode(data, size);
        break;
    }
    return 0;
}
