/*
 * offload.h - a small pool of threads for the admin RPCs, so that the
 * admin listener's one loop thread only accepts, reads and answers.
 *
 * At 10,000 policies an admin RPC can take long (a page ordered by level
 * peeks every policy; MySQL may be slow), and the admin listener has one
 * loop thread, which also answers /healthz, /readyz and /metrics: a slow
 * RPC there held every probe behind it (issue 22). Here an RPC is a job:
 * submitted on the loop thread, run on a pool thread, and its done() runs
 * back on the loop that asked (through that loop's inbox, an eventfd
 * source, as verifier.h does for password checks), where the deferred
 * request is answered. A job that finds `queue` others waiting is refused
 * at once (PERMITD_EEXHAUSTED), so a flood costs bounded memory.
 */
#ifndef PERMITD_OFFLOAD_H
#define PERMITD_OFFLOAD_H

#include <stdint.h>

#include "core/status.h"

struct loop;
struct offload;
struct offload_inbox;

/* Starts `workers` threads with room for `queue` jobs waiting for one.
 * PERMITD_OK and *out (free with offload_free()), or an error saying what
 * could not be made. */
int offload_new(int workers, int queue, struct offload **out, struct permitd_error *err);

/* Lets the threads finish the jobs queued, joins them and frees o. Every
 * loop that submitted must have ended first. NULL is a no-op. */
void offload_free(struct offload *o);

/* The way back from o's threads to loop: an inbox attached to loop as a
 * source (from loop's thread, or before it starts). loop_close() frees it
 * (or, when a job is still out then, that job's return does). */
int offload_inbox_new(struct offload *o, struct loop *loop, struct offload_inbox **out,
                      struct permitd_error *err);

/* run(ud) on a pool thread, then done(ud) on ib's loop thread (call this
 * from that thread), exactly once each, never before this returns.
 * PERMITD_OK; PERMITD_EEXHAUSTED (err says how full) or PERMITD_EINTERNAL:
 * neither runs. */
int offload_submit(struct offload *o, struct offload_inbox *ib, void (*run)(void *ud),
                   void (*done)(void *ud), void *ud, struct permitd_error *err);

#endif
