/*
 * test_connect.c - the Connect pieces that need no socket: content types,
 * timeouts, the code/status table, error bodies, gzip bodies.
 */
#include <stdlib.h>
#include <zlib.h>

#include "transport/connect.h"
#include "test.h"

static void test_connect_content_types(void)
{
    static const char *const bad[] = {
        "application/json; charset=latin1", "application/grpc", "application/protobuf",
        "text/plain", "application/jsonx",
    };
    struct permitd_error err = {0, ""};
    enum connect_codec c;

    CHECK_INT(connect_parse_content_type("application/proto", &c, &err), PERMITD_OK);
    CHECK_INT(c, CONNECT_CODEC_PROTO);
    CHECK_INT(connect_parse_content_type("application/json", &c, &err), PERMITD_OK);
    CHECK_INT(c, CONNECT_CODEC_JSON);
    CHECK_INT(connect_parse_content_type("application/json; charset=utf-8", &c, &err), PERMITD_OK);
    CHECK_INT(connect_parse_content_type("Application/JSON;charset=UTF-8", &c, &err), PERMITD_OK);
    /* A refusal is a status with an error that names the value, as its
     * sibling connect_parse_timeout()'s. */
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err.message[0] = '\0';
        CHECK_INT(connect_parse_content_type(bad[i], &c, &err), PERMITD_EINVAL);
        CHECK_INT(err.code, PERMITD_EINVAL);
        CHECK_CONTAINS(err.message, bad[i]);
        CHECK_CONTAINS(err.message, "use application/proto or application/json");
    }
    CHECK_INT(connect_parse_content_type(NULL, &c, &err), PERMITD_EINVAL);
    CHECK_STR(err.message, "Content-Type \"\" is not supported: use application/proto or "
                           "application/json");
    CHECK_INT(connect_parse_content_type("text/plain", &c, NULL), PERMITD_EINVAL);
}

static void test_connect_timeouts(void)
{
    int64_t ms;
    struct permitd_error err;

    CHECK_INT(connect_parse_timeout("250", &ms, &err), PERMITD_OK);
    CHECK_INT(ms, 250);
    CHECK_INT(connect_parse_timeout("9999999999", &ms, &err), PERMITD_OK);
    CHECK_INT(ms, 9999999999LL);
    CHECK_INT(connect_parse_timeout("12345678901", &ms, &err), PERMITD_EINVAL);
    CHECK_INT(connect_parse_timeout("-1", &ms, &err), PERMITD_EINVAL);
    CHECK_INT(connect_parse_timeout("1.5", &ms, &err), PERMITD_EINVAL);
    CHECK_INT(connect_parse_timeout("", &ms, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "Connect-Timeout-Ms");
    CHECK_INT(connect_parse_timeout("1", &ms, &err), PERMITD_OK);
    CHECK_INT(ms, 1);
    CHECK_INT(connect_parse_timeout("007", &ms, &err), PERMITD_OK);
    CHECK_INT(ms, 7);
}

/* 0 (an expired deadline) and anything but 1-10 digits are refused, with
 * the header and the value named: a caller must not be able to ask for a
 * deadline that has passed before the work starts. */
static void test_connect_timeout_positive(void)
{
    static const char *const bad[] = {"0", "00", "0000000000", "-0", "+5", " 5", "5 ",
                                      "1e3", "0x10", "5ms", "12345678901", " "};
    int64_t ms;
    struct permitd_error err;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char want[48];
        ms = -1;
        CHECK_INT(connect_parse_timeout(bad[i], &ms, &err), PERMITD_EINVAL);
        CHECK_INT(err.code, PERMITD_EINVAL);
        CHECK_INT(ms, -1);
        CHECK_CONTAINS(err.message, "Connect-Timeout-Ms");
        snprintf(want, sizeof(want), "\"%s\"", bad[i]);
        CHECK_CONTAINS(err.message, want);
    }
}

static void test_connect_status_mapping(void)
{
    static const struct { int code; const char *name; int http; } want[] = {
        {PERMITD_ECANCELED, "canceled", 499},
        {PERMITD_EUNKNOWN, "unknown", 500},
        {PERMITD_EINVAL, "invalid_argument", 400},
        {PERMITD_EDEADLINE, "deadline_exceeded", 504},
        {PERMITD_ENOTFOUND, "not_found", 404},
        {PERMITD_EEXIST, "already_exists", 409},
        {PERMITD_EPERM, "permission_denied", 403},
        {PERMITD_EEXHAUSTED, "resource_exhausted", 429},
        {PERMITD_EPRECONDITION, "failed_precondition", 400},
        {PERMITD_EABORTED, "aborted", 409},
        {PERMITD_ERANGE, "out_of_range", 400},
        {PERMITD_EUNIMPLEMENTED, "unimplemented", 501},
        {PERMITD_EINTERNAL, "internal", 500},
        {PERMITD_EUNAVAILABLE, "unavailable", 503},
        {PERMITD_EDATALOSS, "data_loss", 500},
        {PERMITD_EUNAUTHENTICATED, "unauthenticated", 401},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        CHECK_STR(permitd_status_name(want[i].code), want[i].name);
        CHECK_INT(connect_http_status(want[i].code), want[i].http);
    }
    CHECK_INT(connect_http_status(-99), 500);
}

static void test_connect_error_body(void)
{
    struct http_response resp;
    struct permitd_error err;

    memset(&resp, 0, sizeof(resp));
    permitd_error_set(&err, PERMITD_ENOTFOUND, "bucket: no policy named \"a\\b\"");
    connect_error_reply(&resp, &err);
    CHECK_INT(resp.status, 404);
    CHECK_STR(resp.content_type, "application/json");
    CHECK(resp.body != NULL);
    if (resp.body != NULL) {
        char *s = strndup(resp.body, resp.body_len);
        CHECK_STR(s, "{\"code\":\"not_found\",\"message\":\"bucket: no policy named \\\"a\\\\b\\\"\"}");
        free(s);
    }
    if (resp.body_owned)
        free(resp.body);
}

static size_t gzip_bytes(const char *in, size_t n, unsigned char *out, size_t cap)
{
    z_stream zs;

    memset(&zs, 0, sizeof(zs));
    deflateInit2(&zs, 9, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
    zs.next_in = (Bytef *)in;
    zs.avail_in = (uInt)n;
    zs.next_out = out;
    zs.avail_out = (uInt)cap;
    deflate(&zs, Z_FINISH);
    deflateEnd(&zs);
    return zs.total_out;
}

static void test_connect_gunzip(void)
{
    static char big[100000];
    unsigned char gz[4096];
    struct permitd_error err;
    char *out = NULL;
    size_t outlen = 0, n;

    n = gzip_bytes("{\"bucket\":\"api\"}", 16, gz, sizeof(gz));
    CHECK_INT(connect_gunzip((char *)gz, n, 1024, &out, &outlen, &err), PERMITD_OK);
    CHECK_INT(outlen, 16);
    CHECK(out != NULL && memcmp(out, "{\"bucket\":\"api\"}", 16) == 0);
    free(out);

    /* A small bomb: 100 kB of zeros in a few hundred bytes, limit 64 kB. */
    memset(big, '0', sizeof(big));
    n = gzip_bytes(big, sizeof(big), gz, sizeof(gz));
    CHECK(n < 1000);
    CHECK_INT(connect_gunzip((char *)gz, n, 65536, &out, &outlen, &err), PERMITD_EEXHAUSTED);
    CHECK(out == NULL);
    CHECK_CONTAINS(err.message, "65536");
    CHECK_INT(connect_gunzip((char *)gz, n, sizeof(big), &out, &outlen, &err), PERMITD_OK);
    CHECK_INT(outlen, sizeof(big));
    free(out);

    CHECK_INT(connect_gunzip("not gzip at all", 15, 1024, &out, &outlen, &err), PERMITD_EINVAL);
    CHECK_INT(connect_gunzip((char *)gz, n / 2, sizeof(big), &out, &outlen, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "truncated");
}

int main(void)
{
    TEST_RUN(test_connect_content_types);
    TEST_RUN(test_connect_timeouts);
    TEST_RUN(test_connect_timeout_positive);
    TEST_RUN(test_connect_status_mapping);
    TEST_RUN(test_connect_error_body);
    TEST_RUN(test_connect_gunzip);
    return TEST_REPORT();
}
