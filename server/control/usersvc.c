/*
 * usersvc.c - UserService and `permitd admin add-user` (see usersvc.h).
 *
 * Only admins reach the RPCs (session.c decides from the session). A
 * password arrives in a request, is checked against the one password rule
 * (auth_check_password(): the command line's too), hashed with argon2id
 * here on the admin RPCs' pool, and wiped; it is never logged, stored or
 * audited. The MySQL connection is this module's own, used under one
 * mutex: user changes are rare.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "control/admin.h"
#include "control/auth.h"
#include "control/usersvc.h"
#include "core/log.h"
#include "permit/v1/users.pb-c.h"
#include "stores/policy.h"
#include "stores/users.h"
#include "transport/connect.h"

struct usersvc {
    struct admin *admin;
    struct users_db *db;
    pthread_mutex_t lock;
};

int usersvc_new(const struct config *cfg, struct admin *admin, struct usersvc **out,
                struct permitd_error *err)
{
    struct usersvc *s = calloc(1, sizeof(*s));
    int rc;

    *out = NULL;
    if (s == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    s->admin = admin;
    if ((rc = users_db_new(cfg, &s->db, err)) != PERMITD_OK) {
        free(s);
        return rc;
    }
    pthread_mutex_init(&s->lock, NULL);
    *out = s;
    return PERMITD_OK;
}

void usersvc_free(struct usersvc *s)
{
    if (s == NULL)
        return;
    users_db_free(s->db);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

/* A user name as `add-user` accepts it (and Login looks up). */
int usersvc_check_username(const char *name, struct permitd_error *err)
{
    int rc = policy_check_name("username", name, err);

    if (rc == PERMITD_OK && strlen(name) > USERS_NAME_MAX)
        rc = permitd_error_set(err, PERMITD_EINVAL, "username: %zu characters, the limit is %d",
                               strlen(name), USERS_NAME_MAX);
    return rc;
}

int usersvc_check_role(const char *role, struct permitd_error *err)
{
    if (!users_role_valid(role))
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "role: \"%.20s\" is not viewer, editor or admin", role);
    return PERMITD_OK;
}

/* Checks and hashes a password from a request, then wipes the request's
 * copy (protobuf-c's memory, freed with the call). */
static int hash_password(char *password, char *hash, struct permitd_error *err)
{
    int rc = auth_check_password(password, err);

    if (rc == PERMITD_OK)
        rc = auth_hash_password(password, hash, err);
    explicit_bzero(password, strlen(password));
    return rc;
}

static Permit__V1__User *user_proto(struct connect_call *call, const struct users_user *u)
{
    Permit__V1__User *m = connect_call_alloc(call, sizeof(*m));

    if (m == NULL)
        return NULL;
    permit__v1__user__init(m);
    m->username = connect_call_strdup(call, u->username);
    m->role = connect_call_strdup(call, u->role);
    m->enabled = u->enabled;
    m->sessions = u->sessions;
    m->created_at = connect_call_strdup(call, u->created_at);
    m->updated_at = connect_call_strdup(call, u->updated_at);
    m->changed_by = connect_call_strdup(call, u->changed_by);
    if (!m->username || !m->role || !m->created_at || !m->updated_at || !m->changed_by)
        return NULL;
    return m;
}

/* The user `name` as ListUsers shows it, into *out. Under s->lock. */
static int one_user(struct usersvc *s, struct connect_call *call, const char *name,
                    Permit__V1__User **out, struct permitd_error *err)
{
    struct users_user *v = NULL;
    size_t n = 0;
    int rc = users_list(s->db, &v, &n, err);

    *out = NULL;
    for (size_t i = 0; rc == PERMITD_OK && i < n; i++)
        if (strcasecmp(v[i].username, name) == 0 && (*out = user_proto(call, &v[i])) == NULL)
            rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    if (rc == PERMITD_OK && *out == NULL)
        rc = permitd_error_set(err, PERMITD_ENOTFOUND, "username: no user named \"%s\"", name);
    free(v);
    return rc;
}

/* ---- the RPCs ---- */

static int list_users(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                      ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct usersvc *s = ud;
    Permit__V1__ListUsersResponse *rs = (void *)out_;
    struct users_user *v = NULL;
    char me[USERS_NAME_MAX + 1];
    size_t n = 0;
    int rc;

    (void)in_;
    (void)scratch;
    if ((rc = admin_authenticate(s->admin, call, ADMIN_ADMIN, me, sizeof(me), err)) != PERMITD_OK)
        return rc;
    pthread_mutex_lock(&s->lock);
    rc = users_list(s->db, &v, &n, err);
    pthread_mutex_unlock(&s->lock);
    if (rc == PERMITD_OK && (rs->users = connect_call_alloc(call, (n + 1) * sizeof(*rs->users))) == NULL)
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    for (size_t i = 0; rc == PERMITD_OK && i < n; i++)
        if ((rs->users[rs->n_users++] = user_proto(call, &v[i])) == NULL)
            rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    free(v);
    return rc;
}

static int add_user(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                    ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct usersvc *s = ud;
    const Permit__V1__AddUserRequest *rq = (const void *)in_;
    Permit__V1__AddUserResponse *rs = (void *)out_;
    char me[USERS_NAME_MAX + 1], hash[AUTH_HASH_MAX];
    int rc;

    (void)scratch;
    if ((rc = admin_authenticate(s->admin, call, ADMIN_ADMIN, me, sizeof(me), err)) != PERMITD_OK ||
        (rc = usersvc_check_username(rq->username, err)) != PERMITD_OK ||
        (rc = usersvc_check_role(rq->role, err)) != PERMITD_OK ||
        (rc = hash_password(rq->password, hash, err)) != PERMITD_OK)
        return rc;
    pthread_mutex_lock(&s->lock);
    if ((rc = users_add(s->db, rq->username, hash, rq->role, me, err)) == PERMITD_OK)
        rc = one_user(s, call, rq->username, &rs->user, err);
    pthread_mutex_unlock(&s->lock);
    if (rc == PERMITD_OK)
        log_msg(LOG_LEVEL_INFO, "user added", "user=%s role=%s by=%s", rq->username, rq->role, me);
    return rc;
}

static int set_user_role(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                         ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct usersvc *s = ud;
    const Permit__V1__SetUserRoleRequest *rq = (const void *)in_;
    Permit__V1__SetUserRoleResponse *rs = (void *)out_;
    char me[USERS_NAME_MAX + 1];
    int rc;

    (void)scratch;
    if ((rc = admin_authenticate(s->admin, call, ADMIN_ADMIN, me, sizeof(me), err)) != PERMITD_OK ||
        (rc = usersvc_check_username(rq->username, err)) != PERMITD_OK ||
        (rc = usersvc_check_role(rq->role, err)) != PERMITD_OK)
        return rc;
    pthread_mutex_lock(&s->lock);
    if ((rc = users_set_role(s->db, rq->username, rq->role, me, err)) == PERMITD_OK)
        rc = one_user(s, call, rq->username, &rs->user, err);
    pthread_mutex_unlock(&s->lock);
    if (rc == PERMITD_OK)
        log_msg(LOG_LEVEL_INFO, "user role set", "user=%s role=%s by=%s", rq->username, rq->role, me);
    return rc;
}

static int reset_password(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                          ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct usersvc *s = ud;
    const Permit__V1__ResetPasswordRequest *rq = (const void *)in_;
    Permit__V1__ResetPasswordResponse *rs = (void *)out_;
    char me[USERS_NAME_MAX + 1], hash[AUTH_HASH_MAX];
    int rc;

    (void)scratch;
    if ((rc = admin_authenticate(s->admin, call, ADMIN_ADMIN, me, sizeof(me), err)) != PERMITD_OK ||
        (rc = usersvc_check_username(rq->username, err)) != PERMITD_OK ||
        (rc = hash_password(rq->password, hash, err)) != PERMITD_OK)
        return rc;
    pthread_mutex_lock(&s->lock);
    if ((rc = users_set_password(s->db, rq->username, hash, me, err)) == PERMITD_OK)
        rc = one_user(s, call, rq->username, &rs->user, err);
    pthread_mutex_unlock(&s->lock);
    if (rc == PERMITD_OK)
        log_msg(LOG_LEVEL_INFO, "user password reset", "user=%s by=%s", rq->username, me);
    return rc;
}

static int end_sessions(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                        ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct usersvc *s = ud;
    const Permit__V1__EndSessionsRequest *rq = (const void *)in_;
    Permit__V1__EndSessionsResponse *rs = (void *)out_;
    char me[USERS_NAME_MAX + 1];
    int rc, ended = 0;

    (void)scratch;
    if ((rc = admin_authenticate(s->admin, call, ADMIN_ADMIN, me, sizeof(me), err)) != PERMITD_OK ||
        (rc = usersvc_check_username(rq->username, err)) != PERMITD_OK)
        return rc;
    pthread_mutex_lock(&s->lock);
    if ((rc = users_end_sessions(s->db, rq->username, me, &ended, err)) == PERMITD_OK)
        rc = one_user(s, call, rq->username, &rs->user, err);
    pthread_mutex_unlock(&s->lock);
    rs->ended = ended;
    if (rc == PERMITD_OK)
        log_msg(LOG_LEVEL_INFO, "user sessions ended", "user=%s sessions=%d by=%s", rq->username,
                ended, me);
    return rc;
}

static int set_user_enabled(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                            ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct usersvc *s = ud;
    const Permit__V1__SetUserEnabledRequest *rq = (const void *)in_;
    Permit__V1__SetUserEnabledResponse *rs = (void *)out_;
    char me[USERS_NAME_MAX + 1];
    int rc;

    (void)scratch;
    if ((rc = admin_authenticate(s->admin, call, ADMIN_ADMIN, me, sizeof(me), err)) != PERMITD_OK ||
        (rc = usersvc_check_username(rq->username, err)) != PERMITD_OK)
        return rc;
    pthread_mutex_lock(&s->lock);
    if ((rc = users_set_enabled(s->db, rq->username, rq->enabled, me, err)) == PERMITD_OK)
        rc = one_user(s, call, rq->username, &rs->user, err);
    pthread_mutex_unlock(&s->lock);
    if (rc == PERMITD_OK)
        log_msg(LOG_LEVEL_INFO, rq->enabled ? "user enabled" : "user disabled", "user=%s by=%s",
                rq->username, me);
    return rc;
}

static int delete_user(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                       ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct usersvc *s = ud;
    const Permit__V1__DeleteUserRequest *rq = (const void *)in_;
    char me[USERS_NAME_MAX + 1];
    int rc;

    (void)out_;
    (void)scratch;
    if ((rc = admin_authenticate(s->admin, call, ADMIN_ADMIN, me, sizeof(me), err)) != PERMITD_OK ||
        (rc = usersvc_check_username(rq->username, err)) != PERMITD_OK)
        return rc;
    pthread_mutex_lock(&s->lock);
    rc = users_delete(s->db, rq->username, me, err);
    pthread_mutex_unlock(&s->lock);
    if (rc == PERMITD_OK)
        log_msg(LOG_LEVEL_INFO, "user deleted", "user=%s by=%s", rq->username, me);
    return rc;
}

const struct connect_method usersvc_methods[] = {
    ADMIN_METHOD("UserService", "ListUsers", list_users, 1, list_users),
    ADMIN_METHOD("UserService", "AddUser", add_user, 0, add_user),
    ADMIN_METHOD("UserService", "SetUserRole", set_user_role, 0, set_user_role),
    ADMIN_METHOD("UserService", "ResetPassword", reset_password, 0, reset_password),
    ADMIN_METHOD("UserService", "EndSessions", end_sessions, 0, end_sessions),
    ADMIN_METHOD("UserService", "SetUserEnabled", set_user_enabled, 0, set_user_enabled),
    ADMIN_METHOD("UserService", "DeleteUser", delete_user, 0, delete_user),
    {NULL, NULL, NULL, 0, NULL},
};
