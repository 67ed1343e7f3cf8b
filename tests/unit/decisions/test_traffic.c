/*
 * test_traffic.c - the running totals per (policy, app) behind the traffic
 * history (server/decisions/traffic.c), read back as the writer
 * (control/trafficlog.c) reads them: traffic_totals().
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "decisions/traffic.h"
#include "test.h"

static struct traffic *new_traffic(size_t pairs)
{
    struct permitd_error err = {0, ""};
    struct traffic *t = NULL;

    if (traffic_new(pairs, &t, &err) != PERMITD_OK) {
        fprintf(stderr, "traffic_new: %s\n", err.message);
        exit(1);
    }
    return t;
}

/* What traffic_totals() reported, by "policy/app". */
struct seen {
    char key[300][260];
    uint64_t v[300][TRAFFIC_COUNTERS];
    size_t places[300];
    size_t n;
};

static void each(void *ud, size_t place, const char *policy, const char *app,
                 const uint64_t total[TRAFFIC_COUNTERS])
{
    struct seen *s = ud;

    if (s->n >= 300)
        return;
    snprintf(s->key[s->n], sizeof(s->key[0]), "%s/%s", policy, app);
    memcpy(s->v[s->n], total, sizeof(s->v[0]));
    s->places[s->n] = place;
    s->n++;
}

static const uint64_t *find(const struct seen *s, const char *key)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->key[i], key) == 0)
            return s->v[i];
    return NULL;
}

static void test_traffic_counts_per_policy_and_app(void)
{
    struct traffic *t = new_traffic(100);
    struct seen s = {0};
    const uint64_t *v;

    traffic_record(t, "pay", "web", TRAFFIC_ALLOWED);
    traffic_record(t, "pay", "web", TRAFFIC_ALLOWED);
    traffic_record(t, "pay", "web", TRAFFIC_DENIED);
    traffic_record(t, "pay", "jobs", TRAFFIC_SHADOW_DENIED);
    traffic_record(t, "pay", NULL, TRAFFIC_ERRORS);
    traffic_record(t, "search", "web", TRAFFIC_PASSES);
    traffic_record_take(t, "search", "web", TRAFFIC_DENIED, 1);
    traffic_record_take(t, "search", "web", TRAFFIC_ALLOWED, 0);
    traffic_totals(t, each, &s);
    CHECK((v = find(&s, "pay/web")) != NULL);
    if (v != NULL) {
        CHECK_INT(v[TRAFFIC_ALLOWED], 2);
        CHECK_INT(v[TRAFFIC_DENIED], 1);
    }
    CHECK((v = find(&s, "pay/jobs")) != NULL && v[TRAFFIC_SHADOW_DENIED] == 1);
    CHECK((v = find(&s, "pay/")) != NULL && v[TRAFFIC_ERRORS] == 1);
    CHECK((v = find(&s, "search/web")) != NULL && v[TRAFFIC_PASSES] == 1);
    if (v != NULL) {
        CHECK_INT(v[TRAFFIC_DENIED], 1);
        CHECK_INT(v[TRAFFIC_ALLOWED], 1);
        CHECK_INT(v[TRAFFIC_KEYED], 1);         /* the denied take named a key */
    }
    /* "pay"+"web" is not "payw"+"eb". */
    CHECK(find(&s, "payw/eb") == NULL);
    CHECK_INT(traffic_dropped(t), 0);
    traffic_free(t);
}

/* A client's made-up app never reaches MySQL as it is: it counts as no app. */
static void test_traffic_names_outside_the_rule_count_as_no_app(void)
{
    struct traffic *t = new_traffic(10);
    struct seen s = {0};
    char long_name[200];

    memset(long_name, 'a', sizeof(long_name) - 1);
    long_name[sizeof(long_name) - 1] = '\0';
    traffic_record(t, "pay", "x'); DROP TABLE traffic_minutes; --", TRAFFIC_ALLOWED);
    traffic_record(t, "pay", long_name, TRAFFIC_ALLOWED);
    traffic_record(t, "pay", "-dash-first", TRAFFIC_ALLOWED);
    traffic_record(t, "not a policy", "web", TRAFFIC_ALLOWED);
    traffic_totals(t, each, &s);
    CHECK_INT(s.n, 1);
    CHECK_STR(s.key[0], "pay/");
    CHECK_INT(s.v[0][TRAFFIC_ALLOWED], 3);
    CHECK_INT(traffic_dropped(t), 1);
    CHECK(traffic_name_ok("a.b-c_9"));
    CHECK(!traffic_name_ok(""));
    CHECK(!traffic_name_ok(".a"));
    traffic_free(t);
}

/* Full: a new pair counts under its policy's app "" pair (taken when the
 * policy's first pair was); only a policy never met before is dropped. */
static void test_traffic_full_table_keeps_each_policy_total(void)
{
    struct traffic *t = new_traffic(4);
    struct seen s = {0};
    const uint64_t *v;

    traffic_record(t, "pay", "web", TRAFFIC_ALLOWED);   /* pay/ and pay/web */
    traffic_record(t, "pay", "jobs", TRAFFIC_ALLOWED);  /* pay/jobs */
    traffic_record(t, "search", "", TRAFFIC_DENIED);    /* search/: full now */
    traffic_record(t, "pay", "cli", TRAFFIC_DENIED);    /* no place: under pay/ */
    traffic_record(t, "login", "web", TRAFFIC_DENIED);  /* nothing for login: dropped */
    traffic_totals(t, each, &s);
    CHECK_INT(s.n, 4);
    CHECK((v = find(&s, "pay/")) != NULL && v[TRAFFIC_DENIED] == 1);
    CHECK(find(&s, "pay/cli") == NULL);
    CHECK(find(&s, "login/web") == NULL);
    CHECK_INT(traffic_dropped(t), 1);
    /* Places are handed out in order and never move. */
    for (size_t i = 0; i < s.n; i++)
        CHECK_INT(s.places[i], i);
    traffic_free(t);
}

struct worker {
    struct traffic *t;
    int id;
};

static void *hammer(void *arg)
{
    struct worker *w = arg;
    char app[16];

    for (int i = 0; i < 20000; i++) {
        snprintf(app, sizeof(app), "app%d", i % 50);
        traffic_record(w->t, i % 2 ? "pay" : "search", app,
                       w->id % 2 ? TRAFFIC_ALLOWED : TRAFFIC_DENIED);
    }
    return NULL;
}

/* Threads meeting the same new pairs at once: one place each, no count lost. */
static void test_traffic_threads_count_every_decision_once(void)
{
    struct traffic *t = new_traffic(1000);
    struct seen s = {0};
    pthread_t th[4];
    struct worker w[4];
    uint64_t allowed = 0, denied = 0;

    for (int i = 0; i < 4; i++) {
        w[i] = (struct worker){t, i};
        pthread_create(&th[i], NULL, hammer, &w[i]);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    traffic_totals(t, each, &s);
    CHECK_INT(s.n, 52);         /* 2 policies x 25 apps (odd i: pay), and each policy's "" */
    for (size_t i = 0; i < s.n; i++) {
        allowed += s.v[i][TRAFFIC_ALLOWED];
        denied += s.v[i][TRAFFIC_DENIED];
    }
    CHECK_INT(allowed, 40000);
    CHECK_INT(denied, 40000);
    traffic_free(t);
}

static void test_traffic_new_refuses_sizes_out_of_range(void)
{
    struct permitd_error err = {0, ""};
    struct traffic *t = (struct traffic *)1;

    CHECK_INT(traffic_new(0, &t, &err), PERMITD_EINVAL);
    CHECK(t == NULL);
    CHECK_INT(traffic_new((size_t)TRAFFIC_PAIRS_MAX + 1, &t, &err), PERMITD_EINVAL);
    traffic_free(NULL);
}

int main(void)
{
    TEST_RUN(test_traffic_counts_per_policy_and_app);
    TEST_RUN(test_traffic_names_outside_the_rule_count_as_no_app);
    TEST_RUN(test_traffic_full_table_keeps_each_policy_total);
    TEST_RUN(test_traffic_threads_count_every_decision_once);
    TEST_RUN(test_traffic_new_refuses_sizes_out_of_range);
    return TEST_REPORT();
}
