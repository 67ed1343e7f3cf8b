/*
 * test_framing.c - server/transport/framing.c: request framing read from
 * raw bytes, whole and split at every byte (a client chooses where its
 * segments end), with the status each refusal gets and where the requests
 * before it end.
 */
#include <stdint.h>
#include <string.h>

#include "transport/framing.h"
#include "test.h"

static const struct framing_limits LIM = {256, 1000};

/* Reads s in pieces of `step` bytes (0: whole). Returns the status of the
 * refusal, 0 when none; *requests the requests read to their end; *kept
 * the bytes before the failing request, counted over the whole stream. */
static int run(const char *s, size_t step, uint32_t *requests, size_t *kept)
{
    struct framing f;
    struct permitd_error err;
    size_t n = strlen(s), at = 0, keep;
    int status = 0;

    framing_init(&f);
    *kept = 0;
    while (at < n) {
        size_t len = step == 0 || n - at < step ? n - at : step;
        if (framing_read(&f, &LIM, s + at, len, &keep, &status, &err) != PERMITD_OK) {
            *kept = at + keep;
            break;
        }
        at += len;
    }
    *requests = f.requests;
    return at < n ? status : 0;
}

/* The same answer whole and split at every size from 1 byte up. */
static void expect(const char *s, int status, uint32_t requests)
{
    for (size_t step = 0; step < 40; step++) {
        uint32_t got;
        size_t kept;
        int st = run(s, step, &got, &kept);
        if (st != status || got != requests)
            fprintf(stderr, "step %zu: %s -> status %d, %u requests\n", step, s, st, got);
        CHECK_INT(st, status);
        CHECK_INT(got, requests);
    }
}

#define POST "POST /x HTTP/1.1\r\nHost: h\r\n"
#define GET "GET /healthz HTTP/1.1\r\nHost: h\r\n\r\n"

static void test_framing_good_requests(void)
{
    expect(GET GET, 0, 2);
    expect("GET / HTTP/1.0\n\n", 0, 1);                     /* bare LF */
    expect("\r\n" GET, 0, 1);                               /* an empty line first */
    expect(POST "Content-Length: 2\r\n\r\n{}" GET, 0, 2);
    expect(POST "content-length:  0 \r\n\r\n" GET, 0, 2);
    expect(POST "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n" GET, 0, 2);
    expect(POST "Transfer-Encoding: Chunked\r\n\r\n2;ext=1\r\n{}\r\n0\r\nX-T: 1\r\n\r\n", 0, 1);
    expect(POST "Content-Length: 1000\r\n\r\n", 0, 0);       /* body still to come */
}

static void test_framing_refusals(void)
{
    expect(POST "Content-Length: abc\r\n\r\n", 400, 0);
    expect(POST "Content-Length: -5\r\n\r\n", 400, 0);
    expect(POST "Content-Length: 2 2\r\n\r\n", 400, 0);
    expect(POST "Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}", 400, 0);
    expect(POST "Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n", 400, 0);
    expect(POST "Content-Length: 1001\r\n\r\n", 429, 0);
    expect(POST "Content-Length: 9223372036854775808\r\n\r\n", 429, 0);
    expect(POST "Content-Length: 99999999999999999999999\r\n\r\n", 429, 0);
    expect(POST "Transfer-Encoding: gzip\r\n\r\n", 501, 0);
    expect(POST "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 501, 0);
    expect(POST "Transfer-Encoding: chunked\r\n\r\nzz\r\n", 400, 0);
    expect(POST "Transfer-Encoding: chunked\r\n\r\n2\r\n{}}\r\n", 400, 0);
    expect(POST "Transfer-Encoding: chunked\r\n\r\n3e9\r\n", 429, 0);          /* 1001 */
    expect(POST "Transfer-Encoding: chunked\r\n\r\n1f4\r\n", 0, 0);            /* 500: fine */
    expect(POST "X-Long: "
                "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
           431, 0);
    /* A value's bytes taken in one step stop where one by one would. */
    expect(POST "X-A: a\x7f\r\n\r\n", 400, 0);
    expect(POST "X-A: a\tb \xc3\xa9\r\nContent-Length: 2\r\n\r\n{}", 0, 1);
    expect(POST "X-A: a\rb\r\n\r\n", 400, 0);
    expect(POST "Content-Length: 00000000000000000000000000000000000000000000002\r\n\r\n{}",
           0, 1);
    /* The head at its limit (256 bytes: the request line and the header
     * line, line ends not counted) is read; one byte more is not. */
    expect("GET / HTTP/1.1\r\nX-Pad: "
           "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
           "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
           "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n", 0, 1);
    expect("GET / HTTP/1.1\r\nX-Pad: "
           "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
           "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
           "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n",
           431, 0);
    expect(POST "NoColon\r\n\r\n", 400, 0);
    expect(POST "Bad : x\r\n\r\n", 400, 0);
    expect(POST " folded\r\n\r\n", 400, 0);
    expect("GET / HTTP/1.1\rHost: h\r\n\r\n", 400, 0);
    expect("GARBAGE\r\n\r\n", 400, 0);
    expect(POST ": x\r\n\r\n", 400, 0);
    expect(POST "X-A: a\x01b\r\n\r\n", 400, 0);
    expect("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, 0);
    expect("GET / HTTP/2.0\r\n\r\n", 505, 0);
    expect(GET "GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n", 400, 1);
}

/* A refusal names where the requests before the failing one end. */
static void test_framing_keeps_the_requests_before(void)
{
    uint32_t requests;
    size_t kept;

    CHECK_INT(run(GET GET "BAD\r\n\r\n", 0, &requests, &kept), 400);
    CHECK_INT(kept, 2 * strlen(GET));
    CHECK_INT(requests, 2);
}

int main(void)
{
    TEST_RUN(test_framing_good_requests);
    TEST_RUN(test_framing_refusals);
    TEST_RUN(test_framing_keeps_the_requests_before);
    return TEST_REPORT();
}
