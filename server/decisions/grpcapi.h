/*
 * grpcapi.h - permit.v1.RateLimitService over gRPC (issue 25): the same
 * five procedures the API listener serves over Connect, for stock gRPC
 * clients (grpc-go, grpc-js, grpcurl), on the listener of transport/grpc.h.
 *
 * A door of the decision service (service.h): every call is handed to it
 * with its `authorization` metadata, as the Connect path hands its
 * Authorization header, and answered from the worker's loop. Acquire answers also carry the RateLimit
 * headers (ratelimit-policy, ratelimit, retry-after) as initial metadata.
 */
#ifndef PERMITD_GRPCAPI_H
#define PERMITD_GRPCAPI_H

#include <protobuf-c/protobuf-c.h>

#include "core/config.h"
#include "transport/grpc.h"

struct grpcapi;
struct service;
struct service_worker;

/* Returns a new gRPC API in *out (free with grpcapi_free()); service must
 * outlive it. */
int grpcapi_new(const struct config *cfg, struct service *service, struct grpcapi **out,
                struct permitd_error *err);
void grpcapi_free(struct grpcapi *g);

/* The listener's worker_open and worker_close: a service worker (limiter
 * queue attached to its loop, hot-key sketches) per worker. */
int grpcapi_worker_open(void *ud, struct loop *loop, void **worker, struct permitd_error *err);
void grpcapi_worker_close(void *ud, void *worker);

/* The grpc_handler_fn; ud is the struct grpcapi. Calls of other services
 * (Envoy's) are handed to the next handler set with grpcapi_chain(). */
void grpcapi_handle(void *ud, struct grpc_call *call);

/* Calls whose path is not permit.v1.RateLimitService's go to fn(ud, call)
 * (NULL: answered unimplemented). Set before the listener starts. */
void grpcapi_chain(struct grpcapi *g, grpc_handler_fn fn, void *ud);

/* The service worker of the worker serving call (for a chained handler). */
struct service_worker *grpcapi_worker(const struct grpc_call *call);

/* Packs msg into the call's reply buffer and answers call with it (or
 * internal, out of memory). msg is only read. */
void grpcapi_reply(struct grpc_call *call, const ProtobufCMessage *msg);

/* An allocator over the call's storage (grpc_call_alloc()), for a request
 * unpacked while the call lasts: its blocks are given back with the call,
 * and its free does nothing (protobuf_c_message_free_unpacked() need not
 * be called). */
ProtobufCAllocator grpcapi_allocator(struct grpc_call *call);

#endif
