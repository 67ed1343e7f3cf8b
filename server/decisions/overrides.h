/*
 * overrides.h - this instance's in-memory copy of every policy's
 * overrides (issue 37), for the decision path.
 *
 * An override (stores/overrides.h) gives the callers it matches other
 * limits of their policy, blocks them or exempts them. For a request
 * (policy, key, app) the one in force is, in this order:
 *   1. the override of the exact key;
 *   2. else the one of the longest prefix of the key;
 *   3. else the one of the app;
 *   4. else none: the policy's own limits.
 * An override whose expires_at has passed is not in force, and the next
 * in that order applies (a temporary raise ends by itself).
 *
 * Layout, for the Acquire path (the micro-bench, tests/bench/overrides.c,
 * holds it to 200 ns at 100,000 overrides over 10,000 policies): one
 * open-addressed table of policies by name; per policy one open-addressed
 * table of its overrides by (kind, value) and the distinct lengths of its
 * prefixes. A lookup hashes the policy name, the key once (the hash of each
 * prefix length falls out of one pass over the key) and the app: a handful
 * of probes, whatever the number of overrides. It allocates nothing and
 * takes no lock.
 *
 * The table is immutable once built and swapped whole (a full load) or per
 * policy (a change notice: the other policies' parts are shared, not
 * copied); readers never lock (as decisions/policies.c: a reader's slot is
 * odd while it looks, and the writer frees an old table only once every
 * reader inside has left). What a lookup finds is copied out
 * (struct overrides_hit), so nothing is held past it.
 *
 * The change count of a policy (policy_override_changes: every INSERT,
 * UPDATE, DELETE of its overrides) comes with its rows: the limiter adds it
 * to the policy's version stamp (lua/bucket.lua), for every key of the
 * policy, so a bucket decided under a newer set of overrides is never
 * decided again under an older one (the script answers "stale").
 */
#ifndef PERMITD_DECISIONS_OVERRIDES_H
#define PERMITD_DECISIONS_OVERRIDES_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "stores/overrides.h"

struct overrides;
struct overrides_build;

#define OVERRIDES_MATCH_SHOWN 64        /* bytes of the matched value a hit keeps */

/* What a lookup found: action OVERRIDES_NONE when no override is in force
 * (changes is set all the same). Numbers 0 are the policy's own. */
struct overrides_hit {
    enum overrides_action action;
    enum overrides_kind kind;
    int64_t id, version;
    int64_t max_permits;
    double rate;
    int64_t window_ms;
    int64_t expires_us;             /* 0: never */
    int64_t since_us;
    uint64_t changes;               /* the policy's change count */
    char match[OVERRIDES_MATCH_SHOWN + 1];  /* the value matched, cut (for a block's reason) */
};

/* Returns a new, empty table in *out (free with overrides_free()). */
int overrides_new(struct overrides **out, struct permitd_error *err);
/* Frees t; call once no thread uses it. NULL is a no-op. */
void overrides_free(struct overrides *t);

/* Looks up the override in force for (policy, key, app) at now_us (Unix
 * microseconds) into *hit. Returns 1 when the policy has overrides or a
 * change count (hit->changes), 0 when it has neither (hit cleared). No
 * lock, no allocation; any thread. key "" is the shared bucket (matched by
 * app only); app may be NULL. */
int overrides_lookup(struct overrides *t, const char *policy, const char *key, const char *app,
                     int64_t now_us, struct overrides_hit *hit);

/* A table being built from rows (stores/overrides.h's callbacks): new,
 * fed, then handed to overrides_replace_all() or
 * overrides_replace_policy(), which take it, or freed. */
int overrides_build_new(struct overrides_build **out, struct permitd_error *err);
void overrides_build_free(struct overrides_build *b);
/* The callbacks of overrides_db_load() (ud: the build). Rows of one
 * (policy, kind, value) after the first are dropped (the schema's unique
 * key keeps them away). PERMITD_EINTERNAL when memory ran out. */
int overrides_build_row(void *ud, const struct overrides_row *r);
int overrides_build_changes(void *ud, const char *policy, uint64_t changes);

/* Replaces the whole table with b (taken, even on error). */
int overrides_replace_all(struct overrides *t, struct overrides_build *b,
                          struct permitd_error *err);

/* Replaces the overrides of `policy` alone with b's (taken; b holds that
 * policy's rows and count only): a change notice's reload. A count lower
 * than the one held (a read older than the last installed) changes
 * nothing. */
int overrides_replace_policy(struct overrides *t, const char *policy, struct overrides_build *b,
                             struct permitd_error *err);

/* What the table holds: policies with overrides or a count, overrides, and
 * the bytes its structures take (for /metrics and the bench). */
void overrides_stats(struct overrides *t, size_t *policies, size_t *rows, size_t *bytes);

#endif
