/*
 * fuzz_grpc.c - libFuzzer target for the gRPC listener's input path
 * (issue 25): bytes a client sends on one connection, through nghttp2's
 * server session and grpc.c's framing (headers kept, grpc-timeout, the
 * 5-byte length prefix, the message limit, RST_STREAM of calls answered or
 * not), with a handler that decodes every call's message as permit.v1's
 * AcquireRequest, as grpcapi.c does, and answers it, by a reply or an
 * error, at once.
 *
 * The first input byte chooses how the rest is fed (grpc_feed()):
 *   bit 0     1: the client preface and an empty SETTINGS go first, so
 *             the fuzzer starts among frames instead of at the preface
 *   bits 1-2  the message limit: 0, 5, 64 or 65536 bytes
 *   bit 3     answer calls with an error instead of a reply
 * Invariants: a call handed over carries a path that fits and a message no
 * longer than the limit; each is answered once (a second answer or one
 * lost would show as a double free or a leak under ASan/LeakSanitizer).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "permit/v1/ratelimit.pb-c.h"
#include "transport/grpc.h"
#include "fuzz.h"

struct ctx {
    size_t max;
    int fail;
    int calls;
};

static void handler(void *ud, struct grpc_call *call)
{
    struct ctx *c = ud;
    size_t len;
    const void *msg = grpc_call_message(call, &len);
    Permit__V1__AcquireRequest *rq;
    struct permitd_error err;

    c->calls++;
    FUZZ_CHECK(len <= c->max);
    FUZZ_CHECK(strlen(grpc_call_path(call)) < 256);
    rq = permit__v1__acquire_request__unpack(NULL, len, msg);
    if (rq != NULL)
        permit__v1__acquire_request__free_unpacked(rq, NULL);
    if (c->fail || rq == NULL) {
        permitd_error_set(&err, PERMITD_EINVAL, "fuzz: %zu bytes", len);
        grpc_call_fail(call, &err);
    } else {
        grpc_call_header(call, "ratelimit", "\"p\";r=1;t=1", 11);
        grpc_call_reply(call, msg, len);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const size_t limits[] = {0, 5, 64, 65536};
    static const uint8_t preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
                                     "\x00\x00\x00\x04\x00\x00\x00\x00\x00";
    struct grpc_options o = {.max_streams = 8, .name = "grpc"};
    struct ctx c = {0, 0, 0};
    uint8_t *buf;
    size_t n = 0;
    int calls;

    if (size == 0)
        return 0;
    c.max = o.max_message_bytes = limits[(data[0] >> 1) & 3];
    c.fail = (data[0] >> 3) & 1;
    buf = malloc(sizeof(preface) + size);
    FUZZ_CHECK(buf != NULL);
    if (data[0] & 1) {
        memcpy(buf, preface, sizeof(preface) - 1);
        n = sizeof(preface) - 1;
    }
    memcpy(buf + n, data + 1, size - 1);
    n += size - 1;
    calls = grpc_feed(&o, handler, &c, buf, n);
    FUZZ_CHECK(calls == c.calls);
    free(buf);
    return 0;
}
