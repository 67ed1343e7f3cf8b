/*
 * forward.h - forward-auth on the API listener (issue 25): GET (or any
 * method) /v1/forward-auth, the sub-request a gateway makes before it
 * passes a request on: nginx auth_request, Traefik ForwardAuth, Caddy
 * forward_auth, Envoy ext_authz in HTTP mode.
 *
 * The original request is read from the headers each gateway sends
 * (X-Original-Method / X-Original-URI from nginx's config,
 * X-Forwarded-Method / -Uri / -Host from Traefik and Caddy, the request's
 * own method and the path after /v1/forward-auth from Envoy); every
 * gateway rule (stores/gateway_rules.h) that matches it names a policy, a
 * key and permits, and all of them must allow. The answer is 200 (allowed,
 * or no rule matched) or 429 (denied; 403 when the gateway asks for it
 * with Permitd-Deny-Status: 403, for nginx, whose auth_request passes on
 * only 401 and 403) with Retry-After and the RateLimit headers, and an
 * empty body. An error (the policy's failure_mode closed while Redis is
 * down, a rule naming no policy, ...) answers 5xx with a Connect error
 * body: a gateway fails the request, or lets it through when configured
 * so (README "Gateways").
 *
 * The rules live in memory (struct forward_rules): replaced whole by the
 * sync (control/gatewaysync.c) and read under a lock by every request;
 * MySQL is never asked on the request path.
 */
#ifndef PERMITD_FORWARD_H
#define PERMITD_FORWARD_H

#include <stddef.h>
#include <stdint.h>

#include "core/cidr.h"
#include "core/config.h"
#include "decisions/appkeys.h"
#include "decisions/limiter.h"
#include "decisions/stats.h"
#include "stores/gateway_rules.h"
#include "transport/http.h"

#define FORWARD_PATH "/v1/forward-auth"
#define FORWARD_MATCH_MAX 16            /* rules one request may match (the first ones) */

struct forward_rules;

/* Returns a new, empty rule table in *out (free with
 * forward_rules_free()). */
int forward_rules_new(struct forward_rules **out, struct permitd_error *err);
void forward_rules_free(struct forward_rules *t);

/* Replaces every rule of t with copies of v[0..n) (in their order:
 * position, then id). Thread-safe. */
int forward_rules_replace(struct forward_rules *t, const struct gateway_rule *v, size_t n,
                          struct permitd_error *err);

/* Rules in t now. Thread-safe. */
size_t forward_rules_count(struct forward_rules *t);

/* The original request as forward-auth understands it. */
struct forward_original {
    char method[GATEWAY_METHOD_MAX + 1];
    char host[GATEWAY_HOST_MAX + 1];        /* lowercase, port dropped */
    char path[2048];                        /* the query and fragment dropped */
};

/* What a matching rule asks. */
struct forward_match {
    char policy[GATEWAY_NAME_MAX + 1];
    enum gateway_key_source key_source;
    char key_header[GATEWAY_HEADER_MAX + 1];
    int64_t permits;
};

/* The rules of t matching o, in order, into out (at most max); returns how
 * many. A rule matches when its host is "" or o->host, o->path starts with
 * its path_prefix, and its method is "" or o->method. Thread-safe. */
size_t forward_rules_match(struct forward_rules *t, const struct forward_original *o,
                           struct forward_match *out, size_t max);

/* Fills o from a gateway's headers (each may be NULL): method from
 * x_original_method, else x_forwarded_method, else own_method; the URI
 * from x_original_uri, else x_forwarded_uri, else own_path's part after
 * FORWARD_PATH ("/" when nothing follows); the host from
 * x_forwarded_host (its first item), else host. */
void forward_original_parse(struct forward_original *o, const char *own_method,
                            const char *own_path, const char *x_original_method,
                            const char *x_forwarded_method, const char *x_original_uri,
                            const char *x_forwarded_uri, const char *x_forwarded_host,
                            const char *host);

/* The client's address into out (len bytes): peer (the connection's) when
 * peer is not in trusted; otherwise the right-most address of
 * x_forwarded_for that is not in trusted (the left-most when all are),
 * else x_real_ip when it is an address, else peer. Only addresses the
 * trusted proxies wrote are believed: whatever a client put in front of
 * them is left of the first untrusted hop and never read. */
void forward_client_address(const struct cidr_list *trusted, const char *peer,
                            const char *x_forwarded_for, const char *x_real_ip, char *out,
                            size_t len);

struct forward;

/* Returns a new endpoint in *out (free with forward_free()). rules,
 * limiter, keys (NULL: no key checked, as --app-auth off) and stats (may
 * be NULL) must outlive it. */
int forward_new(const struct config *cfg, struct forward_rules *rules, struct limiter *limiter,
                struct appkeys *keys, struct stats *stats, struct forward **out,
                struct permitd_error *err);
void forward_free(struct forward *f);

/* 1 when path is FORWARD_PATH or below it. */
int forward_path(const char *path);

/* Answers a forward-auth request (on the API listener's worker: the
 * worker's limiter queue is api_worker_queue(req)); deferred while
 * Redis decides. */
void forward_handle(struct forward *f, const struct http_request *req,
                    struct http_response *resp);

#endif
