/*
 * fleet.h - the fleet publisher: every instance writes its per-policy
 * counts and a heartbeat into Redis, so that the admin UI served by any one
 * instance shows the whole fleet's traffic and every instance's health
 * (issue 23, "Fleet-wide traffic", "Instances and health").
 *
 * Once every --fleet-publish-ms (1 s; 0 = off) a thread of its own reads
 * this instance's running totals (decisions/stats.h: allowed, denied,
 * errors, failure-mode passes per policy) and writes, in one pipelined
 * round trip per master, what changed since the last write: no Redis write
 * on the request path. The key layout below is the one place that knows
 * it; control/fleetsvc.c reads it back.
 *
 * Counts, at three resolutions (FLEET_RES_*): one hash per policy,
 * resolution and slab of time,
 *     <prefix>fleet:<res>:<policy>:<slab start, Unix s>
 *     field "<bucket start, Unix s>|<instance id>|<counter a|d|e|p>"
 *     value this instance's count in that bucket (written with HSET as a
 *           running count of the bucket, so a write sent twice, or again
 *           after a failure, counts once)
 * expiring (EXPIREAT) when the slab is older than the resolution keeps.
 *
 * Heartbeats: the hash <prefix>fleet:instance:<id> (expires after
 * --fleet-heartbeat-ttl s: an instance that dies drops off the list; one
 * that stops cleanly deletes it) and
 * the sorted set <prefix>fleet:instances (member id, score its last write,
 * Unix s; entries older than a day are pruned), which lists them without
 * a SCAN.
 */
#ifndef PERMITD_FLEET_H
#define PERMITD_FLEET_H

#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "core/status.h"
#include "decisions/stats.h"
#include "stores/redis.h"
#include "transport/http.h"

struct sync;
struct fleet;

/* One resolution of the counts' history. */
struct fleet_resolution {
    const char *name;       /* in the key: "1s", "10s", "1m" */
    int step_s;             /* a bucket's length */
    int slab_s;             /* a key's span (a multiple of step_s) */
    int keep_s;             /* how long it is kept */
};

enum { FLEET_RES_1S, FLEET_RES_10S, FLEET_RES_1M, FLEET_RES_COUNT };

extern const struct fleet_resolution fleet_resolutions[FLEET_RES_COUNT];

/* The counters' letters in a field, by enum stats_counter. */
extern const char fleet_counter_letters[STATS_COUNTERS];

#define FLEET_ID_MAX 128            /* an instance id, with its NUL */
#define FLEET_KEY_MAX 400

/* Writes the key of policy's slab starting at slab_start into buf. */
void fleet_counts_key(char buf[FLEET_KEY_MAX], const char *prefix, int res, const char *policy,
                      int64_t slab_start);

/* Writes the heartbeat key of instance id / the instances' sorted set. */
void fleet_instance_key(char buf[FLEET_KEY_MAX], const char *prefix, const char *id);
void fleet_instances_key(char buf[FLEET_KEY_MAX], const char *prefix);

/* Reads a counts field "<bucket>|<id>|<letter>": PERMITD_OK with *bucket,
 * id (FLEET_ID_MAX bytes) and *counter (enum stats_counter); else
 * PERMITD_EINVAL (a field that is none of ours). Pure. */
int fleet_parse_field(const char *field, size_t len, int64_t *bucket, char id[FLEET_ID_MAX],
                      int *counter);

/* Returns a new publisher in *out (free with fleet_free()); every pointer
 * must outlive it (sync may be NULL: no MySQL). Nothing is written until
 * fleet_start(). */
int fleet_new(const struct config *cfg, struct redis *redis, struct stats *stats,
              struct sync *sync, struct fleet **out, struct permitd_error *err);

/* The listeners whose addresses and connections the heartbeat reports;
 * call before fleet_start(). The instance id is made at the first call
 * (host name, API port, start time) and fixed from then on. Call again
 * with NULLs before the listeners stop (thread-safe). */
void fleet_set_listeners(struct fleet *f, struct http_server *api, struct http_server *admin);

/* Starts the publishing thread (nothing when --fleet-publish-ms is 0). */
int fleet_start(struct fleet *f, struct permitd_error *err);

/* This instance's id ("" before fleet_set_listeners()). */
const char *fleet_instance_id(const struct fleet *f);

/* For /metrics: publishes done and failed, commands sent and their
 * bytes as sent to Redis (RESP). */
void fleet_counters(struct fleet *f, uint64_t *publishes, uint64_t *failures,
                    uint64_t *commands, uint64_t *bytes);

/* Stops the thread (one last publish of what was counted is attempted,
 * so a clean stop loses nothing, and the heartbeat is deleted: a stopped
 * instance leaves the Instances page at once) and frees f. NULL is a
 * no-op. */
void fleet_free(struct fleet *f);

#endif
