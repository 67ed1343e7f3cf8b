/*
 * overrides.h - a policy's overrides in MySQL (migrations/0014_overrides),
 * read for the in-memory table the decisions consult
 * (decisions/overrides.h); libmariadb stays inside overrides.c.
 *
 * An override belongs to a policy (by name) and matches a caller by its
 * exact key, a prefix of its key, or its app; it sets other limits for the
 * policy's algorithm, blocks, or exempts. The admin API writes the rows
 * (wip/overadmin: stores/override_edits.c), DBAs may write them with
 * plain SQL; the schema's triggers audit both, bump each row's version and
 * count every change per policy (policy_override_changes), which the
 * engine adds to the policy's version stamp.
 *
 * Reading streams: each row is handed to a callback as it is fetched
 * (100,000 rows are never a second copy in memory), strings valid only
 * during the call. The rows and the change counts are read in one
 * consistent snapshot, so a count never belongs to other rows than the
 * ones read with it.
 *
 * A struct overrides_db is one connection of its own, used by one thread
 * at a time (the caller locks); it connects lazily and again after a
 * failure.
 */
#ifndef PERMITD_STORES_OVERRIDES_H
#define PERMITD_STORES_OVERRIDES_H

#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "core/status.h"

#define OVERRIDES_VALUE_MAX 1024        /* bytes of match_value: 256 utf8mb4 characters */

enum overrides_kind { OVERRIDES_KEY, OVERRIDES_PREFIX, OVERRIDES_APP };

/* OVERRIDES_NONE is no row's: the decision path's "no override in force". */
enum overrides_action { OVERRIDES_NONE, OVERRIDES_LIMIT, OVERRIDES_BLOCK, OVERRIDES_EXEMPT };

/* One row as read. A number the row leaves NULL is 0: the policy's own. */
struct overrides_row {
    int64_t id, version;
    const char *policy;             /* checked: a policy name */
    enum overrides_kind kind;
    const char *value;              /* value_len bytes, no NUL inside */
    size_t value_len;
    enum overrides_action action;
    int64_t max_permits;            /* 1 .. POLICY_MAX_PERMITS_MAX, or 0 */
    double rate;                    /* > 0 and finite, or 0 */
    int64_t window_ms;              /* 1 .. POLICY_DURATION_MAX_MS, or 0 */
    int64_t expires_us;             /* Unix microseconds; 0: never */
    int64_t since_us;               /* updated_at: in force since (Unix microseconds) */
};

/* Parses a row's kind and action words; -1 for what the schema's CHECKs
 * refuse (a table without them, MySQL before 8.0.16). */
int overrides_kind_parse(const char *s);
int overrides_action_parse(const char *s);
const char *overrides_kind_name(enum overrides_kind k);
const char *overrides_action_name(enum overrides_action a);

/* Called per row (ud as given); a non-zero return stops the read with that
 * status. */
typedef int (*overrides_row_fn)(void *ud, const struct overrides_row *r);
/* Called per policy with a change count (policy_override_changes): those
 * with no row left too. */
typedef int (*overrides_changes_fn)(void *ud, const char *policy, uint64_t changes);

struct overrides_db;

/* Returns a new handle in *out (free with overrides_db_free()); does not
 * connect yet. cfg->mysql must be filled; cfg must outlive it. */
int overrides_db_new(const struct config *cfg, struct overrides_db **out,
                     struct permitd_error *err);
void overrides_db_free(struct overrides_db *db);

/* Reads the overrides of `policy` (NULL: of every policy) and their change
 * counts, in one consistent snapshot: changes() per count, row() per row
 * (in no order). A row a CHECK would refuse (an unknown kind or
 * action, a number out of range, an empty value, a policy name that is
 * none) is skipped and counted in *skipped (may be NULL), never guessed at.
 * PERMITD_EUNAVAILABLE when MySQL cannot be reached; a callback's status. */
int overrides_db_load(struct overrides_db *db, const char *policy, overrides_changes_fn changes,
                      overrides_row_fn row, void *ud, size_t *skipped, struct permitd_error *err);

/* The sum and number of the change counts (policy_override_changes): a
 * sync pass reads all the overrides again only when these moved since its
 * last load (every write, plain SQL's too, raises a count by trigger), so
 * an idle pass costs one aggregate over one row per policy. */
int overrides_db_fingerprint(struct overrides_db *db, uint64_t *sum, uint64_t *count,
                             struct permitd_error *err);

#endif
