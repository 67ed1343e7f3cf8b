/*
 * api_internal.h - the pure translations inside api.c, between the
 * RateLimitService messages and the limiter; for api.c and its unit test
 * only (tests/unit/decisions/test_api.c).
 *
 * Each one maps values and nothing else: no Redis, no connection, no
 * counters. So what a request asks the limiter, what a decision's reply
 * says and which RateLimit headers it carries can be checked without a
 * server, the way limiter_plan.h lets a batch's layout be checked.
 */
#ifndef PERMITD_API_INTERNAL_H
#define PERMITD_API_INTERNAL_H

#include "decisions/limiter.h"
#include "permit/v1/ratelimit.pb-c.h"
#include "transport/http.h"

/* The limiter's view of an Acquire: its strings point into rq. */
struct limiter_request api_acquire_request(const Permit__V1__AcquireRequest *rq);

/* The limiter's view of a Peek: permits 0, whatever a Peek could carry;
 * its strings point into rq. */
struct limiter_request api_peek_request(const Permit__V1__PeekRequest *rq);

/* Adds the IETF draft headers of a decision on policy to resp:
 *   RateLimit-Policy: "<policy>";q=<limit>;w=<window_s>
 *   RateLimit: "<policy>";r=<remaining>;t=<reset_after_ms in seconds, up>
 *   Retry-After: <retry_after_ms in seconds, rounded up>  (denials only) */
void api_ratelimit_headers(struct http_response *resp, const char *policy,
                           const struct limiter_result *r);

/* Initialises m and fills it with a decision's fields. */
void api_decision_message(Permit__V1__AcquireResponse *m, const struct limiter_result *r);

/* Initialises m and fills it with what a Peek tells (the bucket as it
 * stands: remaining, limit, reset_after_ms). */
void api_peek_message(Permit__V1__PeekResponse *m, const struct limiter_result *r);

/* Initialises item as one AcquireBatch answer: the error (in *error,
 * pointing at err's message) when err->code is not PERMITD_OK, else the
 * decision r (in *answer). item points at whichever it used; err must
 * outlive item. */
void api_batch_item(Permit__V1__AcquireBatchResult *item, Permit__V1__AcquireResponse *answer,
                    Permit__V1__BatchError *error, const struct limiter_result *r,
                    const struct permitd_error *err);

/* Fills always with AcquireResponse's allowed and remaining, NULL-ended:
 * the fields a JSON reply writes even at false and 0 (a denial says so). */
void api_always_fields(const ProtobufCFieldDescriptor *always[3]);

#endif
