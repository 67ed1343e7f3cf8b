/*
 * verifier.c - argon2id checks on a small pool of threads (core/pool.c), a
 * bounded queue in front of them, and the way back to the loop that asked.
 *
 * The idea: argon2 is the one piece of admin work whose cost is set on
 * purpose to be high, so it is the one piece that must not run on the
 * admin listener's thread (one event loop, http.c), and whose total must
 * be capped. A check is a pool job: submitted on a loop thread, run by a
 * verifier thread, then handed back through the inbox of the loop that
 * asked (made for it when its worker starts, verifier_inbox_new()), where
 * its done() runs and the deferred request it belongs to may be resumed. A
 * check that finds `queue` others waiting is refused at once: the answer
 * to a flood is a quick resource_exhausted, never a longer wait for
 * everyone. What is the verifier's own: the argon2 call, the counts
 * /metrics shows (checked, refused) and the words of the refusal.
 *
 * Passwords are copied into the job and wiped once checked.
 */
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/auth.h"
#include "control/verifier.h"
#include "core/pool.h"

/* One check, from submission to done(). */
struct job {
    struct pool_job pj;         /* first: the pool hands this back */
    struct verifier *v;
    char hash[AUTH_HASH_MAX];   /* "" = auth_dummy_hash() */
    char *password;             /* owned; wiped and freed once checked */
    size_t password_len;
    int match;
    verifier_done_fn done;
    void *ud;
};

struct verifier {
    struct pool *pool;
    atomic_uint_fast64_t checked, refused;
};

static void job_free(struct job *j)
{
    if (j == NULL)
        return;
    if (j->password != NULL) {
        explicit_bzero(j->password, j->password_len);
        free(j->password);
    }
    explicit_bzero(j->hash, sizeof(j->hash));
    free(j);
}

/* On a verifier thread: the argon2 check itself. */
static void job_run(struct pool_job *pj)
{
    struct job *j = (struct job *)pj;

    j->match = auth_verify_password(j->hash[0] ? j->hash : auth_dummy_hash(), j->password);
    explicit_bzero(j->password, j->password_len);
    atomic_fetch_add_explicit(&j->v->checked, 1, memory_order_relaxed);
}

/* Back on the loop that asked: the answer, then the job is gone. */
static void job_done(struct pool_job *pj)
{
    struct job *j = (struct job *)pj;

    j->done(j->ud, j->match);
    job_free(j);
}

/* Its loop ended with the check still out: no one to answer. */
static void job_drop(struct pool_job *pj)
{
    job_free((struct job *)pj);
}

int verifier_new(int workers, int queue, struct verifier **out, struct permitd_error *err)
{
    struct verifier *v;
    struct pool *pool;
    int rc;

    *out = NULL;
    if ((rc = pool_new(workers, queue, "password verifier", &pool, err)) != PERMITD_OK)
        return rc;
    if ((v = calloc(1, sizeof(*v))) == NULL) {
        pool_free(pool);
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    }
    v->pool = pool;
    *out = v;
    return PERMITD_OK;
}

void verifier_free(struct verifier *v)
{
    if (v == NULL)
        return;
    pool_free(v->pool);
    free(v);
}

int verifier_inbox_new(struct verifier *v, struct loop *loop, struct pool_inbox **out,
                       struct permitd_error *err)
{
    return pool_inbox_new(v->pool, loop, out, err);
}

int verifier_submit(struct verifier *v, struct pool_inbox *ib, const char *encoded,
                    const char *password, verifier_done_fn done, void *ud,
                    struct permitd_error *err)
{
    struct pool_load seen;
    struct job *j;

    if (ib == NULL) {
        /* No loop to answer on (a caller outside any worker): check in place. */
        int match = auth_verify_password(encoded ? encoded : auth_dummy_hash(), password);
        atomic_fetch_add_explicit(&v->checked, 1, memory_order_relaxed);
        done(ud, match);
        return PERMITD_OK;
    }
    if (encoded != NULL && strlen(encoded) >= AUTH_HASH_MAX)
        encoded = "";           /* not a hash auth.c made: never matches */
    if ((j = calloc(1, sizeof(*j))) == NULL ||
        (j->password = strdup(password)) == NULL) {
        free(j);
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    }
    j->password_len = strlen(password);
    if (encoded != NULL)
        snprintf(j->hash, sizeof(j->hash), "%s", encoded[0] ? encoded : "-");
    j->pj = (struct pool_job){job_run, job_done, job_drop, NULL, NULL};
    j->v = v;
    j->done = done;
    j->ud = ud;
    if (pool_submit(v->pool, ib, &j->pj, &seen) != PERMITD_OK) {
        job_free(j);
        atomic_fetch_add_explicit(&v->refused, 1, memory_order_relaxed);
        return permitd_error_set(err, PERMITD_EEXHAUSTED,
                                 "too many logins are being checked at once (%u checking, %u "
                                 "waiting); try again in a few seconds",
                                 seen.busy, seen.waiting);
    }
    return PERMITD_OK;
}

void verifier_load(struct verifier *v, struct verifier_load *out)
{
    struct pool_load l;

    pool_load(v->pool, &l);
    out->workers = l.workers;
    out->queue = l.queue;
    out->busy = l.busy;
    out->waiting = l.waiting;
    out->checked = atomic_load_explicit(&v->checked, memory_order_relaxed);
    out->refused = atomic_load_explicit(&v->refused, memory_order_relaxed);
}
