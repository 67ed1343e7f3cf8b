/*
 * test_policies.c - the in-memory policy table without Redis: a policy
 * hash's fields made an entry (its version stamp, its limits as the script
 * is sent them, what makes it broken), exact app membership, and the
 * table's install / lookup / forget with references, and a batch
 * installed at once (policies_install_many()).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "decisions/policies.h"
#include "test.h"

static struct policies_entry *parse(const char *name, char **fields, size_t n)
{
    struct permitd_error err = {0, ""};
    struct policies_entry *e = NULL;

    CHECK_INT(policies_parse(name, fields, n, &e, &err), PERMITD_OK);
    return e;
}

/* apps is a set: a name is in it only as a whole element, never as a
 * substring, a prefix or a Lua/glob pattern match. */
static void test_policies_apps_are_exact(void)
{
    char *f[] = {"max_permits", "5", "rate", "1", "apps", "payroll,web-1,a.b"};
    struct policies_entry *e = parse("p", f, 6);

    CHECK(policies_allows(e, "payroll"));
    CHECK(policies_allows(e, "web-1"));
    CHECK(policies_allows(e, "a.b"));
    CHECK(!policies_allows(e, "pay"));
    CHECK(!policies_allows(e, "roll"));
    CHECK(!policies_allows(e, "web"));
    CHECK(!policies_allows(e, "a"));
    CHECK(!policies_allows(e, "axb"));         /* "." is no pattern */
    CHECK(!policies_allows(e, "%w+"));
    CHECK(!policies_allows(e, ".*"));
    CHECK(!policies_allows(e, "payroll,web-1"));
    CHECK(e->broken == NULL);
    policies_release(e);

    char *any[] = {"max_permits", "5", "rate", "1", "apps", "web,*"};
    e = parse("p", any, 6);
    CHECK(policies_allows(e, "anyone"));
    policies_release(e);
}

/* The version stamp is id * 2^24 + version; limits are sent as the hash
 * holds them; a hash that is no policy is an entry that says why. */
static void test_policies_parse(void)
{
    char *f[] = {"id", "2", "version", "9", "max_permits", "100", "rate", "0.016666666667",
                 "apps", "web", "rates", "1700000000000000:2", "failure_mode", "open",
                 "colocate", "1"};
    struct policies_entry *e = parse("p", f, 16);

    CHECK_INT(e->stamp, 2 * 16777216 + 9);
    CHECK_STR(e->stamp_s, "33554441");
    CHECK_STR(e->max_s, "100");
    CHECK_STR(e->rate_s, "0.016666666667");
    CHECK_STR(e->rates, "1700000000000000:2");
    CHECK(e->enabled && e->open && e->colocate);
    CHECK(e->broken == NULL);
    policies_release(e);

    char *bad_rate[] = {"max_permits", "5", "rate", "fast", "apps", "web"};
    e = parse("p", bad_rate, 6);
    CHECK(e->broken != NULL && strstr(e->broken, "rate") != NULL);
    policies_release(e);
    char *bad_max[] = {"max_permits", "1.5", "rate", "1", "apps", "web"};
    e = parse("p", bad_max, 6);
    CHECK(e->broken != NULL && strstr(e->broken, "max_permits") != NULL);
    policies_release(e);
    char *off[] = {"max_permits", "5", "rate", "1", "apps", "web", "enabled", "0"};
    e = parse("p", off, 8);
    CHECK(!e->enabled && e->stamp == 0 && e->rates[0] == '\0');
    policies_release(e);
}

/* Install replaces by name; a holder keeps its entry after a replace; a
 * forgotten name is gone. */
/* Issue 20: the hash's algorithm fields make the entry and what its
 * script is sent (p1, p2); a combination that does not fit is broken,
 * saying why. */
static void test_policies_algorithms(void)
{
    struct {
        char *f[12];
        size_t n;
        const char *broken, *p1, *p2;
    } cases[] = {
        {{"max_permits", "5", "apps", "a", "rate", "2", "rates", "1:3"}, 8, NULL, "2", "1:3"},
        {{"max_permits", "5", "apps", "a", "algorithm", "fixed_window", "window_ms", "60000"}, 8,
         NULL, "60000", ""},
        {{"max_permits", "5", "apps", "a", "algorithm", "fixed_window", "calendar", "month",
          "rate", ""}, 10, NULL, "0", "month"},
        {{"max_permits", "5", "apps", "a", "algorithm", "sliding_log", "window_ms", "1000"}, 8,
         NULL, "1000", ""},
        {{"max_permits", "5", "apps", "a", "algorithm", "concurrency", "lease_ms", "30000"}, 8,
         NULL, "30000", ""},
        {{"max_permits", "5", "apps", "a", "algorithm", "fixed_window", "window_ms", "60000",
          "calendar", "day"}, 10, "exactly one", NULL, NULL},
        {{"max_permits", "5", "apps", "a", "algorithm", "fixed_window", "window_ms", "60000",
          "rate", "1"}, 10, "rate", NULL, NULL},
        {{"max_permits", "5", "apps", "a", "algorithm", "concurrency"}, 6, "lease_ms", NULL, NULL},
        {{"max_permits", "5", "apps", "a", "rate", "1", "window_ms", "10"}, 8, "window_ms", NULL,
         NULL},
        {{"max_permits", "10001", "apps", "a", "algorithm", "sliding_log", "window_ms", "10"}, 8,
         "10000", NULL, NULL},
        {{"max_permits", "5", "apps", "a", "algorithm", "leaky"}, 6, "algorithm", NULL, NULL},
        {{"max_permits", "5", "apps", "a", "algorithm", "sliding_window", "window_ms", "0"}, 8,
         "window_ms", NULL, NULL},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct policies_entry *e = parse("p", cases[i].f, cases[i].n);
        if (cases[i].broken != NULL) {
            CHECK(e->broken != NULL);
            if (e->broken != NULL)
                CHECK_CONTAINS(e->broken, cases[i].broken);
        } else {
            CHECK(e->broken == NULL);
            CHECK_STR(policies_p1(e), cases[i].p1);
            CHECK_STR(policies_p2(e), cases[i].p2);
        }
        policies_release(e);
    }
}

static void test_policies_table(void)
{
    struct config cfg;
    struct policies *t = NULL;
    struct permitd_error err = {0, ""};
    char *v1[] = {"max_permits", "5", "rate", "1", "apps", "web", "version", "1"};
    char *v2[] = {"max_permits", "7", "rate", "1", "apps", "web", "version", "2"};
    char *other[] = {"max_permits", "3", "rate", "1", "apps", "web", "version", "1"};
    const struct policies_entry *held;
    char **names;
    size_t n;

    memset(&cfg, 0, sizeof(cfg));
    CHECK_INT(policies_new(&cfg, NULL, &t, &err), PERMITD_OK);
    CHECK(policies_get(t, "b") == NULL);
    CHECK_INT(policies_install(t, parse("b", v1, 8)), PERMITD_OK);
    CHECK_INT(policies_install(t, parse("a", other, 8)), PERMITD_OK);
    held = policies_get(t, "b");
    CHECK(held != NULL && held->max_permits == 5);
    CHECK_INT(policies_install(t, parse("b", v2, 8)), PERMITD_OK);
    CHECK_INT(policies_stamp(t, "b"), 2);
    CHECK_INT(held->max_permits, 5);          /* still the holder's */
    policies_release(held);
    CHECK_INT(policies_names(t, &names, &n), PERMITD_OK);
    CHECK_INT(n, 2);
    CHECK_STR(names[0], "a");
    CHECK_STR(names[1], "b");
    policies_names_free(names, n);
    /* An older copy arriving late (two reloads out of order) is dropped. */
    CHECK_INT(policies_install(t, parse("b", v1, 8)), PERMITD_OK);
    CHECK_INT(policies_stamp(t, "b"), 2);
    policies_forget(t, "b");
    CHECK(policies_get(t, "b") == NULL);
    CHECK_INT(policies_stamp(t, "a"), 1);
    policies_free(t);
}

/* A policy this instance dropped (deleted here, or gone from MySQL) is not
 * brought back by a reload that read its hash before the delete and
 * installs after it; a policy created again under the name (a new MySQL
 * id: a larger stamp) is. A policy kept by hand (id 0) has no such memory. */
static void test_policies_forget_is_not_undone_by_a_late_reload(void)
{
    struct config cfg;
    struct policies *t = NULL;
    struct permitd_error err = {0, ""};
    char *old[] = {"max_permits", "5", "rate", "1", "apps", "web", "version", "3", "id", "7"};
    char *again[] = {"max_permits", "5", "rate", "1", "apps", "web", "version", "1", "id", "8"};
    char *hand[] = {"max_permits", "5", "rate", "1", "apps", "web", "version", "3"};

    memset(&cfg, 0, sizeof(cfg));
    CHECK_INT(policies_new(&cfg, NULL, &t, &err), PERMITD_OK);
    CHECK_INT(policies_install(t, parse("p", old, 10)), PERMITD_OK);
    CHECK(policies_stamp(t, "p") == 7ULL * (1 << 24) + 3);
    policies_forget(t, "p");
    CHECK_INT(policies_install(t, parse("p", old, 10)), PERMITD_OK);    /* the late reload */
    CHECK(policies_get(t, "p") == NULL);
    CHECK_INT(policies_install(t, parse("p", again, 10)), PERMITD_OK);  /* created again */
    CHECK(policies_stamp(t, "p") == 8ULL * (1 << 24) + 1);

    CHECK_INT(policies_install(t, parse("h", hand, 8)), PERMITD_OK);
    policies_forget(t, "h");
    CHECK_INT(policies_install(t, parse("h", hand, 8)), PERMITD_OK);
    CHECK_INT(policies_stamp(t, "h"), 3);
    policies_free(t);
}

/* policies_install_many(): a batch goes in with one table copy, each entry
 * decided as policies_install() would: sorted into the table whatever the
 * batch's order, never back to an older stamp (within the batch too), a
 * holder's entry kept alive, the entries not in the batch untouched. */
static void test_policies_install_many(void)
{
    enum { N = 10000 };
    struct config cfg;
    struct policies *t = NULL;
    struct permitd_error err = {0, ""};
    struct policies_entry **batch = calloc(N, sizeof(*batch));
    char *v1[] = {"max_permits", "5", "rate", "1", "apps", "web", "version", "1"};
    char *v2[] = {"max_permits", "7", "rate", "1", "apps", "web", "version", "2"};
    const struct policies_entry *held;
    char name[32], **names;
    size_t n;

    memset(&cfg, 0, sizeof(cfg));
    CHECK_INT(policies_new(&cfg, NULL, &t, &err), PERMITD_OK);
    CHECK_INT(policies_install(t, parse("p00007", v2, 8)), PERMITD_OK);
    CHECK_INT(policies_install(t, parse("zz-kept", v1, 8)), PERMITD_OK);
    held = policies_get(t, "p00007");
    /* N names in a scrambled order (7919 is prime to N): p00007 offered at
     * version 1 (older than the table's: refused), p00003 twice (version
     * 1 then 2: the later, newer one stays), and one NULL. */
    for (size_t i = 0; i < N; i++) {
        snprintf(name, sizeof(name), "p%05zu", (i * 7919) % N);
        batch[i] = parse(name, v1, 8);
    }
    policies_release(batch[1]);
    batch[1] = NULL;
    CHECK_INT(policies_install_many(t, batch, N), PERMITD_OK);
    batch[0] = parse("p00003", v2, 8);
    batch[1] = parse("p00003", v1, 8);
    CHECK_INT(policies_install_many(t, batch, 2), PERMITD_OK);
    CHECK_INT(policies_stamp(t, "p00003"), 2);
    CHECK_INT(policies_stamp(t, "p00007"), 2);
    CHECK(held == policies_get(t, "p00007"));    /* the same entry, not the refused copy */
    policies_release(held);
    policies_release(held);
    CHECK_INT(policies_stamp(t, "zz-kept"), 1);
    CHECK_INT(policies_names(t, &names, &n), PERMITD_OK);
    CHECK_INT(n, N);                /* N names less the NULL one, plus zz-kept */
    for (size_t i = 1; i < n; i++)
        CHECK(strcmp(names[i - 1], names[i]) < 0);
    policies_names_free(names, n);
    /* (7919 * 1) % N is the name the NULL stood for: not in the table. */
    CHECK(policies_get(t, "p07919") == NULL);
    held = policies_get(t, "p09999");
    CHECK(held != NULL && held->max_permits == 5);
    policies_release(held);
    free(batch);
    policies_free(t);
}

int main(void)
{
    TEST_RUN(test_policies_apps_are_exact);
    TEST_RUN(test_policies_parse);
    TEST_RUN(test_policies_algorithms);
    TEST_RUN(test_policies_table);
    TEST_RUN(test_policies_forget_is_not_undone_by_a_late_reload);
    TEST_RUN(test_policies_install_many);
    return TEST_REPORT();
}
