/*
 * envoyrls.c - Envoy's RateLimitService.ShouldRateLimit over permitd's
 * policies (see envoyrls.h).
 *
 * The mapping is a flat array of compiled rows (domain, the path's keys and
 * pinned values, the policy, the index of the key entry), scanned under a
 * read lock: an operator configures tens or hundreds of descriptor shapes,
 * not millions, and a scan of those costs less than the Redis round trip
 * every decision makes anyway. The strings of a compiled table live in one
 * block per row, freed with the table when the next load replaces it.
 *
 * A door of the decision service (service.h): the caller's key, each
 * matched descriptor's validation, the limiter and the counting are the
 * service's, as for every door; what is this file's is Envoy's wire.
 * Errors of a descriptor's decision follow what Envoy can act on: a policy
 * gone (not_found) or disabled (failed_precondition) limits nothing, so the
 * descriptor is OK; hits over the policy's max_permits (out_of_range) can
 * never pass, so it is OVER_LIMIT; anything else (Redis unreachable,
 * the deadline, an app the policy does not allow) fails the whole call
 * with its status, and Envoy's failure_mode_deny decides. No value a
 * client sends can fail it: a descriptor value the key rules refuse is
 * limited by its hash (decisions/bucketkey.h).
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "decisions/envoyrls.h"
#include "decisions/answer.h"
#include "decisions/bucketkey.h"
#include "decisions/grpcapi.h"
#include "decisions/service.h"
#include "envoy/service/ratelimit/v3/rls.pb-c.h"
#include "stores/policy.h"

struct rule {
    char *domain;
    size_t n;
    char *keys[ENVOYRLS_ENTRIES_MAX];
    char *values[ENVOYRLS_ENTRIES_MAX];   /* NULL: any value */
    int pinned;
    int key_index;                        /* -1: the shared bucket */
    int allow_limit;                      /* allow_limit_override (issue 37) */
    char policy[POLICY_NAME_MAX + 1];
    char *block;                          /* every string above */
};

struct envoyrls {
    pthread_rwlock_t lock;
    struct rule *rules;
    size_t n;
    struct service *service;
};

#define SHOULD_RATE_LIMIT "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"

/* Splits a copy of row's descriptor into r (r->block owns the strings). */
static int compile(const struct envoymap_row *row, struct rule *r, struct permitd_error *err)
{
    size_t dlen = strlen(row->domain), plen = strlen(row->descriptor);
    char *s, *save = NULL, *tok;

    memset(r, 0, sizeof(*r));
    r->key_index = -1;
    if (dlen == 0 || dlen > ENVOYMAP_DOMAIN_MAX)
        return permitd_error_set(err, PERMITD_EINVAL, "domain: \"%.300s\" must be 1 to %d bytes",
                                 row->domain, ENVOYMAP_DOMAIN_MAX);
    if (plen == 0 || plen > ENVOYMAP_DESCRIPTOR_MAX)
        return permitd_error_set(err, PERMITD_EINVAL, "descriptor: \"%.600s\" must be 1 to %d "
                                 "bytes", row->descriptor, ENVOYMAP_DESCRIPTOR_MAX);
    if (policy_check_name("policy", row->policy, err) != PERMITD_OK)
        return PERMITD_EINVAL;
    if ((r->block = malloc(dlen + 1 + plen + 1)) == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    r->domain = memcpy(r->block, row->domain, dlen + 1);
    s = memcpy(r->block + dlen + 1, row->descriptor, plen + 1);
    snprintf(r->policy, sizeof(r->policy), "%s", row->policy);
    r->allow_limit = row->allow_limit_override != 0;
    /* strtok_r would pass over empty entries (",,"): refuse them first. */
    if (s[0] == ',' || s[plen - 1] == ',' || strstr(s, ",,") != NULL)
        goto bad;
    for (tok = strtok_r(s, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (r->n == ENVOYRLS_ENTRIES_MAX) {
            permitd_error_set(err, PERMITD_EINVAL, "descriptor: \"%.600s\" has more than %d "
                              "entries", row->descriptor, ENVOYRLS_ENTRIES_MAX);
            goto fail;
        }
        if (eq != NULL) {
            *eq = '\0';
            if (eq[1] == '\0' || strchr(eq + 1, '=') != NULL)
                goto bad;
            r->values[r->n] = eq + 1;
            r->pinned++;
        }
        if (tok[0] == '\0')
            goto bad;
        r->keys[r->n++] = tok;
    }
    if (row->key_entry[0] != '\0') {
        for (size_t i = 0; i < r->n; i++)
            if (strcmp(r->keys[i], row->key_entry) == 0 && r->values[i] == NULL) {
                r->key_index = (int)i;
                break;
            }
        if (r->key_index < 0) {
            permitd_error_set(err, PERMITD_EINVAL, "key_entry: \"%.300s\" is not an entry of "
                              "descriptor \"%.600s\" whose value varies (name one of its keys "
                              "without =value, or leave it empty for one shared bucket)",
                              row->key_entry, row->descriptor);
            goto fail;
        }
    }
    return PERMITD_OK;
bad:
    permitd_error_set(err, PERMITD_EINVAL, "descriptor: \"%.600s\" is not a comma-separated "
                      "list of key or key=value entries (e.g. \"generic_key=api,user_id\")",
                      row->descriptor);
fail:
    free(r->block);
    r->block = NULL;
    return PERMITD_EINVAL;
}

int envoyrls_check_row(const struct envoymap_row *row, struct permitd_error *err)
{
    struct rule r;
    int rc = compile(row, &r, err);

    free(r.block);
    return rc;
}

static void rules_free(struct rule *rules, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(rules[i].block);
    free(rules);
}

int envoyrls_new(struct service *service, struct envoyrls **out, struct permitd_error *err)
{
    struct envoyrls *r = calloc(1, sizeof(*r));

    *out = NULL;
    if (r == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    pthread_rwlock_init(&r->lock, NULL);
    r->service = service;
    *out = r;
    return PERMITD_OK;
}

void envoyrls_free(struct envoyrls *r)
{
    if (r == NULL)
        return;
    rules_free(r->rules, r->n);
    pthread_rwlock_destroy(&r->lock);
    free(r);
}

int envoyrls_replace(struct envoyrls *r, const struct envoymap_row *rows, size_t n,
                     size_t *skipped, struct permitd_error *err)
{
    struct rule *rules = calloc(n + 1, sizeof(*rules)), *old;
    size_t m = 0, bad = 0, oldn;
    struct permitd_error why;

    if (rules == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        if (compile(&rows[i], &rules[m], &why) == PERMITD_OK)
            m++;
        else
            bad++;
    }
    pthread_rwlock_wrlock(&r->lock);
    old = r->rules;
    oldn = r->n;
    r->rules = rules;
    r->n = m;
    pthread_rwlock_unlock(&r->lock);
    rules_free(old, oldn);
    if (skipped != NULL)
        *skipped = bad;
    return PERMITD_OK;
}

size_t envoyrls_count(struct envoyrls *r)
{
    size_t n;

    pthread_rwlock_rdlock(&r->lock);
    n = r->n;
    pthread_rwlock_unlock(&r->lock);
    return n;
}

int envoyrls_match(struct envoyrls *r, const char *domain, const char *const *keys,
                   const char *const *values, size_t n, char *policy_out, char *key_out,
                   int *allow_limit_out)
{
    const struct rule *best = NULL;

    pthread_rwlock_rdlock(&r->lock);
    for (size_t i = 0; i < r->n; i++) {
        const struct rule *ru = &r->rules[i];
        size_t k;
        if (ru->n != n || strcmp(ru->domain, domain) != 0)
            continue;
        for (k = 0; k < n; k++)
            if (strcmp(ru->keys[k], keys[k]) != 0 ||
                (ru->values[k] != NULL && strcmp(ru->values[k], values[k]) != 0))
                break;
        if (k == n && (best == NULL || ru->pinned > best->pinned))
            best = ru;
    }
    if (best != NULL) {
        snprintf(policy_out, POLICY_NAME_MAX + 1, "%s", best->policy);
        bucketkey_from_untrusted(best->key_index >= 0 ? values[best->key_index] : "", 0, key_out);
        if (allow_limit_out != NULL)
            *allow_limit_out = best->allow_limit;
    }
    pthread_rwlock_unlock(&r->lock);
    return best != NULL;
}

int envoyrls_own_limit(uint32_t requests_per_unit, int unit, struct limiter_own_limit *out)
{
    static const int64_t unit_ms[8] = {0, 1000, 60000, 3600000, 86400000,
                                       30LL * 86400000, 365LL * 86400000, 7LL * 86400000};

    if (requests_per_unit < 1 || unit < 1 || unit > 7)
        return 0;
    *out = (struct limiter_own_limit){0, (int64_t)requests_per_unit, unit_ms[unit]};
    return 1;
}

void envoyrls_unit(int64_t limit, int64_t window_s, uint32_t *requests_per_unit, int *unit)
{
    static const int64_t secs[] = {1, 60, 3600, 86400};
    double rate, v = 0;
    int u;

    *unit = 1;
    *requests_per_unit = limit > UINT32_MAX ? UINT32_MAX : limit < 0 ? 0 : (uint32_t)limit;
    if (window_s <= 0)
        return;
    for (u = 0; u < 4; u++)
        if (window_s == secs[u]) {
            *unit = u + 1;
            return;
        }
    rate = (double)limit / (double)window_s;
    for (u = 0; u < 4; u++) {
        v = rate * (double)secs[u];
        if (v >= 1 || u == 3)
            break;
    }
    v = v < 1 ? 1 : floor(v + 0.5);
    *unit = u + 1;
    *requests_per_unit = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

/* ---- ShouldRateLimit ---- */

/* A call waiting for its descriptors' decisions, in the call's storage:
 * the service's record of one take (one matched descriptor) or of a batch
 * (several), whose reqs, res and errs are the items'. */
struct pending {
    struct service_take take;
    struct service_batch b;
    struct grpc_call *call;
    size_t nd;                      /* descriptors */
    int *item;                      /* per descriptor: its batch item, -1: unmatched */
    size_t n;                       /* batch items */
    struct limiter_request *reqs;
    struct limiter_result *res;
    struct permitd_error *errs;
    char (*policy)[POLICY_NAME_MAX + 1];    /* per item */
    char (*key)[POLICY_KEY_MAX + 1];        /* per item */
    struct limiter_own_limit *own;          /* per item: its descriptor's `limit` */
    char app[POLICY_NAME_MAX + 1];
};

typedef Envoy__Service__Ratelimit__V3__RateLimitResponse Response;
typedef Envoy__Service__Ratelimit__V3__RateLimitResponse__DescriptorStatus Status;
typedef Envoy__Service__Ratelimit__V3__RateLimitResponse__RateLimit Limit;
typedef Envoy__Config__Core__V3__HeaderValue Header;

#define CODE_OK ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_RESPONSE__CODE__OK
#define CODE_OVER ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_RESPONSE__CODE__OVER_LIMIT

/* The answer of nd descriptors, item[i] deciding descriptor i (NULL: all
 * unmatched). Its arrays are in the call's storage (grpc_call_alloc()),
 * given back with the call; the packed answer goes into the call's reply
 * buffer (grpcapi_reply()). */
static void reply(struct pending *p)
{
    size_t nd = p->nd, tight = SIZE_MAX;
    Response rs = ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_RESPONSE__INIT;
    Status *st, **stp;
    Limit *lim;
    Google__Protobuf__Duration *dur;
    Header hv[HTTP_MAX_HEADERS], *hvp[HTTP_MAX_HEADERS];
    struct http_response hdrs;
    struct permitd_error oom;

    if ((st = grpc_call_alloc(p->call, (nd + 1) * sizeof(*st))) == NULL ||
        (stp = grpc_call_alloc(p->call, (nd + 1) * sizeof(*stp))) == NULL ||
        (lim = grpc_call_alloc(p->call, (nd + 1) * sizeof(*lim))) == NULL ||
        (dur = grpc_call_alloc(p->call, (nd + 1) * sizeof(*dur))) == NULL) {
        permitd_error_set(&oom, PERMITD_EINTERNAL, "out of memory");
        grpc_call_fail(p->call, &oom);
        return;
    }
    rs.overall_code = CODE_OK;
    for (size_t i = 0; i < nd; i++) {
        int it = p->item != NULL ? p->item[i] : -1;
        const struct limiter_result *res;
        uint32_t rpu;
        int unit;

        envoy__service__ratelimit__v3__rate_limit_response__descriptor_status__init(&st[i]);
        stp[i] = &st[i];
        st[i].code = CODE_OK;
        if (it < 0)
            continue;
        res = &p->res[it];
        envoy__service__ratelimit__v3__rate_limit_response__rate_limit__init(&lim[i]);
        google__protobuf__duration__init(&dur[i]);
        envoyrls_unit(res->limit, res->window_s, &rpu, &unit);
        lim[i].name = p->policy[it];
        lim[i].requests_per_unit = rpu;
        lim[i].unit = (Envoy__Service__Ratelimit__V3__RateLimitResponse__RateLimit__Unit)unit;
        st[i].current_limit = &lim[i];
        st[i].limit_remaining = res->remaining < 0 ? 0 : res->remaining > UINT32_MAX
                                ? UINT32_MAX : (uint32_t)res->remaining;
        dur[i].seconds = res->reset_after_ms / 1000;
        dur[i].nanos = (int32_t)(res->reset_after_ms % 1000) * 1000000;
        st[i].duration_until_reset = &dur[i];
        st[i].code = res->allowed ? CODE_OK : CODE_OVER;
        if (!res->allowed)
            rs.overall_code = CODE_OVER;
        /* The tightest: the first denied, else the least remaining. */
        if (tight == SIZE_MAX || (!res->allowed && p->res[tight].allowed) ||
            (res->allowed == p->res[tight].allowed && res->remaining < p->res[tight].remaining))
            tight = (size_t)it;
    }
    rs.n_statuses = nd;
    rs.statuses = stp;
    http_response_init(&hdrs);
    if (tight != SIZE_MAX) {
        answer_ratelimit_headers(&hdrs, p->policy[tight], &p->res[tight]);
        for (int i = 0; i < hdrs.nheaders; i++) {
            envoy__config__core__v3__header_value__init(&hv[i]);
            hv[i].key = (char *)hdrs.headers[i].name;
            hv[i].value = hdrs.headers[i].value;
            hvp[i] = &hv[i];
        }
        rs.n_response_headers_to_add = (size_t)hdrs.nheaders;
        rs.response_headers_to_add = hvp;
    }
    grpcapi_reply(p->call, &rs.base);
}

static void decided(void *ud, int rc, const struct permitd_error *err)
{
    struct pending *p = ud;

    if (rc != PERMITD_OK) {
        grpc_call_fail(p->call, err);
        return;
    }
    for (size_t i = 0; i < p->n; i++) {
        int code = p->errs[i].code;
        if (code == PERMITD_OK)
            continue;
        if (code == PERMITD_ENOTFOUND || code == PERMITD_EPRECONDITION) {
            for (size_t d = 0; d < p->nd; d++)     /* limits nothing: OK */
                if (p->item[d] == (int)i)
                    p->item[d] = -1;
        } else if (code == PERMITD_ERANGE) {
            /* More hits than the policy's max_permits: never passes. */
            p->res[i].allowed = 0;
            p->res[i].remaining = 0;
        } else {
            struct permitd_error e;
            permitd_error_set(&e, code, "descriptor of policy \"%s\": %s", p->policy[i],
                              p->errs[i].message);
            grpc_call_fail(p->call, &e);
            return;
        }
    }
    reply(p);
}

/* The decision of a call with one matched descriptor (one take), as the
 * one item of a batch: its error is the item's. */
static void one_decided(void *ud, int rc, const struct limiter_result *res,
                        const struct permitd_error *err)
{
    struct pending *p = ud;

    if (rc == PERMITD_OK) {
        p->res[0] = *res;
        p->errs[0] = (struct permitd_error){PERMITD_OK, ""};
    } else if (err != NULL) {
        p->errs[0] = *err;
        p->errs[0].code = rc;
    } else {
        permitd_error_set(&p->errs[0], rc, "the decision failed (status %d)", rc);
    }
    decided(p, PERMITD_OK, NULL);
}

/* Checks the request, maps its descriptors and queues their decisions.
 * PERMITD_OK when the call is answered or will be. One matched descriptor
 * (the usual request: one rate_limits action on the route) is one queued
 * Acquire, which allocates nothing; more go as one batch, whose plan the
 * limiter allocates. */
static int should_rate_limit(struct envoyrls *r, struct grpc_call *call,
                             const Envoy__Service__Ratelimit__V3__RateLimitRequest *rq,
                             struct permitd_error *err)
{
    size_t nd = rq->n_descriptors, n = 0;
    const char *keys[ENVOYRLS_ENTRIES_MAX], *values[ENVOYRLS_ENTRIES_MAX];
    struct service_caller c = {grpc_call_metadata(call, "authorization"), "", ""};
    struct pending *p;
    int rc, allow_limit = 0;

    if (rq->domain[0] == '\0')
        return permitd_error_set(err, PERMITD_EINVAL, "domain: empty; every RateLimitRequest "
                                 "names its domain");
    if (nd == 0)
        return permitd_error_set(err, PERMITD_EINVAL, "descriptors: none; a RateLimitRequest "
                                 "carries at least one");
    if (nd > LIMITER_BATCH_MAX)
        return permitd_error_set(err, PERMITD_EINVAL, "descriptors: %zu, the limit is %d", nd,
                                 LIMITER_BATCH_MAX);
    if ((p = grpc_call_alloc(call, sizeof(*p))) == NULL ||
        (p->item = grpc_call_alloc(call, nd * sizeof(*p->item))) == NULL ||
        (p->reqs = grpc_call_alloc(call, nd * sizeof(*p->reqs))) == NULL ||
        (p->res = grpc_call_alloc(call, nd * sizeof(*p->res))) == NULL ||
        (p->errs = grpc_call_alloc(call, nd * sizeof(*p->errs))) == NULL ||
        (p->policy = grpc_call_alloc(call, nd * sizeof(*p->policy))) == NULL ||
        (p->key = grpc_call_alloc(call, nd * sizeof(*p->key))) == NULL ||
        (p->own = grpc_call_alloc(call, nd * sizeof(*p->own))) == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    p->call = call;
    p->nd = nd;
    /* The app: the API key's; with keys off, the domain stands for it. */
    rc = service_authorize(r->service, &c, "", err);
    grpc_call_log_who(call, c.app[0] != '\0' ? c.app : rq->domain, c.key_prefix);
    if (rc != PERMITD_OK)
        return rc;
    snprintf(p->app, sizeof(p->app), "%s", c.app[0] != '\0' ? c.app : rq->domain);
    for (size_t i = 0; i < nd; i++) {
        const Envoy__Extensions__Common__Ratelimit__V3__RateLimitDescriptor *d =
            rq->descriptors[i];
        p->item[i] = -1;
        if (d->n_entries == 0)
            return permitd_error_set(err, PERMITD_EINVAL, "descriptors[%zu]: no entries", i);
        if (d->n_entries > ENVOYRLS_ENTRIES_MAX)
            continue;       /* no row is that deep: unmatched */
        for (size_t k = 0; k < d->n_entries; k++) {
            keys[k] = d->entries[k]->key;
            values[k] = d->entries[k]->value;
        }
        if (!envoyrls_match(r, rq->domain, keys, values, d->n_entries, p->policy[n], p->key[n],
                            &allow_limit))
            continue;
        p->reqs[n] = (struct limiter_request){p->policy[n], p->app, p->key[n],
                                              rq->hits_addend ? (int64_t)rq->hits_addend : 1,
                                              NULL, NULL, NULL};
        /* the descriptor's own limit, only where its row allows it (off
         * by default: a caller must not raise its own limit) */
        if (allow_limit && d->limit != NULL &&
            envoyrls_own_limit(d->limit->requests_per_unit, (int)d->limit->unit, &p->own[n]))
            p->reqs[n].own = &p->own[n];
        if ((rc = service_check(r->service, SERVICE_ACQUIRE, &p->reqs[n], "", err)) !=
            PERMITD_OK) {
            char why[sizeof(err->message)];
            snprintf(why, sizeof(why), "%s", err->message);
            return permitd_error_set(err, rc, "descriptors[%zu] (policy \"%s\"): %s", i,
                                     p->policy[n], why);
        }
        p->item[i] = (int)n++;
    }
    p->n = n;
    if (n == 0) {
        reply(p);
        return PERMITD_OK;
    }
    if (n == 1) {
        if ((rc = service_take(grpcapi_worker(call), &p->take, SERVICE_ACQUIRE, &p->reqs[0],
                               grpc_call_deadline_us(call), one_decided, p, err)) != PERMITD_OK)
            return rc;
        service_queue(grpcapi_worker(call), &p->take);
        return PERMITD_OK;
    }
    p->b.n = n;
    p->b.reqs = p->reqs;
    p->b.res = p->res;
    p->b.errs = p->errs;
    service_batch(grpcapi_worker(call), &p->b, SERVICE_BATCH_EACH, grpc_call_deadline_us(call),
                  1, decided, p);
    return PERMITD_OK;
}

void envoyrls_handle(void *ud, struct grpc_call *call)
{
    struct envoyrls *r = ud;
    Envoy__Service__Ratelimit__V3__RateLimitRequest *rq;
    ProtobufCAllocator al = grpcapi_allocator(call);
    struct permitd_error err = {PERMITD_OK, ""};
    const void *data;
    size_t len;

    if (strcmp(grpc_call_path(call), SHOULD_RATE_LIMIT) != 0) {
        permitd_error_set(&err, PERMITD_EUNIMPLEMENTED, "no procedure %.200s",
                          grpc_call_path(call));
        grpc_call_fail(call, &err);
        return;
    }
    data = grpc_call_message(call, &len);
    /* In the call's storage, given back with the call. */
    rq = envoy__service__ratelimit__v3__rate_limit_request__unpack(&al, len, data);
    if (rq == NULL) {
        permitd_error_set(&err, PERMITD_EINVAL, "the request is not a valid "
                          "envoy.service.ratelimit.v3.RateLimitRequest message (%zu bytes)", len);
        grpc_call_fail(call, &err);
        return;
    }
    if (should_rate_limit(r, call, rq, &err) != PERMITD_OK)
        grpc_call_fail(call, &err);
}
