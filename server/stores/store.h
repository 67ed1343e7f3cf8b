/*
 * store.h - the MySQL policy store (libmariadb stays inside store.c).
 *
 * MySQL is the source of truth for policies. A struct store is one
 * connection, used by one thread at a time; it connects lazily, keeps
 * MYSQL_OPT_RECONNECT off and reconnects by itself on the next call after
 * the connection broke.
 */
#ifndef PERMITD_STORE_H
#define PERMITD_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "core/status.h"
#include "stores/policy.h"

struct store;

/* One policy as MySQL holds it. Strings are NUL-terminated. */
struct store_policy {
    uint64_t id;
    char name[129];
    int64_t max_permits;
    char rate[48];              /* DECIMAL as MySQL prints it, e.g. "0.500000000000";
                                   "" for every algorithm but the token bucket (NULL) */
    enum policy_algorithm algorithm;
    int64_t window_ms;          /* fixed_window (unless calendar), sliding_*; else 0 */
    enum policy_calendar calendar;  /* fixed_window aligned to the calendar; else NONE */
    int64_t lease_ms;           /* concurrency; else 0 */
    int enabled;
    char failure_mode[8];       /* "open" or "closed" */
    int colocate;               /* all buckets in the policy's slot (stores/policy.h) */
    int shadow;                 /* shadow mode: decided and counted, never refused */
    char local_lease[8];        /* "off", "on", "auto"; "": as --local-leases (0016) */
    int64_t local_lease_permits;    /* 0: as --local-lease-permits */
    /* reservations (issue 38, migration 0015): ttl cap, debt floor, expiry rule */
    int64_t reserve_ttl_ms, debt_floor;
    int expiry_refund;
    uint64_t version;
    int64_t updated_us;         /* updated_at, µs since the epoch (UTC) */
    char *apps;                 /* comma-separated, sorted; "" = none */
    /* Filled by store_policy_get/list only (NULL/"" in snapshots): */
    char *description;
    char created_by[129];
    char updated_by[129];
    char created_at[40];        /* RFC 3339 UTC, µs */
    char updated_at[40];
};

/* What an administrator writes. Strings must have passed
 * policy_check_fields(), the limits policy_check_limits(). */
struct store_policy_input {
    const char *name;
    const char *const *apps;    /* napps names */
    size_t napps;
    struct policy_limits limits;    /* algorithm, max_permits, rate (decimal text), ... */
    const char *description;
    int enabled;
    const char *failure_mode;
    int colocate;
    int shadow;
    int64_t reserve_ttl_ms;     /* 0: the default (5 minutes) */
    int64_t debt_floor;
    int expiry_refund;
};

/* One row of policy_audit. Strings are owned by the list. */
struct store_change {
    char action[8];
    char actor[129];
    char changed_at[40];
    char *old_value;            /* JSON text or "" */
    char *new_value;
};

struct store_user {
    uint64_t id;
    char username[65];
    char role[8];
    char password_hash[256];
};

/* Every policy at one instant (one consistent-snapshot transaction). */
struct store_snapshot {
    struct store_policy *policies;
    size_t count;
    int64_t taken_us;           /* MySQL's clock when the snapshot was taken */
    uint64_t max_id;            /* highest policy id it knows of: its rows', and
                                   those its audit names (a deleted row's too) */
    /* Rows left out because a name fails validation (a DBA's typo, an app
     * row "pay,admin"): one line each naming the row and why, for the
     * sync to report (store.c logs nothing of them). */
    char **skipped;
    size_t nskipped;
};

/* Returns a new store in *out (free with store_free()); does not connect
 * yet. cfg->mysql must be filled. */
int store_new(const struct config *cfg, struct store **out, struct permitd_error *err);
void store_free(struct store *s);

/* Reads every policy and its apps. On PERMITD_OK *snap is new (free with
 * store_snapshot_free()). PERMITD_EUNAVAILABLE when MySQL cannot be reached,
 * PERMITD_EINTERNAL for anything else (e.g. schema not migrated), with a
 * message saying which. */
int store_snapshot(struct store *s, struct store_snapshot **snap, struct permitd_error *err);
void store_snapshot_free(struct store_snapshot *snap);

/* One policy with every field, or PERMITD_ENOTFOUND. Free the strings
 * with store_policy_clear(). */
int store_policy_get(struct store *s, const char *name, struct store_policy *out,
                     struct permitd_error *err);
void store_policy_clear(struct store_policy *p);
void store_policies_free(struct store_policy *v, size_t n);

/* One page of the policy list (the admin UI's, issue 22). */
struct store_page_query {
    const char *filter;     /* "": every policy; else those whose name, description or
                               one of whose apps holds it, without regard to case */
    const char *after;      /* "": from the first; else the rows after this name */
    int descending;         /* by name from Z to A */
    size_t limit;           /* rows at most */
};

/* The policies of one page by name, in MySQL's order of names (keyset:
 * the page after a name stays the same when rows come or go before it),
 * and in *total how many match the filter. *out is freed with
 * store_policies_free(). */
int store_policy_page(struct store *s, const struct store_page_query *q,
                      struct store_policy **out, size_t *n, size_t *total,
                      struct permitd_error *err);

/* The names of the policies that match filter (as in store_page_query),
 * by name: for the orders MySQL cannot make (traffic, level). *names is
 * freed with store_names_free(). */
int store_policy_names(struct store *s, const char *filter, char ***names, size_t *n,
                       struct permitd_error *err);
void store_names_free(char **names, size_t n);

/* The policies of these names (those that still exist), in no order.
 * *out is freed with store_policies_free(). */
int store_policy_named(struct store *s, const char *const *names, size_t n,
                       struct store_policy **out, size_t *nout, struct permitd_error *err);

/* Creates a policy and its audit row in one transaction, as `actor`.
 * PERMITD_EEXIST when the name is taken. On success *out (may be NULL) is
 * the stored policy. */
int store_policy_create(struct store *s, const struct store_policy_input *in,
                        const char *actor, struct store_policy *out,
                        struct permitd_error *err);
/* Updates a policy if its version is still `version`; PERMITD_EABORTED
 * when someone changed it since, PERMITD_ENOTFOUND when it is gone. */
int store_policy_update(struct store *s, const struct store_policy_input *in,
                        uint64_t version, const char *actor, struct store_policy *out,
                        struct permitd_error *err);
/* Deletes a policy (version 0: whatever version it has). Gateway rules and
 * Envoy descriptors naming it (stores/policyrefs.h) refuse the delete
 * (PERMITD_EPRECONDITION naming them) unless remove_refs, which deletes
 * them in the same transaction. */
int store_policy_delete(struct store *s, const char *name, uint64_t version, int remove_refs,
                        const char *actor, struct permitd_error *err);
/* What names policy `name`, as policyrefs_list() words it. */
int store_policy_refs(struct store *s, const char *name, char *buf, size_t size, int *count,
                      struct permitd_error *err);
/* Whether the last change to policy `name` is a delete by actor, made at
 * most within_s seconds ago, of version `version` (0: of any version, as
 * store_policy_delete() takes it): the audit row a retried DeletePolicy
 * finds when its first try was committed. PERMITD_OK when it is,
 * PERMITD_ENOTFOUND when not (err then untouched), or the store's error. */
int store_policy_deleted(struct store *s, const char *name, uint64_t version,
                         const char *actor, int within_s, struct permitd_error *err);

/* The newest `limit` changes of a policy, newest first. */
int store_history(struct store *s, const char *name, int limit, struct store_change **out,
                  size_t *n, struct permitd_error *err);
void store_history_free(struct store_change *v, size_t n);

/* One reset of policy's bucket key by actor into bucket_audit (migration
 * 0013), with old_json the bucket as it was before (JSON text). Written
 * before the reset, which the caller does only on PERMITD_OK. */
int store_bucket_audit(struct store *s, const char *policy, const char *key,
                       const char *actor, const char *old_json, struct permitd_error *err);

/* Admin accounts. */
int store_user_get(struct store *s, const char *username, struct store_user *out,
                   struct permitd_error *err);
/* (Users are written by stores/users.h; a disabled one is found by
 * neither the login nor a session.) */
/* Sessions: only SHA-256(token) is stored. */
int store_session_create(struct store *s, const char *token, uint64_t user_id, int ttl_s,
                         struct permitd_error *err);
/* The user of a live session, or PERMITD_EUNAUTHENTICATED. */
int store_session_user(struct store *s, const char *token, struct store_user *out,
                       struct permitd_error *err);
int store_session_delete(struct store *s, const char *token, struct permitd_error *err);

/* SELECT 1 within the configured timeout: PERMITD_OK or unavailable. */
int store_ping(struct store *s, struct permitd_error *err);

#endif
