/*
 * appsync.c - MySQL -> the in-memory API key table, on every sync pass
 * and on every change notice (see appsync.h).
 *
 * One connection of its own (stores/apps.h) under one mutex: the sync's
 * thread and the notice listener's both load through it. A load reads the
 * table's generation first and hands it back with the rows, so a key issued
 * or revoked on this instance while MySQL was being read is never undone
 * by the older rows: the load is simply made again.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/appsync.h"
#include "core/clock.h"
#include "core/log.h"
#include "stores/apps.h"
#include "stores/redis_notice.h"

#define APPSYNC_DEADLINE_MS 2000
#define APPSYNC_TRIES 4

struct appsync {
    const struct config *cfg;
    struct redis *redis;
    struct appkeys *keys;
    struct apps_db *db;
    pthread_mutex_t lock;           /* the db connection, failing */
    int failing;                    /* the last load failed (logged once) */
    struct redis_notice *notice;
};

int appsync_new(const struct config *cfg, struct redis *redis, struct appkeys *keys,
                struct appsync **out, struct permitd_error *err)
{
    struct appsync *s = calloc(1, sizeof(*s));
    int rc;

    *out = NULL;
    if (s == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    s->cfg = cfg;
    s->redis = redis;
    s->keys = keys;
    if ((rc = apps_db_new(cfg, &s->db, err)) != PERMITD_OK) {
        free(s);
        return rc;
    }
    pthread_mutex_init(&s->lock, NULL);
    *out = s;
    return PERMITD_OK;
}

struct used {
    char **v;
    size_t n, cap;
};

static void collect_used(void *ud, const char *prefix)
{
    struct used *u = ud;

    if (u->n == u->cap) {
        size_t cap = u->cap ? u->cap * 2 : 16;
        char **grown = realloc(u->v, cap * sizeof(*grown));
        if (grown == NULL)
            return;             /* last_used_at is rough; losing one mark is fine */
        u->v = grown;
        u->cap = cap;
    }
    if ((u->v[u->n] = strdup(prefix)) != NULL)
        u->n++;
}

int appsync_load(struct appsync *s, struct permitd_error *err)
{
    struct apps_key_row *rows = NULL;
    struct used used = {NULL, 0, 0};
    size_t n = 0;
    int rc = PERMITD_OK;

    pthread_mutex_lock(&s->lock);
    for (int i = 0; i < APPSYNC_TRIES; i++) {
        uint64_t gen = appkeys_generation(s->keys);
        if ((rc = apps_keys_load(s->db, &rows, &n, err)) != PERMITD_OK)
            break;
        rc = appkeys_replace(s->keys, rows, n, gen, err);
        free(rows);
        rows = NULL;
        if (rc != PERMITD_EABORTED)
            break;
    }
    if (rc == PERMITD_OK) {
        struct permitd_error why = {0, ""};
        appkeys_take_used(s->keys, collect_used, &used);
        if (apps_keys_touch(s->db, (const char *const *)used.v, used.n, &why) != PERMITD_OK)
            log_msg(LOG_LEVEL_WARN, "last_used_at of app keys not written", "error=\"%s\"",
                    why.message);
        for (size_t i = 0; i < used.n; i++)
            free(used.v[i]);
        free(used.v);
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

void appsync_pass(void *ud)
{
    struct appsync *s = ud;
    struct permitd_error err = {0, ""};
    int rc = appsync_load(s, &err);

    pthread_mutex_lock(&s->lock);
    if (rc != PERMITD_OK && !s->failing)
        log_msg(LOG_LEVEL_WARN, "app keys not loaded; the table keeps what it had",
                "error=\"%s\"", err.message);
    else if (rc == PERMITD_OK && s->failing)
        log_msg(LOG_LEVEL_INFO, "app keys loaded again", "keys=%zu", appkeys_count(s->keys));
    s->failing = rc != PERMITD_OK;
    pthread_mutex_unlock(&s->lock);
}

static void on_notice(void *ud, const char *msg, size_t len)
{
    (void)msg;
    (void)len;
    appsync_pass(ud);
}

/* On every (re)subscription: notices sent meanwhile are lost. */
static void on_subscribed(void *ud)
{
    appsync_pass(ud);
}

int appsync_start(struct appsync *s, struct permitd_error *err)
{
    char channel[160];

    snprintf(channel, sizeof(channel), "%sapp-changes", s->cfg->redis_prefix);
    return redis_notice_start(s->redis, channel, on_notice, NULL, on_subscribed, 0, s,
                              &s->notice, err);
}

int appsync_notify(const struct config *cfg, struct redis *redis, const char *what,
                   struct permitd_error *err)
{
    char channel[160];
    struct redis_str pub[3] = {{"PUBLISH", 7}, {channel, 0}, {what, strlen(what)}};

    pub[1].len = (size_t)snprintf(channel, sizeof(channel), "%sapp-changes", cfg->redis_prefix);
    return redis_command(redis, pub, 3, clock_now_us() + (int64_t)APPSYNC_DEADLINE_MS * 1000, NULL,
                         NULL, NULL, err);
}

unsigned long long appsync_notices(struct appsync *s)
{
    unsigned long long notices = 0, subscribed = 0;

    if (s != NULL && s->notice != NULL)
        redis_notice_counters(s->notice, &notices, &subscribed);
    return notices;
}

void appsync_free(struct appsync *s)
{
    if (s == NULL)
        return;
    redis_notice_stop(s->notice);
    apps_db_free(s->db);
    pthread_mutex_destroy(&s->lock);
    free(s);
}
