/*
 * forward.h - forward-auth on the API listener (issue 25): GET (or any
 * method) /v1/forward-auth, the sub-request a gateway makes before it
 * passes a request on: nginx auth_request, Traefik ForwardAuth, Caddy
 * forward_auth, Envoy ext_authz in HTTP mode.
 *
 * Which headers describe the original request is the gateway's choice,
 * made in its config by the path it calls, never the client's: a gateway
 * such as Caddy or Traefik passes the client's own headers on, so a header
 * another style reads could be the client's invention. Each style reads
 * its own and ignores the others' (forward_style_of()):
 *   /v1/forward-auth/nginx      X-Original-Method, X-Original-URI (set in
 *                               nginx's config), X-Forwarded-Host, else Host
 *   /v1/forward-auth/forwarded  X-Forwarded-Method, -Uri, -Host (Traefik,
 *                               Caddy), else Host
 *   /v1/forward-auth/envoy/<p>  the request's own method, <p>, Host (Envoy
 *                               ext_authz, path_prefix /v1/forward-auth/envoy)
 * The path is matched in its normal form (core/urlpath.h). Every rule
 * (stores/gateway_rules.h) that matches names a policy, a key and
 * permits, and all of them must allow. The answer is 200 (allowed, or no
 * rule matched), or a denial with Retry-After and the RateLimit headers
 * and an empty body: 403 for the nginx style (auth_request passes on only
 * 401 and 403; the config maps it to 429), 429 for the others. No request
 * header shapes the answer. An error (the policy's failure_mode closed
 * while Redis is down, a rule naming no policy, the style's header
 * missing, ...) answers 5xx with a Connect error body: a gateway fails the
 * request, or lets it through when configured so (README "Gateways").
 *
 * The bare /v1/forward-auth (and any other path under it) is the style of
 * configs written before the styles: every style's reading is taken and a
 * rule matching any of them applies, so a header the client adds can only
 * add rules, never take the gateway's reading away; denials answer 403,
 * which every gateway treats as a refusal.
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
#include "stores/gateway_rules.h"
#include "transport/http.h"

struct service_worker;

#define FORWARD_PATH "/v1/forward-auth"
#define FORWARD_MATCH_MAX 16            /* rules one request may match (the first ones) */

struct forward_rules;

/* Returns a new, empty rule table in *out (free with
 * forward_rules_free()). */
int forward_rules_new(struct forward_rules **out, struct permitd_error *err);
void forward_rules_free(struct forward_rules *t);

/* Replaces every rule of t with copies of v[0..n) (in their order:
 * position, then id), their path prefixes normalised as request paths
 * are. Thread-safe. */
int forward_rules_replace(struct forward_rules *t, const struct gateway_rule *v, size_t n,
                          struct permitd_error *err);

/* Rules in t now. Thread-safe. */
size_t forward_rules_count(struct forward_rules *t);

/* The original request as forward-auth understands it. */
struct forward_original {
    char method[GATEWAY_METHOD_MAX + 1];
    char host[GATEWAY_HOST_MAX + 1];        /* lowercase, port dropped */
    char path[2048];                        /* normalised (core/urlpath.h), no query */
};

/* What a matching rule asks. */
struct forward_match {
    char policy[GATEWAY_NAME_MAX + 1];
    enum gateway_key_source key_source;
    char key_header[GATEWAY_HEADER_MAX + 1];
    int hash_key;
    int64_t permits;
};

/* The rules of t matching any of o[0..no), in order, into out (at most
 * max); returns how many. A rule matches a reading when its host is "" or
 * o->host, o->path starts with its path_prefix (normalised when the rules
 * were replaced, as o->path is), and its method is "" or o->method.
 * Thread-safe. */
size_t forward_rules_match(struct forward_rules *t, const struct forward_original *o, size_t no,
                           struct forward_match *out, size_t max);

/* How a gateway describes the original request (see the top). */
enum forward_style {
    FORWARD_STYLE_ANY,          /* the bare path: every reading */
    FORWARD_STYLE_NGINX,
    FORWARD_STYLE_FORWARDED,
    FORWARD_STYLE_ENVOY,
};

/* The style path (a forward_path()) names; *tail (may be NULL) is set to
 * what follows the style's part (Envoy's original path; for
 * FORWARD_STYLE_ANY what follows FORWARD_PATH). */
enum forward_style forward_style_of(const char *path, const char **tail);

/* The request headers a style may read (each may be NULL). */
struct forward_headers {
    const char *own_method;         /* the forward-auth request's own */
    const char *own_path;
    const char *x_original_method, *x_original_uri;
    const char *x_forwarded_method, *x_forwarded_uri, *x_forwarded_host;
    const char *host;
};

#define FORWARD_READINGS_MAX 3

/* The original request as style reads it from h, into o[0..n) (at most
 * FORWARD_READINGS_MAX; one for every style but FORWARD_STYLE_ANY, which
 * gives one per style whose headers are there, Envoy's always); returns
 * n, or PERMITD_EINVAL (-) with err naming the header the style needs and
 * does not find (X-Original-URI, X-Forwarded-Uri). The method in
 * capitals; the path normalised (urlpath_normalise()); the host the first
 * item of X-Forwarded-Host (nginx, forwarded) or else Host, lowercase,
 * without its port. */
int forward_original_parse(struct forward_original *o, enum forward_style style,
                           const struct forward_headers *h, struct permitd_error *err);

/* The client's address into out (len bytes): peer (the connection's) when
 * peer is not in trusted; otherwise the right-most address of
 * x_forwarded_for (every line of the header, joined with ",":
 * http_request_header_all()) that is not in trusted (the left-most when all are),
 * else x_real_ip when it is an address, else peer. Only addresses the
 * trusted proxies wrote are believed: whatever a client put in front of
 * them is left of the first untrusted hop and never read. */
void forward_client_address(const struct cidr_list *trusted, const char *peer,
                            const char *x_forwarded_for, const char *x_real_ip, char *out,
                            size_t len);

struct forward;

struct service;

/* Returns a new endpoint in *out (free with forward_free()). rules and
 * service (the decision service: the gateway's key, validation, the
 * limiter, the counting) must outlive it. */
int forward_new(const struct config *cfg, struct forward_rules *rules, struct service *service,
                struct forward **out, struct permitd_error *err);
void forward_free(struct forward *f);

/* 1 when path is FORWARD_PATH or below it. */
int forward_path(const char *path);

/* Answers a forward-auth request on the API listener's worker, whose
 * decision service is sw (the listener's door, api.c, hands it in);
 * deferred while Redis decides. */
void forward_handle(struct forward *f, struct service_worker *sw, const struct http_request *req,
                    struct http_response *resp);

#endif
