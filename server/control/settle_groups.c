/*
 * settle_groups.c - a settle's reading of the bucket index's group lists
 * (lua/bucket.lua's top): for the groups of 64 slots whose first slot a
 * master's batch holds, each list's blobs and the hashes that held the
 * same entries before the lists, their entries turned back into bucket
 * keys and settled (limiter_settle()). settle.c's master threads call it
 * after a batch's sets.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decisions/limiter.h"
#include "decisions/policies.h"
#include "stores/policy.h"
#include "control/settle_internal.h"

#define SETTLE_BOX_BATCH 64             /* index reads (LRANGE, HKEYS) per round trip */
#define SETTLE_LIST_RANGE 8             /* blobs of a group's list an LRANGE reads */
#define SETTLE_LIST_ROUNDS 20           /* readings of the lists' split blobs, at most */

/* Appends the keys that the entries in got of policy name stand for to
 * *page (their bytes in *arena, which the caller frees after the page is
 * settled): got holds a hash's fields, an entry each, or with blobs a
 * list's blobs, "\n"-ended entries each (lua/bucket.lua's top). An entry
 * that is no key is skipped. */
static int entry_keys(const char *prefix, const char *name, const struct strs *got, int blobs,
                      struct redis_str **page, size_t *n, size_t *cap, struct strs *arena,
                      struct permitd_error *err)
{
    char key[POLICY_REDIS_KEY_MAX];

    for (size_t e = 0; e < got->n; e++) {
        const char *at = got->v[e], *end = at + strlen(at);

        while (at < end) {
            const char *nl = blobs ? memchr(at, '\n', (size_t)(end - at)) : NULL;
            size_t len = nl != NULL ? (size_t)(nl - at) : (size_t)(end - at), klen;

            if (len > 0 && (klen = policy_index_entry_key(key, prefix, name, at, len)) > 0) {
                if (*n == *cap && settle_page_room(page, cap, 2 * *cap + 64, err) != PERMITD_OK)
                    return err->code;
                settle_collect(arena, key, klen);
                if (arena->oom)
                    return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
                (*page)[(*n)++] = (struct redis_str){arena->v[arena->n - 1], klen};
            }
            at += len + 1;
        }
    }
    return PERMITD_OK;
}

/* One read of settle_groups(): an LRANGE of a group's list, or an HKEYS
 * of one of the group's hashes of before. */
struct box {
    char key[POLICY_REDIS_KEY_MAX + 24];
    char from[24], to[24];
    struct redis_str args[4];
    int blobs;
};

/* What settle_groups() knows of one group: its list and the blobs still
 * to read of it ([from, blobs)), its hashes of before and how many are
 * still to read. */
struct group {
    char list[POLICY_REDIS_KEY_MAX];
    char hashes[POLICY_REDIS_KEY_MAX];     /* "k p"; the hashes are "k p":<i> */
    char first_hash[POLICY_REDIS_KEY_MAX + 2];
    unsigned long long from, blobs, nhashes;
    struct redis_str args[3][2];
};

/* The LLEN of every group's list in one round trip, and with hashes (the
 * first reading) also each group's "k p" and whether its first hash
 * exists: sets g->nhashes, and the blobs to read next, [g->from,
 * g->blobs): at first all of them; later a list's new blobs when a split
 * may have moved entries there that the reading just done missed
 * (policy_index_split_unread()), none otherwise. *grown: whether any group
 * has anything to read. */
static int groups_read(struct master_job *j, struct group *gs, size_t ng, int hashes,
                       struct redis_command_call *calls, struct strs *got, int *grown)
{
    size_t per = hashes ? 3 : 1;
    int rc;

    for (size_t g = 0; g < ng; g++) {
        struct redis_command_call *c = &calls[per * g];

        gs[g].args[0][0] = (struct redis_str){"LLEN", 4};
        gs[g].args[0][1] = (struct redis_str){gs[g].list, strlen(gs[g].list)};
        c[0] = (struct redis_command_call){.args = gs[g].args[0], .nargs = 2};
        if (!hashes)
            continue;
        gs[g].args[1][0] = (struct redis_str){"GET", 3};
        gs[g].args[1][1] = (struct redis_str){gs[g].hashes, strlen(gs[g].hashes)};
        gs[g].args[2][0] = (struct redis_str){"EXISTS", 6};
        gs[g].args[2][1] = (struct redis_str){gs[g].first_hash, strlen(gs[g].first_hash)};
        c[1] = (struct redis_command_call){.args = gs[g].args[1], .nargs = 2,
                                           .each = settle_collect, .ud = &got[g]};
        c[2] = (struct redis_command_call){.args = gs[g].args[2], .nargs = 2};
    }
    rc = redis_command_pipeline(j->st->redis, calls, per * ng, settle_deadline(), &j->err);
    *grown = 0;
    for (size_t g = 0; rc == PERMITD_OK && g < ng; g++) {
        const struct redis_command_call *c = &calls[per * g];
        unsigned long long len;
        unsigned k = 0, p = 0;

        for (size_t i = 0; rc == PERMITD_OK && i < per; i++)
            if (c[i].rc != PERMITD_OK)
                rc = permitd_error_set(&j->err, c[i].rc, "%s of %s failed", c[i].args[0].p,
                                       c[i].args[1].p);
        if (rc == PERMITD_OK && hashes && got[g].oom)
            rc = permitd_error_set(&j->err, PERMITD_EINTERNAL, "out of memory");
        else if (rc == PERMITD_OK && hashes && got[g].n == 1 &&
                 (sscanf(got[g].v[0], "%u %u", &k, &p) != 2 || k > 24 || p >= 1u << k))
            rc = permitd_error_set(&j->err, PERMITD_EINTERNAL, "%s holds \"%.40s\", not "
                                   "\"k p\" with k <= 24 and p < 2^k (lua/bucket.lua's top)",
                                   gs[g].hashes, got[g].v[0]);
        if (rc != PERMITD_OK)
            break;
        if (hashes)
            gs[g].nhashes = got[g].n == 1 ? (1ull << k) + p : c[2].integer == 1 ? 1 : 0;
        len = c[0].integer > 0 ? (unsigned long long)c[0].integer : 0;
        if (hashes) {                   /* the first reading: every blob, every hash */
            gs[g].from = 0;
            gs[g].blobs = len;
            *grown |= len > 0 || gs[g].nhashes > 0;
        } else if (len > gs[g].blobs && policy_index_split_unread(gs[g].from, gs[g].blobs, len)) {
            gs[g].from = gs[g].blobs;
            gs[g].blobs = len;
            *grown = 1;
        } else {
            gs[g].from = gs[g].blobs = len > gs[g].blobs ? len : gs[g].blobs;
        }
    }
    for (size_t g = 0; hashes && g < ng; g++)
        settle_strs_clear(&got[g]);
    return rc;
}

/* The group lists (lua/bucket.lua's top), and the hashes that held the
 * same entries before them, of the groups whose first slot is among
 * slots[0..m): each group's LLEN, its hashes' "k p" and whether its first
 * hash exists, in one round trip; then each hash's fields (HKEYS) and the
 * lists' blobs SETTLE_LIST_RANGE at a time (LRANGE), SETTLE_BOX_BATCH
 * reads a pipelined round trip, their entries turned back into keys and
 * settled in one more (limiter_settle(), which also takes the entries
 * whose bucket is gone out). Then each list's LLEN again: a split moves
 * entries of a blob into a new one at the list's end, so the new blobs are
 * read too while a split may have moved entries that no reading met
 * (policy_index_split_unread(): in practice once). The hashes come first: the prune
 * moves their entries into the lists. */
int settle_groups(struct master_job *j, const unsigned *slots, size_t m)
{
    const char *prefix = j->st->cfg->redis_prefix, *name = j->e->name;
    struct group *gs = NULL;
    struct box *boxes = NULL;
    struct strs *got = NULL, arena = {0};
    struct redis_command_call *calls = NULL;
    struct redis_str *page = NULL;
    size_t ng = 0, page_cap = 0, most;
    int rc = PERMITD_OK, grown = 1;

    for (size_t i = 0; i < m; i++)
        ng += slots[i] % POLICY_INDEX_GROUP == 0;
    if (ng == 0)
        return PERMITD_OK;
    most = 3 * ng > SETTLE_BOX_BATCH ? 3 * ng : SETTLE_BOX_BATCH;
    gs = calloc(ng, sizeof(*gs));
    boxes = calloc(SETTLE_BOX_BATCH, sizeof(*boxes));
    got = calloc(most, sizeof(*got));
    calls = calloc(most, sizeof(*calls));
    if (gs == NULL || boxes == NULL || got == NULL || calls == NULL) {
        rc = permitd_error_set(&j->err, PERMITD_EINTERNAL, "out of memory");
        goto done;
    }
    for (size_t i = 0, g = 0; i < m; i++) {
        if (slots[i] % POLICY_INDEX_GROUP != 0)
            continue;
        policy_index_group_key(gs[g].list, prefix, name, slots[i], POLICY_INDEX_LIST);
        policy_index_group_key(gs[g].hashes, prefix, name, slots[i], POLICY_INDEX_HASHES);
        snprintf(gs[g].first_hash, sizeof(gs[g].first_hash), "%s:0", gs[g].hashes);
        g++;
    }
    rc = groups_read(j, gs, ng, 1, calls, got, &grown);
    for (int round = 0; rc == PERMITD_OK && grown; round++) {
        /* Every hash and every range of every list still to read,
         * SETTLE_BOX_BATCH a round trip. */
        for (size_t g = 0, i = 0; rc == PERMITD_OK && g < ng;) {
            size_t nc = 0, n = 0;

            if (settle_stopping(j->st)) {
                rc = permitd_error_set(&j->err, PERMITD_ECANCELED, "permitd is stopping");
                break;
            }
            while (g < ng && nc < SETTLE_BOX_BATCH) {
                struct group *x = &gs[g];
                unsigned long long ranges = (x->blobs - x->from + SETTLE_LIST_RANGE - 1) /
                                            SETTLE_LIST_RANGE;
                struct box *b = &boxes[nc];

                if (i == x->nhashes + ranges) {
                    g++;
                    i = 0;
                    continue;
                }
                if (i < x->nhashes) {
                    snprintf(b->key, sizeof(b->key), "%s:%zu", x->hashes, i);
                    b->args[0] = (struct redis_str){"HKEYS", 5};
                    b->blobs = 0;
                } else {
                    unsigned long long at = x->from + (i - x->nhashes) * SETTLE_LIST_RANGE;

                    snprintf(b->key, sizeof(b->key), "%s", x->list);
                    snprintf(b->from, sizeof(b->from), "%llu", at);
                    snprintf(b->to, sizeof(b->to), "%llu", at + SETTLE_LIST_RANGE - 1);
                    b->args[0] = (struct redis_str){"LRANGE", 6};
                    b->args[2] = (struct redis_str){b->from, strlen(b->from)};
                    b->args[3] = (struct redis_str){b->to, strlen(b->to)};
                    b->blobs = 1;
                }
                b->args[1] = (struct redis_str){b->key, strlen(b->key)};
                calls[nc] = (struct redis_command_call){.args = b->args,
                                                        .nargs = b->blobs ? 4 : 2,
                                                        .each = settle_collect, .ud = &got[nc]};
                nc++;
                i++;
            }
            if (nc == 0)
                break;
            rc = redis_command_pipeline(j->st->redis, calls, nc, settle_deadline(), &j->err);
            for (size_t c = 0; rc == PERMITD_OK && c < nc; c++) {
                if (calls[c].rc != PERMITD_OK)
                    rc = permitd_error_set(&j->err, calls[c].rc, "%s of %s failed",
                                           boxes[c].args[0].p, boxes[c].key);
                else if (got[c].oom)
                    rc = permitd_error_set(&j->err, PERMITD_EINTERNAL, "out of memory");
                else
                    rc = entry_keys(prefix, name, &got[c], boxes[c].blobs, &page, &n, &page_cap,
                                    &arena, &j->err);
            }
            if (rc == PERMITD_OK && n > 0)
                rc = limiter_settle(j->st->limiter, j->e, page, n, settle_deadline(), &j->set,
                                    &j->removed, &j->gone, &j->err);
            atomic_fetch_add(&j->keys, n);
            for (size_t c = 0; c < nc; c++)
                settle_strs_clear(&got[c]);
            settle_strs_clear(&arena);
            j->steps++;
        }
        for (size_t g = 0; g < ng; g++)
            gs[g].nhashes = 0;          /* read once */
        if (rc == PERMITD_OK)
            rc = groups_read(j, gs, ng, 0, calls, got, &grown);
        if (rc == PERMITD_OK && grown && round + 1 == SETTLE_LIST_ROUNDS)
            rc = permitd_error_set(&j->err, PERMITD_EUNAVAILABLE, "the group lists of policy "
                                   "\"%s\" still split under %d readings (buckets created "
                                   "faster than a settle reads them): tried again at the next "
                                   "pass", name, SETTLE_LIST_ROUNDS);
    }
done:
    for (size_t c = 0; got != NULL && c < most; c++) {
        settle_strs_clear(&got[c]);
        free(got[c].v);
        free(got[c].lens);
    }
    free(arena.v);
    free(gs);
    free(boxes);
    free(got);
    free(calls);
    free(page);
    return rc;
}
