/*
 * answer.h - the translations every door shares between the
 * RateLimitService messages and the limiter: a request's limiter view, a
 * decision's permit.v1 reply, and the RateLimit headers (Connect's HTTP
 * headers, gRPC's metadata, Envoy's response_headers_to_add,
 * forward-auth's reply to the gateway).
 *
 * Each one maps values and nothing else: no Redis, no connection, no
 * counters (those are the decision service's, service.h). So what a
 * request asks the limiter, what a decision's reply says and which
 * RateLimit headers it carries can be checked without a server
 * (tests/unit/decisions/test_answer.c), the way limiter_plan.h lets a
 * batch's layout be checked.
 */
#ifndef PERMITD_ANSWER_H
#define PERMITD_ANSWER_H

#include "decisions/limiter.h"
#include "decisions/limiter_reserve.h"
#include "permit/v1/ratelimit.pb-c.h"
#include "transport/http.h"

/* The limiter's view of an Acquire: its strings point into rq. */
struct limiter_request answer_acquire_request(const Permit__V1__AcquireRequest *rq);

/* The limiter's view of a Peek: permits 0, whatever a Peek could carry;
 * its strings point into rq. */
struct limiter_request answer_peek_request(const Permit__V1__PeekRequest *rq);

/* Adds the IETF draft headers of a decision on policy to resp:
 *   RateLimit-Policy: "<policy>";q=<limit>;w=<window_s>
 *   RateLimit: "<policy>";r=<remaining>;t=<reset_after_ms in seconds, up>
 *   Retry-After: <retry_after_ms in seconds, rounded up>  (denials only) */
void answer_ratelimit_headers(struct http_response *resp, const char *policy,
                           const struct limiter_result *r);

/* Initialises m and fills it with a decision's fields. */
void answer_decision_message(Permit__V1__AcquireResponse *m, const struct limiter_result *r);

/* Initialises m and fills it with what a Peek tells (the bucket as it
 * stands: remaining, limit, reset_after_ms). */
void answer_peek_message(Permit__V1__PeekResponse *m, const struct limiter_result *r);

/* Initialises item as one AcquireBatch answer: the error (in *error,
 * pointing at err's message) when err->code is not PERMITD_OK, else the
 * decision r (in *answer). item points at whichever it used; err must
 * outlive item. */
void answer_batch_item(Permit__V1__AcquireBatchResult *item, Permit__V1__AcquireResponse *answer,
                    Permit__V1__BatchError *error, const struct limiter_result *r,
                    const struct permitd_error *err);

/* A Reserve's reply (issue 38), its arrays beside it: filled from the
 * limiter's answer r and the n items asked (strings point into asked and
 * r, which must outlive it). */
struct answer_reserve {
    Permit__V1__ReserveResponse m;
    Permit__V1__ReservedItem items[LIMITER_RESERVE_ITEMS_MAX];
    Permit__V1__ReservedItem *ptrs[LIMITER_RESERVE_ITEMS_MAX];
};
void answer_reserve_message(struct answer_reserve *a, const struct limiter_reserve_item *asked,
                            size_t n, const struct limiter_reserve_answer *r);

/* A Commit's or a Cancel's reply (the same fields: CommitResponse and
 * CancelResponse share their layout; cancel picks the second), strings
 * pointing into r. */
struct answer_settled {
    Permit__V1__CommitResponse commit;
    Permit__V1__CancelResponse cancel;
    Permit__V1__SettledItem items[LIMITER_RESERVE_ITEMS_MAX];
    Permit__V1__SettledItem *ptrs[LIMITER_RESERVE_ITEMS_MAX];
};
void answer_settled_message(struct answer_settled *a, int cancel,
                            const struct limiter_reserve_settled *r);

/* Fills always with AcquireResponse's allowed and remaining, NULL-ended:
 * the fields a JSON reply writes even at false and 0 (a denial says so). */
void answer_always_fields(const ProtobufCFieldDescriptor *always[3]);

#endif
