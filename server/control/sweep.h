/*
 * sweep.h - the reservations' expiry sweep (issue 38): a thread that,
 * about twice a second, settles the reservations past their expiry
 * (limiter_reserve_sweep(): each one's record decides once, on Redis's
 * clock, so two instances sweeping at once settle it once). A Commit or
 * Cancel that comes after the expiry settles it as well, whichever is
 * first; the sweep is what settles one nobody touches again.
 */
#ifndef PERMITD_SWEEP_H
#define PERMITD_SWEEP_H

#include "core/status.h"
#include "decisions/limiter.h"

struct sweep;

/* Starts the thread in *out, a pass every period_ms (0: none is started,
 * *out NULL); limiter must outlive it. Stop and free with sweep_stop()
 * (NULL is a no-op). */
int sweep_start(struct limiter *limiter, int period_ms, struct sweep **out,
                struct permitd_error *err);
void sweep_stop(struct sweep *sw);

#endif
