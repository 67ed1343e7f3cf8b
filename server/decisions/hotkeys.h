/*
 * hotkeys.h - the heaviest keys of each policy (issue 23): which keys are
 * allowed most and which are denied most over the last minute or two, per
 * instance, published to Redis and merged across instances for the admin.
 *
 * A Space-Saving sketch (Metwally, Agrawal, El Abbadi 2005) of HOTKEYS_K
 * counters per policy and result keeps, in bounded memory, every key whose
 * count exceeds N / HOTKEYS_K (N: the takes it counted), each with a count
 * that is never below the true one and above it by at most N / HOTKEYS_K
 * (its `error` says by how much at most).
 *
 * On the decision path each worker counts into sketches of its own
 * (struct hotkeys_worker: its own mutex, which only the publisher takes
 * besides it, every --hotkeys-publish-ms: uncontended, so no worker waits
 * for another). The publisher thread drains the workers' sketches into the
 * instance's, which are kept per minute (this one and the one before: "the
 * last minutes" are the last one to two), and writes each policy's top
 * keys to Redis, to keys that expire by themselves (README: Redis layout):
 *   P{NAME}:hot           sorted set: "<instance>:<generation>" -> ms of its writing
 *   P{NAME}:hot:<instance>:<generation>
 *                         sorted set: "a:<key>" / "d:<key>" -> allowed / denied count
 * hotkeys_read() merges what every instance published (sums per key).
 *
 * Keys are user data: this module never logs them and they never become a
 * metric's label; only logged-in administrators read them (GetHotKeys).
 */
#ifndef PERMITD_HOTKEYS_H
#define PERMITD_HOTKEYS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "core/status.h"
#include "stores/policy.h"
#include "stores/redis.h"

#define HOTKEYS_K 100                   /* counters per sketch: the top 100 */
#define HOTKEYS_SLOTS 256               /* the sketch's index: a power of two >= 2 K */
#define HOTKEYS_WORKER_POLICIES 64      /* policies a worker counts between two drains */
#define HOTKEYS_POLICIES 1024           /* policies an instance keeps (least recently
                                           active dropped first) */
#define HOTKEYS_WINDOW_MS 60000         /* one window; the last two are published */

/* A key's count in a sketch. */
struct hotkeys_entry {
    char *key;                  /* NUL-terminated; the buffer (cap bytes) is reused */
    size_t cap;
    uint64_t count;             /* >= the key's true count */
    uint64_t error;             /* count - error <= the true count */
    uint32_t hash;
};

/* Space-Saving with HOTKEYS_K counters and an open-addressed index. */
struct hotkeys_sketch {
    size_t n;                   /* counters in use */
    uint64_t total;             /* N: the weight counted since the last clear */
    struct hotkeys_entry e[HOTKEYS_K];
    int16_t index[HOTKEYS_SLOTS];       /* entry + 1, 0 = empty */
    /* A min-heap of the entries by count (heap[0]: the smallest), and
     * each entry's place in it: a key's step is O(log K), not a scan. */
    uint8_t heap[HOTKEYS_K], pos[HOTKEYS_K];
};

/* A key and its figures, as read out of a sketch or merged from Redis. */
struct hotkeys_count {
    char key[POLICY_KEY_MAX + 1];
    uint64_t count, error;
};

/* An empty sketch; hotkeys_sketch_release() frees the keys it kept. */
void hotkeys_sketch_init(struct hotkeys_sketch *s);
void hotkeys_sketch_release(struct hotkeys_sketch *s);
/* Empties s, keeping its key buffers for reuse (no allocation once warm). */
void hotkeys_sketch_clear(struct hotkeys_sketch *s);

/* Counts weight w of key (len bytes, at most POLICY_KEY_MAX; longer keys
 * are cut there). When the sketch is full and key is not in it, the
 * counter of the smallest count takes it over: count = that count + w,
 * error = that count (Space-Saving). PERMITD_OK, or PERMITD_EINTERNAL when
 * a key buffer could not be allocated (nothing counted). */
int hotkeys_sketch_add(struct hotkeys_sketch *s, const char *key, size_t len, uint64_t w);

/* The largest counts, largest first (ties by key), at most n, into out.
 * Returns how many. */
size_t hotkeys_sketch_top(const struct hotkeys_sketch *s, struct hotkeys_count *out, size_t n);

enum hotkeys_kind { HOTKEYS_ALLOWED = 0, HOTKEYS_DENIED = 1 };

struct hotkeys;
struct hotkeys_worker;

/* Returns a new instance table in *out (free with hotkeys_free(), which
 * stops the publisher). cfg and redis must outlive it. */
int hotkeys_new(const struct config *cfg, struct redis *redis, struct hotkeys **out,
                struct permitd_error *err);
void hotkeys_free(struct hotkeys *hk);

/* Starts the publisher thread (every cfg->hotkeys_publish_ms). */
int hotkeys_start(struct hotkeys *hk, struct permitd_error *err);

/* A worker's sketches, registered with hk until hotkeys_worker_free(). */
int hotkeys_worker_new(struct hotkeys *hk, struct hotkeys_worker **out, struct permitd_error *err);
void hotkeys_worker_free(struct hotkeys_worker *w);

/* Counts one decided take of policy's key (key "" is the shared bucket:
 * not counted). From the worker's own thread. NULL w is a no-op. */
void hotkeys_record(struct hotkeys_worker *w, const char *policy, const char *key,
                    enum hotkeys_kind kind);

/* One publish now, as the thread does (for the thread and for tests): every
 * policy's list, whatever its length. A list Redis refuses is logged and
 * the others are still written (the error then counts them); only Redis
 * itself failing (unreachable, the deadline) stops the pass. */
int hotkeys_publish(struct hotkeys *hk, struct permitd_error *err);

/* Takes counted, and takes not counted because a worker's table was full
 * of other policies between two drains (or out of memory). */
void hotkeys_counters(struct hotkeys *hk, uint64_t *counted, uint64_t *dropped);

/* The merged top keys of policy over every instance that published in the
 * last 3 publish intervals: allowed[] and denied[] (at most max each,
 * largest first) summed per key, *nallowed, *ndenied how many, *instances
 * how many instances contributed. Reads Redis on the calling thread. */
int hotkeys_read(const struct config *cfg, struct redis *redis, const char *policy,
                 struct hotkeys_count *allowed, size_t *nallowed,
                 struct hotkeys_count *denied, size_t *ndenied, size_t max,
                 size_t *instances, struct permitd_error *err);

#endif
