/*
 * test_grpc.c - the gRPC listener's pieces that need no socket:
 * grpc-timeout, grpc-message's percent-encoding, and whole requests made
 * by nghttp2's own client and fed to a session (grpc_feed()): which reach
 * the handler, with what, and which are refused by the framing first.
 */
#include <stdlib.h>
#include <string.h>

#include <nghttp2/nghttp2.h>

#include "transport/grpc.h"
#include "test.h"

static void test_grpc_timeouts(void)
{
    struct permitd_error err;
    int64_t us;

    CHECK_INT(grpc_parse_timeout("250m", &us, &err), PERMITD_OK);
    CHECK_INT(us, 250000);
    CHECK_INT(grpc_parse_timeout("1S", &us, &err), PERMITD_OK);
    CHECK_INT(us, 1000000);
    CHECK_INT(grpc_parse_timeout("2M", &us, &err), PERMITD_OK);
    CHECK_INT(us, 120000000);
    CHECK_INT(grpc_parse_timeout("99999999H", &us, &err), PERMITD_OK);
    CHECK(us == 99999999LL * 3600 * 1000000);
    CHECK_INT(grpc_parse_timeout("7u", &us, &err), PERMITD_OK);
    CHECK_INT(us, 7);
    CHECK_INT(grpc_parse_timeout("1n", &us, &err), PERMITD_OK);
    CHECK_INT(us, 1);           /* rounded up, never to 0 */
    CHECK_INT(grpc_parse_timeout("100000000S", &us, &err), PERMITD_EINVAL);  /* 9 digits */
    CHECK_CONTAINS(err.message, "\"100000000S\"");
    CHECK_INT(grpc_parse_timeout("10", &us, &err), PERMITD_EINVAL);
    CHECK_INT(grpc_parse_timeout("m", &us, &err), PERMITD_EINVAL);
    CHECK_INT(grpc_parse_timeout("-1S", &us, &err), PERMITD_EINVAL);
    CHECK_INT(grpc_parse_timeout("1s", &us, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "grpc-timeout");
}

static void test_grpc_percent_encode(void)
{
    char out[64];

    CHECK_INT(grpc_percent_encode("plain text", out, sizeof(out)), 10);
    CHECK_STR(out, "plain text");
    grpc_percent_encode("100% \"ok\"\n\xc3\xa9", out, sizeof(out));
    CHECK_STR(out, "100%25 \"ok\"%0A%C3%A9");
    /* Cut at a whole escape, never inside one. */
    CHECK_INT(grpc_percent_encode("ab\n", out, 5), 2);
    CHECK_STR(out, "ab");
}

/* ---- whole requests, made by nghttp2's client ---- */

struct wire {
    uint8_t buf[65536];
    size_t len;
};

struct body {
    const uint8_t *data;
    size_t len, off;
};

static ssize_t read_body(nghttp2_session *session, int32_t stream_id, uint8_t *buf,
                         size_t length, uint32_t *data_flags, nghttp2_data_source *source,
                         void *user_data)
{
    struct body *b = source->ptr;
    size_t n = b->len - b->off;

    (void)session;
    (void)stream_id;
    (void)user_data;
    if (n > length)
        n = length;
    if (n > 0)
        memcpy(buf, b->data + b->off, n);
    b->off += n;
    if (b->off == b->len)
        *data_flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

/* The bytes a client sends for one call of path carrying body as it is
 * (prefix included), with the given content type and grpc-timeout (NULL:
 * none). */
static void client_bytes(struct wire *w, const char *path, const char *ctype,
                         const char *timeout, const uint8_t *data, size_t len)
{
    nghttp2_session_callbacks *cb;
    nghttp2_session *s;
    struct body b = {data, len, 0};
    nghttp2_data_provider prd = {.source.ptr = &b, .read_callback = read_body};
    nghttp2_nv nv[6];
    size_t n = 0;
    const uint8_t *out;
    ssize_t m;

#define H(k, v) nv[n++] = (nghttp2_nv){(uint8_t *)(k), (uint8_t *)(v), strlen(k), strlen(v), 0}
    H(":method", "POST");
    H(":scheme", "http");
    H(":authority", "permitd");
    H(":path", path);
    H("content-type", ctype);
    if (timeout != NULL)
        H("grpc-timeout", timeout);
#undef H
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_client_new(&s, cb, NULL);
    nghttp2_submit_settings(s, NGHTTP2_FLAG_NONE, NULL, 0);
    nghttp2_submit_request(s, NULL, nv, n, &prd, NULL);
    w->len = 0;                 /* the client session sends the preface itself */
    while ((m = nghttp2_session_mem_send(s, &out)) > 0 && w->len + (size_t)m <= sizeof(w->buf)) {
        memcpy(w->buf + w->len, out, (size_t)m);
        w->len += (size_t)m;
    }
    nghttp2_session_del(s);
    nghttp2_session_callbacks_del(cb);
}

struct seen {
    char path[128];
    uint8_t msg[64];
    size_t len;
    int64_t deadline_us;
};

static void handler(void *ud, struct grpc_call *call)
{
    struct seen *seen = ud;
    const void *m = grpc_call_message(call, &seen->len);

    snprintf(seen->path, sizeof(seen->path), "%s", grpc_call_path(call));
    if (seen->len <= sizeof(seen->msg))
        memcpy(seen->msg, m, seen->len);
    seen->deadline_us = grpc_call_deadline_us(call);
    grpc_call_reply(call, "ok", 2);
}

static int feed(const uint8_t *msg, size_t len, const char *ctype, const char *timeout,
                struct seen *seen)
{
    struct grpc_options o = {.max_streams = 16, .max_message_bytes = 32, .name = "grpc"};
    struct wire *w = calloc(1, sizeof(*w));
    int calls;

    client_bytes(w, "/permit.v1.RateLimitService/Peek", ctype, timeout, msg, len);
    memset(seen, 0, sizeof(*seen));
    calls = grpc_feed(&o, handler, seen, w->buf, w->len);
    free(w);
    return calls;
}

static void test_grpc_framing(void)
{
    static const uint8_t good[] = {0, 0, 0, 0, 3, 'a', 'b', 'c'};
    static const uint8_t empty[] = {0, 0, 0, 0, 0};
    static const uint8_t long_prefix[] = {0, 0, 0, 0, 9, 'a', 'b', 'c'};
    static const uint8_t short_prefix[] = {0, 0, 0, 0, 1, 'a', 'b', 'c'};
    static const uint8_t cut[] = {0, 0, 0};
    static const uint8_t compressed[] = {1, 0, 0, 0, 3, 'a', 'b', 'c'};
    static const uint8_t flag[] = {2, 0, 0, 0, 3, 'a', 'b', 'c'};
    static const uint8_t over[] = {0, 0, 0, 0, 33};
    struct seen seen;

    CHECK_INT(feed(good, sizeof(good), "application/grpc", NULL, &seen), 1);
    CHECK_STR(seen.path, "/permit.v1.RateLimitService/Peek");
    CHECK_INT(seen.len, 3);
    CHECK(memcmp(seen.msg, "abc", 3) == 0);
    CHECK(seen.deadline_us == INT64_MAX);
    CHECK_INT(feed(good, sizeof(good), "application/grpc+proto", "5S", &seen), 1);
    CHECK(seen.deadline_us != INT64_MAX);
    CHECK_INT(feed(empty, sizeof(empty), "application/grpc", NULL, &seen), 1);
    CHECK_INT(seen.len, 0);
    /* Refused by the framing: never reach the handler. */
    CHECK_INT(feed(long_prefix, sizeof(long_prefix), "application/grpc", NULL, &seen), 0);
    CHECK_INT(feed(short_prefix, sizeof(short_prefix), "application/grpc", NULL, &seen), 0);
    CHECK_INT(feed(cut, sizeof(cut), "application/grpc", NULL, &seen), 0);
    CHECK_INT(feed(NULL, 0, "application/grpc", NULL, &seen), 0);
    CHECK_INT(feed(compressed, sizeof(compressed), "application/grpc", NULL, &seen), 0);
    CHECK_INT(feed(flag, sizeof(flag), "application/grpc", NULL, &seen), 0);
    CHECK_INT(feed(over, sizeof(over), "application/grpc", NULL, &seen), 0);
    CHECK_INT(feed(good, sizeof(good), "application/json", NULL, &seen), 0);
    CHECK_INT(feed(good, sizeof(good), "application/grpc", "5x", &seen), 0);
    CHECK_INT(feed(good, sizeof(good), "application/grpc", "0m", &seen), 0);  /* passed */
}

int main(void)
{
    TEST_RUN(test_grpc_timeouts);
    TEST_RUN(test_grpc_percent_encode);
    TEST_RUN(test_grpc_framing);
    return TEST_REPORT();
}
