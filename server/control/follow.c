/*
 * follow.c - change notices and the periodic pass that keep the limiter's
 * policy copy current (see follow.h).
 *
 * A notice is "<name> <version>"; only the name is used: the policy is
 * reloaded from its hash, which is the truth the notice points at (two
 * notices may arrive out of order; the hash is read after both). A policy
 * this instance does not hold yet is loaded too (created elsewhere: its
 * first request here then finds it), and one deleted is dropped.
 *
 * "<name> reset" (limiter_reset() on any instance) is no edit: the bucket's
 * state was deleted, and the deny caches here must forget their denials
 * (they would deny what Redis now allows). So must they whenever the
 * listener subscribes again (a reset notice sent meanwhile is lost), and
 * at each periodic pass.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "control/follow.h"
#include "decisions/policies.h"
#include "stores/policy.h"
#include "stores/redis_notice.h"

#define FOLLOW_DEADLINE_MS 2000

struct follow {
    struct redis *redis;
    struct policies *table;
    struct limiter *limiter;
    struct redis_notice *notice;
    char index_key[160];            /* <prefix>policies */
};

static int64_t deadline(void)
{
    return clock_now_us() + (int64_t)FOLLOW_DEADLINE_MS * 1000;
}

static void reload(struct follow *f, const char *name)
{
    struct permitd_error err = {0, ""};

    if (policies_reload(f->table, name, deadline(), NULL, &err) != PERMITD_OK)
        log_msg(LOG_LEVEL_WARN, "policy not reloaded; the next pass will", "policy=%s error=\"%s\"",
                name, err.message);
}

static void on_notice(void *ud, const char *msg, size_t len)
{
    struct follow *f = ud;
    char name[POLICY_NAME_MAX + 1];
    size_t n = 0;

    while (n < len && n < POLICY_NAME_MAX && msg[n] != ' ')
        n++;
    memcpy(name, msg, n);
    name[n] = '\0';
    if (policy_check_name("name", name, NULL) != PERMITD_OK)
        return;
    if (len - n == 6 && memcmp(msg + n, " reset", 6) == 0) {
        limiter_deny_cache_clear(f->limiter);
        return;
    }
    reload(f, name);
}

static void collect(void *ud, const char *s, size_t len)
{
    struct follow *f = ud;
    char name[POLICY_NAME_MAX + 1];

    if (len > POLICY_NAME_MAX)
        return;
    memcpy(name, s, len);
    name[len] = '\0';
    if (policy_check_name("name", name, NULL) == PERMITD_OK && policies_stamp(f->table, name) == 0)
        reload(f, name);
}

/* Reloads every policy held (a notice may have been lost), and loads those
 * in <prefix>policies not held yet. */
static void on_tick(void *ud)
{
    struct follow *f = ud;
    struct permitd_error err = {0, ""};
    struct redis_str smembers[2] = {{"SMEMBERS", 8}, {f->index_key, strlen(f->index_key)}};
    char **names;
    size_t n;

    /* A new subscription may have missed a reset notice; without MySQL
     * this is also the periodic pass, which heals lost notices for the
     * policies, and so here for the deny caches. */
    limiter_deny_cache_clear(f->limiter);
    if (policies_names(f->table, &names, &n) == PERMITD_OK) {
        for (size_t i = 0; i < n; i++)
            reload(f, names[i]);
        policies_names_free(names, n);
    }
    if (redis_command(f->redis, smembers, 2, deadline(), NULL, collect, f, &err) != PERMITD_OK)
        log_msg(LOG_LEVEL_WARN, "policy index not read; the next pass will", "key=%s error=\"%s\"",
                f->index_key, err.message);
}

int follow_start(const struct config *cfg, struct redis *redis, struct limiter *limiter,
                 int passes, struct follow **out, struct permitd_error *err)
{
    struct follow *f = calloc(1, sizeof(*f));
    char channel[160];
    int rc;

    *out = NULL;
    if (f == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    f->redis = redis;
    f->table = limiter_policies(limiter);
    f->limiter = limiter;
    snprintf(f->index_key, sizeof(f->index_key), "%spolicies", cfg->redis_prefix);
    snprintf(channel, sizeof(channel), "%schanges", cfg->redis_prefix);
    rc = redis_notice_start(redis, channel, on_notice, on_tick, passes ? cfg->sync_interval_ms : 0,
                            f, &f->notice, err);
    if (rc != PERMITD_OK) {
        free(f);
        return rc;
    }
    *out = f;
    return PERMITD_OK;
}

unsigned long long follow_notices(struct follow *f)
{
    unsigned long long notices = 0, subscribed = 0;

    if (f != NULL)
        redis_notice_counters(f->notice, &notices, &subscribed);
    return notices;
}

void follow_stop(struct follow *f)
{
    if (f == NULL)
        return;
    redis_notice_stop(f->notice);
    free(f);
}
