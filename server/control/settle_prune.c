/*
 * settle_prune.c - the bucket index's prune (lua/bucket.lua's top): a
 * bucket that fills up has no key but stays in its index until a settle
 * meets it, so each settle runner walks every master's keyspace for index
 * keys, a slice at a time, and removes the entries whose bucket is gone:
 * from the sets of single slots (bucket.lua "index") and from the group
 * lists (bucket.lua "sweep"; it moves the live entries of the hashes that
 * came before the lists into them). settle.c runs a slice at each pass.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "decisions/limiter.h"
#include "stores/policy.h"
#include "control/settle_internal.h"

/* Every member of index key ix, SSCANned, through limiter_index(): the
 * members whose bucket is gone leave it. */
static int prune_index(struct settle *st, const char *ix, struct permitd_error *err)
{
    char cursor[24] = "0", count[12];
    struct strs got = {0};
    struct redis_str *page = NULL;
    size_t page_cap = 0;
    long long added = 0, removed = 0;
    int rc = PERMITD_OK;

    snprintf(count, sizeof(count), "%d", SETTLE_SSCAN_COUNT);
    do {
        struct redis_str args[5] = {{"SSCAN", 5}, {ix, strlen(ix)}, {cursor, strlen(cursor)},
                                    {"COUNT", 5}, {count, strlen(count)}};
        struct redis_command_call call = {.args = args, .nargs = 5, .each = settle_collect,
                                          .ud = &got};

        rc = redis_command_pipeline(st->redis, &call, 1, settle_deadline(), err);
        if (rc == PERMITD_OK && call.rc != PERMITD_OK)
            rc = permitd_error_set(err, call.rc, "SSCAN of %s failed", ix);
        if (rc == PERMITD_OK && (got.oom || got.n == 0 || strlen(got.v[0]) >= sizeof(cursor)))
            rc = permitd_error_set(err, PERMITD_EINTERNAL, "SSCAN of %s answered no cursor", ix);
        if (rc == PERMITD_OK)
            rc = settle_page_room(&page, &page_cap, got.n, err);
        if (rc == PERMITD_OK) {
            for (size_t k = 1; k < got.n; k++)
                page[k - 1] = (struct redis_str){got.v[k], strlen(got.v[k])};
            strcpy(cursor, got.v[0]);
            st->prune.members += got.n - 1;
            if (got.n > 1)
                rc = limiter_index(st->limiter, page, got.n - 1, settle_deadline(), &added,
                                   &removed, err);
        }
        settle_strs_clear(&got);
    } while (rc == PERMITD_OK && strcmp(cursor, "0") != 0);
    st->prune.removed += (uint64_t)removed;
    free(got.v);
    free(page);
    return rc;
}

/* Group list ck (lua/bucket.lua's top), or a hash of before the lists,
 * through limiter_sweep(), a call's share of its blobs at a time: the
 * entries whose bucket is gone leave it (a hash's live ones move into the
 * lists). */
static int prune_list(struct settle *st, const char *ck, struct permitd_error *err)
{
    struct redis_str key = {ck, strlen(ck)};
    long long kept = 0, removed = 0, next = 0;
    int rc;

    do {
        rc = limiter_sweep(st->limiter, &key, next, kept == 0, settle_deadline(), &kept,
                           &removed, &next, err);
    } while (rc == PERMITD_OK && next > 0 && !settle_stopping(st));
    st->prune.indexes++;
    st->prune.members += (uint64_t)(kept + removed);
    st->prune.removed += (uint64_t)removed;
    return rc;
}

/* One slice of the index prune, at most every --index-prune-ms: a walk of
 * every master's keyspace (SCAN, SETTLE_PRUNE_STEPS steps a slice per
 * master) for index keys, each read whole and its members whose bucket is
 * gone removed. A bucket that fills up has no key, and its member stays
 * until a settle of its policy meets it; this is what keeps the index of
 * a policy that is never edited from growing with every key it ever had.
 * Its cost per slice is bounded (the steps, and the members of the index
 * keys they find); a round over 10 M keys takes about 100 slices. Each
 * instance walks on its own (the walk is idempotent); a round's totals
 * are logged. */
void settle_prune_slice(struct settle *st)
{
    struct permitd_error err = {0, ""};
    char pattern[POLICY_PATTERN_MAX];
    struct strs keys = {0};
    size_t nmasters = redis_masters(st->redis), steps = 0;
    int64_t now = clock_now_us();
    int rc = PERMITD_OK;

    if (st->cfg->index_prune_ms == 0 || now < st->prune.next_us || nmasters == 0)
        return;
    st->prune.next_us = now + (int64_t)st->cfg->index_prune_ms * 1000;
    if (st->prune.started_us == 0)
        st->prune.started_us = now;
    policy_prefix_pattern(pattern, st->cfg->redis_prefix, "{*}i[xlg]:*");
    while (rc == PERMITD_OK && steps < SETTLE_PRUNE_STEPS * nmasters && !settle_stopping(st)) {
        if (st->prune.master >= nmasters) {
            log_msg(LOG_LEVEL_INFO, "bucket index pruned: one round over every master",
                    "indexes=%" PRIu64 " members=%" PRIu64 " removed=%" PRIu64 " masters=%zu "
                    "s=%lld", st->prune.indexes, st->prune.members, st->prune.removed, nmasters,
                    (long long)(clock_now_us() - st->prune.started_us) / 1000000);
            memset(&st->prune, 0, sizeof(st->prune));
            st->prune.next_us = now + (int64_t)st->cfg->index_prune_ms * 1000;
            steps = 0;              /* no progress line: the round's is out */
            break;
        }
        if (st->prune.cursor[0] == '\0')
            strcpy(st->prune.cursor, "0");
        rc = redis_scan_master(st->redis, st->prune.master, st->prune.node, st->prune.cursor,
                               pattern, SETTLE_SCAN_COUNT, settle_deadline(), settle_collect,
                               &keys, &err);
        if (rc == PERMITD_OK && keys.oom)
            rc = permitd_error_set(&err, PERMITD_EINTERNAL, "out of memory");
        for (size_t i = 0; rc == PERMITD_OK && i < keys.n; i++) {
            int kind = policy_index_key_kind(st->cfg->redis_prefix, keys.v[i]);

            if (kind == 'x') {
                st->prune.indexes++;
                rc = prune_index(st, keys.v[i], &err);
            } else if (kind != 0) {             /* not a bucket key that looks like one */
                rc = prune_list(st, keys.v[i], &err);
            }
        }
        settle_strs_clear(&keys);
        steps++;
        if (rc == PERMITD_OK && strcmp(st->prune.cursor, "0") == 0) {
            st->prune.master++;             /* that master's walk is done */
            st->prune.node[0] = '\0';
            st->prune.cursor[0] = '\0';
        }
    }
    free(keys.v);
    if (rc != PERMITD_OK) {
        log_msg(LOG_LEVEL_WARN, "bucket index prune stopped: the walk starts again at the next "
                "slice", "master=%s error=\"%s\"", st->prune.node[0] ? st->prune.node : "?",
                err.message);
        memset(&st->prune, 0, sizeof(st->prune));
        st->prune.next_us = now + (int64_t)st->cfg->index_prune_ms * 1000;
    } else if (st->prune.master < nmasters && steps > 0) {
        log_msg(LOG_LEVEL_INFO, "bucket index prune progress", "master=%zu/%zu indexes=%"
                PRIu64 " members=%" PRIu64 " removed=%" PRIu64, st->prune.master + 1, nmasters,
                st->prune.indexes, st->prune.members, st->prune.removed);
    }
}

