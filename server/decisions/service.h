/*
 * service.h - the decision service: what every door does with a decoded
 * request, written once (issue 34).
 *
 * permitd answers rate-limit calls through four doors: Connect (api.c),
 * gRPC (grpcapi.c), Envoy's ShouldRateLimit (envoyrls.c) and forward-auth
 * (forward.c). A door only decodes its wire's request into limiter
 * requests and encodes the answer; between the two, this module does the
 * rest, the same for all of them:
 *   - the strings are checked for UTF-8 (what Connect's codecs refuse,
 *     so the binary doors refuse it with the same error);
 *   - the API key is checked and the app authorized (decisions/appkeys.h);
 *   - the request is validated (names, key, permits: limiter_check());
 *   - the take is queued on the worker's limiter queue, whose deny cache,
 *     shadow policies and script call decide it (limiter.h);
 *   - its answer is counted: latency and decisions or errors in /metrics
 *     and the fleet's totals (stats.h), the key on the hot-keys card
 *     (hotkeys.h); then handed to the door through one callback, exactly
 *     once, on the worker's loop.
 * What stays in a door is its wire: Connect's RateLimit headers and error
 * body, gRPC's statuses, Envoy's per-descriptor codes, forward-auth's deny
 * status, and how a gateway's refused key value is hashed into a key
 * (bucketkey.h) before the service sees it. The access log line is the
 * door's too (it belongs to the transport): the service hands it the app
 * and the key's prefix (struct service_caller).
 *
 * A take's or a batch's record lives in the door's storage (the request's
 * or the call's, so a warmed-up call allocates nothing here) until its
 * callback has run.
 */
#ifndef PERMITD_SERVICE_H
#define PERMITD_SERVICE_H

#include <stddef.h>
#include <stdint.h>

#include "core/loop.h"
#include "core/pool.h"
#include "core/status.h"
#include "decisions/appkeys.h"
#include "decisions/limiter.h"
#include "decisions/limiter_reserve.h"
#include "decisions/stats.h"
#include "permit/v1/ratelimit.pb-c.h"
#include "stores/policy.h"

struct service;
struct service_worker;
struct hotkeys;
struct hotkeys_worker;

enum service_kind { SERVICE_ACQUIRE, SERVICE_PEEK, SERVICE_RELEASE, SERVICE_RENEW };

/* Returns a new service in *out (free with service_free()); limiter and
 * stats (NULL: nothing counted) must outlive it. Keys and hot keys are set
 * before the listeners start. */
int service_new(struct limiter *limiter, struct stats *stats, struct service **out,
                struct permitd_error *err);
void service_free(struct service *s);

/* The API keys every call's key is checked against (NULL: not checked). */
void service_set_appkeys(struct service *s, struct appkeys *keys);

/* Where decided takes' keys are counted (NULL: not counted). */
void service_set_hotkeys(struct service *s, struct hotkeys *hot);

/* Where decisions are counted per policy and app for the traffic history
 * (decisions/traffic.h, issue 39); NULL (the default): nowhere. Call
 * before the first take. */
struct traffic;
void service_set_traffic(struct service *s, struct traffic *traffic);

/* A worker's part, one per listener worker thread (the listeners'
 * worker_open and worker_close): its limiter queue on loop and its hot-key
 * sketches. Free with service_worker_close() (NULL is a no-op). */
int service_worker_open(struct service *s, struct loop *loop, struct service_worker **out,
                        struct permitd_error *err);
void service_worker_close(struct service_worker *w);

/* The limiter queue of w (for a door that queues what is not a take). */
struct limiter_queue *service_worker_queue(struct service_worker *w);

/* Who calls: authorization is what the caller sent as its credentials
 * (the Authorization header or metadata; NULL: none); the rest is filled
 * by service_authorize(), for the access log and the decision. */
struct service_caller {
    const char *authorization;
    char app[POLICY_NAME_MAX + 1];          /* the key's app; "" when keys are off */
    char key_prefix[APPKEYS_PREFIX_LEN + 1];   /* the key's prefix, never the secret */
};

/* Checks the caller's API key for app ("" = the key's). PERMITD_OK with
 * c->app the app to decide for ("" when keys are not checked: the
 * request's own app stands), or the refusal (unauthenticated,
 * permission_denied) with c->app the key's app when the key is good. */
int service_authorize(struct service *s, struct service_caller *c, const char *app,
                      struct permitd_error *err);

/* Validates one take as the limiter would decide it (UTF-8 of every
 * string, then limiter_check() or, for Release and Renew,
 * limiter_check_lease()). An Acquire's refusal is counted as an error of
 * its policy. prefix: "" or "requests[3]." for where the strings sit in
 * the request, as the UTF-8 error names them. */
int service_check(struct service *s, enum service_kind kind, const struct limiter_request *lr,
                  const char *prefix, struct permitd_error *err);

/* Called once when a take is decided, on the worker's loop, after it has
 * been counted: rc PERMITD_OK with r, or the error. */
typedef void (*service_take_fn)(void *ud, int rc, const struct limiter_result *r,
                                const struct permitd_error *err);

/* One take waiting for its decision: the door's storage, untouched by the
 * door until done has run. Its strings are copies. */
struct service_take {
    struct service *s;
    struct hotkeys_worker *hot;
    enum service_kind kind;
    struct limiter_request lr;
    char bucket[POLICY_NAME_MAX + 1], app[POLICY_NAME_MAX + 1], key[POLICY_KEY_MAX + 1];
    char request_id[LIMITER_REQUEST_ID_MAX + 1], lease_id[LIMITER_LEASE_ID_LEN + 1];
    int64_t deadline_us, t0;
    service_take_fn done;
    void *ud;
};

/* A single take from a door, checked whole: the strings' UTF-8, the
 * caller's key (c; its app stands in for lr's when lr's is empty), the
 * request; then t holds it, ready for service_queue() with the deadline
 * (microseconds, clock_now_us(); INT64_MAX: none) and done. PERMITD_OK,
 * or err says why (an Acquire's invalid request is counted) and t is not
 * to be queued. lr's strings need only last the call: t keeps copies. */
int service_decide(struct service_worker *w, struct service_take *t, enum service_kind kind,
                   struct service_caller *c, const struct limiter_request *lr,
                   int64_t deadline_us, service_take_fn done, void *ud,
                   struct permitd_error *err);

/* The same for a door that has authorized its caller itself (a gateway
 * acting for many requests, with an app of its own): lr's app is used as
 * it stands. */
int service_take(struct service_worker *w, struct service_take *t, enum service_kind kind,
                 const struct limiter_request *lr, int64_t deadline_us, service_take_fn done,
                 void *ud, struct permitd_error *err);

/* Queues t (filled by service_decide() or service_take()) on w: done(ud,
 * ...) runs exactly once, on the worker's loop, after the answer has been
 * counted: later, or at once (the deny cache's answer), so a door that
 * defers its reply does so before. */
void service_queue(struct service_worker *w, struct service_take *t);

/* How a batch is decided (limiter_acquire_batch_queued()). EACH: every
 * item on its own; ALL: all_or_nothing; ALL_OR_EACH: all_or_nothing when
 * the items can be decided in one script and Redis answers, else each on
 * its own with its policy's failure_mode (forward-auth's several rules). */
enum service_batch_mode { SERVICE_BATCH_EACH, SERVICE_BATCH_ALL, SERVICE_BATCH_ALL_OR_EACH };

/* Reserve, Commit and Cancel (issue 38: decisions/limiter_reserve.h), for
 * every door: the strings' UTF-8 and the caller's key (c; its app stands
 * in for the request's when that is empty) checked on the worker's
 * thread, then the limiter's blocking round trips (a few script calls,
 * each its own) run by the reservations pool (core/pool.h,
 * service_start_reservations()), never on the worker's loop: the door
 * defers its request and done answers it on the worker's loop thread.
 * The call's own copy of what it needs is made here, so the request may
 * be freed once these return. */
enum service_rsv_kind { SERVICE_RESERVE, SERVICE_COMMIT, SERVICE_CANCEL };

/* What a reservation call answered (the door's reply is made from it;
 * it lasts until done returns). */
struct service_reservation {
    enum service_rsv_kind kind;
    const struct limiter_reserve_item *items;   /* Reserve: the n items asked */
    size_t n;
    struct limiter_reserve_answer reserved;     /* Reserve */
    struct limiter_reserve_settled settled;     /* Commit, Cancel */
};

/* Called once on the worker's loop thread: rc PERMITD_OK and r, or the
 * error (deadline_exceeded when the call's deadline passed while it
 * waited for a pool thread: then nothing was asked of Redis). */
typedef void (*service_reservation_fn)(void *ud, int rc, const struct service_reservation *r,
                                       const struct permitd_error *err);

/* Starts the reservations pool: `workers` threads, each with its own Redis
 * connections (stores/redis.c keeps one per thread), and room for `queue`
 * calls waiting for one; more at once are answered resource_exhausted.
 * Before the listeners start. */
int service_start_reservations(struct service *s, int workers, int queue,
                               struct permitd_error *err);

/* What /metrics shows of the reservations pool: its size, its load now
 * (taken under the pool's lock, one consistent reading) and the calls it
 * refused because every thread was busy and --reserve-queue calls waited
 * (Reserve, Commit, Cancel and all_or_nothing batches across slots alike;
 * counted without a lock). */
struct service_rsv_load {
    unsigned workers, queue;        /* --reserve-workers, --reserve-queue */
    unsigned busy;                  /* calls running on a pool thread now */
    unsigned waiting;               /* calls queued for a thread now */
    uint64_t refused;               /* since start: answered resource_exhausted */
};

/* s's reservations pool now, from any thread. 0 and *out; -1 when the pool
 * is not started (*out zeroed). */
int service_reservations_load(struct service *s, struct service_rsv_load *out);

/* PERMITD_OK: queued, done(ud, ...) will be called on w's loop thread
 * (the door defers its request until then); else the error to answer now
 * (the request refused, or resource_exhausted: the pool is full). */
int service_reserve(struct service_worker *w, struct service_caller *c,
                    const Permit__V1__ReserveRequest *rq, int64_t deadline_us,
                    service_reservation_fn done, void *ud, struct permitd_error *err);
int service_commit(struct service_worker *w, struct service_caller *c,
                   const Permit__V1__CommitRequest *rq, int64_t deadline_us,
                   service_reservation_fn done, void *ud, struct permitd_error *err);
int service_cancel(struct service_worker *w, struct service_caller *c,
                   const Permit__V1__CancelRequest *rq, int64_t deadline_us,
                   service_reservation_fn done, void *ud, struct permitd_error *err);

/* Called once when a batch is decided, after every item has been counted:
 * rc PERMITD_OK with the items' res and errs, or the batch's error. */
typedef void (*service_batch_fn)(void *ud, int rc, const struct permitd_error *err);

/* A batch of Acquires waiting for its decisions, in the door's storage:
 * the door fills n, reqs (strings lasting until done has run), res and
 * errs (room for n each). */
struct service_batch {
    struct service *s;
    struct service_worker *w;
    size_t n;
    struct limiter_request *reqs;
    struct limiter_result *res;
    struct permitd_error *errs;
    enum service_batch_mode mode;
    int64_t deadline_us, t0;
    int observe;                    /* 1: its latency observed as one decision's */
    service_batch_fn done;
    void *ud;
    /* An all_or_nothing batch across slots: held slot by slot on the
     * reservations pool (service.c), then finished on the worker's loop. */
    struct pool_job pj;
    int held_rc;
    struct permitd_error held_err;
};

/* An AcquireBatch's caller and its n decoded items (n <= LIMITER_BATCH_MAX,
 * else invalid_argument), before the door copies them: each item's UTF-8
 * (named requests[i].field), c's key, then, when keys are enforced, each
 * item's app ("" or the key's). PERMITD_OK or the refusal. */
int service_batch_authorize(struct service *s, struct service_caller *c,
                            const Permit__V1__AcquireRequest *const *items, size_t n,
                            struct permitd_error *err);

/* Queues b (filled as above) on w. done(ud, ...) runs exactly once, on
 * the worker's loop (maybe at once), after each item's decision or error
 * has been counted (metrics, fleet, hot keys); observe: 1 to count its
 * latency as one decision's (a gateway's request). */
void service_batch(struct service_worker *w, struct service_batch *b, enum service_batch_mode mode,
                   int64_t deadline_us, int observe, service_batch_fn done, void *ud);

#endif
