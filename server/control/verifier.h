/*
 * verifier.h - argon2id password checks on threads of their own (a
 * core/pool.h pool), behind a short bounded queue: the global cap on argon2
 * work.
 *
 * One check costs ~50 ms of an idle core (several times that on a busy
 * one). Run on the admin listener's thread, a flood of logins would hold
 * /readyz, /metrics and every admin RPC behind it for as long as it lasted.
 * Here a few verifier threads do the checks; a check that finds `queue`
 * others already waiting is refused at once (PERMITD_EEXHAUSTED), so the
 * work a flood can cause is bounded, and its answer comes back to the loop
 * that asked (through that loop's inbox, loop.h), which then answers the
 * deferred request without any thread having waited for argon2 but a
 * verifier.
 */
#ifndef PERMITD_VERIFIER_H
#define PERMITD_VERIFIER_H

#include <stdint.h>

#include "core/status.h"

struct loop;
struct pool_inbox;
struct verifier;

/* Starts `workers` verifier threads with room for `queue` checks waiting
 * for one. Returns PERMITD_OK and *out (free with verifier_free()), or an
 * error saying what could not be made. */
int verifier_new(int workers, int queue, struct verifier **out, struct permitd_error *err);

/* Makes the way back from v's threads to loop: an inbox attached to loop
 * as a source (from loop's thread, or before that thread starts). It lives
 * as long as the loop: loop_close() frees it, or, when a check is still out
 * then, that check's return does. Returns PERMITD_OK and *out, or an error
 * saying what could not be made. */
int verifier_inbox_new(struct verifier *v, struct loop *loop, struct pool_inbox **out,
                       struct permitd_error *err);

/* Lets the threads finish the checks still queued, joins them and frees v.
 * Every loop that asked must have ended first (an HTTP server's loop ends
 * only once its deferred requests are answered). NULL is a no-op. */
void verifier_free(struct verifier *v);

/* The answer of one check, on the thread that asked: match is 1 when the
 * password matches the hash, 0 otherwise (also for a malformed hash). */
typedef void (*verifier_done_fn)(void *ud, int match);

/* Checks password against the argon2id hash `encoded` (NULL: a hash of no
 * password anyone knows, auth_dummy_hash(), so an unknown user costs what
 * a known one does); both are copied. done(ud, match) then runs exactly
 * once on the loop of inbox ib (call this from that loop's thread), never
 * before this returns. With ib NULL, the check is made in place and done
 * runs before this returns. Returns PERMITD_OK, or PERMITD_EEXHAUSTED (with
 * err saying how full the queue is) when `queue` checks already wait, or
 * PERMITD_EINTERNAL (out of memory); done never runs on an error. */
int verifier_submit(struct verifier *v, struct pool_inbox *ib, const char *encoded,
                    const char *password, verifier_done_fn done, void *ud,
                    struct permitd_error *err);

/* What /metrics shows. Read from any thread. */
struct verifier_load {
    unsigned workers, queue;    /* as configured */
    unsigned busy;              /* checks running now */
    unsigned waiting;           /* checks queued for a thread */
    uint64_t checked;           /* checks done */
    uint64_t refused;           /* checks refused: the queue was full */
};
void verifier_load(struct verifier *v, struct verifier_load *out);

#endif
