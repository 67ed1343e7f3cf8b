/*
 * override_edits.h - the admin side of a policy's overrides in MySQL
 * (migration 0014, table policy_overrides): list, read, create, update,
 * delete and import them, as the admin RPCs (control/overridesvc.c) ask.
 * libmariadb stays inside override_edits.c. (The engine reads the same
 * table into every instance's memory on its own: stores/overrides.c of
 * wip/overrides.)
 *
 * An override belongs to a policy and matches callers by exact key
 * ("key"), key prefix ("prefix") or app ("app"); it sets the policy's
 * algorithm's limits for them ("limit"), or blocks or exempts them. A
 * (policy, match_kind, match_value) has one override at most.
 *
 * Every write is one transaction with @permitd_actor set to whoever asked
 * (the schema's audit triggers name it) and created_by / updated_by set to
 * the same; the policy's row is share-locked in it (policyrefs_require()),
 * so an override never names a policy deleted under the write. An update
 * or delete names the version it started from: the row is locked and
 * compared first, so of two admins editing one override the second is
 * told (PERMITD_EABORTED), not overwritten.
 *
 * A struct override_edits_db is one connection of its own, used by one
 * thread at a time (the caller locks); it connects lazily and again after
 * a failure.
 */
#ifndef PERMITD_OVERRIDE_EDITS_H
#define PERMITD_OVERRIDE_EDITS_H

#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "core/status.h"
#include "stores/policy.h"

#define OVERRIDE_VALUE_MAX POLICY_KEY_MAX      /* match_value, bytes (a key's limit) */
#define OVERRIDE_DESCRIPTION_MAX 1024          /* characters (the column's) */
#define OVERRIDES_PER_POLICY_MAX 10000         /* more are refused (resource_exhausted) */

/* One override as stored. Text fields are NUL-terminated. */
struct override_row {
    int64_t id;                         /* 0 for one not stored yet */
    char policy[POLICY_NAME_MAX + 1];
    char kind[8];                       /* "key", "prefix" or "app" */
    char value[OVERRIDE_VALUE_MAX + 1];
    char action[8];                     /* "limit", "block" or "exempt" */
    int64_t max_permits;                /* 0: none (NULL) */
    char rate[40];                      /* decimal text; "": none */
    int64_t window_ms;                  /* 0: none (the policy's) */
    int64_t expires_us;                 /* Unix us; 0: never (writes; a read leaves 0) */
    char description[OVERRIDE_DESCRIPTION_MAX * 4 + 1];
    int64_t version;
    char created_by[POLICY_NAME_MAX + 1];
    char updated_by[POLICY_NAME_MAX + 1];
    char created_at[40];                /* RFC 3339 UTC */
    char updated_at[40];
    char expires_at[40];                /* at read: RFC 3339 UTC; "" for never */
    int expired;                        /* at read: expires_at has passed (MySQL's clock) */
};

/* The id and match of an override, for an order MySQL cannot give (by
 * traffic, overridesvc.c). */
struct override_match {
    int64_t id;
    char kind[8];
    char value[OVERRIDE_VALUE_MAX + 1];
};

/* What a list asks for. Exactly one of policy and app is set: a policy's
 * overrides, or those of match_kind "app" naming app across policies. */
enum override_sort { OVERRIDE_SORT_MATCH, OVERRIDE_SORT_UPDATED, OVERRIDE_SORT_EXPIRES };
struct override_query {
    const char *policy;                 /* or NULL */
    const char *app;                    /* or NULL */
    const char *search;                 /* match_value contains it; "" or NULL: any */
    enum override_sort sort;
    size_t offset, limit;
};

struct override_edits_db;

/* Returns a new handle in *out (free with override_edits_db_free()); does
 * not connect yet. cfg->mysql must be filled; cfg must outlive it. */
int override_edits_db_new(const struct config *cfg, struct override_edits_db **out,
                          struct permitd_error *err);
void override_edits_db_free(struct override_edits_db *db);

/* The algorithm and fixed-window calendar of policy, for checking an
 * override's limits: PERMITD_EPRECONDITION naming field when there is no
 * such policy. */
int override_edits_policy(struct override_edits_db *db, const char *field, const char *policy,
                          enum policy_algorithm *algorithm, struct permitd_error *err);

/* One page of the overrides q asks for, in its order: *out a new array of
 * *n rows (free()), *total those matching over every page. */
int override_edits_list(struct override_edits_db *db, const struct override_query *q,
                        struct override_row **out, size_t *n, int64_t *total,
                        struct permitd_error *err);

/* Every override of q (policy and search; offset, limit and sort ignored)
 * as id and match only: *out a new array of *n (free()). */
int override_edits_matches(struct override_edits_db *db, const struct override_query *q,
                           struct override_match **out, size_t *n, struct permitd_error *err);

/* The overrides of ids[0..n), in that order (an id since deleted is left
 * out): *out a new array of *nout rows (free()). */
int override_edits_by_ids(struct override_edits_db *db, const int64_t *ids, size_t n,
                          struct override_row **out, size_t *nout, struct permitd_error *err);

/* Override id into *out: PERMITD_ENOTFOUND naming it when there is none. */
int override_edits_get(struct override_edits_db *db, int64_t id, struct override_row *out,
                       struct permitd_error *err);

/* Stores r (checked by the caller) as a new override, as actor; its id
 * into *id. PERMITD_EPRECONDITION when the policy does not exist,
 * PERMITD_EEXIST when it has an override of that match already (err names
 * its id), PERMITD_EEXHAUSTED past OVERRIDES_PER_POLICY_MAX. */
int override_edits_create(struct override_edits_db *db, const struct override_row *r,
                          const char *actor, int64_t *id, struct permitd_error *err);

/* Replaces override r->id with r, as actor, if it is still at r->version
 * (0: any): PERMITD_ENOTFOUND, PERMITD_EABORTED when another edit came
 * first (err names both versions), else as override_edits_create(). The
 * policy it belonged to before into old_policy (POLICY_NAME_MAX + 1
 * bytes), so both get the change notice. */
int override_edits_update(struct override_edits_db *db, const struct override_row *r,
                          const char *actor, char *old_policy, struct permitd_error *err);

/* Deletes override id, as actor, if it is at version (0: any); its policy
 * into policy (POLICY_NAME_MAX + 1 bytes). Errors as
 * override_edits_update(). */
int override_edits_delete(struct override_edits_db *db, int64_t id, int64_t version,
                          const char *actor, char *policy, struct permitd_error *err);

/* What an import did. */
struct override_import_counts {
    int64_t created, updated, deleted;
};

/* Writes rows[0..n) (checked by the caller, all of policy, no two of one
 * match) as actor, in one transaction: each creates its match's override
 * or replaces it; with replace, the policy's overrides whose match is not
 * among rows are deleted. All or nothing. Errors as
 * override_edits_create(). */
int override_edits_import(struct override_edits_db *db, const char *policy,
                          const struct override_row *rows, size_t n, int replace,
                          const char *actor, struct override_import_counts *counts,
                          struct permitd_error *err);

#endif
