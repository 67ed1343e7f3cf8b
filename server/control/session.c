/*
 * session.c - who is calling the admin listener: AdminAuthService's
 * Login, Logout and WhoAmI (proto/permit/v1/admin.proto), the session
 * cookie, and the role check every other admin RPC asks for
 * (session_authenticate(), through admin_authenticate() for the services
 * of other files).
 *
 *   - every RPC but Login needs a live session (cookie permitd_session,
 *     HttpOnly, SameSite=Strict, Secure under TLS), kept in MySQL
 *     (stores/store.h) for SESSION_TTL_S; viewers may call the read-only
 *     RPCs, editors all of them, and admins also manage users;
 *   - every login spends, before its password is checked, a try from
 *     permitd's own token buckets: one for the user name from the client
 *     address (policy "_login": 5 tries, then one every 10 s) and one for
 *     the user name from every address together ("_login_account":
 *     --login-account-tries a minute); the right password gives them back.
 *     So password guessing is slowed by the very mechanism permitd sells,
 *     logins checked at once never outnumber the tries, and many addresses
 *     guessing one account share one small budget that refills quickly;
 *   - passwords are checked on verifier.c's threads, never on the admin
 *     listener's one loop thread: a login is deferred and answered when its
 *     check comes back, and a login that finds --login-queue checks already
 *     waiting is answered resource_exhausted at once, so a flood of logins
 *     from anywhere costs bounded argon2 work and /readyz never waits on it.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/auth.h"
#include "control/session.h"
#include "control/verifier.h"
#include "core/clock.h"
#include "core/log.h"
#include "permit/v1/admin.pb-c.h"
#include "stores/policy.h"
#include "stores/redis.h"
#include "stores/store.h"

#define SESSION_REDIS_DEADLINE_MS 1000
#define SESSION_TTL_S (12 * 3600)
#define LOGIN_POLICY "_login"
#define LOGIN_TRIES 5
#define LOGIN_RATE "0.1"
#define LOGIN_ACCOUNT_POLICY "_login_account"

/* The roles, in rank order: each may do what the ones below it may. */
enum role { ROLE_VIEWER = ADMIN_VIEWER, ROLE_EDITOR = ADMIN_EDITOR, ROLE_ADMIN = ADMIN_ADMIN };

struct session {
    const struct config *cfg;
    struct redis *redis;            /* the login buckets' state, given back on success */
    struct store *store;            /* NULL without --mysql-url */
    pthread_mutex_t *store_lock;    /* held around every use of store */
    struct limiter *limiter;        /* the login throttle's bucket */
    struct sync *sync;              /* writes the throttle's policy; may be NULL */
    struct verifier *verifier;      /* password checks; NULL without a store */
    void (*answer)(void *ud, struct http_response *resp);
    void *answer_ud;
};

int session_new(const struct config *cfg, struct redis *redis, struct store *store,
                pthread_mutex_t *store_lock, struct limiter *limiter, struct sync *sync,
                struct verifier *verifier,
                void (*answer)(void *ud, struct http_response *resp), void *answer_ud,
                struct session **out, struct permitd_error *err)
{
    struct session *s = calloc(1, sizeof(*s));

    *out = NULL;
    if (s == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    *s = (struct session){cfg, redis, store, store_lock, limiter, sync, verifier, answer, answer_ud};
    *out = s;
    return PERMITD_OK;
}

void session_free(struct session *s)
{
    free(s);
}

static int64_t deadline(void)
{
    return clock_now_us() + (int64_t)SESSION_REDIS_DEADLINE_MS * 1000;
}

static int need_store(struct session *a, struct permitd_error *err)
{
    if (a->store == NULL)
        return permitd_error_set(err, PERMITD_EPRECONDITION,
                                 "no policy store: start permitd with --mysql-url "
                                 "(PERMITD_MYSQL_URL) to administer policies");
    return PERMITD_OK;
}

/* A role's rank; an unknown one ranks below viewer. */
static int rank(const char *role)
{
    if (strcmp(role, "admin") == 0)
        return ROLE_ADMIN;
    if (strcmp(role, "editor") == 0)
        return ROLE_EDITOR;
    return strcmp(role, "viewer") == 0 ? ROLE_VIEWER : -1;
}

int session_authenticate(struct session *a, struct connect_call *call, int need,
                         struct store_user *user, struct permitd_error *err)
{
    char token[AUTH_TOKEN_LEN + 1];
    int rc;

    if ((rc = need_store(a, err)) != PERMITD_OK)
        return rc;
    if (auth_cookie_token(http_request_header(call->http, "Cookie"), token, sizeof(token)) != 0)
        return permitd_error_set(err, PERMITD_EUNAUTHENTICATED, "not logged in");
    pthread_mutex_lock(a->store_lock);
    rc = store_session_user(a->store, token, user, err);
    pthread_mutex_unlock(a->store_lock);
    if (rc != PERMITD_OK)
        return rc;
    if (rank(user->role) >= (int)need)
        return PERMITD_OK;
    if (need == ROLE_ADMIN)
        return permitd_error_set(err, PERMITD_EPERM, "%s is a %s: only admins may manage users",
                                 user->username, user->role);
    return permitd_error_set(err, PERMITD_EPERM,
                             "%s is a %s: only editors and admins may change policies, apps "
                             "or buckets", user->username, user->role);
}

/* ---- AdminAuthService ---- */

/* The login buckets of permitd's own: created (or corrected) on use,
 * through lua/sync.lua like every policy hash (the one writer of their
 * layout); they are in Redis only, so the sync leaves them alone. */
static void login_policy(struct session *a, const char *name, int tries, const char *rate)
{
    char max[16];
    const char *fields[] = {"name", name, "apps", "*", "max_permits", max,
                            "rate", rate, "enabled", "1"};
    struct permitd_error err = {0, ""};

    snprintf(max, sizeof(max), "%d", tries);
    if (a->sync != NULL &&
        sync_own_policy(a->sync, name, fields, sizeof(fields) / sizeof(fields[0]), &err) !=
            PERMITD_OK)
        log_msg(LOG_LEVEL_WARN, "cannot write the login throttle's policy", "policy=%s error=%s",
                name, log_q(err.message));
}

/* The login bucket's key for a user name (lower-cased: Alice = alice)
 * tried from one client address: "alice@127.0.0.2"; addr NULL: the
 * name's own key, "alice", for every address together. */
static void login_key(const char *username, const char *addr, char *out, size_t len)
{
    size_t i = 0;

    for (; username[i] && i + 1 < len; i++)
        out[i] = (char)((username[i] >= 'A' && username[i] <= 'Z') ? username[i] + 32 : username[i]);
    out[i] = '\0';
    if (addr != NULL)
        snprintf(out + i, len - i, "@%s", addr);
}

/* Spends one try of login bucket `policy` for key, before the password is
 * checked, so the logins checked at once can never outnumber the tries
 * left; PERMITD_EEXHAUSTED (with the wait) when none is left. Redis being
 * down must not lock administrators out in an incident: then the check is
 * skipped (and logged). */
static int login_try(struct session *a, const char *policy, int tries, const char *rate,
                     const char *key, const char *whence, struct permitd_error *err)
{
    struct limiter_result r;
    struct permitd_error why = {0, ""};
    int rc = PERMITD_OK;

    for (int attempt = 0; attempt < 2; attempt++) {
        rc = limiter_own(a->limiter, policy, key, 1, deadline(), &r, &why);
        if (rc != PERMITD_ENOTFOUND)
            break;
        login_policy(a, policy, tries, rate);
    }
    if (rc != PERMITD_OK) {
        log_msg(LOG_LEVEL_WARN, "login throttle unavailable; login allowed", "policy=%s error=%s",
                policy, log_q(why.message));
        return PERMITD_OK;
    }
    if (!r.allowed)
        return permitd_error_set(err, PERMITD_EEXHAUSTED,
                                 "too many failed logins for this user %s; try again in %" PRId64
                                 " s",
                                 whence, (r.retry_after_ms + 999) / 1000);
    return PERMITD_OK;
}

/* Spends a try of the login's (name, address) bucket, then one of the
 * name's own bucket for every address together (--login-account-tries),
 * so many addresses guessing one password are held to it between them.
 * That bucket refills quickly (a try every 60/N s): an attacker can keep
 * the real administrator waiting while guessing, not for long after. */
static int login_spend(struct session *a, const char *username, const char *addr,
                       struct permitd_error *err)
{
    char key[128], rate[32];
    int n = a->cfg->login_account_tries, rc;

    login_key(username, addr, key, sizeof(key));
    if ((rc = login_try(a, LOGIN_POLICY, LOGIN_TRIES, LOGIN_RATE, key, "from this address",
                        err)) != PERMITD_OK || n <= 0)
        return rc;
    login_key(username, NULL, key, sizeof(key));
    snprintf(rate, sizeof(rate), "%.12f", n / 60.0);
    return login_try(a, LOGIN_ACCOUNT_POLICY, n, rate, key, "from all addresses together", err);
}

/* A login succeeded: the tries it spent (and the ones its address and
 * name had spent before) are given back by deleting both buckets' state
 * (a full bucket is no key), so an administrator who logs in often is
 * never held back. Only the right password does this. */
static void login_refund(struct session *a, const char *username, const char *addr)
{
    char key[128], name[POLICY_REDIS_KEY_MAX];
    struct redis_str del[2] = {{"DEL", 3}, {name, 0}};
    struct permitd_error err = {0, ""};

    /* One DEL a key: in a cluster the two live in different slots. */
    for (int i = 0; i < 2; i++) {
        login_key(username, i == 0 ? addr : NULL, key, sizeof(key));
        del[1].len = policy_bucket_key(name, a->cfg->redis_prefix,
                                       i == 0 ? LOGIN_POLICY : LOGIN_ACCOUNT_POLICY,
                                       POLICY_TOKEN_BUCKET, 0, key);
        if (redis_command(a->redis, del, 2, deadline(), NULL, NULL, NULL, &err) != PERMITD_OK)
            log_msg(LOG_LEVEL_WARN, "cannot give back a login's tries", "error=%s",
                    log_q(err.message));
    }
}

static void session_cookie(const struct session *a, struct http_response *resp, const char *token,
                           int max_age)
{
    http_response_header(resp, "Set-Cookie", "%s=%s; Path=/; HttpOnly; SameSite=Strict; Max-Age=%d%s",
                         AUTH_COOKIE, token, max_age, a->cfg->tls_cert[0] ? "; Secure" : "");
}

/* A login whose password is being checked (verifier.c): what its answer
 * needs once the check comes back to the listener's loop. It lives in the
 * request's own storage (http_request_alloc()), as long as the request. */
struct login {
    struct session *a;
    const struct http_request *http;
    enum connect_codec codec;
    int found;                      /* user is a real account */
    struct store_user user;
    char *password;                 /* request storage; wiped once handed over */
    size_t password_len;
    char addr[64], username[65];
};

/* Logs the user in: a new session, its cookie and the reply. */
static int login_session(struct login *l, struct http_response *resp, struct permitd_error *err)
{
    struct session *a = l->a;
    Permit__V1__LoginResponse rs;
    char token[AUTH_TOKEN_LEN + 1];
    int rc;

    if ((rc = auth_new_token(token, err)) != PERMITD_OK)
        return rc;
    pthread_mutex_lock(a->store_lock);
    rc = store_session_create(a->store, token, l->user.id, SESSION_TTL_S, err);
    pthread_mutex_unlock(a->store_lock);
    if (rc != PERMITD_OK)
        return rc;
    permit__v1__login_response__init(&rs);
    rs.username = l->user.username;
    rs.role = l->user.role;
    if ((rc = connect_reply(l->http, l->codec, &rs.base, NULL, resp, err)) != PERMITD_OK)
        return rc;
    session_cookie(a, resp, token, SESSION_TTL_S);
    log_msg(LOG_LEVEL_INFO, "login", "user=%s role=%s", l->user.username, l->user.role);
    return PERMITD_OK;
}

/* The password check is done (on the listener's loop): answers the login. */
static void login_checked(void *ud, int match)
{
    struct login *l = ud;
    struct http_response resp;
    struct permitd_error err = {0, ""};
    int rc;

    http_response_init(&resp);
    if (!match || !l->found) {
        log_msg(LOG_LEVEL_WARN, "login failed", "user=%s addr=%s", log_q(l->username), l->addr);
        rc = permitd_error_set(&err, PERMITD_EUNAUTHENTICATED, "wrong user name or password");
    } else {
        login_refund(l->a, l->username, l->addr);
        rc = login_session(l, &resp, &err);
    }
    if (rc != PERMITD_OK) {
        if (resp.body_owned)
            free(resp.body);
        http_response_init(&resp);
        connect_error_reply(&resp, &err);
    }
    l->a->answer(l->a->answer_ud, &resp);
    http_request_resume(l->http, &resp);
}

/* Hands the password to the verifier threads; a full queue is answered at
 * once (resource_exhausted), the rest by login_checked(). */
static void login_start(struct login *l)
{
    struct http_response resp;
    struct permitd_error err = {0, ""};
    int rc;

    /* Verify even for an unknown user (the dummy hash), so timing does
     * not tell which user names exist. */
    rc = verifier_submit(l->a->verifier,
                         ((struct session_worker *)http_request_worker(l->http))->logins,
                         l->found ? l->user.password_hash : NULL, l->password, login_checked, l,
                         &err);
    explicit_bzero(l->password, l->password_len);
    if (rc == PERMITD_OK)
        return;
    if (rc == PERMITD_EEXHAUSTED)
        log_msg(LOG_LEVEL_DEBUG, "login shed: password checks full", "user=%s addr=%s",
                log_q(l->username), l->addr);
    http_response_init(&resp);
    connect_error_reply(&resp, &err);
    l->a->answer(l->a->answer_ud, &resp);
    http_request_resume(l->http, &resp);
}

/* Checks what can be checked on the listener's thread (the name, the
 * throttle, the account), then defers: argon2 runs on a verifier thread
 * (verifier.c), never here, so /readyz and the other RPCs never wait for a
 * password check, and a flood of logins is capped by the verifier's queue. */
static int login(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                 ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct session *a = ud;
    const Permit__V1__LoginRequest *rq = (const void *)in_;
    struct permitd_error miss = {0, ""};
    struct login *l;
    int rc;

    if ((rc = need_store(a, err)) != PERMITD_OK)
        return rc;
    /* Only a name `permitd admin add-user` accepts can exist: the rest are
     * refused before the password is tried. MySQL compares names without
     * case (and would match "ed " or "éd" to "ed"), so within these the
     * lower-cased name is the one account's key for the login throttle. */
    if ((rc = policy_check_name("username", rq->username, err)) != PERMITD_OK)
        return rc;
    if (strlen(rq->username) > 64)
        return permitd_error_set(err, PERMITD_EINVAL, "username: at most 64 characters");
    if ((l = http_request_alloc(call->http, sizeof(*l))) == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    memset(l, 0, sizeof(*l));
    l->a = a;
    l->http = call->http;
    l->codec = call->codec;
    snprintf(l->username, sizeof(l->username), "%s", rq->username);
    if (http_request_client_addr(call->http, l->addr, sizeof(l->addr)) != 0)
        snprintf(l->addr, sizeof(l->addr), "unknown");
    if ((rc = login_spend(a, rq->username, l->addr, err)) != PERMITD_OK)
        return rc;
    pthread_mutex_lock(a->store_lock);
    rc = store_user_get(a->store, rq->username, &l->user, &miss);
    pthread_mutex_unlock(a->store_lock);
    if (rc != PERMITD_OK && rc != PERMITD_ENOTFOUND)
        return permitd_error_set(err, rc, "%s", miss.message);
    l->found = rc == PERMITD_OK;
    /* The decoded request is gone once this returns: login_start() hands
     * a copy to the verifier (which keeps its own) and wipes it. */
    l->password_len = strlen(rq->password);
    if ((l->password = http_request_alloc(call->http, l->password_len + 1)) == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    memcpy(l->password, rq->password, l->password_len + 1);
    http_request_defer(call->http);
    login_start(l);
    return CONNECT_DEFERRED;
}

static int logout(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                  ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct session *a = ud;
    char token[AUTH_TOKEN_LEN + 1];
    struct store_user user;
    int rc;

    /* The browser's copy goes either way; but like every RPC except Login,
     * Logout needs a live session (admin.proto), else unauthenticated. */
    session_cookie(a, call->resp, "", 0);
    if ((rc = session_authenticate(a, call, ROLE_VIEWER, &user, err)) != PERMITD_OK)
        return rc;
    if (auth_cookie_token(http_request_header(call->http, "Cookie"), token, sizeof(token)) != 0)
        return permitd_error_set(err, PERMITD_EUNAUTHENTICATED, "not logged in");
    pthread_mutex_lock(a->store_lock);
    rc = store_session_delete(a->store, token, err);
    pthread_mutex_unlock(a->store_lock);
    return rc;
}

static int who_am_i(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                    ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct session *a = ud;
    Permit__V1__WhoAmIResponse *rs = (void *)out_;
    struct store_user user;
    int rc;

    if ((rc = session_authenticate(a, call, ROLE_VIEWER, &user, err)) != PERMITD_OK)
        return rc;
    rs->username = connect_call_strdup(call, user.username);
    rs->role = connect_call_strdup(call, user.role);
    return rs->username && rs->role ? PERMITD_OK
                                    : permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
}

const struct connect_method session_methods[] = {
    ADMIN_METHOD("AdminAuthService", "Login", login, 0, login),
    ADMIN_METHOD("AdminAuthService", "Logout", logout, 0, logout),
    /* protoc-c spells WhoAmIRequest who_am_irequest */
    {"/permit.v1.AdminAuthService/WhoAmI", &permit__v1__who_am_irequest__descriptor,
     &permit__v1__who_am_iresponse__descriptor, 1, who_am_i},
    {NULL, NULL, NULL, 0, NULL},
};
