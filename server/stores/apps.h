/*
 * apps.h - apps and their API keys in MySQL (migrations/0007_apps.up.sql);
 * libmariadb stays inside apps.c.
 *
 * What the admin RPCs and `permitd admin` write (apps, keys issued and
 * revoked: every change audited by the schema's triggers, naming the
 * actor this module marks the session with), and what the sync reads into
 * the in-memory key table (decisions/appkeys.h). A key's secret never
 * comes here: only its prefix and the SHA-256 of its secret, as hex.
 *
 * A struct apps_db is one connection of its own, used by one thread at a
 * time (the caller locks); it connects lazily and again after a failure.
 */
#ifndef PERMITD_APPS_H
#define PERMITD_APPS_H

#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "core/status.h"

#define APPS_NAME_MAX 128
#define APPS_PREFIX_MAX 31          /* app_keys.prefix is VARCHAR(32) */
#define APPS_TIME_MAX 40            /* RFC 3339 UTC with µs, or "" */

/* One key as lists show it: never its secret, nor its hash. */
struct apps_key {
    char prefix[APPS_PREFIX_MAX + 1];
    char created_by[APPS_NAME_MAX + 1];
    char created_at[APPS_TIME_MAX];
    char expires_at[APPS_TIME_MAX];     /* "" = never */
    char revoked_at[APPS_TIME_MAX];     /* "" = not revoked */
    char revoked_by[APPS_NAME_MAX + 1];
    char last_used_at[APPS_TIME_MAX];   /* "" = never seen (updated once per sync pass) */
    int expired;                        /* expires_at has passed (MySQL's clock) */
};

/* One app with its keys and the policies that name it. */
struct apps_app {
    char name[APPS_NAME_MAX + 1];
    char *description;
    int enabled;
    char created_by[APPS_NAME_MAX + 1];
    char updated_by[APPS_NAME_MAX + 1];
    char created_at[APPS_TIME_MAX];
    char updated_at[APPS_TIME_MAX];
    char *policies;                     /* comma-separated, sorted; "" = none */
    struct apps_key *keys;              /* newest first */
    size_t nkeys;
};

/* One key as the in-memory table needs it (the sync's load). */
struct apps_key_row {
    char prefix[APPS_PREFIX_MAX + 1];
    char app[APPS_NAME_MAX + 1];
    char hash[65];                      /* SHA-256(secret), lowercase hex */
    int64_t expires_s;                  /* Unix seconds; 0 = never */
    int revoked;
    int app_enabled;
};

struct apps_db;

/* Returns a new handle in *out (free with apps_db_free()); does not
 * connect yet. cfg->mysql must be filled; cfg must outlive it. */
int apps_db_new(const struct config *cfg, struct apps_db **out, struct permitd_error *err);
void apps_db_free(struct apps_db *db);

/* Every app but '*' (the "any app" row), by name. *out is freed with
 * apps_list_free(). */
int apps_list(struct apps_db *db, struct apps_app **out, size_t *n, struct permitd_error *err);
void apps_list_free(struct apps_app *v, size_t n);

/* Creates app `name` (which must have passed policy_check_name()), as
 * actor. PERMITD_EEXIST when it exists, unless this very create was
 * committed at most retry_s seconds ago (the app's last change is its
 * creation, by actor, with this description: a retry after a lost
 * answer): then PERMITD_OK with *applied = 1 (else 0). retry_s 0: no
 * retry is recognised (the command line's verbs). */
int apps_create(struct apps_db *db, const char *name, const char *description,
                const char *actor, int retry_s, int *applied, struct permitd_error *err);

/* Changes an app: description unless NULL, enabled unless < 0.
 * PERMITD_ENOTFOUND when there is no such app. */
int apps_update(struct apps_db *db, const char *name, const char *description, int enabled,
                const char *actor, struct permitd_error *err);

/* Stores a new key of app: its prefix and the hex SHA-256 of its secret,
 * expiring expires_in_s seconds from now by MySQL's clock (0: never).
 * PERMITD_ENOTFOUND when there is no such app, PERMITD_EPRECONDITION for
 * '*' (no app can be "any app"). */
int apps_key_insert(struct apps_db *db, const char *app, const char *prefix,
                    const char *hash_hex, int64_t expires_in_s, const char *actor,
                    struct permitd_error *err);

/* Revokes the key with this prefix; its app into app (APPS_NAME_MAX + 1
 * bytes). PERMITD_ENOTFOUND when no key has it, PERMITD_EPRECONDITION
 * when it was revoked already (err says when and by whom), unless actor
 * revoked it at most retry_s seconds ago (the retry of a revoke whose
 * answer was lost): then PERMITD_OK with *applied = 1 (else 0); retry_s
 * 0: none is recognised. */
int apps_key_revoke(struct apps_db *db, const char *prefix, const char *actor, int retry_s,
                    char *app, int *applied, struct permitd_error *err);

/* Every key (revoked ones too: a revoked key is answered "revoked", not
 * "unknown") with its app's state. *out is freed with free(). */
int apps_keys_load(struct apps_db *db, struct apps_key_row **out, size_t *n,
                   struct permitd_error *err);

/* Sets last_used_at = now for these keys (the ones seen since the last
 * call). Not audited. */
int apps_keys_touch(struct apps_db *db, const char *const *prefixes, size_t n,
                    struct permitd_error *err);

#endif
