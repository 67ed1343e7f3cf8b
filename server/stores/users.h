/*
 * users.h - the admin UI's users in MySQL (admin_users and admin_sessions
 * of migration 0002, the roles, enabled and user_audit of 0009);
 * libmariadb stays inside users.c.
 *
 * What `permitd admin add-user` and the UserService RPCs write. Every
 * change runs as one transaction with @permitd_actor set to whoever asked,
 * so migration 0009's triggers write the audit row (who, when, role and
 * enabled before and after; never a password or its hash). Ending a
 * user's sessions is audited here (action 'sessions').
 *
 * The last enabled admin stays: a change that would demote, disable or
 * delete it is refused (PERMITD_EPRECONDITION) inside the transaction
 * that would make it, with the enabled admins' rows locked, so two admins
 * demoting each other at once cannot both succeed.
 *
 * A struct users_db is one connection of its own, used by one thread at
 * a time (the caller locks); it connects lazily and again after a failure.
 */
#ifndef PERMITD_USERS_H
#define PERMITD_USERS_H

#include <stddef.h>

#include "core/config.h"
#include "core/status.h"

#define USERS_NAME_MAX 64           /* admin_users.username is VARCHAR(64) */
#define USERS_TIME_MAX 40           /* RFC 3339 UTC with µs, or "" */

/* One user as the Users page lists it: never the password hash. */
struct users_user {
    char username[USERS_NAME_MAX + 1];
    char role[8];                   /* viewer, editor or admin */
    int enabled;
    int sessions;                   /* live sessions */
    char created_at[USERS_TIME_MAX];
    char updated_at[USERS_TIME_MAX];
    char changed_by[129];           /* the actor of its newest audit row, or "" */
};

struct users_db;

/* A new, not yet connected handle for cfg's --mysql-url (free with
 * users_db_free()); cfg must outlive it. */
int users_db_new(const struct config *cfg, struct users_db **out, struct permitd_error *err);
void users_db_free(struct users_db *d);

/* 1 when role is viewer, editor or admin. */
int users_role_valid(const char *role);

/* Every user, by name, into a new array *out of *n (free()). */
int users_list(struct users_db *d, struct users_user **out, size_t *n, struct permitd_error *err);

/* The number of users there are, into *n. */
int users_count(struct users_db *d, size_t *n, struct permitd_error *err);

/* Creates a user (PERMITD_EEXIST when the name is taken). password_hash
 * is argon2id's PHC string (control/auth.h). */
int users_add(struct users_db *d, const char *username, const char *password_hash,
              const char *role, const char *actor, struct permitd_error *err);

/* The command line's add-user: creates the user, or gives an existing
 * one a new password and role and ends its sessions. *created says which. */
int users_put(struct users_db *d, const char *username, const char *password_hash,
              const char *role, const char *actor, int *created, struct permitd_error *err);

/* Changes a user's role (PERMITD_ENOTFOUND when there is no such user). */
int users_set_role(struct users_db *d, const char *username, const char *role,
                   const char *actor, struct permitd_error *err);

/* Gives a user a new password and ends its sessions. */
int users_set_password(struct users_db *d, const char *username, const char *password_hash,
                       const char *actor, struct permitd_error *err);

/* Enables or disables a user; disabling ends its sessions. */
int users_set_enabled(struct users_db *d, const char *username, int enabled, const char *actor,
                      struct permitd_error *err);

/* Ends every session of a user; *ended (may be NULL) counts them. */
int users_end_sessions(struct users_db *d, const char *username, const char *actor, int *ended,
                       struct permitd_error *err);

/* Deletes a user and its sessions (its audit rows stay). */
int users_delete(struct users_db *d, const char *username, const char *actor,
                 struct permitd_error *err);

#endif
