/*
 * forward.c - forward-auth: a gateway's sub-request decided by the rules
 * that match its original request (see forward.h).
 *
 * The request path holds no lock but the rule table's read lock while it
 * matches, copies what the matching rules ask, and queues the decision on
 * the worker's limiter queue like an Acquire (one rule) or an AcquireBatch
 * (several). Several rules are first asked all_or_nothing, so that a
 * request one rule denies takes nothing from the others; when their
 * buckets cannot be decided in one script (different Redis Cluster slots
 * or algorithms: the limiter says so before Redis is asked) they are asked
 * each on its own, and a rule that allowed keeps what it took although
 * another denied. README "Gateways" says so.
 *
 * A door of the decision service (service.h): the gateway's key, the
 * validation, the limiter and the counting are the service's, as for
 * every door; what is this file's is reading the original request,
 * matching the rules and the answer the gateway acts on.
 *
 * No byte a client sends turns a rule into an error or away from its
 * request: the original request is read only in the style the gateway's
 * config names (forward_style_of()), in its path's normal form
 * (core/urlpath.h), and a key the key rules would refuse is limited by
 * its hash (decisions/bucketkey.h).
 */
#include <ctype.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/urlpath.h"
#include "decisions/bucketkey.h"
#include "decisions/answer.h"
#include "decisions/forward.h"
#include "decisions/service.h"
#include "stores/policy.h"
#include "transport/connect.h"

struct forward_rules {
    pthread_rwlock_t lock;
    struct gateway_rule *v;
    size_t n;
};

int forward_rules_new(struct forward_rules **out, struct permitd_error *err)
{
    struct forward_rules *t = calloc(1, sizeof(*t));

    *out = NULL;
    if (t == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    pthread_rwlock_init(&t->lock, NULL);
    *out = t;
    return PERMITD_OK;
}

void forward_rules_free(struct forward_rules *t)
{
    if (t == NULL)
        return;
    pthread_rwlock_destroy(&t->lock);
    free(t->v);
    free(t);
}

int forward_rules_replace(struct forward_rules *t, const struct gateway_rule *v, size_t n,
                          struct permitd_error *err)
{
    struct gateway_rule *copy = NULL, *old;

    if (n > 0) {
        if ((copy = malloc(n * sizeof(*copy))) == NULL)
            return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        memcpy(copy, v, n * sizeof(*copy));
        for (size_t i = 0; i < n; i++)
            urlpath_normalise(v[i].path_prefix, copy[i].path_prefix,
                              sizeof(copy[i].path_prefix));
    }
    pthread_rwlock_wrlock(&t->lock);
    old = t->v;
    t->v = copy;
    t->n = n;
    pthread_rwlock_unlock(&t->lock);
    free(old);
    return PERMITD_OK;
}

size_t forward_rules_count(struct forward_rules *t)
{
    size_t n;

    pthread_rwlock_rdlock(&t->lock);
    n = t->n;
    pthread_rwlock_unlock(&t->lock);
    return n;
}

/* 1 when rule r matches reading o. */
static int matches(const struct gateway_rule *r, const struct forward_original *o)
{
    return (r->host[0] == '\0' || strcmp(r->host, o->host) == 0) &&
           strncmp(o->path, r->path_prefix, strlen(r->path_prefix)) == 0 &&
           (r->method[0] == '\0' || strcmp(r->method, o->method) == 0);
}

size_t forward_rules_match(struct forward_rules *t, const struct forward_original *o, size_t no,
                           struct forward_match *out, size_t max)
{
    size_t found = 0;

    pthread_rwlock_rdlock(&t->lock);
    for (size_t i = 0; i < t->n && found < max; i++) {
        const struct gateway_rule *r = &t->v[i];
        size_t k = 0;
        while (k < no && !matches(r, &o[k]))
            k++;
        if (k == no)
            continue;
        memcpy(out[found].policy, r->policy, sizeof(out[found].policy));
        out[found].key_source = r->key_source;
        memcpy(out[found].key_header, r->key_header, sizeof(out[found].key_header));
        out[found].hash_key = r->hash_key;
        out[found].permits = r->permits;
        found++;
    }
    pthread_rwlock_unlock(&t->lock);
    return found;
}

enum forward_style forward_style_of(const char *path, const char **tail)
{
    static const struct {
        const char *name;
        enum forward_style style;
        int rest;               /* a path may follow */
    } styles[] = {
        {"/nginx", FORWARD_STYLE_NGINX, 0},
        {"/forwarded", FORWARD_STYLE_FORWARDED, 0},
        {"/envoy", FORWARD_STYLE_ENVOY, 1},
    };
    const char *after = path + strlen(FORWARD_PATH);

    for (size_t i = 0; i < sizeof(styles) / sizeof(styles[0]); i++) {
        size_t n = strlen(styles[i].name);
        if (strncmp(after, styles[i].name, n) == 0 &&
            (after[n] == '\0' || (styles[i].rest && after[n] == '/'))) {
            if (tail != NULL)
                *tail = after + n;
            return styles[i].style;
        }
    }
    if (tail != NULL)
        *tail = after;
    return FORWARD_STYLE_ANY;
}

/* One reading into o: method m (capitals), the normal form of uri, the
 * first item of host h without its port, lowercase. */
static void reading(struct forward_original *o, const char *m, const char *uri, const char *h)
{
    size_t n, i;

    for (i = 0; m != NULL && m[i] != '\0' && i < sizeof(o->method) - 1; i++)
        o->method[i] = (char)toupper((unsigned char)m[i]);
    o->method[i] = '\0';
    urlpath_normalise(uri != NULL ? uri : "/", o->path, sizeof(o->path));
    o->host[0] = '\0';
    if (h != NULL) {
        while (*h == ' ')
            h++;
        n = strcspn(h, ", ");
        if (h[0] == '[') {                  /* [v6]:port */
            const char *end = memchr(h, ']', n);
            n = end != NULL ? (size_t)(end - h) + 1 : n;
        } else {
            const char *colon = memchr(h, ':', n);
            if (colon != NULL)
                n = (size_t)(colon - h);
        }
        if (n >= sizeof(o->host))
            n = sizeof(o->host) - 1;
        for (i = 0; i < n; i++)
            o->host[i] = (char)tolower((unsigned char)h[i]);
        o->host[n] = '\0';
    }
}

static int present(const char *v)
{
    return v != NULL && v[0] != '\0';
}

int forward_original_parse(struct forward_original *o, enum forward_style style,
                           const struct forward_headers *h, struct permitd_error *err)
{
    const char *tail = "/";
    const char *fhost = present(h->x_forwarded_host) ? h->x_forwarded_host : h->host;
    int n = 0;

    if (style == FORWARD_STYLE_NGINX && !present(h->x_original_uri))
        return permitd_error_set(err, PERMITD_EINVAL, "X-Original-URI: missing; the nginx style "
                                 "(/v1/forward-auth/nginx) reads the original request from "
                                 "it: proxy_set_header X-Original-URI $request_uri");
    if (style == FORWARD_STYLE_FORWARDED && !present(h->x_forwarded_uri))
        return permitd_error_set(err, PERMITD_EINVAL, "X-Forwarded-Uri: missing; the forwarded "
                                 "style (/v1/forward-auth/forwarded) reads the original request "
                                 "from it, as Traefik and Caddy send it");
    if (style == FORWARD_STYLE_ENVOY || style == FORWARD_STYLE_ANY) {
        if (h->own_path != NULL && forward_path(h->own_path))
            forward_style_of(h->own_path, &tail);
        reading(&o[n++], h->own_method, tail[0] == '/' ? tail : "/", h->host);
    }
    if (style == FORWARD_STYLE_NGINX || (style == FORWARD_STYLE_ANY && present(h->x_original_uri)))
        reading(&o[n++], present(h->x_original_method) ? h->x_original_method : h->own_method,
                h->x_original_uri, fhost);
    if (style == FORWARD_STYLE_FORWARDED ||
        (style == FORWARD_STYLE_ANY && present(h->x_forwarded_uri)))
        reading(&o[n++], present(h->x_forwarded_method) ? h->x_forwarded_method : h->own_method,
                h->x_forwarded_uri, fhost);
    return n;
}

void forward_client_address(const struct cidr_list *trusted, const char *peer,
                            const char *x_forwarded_for, const char *x_real_ip, char *out,
                            size_t len)
{
    char hop[64], last[64];

    snprintf(out, len, "%s", peer != NULL ? peer : "");
    if (peer == NULL || !cidr_list_match(trusted, peer))
        return;
    if (x_forwarded_for != NULL && x_forwarded_for[0] != '\0') {
        /* Right to left: each trusted hop vouches for the one before it. */
        size_t end = strlen(x_forwarded_for);
        snprintf(last, sizeof(last), "%s", peer);
        while (end > 0) {
            size_t start = end, a, b;
            while (start > 0 && x_forwarded_for[start - 1] != ',')
                start--;
            a = start;
            b = end;
            while (a < b && (x_forwarded_for[a] == ' ' || x_forwarded_for[a] == '\t'))
                a++;
            while (b > a && (x_forwarded_for[b - 1] == ' ' || x_forwarded_for[b - 1] == '\t'))
                b--;
            if (b - a == 0 || b - a >= sizeof(hop))
                break;                      /* not an address: nothing left of it is vouched for */
            memcpy(hop, x_forwarded_for + a, b - a);
            hop[b - a] = '\0';
            if (!cidr_is_addr(hop))
                break;
            snprintf(last, sizeof(last), "%s", hop);
            if (!cidr_list_match(trusted, hop))
                break;                      /* the right-most untrusted hop: the client */
            end = start > 0 ? start - 1 : 0;
        }
        snprintf(out, len, "%s", last);
        return;
    }
    if (x_real_ip != NULL && cidr_is_addr(x_real_ip))
        snprintf(out, len, "%s", x_real_ip);
}

struct forward {
    const struct config *cfg;
    struct forward_rules *rules;
    struct service *service;
};

int forward_new(const struct config *cfg, struct forward_rules *rules, struct service *service,
                struct forward **out, struct permitd_error *err)
{
    struct forward *f = calloc(1, sizeof(*f));

    *out = NULL;
    if (f == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    f->cfg = cfg;
    f->rules = rules;
    f->service = service;
    *out = f;
    return PERMITD_OK;
}

void forward_free(struct forward *f)
{
    free(f);
}

int forward_path(const char *path)
{
    size_t n = strlen(FORWARD_PATH);

    return strncmp(path, FORWARD_PATH, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* A forward-auth request waiting for its decisions, in the request's own
 * storage (http_request_alloc()): the service's record of one take (one
 * rule) or of a batch (several), the rules' requests with their strings,
 * and room for the answers. */
struct pending {
    struct service_take take;
    struct service_batch b;
    const struct http_request *http;
    size_t n;
    int deny_status;                    /* the style's: 403 nginx (and the bare path), else 429 */
    char app[POLICY_NAME_MAX + 1];
    char bucket[FORWARD_MATCH_MAX][POLICY_NAME_MAX + 1];
    char key[FORWARD_MATCH_MAX][POLICY_KEY_MAX + 1];
    struct limiter_request reqs[FORWARD_MATCH_MAX];
    struct limiter_result res[FORWARD_MATCH_MAX];
    struct permitd_error errs[FORWARD_MATCH_MAX];
};

/* An error as forward-auth answers it: the Connect error body, and a 5xx
 * status whatever the error. A 4xx would reach the client as if it were
 * the client's fault (nginx passes 401 and 403 on, Traefik and Caddy every
 * status): a rule naming no policy, a policy not admitting the gateway's
 * app, or a bad gateway key are the operator's to fix. */
static void error_reply(struct http_response *resp, const struct permitd_error *err)
{
    connect_error_reply(resp, err);
    if (resp->status < 500)
        resp->status = 500;
    http_response_header(resp, "Permitd-Error", "%s", permitd_status_name(err->code));
}

/* An allowance some shadow policy would have refused: Permitd-Shadow names
 * them ("a, b"), so a gateway can log or pass on what enforcing would do
 * (the RateLimit header already says r=0 when the pick is one of them).
 * Names are [A-Za-z0-9._-], so the list needs no quoting. */
static void shadow_header(struct http_response *resp, const struct pending *p)
{
    char list[512];
    size_t len = 0;

    for (size_t i = 0; i < p->n; i++) {
        int n;

        if (p->errs[i].code != PERMITD_OK || !p->res[i].shadow)
            continue;
        n = snprintf(list + len, sizeof(list) - len, "%s%s", len ? ", " : "", p->reqs[i].bucket);
        if (n < 0 || (size_t)n >= sizeof(list) - len) {
            list[len] = '\0';  /* the names that fit whole: a header is no place for hundreds */
            break;
        }
        len += (size_t)n;
    }
    if (len > 0)
        http_response_header(resp, "Permitd-Shadow", "%s", list);
}

/* The answer once every rule is decided: an item's error wins; otherwise
 * a denial (the one with the longest wait names the headers), otherwise
 * the allowance with the fewest permits left. */
static void answer(struct pending *p, int rc, const struct permitd_error *err)
{
    struct http_response resp;
    size_t pick = 0;
    int denied = 0;

    http_response_init(&resp);
    if (rc != PERMITD_OK) {
        error_reply(&resp, err);
        http_request_resume(p->http, &resp);
        return;
    }
    for (size_t i = 0; i < p->n; i++)
        if (p->errs[i].code != PERMITD_OK && p->errs[i].code != PERMITD_EABORTED) {
            error_reply(&resp, &p->errs[i]);
            http_request_resume(p->http, &resp);
            return;
        }
    for (size_t i = 0; i < p->n; i++) {
        const struct limiter_result *r = &p->res[i];
        if (p->errs[i].code != PERMITD_OK)
            continue;
        if (!r->allowed && (!denied || r->retry_after_ms > p->res[pick].retry_after_ms)) {
            pick = i;
            denied = 1;
        } else if (!denied && r->allowed && r->remaining < p->res[pick].remaining) {
            pick = i;
        }
    }
    resp.status = denied ? p->deny_status : 200;
    resp.content_type = "text/plain";
    answer_ratelimit_headers(&resp, p->reqs[pick].bucket, &p->res[pick]);
    if (!denied)
        shadow_header(&resp, p);
    http_request_resume(p->http, &resp);
}

static void decided_one(void *ud, int rc, const struct limiter_result *r,
                        const struct permitd_error *err)
{
    struct pending *p = ud;

    p->errs[0] = rc == PERMITD_OK ? (struct permitd_error){PERMITD_OK, ""} : *err;
    if (rc == PERMITD_OK)
        p->res[0] = *r;
    answer(p, PERMITD_OK, err);
}

static void decided_batch(void *ud, int rc, const struct permitd_error *err)
{
    answer(ud, rc, err);
}

/* The app the gateway acts as: its API key's, or with --app-auth off the
 * Permitd-App header's ("gateway" without one). */
static int gateway_app(struct forward *f, const struct http_request *req, char *app,
                       struct permitd_error *err)
{
    struct service_caller c = {http_request_header(req, "Authorization"), "", ""};
    int rc = service_authorize(f->service, &c, "", err);

    memcpy(app, c.app, sizeof(c.app));
    if (rc == PERMITD_OK && app[0] == '\0') {
        const char *named = http_request_header(req, "Permitd-App");
        snprintf(app, POLICY_NAME_MAX + 1, "%s", named != NULL ? named : "gateway");
        if (named != NULL && strlen(named) > POLICY_NAME_MAX)
            rc = policy_check_name("Permitd-App", named, err);
    }
    http_request_log_who(req, app, c.key_prefix);
    return rc;
}

void forward_handle(struct forward *f, struct service_worker *sw, const struct http_request *req,
                    struct http_response *resp)
{
    struct forward_original o[FORWARD_READINGS_MAX];
    struct forward_match m[FORWARD_MATCH_MAX];
    struct permitd_error err = {PERMITD_OK, ""};
    struct pending *p;
    enum forward_style style = forward_style_of(http_request_path(req), NULL);
    struct forward_headers h = {
        http_request_method(req), http_request_path(req),
        http_request_header(req, "X-Original-Method"), http_request_header(req, "X-Original-URI"),
        http_request_header(req, "X-Forwarded-Method"), http_request_header(req, "X-Forwarded-Uri"),
        http_request_header(req, "X-Forwarded-Host"), http_request_header(req, "Host"),
    };
    char app[POLICY_NAME_MAX + 1], peer[64] = "", client[64];
    size_t n;
    int rc;

    if ((rc = gateway_app(f, req, app, &err)) != PERMITD_OK ||
        (rc = forward_original_parse(o, style, &h, &err)) < 0) {
        error_reply(resp, &err);
        return;
    }
    n = forward_rules_match(f->rules, o, (size_t)rc, m, FORWARD_MATCH_MAX);
    resp->content_type = "text/plain";
    if (n == 0)
        return;                             /* no rule limits it: 200 */
    p = http_request_alloc(req, sizeof(*p));
    if (p == NULL) {
        permitd_error_set(&err, PERMITD_EINTERNAL, "out of memory");
        error_reply(resp, &err);
        return;
    }
    memset(p, 0, offsetof(struct pending, bucket));
    p->http = req;
    p->n = n;
    p->deny_status = style == FORWARD_STYLE_NGINX || style == FORWARD_STYLE_ANY ? 403 : 429;
    memcpy(p->app, app, sizeof(p->app));
    client[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        const char *key = "";
        if (m[i].key_source == GATEWAY_KEY_CLIENT) {
            if (client[0] == '\0') {
                if (http_request_client_addr(req, peer, sizeof(peer)) != 0)
                    peer[0] = '\0';
                forward_client_address(&f->cfg->trusted_proxy_list, peer,
                                       http_request_header_all(req, "X-Forwarded-For"),
                                       http_request_header(req, "X-Real-IP"), client,
                                       sizeof(client));
            }
            key = client;
        } else if (m[i].key_source == GATEWAY_KEY_HEADER) {
            const char *v = http_request_header(req, m[i].key_header);
            key = v != NULL ? v : "";       /* none: the rule's shared bucket */
        }
        memcpy(p->bucket[i], m[i].policy, sizeof(p->bucket[i]));
        bucketkey_from_untrusted(key, m[i].hash_key, p->key[i]);
        p->reqs[i] = (struct limiter_request){p->bucket[i], p->app, p->key[i], m[i].permits, NULL,
                                              NULL, NULL};
        p->errs[i] = (struct permitd_error){PERMITD_OK, ""};
    }
    /* Several rules are asked all_or_nothing, each on its own when they
     * cannot be (the service's SERVICE_BATCH_ALL_OR_EACH). */
    if (n == 1 && service_take(sw, &p->take, SERVICE_ACQUIRE, &p->reqs[0],
                               INT64_MAX, decided_one, p, &err) != PERMITD_OK) {
        error_reply(resp, &err);
        return;
    }
    http_request_defer(req);
    if (n == 1) {
        service_queue(sw, &p->take);
    } else {
        p->b.n = n;
        p->b.reqs = p->reqs;
        p->b.res = p->res;
        p->b.errs = p->errs;
        service_batch(sw, &p->b, SERVICE_BATCH_ALL_OR_EACH, INT64_MAX, 1,
                      decided_batch, p);
    }
}
