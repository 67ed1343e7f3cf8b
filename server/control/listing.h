/*
 * listing.h - the admin policy list a page at a time (ListPolicies, issue
 * 22): page size, an opaque cursor, a filter and six orders.
 *
 * At 10,000 policies the list as one answer cost 3.2 MB and 10,000 Redis
 * calls per refresh. Here MySQL filters, counts and pages (by name: keyset
 * on the name, so a page after a given name stays the same while rows come
 * and go before it); the orders MySQL cannot make (this instance's
 * traffic, the buckets' level, the fleet's decisions, denials and share
 * denied over the last hour from the traffic history, issue 39) sort the
 * filtered names in memory and page by position.
 */
#ifndef PERMITD_LISTING_H
#define PERMITD_LISTING_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "decisions/limiter.h"
#include "decisions/stats.h"
#include "stores/store.h"
#include "stores/trafficdb.h"

#define LISTING_PAGE_DEFAULT 50
#define LISTING_PAGE_MAX 500
#define LISTING_FILTER_MAX 128      /* characters */
#define LISTING_TRAFFIC_SECONDS 60
#define LISTING_FLEET_SECONDS 7200  /* the fleet's orders: this hour and the one before */
#define LISTING_TOKEN_MAX 1024

/* What a ListPolicies request asks for (its strings are the caller's). */
struct listing_query {
    int page_size;              /* 0 = LISTING_PAGE_DEFAULT; more = LISTING_PAGE_MAX */
    const char *page_token;     /* "" = the first page */
    const char *filter;         /* "" = every policy */
    const char *order_by;       /* "", "name", "traffic", "level", "decided", "denied",
                                 * "denied_share" */
    int descending;
};

/* One page. v is freed by listing_page_clear(). */
struct listing_page {
    struct store_policy *v;     /* the page's policies, in order */
    size_t n;
    size_t total;               /* policies that match the filter */
    size_t offset;              /* the first one's position among them */
    char next[LISTING_TOKEN_MAX];   /* the next page's token; "" on the last */
};

/* Everything a page is made from; all must outlive the call. store_lock
 * is held around each use of store (the admin's one MySQL connection). */
struct listing_sources {
    struct store *store;
    pthread_mutex_t *store_lock;
    struct stats *stats;
    struct limiter *limiter;
    struct trafficdb *traffic;      /* the fleet's orders (issue 39); NULL: refused */
    pthread_mutex_t *traffic_lock;  /* held around each use of traffic */
};

/* Checks q (an error names the bad field and value: a negative page size,
 * an unknown order, a filter too long or holding a control character, a
 * token that is not one of ours or was made for another filter or order)
 * and fills *out with its page. PERMITD_OK, or the error (MySQL's, Redis's
 * for the level order). out is cleared first; clear it with
 * listing_page_clear() either way. */
int listing_page(const struct listing_sources *src, const struct listing_query *q,
                 int64_t deadline_us, struct listing_page *out, struct permitd_error *err);
void listing_page_clear(struct listing_page *p);

#endif
