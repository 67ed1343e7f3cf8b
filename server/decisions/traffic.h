/*
 * traffic.h - this instance's decisions per policy and app, as running
 * totals, for the traffic history (issue 39): control/trafficlog.c reads
 * them once a flush and adds what changed to MySQL's traffic_minutes
 * (migration 0017), so the history survives restarts and sums the fleet.
 *
 * A pair (policy, app) gets a place the first time it is counted, up to
 * the table's capacity (--traffic-pairs); a place is never given back
 * (totals must not go down while the writer reads differences), so a
 * pair met after the table is full is counted under its policy with app
 * "" when that pair has a place, else only in traffic_dropped(). The app
 * is the authenticated one (an app key's) or, with --app-auth off, the
 * one the request named; a name outside the policy-name rule counts as
 * "" (no app), so a caller cannot write arbitrary text into MySQL.
 */
#ifndef PERMITD_TRAFFIC_H
#define PERMITD_TRAFFIC_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

/* The totals kept per pair, in traffic_minutes' column order. */
enum traffic_counter {
    TRAFFIC_ALLOWED,        /* decided by Redis: allowed (a shadow policy's would-be denial not) */
    TRAFFIC_DENIED,         /* decided by Redis: denied */
    TRAFFIC_SHADOW_DENIED,  /* a policy in shadow mode would have denied (answered allowed) */
    TRAFFIC_ERRORS,         /* answered with an error */
    TRAFFIC_PASSES,         /* let through by failure_mode open, Redis not deciding */
    TRAFFIC_KEYED,          /* of the decided takes above, those that named a key (the
                             * shared bucket's are the rest: the list's gauge, issue 39) */
    TRAFFIC_COUNTERS
};

#define TRAFFIC_PAIRS_MAX 10000000      /* --traffic-pairs' ceiling */
#define TRAFFIC_NAME_MAX 128            /* a policy's or app's name, without NUL */

struct traffic;

/* Makes an empty table with room for `pairs` pairs (1 .. TRAFFIC_PAIRS_MAX;
 * about 320 bytes each, taken as they fill) in *out: PERMITD_OK,
 * PERMITD_EINVAL for a count out of range, PERMITD_EINTERNAL when memory
 * ran out (err says so; *out is then NULL). Free with traffic_free();
 * traffic_free(NULL) does nothing. */
int traffic_new(size_t pairs, struct traffic **out, struct permitd_error *err);
void traffic_free(struct traffic *t);

/* Counts one event of counter c for policy (a real one: the caller knows)
 * and app (NULL or "" for none). Safe from any thread; lock-free but for
 * a pair's first event, which takes a mutex. */
void traffic_record(struct traffic *t, const char *policy, const char *app,
                    enum traffic_counter c);

/* traffic_record() of c, and of TRAFFIC_KEYED too when keyed is set, with
 * one lookup of the pair: a decided take that named a key. */
void traffic_record_take(struct traffic *t, const char *policy, const char *app,
                         enum traffic_counter c, int keyed);

/* Calls each() for every pair with a place, in the order they took them
 * (place 0 first), with its running totals since start (never going
 * down). Places are never reused, so place identifies the pair for the
 * caller's bookkeeping. each must not call back into t. */
void traffic_totals(struct traffic *t,
                    void (*each)(void *ud, size_t place, const char *policy, const char *app,
                                 const uint64_t total[TRAFFIC_COUNTERS]),
                    void *ud);

/* The table's capacity, and the events counted nowhere (the table full). */
size_t traffic_capacity(const struct traffic *t);
uint64_t traffic_dropped(const struct traffic *t);

/* 1 when name may be stored as a policy or app name (the policy-name
 * rule: [A-Za-z0-9][A-Za-z0-9._-]{0,127}), else 0. Pure. */
int traffic_name_ok(const char *name);

#endif
