/*
 * redis_script.c - the Lua scripts, called: one EVALSHA on this thread's
 * blocking connection, or a batch of them pipelined on it.
 *
 * The scripts (lua/, embedded in the binary; their registry is redis.c's)
 * are loaded by SCRIPT LOAD on every new connection (its greeting,
 * redis.c) and called by SHA. A call's argv is laid out in one place,
 * evalsha_fill(): EVALSHA, the SHA, the number of keys, the keys, the
 * arguments. A single call (evalsha()) adds the checks, that the script is
 * in this build and that its argv fits on the stack, and goes out through
 * redis_call() (redis.c: the node that serves its first key, redirects
 * followed, NOSCRIPT reloaded once). Its answer is the script's numbers
 * (redis_answer_read(), redis.c) or, for a listing, its strings.
 *
 * A pipelined batch (redis_script_pipeline()) is written in one go and its
 * replies are read in order, so it costs one round trip; in a cluster, one
 * per master (cluster_pipeline()). NOSCRIPT reloads the scripts and sends
 * the calls it refused once more. Every EVALSHA sent is counted
 * (redis_count_script(), /metrics). The worker loops' non-blocking
 * pipelines are redis_pipe.c's; the connections are redis.c's.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "core/log.h"
#include "stores/cluster.h"
#include "stores/redis.h"
#include "stores/redis_conn.h"
#include "stores/redis_tls.h"

#define ARGV_MAX 64     /* a single call's argv, on the stack */

/* A script's numbers into out[0..nout); those it did not send read 0.
 * The decision scripts send RECORDs, bucket.lua's settle its two numbers,
 * as one string (Redis answers a string with one copy, a table at ~650
 * instructions a number: redis_answer_read()), sync.lua, called a few
 * times a minute, an array of integers. -1 for any other reply. */
static int script_numbers(enum redis_script script, const redisReply *rep, long long *out,
                          int nout)
{
    if (rep->type == REDIS_REPLY_STRING)
        return redis_answer_read(script, rep->str, rep->len, out, nout, NULL) == PERMITD_OK
               ? 0 : -1;
    if (rep->type != REDIS_REPLY_ARRAY)
        return -1;
    for (int i = 0; i < nout; i++)
        out[i] = (size_t)i < rep->elements && rep->element[i]->type == REDIS_REPLY_INTEGER
                 ? rep->element[i]->integer : 0;
    return 0;
}

/* One EVALSHA's argv into argv[0..3 + nkeys + nargs) and lens[]: the
 * command, the SHA (NULL: call_node() puts in the one of the connection it
 * goes out on), the number of keys (written into nkeys_s), the keys, the
 * arguments. Returns argc. The one layout every script call is sent in. */
static int evalsha_fill(const char **argv, size_t *lens, const char *sha, char nkeys_s[12],
                        const struct redis_str *keys, int nkeys,
                        const struct redis_str *args, int nargs)
{
    int argc = 0;

    snprintf(nkeys_s, 12, "%d", nkeys);
    argv[argc] = "EVALSHA"; lens[argc++] = 7;
    argv[argc] = sha; lens[argc++] = 40;
    argv[argc] = nkeys_s; lens[argc++] = strlen(nkeys_s);
    for (int i = 0; i < nkeys; i++) {
        argv[argc] = keys[i].p;
        lens[argc++] = keys[i].len;
    }
    for (int i = 0; i < nargs; i++) {
        argv[argc] = args[i].p;
        lens[argc++] = args[i].len;
    }
    return argc;
}

/* One EVALSHA of script on this thread's connection to the master of
 * keys[0] (any master without keys), within the deadline: what
 * redis_script_run() and redis_script_strings() share. Internal when the
 * argv would not fit ARGV_MAX, unimplemented when the script is not in
 * this build. On PERMITD_OK *rep is a reply that is not an error; the
 * caller frees it with freeReplyObject(). */
static int evalsha(struct redis *r, enum redis_script script,
                   const struct redis_str *keys, int nkeys,
                   const struct redis_str *args, int nargs, int64_t deadline_us,
                   redisReply **rep, struct permitd_error *err)
{
    const char *argv[ARGV_MAX];
    size_t lens[ARGV_MAX];
    char nkeys_s[12];
    int argc;

    *rep = NULL;
    if (3 + nkeys + nargs > ARGV_MAX)
        return permitd_error_set(err, PERMITD_EINTERNAL, "too many script arguments");
    if (!redis_script_present(r, script))
        return permitd_error_set(err, PERMITD_EUNIMPLEMENTED, "script %s is not in this build "
                                 "of permitd", redis_script_name(script));
    argc = evalsha_fill(argv, lens, NULL, nkeys_s, keys, nkeys, args, nargs);
    return redis_call(r, nkeys > 0 ? keys[0].p : NULL, nkeys > 0 ? keys[0].len : 0, argc, argv,
                      lens, (int)script, deadline_us, rep, err);
}

int redis_script_run(struct redis *r, enum redis_script script,
                     const struct redis_str *keys, int nkeys,
                     const struct redis_str *args, int nargs,
                     int64_t deadline_us, long long *out, int nout,
                     struct permitd_error *err)
{
    redisReply *rep;
    int rc;

    if ((rc = evalsha(r, script, keys, nkeys, args, nargs, deadline_us, &rep, err)) != PERMITD_OK)
        return rc;
    if (script_numbers(script, rep, out, nout) != 0) {
        rc = permitd_error_set(err, PERMITD_EINTERNAL,
                               "script %s answered with %s instead of its numbers",
                               redis_script_files[script], redis_reply_kind(rep->type));
        freeReplyObject(rep);
        return rc;
    }
    freeReplyObject(rep);
    return PERMITD_OK;
}

int redis_script_strings(struct redis *r, enum redis_script script,
                         const struct redis_str *keys, int nkeys,
                         const struct redis_str *args, int nargs, int64_t deadline_us,
                         void (*each)(void *ud, const char *s, size_t len), void *ud,
                         struct permitd_error *err)
{
    redisReply *rep;
    int rc;

    if ((rc = evalsha(r, script, keys, nkeys, args, nargs, deadline_us, &rep, err)) != PERMITD_OK)
        return rc;
    if (rep->type == REDIS_REPLY_ARRAY) {
        for (size_t i = 0; i < rep->elements; i++)
            if (rep->element[i]->type == REDIS_REPLY_STRING)
                each(ud, rep->element[i]->str, (size_t)rep->element[i]->len);
    } else if (rep->type == REDIS_REPLY_STRING || rep->type == REDIS_REPLY_STATUS) {
        each(ud, rep->str, (size_t)rep->len);
    }
    freeReplyObject(rep);
    return PERMITD_OK;
}

/* argv for one EVALSHA of a pipeline: a new array (free()) of 3 + nkeys +
 * nargs entries, with the SHA already in place. */
static int evalsha_argv(const char *sha, const struct redis_script_call *c, char *nkeys_s,
                        const char ***argv, size_t **lens)
{
    size_t argc = 3 + (size_t)c->nkeys + (size_t)c->nargs;

    *argv = malloc(argc * sizeof(**argv));
    *lens = malloc(argc * sizeof(**lens));
    if (*argv == NULL || *lens == NULL) {
        free(*argv);
        free(*lens);
        return -1;
    }
    return evalsha_fill(*argv, *lens, sha, nkeys_s, c->keys, c->nkeys, c->args, c->nargs);
}

/* One call of a cluster pipeline alone, on the master of its first key,
 * redirects followed (redis_script_run()); its failure is logged. */
static int cluster_one(struct redis *r, enum redis_script script, struct redis_script_call *call,
                       int64_t deadline_us, struct permitd_error *err)
{
    struct permitd_error e = {0, ""};

    call->rc = redis_script_run(r, script, call->keys, call->nkeys, call->args, call->nargs,
                                deadline_us, call->out, call->nout, &e);
    if (call->rc == PERMITD_EDEADLINE)
        return permitd_error_set(err, PERMITD_EDEADLINE, "%s", e.message);
    if (call->rc != PERMITD_OK)
        log_msg(LOG_LEVEL_WARN, "script call failed", "script=%s error=\"%.200s\"",
                redis_script_files[script], e.message);
    return PERMITD_OK;
}

/* redis_script_pipeline() on a cluster: the calls grouped by the master of
 * their first key's slot, each group sent in one write on this thread's
 * connection to that master and its replies read in order, so a group
 * costs one round trip (the settle pass sends a SCAN page of one master's
 * buckets, a call per slot, this way: server/control/settle.c). A call
 * whose reply is a redirect, TRYAGAIN or NOSCRIPT, or whose keys span
 * slots (cross_slot: its split is the pipe's business), or whose slot has
 * no master yet, is sent again alone (cluster_one()), as every call was
 * before. A master that cannot be reached fails its own calls only. */
static int cluster_pipeline(struct redis *r, enum redis_script script,
                            struct redis_script_call *calls, size_t n, int64_t deadline_us,
                            struct permitd_error *err)
{
    struct redis_node **node = calloc(n + 1, sizeof(*node));
    int rc = PERMITD_OK;

    if (node == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        unsigned slot;
        calls[i].rc = -1;       /* not answered yet */
        if (!calls[i].cross_slot && calls[i].nkeys > 0)
            node[i] = redis_route_node(r, calls[i].keys[0].p, calls[i].keys[0].len, &slot);
    }
    for (size_t first = 0; first < n && rc == PERMITD_OK; first++) {
        struct redis_node *at = node[first];
        struct permitd_error e = {0, ""};
        struct redis_conn *c;
        int bound, timeout_ms, sent = 0;

        if (calls[first].rc != -1 || at == NULL)
            continue;
        timeout_ms = redis_call_timeout(r, deadline_us, &bound, err);
        if (timeout_ms < 0) {
            rc = timeout_ms;
            break;
        }
        if ((c = redis_conn_acquire(r, at, timeout_ms, &e)) == NULL) {
            int failed = redis_conn_failed(r, bound, deadline_us, &e);
            if (failed == PERMITD_EDEADLINE) {
                rc = permitd_error_set(err, failed, "%s", e.message);
                break;
            }
            log_msg(LOG_LEVEL_WARN, "script call failed", "script=%s error=\"%.200s\"",
                    redis_script_files[script], e.message);
            for (size_t i = first; i < n; i++)
                if (node[i] == at && calls[i].rc == -1)
                    calls[i].rc = failed;
            continue;
        }
        for (size_t i = first; i < n; i++) {
            const char **argv;
            size_t *lens;
            char nkeys_s[12];
            int argc, ok;

            if (node[i] != at || calls[i].rc != -1)
                continue;
            if ((argc = evalsha_argv(c->sha[script], &calls[i], nkeys_s, &argv, &lens)) < 0) {
                rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
                break;
            }
            ok = redisAppendCommandArgv(c->ctx, argc, argv, lens) == REDIS_OK;
            free(argv);
            free(lens);
            if (!ok) {
                rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
                break;
            }
            calls[i].rc = -2;   /* sent: its reply comes in order */
            redis_count_script(r, (int)script);
            sent++;
        }
        if (rc != PERMITD_OK) {
            redis_conn_close(c);        /* half a batch in its buffer: not to be sent */
            break;
        }
        for (size_t i = first; i < n && sent > 0; i++) {
            redisReply *rep = NULL;
            struct cluster_redirect rd;

            if (node[i] != at || calls[i].rc != -2)
                continue;
            sent--;
            if (redis_io_get_reply(c->ctx, c->tls, (void **)&rep) != REDIS_OK || rep == NULL) {
                int failed = redis_conn_broken(r, c, bound, timeout_ms, &e);
                if (failed == PERMITD_EDEADLINE) {
                    rc = permitd_error_set(err, failed, "%s", e.message);
                    break;
                }
                log_msg(LOG_LEVEL_WARN, "script call failed", "script=%s error=\"%.200s\"",
                        redis_script_files[script], e.message);
                for (size_t k = i; k < n; k++)
                    if (node[k] == at && calls[k].rc == -2)
                        calls[k].rc = failed;
                break;
            }
            if (rep->type == REDIS_REPLY_ERROR &&
                (redis_error_noscript(rep->str) || strncmp(rep->str, "TRYAGAIN", 8) == 0 ||
                 cluster_redirect_parse(rep->str, rep->len, &rd) != CLUSTER_REDIRECT_NONE)) {
                calls[i].rc = -1;
                node[i] = NULL;         /* alone, below */
            } else if (rep->type != REDIS_REPLY_ERROR &&
                       script_numbers(script, rep, calls[i].out, calls[i].nout) == 0) {
                calls[i].rc = PERMITD_OK;
            } else {
                log_msg(LOG_LEVEL_WARN, "script call failed", "script=%s error=\"%.200s\"",
                        redis_script_files[script],
                        rep->type == REDIS_REPLY_ERROR ? rep->str : redis_reply_kind(rep->type));
                calls[i].rc = rep->type == REDIS_REPLY_ERROR ? redis_error_status(rep->str)
                                                             : PERMITD_EINTERNAL;
            }
            freeReplyObject(rep);
        }
    }
    for (size_t i = 0; i < n && rc == PERMITD_OK; i++)
        if (calls[i].rc == -1)
            rc = cluster_one(r, script, &calls[i], deadline_us, err);
    for (size_t i = 0; i < n; i++)
        if (calls[i].rc == -1 || calls[i].rc == -2)
            calls[i].rc = rc != PERMITD_OK ? rc : PERMITD_EINTERNAL;
    free(node);
    return rc;
}

int redis_script_pipeline(struct redis *r, enum redis_script script,
                          struct redis_script_call *calls, size_t n,
                          int64_t deadline_us, struct permitd_error *err)
{
    int bound, timeout_ms, rc = PERMITD_OK, reloaded = 0;
    struct redis_conn *c;
    size_t sent = 0, pending;

    if (r->route != NULL)
        return cluster_pipeline(r, script, calls, n, deadline_us, err);
    timeout_ms = redis_call_timeout(r, deadline_us, &bound, err);
    if (timeout_ms < 0)
        return timeout_ms;
    c = redis_conn_acquire(r, r->nodes[0], timeout_ms, err);
    if (c == NULL)
        return redis_conn_failed(r, bound, deadline_us, err);
    for (size_t i = 0; i < n; i++)
        calls[i].rc = -1;       /* not answered yet */

again:
    /* Queue every unanswered call, then read the replies in order. */
    sent = 0;
    for (size_t i = 0; i < n; i++) {
        const char **argv;
        size_t *lens;
        char nkeys_s[12];
        int argc;

        if (calls[i].rc != -1)
            continue;
        argc = evalsha_argv(c->sha[script], &calls[i], nkeys_s, &argv, &lens);
        if (argc < 0)
            return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        rc = redisAppendCommandArgv(c->ctx, argc, argv, lens) == REDIS_OK ? PERMITD_OK : -1;
        free(argv);
        free(lens);
        if (rc != PERMITD_OK)
            return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        redis_count_script(r, (int)script);
        sent++;
    }
    pending = 0;
    for (size_t i = 0; i < n && sent > 0; i++) {
        redisReply *rep = NULL;

        if (calls[i].rc != -1)
            continue;
        sent--;
        if (redis_io_get_reply(c->ctx, c->tls, (void **)&rep) != REDIS_OK || rep == NULL)
            return redis_conn_broken(r, c, bound, timeout_ms, err);
        if (rep->type == REDIS_REPLY_ERROR && redis_error_noscript(rep->str)) {
            pending++;          /* stays -1: sent again after the reload */
        } else if (rep->type != REDIS_REPLY_ERROR &&
                   script_numbers(script, rep, calls[i].out, calls[i].nout) == 0) {
            calls[i].rc = PERMITD_OK;
        } else {
            log_msg(LOG_LEVEL_WARN, "script call failed", "script=%s error=\"%.200s\"",
                    redis_script_files[script],
                    rep->type == REDIS_REPLY_ERROR ? rep->str : redis_reply_kind(rep->type));
            calls[i].rc = PERMITD_EINTERNAL;
        }
        freeReplyObject(rep);
    }
    if (pending > 0) {
        if (reloaded || redis_conn_handshake(r, c) != 0) {
            rc = permitd_error_set(err, PERMITD_EUNAVAILABLE, "redis at %s: scripts could not be "
                                   "loaded: %s", c->node->where, c->last_error);
            redis_conn_close(c);
            return rc;
        }
        log_msg(LOG_LEVEL_WARN, "redis lost its scripts; reloading", "addr=%s", c->node->where);
        reloaded = 1;
        goto again;
    }
    return PERMITD_OK;
}

uint64_t redis_script_calls(struct redis *r, enum redis_script script)
{
    return (unsigned)script < REDIS_SCRIPT_COUNT ? atomic_load(&r->script_calls[script]) : 0;
}
