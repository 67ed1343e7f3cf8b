/*
 * policies.h - this instance's in-memory copy of every policy it decides.
 *
 * lua/bucket.lua reads no policy hash: a keyed bucket may live in a Redis
 * Cluster slot of its own (stores/policy.h), where its policy's hash is
 * not. The limits reach the script in ARGV, from this table; the apps
 * check and the enabled flag are decided here, in C, before any call, and
 * the failure_mode when Redis cannot answer (the one table of it).
 *
 * The table is an immutable sorted array of entries, swapped atomically
 * by a writer; a reader looks a name up without a lock and takes a
 * reference on the entry it found, which keeps that entry alive for as
 * long as its decision is out. An old array is freed once every reader
 * that could have seen it has left (see policies.c).
 *
 * It is fed from Redis's copy of each policy (the hash
 * <prefix>{NAME}:policy, which the sync writes from MySQL, or an operator
 * writes by hand with lua/sync.lua "set"): policies_reload() reads one hash
 * and installs what it holds; policies_reload_many() reads many in
 * pipelined round trips and installs each batch with one table copy. Callers: the sync after each write and at
 * each pass (control/sync.c), the admin RPC writes on this instance (the
 * next Acquire after the RPC returns decides under the edit), the change
 * notices (stores/redis_notice.h), a decision that finds no entry, and a
 * decision that the script answered "stale".
 */
#ifndef PERMITD_POLICIES_H
#define PERMITD_POLICIES_H

#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "core/status.h"
#include "stores/policy.h"
#include "stores/redis.h"

struct policies;

/* One policy as its hash held it when loaded. Never changed once in the
 * table: a reload installs a new entry. */
struct policies_entry {
    _Atomic unsigned refs;          /* the table's, and one per holder */
    char name[POLICY_NAME_MAX + 1];
    uint64_t id, version;           /* MySQL row id (0: kept by hand), its version */
    uint64_t stamp;                 /* id * 2^24 + version: lua/bucket.lua compares it */
    int64_t max_permits;
    double rate;
    int enabled, open, colocate;    /* open: failure_mode "open" */
    int local_lease;                /* CONFIG_LOCAL_LEASES_OFF, _ON or _AUTO (migration 0016);
                                       0: as --local-leases says */
    int64_t local_lease_permits;    /* what its lease takes; 0: as --local-lease-permits */
    int shadow;                     /* shadow mode (issue 23): an Acquire it would deny
                                       is answered allowed, flagged (decisions/limiter.c) */
    int missing;                    /* its hash was found gone (see policies_reload()) */
    int any_app;                    /* apps holds "*" */
    size_t napps;
    char **apps;                    /* sorted, exact names */
    const char *broken;             /* NULL, or why the hash is no valid policy */
    /* Its algorithm (issue 20; the hash's `algorithm`, absent: the token
     * bucket) and what that algorithm takes besides max_permits: a
     * window (window_ms, or a calendar unit for a fixed window) or a
     * lease time-to-live (concurrency). 0 / NONE where unused. */
    enum policy_algorithm algorithm;
    enum policy_calendar calendar;
    int64_t window_ms, lease_ms;
    /* What the script is sent (ARGV: see lua/bucket.lua): the version
     * stamp, max_permits, then p1 and p2 by algorithm: token_bucket rate_s
     * and rates; fixed_window window_ms (p1_s) and the calendar's name;
     * sliding_window, sliding_log window_ms and ""; concurrency lease_ms
     * and "" (policies_p1(), policies_p2()). */
    char stamp_s[24], max_s[24], rate_s[40], p1_s[24];
    char *rates;                    /* the rate history; "" when none */
    /* Reservations (issue 38; the hash's reserve_ttl_ms, debt_floor and
     * reserve_expiry, MySQL's policies columns of migration 0015): the
     * longest a reservation holds its estimate, how far a commit above
     * its estimate may take a bucket below empty, and whether an expired
     * reservation's estimate is refunded (else kept, the default). */
    int64_t reserve_ttl_ms, debt_floor;
    int expiry_refund;
};

/* A policy's reservation ttl cap when its hash names none (5 minutes). */
#define POLICIES_RESERVE_TTL_MS 300000

/* The third and fourth of a policy's ARGV (see policies_entry). */
const char *policies_p1(const struct policies_entry *e);
const char *policies_p2(const struct policies_entry *e);

/* Returns a new, empty table in *out (free with policies_free()). cfg and
 * redis must outlive it. */
int policies_new(const struct config *cfg, struct redis *redis, struct policies **out,
                 struct permitd_error *err);

/* Frees t and every entry no one holds. Call once no thread uses it. */
void policies_free(struct policies *t);

/* The entry named `name`, with a reference taken (drop it with
 * policies_release()), or NULL when the table has none. No lock, no
 * allocation: for the request path, from any thread. */
const struct policies_entry *policies_get(struct policies *t, const char *name);

/* Drops a reference policies_get() took. NULL is a no-op. */
void policies_release(const struct policies_entry *e);

/* Reads policy `name`'s hash from Redis (name: checked by the caller, or
 * one of permitd's own such as "_login") (one HGETALL on the calling
 * thread's connection, within deadline_us) and installs it, replacing any
 * entry of that name; a policy Redis does not hold is dropped. *found (may
 * be NULL) says which. An error (Redis unreachable) leaves the table as it
 * was. Thread-safe.
 *
 * One exception: with a policy store (--mysql-url), an entry of a MySQL
 * row (id > 0) whose hash is gone is kept as it is: Redis lost the hash
 * (restarted empty, flushed), which loses only bucket state; the entry is
 * what MySQL had at the sync's last look, it goes on deciding, and the
 * sync's next pass puts the hash back (issue 33: a reload that came late,
 * the sync's read-back of its own write or its change notice, found the
 * hash of a flushed Redis gone and turned a policy this instance held
 * into 503 for failure_mode closed). A delete says so: a delete notice
 * (policies_reload_gone()), or the sync's pass, which drops a policy its
 * snapshot lacks (policies_forget()). Without a store, the hash is the
 * policy: gone is deleted. */
int policies_reload(struct policies *t, const char *name, int64_t deadline_us, int *found,
                    struct permitd_error *err);

/* policies_reload_many() after a sign that names[0..n) may have been
 * deleted (a delete notice "<name> 0", control/follow.c) or that this
 * instance's copy is out of date (a bucket written under a newer version
 * of the policy, decisions/limiter.c): a MySQL row's entry whose hash is
 * gone is kept as a copy marked `missing`, and only the sync's next pass
 * can tell whether Redis lost it or another instance deleted it (it puts
 * the hash back, or drops the entry with policies_forget()). Meanwhile the
 * entry still says who may use the policy and its failure_mode, which
 * decides its requests (decisions/limiter.c). Otherwise as
 * policies_reload_many(). */
int policies_reload_gone(struct policies *t, const char *const *names, size_t n,
                         int64_t deadline_us, int *found, int *rcs, struct permitd_error *err);

/* Policies read in one pipelined round trip by policies_reload_many(). */
#define POLICIES_RELOAD_BATCH 500

/* policies_reload() for names[0..n) at once, each by the same rules
 * (entries never go back, a MySQL row's lost hash keeps its entry): their HGETALLs go
 * in pipelined batches of POLICIES_RELOAD_BATCH, one round trip each (in
 * a cluster one per master), and each batch is installed with one copy
 * of the table (issue 22: a first load of 10,000 policies was 10,000
 * round trips and 10,000 copies of a growing table). found[i] and rcs[i]
 * (either may be NULL) receive each name's outcome. Returns PERMITD_OK
 * when every name was read; the error of a batch Redis failed as a whole
 * (the batches after it are not tried, their rcs say so); or, when single
 * names failed, an error naming the first. Thread-safe. */
int policies_reload_many(struct policies *t, const char *const *names, size_t n,
                         int64_t deadline_us, int *found, int *rcs, struct permitd_error *err);

/* Installs e (from policies_parse(); takes over its reference), replacing
 * any entry of its name, unless that entry has a newer version stamp (two
 * reloads finished out of order: the copy never goes back). PERMITD_OK or
 * PERMITD_EINTERNAL (out of memory). policies_reload() installs this way. */
int policies_install(struct policies *t, struct policies_entry *e);

/* policies_install() of e[0..n) (NULL ones skipped; takes over every
 * reference) with one copy of the table for the lot: O(table + n log n),
 * where n policies_install() calls copy the table n times. Each entry is
 * decided as policies_install() would (of two of one name, the later in e
 * is offered last). Readers stay lock-free. PERMITD_OK or
 * PERMITD_EINTERNAL (out of memory). */
int policies_install_many(struct policies *t, struct policies_entry *const *e, size_t n);

/* The version stamp of the entry named `name`, 0 when there is none or its
 * hash was found gone (`missing`: whoever compares stamps reads it again). */
uint64_t policies_stamp(struct policies *t, const char *name);

/* Drops the entry named `name` (a policy deleted on this instance). */
void policies_forget(struct policies *t, const char *name);

/* The names in the table, for a periodic pass: *out a new array of *n
 * strings, free with policies_names_free(). */
int policies_names(struct policies *t, char ***out, size_t *n);
void policies_names_free(char **v, size_t n);

/* Builds an entry from a policy hash's fields (HGETALL's flat list of n
 * strings: field, value, ...) of policy `name`. An entry whose hash is no
 * valid policy is built all the same, with `broken` saying why (decisions
 * under it fail as internal). Returns PERMITD_OK with *out (one reference,
 * release with policies_release()), or an error: out of memory. Pure. */
int policies_parse(const char *name, char *const *fields, size_t n,
                   struct policies_entry **out, struct permitd_error *err);

/* Whether app may use the policy: exact set membership ("pay" is not in
 * "payroll", nor "pa." nor "%w+"), or the policy lets any app in ("*"). */
int policies_allows(const struct policies_entry *e, const char *app);

#endif
