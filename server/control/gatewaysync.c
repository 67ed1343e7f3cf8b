/*
 * gatewaysync.c - MySQL -> the in-memory gateway rules, on every sync
 * pass, after every admin write and on every change notice (see
 * gatewaysync.h).
 *
 * One connection of its own (stores/gateway_rules.h) under one mutex that
 * covers the read and the replace together: loads run one at a time, each
 * reading MySQL after the one before it installed its rules, so an older
 * read never replaces a newer one.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/gatewaysync.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/wordlist.h"
#include "stores/gateway_rules.h"
#include "stores/redis_notice.h"

#define GATEWAYSYNC_DEADLINE_MS 2000

struct gatewaysync {
    const struct config *cfg;
    struct redis *redis;
    struct forward_rules *rules;
    struct gateway_rules_db *db;
    pthread_mutex_t lock;           /* the db connection, failing */
    int failing;                    /* the last load failed (logged once) */
    char broken[1024];              /* the last load's rules naming no policy */
    int nbroken;
    struct redis_notice *notice;
};

int gatewaysync_new(const struct config *cfg, struct redis *redis, struct forward_rules *rules,
                    struct gatewaysync **out, struct permitd_error *err)
{
    struct gatewaysync *s = calloc(1, sizeof(*s));
    int rc;

    *out = NULL;
    if (s == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    s->cfg = cfg;
    s->redis = redis;
    s->rules = rules;
    if ((rc = gateway_rules_db_new(cfg, &s->db, err)) != PERMITD_OK) {
        free(s);
        return rc;
    }
    pthread_mutex_init(&s->lock, NULL);
    *out = s;
    return PERMITD_OK;
}

/* The load, with s->lock held. */
static int load_locked(struct gatewaysync *s, struct permitd_error *err)
{
    struct gateway_rule *v = NULL;
    size_t n = 0;
    int rc = gateway_rules_load(s->db, &v, &n, err);

    if (rc == PERMITD_OK)
        rc = forward_rules_replace(s->rules, v, n, err);
    if (rc == PERMITD_OK) {
        struct wordlist l;
        wordlist_init(&l, s->broken, sizeof(s->broken));
        for (size_t i = 0; i < n; i++)
            if (v[i].policy_missing)
                wordlist_add(&l, "rule %" PRId64 " names policy %s", v[i].id, v[i].policy);
        s->nbroken = l.count;
    }
    free(v);
    return rc;
}

int gatewaysync_load(struct gatewaysync *s, struct permitd_error *err)
{
    int rc;

    pthread_mutex_lock(&s->lock);
    rc = load_locked(s, err);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int gatewaysync_broken(struct gatewaysync *s, char *buf, size_t size)
{
    int n;

    pthread_mutex_lock(&s->lock);
    snprintf(buf, size, "%s", s->broken);
    n = s->nbroken;
    pthread_mutex_unlock(&s->lock);
    return n;
}

void gatewaysync_pass(void *ud)
{
    struct gatewaysync *s = ud;
    struct permitd_error err = {0, ""};
    int rc;

    pthread_mutex_lock(&s->lock);
    rc = load_locked(s, &err);
    if (rc != PERMITD_OK && !s->failing)
        log_msg(LOG_LEVEL_WARN, "gateway rules not loaded; forward-auth keeps the rules it had",
                "error=\"%s\"", err.message);
    else if (rc == PERMITD_OK && s->failing)
        log_msg(LOG_LEVEL_INFO, "gateway rules loaded again", "rules=%zu",
                forward_rules_count(s->rules));
    s->failing = rc != PERMITD_OK;
    pthread_mutex_unlock(&s->lock);
}

static void on_notice(void *ud, const char *msg, size_t len)
{
    (void)msg;
    (void)len;
    gatewaysync_pass(ud);
}

/* On every (re)subscription: notices sent meanwhile are lost. */
static void on_subscribed(void *ud)
{
    gatewaysync_pass(ud);
}

int gatewaysync_start(struct gatewaysync *s, struct permitd_error *err)
{
    char channel[160];

    snprintf(channel, sizeof(channel), "%sgateway-changes", s->cfg->redis_prefix);
    return redis_notice_start(s->redis, channel, on_notice, NULL, on_subscribed, 0, s,
                              &s->notice, err);
}

int gatewaysync_notify(const struct config *cfg, struct redis *redis, struct permitd_error *err)
{
    char channel[160];
    struct redis_str pub[3] = {{"PUBLISH", 7}, {channel, 0}, {"rules", 5}};

    pub[1].len = (size_t)snprintf(channel, sizeof(channel), "%sgateway-changes",
                                  cfg->redis_prefix);
    return redis_command(redis, pub, 3,
                         clock_now_us() + (int64_t)GATEWAYSYNC_DEADLINE_MS * 1000, NULL, NULL,
                         NULL, err);
}

void gatewaysync_free(struct gatewaysync *s)
{
    if (s == NULL)
        return;
    redis_notice_stop(s->notice);
    gateway_rules_db_free(s->db);
    pthread_mutex_destroy(&s->lock);
    free(s);
}
