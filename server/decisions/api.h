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

struct api;
struct service;
struct service_worker;

/* Returns a new API in *out (free with api_free()); cfg and service (the
 * decision service every procedure goes through) must outlive it. */
int api_new(const struct config *cfg, struct service *service, struct api **out,
            struct permitd_error *err);
void api_free(struct api *a);

struct forward;

/* Serves forward-auth (decisions/forward.h) at /v1/forward-auth with
 * forward, which must outlive a; call before the listener starts. */
void api_set_forward(struct api *a, struct forward *forward);

/* The decision service's part of the API listener's worker serving req
 * (a request of that listener only): forward-auth decides on it. */
struct service_worker *api_worker(const struct http_request *req);

/* The API listener's http_options worker_open and worker_close: each
 * worker's decisions go through a service worker of its own (its limiter
 * queue attached to the worker's loop, its hot-key sketches), which the
 * handler finds with http_request_worker(). */
int api_worker_open(void *ud, struct loop *loop, void **worker, struct permitd_error *err);
void api_worker_close(void *ud, void *worker);

/* The http_handler_fn of the API listener; ud is the struct api. */
void api_handle(void *ud, const struct http_request *req, struct http_response *resp);

#endif
