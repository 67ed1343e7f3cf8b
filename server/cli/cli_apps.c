/*
 * cli_apps.c - the app verbs of `permitd admin`: add-app, update-app,
 * issue-key, revoke-key, list-apps (moved out of control/appsvc.c, whose
 * checks and key minting they share).
 *
 * They write MySQL directly (stores/apps.h), audited as the OS user who
 * runs them; a change that running instances must see is announced by a
 * change notice when PERMITD_REDIS_URL is set (control/appsync.h), and is
 * otherwise picked up within one --sync-interval-ms.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_apps.h"
#include "control/appsvc.h"
#include "control/appsync.h"
#include "decisions/appkeys.h"
#include "stores/apps.h"
#include "stores/policy.h"
#include "stores/redis.h"

void cli_apps_usage(FILE *out)
{
    fprintf(out,
            "       permitd admin add-app NAME [--description TEXT]\n"
            "       permitd admin update-app NAME [--description TEXT] [--enable | --disable]\n"
            "       permitd admin issue-key APP [--expires DURATION]\n"
            "       permitd admin revoke-key PREFIX\n"
            "       permitd admin list-apps\n");
}

static void verb_usage(FILE *out, const char *verb)
{
    if (strcmp(verb, "add-app") == 0)
        fprintf(out, "Usage: permitd admin add-app NAME [--description TEXT]\n\n"
                     "Creates an app: what a policy's apps list names, and what API keys\n"
                     "belong to. NAME: [A-Za-z0-9][A-Za-z0-9._-]{0,127}, as policy names.\n");
    else if (strcmp(verb, "update-app") == 0)
        fprintf(out, "Usage: permitd admin update-app NAME [--description TEXT] [--enable | --disable]\n\n"
                     "Changes an app's description, or disables it (every key of a disabled\n"
                     "app answers unauthenticated until it is enabled again).\n");
    else if (strcmp(verb, "issue-key") == 0)
        fprintf(out, "Usage: permitd admin issue-key APP [--expires DURATION]\n\n"
                     "Issues a new API key for APP and prints it on standard output, once:\n"
                     "it is stored only as a hash and cannot be shown again. The app sends\n"
                     "it as `Authorization: Bearer <key>`. An app may hold several keys (to\n"
                     "rotate: issue the new one, deploy it, revoke the old one).\n"
                     "DURATION: a number and a unit, s, m, h or d (90d, 12h); default: the\n"
                     "key never expires.\n");
    else if (strcmp(verb, "revoke-key") == 0)
        fprintf(out, "Usage: permitd admin revoke-key PREFIX\n\n"
                     "Revokes a key for good. PREFIX is the key's visible part, pk_ and 16\n"
                     "hex digits (list-apps shows it); the whole key is accepted too.\n"
                     "Running instances stop accepting it within one --sync-interval-ms, at\n"
                     "once when PERMITD_REDIS_URL is set here (a change notice is sent).\n");
    else
        fprintf(out, "Usage: permitd admin list-apps\n\n"
                     "Lists every app, its state, the policies that name it, and its keys\n"
                     "(prefix, state, when created, expiring and last used), never a secret.\n");
    fprintf(out, "\nThe database is PERMITD_MYSQL_URL, as for `permitd migrate`.\n");
}

int cli_apps_verb(const char *verb)
{
    static const char *const verbs[] = {"add-app", "update-app", "issue-key", "revoke-key",
                                        "list-apps"};
    for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
        if (strcmp(verb, verbs[i]) == 0)
            return 1;
    return 0;
}

/* "30d", "12h", "90m", "3600s" or "3600" into seconds; -1 when it is
 * none of those. */
static int64_t parse_duration(const char *s)
{
    char *end;
    long long v;
    int64_t unit = 1;

    if (s[0] < '0' || s[0] > '9')
        return -1;
    v = strtoll(s, &end, 10);
    if (v <= 0 || v > APPSVC_EXPIRES_MAX_S)
        return -1;
    if (*end == 'd')
        unit = 86400;
    else if (*end == 'h')
        unit = 3600;
    else if (*end == 'm')
        unit = 60;
    else if (*end != 's' && *end != '\0')
        return -1;
    if (*end != '\0' && end[1] != '\0')
        return -1;
    if (v > APPSVC_EXPIRES_MAX_S / unit)
        return -1;
    return v * unit;
}

/* Sends the change notice when PERMITD_REDIS_URL is set; says what
 * happens when it is not sent. */
static void notify(const struct config *cfg, const char *what)
{
    struct permitd_error err = {0, ""};
    struct redis *redis = NULL;
    int rc = PERMITD_EUNAVAILABLE;

    if (getenv("PERMITD_REDIS_URL") != NULL && redis_new(cfg, &redis, &err) == PERMITD_OK)
        rc = appsync_notify(cfg, redis, what, &err);
    redis_free(redis);
    if (rc != PERMITD_OK)
        fprintf(stderr, "note: no change notice sent (%s): running permitd instances see this "
                        "within --sync-interval-ms (%d ms)\n",
                err.message[0] ? err.message : "PERMITD_REDIS_URL not set", cfg->sync_interval_ms);
}

static const char *key_state(const struct apps_key *k)
{
    if (k->revoked_at[0] != '\0')
        return "revoked";
    return k->expired ? "expired" : "active";
}

static void print_apps(const struct apps_app *v, size_t n)
{
    if (n == 0) {
        printf("no apps (permitd admin add-app NAME)\n");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const struct apps_app *a = &v[i];
        printf("%s  %s  policies: %s%s%s\n", a->name, a->enabled ? "enabled" : "DISABLED",
               a->policies[0] ? a->policies : "(none)", a->description[0] ? "  -- " : "",
               a->description);
        if (a->nkeys == 0)
            printf("  (no keys: permitd admin issue-key %s)\n", a->name);
        for (size_t j = 0; j < a->nkeys; j++) {
            const struct apps_key *k = &a->keys[j];
            printf("  %s  %-7s  created %s by %s  expires %s  last used %s", k->prefix,
                   key_state(k), k->created_at, k->created_by,
                   k->expires_at[0] ? k->expires_at : "never",
                   k->last_used_at[0] ? k->last_used_at : "never");
            if (k->revoked_at[0])
                printf("  revoked %s by %s", k->revoked_at, k->revoked_by);
            putchar('\n');
        }
    }
}

int cli_apps_main(const struct config *cfg, const char *actor, int argc, char **argv)
{
    struct permitd_error err = {0, ""};
    const char *verb = argv[1], *name = NULL, *description = NULL, *expires = NULL;
    struct apps_db *db = NULL;
    int enabled = -1, rc;
    int64_t expires_s = 0;

    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            verb_usage(stdout, verb);
            return 0;
        }
    }
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--description") == 0 && i + 1 < argc &&
            (strcmp(verb, "add-app") == 0 || strcmp(verb, "update-app") == 0))
            description = argv[++i];
        else if (strncmp(a, "--description=", 14) == 0 &&
                 (strcmp(verb, "add-app") == 0 || strcmp(verb, "update-app") == 0))
            description = a + 14;
        else if (strcmp(a, "--expires") == 0 && i + 1 < argc && strcmp(verb, "issue-key") == 0)
            expires = argv[++i];
        else if (strncmp(a, "--expires=", 10) == 0 && strcmp(verb, "issue-key") == 0)
            expires = a + 10;
        else if ((strcmp(a, "--enable") == 0 || strcmp(a, "--disable") == 0) &&
                 strcmp(verb, "update-app") == 0)
            enabled = strcmp(a, "--enable") == 0;
        else if (a[0] != '-' && name == NULL && strcmp(verb, "list-apps") != 0)
            name = a;
        else {
            fprintf(stderr, "permitd admin %s: unexpected argument \"%s\" (see permitd admin %s "
                            "--help)\n", verb, a, verb);
            return 2;
        }
    }
    if (name == NULL && strcmp(verb, "list-apps") != 0) {
        fprintf(stderr, "permitd admin %s: give the %s (see permitd admin %s --help)\n", verb,
                strcmp(verb, "revoke-key") == 0 ? "key's PREFIX"
                : strcmp(verb, "issue-key") == 0 ? "APP" : "app's NAME", verb);
        return 2;
    }
    if (name != NULL && strcmp(verb, "revoke-key") != 0 &&
        policy_check_name(strcmp(verb, "issue-key") == 0 ? "APP" : "NAME", name, &err) != PERMITD_OK) {
        fprintf(stderr, "permitd admin %s: %s\n", verb, err.message);
        return 2;
    }
    if (description != NULL && appsvc_check_description(description, &err) != PERMITD_OK) {
        fprintf(stderr, "permitd admin %s: --%s\n", verb, err.message);
        return 2;
    }
    if (expires != NULL && (expires_s = parse_duration(expires)) < 0) {
        fprintf(stderr, "permitd admin issue-key: --expires \"%s\" is not a duration such as 90d, "
                        "12h, 30m or 3600s (at most ten years)\n", expires);
        return 2;
    }
    if (strcmp(verb, "update-app") == 0 && description == NULL && enabled < 0) {
        fprintf(stderr, "permitd admin update-app: nothing to change: give --description, "
                        "--enable or --disable\n");
        return 2;
    }
    if (cfg->mysql_url[0] == '\0') {
        fprintf(stderr, "permitd admin: set PERMITD_MYSQL_URL (mysql://user:pass@host:port/db)\n");
        return 2;
    }
    if ((rc = apps_db_new(cfg, &db, &err)) != PERMITD_OK)
        goto out;
    if (strcmp(verb, "add-app") == 0) {
        int applied;
        if ((rc = apps_create(db, name, description ? description : "", actor, 0, &applied,
                              &err)) == PERMITD_OK)
            printf("app %s created\n", name);
    } else if (strcmp(verb, "update-app") == 0) {
        if ((rc = apps_update(db, name, description, enabled, actor, &err)) == PERMITD_OK) {
            printf("app %s updated\n", name);
            notify(cfg, name);
        }
    } else if (strcmp(verb, "issue-key") == 0) {
        struct appkeys_minted minted;
        if ((rc = appsvc_issue(cfg, db, NULL, name, expires_s, actor, &minted,
                               &err)) == PERMITD_OK) {
            fprintf(stderr, "key %s issued for app %s%s%s; it is printed below, once: store it "
                            "now, it cannot be shown again\n", minted.prefix, name,
                    expires ? ", expiring in " : "", expires ? expires : "");
            printf("%s\n", minted.key);
            fflush(stdout);
            memset(&minted, 0, sizeof(minted));
            notify(cfg, name);
        }
    } else if (strcmp(verb, "revoke-key") == 0) {
        char prefix[64], app[APPS_NAME_MAX + 1];
        int applied;
        if ((rc = appsvc_revoke(db, NULL, name, actor, 0, prefix, sizeof(prefix), app, &applied,
                             &err)) == PERMITD_OK) {
            printf("key %s of app %s revoked\n", prefix, app);
            notify(cfg, prefix);
        }
    } else {
        struct apps_app *v = NULL;
        size_t n = 0;
        if ((rc = apps_list(db, &v, &n, &err)) == PERMITD_OK)
            print_apps(v, n);
        apps_list_free(v, n);
    }
out:
    apps_db_free(db);
    if (rc != PERMITD_OK) {
        fprintf(stderr, "permitd admin %s: %s\n", verb, err.message);
        return rc == PERMITD_EINVAL || rc == PERMITD_ENOTFOUND || rc == PERMITD_EEXIST ||
               rc == PERMITD_EPRECONDITION ? 2 : 1;
    }
    return 0;
}
