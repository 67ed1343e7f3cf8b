/*
 * redis.h - permitd's only door to Redis (hiredis stays inside redis.c and
 * redis_pipe.c).
 *
 * One `struct redis` per process holds the settings and the embedded
 * scripts; each thread that calls in gets its own blocking connection
 * (redis.c; in a Redis Cluster one per master it calls), created on first
 * use and kept in thread-local storage, so no call takes a lock. An event
 * loop drives a pipe instead (redis_pipe.c, redis_pipe_*: a non-blocking
 * connection of its own for pipelined script calls; in a cluster one per
 * master behind the same API). A broken connection is
 * dropped and re-made on a later call, with a backoff so a dead Redis is not
 * hammered; scripts are loaded on every new connection and re-loaded when
 * Redis answers NOSCRIPT. Which node a call goes to is redis_route.c's
 * (see "Redis Cluster" below).
 */
#ifndef PERMITD_REDIS_H
#define PERMITD_REDIS_H

#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "core/status.h"

struct redis;

/* The scripts of lua/, by purpose. The decision scripts, one per
 * algorithm (issue 20), share one call and one answer (lua/bucket.lua's
 * header): the limiter picks one by its policy's algorithm
 * (redis_decision_script()). bucket.lua and sync.lua must be in the
 * binary; an algorithm's script the build lacks (its lua/ file is not
 * there yet) leaves redis_script_present() 0, and its policies fail. */
enum redis_script {
    REDIS_SCRIPT_BUCKET,    /* lua/bucket.lua: token-bucket decisions */
    REDIS_SCRIPT_SYNC,      /* lua/sync.lua: write or delete one policy, if newer */
    REDIS_SCRIPT_FIXED_WINDOW,      /* lua/fixed_window.lua */
    REDIS_SCRIPT_SLIDING_WINDOW,    /* lua/sliding_window.lua */
    REDIS_SCRIPT_SLIDING_LOG,       /* lua/sliding_log.lua */
    REDIS_SCRIPT_CONCURRENCY,       /* lua/concurrency.lua */
    REDIS_SCRIPT_LEASE_RETURN,      /* lua/lease_return.lua: a local lease's unused permits
                                       back (decisions/locallease.h) */
    REDIS_SCRIPT_RESERVATION,       /* lua/reservation.lua: a reservation's record (issue 38) */
    REDIS_SCRIPT_COUNT
};

/* The file name of a script ("bucket.lua", ...). */
const char *redis_script_name(enum redis_script script);

/* Whether the binary holds script (see enum redis_script). */
int redis_script_present(const struct redis *r, enum redis_script script);

/* A decision script's answer: one RECORD per item (lua/bucket.lua's
 * header), ten little-endian doubles then 32 bytes of lease id
 * (REDIS_RECORD_BYTES); in a compact call (no request id, no lease id:
 * limiter.c's call_head()) the first REDIS_RECORD_SHORT_NUMBERS doubles
 * alone (REDIS_RECORD_SHORT bytes). Read into REDIS_RECORD_WORDS long
 * longs either way: the ten numbers (those a short RECORD lacks read 0),
 * then the lease's bytes as they came (out[REDIS_RECORD_LEASE..], 32
 * bytes: memcpy them out; zeros for a short RECORD). */
#define REDIS_RECORD_BYTES 112
#define REDIS_RECORD_SHORT 64
#define REDIS_RECORD_SHORT_NUMBERS 8
#define REDIS_RECORD_NUMBERS 10
#define REDIS_RECORD_LEASE 10
#define REDIS_RECORD_WORDS 14

/* A byte string that need not be NUL-terminated. */
struct redis_str {
    const char *p;
    size_t len;
};

/* Returns a new handle in *out (free with redis_free()). Connects lazily:
 * Redis need not be up yet. cfg must outlive the handle. */
int redis_new(const struct config *cfg, struct redis **out, struct permitd_error *err);

/* Frees r; call after every thread that used it has stopped. NULL is a no-op. */
void redis_free(struct redis *r);

/* The longest a thread may ask to wait for one Redis call
 * (redis_thread_timeout()). */
#define REDIS_THREAD_TIMEOUT_MAX_MS 30000

/* Lets the calling thread's blocking calls on r (redis_script_run(),
 * redis_command(), the pipelines and the scan) wait up to timeout_ms for
 * Redis instead of the configured --redis-timeout-ms, each still within its
 * own deadline; 0 goes back to the configured one. For background threads
 * (the settle runner's), whose calls do work that grows with Redis's size
 * (a SCAN step on a big keyspace, a settle page) and which nobody waits on:
 * --redis-timeout-ms is sized for the decision path (50 ms), and a step
 * slower than that would fail every attempt. The pipes of an event loop
 * (redis_pipe_*) keep the configured timeout. PERMITD_EINVAL when
 * timeout_ms is not in 0..REDIS_THREAD_TIMEOUT_MAX_MS. */
int redis_thread_timeout(struct redis *r, int timeout_ms, struct permitd_error *err);

/* Runs script with keys and args on this thread's connection and stores the
 * numbers it returns in out[0..nout) (missing ones become 0): an array of
 * integers, or one string of little-endian doubles, each a whole number.
 * The call gives up at deadline_us (clock_now_us() scale) or after the
 * configured Redis timeout, whichever is first. Returns PERMITD_OK;
 * PERMITD_EUNAVAILABLE when Redis cannot be reached or does not answer in
 * its configured timeout; PERMITD_EDEADLINE when the caller's deadline was
 * the shorter and ran out; PERMITD_EINTERNAL for an error reply or one
 * that is not numbers. */
int redis_script_run(struct redis *r, enum redis_script script,
                     const struct redis_str *keys, int nkeys,
                     const struct redis_str *args, int nargs,
                     int64_t deadline_us, long long *out, int nout,
                     struct permitd_error *err);

/* One script call of a pipeline. The caller fills keys, args, out and
 * nout; redis_script_pipeline() fills out and sets rc (PERMITD_OK, or
 * PERMITD_EINTERNAL/PERMITD_EUNAVAILABLE for an error reply, whose text
 * is logged). */
struct redis_script_call {
    const struct redis_str *keys;
    int nkeys;
    const struct redis_str *args;
    int nargs;
    long long *out;
    int nout;
    int rc;
    int cross_slot;     /* cluster: its keys span several slots of one master
                           (keys[0] is KEYS, the rest travel in args: see
                           lua/bucket.lua); a redirect or a key that master
                           does not serve ends it with REDIS_CALL_SPLIT, for
                           the caller to send its items again per slot */
    enum redis_script script;   /* redis_pipe_send(): the script it calls
                                   (redis_script_pipeline() calls its own) */
};

/* A cross_slot call's rc: it met a redirect (MOVED, ASK, TRYAGAIN) or a key
 * of a slot its node does not serve (a reshard moved one). The script
 * wrote nothing (bucket.lua reads every key before it writes one); its
 * items must go again, one call per slot. Never leaves the limiter. */
#define REDIS_CALL_SPLIT (-50)

/* Sends every call in one write and reads the n replies: one round trip for
 * the lot. A broken connection or the deadline fails the whole pipeline
 * (the return value and err); a single error reply fails only its call. */
int redis_script_pipeline(struct redis *r, enum redis_script script,
                          struct redis_script_call *calls, size_t n,
                          int64_t deadline_us, struct permitd_error *err);

/* Reads a decision script's answer, RECORDs of rec_bytes each
 * (REDIS_RECORD_BYTES or REDIS_RECORD_SHORT; s, len bytes: a multiple of
 * it), into out[0..nout), REDIS_RECORD_WORDS per record; what it did not
 * send reads 0. PERMITD_OK, or PERMITD_EINTERNAL with err (may be NULL)
 * saying why, as redis_answer_numbers(). Pure. */
int redis_answer_records(const char *s, size_t len, size_t rec_bytes, long long *out, int nout,
                         struct permitd_error *err);

/* What a script's string answer is: RECORDs from a decision script (any
 * but sync.lua) asked for nout / REDIS_RECORD_WORDS items, when its
 * length is that many RECORDs of either length (a call's layout chooses
 * it: lua/bucket.lua's header); else doubles (bucket.lua's "settle"
 * answers two numbers, 16 bytes). Pure. */
int redis_answer_read(enum redis_script script, const char *s, size_t len, long long *out,
                      int nout, struct permitd_error *err);

/* Reads a script's answer sent as one string of little-endian doubles (s,
 * len bytes) into out[0..nout); numbers it did not send read 0, numbers
 * beyond nout are checked and dropped. PERMITD_OK, or PERMITD_EINTERNAL
 * with err (may be NULL) saying why: a length that is not a multiple of
 * 8, or a number that is not whole or not in a long long's range (NaN,
 * 1.5, 2^63). Pure: no Redis. */
int redis_answer_numbers(const char *s, size_t len, long long *out, int nout,
                         struct permitd_error *err);

/* What an error reply (its text, "LOADING Redis is loading ...") means for
 * the call it answers: PERMITD_EUNAVAILABLE when this Redis cannot serve
 * now (LOADING, BUSY, READONLY, MASTERDOWN, TRYAGAIN: failure_mode
 * applies), PERMITD_EINTERNAL otherwise (a fault of ours: a script error,
 * say). Pure. */
int redis_error_status(const char *reply);

/* 1 when an error reply is NOSCRIPT: Redis lacks the script (restarted or
 * flushed), which is loaded again and the call sent again. Pure. */
int redis_error_noscript(const char *reply);

/* A pipe (redis_pipe.c): script calls pipelined on a connection of its
 * own, driven by an event loop (loop.h) instead of blocking. One batch is out
 * at a time. Use from one thread. */
struct redis_pipe;

/* A pipe on r (not connected yet: the first send connects) in *out:
 * PERMITD_OK, or PERMITD_EINTERNAL with err saying what could not be
 * allocated. Free with redis_pipe_free() before r. */
int redis_pipe_new(struct redis *r, struct redis_pipe **out, struct permitd_error *err);
void redis_pipe_free(struct redis_pipe *p);

/* Sends calls[0..n) in one write (connecting first if need be, blocking up
 * to the timeout, with the usual backoff); each call names its script
 * (calls[i].script; every script is loaded on a new connection). calls must stay put until the
 * batch ends. PERMITD_OK: the batch is out, and redis_pipe_io() will say
 * when it ends; else nothing is out and the error is the whole batch's
 * (as redis_script_pipeline()). */
int redis_pipe_send(struct redis_pipe *p, struct redis_script_call *calls, size_t n,
                    int64_t deadline_us, struct permitd_error *err);

/* What the loop should wait for: the socket (fd -1 while disconnected),
 * EPOLLIN and perhaps EPOLLOUT, the batch's deadline (INT64_MAX when none
 * is out), and the connection's generation (changes with each new socket). */
void redis_pipe_want(const struct redis_pipe *p, int *fd, uint32_t *events, int64_t *at_us,
                     uint64_t *generation);

/* Does the I/O the loop saw ready (revents; 0 when the deadline came).
 * Returns 1 when the batch has ended with every call's rc and out filled
 * (as redis_script_pipeline()); 0 while it is still out (or none is); an
 * error when the batch failed as a whole (broken connection, deadline). */
int redis_pipe_io(struct redis_pipe *p, uint32_t revents, struct permitd_error *err);

/* A batch is out. */
int redis_pipe_busy(const struct redis_pipe *p);

/* One step of SCAN: cursor (a decimal string, "0" to begin) becomes the
 * next one, "0" once the scan has gone round; each key of this step that
 * matches pattern (SCAN's glob) is handed to each (valid only during the
 * call). A key present for the whole scan is handed over at least once. */
int redis_scan(struct redis *r, char cursor[24], const char *pattern, int count,
               int64_t deadline_us, void (*each)(void *ud, const char *s, size_t len),
               void *ud, struct permitd_error *err);

/* The masters a scan goes over: a cluster's, as its map has them now (0
 * while the map is not known), or 1 for a single Redis. */
size_t redis_masters(struct redis *r);

/* The longest "host:port" (or socket path) naming a node, with its NUL. */
#define REDIS_WHERE_MAX 300

/* One step of SCAN on one master only (master < redis_masters()), on this
 * thread's connection to it: cursor (a decimal string, "0" to begin)
 * becomes the next one, "0" once that master's keyspace has gone round;
 * each matching key of the step goes to each (valid only during the call).
 * node is "" at the first step and receives the master's address; a later
 * step whose master is another node by then (a failover changed the map)
 * fails, unavailable, naming both: the scan must start again. Threads
 * scanning different masters at once run in parallel (settle.c). */
int redis_scan_master(struct redis *r, size_t master, char node[REDIS_WHERE_MAX], char cursor[24],
                      const char *pattern, int count, int64_t deadline_us,
                      void (*each)(void *ud, const char *s, size_t len), void *ud,
                      struct permitd_error *err);

/* redis_script_run() for a script that answers strings (lua/reservation.lua):
 * each string of an array reply, or the one string, goes to each (valid
 * only during the call); an error reply is the call's error. */
int redis_script_strings(struct redis *r, enum redis_script script,
                         const struct redis_str *keys, int nkeys,
                         const struct redis_str *args, int nargs, int64_t deadline_us,
                         void (*each)(void *ud, const char *s, size_t len), void *ud,
                         struct permitd_error *err);

/* Runs any command (args[0] is its name) like redis_script_run(). When
 * integer is not NULL it receives an integer reply (0 otherwise); when each
 * is not NULL it is called for every string element of an array reply, or
 * once for a reply that is one string or status ("OK": a SET NX that took
 * its key; nil calls nothing) (the strings are valid only during the
 * call). */
int redis_command(struct redis *r, const struct redis_str *args, int nargs,
                  int64_t deadline_us, long long *integer,
                  void (*each)(void *ud, const char *s, size_t len), void *ud,
                  struct permitd_error *err);

/* One command of redis_command_pipeline(): args[0] is its name, args[1]
 * its key (which routes it in a cluster). Its reply goes to each (may be
 * NULL) as redis_command()'s does, the strings of an array inside an
 * array too, in their place (SSCAN: its cursor, then its members); rc is
 * set: PERMITD_OK, or the error
 * of its reply or of its node's connection. */
struct redis_command_call {
    const struct redis_str *args;
    int nargs;
    void (*each)(void *ud, const char *s, size_t len);
    void *ud;
    int rc;
    long long integer;      /* an integer reply (LLEN, EXISTS): its value */
};

/* Sends every command in one write per node (one Redis: one write; a
 * cluster: one per master, the calls grouped by their key's slot) and
 * reads the replies in order: one round trip per node for the lot. An
 * error reply fails its call only; a redirect or TRYAGAIN sends that call
 * again alone, following it. Returns PERMITD_OK, or the error that failed
 * the whole pipeline (every call's rc then says so): a single Redis that
 * cannot be reached or breaks, or the deadline. In a cluster a master
 * that cannot be reached fails its own calls only. Each call's strings
 * are valid only during its each(). */
int redis_command_pipeline(struct redis *r, struct redis_command_call *calls, size_t n,
                           int64_t deadline_us, struct permitd_error *err);

/* Failed calls (connection refused, timeouts, broken connections) and
 * connections made, since start. For /metrics. */
void redis_counters(struct redis *r, uint64_t *errors, uint64_t *connects);

/* EVALSHAs of script sent since start (a NOSCRIPT's second try counts
 * again, as Redis counts it). For /metrics. */
uint64_t redis_script_calls(struct redis *r, enum redis_script script);

/* rediss: TLS handshakes that failed, by reason (i from 0): 0 with
 * *reason (the metric's label) and *n, -1 past the last reason or when r
 * is not over TLS. For /metrics. */
int redis_tls_failure_info(struct redis *r, int i, const char **reason, uint64_t *n);

/* PING on this thread's connection, within deadline_us: 0 or an error as
 * above. In cluster mode every master is pinged; the error names each one
 * that failed. For health checks. */
int redis_ping(struct redis *r, int64_t deadline_us, struct permitd_error *err);

/* ---- Redis Cluster (redis+cluster:// URLs) ----
 * Every call above routes itself: a script call by its first key (every
 * key of one call must share a slot), redis_command() by args[1] (the key
 * of DEL, SADD, HGETALL ...; a command without one goes to any master),
 * redis_scan() walks every master in turn (its cursor then reads
 * "<master>-<cursor>", still under 24 bytes), redis_ping() pings them all.
 * MOVED and ASK are followed inside. */

/* 1 when r talks to a Redis Cluster. */
int redis_cluster_enabled(const struct redis *r);

/* The master serving slot, as a small number that is the same for every
 * slot of one master (its index among the nodes met), or -1 while no
 * master does (the map is then refreshed soon). Lock-free: one atomic
 * load, for the limiter to group a pass's calls per master. Single Redis:
 * 0 for every slot. */
int redis_slot_master(struct redis *r, unsigned slot);

/* PING on every master (one on a single Redis), within deadline_us:
 * each(ud, "host:port", rc, error text or "") for each. Returns
 * PERMITD_OK when all answered, else the first failure's code;
 * PERMITD_EUNAVAILABLE when the cluster's map is not known yet. */
int redis_ping_each(struct redis *r, int64_t deadline_us,
                    void (*each)(void *ud, const char *where, int rc, const char *error),
                    void *ud);

/* Redirects followed (MOVED, ASK) and slot maps fetched, since start; 0
 * on a single Redis. For /metrics. */
void redis_cluster_counters(struct redis *r, uint64_t *moved, uint64_t *ask, uint64_t *refreshes);

/* redis+sentinel: 1, and *changes the master changes followed since
 * start (redis_sentinel.c), for /metrics; 0 otherwise. */
int redis_sentinel_counters(const struct redis *r, uint64_t *changes);

/* One node permitd has talked to or been told of, for /metrics. */
struct redis_node_info {
    char where[300];
    uint64_t connects;
    uint64_t errors;
};

/* Node i (from 0) into *out: 0, or -1 past the last. */
int redis_node_info(struct redis *r, int i, struct redis_node_info *out);

#endif
