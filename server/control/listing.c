/*
 * listing.c - the admin policy list a page at a time (issue 22).
 *
 * The idea: never move or look at more than a page. By name (the default)
 * MySQL does it all: the count, and the page after the last name of the
 * one before (keyset, so a policy created or deleted before it does not
 * shift the rows of the next page). With a filter (LIKE on the name, the
 * description and the apps: a scan of the table), the scan runs once for
 * the matching names, which give the count and the page's names; then
 * only the page's rows are read. By traffic or level, the order lives outside
 * MySQL (this instance's stats; the buckets in Redis): the filtered names
 * alone come from MySQL, are sorted here (ties by name) and paged by
 * position, then only the page's rows are read. The level order peeks
 * every filtered policy's shared bucket (LIMITER_BATCH_MAX per pipelined
 * round trip): it is the costly one, and the README says so.
 *
 * The cursor is opaque to clients: base64 of the order, the direction,
 * the position, the last name and the filter it was made for, so a token
 * replayed with another filter or order is refused, not misread.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "control/listing.h"
#include "core/base64.h"
#include "core/utf8.h"
#include "stores/policy.h"

enum order { ORDER_NAME, ORDER_TRAFFIC, ORDER_LEVEL, ORDER_DECIDED, ORDER_DENIED,
             ORDER_DENIED_SHARE };

static const char *const order_names[] = {"name", "traffic", "level", "decided", "denied",
                                          "denied_share"};

/* What a token holds (the filter is the request's, checked against it). */
struct cursor {
    enum order order;
    int descending;
    size_t offset;
    char after[POLICY_NAME_MAX + 1];
};

#define SEP '\x1f'

static int parse_order(const char *s, enum order *out, struct permitd_error *err)
{
    if (s == NULL || s[0] == '\0') {
        *out = ORDER_NAME;
        return PERMITD_OK;
    }
    for (size_t i = 0; i < sizeof(order_names) / sizeof(order_names[0]); i++)
        if (strcmp(s, order_names[i]) == 0) {
            *out = (enum order)i;
            return PERMITD_OK;
        }
    return permitd_error_set(err, PERMITD_EINVAL,
                             "order_by: \"%.40s\" is not name, traffic, level, decided, "
                             "denied or denied_share", s);
}

/* At most LISTING_FILTER_MAX characters, none a control character (the
 * decoder already made sure it is UTF-8). */
static int check_filter(const char *f, struct permitd_error *err)
{
    size_t chars = 0;

    for (const unsigned char *c = (const unsigned char *)f; *c; c += utf8_char_len(c)) {
        if (*c < 0x20 || *c == 0x7f)
            return permitd_error_set(err, PERMITD_EINVAL, "filter: \"%.60s\" holds control "
                                     "character 0x%02x at byte %zu", f, *c,
                                     (size_t)((const char *)c - f));
        chars++;
    }
    if (chars > LISTING_FILTER_MAX)
        return permitd_error_set(err, PERMITD_EINVAL, "filter: \"%.40s...\" is %zu characters, "
                                 "at most %d", f, chars, LISTING_FILTER_MAX);
    return PERMITD_OK;
}

static void make_token(const struct cursor *c, const char *filter, char *out)
{
    char plain[LISTING_TOKEN_MAX];
    int len = snprintf(plain, sizeof(plain), "1%c%d%c%d%c%zu%c%s%c%s", SEP, (int)c->order, SEP,
                       c->descending, SEP, c->offset, SEP, c->after, SEP, filter);

    /* (filter: at most 4 x LISTING_FILTER_MAX bytes, so it always fits) */
    if (len < 0 || (size_t)len >= sizeof(plain) ||
        base64_encoded_len((size_t)len) + 1 > LISTING_TOKEN_MAX) {
        out[0] = '\0';
        return;
    }
    base64_encode((const unsigned char *)plain, (size_t)len, out);
}

/* Reads a token made by make_token() for the same filter, order and
 * direction as q's. */
static int read_token(const char *token, const char *filter, enum order order, int descending,
                      struct cursor *c, struct permitd_error *err)
{
    size_t tlen = strlen(token);
    unsigned char plain[LISTING_TOKEN_MAX];
    char *f[6], *p;
    long len;
    int k = 0;

    if (tlen >= LISTING_TOKEN_MAX || (len = base64_decode(token, tlen, plain)) < 0)
        goto bad;
    plain[len] = '\0';
    if (memchr(plain, '\0', (size_t)len) != NULL)
        goto bad;
    f[k++] = p = (char *)plain;
    while (k < 6 && (p = strchr(p, SEP)) != NULL) {
        *p++ = '\0';
        f[k++] = p;
    }
    if (k != 6 || strcmp(f[0], "1") != 0 || strlen(f[4]) > POLICY_NAME_MAX)
        goto bad;
    c->order = (enum order)atoi(f[1]);
    c->descending = atoi(f[2]) != 0;
    c->offset = (size_t)strtoull(f[3], NULL, 10);
    snprintf(c->after, sizeof(c->after), "%s", f[4]);
    if (c->order != order || c->descending != (descending != 0) || strcmp(f[5], filter) != 0)
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "page_token: \"%.40s...\" was made for another filter or order "
                                 "(filter \"%.40s\", order_by %s%s); ask for the first page "
                                 "again without it", token, f[5],
                                 c->order <= ORDER_DENIED_SHARE ? order_names[c->order] : "?",
                                 c->descending ? ", descending" : "");
    if (c->after[0] != '\0' && policy_check_name("page_token", c->after, NULL) != PERMITD_OK)
        goto bad;
    return PERMITD_OK;
bad:
    return permitd_error_set(err, PERMITD_EINVAL, "page_token: \"%.40s%s\" is not a token this "
                             "list gave (send next_page_token as it came)", token,
                             tlen > 40 ? "..." : "");
}

/* ---- the orders MySQL cannot make ---- */

struct keyed {
    double key;
    size_t index;               /* in the by-name list: ties keep name order */
};

static int by_key(const void *a_, const void *b_)
{
    const struct keyed *a = a_, *b = b_;

    if (a->key != b->key)
        return a->key < b->key ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

static int by_key_desc(const void *a_, const void *b_)
{
    const struct keyed *a = a_, *b = b_;

    if (a->key != b->key)
        return a->key > b->key ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(**(char *const *const *)a, **(char *const *const *)b);
}

/* Each name's fleet figure over the last LISTING_FLEET_SECONDS up to the
 * end of this hour (the hour before this one and this one so far), from
 * the traffic history's hours (every instance; TrafficService's "1h"
 * totals, which the list's column shows): allowed + denied, denied, or
 * denied / (allowed + denied) with the denials as a tie-breaker's fraction.
 * A name without traffic is 0. */
static int fleet_keys(const struct listing_sources *src, enum order order, char **names,
                      size_t n, struct keyed *k, struct permitd_error *err)
{
    struct trafficdb_total *v = NULL;
    char ***sorted = NULL;
    size_t nv = 0;
    int64_t to = ((int64_t)time(NULL) / 3600 + 1) * 3600;
    int rc;

    if (src->traffic == NULL)
        return permitd_error_set(err, PERMITD_EINVAL, "order_by: %s needs the traffic history "
                                 "(--mysql-url)", order_names[order]);
    pthread_mutex_lock(src->traffic_lock);
    rc = trafficdb_totals(src->traffic, TRAFFICDB_BY_POLICY, NULL, NULL, to - LISTING_FLEET_SECONDS,
                          to, TRAFFICDB_ORDER_DECIDED, INT32_MAX, &v, &nv, err);
    pthread_mutex_unlock(src->traffic_lock);
    if (rc != PERMITD_OK)
        return rc;
    /* The names by strcmp(), to find each total's (MySQL's collation may
     * order them otherwise). */
    if ((sorted = malloc((n + 1) * sizeof(*sorted))) == NULL) {
        free(v);
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    }
    for (size_t i = 0; i < n; i++)
        sorted[i] = &names[i];
    qsort(sorted, n, sizeof(*sorted), by_name);
    for (size_t j = 0; j < nv; j++) {
        char *key = v[j].policy, **kp = &key;
        char ***hit = bsearch(&kp, sorted, n, sizeof(*sorted), by_name);
        double a = (double)v[j].v[TRAFFICDB_ALLOWED], d = (double)v[j].v[TRAFFICDB_DENIED];
        if (hit == NULL)
            continue;
        k[*hit - names].key = order == ORDER_DECIDED ? a + d
                              : order == ORDER_DENIED ? d
                              : a + d > 0 ? d / (a + d) + d * 1e-15 : 0;
    }
    free(sorted);
    free(v);
    return PERMITD_OK;
}

/* Each name's key: its Acquires (allowed and denied) in this instance's
 * last LISTING_TRAFFIC_SECONDS, its shared bucket's level as a fraction
 * of its limit (-1: none to show, a disabled policy or one Redis lacks),
 * or the fleet's figure (fleet_keys()). */
static int keys_of(const struct listing_sources *src, enum order order, char **names, size_t n,
                   int64_t deadline_us, struct keyed *k, struct permitd_error *err)
{
    struct limiter_result *res = NULL;
    struct permitd_error *errs = NULL;
    int rc = PERMITD_OK;

    for (size_t i = 0; i < n; i++)
        k[i] = (struct keyed){0, i};
    if (order >= ORDER_DECIDED)
        return fleet_keys(src, order, names, n, k, err);
    if (order == ORDER_TRAFFIC) {
        int64_t allowed[LISTING_TRAFFIC_SECONDS], denied[LISTING_TRAFFIC_SECONDS], end;
        for (size_t i = 0; i < n; i++) {
            size_t m = stats_series(src->stats, names[i], LISTING_TRAFFIC_SECONDS, &end, allowed,
                                    denied, NULL);
            for (size_t s = 0; s < m; s++)
                k[i].key += (double)(allowed[s] + denied[s]);
        }
        return PERMITD_OK;
    }
    res = malloc(LIMITER_BATCH_MAX * sizeof(*res));
    errs = malloc(LIMITER_BATCH_MAX * sizeof(*errs));
    if (res == NULL || errs == NULL)
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    for (size_t from = 0; rc == PERMITD_OK && from < n; from += LIMITER_BATCH_MAX) {
        size_t m = n - from < LIMITER_BATCH_MAX ? n - from : LIMITER_BATCH_MAX;
        rc = limiter_inspect_batch(src->limiter, (const char *const *)&names[from], m,
                                   deadline_us, res, errs, err);
        for (size_t i = 0; rc == PERMITD_OK && i < m; i++)
            k[from + i].key = errs[i].code != PERMITD_OK || res[i].limit <= 0
                                  ? -1.0
                                  : (double)res[i].tokens_micro / 1e6 / (double)res[i].limit;
    }
    free(res);
    free(errs);
    return rc;
}

/* Reads the rows of the names in want (m of them) into out->v (room for
 * m), in want's order; a row deleted since the names were read is left
 * out. */
static int fill_page(const struct listing_sources *src, const char **want, size_t m,
                     struct listing_page *out, struct permitd_error *err)
{
    struct store_policy *rows = NULL;
    size_t nrows = 0;
    int rc;

    pthread_mutex_lock(src->store_lock);
    rc = store_policy_named(src->store, want, m, &rows, &nrows, err);
    pthread_mutex_unlock(src->store_lock);
    if (rc != PERMITD_OK)
        return rc;
    /* The rows move over (their strings with them). */
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < nrows; j++)
            if (rows[j].name[0] != '\0' && strcmp(rows[j].name, want[i]) == 0) {
                out->v[out->n++] = rows[j];
                memset(&rows[j], 0, sizeof(rows[j]));
                break;
            }
    store_policies_free(rows, nrows);
    return PERMITD_OK;
}

/* A page by traffic or level: sort the filtered names, take the page's,
 * read their rows and put them in the page's order. */
static int page_by_key(const struct listing_sources *src, const struct listing_query *q,
                       enum order order, size_t size, const struct cursor *c,
                       int64_t deadline_us, struct listing_page *out,
                       struct permitd_error *err)
{
    char **names = NULL;
    const char **want = NULL;
    struct keyed *k = NULL;
    size_t n = 0, m = 0;
    int rc;

    pthread_mutex_lock(src->store_lock);
    rc = store_policy_names(src->store, q->filter, &names, &n, err);
    pthread_mutex_unlock(src->store_lock);
    if (rc != PERMITD_OK)
        return rc;
    out->total = n;
    out->offset = c->offset < n ? c->offset : n;
    if ((k = malloc((n + 1) * sizeof(*k))) == NULL) {
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        goto done;
    }
    if ((rc = keys_of(src, order, names, n, deadline_us, k, err)) != PERMITD_OK)
        goto done;
    qsort(k, n, sizeof(*k), q->descending ? by_key_desc : by_key);
    m = n - out->offset < size ? n - out->offset : size;
    if ((want = malloc((m + 1) * sizeof(*want))) == NULL ||
        (out->v = calloc(m + 1, sizeof(*out->v))) == NULL) {
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < m; i++)
        want[i] = names[k[out->offset + i].index];
    if ((rc = fill_page(src, want, m, out, err)) != PERMITD_OK)
        goto done;
    if (out->offset + m < n) {
        struct cursor next = {order, q->descending != 0, out->offset + m, ""};
        make_token(&next, q->filter, out->next);
    }
done:
    free(want);
    free(k);
    store_names_free(names, n);
    return rc;
}

/* A page by name with a filter: the filter is one scan of the table (a
 * LIKE on every row's name, description and apps: the costly part, 10-40
 * ms at 10,000 policies), so it runs once, for the matching names, which
 * give the count and the page (after the cursor's name, as MySQL orders
 * names: byte order); then only the page's rows are read, by their unique
 * names. Asking MySQL for the count and for the page (the unfiltered way)
 * ran the scan twice. */
static int page_by_name_filtered(const struct listing_sources *src,
                                 const struct listing_query *q, size_t size,
                                 const struct cursor *c, struct listing_page *out,
                                 struct permitd_error *err)
{
    char **names = NULL;
    const char **want = NULL;
    size_t n = 0, m = 0, first = 0, left;
    int rc;

    pthread_mutex_lock(src->store_lock);
    rc = store_policy_names(src->store, q->filter, &names, &n, err);
    pthread_mutex_unlock(src->store_lock);
    if (rc != PERMITD_OK)
        return rc;
    out->total = n;
    out->offset = c->offset;
    /* The names still to come in the order asked: ascending, those after
     * the cursor's; descending, those before it, from the last. */
    if (!q->descending) {
        while (first < n && c->after[0] != '\0' && strcmp(names[first], c->after) <= 0)
            first++;
        left = n - first;
    } else {
        left = n;
        while (left > 0 && c->after[0] != '\0' && strcmp(names[left - 1], c->after) >= 0)
            left--;
    }
    m = left < size ? left : size;
    if ((want = malloc((m + 1) * sizeof(*want))) == NULL ||
        (out->v = calloc(m + 1, sizeof(*out->v))) == NULL) {
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < m; i++)
        want[i] = q->descending ? names[left - 1 - i] : names[first + i];
    if ((rc = fill_page(src, want, m, out, err)) == PERMITD_OK && m > 0 && left > m) {
        struct cursor next = {ORDER_NAME, q->descending != 0, c->offset + m, ""};
        snprintf(next.after, sizeof(next.after), "%s", want[m - 1]);
        make_token(&next, q->filter, out->next);
    }
done:
    free(want);
    store_names_free(names, n);
    return rc;
}

int listing_page(const struct listing_sources *src, const struct listing_query *q,
                 int64_t deadline_us, struct listing_page *out, struct permitd_error *err)
{
    struct cursor c = {ORDER_NAME, 0, 0, ""};
    enum order order = ORDER_NAME;
    size_t size, n = 0;
    int rc;

    memset(out, 0, sizeof(*out));
    if (q->page_size < 0)
        return permitd_error_set(err, PERMITD_EINVAL, "page_size: %d is negative (0 means %d)",
                                 q->page_size, LISTING_PAGE_DEFAULT);
    size = q->page_size == 0 ? LISTING_PAGE_DEFAULT
                             : (q->page_size > LISTING_PAGE_MAX ? LISTING_PAGE_MAX
                                                                : (size_t)q->page_size);
    if ((rc = parse_order(q->order_by, &order, err)) != PERMITD_OK ||
        (rc = check_filter(q->filter, err)) != PERMITD_OK)
        return rc;
    c.order = order;
    c.descending = q->descending != 0;
    if (q->page_token[0] != '\0' &&
        (rc = read_token(q->page_token, q->filter, order, q->descending, &c, err)) != PERMITD_OK)
        return rc;
    if (order != ORDER_NAME)
        return page_by_key(src, q, order, size, &c, deadline_us, out, err);
    if (q->filter[0] != '\0')
        return page_by_name_filtered(src, q, size, &c, out, err);

    /* By name: one more row than the page says whether another follows. */
    struct store_page_query sq = {q->filter, c.after, q->descending != 0, size + 1};
    pthread_mutex_lock(src->store_lock);
    rc = store_policy_page(src->store, &sq, &out->v, &n, &out->total, err);
    pthread_mutex_unlock(src->store_lock);
    if (rc != PERMITD_OK)
        return rc;
    out->n = n > size ? size : n;
    out->offset = c.offset;
    if (n > size) {
        struct cursor next = {ORDER_NAME, q->descending != 0, c.offset + size, ""};
        snprintf(next.after, sizeof(next.after), "%s", out->v[size - 1].name);
        make_token(&next, q->filter, out->next);
    }
    /* the look-ahead row is freed with the page: keep n for that */
    for (size_t i = out->n; i < n; i++)
        store_policy_clear(&out->v[i]);
    return PERMITD_OK;
}

void listing_page_clear(struct listing_page *p)
{
    store_policies_free(p->v, p->n);
    memset(p, 0, sizeof(*p));
}
