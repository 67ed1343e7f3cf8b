/*
 * parts.c - the table walker behind parts.h.
 *
 * Two passes forward (every new, then every start) and two back (every
 * stop, then every free), so a part may be made before another that it
 * must be started after, and every part is at rest before any is freed: a
 * thread still running never reads a part freed under it.
 */
#include <string.h>

#include "core/parts.h"

int parts_start(struct parts *p, const struct part *table, size_t n, void *ctx,
                struct permitd_error *err)
{
    memset(p, 0, sizeof(*p));
    p->table = table;
    p->ctx = ctx;
    if (n > PARTS_MAX) {
        permitd_error_set(err, PERMITD_EINVAL, "%zu parts, more than %d", n, PARTS_MAX);
        return PERMITD_EINVAL;
    }
    p->n = n;
    for (size_t i = 0; i < n; i++)
        p->on[i] = table[i].enabled == NULL || table[i].enabled(ctx);
    for (; p->made < n; p->made++) {
        const struct part *t = &table[p->made];
        int rc;

        if (p->on[p->made] && t->new != NULL && (rc = t->new(ctx, err)) != PERMITD_OK) {
            parts_stop(p);
            return rc;
        }
    }
    for (; p->started < n; p->started++) {
        const struct part *t = &table[p->started];
        int rc;

        if (p->on[p->started] && t->start != NULL && (rc = t->start(ctx, err)) != PERMITD_OK) {
            parts_stop(p);
            return rc;
        }
    }
    return PERMITD_OK;
}

void parts_stop(struct parts *p)
{
    for (; p->started > 0; p->started--) {
        const struct part *t = &p->table[p->started - 1];

        if (p->on[p->started - 1] && t->stop != NULL)
            t->stop(p->ctx);
    }
    for (; p->made > 0; p->made--) {
        const struct part *t = &p->table[p->made - 1];

        if (p->on[p->made - 1] && t->free != NULL)
            t->free(p->ctx);
    }
}
