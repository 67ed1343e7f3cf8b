/*
 * health.h - /readyz and /metrics, served by the admin listener.
 */
#ifndef PERMITD_HEALTH_H
#define PERMITD_HEALTH_H

#include "transport/grpc.h"
#include "transport/http.h"
#include "decisions/limiter.h"
#include "stores/redis.h"
#include "decisions/stats.h"
#include "control/sync.h"
#include "control/verifier.h"
#include "decisions/appkeys.h"

struct fleet;
struct envoysvc;
struct service;
struct traffic;
struct trafficlog;

/* What the reports read; the pointers are owned elsewhere (main.c).
 * sync is NULL without a policy store; listeners may be NULL. */
struct health {
    struct redis *redis;
    struct limiter *limiter;
    struct sync *sync;
    struct stats *stats;
    struct http_server *listeners[2];   /* api, admin */
    struct grpc_server *grpc;           /* the gRPC listener; NULL: none */
    struct verifier *verifier;          /* admin login password checks; may be NULL */
    struct appkeys *appkeys;            /* the API key table; NULL: not reported */
    struct fleet *fleet;                /* the fleet publisher; NULL: not reported */
    struct gatewaysync *gwsync;         /* gateway rules' load; NULL: not reported */
    struct envoysvc *envoysvc;          /* Envoy descriptors' load; NULL: not reported */
    struct traffic *traffic;            /* the traffic history's counts; NULL: not reported */
    struct trafficlog *trafficlog;      /* its writer (issue 39); NULL: not reported */
    struct service *service;            /* its reservations pool; NULL: not reported */
    struct follow *follow;              /* the change-notice listener; NULL: not reported */
};

/* 200 "redis: ok\nmysql sync: ok, ..." or 503 with what is wrong. */
void health_readyz(const struct health *h, struct http_response *resp);

/* Prometheus text format. Labels are bounded: policies (at most the ones
 * stats.c tracks) and fixed words; request keys never become labels. */
void health_metrics(const struct health *h, struct http_response *resp);

#endif
