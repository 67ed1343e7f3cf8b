/*
 * test_service.c - the decision service's checks, without Redis
 * (server/decisions/service.c): a take's strings refused as Connect's
 * codecs refuse them (the same message, for a single take and a batch
 * item), an Acquire's refusal counted and a Peek's not, the caller's key
 * checked (off, missing, good), and a batch's apps held to its key's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/utf8.h"
#include "decisions/service.h"
#include "test.h"

static struct config cfg;

struct fixture {
    struct limiter *l;
    struct stats *st;
    struct service *s;
};

static void setup(struct fixture *f)
{
    struct permitd_error err = {0, ""};

    memset(&cfg, 0, sizeof(cfg));
    strcpy(cfg.redis_prefix, "t");
    CHECK_INT(limiter_new(&cfg, NULL, &f->l, &err), PERMITD_OK);
    CHECK_INT(stats_new(16, &f->st, &err), PERMITD_OK);
    CHECK_INT(service_new(f->l, f->st, &f->s, &err), PERMITD_OK);
}

static void teardown(struct fixture *f)
{
    service_free(f->s);
    stats_free(f->st);
    limiter_free(f->l);
}

/* The value of one /metrics series, or -1. */
static long long series(struct stats *st, const char *name)
{
    char *text = NULL, *at;
    size_t len = 0;
    long long v = -1;
    FILE *out = open_memstream(&text, &len);

    stats_prometheus(st, out);
    fclose(out);
    if ((at = strstr(text, name)) != NULL)
        v = atoll(at + strlen(name) + 1);
    free(text);
    return v;
}

static void test_service_check_utf8_as_connect(void)
{
    struct fixture f;
    struct permitd_error want = {0, ""}, got = {0, ""};
    Permit__V1__AcquireRequest rq = PERMIT__V1__ACQUIRE_REQUEST__INIT;
    Permit__V1__AcquireRequest items[4], *ptrs[4];
    Permit__V1__AcquireBatchRequest batch = PERMIT__V1__ACQUIRE_BATCH_REQUEST__INIT;
    struct service_caller c = {NULL, "", ""};

    setup(&f);
    rq.bucket = "p";
    rq.app = "web";
    rq.key = "k\xff\xfe";
    CHECK_INT(utf8_check_message(&rq.base, &want), PERMITD_EINVAL);
    {
        struct limiter_request lr = {rq.bucket, rq.app, rq.key, 1, "", NULL, NULL};
        CHECK_INT(service_check(f.s, SERVICE_ACQUIRE, &lr, "", &got), PERMITD_EINVAL);
    }
    CHECK_STR(got.message, want.message);       /* key: "k\xff\xfe" is not valid UTF-8 ... */
    /* A batch item, named by its place: as utf8_check_message() names it. */
    for (int i = 0; i < 4; i++) {
        permit__v1__acquire_request__init(&items[i]);
        items[i].bucket = "p";
        items[i].app = "web";
        ptrs[i] = &items[i];
    }
    items[3].app = "w\xc0";
    batch.n_requests = 4;
    batch.requests = ptrs;
    CHECK_INT(utf8_check_message(&batch.base, &want), PERMITD_EINVAL);
    CHECK_INT(service_batch_authorize(f.s, &c, (const Permit__V1__AcquireRequest *const *)ptrs, 4,
                                      &got), PERMITD_EINVAL);
    CHECK_STR(got.message, want.message);
    CHECK(strncmp(got.message, "requests[3].app: ", 17) == 0);
    teardown(&f);
}

static void test_service_check_counts_acquires_only(void)
{
    struct fixture f;
    struct permitd_error err = {0, ""};
    struct limiter_request bad = {"no such name!", "web", "", 1, "", NULL, NULL};
    const char *name = "permitd_acquires_total{policy=\"\",result=\"invalid_argument\"}";

    setup(&f);
    CHECK_INT(series(f.st, name), -1);
    CHECK_INT(service_check(f.s, SERVICE_ACQUIRE, &bad, "", &err), PERMITD_EINVAL);
    CHECK_INT(series(f.st, name), 1);
    /* A Peek asks, it takes nothing: its refusal is not an Acquire's. */
    CHECK_INT(service_check(f.s, SERVICE_PEEK, &bad, "", &err), PERMITD_EINVAL);
    CHECK_INT(series(f.st, name), 1);
    teardown(&f);
}

static void test_service_authorize_keys(void)
{
    struct fixture f;
    struct permitd_error err = {0, ""};
    struct service_caller c = {NULL, "x", "x"};
    struct appkeys *keys;
    struct appkeys_minted m;
    struct apps_key_row row;
    char header[160];
    Permit__V1__AcquireRequest items[2], *ptrs[2];

    setup(&f);
    /* No keys: the request's own app stands (c.app ""). */
    CHECK_INT(service_authorize(f.s, &c, "web", &err), PERMITD_OK);
    CHECK_STR(c.app, "");
    CHECK_STR(c.key_prefix, "");
    CHECK_INT(appkeys_new(0, &keys, &err), PERMITD_OK);
    CHECK_INT(appkeys_mint(&m, &err), PERMITD_OK);
    memset(&row, 0, sizeof(row));
    snprintf(row.prefix, sizeof(row.prefix), "%s", m.prefix);
    snprintf(row.app, sizeof(row.app), "billing");
    snprintf(row.hash, sizeof(row.hash), "%s", m.hash_hex);
    row.app_enabled = 1;
    CHECK_INT(appkeys_replace(keys, &row, 1, appkeys_generation(keys), &err), PERMITD_OK);
    service_set_appkeys(f.s, keys);
    CHECK_INT(service_authorize(f.s, &c, "", &err), PERMITD_EUNAUTHENTICATED);
    snprintf(header, sizeof(header), "Bearer %s", m.key);
    c.authorization = header;
    CHECK_INT(service_authorize(f.s, &c, "", &err), PERMITD_OK);
    CHECK_STR(c.app, "billing");
    CHECK_STR(c.key_prefix, m.prefix);
    CHECK_INT(service_authorize(f.s, &c, "web", &err), PERMITD_EPERM);
    /* A batch: one key, every item's app its app or "". */
    for (int i = 0; i < 2; i++) {
        permit__v1__acquire_request__init(&items[i]);
        items[i].bucket = "p";
        ptrs[i] = &items[i];
    }
    items[0].app = "billing";
    CHECK_INT(service_batch_authorize(f.s, &c, (const Permit__V1__AcquireRequest *const *)ptrs, 2,
                                      &err), PERMITD_OK);
    items[1].app = "web";
    CHECK_INT(service_batch_authorize(f.s, &c, (const Permit__V1__AcquireRequest *const *)ptrs, 2,
                                      &err), PERMITD_EPERM);
    CHECK(strncmp(err.message, "requests[1].app: \"web\" is not the app of the API key", 52) == 0);
    teardown(&f);
    appkeys_free(keys);
}

int main(void)
{
    TEST_RUN(test_service_check_utf8_as_connect);
    TEST_RUN(test_service_check_counts_acquires_only);
    TEST_RUN(test_service_authorize_keys);
    return TEST_REPORT();
}
