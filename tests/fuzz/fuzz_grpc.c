/*
 * fuzz_grpc.c - libFuzzer target for the gRPC listener's input path
 * (issue 25): bytes a client sends on one connection, through nghttp2's
 * server session and grpc.c's framing (headers kept, grpc-timeout, the
 * 5-byte length prefix, the message limit, RST_STREAM of calls answered or
 * not), with a handler that decodes every call's message as permit.v1's
 * AcquireRequest into the call's storage, as grpcapi.c does, and answers
 * it, by a reply (the message, or it packed again into the call's reply
 * buffer) or an error, at once.
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

/* The decoded message in the call's storage, as grpcapi.c's allocator
 * puts it (grpc_call_alloc(): a call record reused, its arena and what
 * overflows to malloc). */
static void *call_alloc(void *call, size_t n)
{
    return grpc_call_alloc(call, n);
}

static void call_free(void *call, void *p)
{
    (void)call;
    (void)p;
}

static void handler(void *ud, struct grpc_call *call)
{
    struct ctx *c = ud;
    size_t len;
    const void *msg = grpc_call_message(call, &len);
    ProtobufCAllocator al = {call_alloc, call_free, call};
    Permit__V1__AcquireRequest *rq;
    struct permitd_error err;
    uint8_t *room;

    c->calls++;
    FUZZ_CHECK(len <= c->max);
    FUZZ_CHECK(strlen(grpc_call_path(call)) < 256);
    rq = permit__v1__acquire_request__unpack(&al, len, msg);
    if (c->fail || rq == NULL) {
        permitd_error_set(&err, PERMITD_EINVAL, "fuzz: %zu bytes", len);
        grpc_call_fail(call, &err);
    } else if (len % 2 == 0) {
        /* Packed again into the call's reply buffer, as grpcapi_reply() does. */
        size_t n = permit__v1__acquire_request__get_packed_size(rq);
        FUZZ_CHECK((room = grpc_call_reply_space(call, n)) != NULL);
        permit__v1__acquire_request__pack(rq, room);
        grpc_call_header(call, "ratelimit", "\"p\";r=1;t=1", 11);
        grpc_call_reply(call, room, n);
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
