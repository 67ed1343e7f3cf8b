/*
 * test_overrides.c - the in-memory override table (decisions/overrides.c):
 * precedence (exact key, longest prefix, app), expiry, the change count,
 * a one-policy replace beside the others, and what a lookup must never
 * match.
 */
#include <string.h>

#include "decisions/overrides.h"
#include "test.h"

static struct overrides_row row(int64_t id, const char *policy, enum overrides_kind kind,
                                const char *value, enum overrides_action action,
                                int64_t max_permits)
{
    struct overrides_row r = {0};

    r.id = id;
    r.version = 1;
    r.policy = policy;
    r.kind = kind;
    r.value = value;
    r.value_len = strlen(value);
    r.action = action;
    r.max_permits = max_permits;
    return r;
}

static struct overrides *table(const struct overrides_row *rows, size_t n)
{
    struct permitd_error err = {0, ""};
    struct overrides *t = NULL;
    struct overrides_build *b = NULL;

    CHECK_INT(overrides_new(&t, &err), PERMITD_OK);
    CHECK_INT(overrides_build_new(&b, &err), PERMITD_OK);
    for (size_t i = 0; i < n; i++)
        CHECK_INT(overrides_build_row(b, &rows[i]), PERMITD_OK);
    CHECK_INT(overrides_replace_all(t, b, &err), PERMITD_OK);
    return t;
}

static void test_overrides_precedence_is_key_then_longest_prefix_then_app(void)
{
    struct overrides_row rows[] = {
        row(1, "api", OVERRIDES_KEY, "premium_alice", OVERRIDES_LIMIT, 100),
        row(2, "api", OVERRIDES_PREFIX, "premium_", OVERRIDES_LIMIT, 50),
        row(3, "api", OVERRIDES_PREFIX, "premium_gold_", OVERRIDES_LIMIT, 70),
        row(4, "api", OVERRIDES_PREFIX, "p", OVERRIDES_BLOCK, 0),
        row(5, "api", OVERRIDES_APP, "billing", OVERRIDES_EXEMPT, 0),
        row(6, "other", OVERRIDES_KEY, "bob", OVERRIDES_LIMIT, 9),
    };
    struct overrides *t = table(rows, 6);
    struct overrides_hit h;

    CHECK_INT(overrides_lookup(t, "api", "premium_alice", "billing", 0, &h), 1);
    CHECK_INT(h.action, OVERRIDES_LIMIT);
    CHECK_INT(h.id, 1);
    CHECK_INT(h.max_permits, 100);
    overrides_lookup(t, "api", "premium_gold_bob", "billing", 0, &h);
    CHECK_INT(h.id, 3);                     /* the longest of three prefixes */
    CHECK_STR(h.match, "premium_gold_");
    overrides_lookup(t, "api", "premium_bob", "", 0, &h);
    CHECK_INT(h.id, 2);
    overrides_lookup(t, "api", "pa", NULL, 0, &h);
    CHECK_INT(h.id, 4);
    CHECK_INT(h.action, OVERRIDES_BLOCK);
    overrides_lookup(t, "api", "zed", "billing", 0, &h);
    CHECK_INT(h.id, 5);                     /* the app, when no key matches */
    CHECK_INT(h.action, OVERRIDES_EXEMPT);
    overrides_lookup(t, "api", "", "billing", 0, &h);
    CHECK_INT(h.id, 5);                     /* the shared bucket: by app only */
    overrides_lookup(t, "api", "zed", "billing2", 0, &h);
    CHECK_INT(h.action, OVERRIDES_NONE);
    overrides_lookup(t, "api", "bob", "app", 0, &h);
    CHECK_INT(h.action, OVERRIDES_NONE);    /* another policy's key */
    CHECK_INT(overrides_lookup(t, "nope", "bob", "app", 0, &h), 0);
    CHECK_INT(h.action, OVERRIDES_NONE);
    /* a prefix is no key, nor a key a prefix; matching is exact bytes */
    overrides_lookup(t, "api", "premium_alic", NULL, 0, &h);
    CHECK_INT(h.id, 2);
    overrides_lookup(t, "api", "PREMIUM_alice", NULL, 0, &h);
    CHECK_INT(h.action, OVERRIDES_NONE);
    overrides_lookup(t, "other", "bo", NULL, 0, &h);
    CHECK_INT(h.action, OVERRIDES_NONE);
    overrides_lookup(t, "other", "bobby", NULL, 0, &h);
    CHECK_INT(h.action, OVERRIDES_NONE);
    overrides_free(t);
}

static void test_overrides_expired_ones_give_way_to_the_next(void)
{
    struct overrides_row rows[] = {
        row(1, "api", OVERRIDES_KEY, "alice", OVERRIDES_LIMIT, 100),
        row(2, "api", OVERRIDES_PREFIX, "al", OVERRIDES_LIMIT, 50),
        row(3, "api", OVERRIDES_PREFIX, "a", OVERRIDES_LIMIT, 20),
    };
    struct overrides *t;
    struct overrides_hit h;

    rows[0].expires_us = 1000;
    rows[1].expires_us = 2000;
    t = table(rows, 3);
    overrides_lookup(t, "api", "alice", NULL, 999, &h);
    CHECK_INT(h.id, 1);
    CHECK_INT(h.expires_us, 1000);
    overrides_lookup(t, "api", "alice", NULL, 1000, &h);
    CHECK_INT(h.id, 2);
    overrides_lookup(t, "api", "alice", NULL, 2000, &h);
    CHECK_INT(h.id, 3);
    overrides_free(t);
}

static void test_overrides_change_count_comes_with_the_policy(void)
{
    struct permitd_error err = {0, ""};
    struct overrides_row rows[] = {row(1, "api", OVERRIDES_KEY, "alice", OVERRIDES_LIMIT, 100)};
    struct overrides *t = table(rows, 1);
    struct overrides_build *b = NULL;
    struct overrides_hit h;

    overrides_lookup(t, "api", "nobody", NULL, 0, &h);
    CHECK_INT(h.changes, 0);
    /* api: its one override deleted (count 2): the count stays, the row goes */
    CHECK_INT(overrides_build_new(&b, &err), PERMITD_OK);
    CHECK_INT(overrides_build_changes(b, "api", 2), PERMITD_OK);
    CHECK_INT(overrides_replace_policy(t, "api", b, &err), PERMITD_OK);
    CHECK_INT(overrides_lookup(t, "api", "alice", NULL, 0, &h), 1);
    CHECK_INT(h.action, OVERRIDES_NONE);
    CHECK_INT(h.changes, 2);
    /* an older read (count 1) installs nothing */
    CHECK_INT(overrides_build_new(&b, &err), PERMITD_OK);
    CHECK_INT(overrides_build_changes(b, "api", 1), PERMITD_OK);
    CHECK_INT(overrides_build_row(b, &rows[0]), PERMITD_OK);
    CHECK_INT(overrides_replace_policy(t, "api", b, &err), PERMITD_OK);
    overrides_lookup(t, "api", "alice", NULL, 0, &h);
    CHECK_INT(h.action, OVERRIDES_NONE);
    CHECK_INT(h.changes, 2);
    overrides_free(t);
}

static void test_overrides_one_policy_replaced_beside_the_others(void)
{
    struct permitd_error err = {0, ""};
    struct overrides_row rows[] = {
        row(1, "api", OVERRIDES_KEY, "alice", OVERRIDES_LIMIT, 100),
        row(2, "web", OVERRIDES_KEY, "alice", OVERRIDES_LIMIT, 7),
    };
    struct overrides_row fresh = row(3, "api", OVERRIDES_KEY, "alice", OVERRIDES_BLOCK, 0);
    struct overrides *t = table(rows, 2);
    struct overrides_build *b = NULL;
    struct overrides_hit h;
    size_t np, nr, bytes;

    CHECK_INT(overrides_build_new(&b, &err), PERMITD_OK);
    CHECK_INT(overrides_build_changes(b, "api", 3), PERMITD_OK);
    CHECK_INT(overrides_build_row(b, &fresh), PERMITD_OK);
    CHECK_INT(overrides_replace_policy(t, "api", b, &err), PERMITD_OK);
    overrides_lookup(t, "api", "alice", NULL, 0, &h);
    CHECK_INT(h.id, 3);
    CHECK_INT(h.action, OVERRIDES_BLOCK);
    overrides_lookup(t, "web", "alice", NULL, 0, &h);
    CHECK_INT(h.id, 2);
    overrides_stats(t, &np, &nr, &bytes);
    CHECK_INT(np, 2);
    CHECK_INT(nr, 2);
    CHECK(bytes > 0);
    overrides_free(t);
}

/* Many prefixes of many lengths (past the one-pass bound) and many rows:
 * the longest still wins. */
static void test_overrides_many_prefix_lengths(void)
{
    static char values[200][201];
    static struct overrides_row rows[200];
    struct overrides *t;
    struct overrides_hit h;
    char key[256];

    for (int i = 0; i < 200; i++) {
        memset(values[i], 'k', (size_t)i + 1);
        values[i][i + 1] = '\0';
        rows[i] = row(i + 1, "api", OVERRIDES_PREFIX, values[i], OVERRIDES_LIMIT, i + 1);
    }
    t = table(rows, 200);
    memset(key, 'k', 150);
    key[150] = '\0';
    overrides_lookup(t, "api", key, NULL, 0, &h);
    CHECK_INT(h.id, 150);
    key[70] = 'x';
    overrides_lookup(t, "api", key, NULL, 0, &h);
    CHECK_INT(h.id, 70);
    key[0] = 'x';
    overrides_lookup(t, "api", key, NULL, 0, &h);
    CHECK_INT(h.action, OVERRIDES_NONE);
    overrides_free(t);
}

int main(void)
{
    TEST_RUN(test_overrides_precedence_is_key_then_longest_prefix_then_app);
    TEST_RUN(test_overrides_expired_ones_give_way_to_the_next);
    TEST_RUN(test_overrides_change_count_comes_with_the_policy);
    TEST_RUN(test_overrides_one_policy_replaced_beside_the_others);
    TEST_RUN(test_overrides_many_prefix_lengths);
    return TEST_REPORT();
}
