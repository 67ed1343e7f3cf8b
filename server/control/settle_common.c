/*
 * settle_common.c - the helpers that settle.c, settle_groups.c and
 * settle_prune.c share (settle_internal.h): collecting Redis's strings,
 * a page of keys, a call's deadline, whether the runner stops.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "control/settle_internal.h"

void settle_collect(void *ud, const char *str, size_t len)
{
    struct strs *sv = ud;

    if (sv->n == sv->cap) {
        size_t cap = sv->cap ? sv->cap * 2 : 64;
        char **v = realloc(sv->v, cap * sizeof(*v));
        if (v == NULL) {
            sv->oom = 1;
            return;
        }
        sv->v = v;
        sv->cap = cap;
    }
    if ((sv->v[sv->n] = strndup(str, len)) == NULL)
        sv->oom = 1;
    else
        sv->n++;
}

void settle_strs_clear(struct strs *sv)
{
    for (size_t i = 0; i < sv->n; i++)
        free(sv->v[i]);
    sv->n = 0;
    sv->oom = 0;
}

int settle_page_room(struct redis_str **page, size_t *cap, size_t n,
                     struct permitd_error *err)
{
    struct redis_str *grown;

    if (n <= *cap)
        return PERMITD_OK;
    if ((grown = realloc(*page, n * sizeof(**page))) == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    *page = grown;
    *cap = n;
    return PERMITD_OK;
}

int64_t settle_deadline(void)
{
    return clock_now_us() + (int64_t)SETTLE_REDIS_DEADLINE_MS * 1000;
}

int settle_stopping(struct settle *st)
{
    int stop;

    pthread_mutex_lock(&st->lock);
    stop = st->stopping;
    pthread_mutex_unlock(&st->lock);
    return stop;
}
