/*
 * test_envoyrls.c - the Envoy descriptor mapping without a server: which
 * rows are accepted, which row a descriptor matches (the most specific),
 * which bucket key it gets, and the unit a limit is told in.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "decisions/envoyrls.h"
#include "stores/policy.h"
#include "test.h"

static struct envoymap_row row(const char *domain, const char *descriptor, const char *policy,
                               const char *key_entry)
{
    struct envoymap_row r;

    memset(&r, 0, sizeof(r));
    snprintf(r.domain, sizeof(r.domain), "%s", domain);
    snprintf(r.descriptor, sizeof(r.descriptor), "%s", descriptor);
    snprintf(r.policy, sizeof(r.policy), "%s", policy);
    snprintf(r.key_entry, sizeof(r.key_entry), "%s", key_entry);
    return r;
}

static void test_envoyrls_check_row(void)
{
    static const char *const bad[] = {"", ",a", "a,", "a,,b", "=v", "a=", "a=b=c", "k=v,=x"};
    struct permitd_error err;
    struct envoymap_row r;

    r = row("edge", "remote_address", "p", "remote_address");
    CHECK_INT(envoyrls_check_row(&r, &err), PERMITD_OK);
    r = row("edge", "generic_key=api,user_id", "p", "user_id");
    CHECK_INT(envoyrls_check_row(&r, &err), PERMITD_OK);
    r = row("edge", "generic_key=api", "p", "");
    CHECK_INT(envoyrls_check_row(&r, &err), PERMITD_OK);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        r = row("edge", bad[i], "p", "");
        CHECK_INT(envoyrls_check_row(&r, &err), PERMITD_EINVAL);
        CHECK_CONTAINS(err.message, "descriptor");
    }
    r = row("edge", "a,b", "p", "c");
    CHECK_INT(envoyrls_check_row(&r, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "key_entry: \"c\"");
    r = row("edge", "a=1,b", "p", "a");      /* a pinned value is no key */
    CHECK_INT(envoyrls_check_row(&r, &err), PERMITD_EINVAL);
    r = row("", "a", "p", "");
    CHECK_INT(envoyrls_check_row(&r, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "domain");
    r = row("edge", "a", "bad name!", "");
    CHECK_INT(envoyrls_check_row(&r, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "bad name!");
    r = row("edge", "a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q", "p", "");
    CHECK_INT(envoyrls_check_row(&r, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "more than 16 entries");
}

static void test_envoyrls_match(void)
{
    struct envoymap_row rows[5];
    struct envoyrls *r = NULL;
    struct permitd_error err;
    char policy[129], key[POLICY_KEY_MAX + 1], big[400];
    size_t skipped = 9;
    const char *k1[] = {"remote_address"}, *v1[] = {"10.0.0.1"};
    const char *k2[] = {"generic_key", "user_id"}, *v2[] = {"api", "u1"}, *v3[] = {"api", "vip"};
    const char *v4[] = {"web", "u1"};

    rows[0] = row("edge", "remote_address", "by-ip", "remote_address");
    rows[1] = row("edge", "generic_key=api,user_id", "by-user", "user_id");
    rows[2] = row("edge", "generic_key=api,user_id=vip", "vip", "");
    rows[3] = row("edge", "a,,b", "broken", "");
    rows[4] = row("other", "remote_address", "other-ip", "");
    CHECK_INT(envoyrls_new(NULL, &r, &err), PERMITD_OK);
    CHECK_INT(envoyrls_replace(r, rows, 5, &skipped, &err), PERMITD_OK);
    CHECK_INT(skipped, 1);
    CHECK_INT(envoyrls_count(r), 4);
    CHECK_INT(envoyrls_match(r, "edge", k1, v1, 1, policy, key, NULL), 1);
    CHECK_STR(policy, "by-ip");
    CHECK_STR(key, "10.0.0.1");
    CHECK_INT(envoyrls_match(r, "other", k1, v1, 1, policy, key, NULL), 1);
    CHECK_STR(policy, "other-ip");
    CHECK_STR(key, "");
    CHECK_INT(envoyrls_match(r, "edge", k2, v2, 2, policy, key, NULL), 1);
    CHECK_STR(policy, "by-user");
    CHECK_STR(key, "u1");
    CHECK_INT(envoyrls_match(r, "edge", k2, v3, 2, policy, key, NULL), 1);
    CHECK_STR(policy, "vip");       /* pins more values than by-user */
    CHECK_INT(envoyrls_match(r, "edge", k2, v4, 2, policy, key, NULL), 0);
    CHECK_INT(envoyrls_match(r, "edge", k2, v2, 1, policy, key, NULL), 0);  /* depth */
    CHECK_INT(envoyrls_match(r, "nowhere", k1, v1, 1, policy, key, NULL), 0);
    /* A value the key rules refuse is a bucket all the same: its hash. */
    v1[0] = "a\tb";
    CHECK_INT(envoyrls_match(r, "edge", k1, v1, 1, policy, key, NULL), 1);
    CHECK_INT(strncmp(key, "h:", 2), 0);
    CHECK_INT(strlen(key), 66);
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    v1[0] = big;
    CHECK_INT(envoyrls_match(r, "edge", k1, v1, 1, policy, key, NULL), 1);
    CHECK_INT(strncmp(key, "h:", 2), 0);
    v1[0] = "10.0.0.1";
    /* A load replaces the whole table. */
    CHECK_INT(envoyrls_replace(r, rows + 4, 1, NULL, &err), PERMITD_OK);
    CHECK_INT(envoyrls_match(r, "edge", k1, v1, 1, policy, key, NULL), 0);
    envoyrls_free(r);
}

static void test_envoyrls_unit(void)
{
    uint32_t rpu;
    int unit;

    envoyrls_unit(10, 60, &rpu, &unit);         /* a minute window */
    CHECK_INT(rpu, 10);
    CHECK_INT(unit, 2);
    envoyrls_unit(100, 1, &rpu, &unit);
    CHECK_INT(rpu, 100);
    CHECK_INT(unit, 1);
    envoyrls_unit(5, 86400, &rpu, &unit);
    CHECK_INT(unit, 4);
    envoyrls_unit(10, 5, &rpu, &unit);          /* 2/s */
    CHECK_INT(rpu, 2);
    CHECK_INT(unit, 1);
    envoyrls_unit(3, 3000, &rpu, &unit);        /* 0.001/s: 3.6 an hour */
    CHECK_INT(rpu, 4);
    CHECK_INT(unit, 3);
    envoyrls_unit(1, 7 * 86400, &rpu, &unit);   /* under 1 a day: 1 a day, never 0 */
    CHECK_INT(rpu, 1);
    CHECK_INT(unit, 4);
    envoyrls_unit(7, 0, &rpu, &unit);
    CHECK_INT(rpu, 7);
    CHECK_INT(unit, 1);
}

/* A descriptor's own limit (issue 37): only a whole limit Envoy can name;
 * anything else leaves the policy's. */
static void test_envoyrls_own_limit(void)
{
    struct limiter_own_limit o;

    CHECK_INT(envoyrls_own_limit(10, 2, &o), 1);
    CHECK_INT(o.max_permits, 10);
    CHECK_INT(o.unit_ms, 60000);
    CHECK_INT(o.unlimited, 0);
    CHECK_INT(envoyrls_own_limit(5, 7, &o), 1);
    CHECK_INT(o.unit_ms, 7LL * 86400000);
    CHECK_INT(envoyrls_own_limit(0, 1, &o), 0);        /* no requests: not a limit */
    CHECK_INT(envoyrls_own_limit(10, 0, &o), 0);       /* UNKNOWN */
    CHECK_INT(envoyrls_own_limit(10, 8, &o), 0);       /* no such unit */
    CHECK_INT(envoyrls_own_limit(10, -1, &o), 0);
}

int main(void)
{
    TEST_RUN(test_envoyrls_own_limit);
    TEST_RUN(test_envoyrls_check_row);
    TEST_RUN(test_envoyrls_match);
    TEST_RUN(test_envoyrls_unit);
    return TEST_REPORT();
}
