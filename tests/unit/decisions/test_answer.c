/*
 * test_answer.c - the permit.v1 answers every door writes
 * (server/decisions/answer.c): what an Acquire or a Peek asks the limiter, the
 * fields of the replies (single, Peek, one AcquireBatch item, and the JSON
 * fields written even at false/0), and the RateLimit, RateLimit-Policy and
 * Retry-After header values of a decision: seconds rounded up, the window,
 * Retry-After on denials only.
 */
#include <stdint.h>
#include <stdlib.h>

#include "decisions/answer.h"
#include "transport/json.h"
#include "test.h"

/* The value of resp's header name, or NULL; counts it in *count. */
static const char *header(const struct http_response *resp, const char *name, int *count)
{
    const char *v = NULL;

    *count = 0;
    for (int i = 0; i < resp->nheaders; i++)
        if (strcmp(resp->headers[i].name, name) == 0) {
            v = resp->headers[i].value;
            (*count)++;
        }
    return v;
}

static void test_answer_acquire_request(void)
{
    Permit__V1__AcquireRequest rq = PERMIT__V1__ACQUIRE_REQUEST__INIT;
    struct limiter_request lr;

    rq.bucket = "api";
    rq.app = "web";
    rq.key = "user:42";
    rq.permits = 7;
    lr = answer_acquire_request(&rq);
    CHECK(lr.bucket == rq.bucket);
    CHECK(lr.app == rq.app);
    CHECK(lr.key == rq.key);
    CHECK_INT(lr.permits, 7);

    /* Passed through as they are: limiter_check() judges them, not this. */
    rq.permits = -3;
    rq.key = "";
    lr = answer_acquire_request(&rq);
    CHECK_INT(lr.permits, -3);
    CHECK_STR(lr.key, "");
    rq.permits = 0;
    CHECK_INT(answer_acquire_request(&rq).permits, 0);
    rq.permits = INT64_MAX;
    CHECK_INT(answer_acquire_request(&rq).permits, INT64_MAX);
}

static void test_answer_peek_request(void)
{
    Permit__V1__PeekRequest rq = PERMIT__V1__PEEK_REQUEST__INIT;
    struct limiter_request lr;

    rq.bucket = "api";
    rq.app = "web";
    rq.key = "10.0.0.1";
    lr = answer_peek_request(&rq);
    CHECK(lr.bucket == rq.bucket);
    CHECK(lr.app == rq.app);
    CHECK(lr.key == rq.key);
    CHECK_INT(lr.permits, 0);      /* a Peek takes nothing */
}

/* An allowed decision: both RateLimit headers, no Retry-After; t is the
 * time until full in seconds, rounded up. */
static void test_answer_headers_allowed(void)
{
    struct limiter_result r = {1, 9, 10, 0, 1500, 20, 9000000, 0, 0, 0, 0, "", 0, 0, 0, ""};
    struct http_response resp;
    int n;

    http_response_init(&resp);
    answer_ratelimit_headers(&resp, "api", &r);
    CHECK_STR(header(&resp, "RateLimit-Policy", &n), "\"api\";q=10;w=20");
    CHECK_INT(n, 1);
    CHECK_STR(header(&resp, "RateLimit", &n), "\"api\";r=9;t=2");
    CHECK_INT(n, 1);
    CHECK(header(&resp, "Retry-After", &n) == NULL);
    CHECK_INT(resp.nheaders, 2);
}

/* A denial adds Retry-After: the wait in whole seconds, rounded up, so a
 * client that waits that long succeeds. */
static void test_answer_headers_denied(void)
{
    struct limiter_result r = {0, 0, 5, 1001, 4999, 5, 0, 0, 0, 0, 0, "", 0, 0, 0, ""};
    struct http_response resp;
    int n;

    http_response_init(&resp);
    answer_ratelimit_headers(&resp, "login.attempts", &r);
    CHECK_STR(header(&resp, "RateLimit-Policy", &n), "\"login.attempts\";q=5;w=5");
    CHECK_STR(header(&resp, "RateLimit", &n), "\"login.attempts\";r=0;t=5");
    CHECK_STR(header(&resp, "Retry-After", &n), "2");
    CHECK_INT(n, 1);
    CHECK_INT(resp.nheaders, 3);
}

/* Rounding up at the edges: whole seconds stay, one millisecond more is
 * another second, anything at or below 0 is 0. */
static void test_answer_headers_round_up(void)
{
    static const struct {
        int64_t ms;
        const char *seconds;
    } cases[] = {
        {0, "0"}, {1, "1"}, {999, "1"}, {1000, "1"}, {1001, "2"}, {60000, "60"},
        {60001, "61"}, {-5, "0"}, {86400000, "86400"},
    };
    char want[64];
    int n;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct limiter_result r = {0, 0, 1, cases[i].ms, cases[i].ms, 1, 0, 0, 0, 0, 0, "", 0, 0, 0, ""};
        struct http_response resp;

        http_response_init(&resp);
        answer_ratelimit_headers(&resp, "p", &r);
        CHECK_STR(header(&resp, "Retry-After", &n), cases[i].seconds);
        snprintf(want, sizeof(want), "\"p\";r=0;t=%s", cases[i].seconds);
        CHECK_STR(header(&resp, "RateLimit", &n), want);
    }
}

/* The longest policy name with the widest numbers fits whole: nothing is
 * cut off the end of a header a proxy acts on. */
static void test_answer_headers_widest(void)
{
    char name[129], want[256];
    /* The largest milliseconds there are: rounding them up to seconds must
     * not overflow (it did, as (a + b - 1) / b: UBSan stopped the test). */
    const int64_t ms = INT64_MAX;
    struct limiter_result r = {0, INT64_MAX, INT64_MAX, ms, ms, INT64_MAX, 0, 0, 0, 0, 0, "", 0, 0, 0, ""};
    struct http_response resp;
    int n;

    memset(name, 'a', 128);
    name[128] = '\0';
    http_response_init(&resp);
    answer_ratelimit_headers(&resp, name, &r);
    snprintf(want, sizeof(want), "\"%s\";q=%lld;w=%lld", name, (long long)INT64_MAX,
             (long long)INT64_MAX);
    CHECK_STR(header(&resp, "RateLimit-Policy", &n), want);
    snprintf(want, sizeof(want), "\"%s\";r=%lld;t=%lld", name, (long long)INT64_MAX,
             (long long)(INT64_MAX / 1000 + 1));
    CHECK_STR(header(&resp, "RateLimit", &n), want);
    snprintf(want, sizeof(want), "%lld", (long long)(INT64_MAX / 1000 + 1));
    CHECK_STR(header(&resp, "Retry-After", &n), want);

    /* Negative numbers keep their sign (digits written by hand). */
    r = (struct limiter_result){1, -1, INT64_MIN, 0, 0, -12, 0, 0, 0, 0, 0, "", 0, 0, 0, ""};
    http_response_init(&resp);
    answer_ratelimit_headers(&resp, "p", &r);
    CHECK_STR(header(&resp, "RateLimit-Policy", &n), "\"p\";q=-9223372036854775808;w=-12");
    CHECK_STR(header(&resp, "RateLimit", &n), "\"p\";r=-1;t=0");
}

static void test_answer_decision_message(void)
{
    struct limiter_result r = {0, 3, 10, 250, 7000, 10, 3500000, 0, 0, 0, 0, "", 0, 0, 0, ""};
    Permit__V1__AcquireResponse m;

    memset(&m, 0x5a, sizeof(m));            /* initialised by the call */
    answer_decision_message(&m, &r);
    CHECK(m.base.descriptor == &permit__v1__acquire_response__descriptor);
    CHECK_INT(m.allowed, 0);
    CHECK_INT(m.remaining, 3);
    CHECK_INT(m.limit, 10);
    CHECK_INT(m.retry_after_ms, 250);
    CHECK_INT(m.reset_after_ms, 7000);
    r.allowed = 1;
    r.retry_after_ms = 0;
    answer_decision_message(&m, &r);
    CHECK_INT(m.allowed, 1);
    CHECK_INT(m.retry_after_ms, 0);
}

/* A shadow answer (issue 23): allowed and flagged, with the denial's
 * figures in the message and in RateLimit, and no Retry-After (a proxy
 * would refuse on it). */
static void test_answer_shadow_answer(void)
{
    struct limiter_result r = {1, 0, 2, 4000, 9000, 9, 0, 0, 0, 0, 1, "", 0, 0, 0, ""};
    Permit__V1__AcquireResponse m;
    struct http_response resp;
    int n;

    answer_decision_message(&m, &r);
    CHECK_INT(m.allowed, 1);
    CHECK_INT(m.shadow, 1);
    CHECK_INT(m.remaining, 0);
    CHECK_INT(m.retry_after_ms, 4000);
    http_response_init(&resp);
    answer_ratelimit_headers(&resp, "new-limit", &r);
    CHECK_STR(header(&resp, "RateLimit", &n), "\"new-limit\";r=0;t=9");
    CHECK(header(&resp, "Retry-After", &n) == NULL);
    r.shadow = 0;
    answer_decision_message(&m, &r);
    CHECK_INT(m.shadow, 0);
}

static void test_answer_peek_message(void)
{
    struct limiter_result r = {1, 4, 12, 0, 2500, 6, 4000000, 0, 0, 0, 0, "", 0, 0, 0, ""};
    Permit__V1__PeekResponse m;

    memset(&m, 0x5a, sizeof(m));
    answer_peek_message(&m, &r);
    CHECK(m.base.descriptor == &permit__v1__peek_response__descriptor);
    CHECK_INT(m.remaining, 4);
    CHECK_INT(m.limit, 12);
    CHECK_INT(m.reset_after_ms, 2500);
}

/* One AcquireBatch answer: the decision, or the item's own error by its
 * Connect code name and message. */
static void test_answer_batch_item(void)
{
    struct limiter_result r = {1, 8, 10, 0, 400, 2, 0, 0, 0, 0, 0, "", 0, 0, 0, ""};
    struct permitd_error ok = {PERMITD_OK, ""};
    struct permitd_error bad = {PERMITD_ENOTFOUND, "bucket \"nope\": no such policy"};
    Permit__V1__AcquireBatchResult item;
    Permit__V1__AcquireResponse answer;
    Permit__V1__BatchError error;

    memset(&error, 0x5a, sizeof(error));
    answer_batch_item(&item, &answer, &error, &r, &ok);
    CHECK(item.base.descriptor == &permit__v1__acquire_batch_result__descriptor);
    CHECK_INT(item.result_case, PERMIT__V1__ACQUIRE_BATCH_RESULT__RESULT_RESPONSE);
    CHECK(item.response == &answer);
    CHECK_INT(answer.allowed, 1);
    CHECK_INT(answer.remaining, 8);
    CHECK_INT(answer.limit, 10);
    CHECK_INT(answer.reset_after_ms, 400);

    answer_batch_item(&item, &answer, &error, &r, &bad);
    CHECK_INT(item.result_case, PERMIT__V1__ACQUIRE_BATCH_RESULT__RESULT_ERROR);
    CHECK(item.error == &error);
    CHECK(error.base.descriptor == &permit__v1__batch_error__descriptor);
    CHECK_STR(error.code, "not_found");
    CHECK_STR(error.message, "bucket \"nope\": no such policy");

    bad.code = PERMITD_EPRECONDITION;
    answer_batch_item(&item, &answer, &error, &r, &bad);
    CHECK_STR(error.code, "failed_precondition");
}

/* A denial in JSON says allowed false and remaining 0 outright (proto3
 * JSON would leave both out), the other zero fields stay out. */
static void test_answer_always_fields(void)
{
    const ProtobufCFieldDescriptor *always[3];
    struct limiter_result r = {0, 0, 5, 0, 0, 5, 0, 0, 0, 0, 0, "", 0, 0, 0, ""};
    Permit__V1__AcquireResponse m;
    size_t len = 0;
    char *json;

    memset(always, 0x5a, sizeof(always));
    answer_always_fields(always);
    CHECK(always[0] != NULL && strcmp(always[0]->name, "allowed") == 0);
    CHECK(always[1] != NULL && strcmp(always[1]->name, "remaining") == 0);
    CHECK(always[2] == NULL);

    answer_decision_message(&m, &r);
    json = json_encode_always(&m.base, always, NULL, &len);
    CHECK_STR(json, "{\"allowed\":false,\"remaining\":\"0\",\"limit\":\"5\"}");
    free(json);
}

int main(void)
{
    TEST_RUN(test_answer_acquire_request);
    TEST_RUN(test_answer_peek_request);
    TEST_RUN(test_answer_headers_allowed);
    TEST_RUN(test_answer_shadow_answer);
    TEST_RUN(test_answer_headers_denied);
    TEST_RUN(test_answer_headers_round_up);
    TEST_RUN(test_answer_headers_widest);
    TEST_RUN(test_answer_decision_message);
    TEST_RUN(test_answer_peek_message);
    TEST_RUN(test_answer_batch_item);
    TEST_RUN(test_answer_always_fields);
    return TEST_REPORT();
}
