/*
 * sweep.c - the reservations' expiry sweep (sweep.h): one thread, a pass
 * every --reserve-sweep-ms, waiting on a condition variable so a stop is
 * prompt. A pass that fails (Redis down) is logged once per run of
 * failures and tried again at the next.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "control/sweep.h"
#include "core/clock.h"
#include "core/log.h"
#include "decisions/limiter_reserve.h"

#define SWEEP_DEADLINE_MS 2000

struct sweep {
    struct limiter *limiter;
    int period_ms;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int stopping;
};

static void *run(void *arg)
{
    struct sweep *sw = arg;
    int failing = 0;

    pthread_mutex_lock(&sw->lock);
    while (!sw->stopping) {
        struct timespec until;
        struct permitd_error err = {PERMITD_OK, ""};
        int settled = 0, rc;

        pthread_mutex_unlock(&sw->lock);
        rc = limiter_reserve_sweep(sw->limiter, clock_now_us() + SWEEP_DEADLINE_MS * 1000,
                                   &settled, &err);
        if (rc != PERMITD_OK && !failing)
            log_msg(LOG_LEVEL_WARN, "reservation expiry sweep failed (tried again)", "error=%s",
                    log_q(err.message));
        failing = rc != PERMITD_OK;
        pthread_mutex_lock(&sw->lock);
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += sw->period_ms / 1000;
        until.tv_nsec += (sw->period_ms % 1000) * 1000000L;
        until.tv_sec += until.tv_nsec / 1000000000L;
        until.tv_nsec %= 1000000000L;
        while (!sw->stopping &&
               pthread_cond_timedwait(&sw->wake, &sw->lock, &until) != ETIMEDOUT)
            ;
    }
    pthread_mutex_unlock(&sw->lock);
    return NULL;
}

int sweep_start(struct limiter *limiter, int period_ms, struct sweep **out,
                struct permitd_error *err)
{
    struct sweep *sw;

    *out = NULL;
    if (period_ms <= 0)
        return PERMITD_OK;
    if ((sw = calloc(1, sizeof(*sw))) == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    sw->limiter = limiter;
    sw->period_ms = period_ms;
    pthread_mutex_init(&sw->lock, NULL);
    pthread_cond_init(&sw->wake, NULL);
    if (pthread_create(&sw->thread, NULL, run, sw) != 0) {
        pthread_mutex_destroy(&sw->lock);
        pthread_cond_destroy(&sw->wake);
        free(sw);
        return permitd_error_set(err, PERMITD_EINTERNAL, "cannot start the reservation sweep");
    }
    *out = sw;
    return PERMITD_OK;
}

void sweep_stop(struct sweep *sw)
{
    if (sw == NULL)
        return;
    pthread_mutex_lock(&sw->lock);
    sw->stopping = 1;
    pthread_cond_signal(&sw->wake);
    pthread_mutex_unlock(&sw->lock);
    pthread_join(sw->thread, NULL);
    pthread_mutex_destroy(&sw->lock);
    pthread_cond_destroy(&sw->wake);
    free(sw);
}
