/*
 * overridesync.c - MySQL -> the in-memory overrides, at start, on sync
 * passes that find the change counts moved, on change notices and on a
 * stale answer (see overridesync.h).
 *
 * One connection of its own (stores/overrides.h) under one mutex that
 * covers a read and its install together: loads run one at a time, each
 * reading MySQL after the one before it installed, so an older read never
 * replaces a newer one (and the table refuses a policy's count going
 * back besides).
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/overridesync.h"
#include "core/clock.h"
#include "core/log.h"
#include "decisions/overrides.h"
#include "stores/overrides.h"
#include "stores/policy.h"
#include "stores/redis_notice.h"

#define OVERRIDESYNC_DEADLINE_MS 2000

struct overridesync {
    const struct config *cfg;
    struct redis *redis;
    struct limiter *limiter;
    struct overrides *table;
    struct overrides_db *db;
    pthread_mutex_t lock;           /* the db connection, what follows */
    int failing;                    /* the last load failed (logged once) */
    int loaded;                     /* a whole load succeeded: sum/count are its */
    uint64_t sum, count;            /* the change counts' fingerprint at that load */
    size_t rows, policies, bytes;   /* the last whole load's */
    double ms;
    struct redis_notice *notice;
};

static int reload_hook(void *ud, const char *policy, struct permitd_error *err)
{
    return overridesync_load_policy(ud, policy, err);
}

int overridesync_new(const struct config *cfg, struct redis *redis, struct limiter *limiter,
                     struct overridesync **out, struct permitd_error *err)
{
    struct overridesync *s = calloc(1, sizeof(*s));
    int rc;

    *out = NULL;
    if (s == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    s->cfg = cfg;
    s->redis = redis;
    s->limiter = limiter;
    s->table = limiter_overrides(limiter);
    if ((rc = overrides_db_new(cfg, &s->db, err)) != PERMITD_OK) {
        free(s);
        return rc;
    }
    pthread_mutex_init(&s->lock, NULL);
    limiter_set_overrides_reload(limiter, reload_hook, s);
    *out = s;
    return PERMITD_OK;
}

/* A whole load, s->lock held: the fingerprint first (read before the rows,
 * so a change between the two is seen by the next pass). */
static int load_locked(struct overridesync *s, struct permitd_error *err)
{
    struct overrides_build *b = NULL;
    uint64_t sum, count;
    size_t skipped = 0;
    int64_t t0 = clock_now_us();
    int rc;

    if ((rc = overrides_db_fingerprint(s->db, &sum, &count, err)) != PERMITD_OK ||
        (rc = overrides_build_new(&b, err)) != PERMITD_OK)
        return rc;
    rc = overrides_db_load(s->db, NULL, overrides_build_changes, overrides_build_row, b,
                           &skipped, err);
    if (rc != PERMITD_OK) {
        overrides_build_free(b);
        return rc;
    }
    if ((rc = overrides_replace_all(s->table, b, err)) != PERMITD_OK)
        return rc;
    s->sum = sum;
    s->count = count;
    s->loaded = 1;
    s->ms = (double)(clock_now_us() - t0) / 1000.0;
    overrides_stats(s->table, &s->policies, &s->rows, &s->bytes);
    if (skipped > 0)
        log_msg(LOG_LEVEL_WARN, "overrides left out: rows the schema's CHECKs refuse",
                "rows=%zu", skipped);
    return PERMITD_OK;
}

int overridesync_load(struct overridesync *s, struct permitd_error *err)
{
    int rc;

    pthread_mutex_lock(&s->lock);
    rc = load_locked(s, err);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int overridesync_load_policy(struct overridesync *s, const char *policy,
                             struct permitd_error *err)
{
    struct overrides_build *b = NULL;
    int rc;

    if ((rc = policy_check_name("policy", policy, err)) != PERMITD_OK)
        return rc;
    pthread_mutex_lock(&s->lock);
    if ((rc = overrides_build_new(&b, err)) == PERMITD_OK &&
        (rc = overrides_db_load(s->db, policy, overrides_build_changes, overrides_build_row, b,
                                NULL, err)) == PERMITD_OK) {
        rc = overrides_replace_policy(s->table, policy, b, err);
        b = NULL;
    }
    overrides_build_free(b);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

void overridesync_pass(void *ud)
{
    struct overridesync *s = ud;
    struct permitd_error err = {0, ""};
    uint64_t sum, count;
    int rc;

    pthread_mutex_lock(&s->lock);
    rc = overrides_db_fingerprint(s->db, &sum, &count, &err);
    if (rc == PERMITD_OK && (!s->loaded || sum != s->sum || count != s->count))
        rc = load_locked(s, &err);
    if (rc != PERMITD_OK && !s->failing)
        log_msg(LOG_LEVEL_WARN, "overrides not loaded; decisions keep the overrides they had",
                "error=\"%s\"", err.message);
    else if (rc == PERMITD_OK && s->failing)
        log_msg(LOG_LEVEL_INFO, "overrides loaded again", "overrides=%zu", s->rows);
    s->failing = rc != PERMITD_OK;
    pthread_mutex_unlock(&s->lock);
}

/* A notice names one policy; anything that is no policy name reloads the
 * whole table (the next pass would, all the same). */
static void on_notice(void *ud, const char *msg, size_t len)
{
    struct overridesync *s = ud;
    struct permitd_error err = {0, ""};
    char name[POLICY_NAME_MAX + 1];
    int rc;

    if (len == 0 || len > POLICY_NAME_MAX) {
        overridesync_pass(s);
        return;
    }
    memcpy(name, msg, len);
    name[len] = '\0';
    if (policy_check_name("policy", name, &err) != PERMITD_OK) {
        overridesync_pass(s);
        return;
    }
    if ((rc = overridesync_load_policy(s, name, &err)) != PERMITD_OK)
        log_msg(LOG_LEVEL_WARN, "a policy's overrides not reloaded on its notice; the next "
                "sync pass reads them", "policy=%s error=\"%s\"", log_q(name), err.message);
}

/* On every (re)subscription: notices sent meanwhile are lost. */
static void on_subscribed(void *ud)
{
    struct overridesync *s = ud;

    pthread_mutex_lock(&s->lock);
    s->loaded = 0;          /* the next pass reads everything */
    pthread_mutex_unlock(&s->lock);
    overridesync_pass(s);
}

int overridesync_start(struct overridesync *s, struct permitd_error *err)
{
    char channel[160];

    snprintf(channel, sizeof(channel), "%soverride-changes", s->cfg->redis_prefix);
    return redis_notice_start(s->redis, channel, on_notice, NULL, on_subscribed, 0, s,
                              &s->notice, err);
}

int overridesync_publish(const struct config *cfg, struct redis *redis, const char *policy,
                         struct permitd_error *err)
{
    char channel[160];
    struct redis_str pub[3] = {{"PUBLISH", 7}, {channel, 0}, {policy, strlen(policy)}};

    pub[1].len = (size_t)snprintf(channel, sizeof(channel), "%soverride-changes",
                                  cfg->redis_prefix);
    return redis_command(redis, pub, 3,
                         clock_now_us() + (int64_t)OVERRIDESYNC_DEADLINE_MS * 1000, NULL, NULL,
                         NULL, err);
}

void overridesync_last(struct overridesync *s, size_t *rows, size_t *policies, double *ms,
                       size_t *bytes)
{
    pthread_mutex_lock(&s->lock);
    *rows = s->rows;
    *policies = s->policies;
    *ms = s->ms;
    *bytes = s->bytes;
    pthread_mutex_unlock(&s->lock);
}

void overridesync_free(struct overridesync *s)
{
    if (s == NULL)
        return;
    redis_notice_stop(s->notice);
    limiter_set_overrides_reload(s->limiter, NULL, NULL);
    overrides_db_free(s->db);
    pthread_mutex_destroy(&s->lock);
    free(s);
}
