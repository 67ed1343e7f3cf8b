/*
 * test_appkeys.c - server/decisions/appkeys.c without a server: the
 * Authorization header's parser, minted keys, and every answer of the
 * check against a table filled as the sync fills it.
 */
#include <stdio.h>
#include <string.h>

#include "core/sha256.h"
#include "decisions/appkeys.h"
#include "test.h"

#define NOW 1700000000

static enum appkeys_reason parse(const char *v)
{
    struct appkeys_token t;

    return appkeys_parse(v, v ? strlen(v) : 0, &t);
}

static void test_appkeys_parse_header(void)
{
    char good[128], buf[160];
    struct appkeys_token t;

    snprintf(good, sizeof(good), "pk_0123456789abcdef_%s",
             "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMN-_0");
    snprintf(buf, sizeof(buf), "Bearer %s", good);
    CHECK_INT(appkeys_parse(buf, strlen(buf), &t), APPKEYS_OK);
    CHECK_STR(t.prefix, "pk_0123456789abcdef");
    CHECK_INT(t.secret_len, APPKEYS_SECRET_LEN);
    CHECK(memcmp(t.secret, good + 20, APPKEYS_SECRET_LEN) == 0);
    snprintf(buf, sizeof(buf), "bearer \t %s  ", good);          /* any case, spaces around */
    CHECK_INT(parse(buf), APPKEYS_OK);
    CHECK_INT(parse(NULL), APPKEYS_MISSING);
    CHECK_INT(parse(""), APPKEYS_MALFORMED);
    CHECK_INT(parse("Bearer"), APPKEYS_MALFORMED);
    CHECK_INT(parse("Bearer "), APPKEYS_MALFORMED);
    CHECK_INT(parse("Basic dXNlcjpwYXNz"), APPKEYS_MALFORMED);
    snprintf(buf, sizeof(buf), "Bearer%s", good);                 /* no space */
    CHECK_INT(parse(buf), APPKEYS_MALFORMED);
    snprintf(buf, sizeof(buf), "Bearer %s x", good);              /* something after */
    CHECK_INT(parse(buf), APPKEYS_MALFORMED);
    snprintf(buf, sizeof(buf), "Bearer %sA", good);               /* one character too many */
    CHECK_INT(parse(buf), APPKEYS_MALFORMED);
    snprintf(buf, sizeof(buf), "Bearer %.*s", (int)strlen(good) - 1, good);
    CHECK_INT(parse(buf), APPKEYS_MALFORMED);
    snprintf(buf, sizeof(buf), "Bearer pk_0123456789ABCDEF_%s", good + 20);   /* upper hex */
    CHECK_INT(parse(buf), APPKEYS_MALFORMED);
    snprintf(buf, sizeof(buf), "Bearer sk_0123456789abcdef_%s", good + 20);
    CHECK_INT(parse(buf), APPKEYS_MALFORMED);
    snprintf(buf, sizeof(buf), "Bearer pk_0123456789abcdef-%s", good + 20);
    CHECK_INT(parse(buf), APPKEYS_MALFORMED);
    snprintf(buf, sizeof(buf), "Bearer %s", good);
    buf[40] = '=';                                                /* not base64url */
    CHECK_INT(parse(buf), APPKEYS_MALFORMED);
    /* The length is what is read: a value cut short is malformed, even
     * when the bytes after it would have made a key. */
    snprintf(buf, sizeof(buf), "Bearer %s", good);
    CHECK_INT(appkeys_parse(buf, strlen(buf) - 1, &t), APPKEYS_MALFORMED);
}

static void test_appkeys_mint_makes_parseable_distinct_keys(void)
{
    struct appkeys_minted a, b;
    struct permitd_error err = {0, ""};
    char header[128], hex[SHA256_HEX_LEN + 1];
    struct appkeys_token t;

    CHECK_INT(appkeys_mint(&a, &err), PERMITD_OK);
    CHECK_INT(appkeys_mint(&b, &err), PERMITD_OK);
    CHECK_INT(strlen(a.key), APPKEYS_KEY_LEN);
    CHECK(strncmp(a.key, a.prefix, APPKEYS_PREFIX_LEN) == 0);
    CHECK(strcmp(a.key, b.key) != 0);
    CHECK(strcmp(a.prefix, b.prefix) != 0);
    snprintf(header, sizeof(header), "Bearer %s", a.key);
    CHECK_INT(appkeys_parse(header, strlen(header), &t), APPKEYS_OK);
    sha256_hex(a.key + APPKEYS_PREFIX_LEN + 1, APPKEYS_SECRET_LEN, hex);
    CHECK_STR(a.hash_hex, hex);                 /* the hash of the secret, nothing else */
}

struct fixture {
    struct appkeys *k;
    struct appkeys_minted good, revoked, expired, later, disabled;
};

static void row(struct apps_key_row *r, const struct appkeys_minted *m, const char *app,
                int64_t expires_s, int revoked, int enabled)
{
    memset(r, 0, sizeof(*r));
    snprintf(r->prefix, sizeof(r->prefix), "%s", m->prefix);
    snprintf(r->app, sizeof(r->app), "%s", app);
    snprintf(r->hash, sizeof(r->hash), "%s", m->hash_hex);
    r->expires_s = expires_s;
    r->revoked = revoked;
    r->app_enabled = enabled;
}

static void setup(struct fixture *f)
{
    struct permitd_error err = {0, ""};
    struct apps_key_row rows[6];

    appkeys_new(0, &f->k, &err);
    appkeys_mint(&f->good, &err);
    appkeys_mint(&f->revoked, &err);
    appkeys_mint(&f->expired, &err);
    appkeys_mint(&f->later, &err);
    appkeys_mint(&f->disabled, &err);
    row(&rows[0], &f->good, "billing", 0, 0, 1);
    row(&rows[1], &f->revoked, "billing", 0, 1, 1);
    row(&rows[2], &f->expired, "billing", NOW - 1, 0, 1);
    row(&rows[3], &f->later, "billing", NOW + 60, 0, 1);
    row(&rows[4], &f->disabled, "old", 0, 0, 0);
    row(&rows[5], &f->good, "billing", 0, 0, 1);
    snprintf(rows[5].prefix, sizeof(rows[5].prefix), "pk_bad");   /* skipped */
    CHECK_INT(appkeys_replace(f->k, rows, 6, appkeys_generation(f->k), &err), PERMITD_OK);
    CHECK_INT(appkeys_count(f->k), 5);
}

static int check(struct fixture *f, const char *key, const char *app, char *app_out,
                 enum appkeys_reason *why, struct permitd_error *err)
{
    char header[160], prefix[APPKEYS_PREFIX_LEN + 1];

    if (key == NULL)
        return appkeys_check(f->k, NULL, app, NOW, app_out, prefix, why, err);
    snprintf(header, sizeof(header), "Bearer %s", key);
    return appkeys_check(f->k, header, app, NOW, app_out, prefix, why, err);
}

static void test_appkeys_check_every_answer(void)
{
    struct fixture f;
    struct permitd_error err = {0, ""};
    char app[APPS_NAME_MAX + 1], forged[APPKEYS_KEY_LEN + 1];
    enum appkeys_reason why;
    unsigned long long counts[APPKEYS_NREASONS];

    setup(&f);
    CHECK_INT(check(&f, f.good.key, "", app, &why, &err), PERMITD_OK);
    CHECK_STR(app, "billing");                          /* empty app: the key's */
    CHECK_INT(check(&f, f.good.key, "billing", app, &why, &err), PERMITD_OK);
    CHECK_INT(check(&f, f.later.key, "", app, &why, &err), PERMITD_OK);

    CHECK_INT(check(&f, f.good.key, "mobile", app, &why, &err), PERMITD_EPERM);
    CHECK_INT(why, APPKEYS_APP_MISMATCH);
    CHECK_CONTAINS(err.message, "\"mobile\"");
    CHECK_CONTAINS(err.message, f.good.prefix);
    CHECK(strstr(err.message, f.good.key + APPKEYS_PREFIX_LEN + 1) == NULL);

    CHECK_INT(check(&f, NULL, "", app, &why, &err), PERMITD_EUNAUTHENTICATED);
    CHECK_INT(why, APPKEYS_MISSING);
    CHECK_INT(check(&f, "pk_nope", "", app, &why, &err), PERMITD_EUNAUTHENTICATED);
    CHECK_INT(why, APPKEYS_MALFORMED);
    CHECK_INT(check(&f, f.revoked.key, "", app, &why, &err), PERMITD_EUNAUTHENTICATED);
    CHECK_INT(why, APPKEYS_REVOKED);
    CHECK_CONTAINS(err.message, "revoked");
    CHECK_INT(check(&f, f.expired.key, "", app, &why, &err), PERMITD_EUNAUTHENTICATED);
    CHECK_INT(why, APPKEYS_EXPIRED);
    CHECK_CONTAINS(err.message, "expired 1 s ago");
    CHECK_INT(check(&f, f.disabled.key, "", app, &why, &err), PERMITD_EUNAUTHENTICATED);
    CHECK_INT(why, APPKEYS_DISABLED);
    CHECK_CONTAINS(err.message, "\"old\" is disabled");

    /* A known prefix with another secret, and a prefix nobody has. */
    memcpy(forged, f.good.key, sizeof(forged));
    forged[APPKEYS_KEY_LEN - 1] = forged[APPKEYS_KEY_LEN - 1] == 'A' ? 'B' : 'A';
    CHECK_INT(check(&f, forged, "", app, &why, &err), PERMITD_EUNAUTHENTICATED);
    CHECK_INT(why, APPKEYS_UNKNOWN);
    CHECK_STR(app, "");
    memcpy(forged, f.good.key, sizeof(forged));
    forged[3] = forged[3] == 'a' ? 'b' : 'a';
    CHECK_INT(check(&f, forged, "", app, &why, &err), PERMITD_EUNAUTHENTICATED);
    CHECK_INT(why, APPKEYS_UNKNOWN);

    appkeys_counters(f.k, counts);
    CHECK_INT(counts[APPKEYS_MISSING], 1);
    CHECK_INT(counts[APPKEYS_MALFORMED], 1);
    CHECK_INT(counts[APPKEYS_UNKNOWN], 2);
    CHECK_INT(counts[APPKEYS_REVOKED], 1);
    CHECK_INT(counts[APPKEYS_EXPIRED], 1);
    CHECK_INT(counts[APPKEYS_DISABLED], 1);
    CHECK_INT(counts[APPKEYS_APP_MISMATCH], 1);
    appkeys_free(f.k);
}

static void test_appkeys_off_trusts_the_request(void)
{
    struct appkeys *k;
    struct permitd_error err = {0, ""};
    char app[APPS_NAME_MAX + 1], prefix[APPKEYS_PREFIX_LEN + 1];

    appkeys_new(1, &k, &err);
    CHECK(!appkeys_enforced(k));
    CHECK_INT(appkeys_check(k, NULL, "anyone", NOW, app, prefix, NULL, &err), PERMITD_OK);
    CHECK_STR(app, "");                          /* the request's own app stands */
    appkeys_free(k);
}

static void note(void *ud, const char *prefix)
{
    snprintf(ud, APPKEYS_PREFIX_LEN + 1, "%s", prefix);
}

/* A revoke here is never undone by a load that read MySQL before it; a
 * key added here is not lost to such a load either (the load is refused
 * and made again). */
static void test_appkeys_local_changes_win_over_older_loads(void)
{
    struct fixture f;
    struct permitd_error err = {0, ""};
    struct apps_key_row rows[1];
    struct appkeys_minted fresh;
    char app[APPS_NAME_MAX + 1], used[APPKEYS_PREFIX_LEN + 1] = "";
    enum appkeys_reason why;
    uint64_t gen;

    setup(&f);
    gen = appkeys_generation(f.k);
    appkeys_revoke(f.k, f.good.prefix);
    CHECK_INT(check(&f, f.good.key, "", app, &why, &err), PERMITD_EUNAUTHENTICATED);
    CHECK_INT(why, APPKEYS_REVOKED);
    row(&rows[0], &f.good, "billing", 0, 0, 1);          /* MySQL before the revoke */
    CHECK_INT(appkeys_replace(f.k, rows, 1, gen, &err), PERMITD_EABORTED);
    CHECK_INT(appkeys_replace(f.k, rows, 1, appkeys_generation(f.k), &err), PERMITD_OK);
    CHECK_INT(check(&f, f.good.key, "", app, &why, &err), PERMITD_EUNAUTHENTICATED);
    CHECK_INT(why, APPKEYS_REVOKED);                     /* revoked here: for good */

    appkeys_mint(&fresh, &err);
    row(&rows[0], &fresh, "mobile", 0, 0, 1);
    CHECK_INT(appkeys_add(f.k, &rows[0], &err), PERMITD_OK);
    CHECK_INT(check(&f, fresh.key, "mobile", app, &why, &err), PERMITD_OK);
    appkeys_take_used(f.k, note, used);
    CHECK_STR(used, fresh.prefix);
    used[0] = '\0';
    appkeys_take_used(f.k, note, used);
    CHECK_STR(used, "");                                 /* marks cleared */

    appkeys_set_app_enabled(f.k, "mobile", 0);
    CHECK_INT(check(&f, fresh.key, "", app, &why, &err), PERMITD_EUNAUTHENTICATED);
    CHECK_INT(why, APPKEYS_DISABLED);
    appkeys_free(f.k);
}

int main(void)
{
    TEST_RUN(test_appkeys_parse_header);
    TEST_RUN(test_appkeys_mint_makes_parseable_distinct_keys);
    TEST_RUN(test_appkeys_check_every_answer);
    TEST_RUN(test_appkeys_off_trusts_the_request);
    TEST_RUN(test_appkeys_local_changes_win_over_older_loads);
    return TEST_REPORT();
}
