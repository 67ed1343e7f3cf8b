/*
 * appsvc.c - AppService (see appsvc.h), and what the app verbs of
 * `permitd admin` (cli/cli_apps.c) share with it.
 *
 * A key is made here (decisions/appkeys.h: appkeys_mint), stored as its
 * prefix and hash, and its whole text handed back once: in IssueKey's
 * answer, or on the command line's standard output. It is never logged,
 * never listed, and never sent to MySQL.
 *
 * Who may do what: viewers list, editors write (session.c decides from the
 * session, as for policies). The MySQL connection is this module's own,
 * used under one mutex: admin traffic is light.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "control/admin.h"
#include "control/appsvc.h"
#include "control/appsync.h"
#include "core/log.h"
#include "permit/v1/admin.pb-c.h"
#include "stores/apps.h"
#include "stores/policy.h"
#include "transport/connect.h"

/* How long a committed CreateApp or RevokeKey is recognised in its retry
 * (a client that timed out and sent it again), which then answers
 * success rather than already_exists or failed_precondition; as for
 * DeletePolicy (policysvc.c). The command line's verbs recognise none: a
 * person re-running one is told what is already so. */
#define APPSVC_RETRY_S 600

struct appsvc {
    const struct config *cfg;
    struct admin *admin;
    struct redis *redis;
    struct appkeys *keys;
    struct apps_db *db;
    pthread_mutex_t lock;
};

int appsvc_new(const struct config *cfg, struct admin *admin, struct redis *redis,
               struct appkeys *keys, struct appsvc **out, struct permitd_error *err)
{
    struct appsvc *s = calloc(1, sizeof(*s));
    int rc;

    *out = NULL;
    if (s == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    s->cfg = cfg;
    s->admin = admin;
    s->redis = redis;
    s->keys = keys;
    if ((rc = apps_db_new(cfg, &s->db, err)) != PERMITD_OK) {
        free(s);
        return rc;
    }
    pthread_mutex_init(&s->lock, NULL);
    *out = s;
    return PERMITD_OK;
}

void appsvc_free(struct appsvc *s)
{
    if (s == NULL)
        return;
    apps_db_free(s->db);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

/* The notice after a change made here; a lost one costs other instances
 * at most one sync interval. */
static void notify(struct appsvc *s, const char *what)
{
    struct permitd_error err = {0, ""};

    if (appsync_notify(s->cfg, s->redis, what, &err) != PERMITD_OK)
        log_msg(LOG_LEVEL_WARN, "app change notice not sent; other instances see the change "
                "at their next sync pass", "change=%s error=%s", what, log_q(err.message));
}

/* ---- conversions ---- */

static Permit__V1__AppKey *key_proto(struct connect_call *call, const struct apps_key *k)
{
    Permit__V1__AppKey *m = connect_call_alloc(call, sizeof(*m));

    if (m == NULL)
        return NULL;
    permit__v1__app_key__init(m);
    m->prefix = connect_call_strdup(call, k->prefix);
    m->created_by = connect_call_strdup(call, k->created_by);
    m->created_at = connect_call_strdup(call, k->created_at);
    m->expires_at = connect_call_strdup(call, k->expires_at);
    m->revoked_at = connect_call_strdup(call, k->revoked_at);
    m->revoked_by = connect_call_strdup(call, k->revoked_by);
    m->last_used_at = connect_call_strdup(call, k->last_used_at);
    m->expired = k->expired;
    if (!m->prefix || !m->created_by || !m->created_at || !m->expires_at || !m->revoked_at ||
        !m->revoked_by || !m->last_used_at)
        return NULL;
    return m;
}

/* Splits a comma-separated list into a new array in call's memory. */
static int split(struct connect_call *call, const char *list, char ***out, size_t *n)
{
    size_t count = list[0] ? 1 : 0;
    char *copy;

    for (const char *c = list; *c; c++)
        count += *c == ',';
    *n = 0;
    *out = connect_call_alloc(call, (count + 1) * sizeof(**out));
    if (*out == NULL || (copy = connect_call_strdup(call, list)) == NULL)
        return -1;
    for (char *save = NULL, *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save))
        (*out)[(*n)++] = t;
    return 0;
}

static Permit__V1__App *app_proto(struct connect_call *call, const struct apps_app *a)
{
    Permit__V1__App *m = connect_call_alloc(call, sizeof(*m));

    if (m == NULL)
        return NULL;
    permit__v1__app__init(m);
    m->name = connect_call_strdup(call, a->name);
    m->description = connect_call_strdup(call, a->description);
    m->enabled = a->enabled;
    m->created_by = connect_call_strdup(call, a->created_by);
    m->updated_by = connect_call_strdup(call, a->updated_by);
    m->created_at = connect_call_strdup(call, a->created_at);
    m->updated_at = connect_call_strdup(call, a->updated_at);
    if (!m->name || !m->description || !m->created_by || !m->updated_by || !m->created_at ||
        !m->updated_at || split(call, a->policies, &m->policies, &m->n_policies) != 0)
        return NULL;
    m->keys = connect_call_alloc(call, (a->nkeys + 1) * sizeof(*m->keys));
    if (m->keys == NULL)
        return NULL;
    for (size_t i = 0; i < a->nkeys; i++)
        if ((m->keys[m->n_keys++] = key_proto(call, &a->keys[i])) == NULL)
            return NULL;
    return m;
}

/* The app `name` as ListApps shows it, into *out. */
static int one_app(struct appsvc *s, struct connect_call *call, const char *name,
                   Permit__V1__App **out, struct permitd_error *err)
{
    struct apps_app *v = NULL;
    size_t n = 0;
    int rc;

    *out = NULL;
    pthread_mutex_lock(&s->lock);
    rc = apps_list(s->db, &v, &n, err);
    pthread_mutex_unlock(&s->lock);
    for (size_t i = 0; rc == PERMITD_OK && i < n; i++)
        if (strcmp(v[i].name, name) == 0 && (*out = app_proto(call, &v[i])) == NULL)
            rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    if (rc == PERMITD_OK && *out == NULL)
        rc = permitd_error_set(err, PERMITD_ENOTFOUND, "name: no app named \"%s\"", name);
    apps_list_free(v, n);
    return rc;
}

/* ---- the RPCs ---- */

static int list_apps(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                     ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct appsvc *s = ud;
    Permit__V1__ListAppsResponse *rs = (void *)out_;
    struct apps_app *v = NULL;
    char user[APPS_NAME_MAX + 1];
    size_t n = 0;
    int rc;

    (void)in_;
    (void)scratch;
    if ((rc = admin_authenticate(s->admin, call, 0, user, sizeof(user), err)) != PERMITD_OK)
        return rc;
    pthread_mutex_lock(&s->lock);
    rc = apps_list(s->db, &v, &n, err);
    pthread_mutex_unlock(&s->lock);
    if (rc == PERMITD_OK && (rs->apps = connect_call_alloc(call, (n + 1) * sizeof(*rs->apps))) == NULL)
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    for (size_t i = 0; rc == PERMITD_OK && i < n; i++)
        if ((rs->apps[rs->n_apps++] = app_proto(call, &v[i])) == NULL)
            rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    apps_list_free(v, n);
    return rc;
}

int appsvc_check_description(const char *d, struct permitd_error *err)
{
    if (strlen(d) > 1024)
        return permitd_error_set(err, PERMITD_EINVAL, "description: %zu bytes, the limit is 1024",
                                 strlen(d));
    return PERMITD_OK;
}

static int create_app(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                      ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct appsvc *s = ud;
    const Permit__V1__CreateAppRequest *rq = (const void *)in_;
    Permit__V1__CreateAppResponse *rs = (void *)out_;
    char user[APPS_NAME_MAX + 1];
    int rc, applied;

    (void)scratch;
    if ((rc = admin_authenticate(s->admin, call, 1, user, sizeof(user), err)) != PERMITD_OK ||
        (rc = policy_check_name("name", rq->name, err)) != PERMITD_OK ||
        (rc = appsvc_check_description(rq->description, err)) != PERMITD_OK)
        return rc;
    pthread_mutex_lock(&s->lock);
    rc = apps_create(s->db, rq->name, rq->description, user, APPSVC_RETRY_S, &applied, err);
    pthread_mutex_unlock(&s->lock);
    if (rc != PERMITD_OK)
        return rc;
    log_msg(LOG_LEVEL_INFO, applied ? "app create retried: already applied" : "app created",
            "app=%s by=%s", rq->name, user);
    return one_app(s, call, rq->name, &rs->app, err);
}

static int update_app(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                      ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct appsvc *s = ud;
    const Permit__V1__UpdateAppRequest *rq = (const void *)in_;
    Permit__V1__UpdateAppResponse *rs = (void *)out_;
    char user[APPS_NAME_MAX + 1];
    int rc, enabled = -1;

    (void)scratch;
    if ((rc = admin_authenticate(s->admin, call, 1, user, sizeof(user), err)) != PERMITD_OK ||
        (rc = policy_check_name("name", rq->name, err)) != PERMITD_OK ||
        (rc = appsvc_check_description(rq->description, err)) != PERMITD_OK)
        return rc;
    if (rq->state == PERMIT__V1__APP_STATE__APP_STATE_ENABLED)
        enabled = 1;
    else if (rq->state == PERMIT__V1__APP_STATE__APP_STATE_DISABLED)
        enabled = 0;
    pthread_mutex_lock(&s->lock);
    rc = apps_update(s->db, rq->name, rq->set_description ? rq->description : NULL, enabled, user,
                     err);
    pthread_mutex_unlock(&s->lock);
    if (rc != PERMITD_OK)
        return rc;
    log_msg(LOG_LEVEL_INFO, "app updated", "app=%s enabled=%d by=%s", rq->name, enabled, user);
    if (enabled >= 0) {
        /* Its keys follow the app: here now, elsewhere by the notice. */
        appkeys_set_app_enabled(s->keys, rq->name, enabled);
        notify(s, rq->name);
    }
    return one_app(s, call, rq->name, &rs->app, err);
}

/* Makes, stores and (on this instance) enables a new key of app. On
 * PERMITD_OK *minted holds the key, to be shown once. */
int appsvc_issue(const struct config *cfg, struct apps_db *db, struct appkeys *keys,
                 const char *app, int64_t expires_in_s, const char *actor,
                 struct appkeys_minted *minted, struct permitd_error *err)
{
    int rc;

    (void)cfg;
    if ((rc = policy_check_name("app", app, err)) != PERMITD_OK)
        return rc;
    if (expires_in_s < 0 || expires_in_s > APPSVC_EXPIRES_MAX_S)
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "expires_in_seconds: %" PRId64 " is not 0 (never) to %lld "
                                 "(ten years)", expires_in_s, APPSVC_EXPIRES_MAX_S);
    if ((rc = appkeys_mint(minted, err)) != PERMITD_OK ||
        (rc = apps_key_insert(db, app, minted->prefix, minted->hash_hex, expires_in_s, actor,
                              err)) != PERMITD_OK)
        return rc;
    if (keys != NULL) {
        struct apps_key_row row;
        memset(&row, 0, sizeof(row));
        snprintf(row.prefix, sizeof(row.prefix), "%s", minted->prefix);
        snprintf(row.app, sizeof(row.app), "%s", app);
        snprintf(row.hash, sizeof(row.hash), "%s", minted->hash_hex);
        row.expires_s = expires_in_s > 0 ? (int64_t)time(NULL) + expires_in_s : 0;
        row.app_enabled = 1;   /* a disabled app's state comes with the next load */
        rc = appkeys_add(keys, &row, err);
    }
    return rc;
}

static int issue_key(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                     ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct appsvc *s = ud;
    const Permit__V1__IssueKeyRequest *rq = (const void *)in_;
    Permit__V1__IssueKeyResponse *rs = (void *)out_;
    struct appkeys_minted minted;
    Permit__V1__App *app = NULL;
    char user[APPS_NAME_MAX + 1];
    int rc;

    (void)scratch;
    if ((rc = admin_authenticate(s->admin, call, 1, user, sizeof(user), err)) != PERMITD_OK)
        return rc;
    pthread_mutex_lock(&s->lock);
    rc = appsvc_issue(s->cfg, s->db, s->keys, rq->app, rq->expires_in_seconds, user, &minted, err);
    pthread_mutex_unlock(&s->lock);
    if (rc != PERMITD_OK)
        return rc;
    log_msg(LOG_LEVEL_INFO, "app key issued", "app=%s key=%s by=%s", rq->app, minted.prefix, user);
    notify(s, rq->app);
    rs->key = connect_call_strdup(call, minted.key);
    memset(&minted.key, 0, sizeof(minted.key));
    if (rs->key == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    if ((rc = one_app(s, call, rq->app, &app, err)) != PERMITD_OK)
        return rc;
    for (size_t i = 0; i < app->n_keys; i++)
        if (strcmp(app->keys[i]->prefix, minted.prefix) == 0)
            rs->info = app->keys[i];
    return PERMITD_OK;
}

/* A whole key given where its prefix is asked for: its prefix. The
 * secret is not kept, nor echoed in any message. */
static void key_prefix(const char *in, char *out, size_t len)
{
    size_t n = strlen(in);

    if (n > APPKEYS_PREFIX_LEN && strncmp(in, "pk_", 3) == 0 && in[APPKEYS_PREFIX_LEN] == '_')
        n = APPKEYS_PREFIX_LEN;
    snprintf(out, len, "%.*s", (int)n, in);
}

static int check_prefix(const char *prefix, struct permitd_error *err)
{
    size_t n = strlen(prefix);
    int ok = n == APPKEYS_PREFIX_LEN && strncmp(prefix, "pk_", 3) == 0;

    for (size_t i = 3; ok && i < n; i++)
        ok = (prefix[i] >= '0' && prefix[i] <= '9') || (prefix[i] >= 'a' && prefix[i] <= 'f');
    if (!ok)
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "prefix: \"%.40s\" is not a key prefix (pk_ and 16 hex digits, "
                                 "as list-apps shows)", prefix);
    return PERMITD_OK;
}

/* Revokes the key given (its prefix, or the whole key) as actor;
 * *applied (apps_key_revoke()) tells a recognised retry within retry_s. */
int appsvc_revoke(struct apps_db *db, struct appkeys *keys, const char *given, const char *actor,
                  int retry_s, char *prefix, size_t plen, char *app, int *applied,
                  struct permitd_error *err)
{
    int rc;

    *applied = 0;
    key_prefix(given, prefix, plen);
    if ((rc = check_prefix(prefix, err)) != PERMITD_OK ||
        (rc = apps_key_revoke(db, prefix, actor, retry_s, app, applied, err)) != PERMITD_OK)
        return rc;
    if (keys != NULL)
        appkeys_revoke(keys, prefix);
    return PERMITD_OK;
}

static int revoke_key(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                      ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct appsvc *s = ud;
    const Permit__V1__RevokeKeyRequest *rq = (const void *)in_;
    char user[APPS_NAME_MAX + 1], prefix[64], app[APPS_NAME_MAX + 1];
    int rc, applied;

    (void)out_;
    (void)scratch;
    if ((rc = admin_authenticate(s->admin, call, 1, user, sizeof(user), err)) != PERMITD_OK)
        return rc;
    pthread_mutex_lock(&s->lock);
    rc = appsvc_revoke(s->db, s->keys, rq->prefix, user, APPSVC_RETRY_S, prefix, sizeof(prefix), app,
                    &applied, err);
    pthread_mutex_unlock(&s->lock);
    if (rc != PERMITD_OK)
        return rc;
    log_msg(LOG_LEVEL_INFO, applied ? "app key revoke retried: already applied" : "app key revoked",
            "app=%s key=%s by=%s", app, prefix, user);
    notify(s, prefix);
    return PERMITD_OK;
}

const struct connect_method appsvc_methods[] = {
    ADMIN_METHOD("AppService", "ListApps", list_apps, 1, list_apps),
    ADMIN_METHOD("AppService", "CreateApp", create_app, 0, create_app),
    ADMIN_METHOD("AppService", "UpdateApp", update_app, 0, update_app),
    ADMIN_METHOD("AppService", "IssueKey", issue_key, 0, issue_key),
    ADMIN_METHOD("AppService", "RevokeKey", revoke_key, 0, revoke_key),
    {NULL, NULL, NULL, 0, NULL},
};
