/*
 * grpcapi.h - permit.v1.RateLimitService over gRPC (issue 25): the same
 * five procedures the API listener serves over Connect, for stock gRPC
 * clients (grpc-go, grpc-js, grpcurl), on the listener of transport/grpc.h.
 *
 * Every call is checked as on the Connect path: the API key from the
 * `authorization` metadata (decisions/appkeys.h), the request by
 * limiter_check(); the decision is queued on the worker's limiter queue and
 * answered from the worker's loop. Acquire answers also carry the RateLimit
 * headers (ratelimit-policy, ratelimit, retry-after) as initial metadata.
 */
#ifndef PERMITD_GRPCAPI_H
#define PERMITD_GRPCAPI_H

#include <protobuf-c/protobuf-c.h>

#include "core/config.h"
#include "transport/grpc.h"
#include "decisions/limiter.h"
#include "decisions/stats.h"

struct grpcapi;
struct appkeys;

/* Returns a new gRPC API in *out (free with grpcapi_free()); limiter, stats
 * (may be NULL) and keys (NULL: no key asked for) must outlive it. */
int grpcapi_new(const struct config *cfg, struct limiter *limiter, struct stats *stats,
                struct appkeys *keys, struct grpcapi **out, struct permitd_error *err);
void grpcapi_free(struct grpcapi *g);

/* The listener's worker_open and worker_close: a limiter queue per worker,
 * attached to its loop. */
int grpcapi_worker_open(void *ud, struct loop *loop, void **worker, struct permitd_error *err);
void grpcapi_worker_close(void *ud, void *worker);

/* The grpc_handler_fn; ud is the struct grpcapi. Calls of other services
 * (Envoy's) are handed to the next handler set with grpcapi_chain(). */
void grpcapi_handle(void *ud, struct grpc_call *call);

/* Calls whose path is not permit.v1.RateLimitService's go to fn(ud, call)
 * (NULL: answered unimplemented). Set before the listener starts. */
void grpcapi_chain(struct grpcapi *g, grpc_handler_fn fn, void *ud);

/* The limiter queue of the worker serving call (for a chained handler). */
struct limiter_queue *grpcapi_queue(const struct grpc_call *call);

/* Checks call's API key (its authorization metadata) for app ("" = the
 * key's): the app to decide for lands in app_out (POLICY_NAME_MAX + 1
 * bytes; "" when keys are not checked). PERMITD_OK or the refusal. */
int grpcapi_authorize(struct grpcapi *g, const struct grpc_call *call, const char *app,
                      char *app_out, struct permitd_error *err);

/* Packs msg into the call's reply buffer and answers call with it (or
 * internal, out of memory). msg is only read. */
void grpcapi_reply(struct grpc_call *call, const ProtobufCMessage *msg);

/* An allocator over the call's storage (grpc_call_alloc()), for a request
 * unpacked while the call lasts: its blocks are given back with the call,
 * and its free does nothing (protobuf_c_message_free_unpacked() need not
 * be called). */
ProtobufCAllocator grpcapi_allocator(struct grpc_call *call);

#endif
