/*
 * session.h - AdminAuthService (Login, Logout, WhoAmI) and the session
 * and role check of every admin RPC, on the admin listener (admin.c
 * serves them).
 */
#ifndef PERMITD_SESSION_H
#define PERMITD_SESSION_H

#include <pthread.h>

#include "control/adminrpc.h"
#include "control/sync.h"
#include "core/config.h"
#include "core/status.h"
#include "decisions/limiter.h"
#include "stores/redis.h"
#include "stores/store.h"
#include "transport/connect.h"
#include "transport/http.h"

struct pool_inbox;
struct session;
struct verifier;

/* What the admin listener's worker (http_request_worker()) starts with:
 * the inbox of its loop through which password checks come back
 * (verifier_inbox_new(); NULL without a store). A struct that holds more
 * has this as its first member, so the Login handler finds it. */
struct session_worker {
    struct pool_inbox *logins;
};

/* Returns a new session keeper in *out (free with session_free()).
 * store (NULL without --mysql-url: then every RPC answers
 * failed_precondition) is used only under store_lock; limiter holds the
 * login throttle's buckets, whose policies sync writes (sync may be NULL)
 * and whose state a login that succeeds deletes in redis;
 * verifier checks passwords (NULL without a store). answer(answer_ud,
 * resp) adds the listener's headers to a Login answered later, before it
 * is sent. Everything passed must outlive it. */
int session_new(const struct config *cfg, struct redis *redis, struct store *store,
                pthread_mutex_t *store_lock, struct limiter *limiter, struct sync *sync,
                struct verifier *verifier,
                void (*answer)(void *ud, struct http_response *resp), void *answer_ud,
                struct session **out, struct permitd_error *err);
void session_free(struct session *s);

/* Who calls: *user filled when the call carries a live session of an
 * enabled user whose role is need (ADMIN_VIEWER, ADMIN_EDITOR or
 * ADMIN_ADMIN, adminrpc.h) or above; else PERMITD_EPRECONDITION without a
 * store, PERMITD_EUNAUTHENTICATED, or PERMITD_EPERM naming the user and
 * the role. */
int session_authenticate(struct session *s, struct connect_call *call, int need,
                         struct store_user *user, struct permitd_error *err);

/* AdminAuthService's procedures, ud the session. Login defers its answer
 * (the password is checked on the verifier's threads), so it must run on
 * the listener's own thread, never be offloaded: SESSION_LOGIN_PATH. */
extern const struct connect_method session_methods[];
#define SESSION_LOGIN_PATH "/permit.v1.AdminAuthService/Login"

#endif
