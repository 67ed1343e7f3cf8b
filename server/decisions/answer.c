/*
 * answer.c - the permit.v1 answers and RateLimit headers of a decision,
 * the same for every door (see answer.h).
 *
 * The RateLimit headers are written by hand rather than through printf:
 * every decision carries them, on every door.
 */
#include <stdint.h>
#include <string.h>

#include "decisions/answer.h"

static int64_t ceil_div(int64_t a, int64_t b)
{
    /* Not (a + b - 1) / b: that overflows for a near INT64_MAX. */
    return a <= 0 ? 0 : a / b + (a % b != 0);
}

/* A header value under construction (ratelimit_headers()). Every piece
 * is bounded: a policy name is at most 128 bytes, a number 20 digits. */
struct value {
    char s[192];
    size_t n;
};

static void value_str(struct value *v, const char *s, size_t len)
{
    if (len > sizeof(v->s) - v->n)
        len = sizeof(v->s) - v->n;
    memcpy(v->s + v->n, s, len);
    v->n += len;
}

static void value_int(struct value *v, int64_t x)
{
    char digits[24];
    size_t i = sizeof(digits);
    uint64_t u = x < 0 ? 0 - (uint64_t)x : (uint64_t)x;

    do {
        digits[--i] = (char)('0' + u % 10);
        u /= 10;
    } while (u != 0);
    if (x < 0)
        digits[--i] = '-';
    value_str(v, digits + i, sizeof(digits) - i);
}

/* `"<policy>"<k1><a><k2><b>`, the shape both RateLimit headers share
 * (k1 and k2 as "\";q=" and ";w="). */
static void policy_header(struct http_response *resp, const char *header, const char *policy,
                          const char *k1, int64_t a, const char *k2, int64_t b)
{
    struct value v;

    v.n = 0;                    /* not {0}: that would clear all of s[] */
    value_str(&v, "\"", 1);
    value_str(&v, policy, strlen(policy));
    value_str(&v, k1, strlen(k1));
    value_int(&v, a);
    value_str(&v, k2, strlen(k2));
    value_int(&v, b);
    http_response_header_set(resp, header, v.s, v.n);
}

/* Written by hand rather than through printf: every decision carries them. */
void answer_ratelimit_headers(struct http_response *resp, const char *policy,
                           const struct limiter_result *r)
{
    policy_header(resp, "RateLimit-Policy", policy, "\";q=", r->limit, ";w=", r->window_s);
    policy_header(resp, "RateLimit", policy, "\";r=", r->remaining, ";t=",
                  ceil_div(r->reset_after_ms, 1000));
    /* A shadow answer (allowed, flagged) keeps what enforcing would have
     * said in RateLimit (r=0 ...), but no Retry-After: a proxy in front
     * would act on it, and the policy is not to refuse anything yet. */
    if (!r->allowed) {
        struct value v;
        v.n = 0;
        value_int(&v, ceil_div(r->retry_after_ms, 1000));
        http_response_header_set(resp, "Retry-After", v.s, v.n);
    }
}

void answer_decision_message(Permit__V1__AcquireResponse *m, const struct limiter_result *r)
{
    permit__v1__acquire_response__init(m);
    m->allowed = r->allowed;
    m->remaining = r->remaining;
    m->limit = r->limit;
    m->retry_after_ms = r->retry_after_ms;
    m->reset_after_ms = r->reset_after_ms;
    m->lease_id = (char *)r->lease_id;     /* "" unless a lease was granted */
    m->lease_expires_after_ms = r->lease_expires_ms;
    m->replayed = r->replayed;
    m->shadow = r->shadow;
    m->reason = (char *)r->reason;         /* "" unless an override blocked it */
    m->exempt = r->exempt;
}

void answer_peek_message(Permit__V1__PeekResponse *m, const struct limiter_result *r)
{
    permit__v1__peek_response__init(m);
    m->remaining = r->remaining;
    m->limit = r->limit;
    m->reset_after_ms = r->reset_after_ms;
    m->shadow = r->shadow;
}

void answer_batch_item(Permit__V1__AcquireBatchResult *item, Permit__V1__AcquireResponse *answer,
                    Permit__V1__BatchError *error, const struct limiter_result *r,
                    const struct permitd_error *err)
{
    permit__v1__acquire_batch_result__init(item);
    if (err->code != PERMITD_OK) {
        permit__v1__batch_error__init(error);
        error->code = (char *)permitd_status_name(err->code);
        error->message = (char *)err->message;
        item->result_case = PERMIT__V1__ACQUIRE_BATCH_RESULT__RESULT_ERROR;
        item->error = error;
    } else {
        answer_decision_message(answer, r);
        item->result_case = PERMIT__V1__ACQUIRE_BATCH_RESULT__RESULT_RESPONSE;
        item->response = answer;
    }
}

struct limiter_request answer_acquire_request(const Permit__V1__AcquireRequest *rq)
{
    return (struct limiter_request){rq->bucket, rq->app, rq->key, rq->permits, rq->request_id,
                                    NULL, NULL};
}

/* Permits are not a Peek's: 0 passes limiter_check(), and the script looks
 * for one. */
struct limiter_request answer_peek_request(const Permit__V1__PeekRequest *rq)
{
    return (struct limiter_request){rq->bucket, rq->app, rq->key, 0, NULL, NULL, NULL};
}

void answer_always_fields(const ProtobufCFieldDescriptor *always[3])
{
    always[0] = protobuf_c_message_descriptor_get_field_by_name(
        &permit__v1__acquire_response__descriptor, "allowed");
    always[1] = protobuf_c_message_descriptor_get_field_by_name(
        &permit__v1__acquire_response__descriptor, "remaining");
    always[2] = NULL;
}

void answer_reserve_message(struct answer_reserve *a, const struct limiter_reserve_item *asked,
                            size_t n, const struct limiter_reserve_answer *r)
{
    permit__v1__reserve_response__init(&a->m);
    a->m.allowed = r->allowed;
    a->m.reservation_id = (char *)r->id;
    a->m.expires_after_ms = r->expires_after_ms;
    a->m.retry_after_ms = r->retry_after_ms;
    a->m.replayed = r->replayed;
    for (size_t i = 0; i < r->n && i < n && i < LIMITER_RESERVE_ITEMS_MAX; i++) {
        permit__v1__reserved_item__init(&a->items[i]);
        a->items[i].bucket = (char *)asked[i].bucket;
        a->items[i].key = (char *)asked[i].key;
        a->items[i].held = r->items[i].held;
        a->items[i].remaining = r->items[i].remaining;
        a->items[i].limit = r->items[i].limit;
        a->items[i].retry_after_ms = r->items[i].retry_after_ms;
        a->ptrs[i] = &a->items[i];
        a->m.n_items = i + 1;
    }
    a->m.items = a->ptrs;
}

void answer_settled_message(struct answer_settled *a, int cancel,
                            const struct limiter_reserve_settled *r)
{
    Permit__V1__ReservationState state =
        r->state == LIMITER_RESERVE_COMMITTED ? PERMIT__V1__RESERVATION_STATE__RESERVATION_STATE_COMMITTED
        : r->state == LIMITER_RESERVE_CANCELLED ? PERMIT__V1__RESERVATION_STATE__RESERVATION_STATE_CANCELLED
        : PERMIT__V1__RESERVATION_STATE__RESERVATION_STATE_EXPIRED;
    size_t n = r->n < LIMITER_RESERVE_ITEMS_MAX ? r->n : LIMITER_RESERVE_ITEMS_MAX;

    permit__v1__commit_response__init(&a->commit);
    permit__v1__cancel_response__init(&a->cancel);
    for (size_t i = 0; i < n; i++) {
        permit__v1__settled_item__init(&a->items[i]);
        a->items[i].bucket = (char *)r->items[i].bucket;
        a->items[i].key = (char *)r->items[i].key;
        a->items[i].held = r->items[i].held;
        a->items[i].actual = r->items[i].actual;
        a->items[i].refunded = r->items[i].refunded;
        a->items[i].charged = r->items[i].charged;
        a->items[i].expiry_refund = r->items[i].expiry_refund;
        a->ptrs[i] = &a->items[i];
    }
    if (cancel) {
        a->cancel.state = state;
        a->cancel.items = a->ptrs;
        a->cancel.n_items = n;
        a->cancel.replayed = r->replayed;
    } else {
        a->commit.state = state;
        a->commit.items = a->ptrs;
        a->commit.n_items = n;
        a->commit.replayed = r->replayed;
    }
}
