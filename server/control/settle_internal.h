/*
 * settle_internal.h - what settle.c shares with settle_prune.c (the bucket
 * index's prune) and settle_groups.c (a settle's reading of the group
 * lists): the runner's state, a master thread's job, and the helpers they
 * use (settle_common.c). Nothing else includes it.
 */
#ifndef PERMITD_SETTLE_INTERNAL_H
#define PERMITD_SETTLE_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "control/settle.h"
#include "core/status.h"
#include "stores/redis.h"

#define SETTLE_REDIS_DEADLINE_MS 2000   /* each Redis call's, and how long it may wait */
#define SETTLE_SCAN_COUNT 1000          /* SCAN's COUNT: slots looked at per step */
#define SETTLE_SSCAN_COUNT 1000         /* SSCAN's COUNT: index members per step */
#define SETTLE_PRUNE_STEPS 100          /* SCAN steps of one slice, per master */
#define SETTLE_PRUNE_FIRST 10           /* the first slice this many --index-prune-ms after
                                         * start: a start (the index build, the sync's first
                                         * load) is busy enough, and most instances run for
                                         * days */

/* Strings collected from Redis's answers. */
struct strs {
    char **v;
    size_t *lens;       /* collect_bytes()'s: each string's length (it may hold NULs) */
    size_t n, cap;
    int oom;
};

struct settle {
    const struct config *cfg;
    struct redis *redis;
    struct limiter *limiter;
    char set_key[160];          /* <prefix>settle */
    char owner[64];             /* this instance's lease value */
    char index_key[160];        /* <prefix>bucket-index: the index build's marker */
    char index_lease[176];      /* <prefix>bucket-index:lease */
    int index_built;            /* the marker was seen (the runner's thread only) */
    struct {                    /* the index prune's walk (the runner's thread only) */
        int64_t next_us;        /* the next slice, not before */
        size_t master;          /* the master walked, < redis_masters() */
        char node[REDIS_WHERE_MAX];
        char cursor[24];
        uint64_t indexes, members, removed;     /* this round's, so far */
        int64_t started_us;
    } prune;

    pthread_t thread;
    int started;
    pthread_mutex_t lock;       /* guards what follows */
    pthread_cond_t wake;
    int stopping;
    int kicked;
    struct strs unrecorded;     /* members whose SADD failed: recorded at the next pass */
    struct settle_status status;
};

struct policies_entry;

/* One master's share of a settle or of the index build, run on a thread
 * of its own (settle.c). */
struct master_job {
    struct settle *st;
    const struct policies_entry *e; /* the policy settled; NULL: the index build */
    int master;                     /* settle: its redis_slot_master() number */
    const unsigned *slots;          /* settle: the slots it serves, nslots of them */
    const char *done_key;           /* settle: the bitmap of the slots done (resume) */
    size_t nslots;
    size_t scan;                    /* index build: its index for redis_scan_master() */
    char node[REDIS_WHERE_MAX];     /* index build: its address, after the first step */
    _Atomic uint64_t keys;          /* bucket keys met so far */
    _Atomic size_t slots_done;      /* settle: slots whose index was read whole */
    long long set, removed, gone;   /* settle: bucket.lua's counts; index build: added, -, gone */
    size_t steps;                   /* round trips of SSCANs (settle) or SCAN steps (build) */
    int rc;
    struct permitd_error err;
    pthread_t thread;
    int running;                    /* a thread was started and not joined yet */
    _Atomic int finished;           /* the thread's function has returned */
};

/* Collects each string of a reply into the struct strs at ud. */
void settle_collect(void *ud, const char *str, size_t len);

/* Frees the strings collected (the array is kept). */
void settle_strs_clear(struct strs *sv);

/* Grows *page to hold n keys. */
int settle_page_room(struct redis_str **page, size_t *cap, size_t n,
                     struct permitd_error *err);

/* The deadline of one of the runner's Redis calls (SETTLE_REDIS_DEADLINE_MS). */
int64_t settle_deadline(void);

/* Whether the runner is asked to stop. */
int settle_stopping(struct settle *st);

/* The group lists of policy j->e (settle_groups.c) of the groups whose
 * first slot is among slots[0..m), read and their buckets settled. */
int settle_groups(struct master_job *j, const unsigned *slots, size_t m);

/* One slice of the bucket index's prune (settle_prune.c), when it is due. */
void settle_prune_slice(struct settle *st);

#endif
