/*
 * api.h - the API listener: permit.v1.RateLimitService and /healthz.
 *
 * What applications reach. It holds no policy-changing procedure, so an
 * application that can reach this port cannot change a limit.
 */
#ifndef PERMITD_API_H
#define PERMITD_API_H

#include "core/config.h"
#include "transport/http.h"
#include "decisions/limiter.h"
#include "decisions/stats.h"

struct api;

/* Returns a new API in *out (free with api_free()); cfg, limiter and stats
 * (where decisions are counted; may be NULL) must outlive it. */
int api_new(const struct config *cfg, struct limiter *limiter, struct stats *stats,
            struct api **out, struct permitd_error *err);
void api_free(struct api *a);

struct appkeys;

/* Checks every call's API key against keys (decisions/appkeys.h), which
 * must outlive a; call before the listener starts. Without it no key is
 * asked for (unit tests of the translations). */
void api_set_appkeys(struct api *a, struct appkeys *keys);

struct forward;

/* Serves forward-auth (decisions/forward.h) at /v1/forward-auth with
 * forward, which must outlive a; call before the listener starts. */
void api_set_forward(struct api *a, struct forward *forward);

/* Counts a decided Acquire (or batch item) r of policy in s, as every
 * listener does (Connect, gRPC, Envoy's ShouldRateLimit, forward-auth): a
 * failure-mode pass, a shadow policy's would-be denial, an allowed or a
 * denied one. s may be NULL. */
void api_count_decision(struct stats *s, const char *policy, const struct limiter_result *r);

/* The decision queue of the API listener's worker serving req (a request
 * of that listener only): forward-auth decides on it. */
struct limiter_queue *api_worker_queue(const struct http_request *req);
struct hotkeys;

/* Counts every decided take's key in hot (decisions/hotkeys.h), in
 * sketches of each worker's own; call before the listener starts. */
void api_set_hotkeys(struct api *a, struct hotkeys *hot);

/* The API listener's http_options worker_open and worker_close: each
 * worker's decisions go through a limiter queue of its own, attached to
 * the worker's loop, which the handler finds with http_request_worker(). */
int api_worker_open(void *ud, struct loop *loop, void **worker, struct permitd_error *err);
void api_worker_close(void *ud, void *worker);

/* The http_handler_fn of the API listener; ud is the struct api. */
void api_handle(void *ud, const struct http_request *req, struct http_response *resp);

#endif
