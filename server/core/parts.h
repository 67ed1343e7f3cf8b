/*
 * parts.h - start a program's parts from a table, stop them in reverse.
 *
 * A part is one row: whether it is wanted, how it is made (new), set
 * going (start), brought to rest (stop) and freed (free), as nginx walks
 * its modules' init and exit hooks. parts_start() makes every wanted part
 * in table order, then starts them in table order; parts_stop() stops
 * them in the reverse order, then frees them in the reverse order. A
 * failure part way undoes, in reverse, only what was done: the order of
 * the table is the only place the order is written.
 */
#ifndef PERMITD_PARTS_H
#define PERMITD_PARTS_H

#include <stddef.h>

#include "core/status.h"

/* Every hook may be NULL (nothing to do at that step). Each gets the
 * caller's ctx, where the parts keep what they made.
 * enabled: whether the part is wanted at all (asked once, by parts_start()).
 * new:     makes the part; on failure it leaves nothing made, sets err and
 *          returns a negative status.
 * start:   sets it going (threads, listeners); on failure it leaves nothing
 *          running, sets err and returns a negative status.
 * stop:    undoes start; called only for a part whose start succeeded (a
 *          part without start counts as started when the one before it
 *          did, so a stop alone marks a place in the way down).
 * free:    undoes new; called only for a part whose new succeeded, after
 *          every part's stop. */
struct part {
    const char *name;
    int (*enabled)(void *ctx);
    int (*new)(void *ctx, struct permitd_error *err);
    int (*start)(void *ctx, struct permitd_error *err);
    void (*stop)(void *ctx);
    void (*free)(void *ctx);
};

#define PARTS_MAX 64

/* What parts_start() did, for parts_stop(). */
struct parts {
    const struct part *table;
    size_t n;
    void *ctx;
    unsigned char on[PARTS_MAX];    /* wanted (enabled) */
    size_t made;                    /* parts [0, made) went through new */
    size_t started;                 /* parts [0, started) went through start */
};

/* Makes, then starts, the n parts of table (n <= PARTS_MAX) in order. On a
 * failure at part k, the parts before k are stopped (those started) and
 * freed, in reverse order, and err is the failed part's own (its name is
 * for the reader of the table). n over PARTS_MAX is PERMITD_EINVAL. The
 * table and ctx must outlive p. */
int parts_start(struct parts *p, const struct part *table, size_t n, void *ctx,
                struct permitd_error *err);

/* Stops every started part, last first, then frees every made part, last
 * first. Idempotent: a second call does nothing. */
void parts_stop(struct parts *p);

#endif
