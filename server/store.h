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

#include "config.h"
#include "status.h"

struct store;

/* One policy as MySQL holds it. Strings are NUL-terminated. */
struct store_policy {
    uint64_t id;
    char name[129];
    int64_t max_permits;
    char rate[48];              /* DECIMAL as MySQL prints it, e.g. "0.500000000000" */
    int enabled;
    char failure_mode[8];       /* "open" or "closed" */
    uint64_t version;
    int64_t updated_us;         /* updated_at, µs since the epoch (UTC) */
    char *apps;                 /* comma-separated, sorted; "" = none */
};

/* Every policy at one instant (one consistent-snapshot transaction). */
struct store_snapshot {
    struct store_policy *policies;
    size_t count;
    int64_t taken_us;           /* MySQL's clock when the snapshot was taken */
    uint64_t max_id;            /* highest policy id in it */
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

/* SELECT 1 within the configured timeout: PERMITD_OK or unavailable. */
int store_ping(struct store *s, struct permitd_error *err);

#endif
