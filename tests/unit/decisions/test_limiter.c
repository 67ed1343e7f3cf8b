/*
 * test_limiter.c - the parts of a decision that need no Redis: checking a
 * request (limiter_check) and laying an AcquireBatch out as script calls
 * (limiter_plan.h): which items go, grouped per policy in request order,
 * and what all_or_nothing refuses before anything is sent.
 */
#include <stdint.h>
#include <stdlib.h>

#include "core/config.h"
#include "decisions/limiter.h"
#include "decisions/limiter_plan.h"
#include "decisions/policies.h"
#include "stores/policy.h"
#include "test.h"

static struct config cfg;

static struct limiter *new_limiter(void)
{
    struct limiter *l = NULL;
    struct permitd_error err;

    memset(&cfg, 0, sizeof(cfg));
    strcpy(cfg.redis_prefix, "t");
    /* No Redis: a plan is made without asking it, from the in-memory
     * copies of the policies, installed here as a reload would. */
    CHECK_INT(limiter_new(&cfg, NULL, &l, &err), PERMITD_OK);
    {
        char *alpha[] = {"max_permits", "10", "rate", "2.5", "apps", "web,cli", "version", "3",
                         "id", "7", "rates", "100:1"};
        char *beta[] = {"max_permits", "5", "rate", "1", "apps", "web", "version", "1"};
        char *off[] = {"max_permits", "5", "rate", "1", "apps", "*", "enabled", "0"};
        char *gamma[] = {"max_permits", "5", "rate", "1", "apps", "web", "colocate", "1"};
        char *fw[] = {"max_permits", "5", "apps", "web", "algorithm", "fixed_window",
                      "window_ms", "60000", "rate", ""};
        char *cal[] = {"max_permits", "5", "apps", "web", "algorithm", "fixed_window",
                       "calendar", "month"};
        char *cc[] = {"max_permits", "2", "apps", "web", "algorithm", "concurrency",
                      "lease_ms", "30000"};
        struct policies_entry *e;
        CHECK_INT(policies_parse("fw", fw, 10, &e, &err), PERMITD_OK);
        CHECK_INT(policies_install(limiter_policies(l), e), PERMITD_OK);
        CHECK_INT(policies_parse("cal", cal, 8, &e, &err), PERMITD_OK);
        CHECK_INT(policies_install(limiter_policies(l), e), PERMITD_OK);
        CHECK_INT(policies_parse("cc", cc, 8, &e, &err), PERMITD_OK);
        CHECK_INT(policies_install(limiter_policies(l), e), PERMITD_OK);
        CHECK_INT(policies_parse("alpha", alpha, 12, &e, &err), PERMITD_OK);
        CHECK_INT(policies_install(limiter_policies(l), e), PERMITD_OK);
        CHECK_INT(policies_parse("beta", beta, 8, &e, &err), PERMITD_OK);
        CHECK_INT(policies_install(limiter_policies(l), e), PERMITD_OK);
        CHECK_INT(policies_parse("off", off, 8, &e, &err), PERMITD_OK);
        CHECK_INT(policies_install(limiter_policies(l), e), PERMITD_OK);
        CHECK_INT(policies_parse("gamma", gamma, 8, &e, &err), PERMITD_OK);
        CHECK_INT(policies_install(limiter_policies(l), e), PERMITD_OK);
    }
    return l;
}

/* s (len bytes) equals the NUL-terminated want. */
static int same(const char *s, size_t len, const char *want)
{
    return len == strlen(want) && memcmp(s, want, len) == 0;
}

static void test_limiter_check(void)
{
    struct permitd_error err = {0, ""};
    struct limiter_request ok = {"api", "web", "", 1, NULL, NULL, NULL}, r;
    char long_key[POLICY_KEY_MAX + 2];

    CHECK_INT(limiter_check(&ok, &err), PERMITD_OK);
    r = ok;
    r.permits = 0;                      /* 0 means 1 */
    CHECK_INT(limiter_check(&r, &err), PERMITD_OK);
    r.key = "user:42";
    CHECK_INT(limiter_check(&r, &err), PERMITD_OK);

    r = ok;
    r.permits = -3;
    CHECK_INT(limiter_check(&r, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "permits: -3");

    r = ok;
    r.bucket = "no such/name";
    CHECK_INT(limiter_check(&r, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "bucket");
    CHECK_CONTAINS(err.message, "no such/name");
    r.bucket = "";
    CHECK_INT(limiter_check(&r, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "bucket");

    r = ok;
    r.app = "a,b";
    CHECK_INT(limiter_check(&r, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "app");
    r.app = "*";                        /* "any app" is a policy's, not a caller's */
    CHECK_INT(limiter_check(&r, &err), PERMITD_EINVAL);

    r = ok;
    memset(long_key, 'k', sizeof(long_key) - 1);
    long_key[sizeof(long_key) - 1] = '\0';
    r.key = long_key;
    CHECK_INT(limiter_check(&r, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "key");
}

/* Items are grouped one call per policy, in request order within it; an
 * invalid item gets its own error and is left out; the others go. */
static void test_limiter_plan_groups_per_policy(void)
{
    struct limiter *l = new_limiter();
    const struct limiter_request reqs[] = {
        {"alpha", "web", "x", 2, "req-0", NULL, NULL}, {"beta", "web", "y", 0, NULL, NULL, NULL}, {"alpha", "cli", "z", 1, NULL, NULL, NULL},
        {"bad name", "web", "", 1, NULL, NULL, NULL}, {"beta", "web", "w", 5, NULL, NULL, NULL}, {"alpha", "web", "", -1, NULL, NULL, NULL},
        {"beta", "cli", "v", 1, NULL, NULL, NULL}, {"off", "web", "", 1, NULL, NULL, NULL}, {"alpha", "web", "", 11, NULL, NULL, NULL},
    };
    size_t n = sizeof(reqs) / sizeof(reqs[0]);
    struct limiter_result res[9];
    struct permitd_error errs[9], err = {0, ""};
    struct limiter_plan pl = {.l = l, .reqs = reqs, .n = n, .res = res, .errs = errs};
    char want[POLICY_REDIS_KEY_MAX];
    size_t len;

    CHECK_INT(limiter_plan_make(&pl, &err), PERMITD_OK);
    CHECK_INT(pl.valid, 4);
    CHECK_INT(pl.ngroups, 2);
    CHECK_INT(errs[0].code, PERMITD_OK);
    CHECK_INT(errs[3].code, PERMITD_EINVAL);
    CHECK_CONTAINS(errs[3].message, "bad name");
    CHECK_INT(errs[5].code, PERMITD_EINVAL);
    CHECK_CONTAINS(errs[5].message, "-1");
    /* What the in-memory copy refuses, before any call: an app not in the
     * policy's apps, a disabled policy, more than max_permits. */
    CHECK_INT(errs[6].code, PERMITD_EPERM);
    CHECK_CONTAINS(errs[6].message, "\"cli\" is not allowed to use policy \"beta\"");
    CHECK_INT(errs[7].code, PERMITD_EPRECONDITION);
    CHECK_CONTAINS(errs[7].message, "disabled");
    CHECK_INT(errs[8].code, PERMITD_ERANGE);
    CHECK_CONTAINS(errs[8].message, "11");
    /* alpha's items (0, 2), then beta's (1, 4), each in request order. */
    CHECK_INT(pl.order[0], 0);
    CHECK_INT(pl.order[1], 2);
    CHECK_INT(pl.order[2], 1);
    CHECK_INT(pl.order[3], 4);

    /* Call 0: "take", one policy, the request-id ttl (issue 20: 10 minutes
     * when the config says none), the policy's limits from the in-memory
     * copy (version stamp 7 * 2^24 + 3, max_permits, rate, rate history),
     * then per item its policy's number, permits, request id and lease id;
     * keys: the items' buckets only; a RECORD per item. */
    CHECK_INT(pl.calls[0].nkeys, 2);
    CHECK_INT(pl.calls[0].nargs, 15);
    CHECK_INT(pl.calls[0].nout, 2 * REDIS_RECORD_WORDS);
    CHECK_INT(pl.calls[0].script, REDIS_SCRIPT_BUCKET);
    CHECK(same(pl.calls[0].args[0].p, pl.calls[0].args[0].len, "take"));
    CHECK(same(pl.calls[0].args[1].p, pl.calls[0].args[1].len, "1"));
    CHECK(same(pl.calls[0].args[2].p, pl.calls[0].args[2].len, "600000"));
    CHECK(same(pl.calls[0].args[3].p, pl.calls[0].args[3].len, "117440515"));
    CHECK(same(pl.calls[0].args[4].p, pl.calls[0].args[4].len, "10"));
    CHECK(same(pl.calls[0].args[5].p, pl.calls[0].args[5].len, "2.5"));
    CHECK(same(pl.calls[0].args[6].p, pl.calls[0].args[6].len, "100:1"));
    CHECK(same(pl.calls[0].args[7].p, pl.calls[0].args[7].len, "1"));
    CHECK(same(pl.calls[0].args[8].p, pl.calls[0].args[8].len, "2"));
    CHECK(same(pl.calls[0].args[9].p, pl.calls[0].args[9].len, "req-0"));
    CHECK(same(pl.calls[0].args[10].p, pl.calls[0].args[10].len, ""));
    CHECK(same(pl.calls[0].args[11].p, pl.calls[0].args[11].len, "1"));
    CHECK(same(pl.calls[0].args[12].p, pl.calls[0].args[12].len, "1"));
    CHECK(same(pl.calls[0].args[13].p, pl.calls[0].args[13].len, ""));
    CHECK(same(pl.calls[0].args[14].p, pl.calls[0].args[14].len, ""));
    len = policy_redis_key(want, "t", "alpha", POLICY_KEY_BUCKET, "x");
    CHECK(same(pl.calls[0].keys[0].p, pl.calls[0].keys[0].len, want) && len > 0);
    policy_redis_key(want, "t", "alpha", POLICY_KEY_BUCKET, "z");
    CHECK(same(pl.calls[0].keys[1].p, pl.calls[0].keys[1].len, want));

    /* Call 1: beta; permits 0 is sent as 1. No item carries a request id
     * or a lease id: the compact call, ARGV[3] "" and 2 arguments an item
     * (its policy's number and permits). */
    if (pl.ngroups < 2) {
        limiter_plan_free(&pl);
        limiter_free(l);
        return;
    }
    CHECK_INT(pl.calls[1].nkeys, 2);
    CHECK_INT(pl.calls[1].nargs, 11);
    CHECK(same(pl.calls[1].args[0].p, pl.calls[1].args[0].len, "take"));
    CHECK(same(pl.calls[1].args[2].p, pl.calls[1].args[2].len, ""));
    CHECK(same(pl.calls[1].args[6].p, pl.calls[1].args[6].len, ""));   /* no rate history */
    CHECK(same(pl.calls[1].args[7].p, pl.calls[1].args[7].len, "1"));
    CHECK(same(pl.calls[1].args[8].p, pl.calls[1].args[8].len, "1"));
    CHECK(same(pl.calls[1].args[9].p, pl.calls[1].args[9].len, "1"));
    CHECK(same(pl.calls[1].args[10].p, pl.calls[1].args[10].len, "5"));
    policy_redis_key(want, "t", "beta", POLICY_KEY_BUCKET, "y");
    CHECK(same(pl.calls[1].keys[0].p, pl.calls[1].keys[0].len, want));
    policy_redis_key(want, "t", "beta", POLICY_KEY_BUCKET, "w");
    CHECK(same(pl.calls[1].keys[1].p, pl.calls[1].keys[1].len, want));

    limiter_plan_free(&pl);
    limiter_free(l);
}

/* all_or_nothing: one call ("all") for the items of one policy; policies
 * in different cluster slots refuse the whole batch, naming both; one
 * invalid item aborts the others and nothing is sent. */
static void test_limiter_plan_all_or_nothing(void)
{
    struct limiter *l = new_limiter();
    struct limiter_result res[3];
    struct permitd_error errs[3], err = {0, ""};

    {
        /* gamma sets colocate: its keyed buckets share the policy's slot. */
        const struct limiter_request reqs[] = {
            {"gamma", "web", "x", 1, NULL, NULL, NULL}, {"gamma", "web", "y", 2, NULL, NULL, NULL}, {"gamma", "web", "x", 3, NULL, NULL, NULL},
        };
        struct limiter_plan pl = {.l = l, .reqs = reqs, .n = 3, .all_or_nothing = 1,
                                  .res = res, .errs = errs};
        char want[POLICY_REDIS_KEY_MAX];
        CHECK_INT(limiter_plan_make(&pl, &err), PERMITD_OK);
        CHECK_INT(pl.ngroups, 1);
        policy_redis_key(want, "t", "gamma", POLICY_KEY_BUCKET_COLOCATED, "y");
        CHECK(same(pl.calls[0].keys[1].p, pl.calls[0].keys[1].len, want));
        CHECK_INT(pl.calls[0].nkeys, 3);
        CHECK(same(pl.calls[0].args[0].p, pl.calls[0].args[0].len, "all"));
        CHECK_INT(pl.calls[0].nargs, 3 + 4 + 2 * 3);    /* compact: no request id */
        CHECK(same(pl.calls[0].args[12].p, pl.calls[0].args[12].len, "3"));
        limiter_plan_free(&pl);
    }
    {
        /* alpha's keyed buckets spread: keys in different slots refuse the
         * batch, naming the items outside item 0's slot. */
        const struct limiter_request reqs[] = {
            {"alpha", "web", "x", 1, NULL, NULL, NULL}, {"alpha", "web", "y", 1, NULL, NULL, NULL}, {"alpha", "web", "z", 1, NULL, NULL, NULL},
        };
        struct limiter_plan pl = {.l = l, .reqs = reqs, .n = 3, .all_or_nothing = 1,
                                  .res = res, .errs = errs};
        CHECK_INT(limiter_plan_make(&pl, &err), PERMITD_EPRECONDITION);
        CHECK_CONTAINS(err.message, "items 1 (policy \"alpha\" key \"y\"), 2 (policy "
                                    "\"alpha\" key \"z\") are not in the Redis Cluster slot "
                                    "of item 0");
        CHECK_CONTAINS(err.message, "colocate");
        limiter_plan_free(&pl);
    }
    {
        /* Two policies: in different slots (else the check could not fail). */
        const struct limiter_request reqs[] = {{"alpha", "web", "", 1, NULL, NULL, NULL}, {"beta", "web", "", 1, NULL, NULL, NULL}};
        struct limiter_plan pl = {.l = l, .reqs = reqs, .n = 2, .all_or_nothing = 1,
                                  .res = res, .errs = errs};
        CHECK(policy_slot("alpha") != policy_slot("beta"));
        CHECK_INT(limiter_plan_make(&pl, &err), PERMITD_EPRECONDITION);
        CHECK_CONTAINS(err.message, "\"alpha\"");
        CHECK_CONTAINS(err.message, "\"beta\"");
        limiter_plan_free(&pl);
    }
    {
        const struct limiter_request reqs[] = {
            {"alpha", "web", "x", 1, NULL, NULL, NULL}, {"alpha", "web", "y", -2, NULL, NULL, NULL}, {"alpha", "web", "z", 1, NULL, NULL, NULL},
        };
        struct limiter_plan pl = {.l = l, .reqs = reqs, .n = 3, .all_or_nothing = 1,
                                  .res = res, .errs = errs};
        CHECK_INT(limiter_plan_make(&pl, &err), PERMITD_OK);
        CHECK_INT(pl.ngroups, 0);       /* nothing goes to Redis */
        CHECK_INT(errs[0].code, PERMITD_EABORTED);
        CHECK_INT(errs[1].code, PERMITD_EINVAL);
        CHECK_INT(errs[2].code, PERMITD_EABORTED);
        CHECK_CONTAINS(errs[0].message, "invalid");
        limiter_plan_free(&pl);
    }
    limiter_free(l);
}

/* In a cluster (slot_calls), a call's keys share one slot: alpha's items
 * x and z (spread buckets, different slots) go in separate calls. */
static void test_limiter_plan_slot_calls(void)
{
    struct limiter *l = new_limiter();
    const struct limiter_request reqs[] = {{"alpha", "web", "x", 1, NULL, NULL, NULL}, {"alpha", "web", "z", 1, NULL, NULL, NULL}};
    struct limiter_result res[2];
    struct permitd_error errs[2], err = {0, ""};
    struct limiter_plan pl = {.l = l, .reqs = reqs, .n = 2, .res = res, .errs = errs};

    CHECK_INT(limiter_plan_make(&pl, &err), PERMITD_OK);
    CHECK_INT(pl.ngroups, 1);           /* a single Redis: one call per policy */
    limiter_plan_free(&pl);
    limiter_set_slot_calls(l, 1);
    pl = (struct limiter_plan){.l = l, .reqs = reqs, .n = 2, .res = res, .errs = errs};
    CHECK_INT(limiter_plan_make(&pl, &err), PERMITD_OK);
    CHECK_INT(pl.ngroups, 2);
    CHECK_INT(pl.calls[0].nkeys, 1);
    CHECK_INT(pl.calls[1].nkeys, 1);
    limiter_plan_free(&pl);
    limiter_free(l);
}

/* The batch's own limits: none is nothing to do; over LIMITER_BATCH_MAX is
 * refused, the count named. */
static void test_limiter_plan_bounds(void)
{
    struct limiter *l = new_limiter();
    struct permitd_error err = {0, ""};
    struct limiter_request one = {"alpha", "web", "", 1, NULL, NULL, NULL};
    struct limiter_plan pl = {.l = l, .reqs = &one, .n = 0};

    CHECK_INT(limiter_plan_make(&pl, &err), PERMITD_OK);
    CHECK_INT(pl.ngroups, 0);
    limiter_plan_free(&pl);

    pl = (struct limiter_plan){.l = l, .reqs = &one, .n = LIMITER_BATCH_MAX + 1};
    CHECK_INT(limiter_plan_make(&pl, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "1001 items");
    limiter_plan_free(&pl);
    limiter_free(l);
}

/* Issue 20: one script per call, by the policy's algorithm; each
 * algorithm's p1 and p2; a concurrency take draws a lease id of 32 hex
 * characters; all_or_nothing over two algorithms is refused, naming both. */
static void test_limiter_plan_algorithms(void)
{
    struct limiter *l = new_limiter();
    const struct limiter_request reqs[] = {
        {"cc", "web", "", 1, NULL, NULL, NULL}, {"fw", "web", "u", 2, "r1", NULL, NULL},
        {"alpha", "web", "", 1, NULL, NULL, NULL}, {"cal", "web", "", 1, NULL, NULL, NULL},
    };
    struct limiter_result res[4];
    struct permitd_error errs[4], err = {0, ""};
    struct limiter_plan pl = {.l = l, .reqs = reqs, .n = 4, .res = res, .errs = errs};
    char want[POLICY_REDIS_KEY_MAX];

    CHECK_INT(limiter_plan_make(&pl, &err), PERMITD_OK);
    CHECK_INT(pl.ngroups, 4);
    for (size_t g = 0; g < pl.ngroups && g < 4; g++) {
        const struct redis_script_call *c = &pl.calls[g];
        const struct redis_str *a = c->args;
        /* wide (4 arguments an item) for a request id or a lease id:
         * fw's item, cc's take; compact (2, ARGV[3] "") for the others */
        if (c->script == REDIS_SCRIPT_BUCKET) {
            CHECK(same(a[5].p, a[5].len, "2.5"));
            CHECK_INT(c->nargs, 3 + 4 + 2);
            CHECK(same(a[2].p, a[2].len, ""));
        } else if (c->script == REDIS_SCRIPT_FIXED_WINDOW && same(a[6].p, a[6].len, "")) {
            CHECK_INT(c->nargs, 3 + 4 + 4);
            CHECK(same(a[2].p, a[2].len, "600000"));
            CHECK(same(a[5].p, a[5].len, "60000"));     /* window_ms, no calendar */
            CHECK(same(a[9].p, a[9].len, "r1"));
            policy_bucket_key(want, "t", "fw", POLICY_FIXED_WINDOW, 0, "u");
            CHECK(same(c->keys[0].p, c->keys[0].len, want));
        } else if (c->script == REDIS_SCRIPT_FIXED_WINDOW) {
            CHECK(same(a[6].p, a[6].len, "month"));
            CHECK(same(a[5].p, a[5].len, "0"));
            CHECK_INT(c->nargs, 3 + 4 + 2);
        } else {
            CHECK_INT(c->script, REDIS_SCRIPT_CONCURRENCY);
            CHECK_INT(c->nargs, 3 + 4 + 4);
            CHECK(same(a[5].p, a[5].len, "30000"));     /* lease_ms */
            CHECK(same(a[6].p, a[6].len, ""));
            CHECK_INT(a[10].len, LIMITER_LEASE_ID_LEN);
            CHECK_INT(strspn(a[10].p, "0123456789abcdef"), LIMITER_LEASE_ID_LEN);
        }
    }
    limiter_plan_free(&pl);

    {
        const struct limiter_request two[] = {{"fw", "web", "", 1, NULL, NULL, NULL},
                                              {"alpha", "web", "", 1, NULL, NULL, NULL}};
        struct limiter_plan all = {.l = l, .reqs = two, .n = 2, .all_or_nothing = 1,
                                   .res = res, .errs = errs};
        CHECK_INT(limiter_plan_make(&all, &err), PERMITD_EPRECONDITION);
        CHECK_CONTAINS(err.message, "fixed_window");
        CHECK_CONTAINS(err.message, "token_bucket");
        limiter_plan_free(&all);
    }
    limiter_free(l);
}

/* Issue 42: what a call sends is the plan's own, request ids included: a
 * queued batch answered at its deadline leaves its caller's memory, while
 * Redis may be sent its calls again (NOSCRIPT, a redirect). */
static void test_limiter_plan_owns_request_ids(void)
{
    struct limiter *l = new_limiter();
    struct permitd_error err = {0, ""}, errs[2];
    struct limiter_result res[2];
    char *ids = malloc(32);
    struct limiter_request reqs[2] = {{"alpha", "web", "k1", 1, NULL, NULL, NULL},
                                      {"alpha", "web", "k2", 1, NULL, NULL, NULL}};
    struct limiter_plan pl = {.l = l, .reqs = reqs, .n = 2, .res = res, .errs = errs};

    strcpy(ids, "rid-1");
    strcpy(ids + 16, "rid-2");
    reqs[0].request_id = ids;
    reqs[1].request_id = ids + 16;
    CHECK_INT(limiter_plan_make(&pl, &err), PERMITD_OK);
    CHECK_INT(pl.ngroups, 1);
    CHECK_INT(pl.calls[0].nargs, 3 + 4 + 2 * 4);  /* wide: 4 an item */
    memset(ids, 'x', 31);   /* the caller's strings gone */
    free(ids);
    CHECK(same(pl.calls[0].args[7 + 2].p, pl.calls[0].args[7 + 2].len, "rid-1"));
    CHECK(same(pl.calls[0].args[11 + 2].p, pl.calls[0].args[11 + 2].len, "rid-2"));
    limiter_plan_free(&pl);
    limiter_free(l);
}

int main(void)
{
    TEST_RUN(test_limiter_plan_algorithms);
    TEST_RUN(test_limiter_check);
    TEST_RUN(test_limiter_plan_groups_per_policy);
    TEST_RUN(test_limiter_plan_all_or_nothing);
    TEST_RUN(test_limiter_plan_bounds);
    TEST_RUN(test_limiter_plan_slot_calls);
    TEST_RUN(test_limiter_plan_owns_request_ids);
    return TEST_REPORT();
}
