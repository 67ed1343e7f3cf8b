/*
 * health.c - what operators read: /readyz and /metrics.
 *
 * /readyz answers 200 only when this instance can do its whole job: Redis
 * answers, and (with a policy store) the last MySQL sync succeeded. Its
 * plain-text body says what is wrong, one line per dependency, so an
 * operator reading it needs no log:
 *   redis: ok
 *   mysql sync: failing (3 failures; last success 12 s ago): mysql at ...
 *   api listener: full: 4096 of 4096 connections open (0 idle keep-alive, ...)
 * and, below it, the rows the sync skips (they do not make it 503).
 */
#define _GNU_SOURCE     /* open_memstream */
#include <inttypes.h>
#include <stdio.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "control/envoysvc.h"
#include "control/fleet.h"
#include "control/follow.h"
#include "control/gatewaysync.h"
#include "control/health.h"
#include "control/settle.h"
#include "control/trafficlog.h"
#include "decisions/traffic.h"
#include "decisions/limiter_reserve.h"
#include "decisions/service.h"

#define READYZ_REDIS_DEADLINE_MS 250
#define READYZ_SKIPPED_SHOWN 10     /* skipped rows named one by one; the rest counted */

/* Appends to a body of cap bytes at *n; text past the end is cut, and *n
 * never passes cap - 1 (the terminating byte stays). */
static void __attribute__((format(printf, 4, 5)))
put(char *body, size_t cap, size_t *n, const char *fmt, ...)
{
    va_list ap;
    int w;

    if (*n + 1 >= cap)
        return;
    va_start(ap, fmt);
    w = vsnprintf(body + *n, cap - *n, fmt, ap);
    va_end(ap);
    if (w > 0)
        *n = *n + (size_t)w < cap ? *n + (size_t)w : cap - 1;
}

/* The rows the sync skips, after the "mysql sync" line, within body's cap:
 *   mysql sync: 2 rows skipped (not in Redis; fix them in MySQL):
 *     an app of policy pay (id 3): app: "pay,admin" is not a valid name: ...
 * They leave /readyz at 200: a bad row is in the MySQL every instance
 * reads, so a 503 would take all of them out of the load balancer at once
 * for one row, while every other policy is served as it should be. */
static void readyz_skipped(const struct health *h, char *body, size_t cap, size_t *n)
{
    char **rows = NULL;
    size_t nrows = 0;

    if (h->sync == NULL || sync_skipped(h->sync, &rows, &nrows) != PERMITD_OK || nrows == 0)
        return;
    put(body, cap, n, "mysql sync: %zu row%s skipped (not in Redis; fix %s in MySQL):\n",
        nrows, nrows == 1 ? "" : "s", nrows == 1 ? "it" : "them");
    for (size_t i = 0; i < nrows && i < READYZ_SKIPPED_SHOWN; i++)
        put(body, cap, n, "  %s\n", rows[i]);
    if (nrows > READYZ_SKIPPED_SHOWN)
        put(body, cap, n, "  ... and %zu more (see the log)\n", nrows - READYZ_SKIPPED_SHOWN);
    sync_skipped_free(rows, nrows);
}

/* /readyz's lines for the masters of a cluster, from redis_ping_each(). */
struct readyz_masters {
    char *body;
    size_t cap, *n;
    int count;
};

static void readyz_master(void *ud, const char *where, int rc, const char *error)
{
    struct readyz_masters *m = ud;

    m->count++;
    if (rc == PERMITD_OK)
        put(m->body, m->cap, m->n, "  master %s: ok\n", where);
    else
        put(m->body, m->cap, m->n, "  master %s: %s\n", where, error);
}

void health_readyz(const struct health *h, struct http_response *resp)
{
    struct permitd_error err = {0, ""};
    size_t cap = 8192, n = 0;
    char *body = malloc(cap);
    int ready = 1;

    if (body == NULL) {
        resp->status = 500;
        return;
    }
    if (redis_cluster_enabled(h->redis)) {
        /* One line per master: which one is down is what an operator needs. */
        struct readyz_masters m = {body, cap, &n, 0};
        put(body, cap, &n, "redis cluster:\n");
        if (redis_ping_each(h->redis, clock_now_us() + READYZ_REDIS_DEADLINE_MS * 1000,
                            readyz_master, &m) != PERMITD_OK) {
            ready = 0;
            if (m.count == 0)
                put(body, cap, &n, "  no slot map yet: no seed node answered\n");
        }
    } else if (redis_ping(h->redis, clock_now_us() + READYZ_REDIS_DEADLINE_MS * 1000, &err) == PERMITD_OK) {
        put(body, cap, &n, "redis: ok\n");
    } else {
        ready = 0;
        put(body, cap, &n, "redis: %s\n", err.message);
    }
    if (h->sync == NULL) {
        put(body, cap, &n, "mysql sync: off (no --mysql-url)\n");
    } else {
        struct sync_status st;
        int64_t now = clock_now_us();

        sync_get_status(h->sync, &st);
        if (!st.ever_succeeded && st.passes == 0) {
            ready = 0;
            put(body, cap, &n, "mysql sync: first pass not done yet\n");
        } else if (st.failing) {
            ready = 0;
            put(body, cap, &n,
                "mysql sync: failing (%" PRIu64 " failures; last success %s%" PRId64 " s ago): %s\n",
                st.failures, st.ever_succeeded ? "" : "never, ",
                st.ever_succeeded ? (now - st.last_success_us) / 1000000 : 0, st.last_error);
        } else {
            put(body, cap, &n, "mysql sync: ok, %zu policies, last pass %" PRId64 " ms ago\n",
                st.last.policies, (now - st.last_success_us) / 1000);
        }
        readyz_skipped(h, body, cap, &n);
    }
    /* Issue 40: a gateway rule naming no policy answers not_found (a 500
     * at a fail-closed gateway) for what it matches. Said here, not a 503:
     * the rule is in the MySQL every instance reads, so a 503 would take
     * all of them out of the load balancer for one rule while the others
     * and the API are served. */
    if (h->gwsync != NULL) {
        char broken[1024];
        int nb = gatewaysync_broken(h->gwsync, broken, sizeof(broken));
        if (nb > 0)
            put(body, cap, &n, "gateway rules: %d broken (the policy does not exist; requests "
                "they match answer not_found): %s\n", nb, broken);
    }
    /* An Envoy descriptor naming no policy limits nothing (its descriptors
     * are answered OK): said here for the same reason, as a gateway rule. */
    if (h->envoysvc != NULL) {
        char broken[1024];
        int nb = envoysvc_broken(h->envoysvc, broken, sizeof(broken));
        if (nb > 0)
            put(body, cap, &n, "envoy descriptors: %d broken (the policy does not exist; the "
                "descriptors they match are answered OK, not limited): %s\n", nb, broken);
    }
    /* Issue 21: an instance that trusts the caller's app says so on every
     * look; it is not a reason to take it out of a load balancer. */
    if (h->appkeys != NULL && !appkeys_enforced(h->appkeys))
        put(body, cap, &n, "app auth: OFF (--app-auth off): the API trusts the app each request "
                           "names; only behind a gateway that authenticates apps\n");
    else if (h->appkeys != NULL)
        put(body, cap, &n, "app auth: keys, %zu in memory\n", appkeys_count(h->appkeys));
    /* The API listener's connection slots: when all are taken, new callers
     * wait in the kernel's queue until one is freed (idle keep-alive ones
     * are shed first, server/transport/http.c), so this instance is not ready. */
    if (h->listeners[0] != NULL) {
        struct http_server_load l;

        http_server_load(h->listeners[0], &l);
        if (l.open >= l.limit)
            ready = 0;
        put(body, cap, &n,
            "api listener: %s%u of %u connections open (%u idle keep-alive, "
            "%u awaiting a request head)%s\n",
            l.open >= l.limit ? "full: " : "ok, ", l.open, l.limit, l.idle, l.head,
            l.open >= l.limit ? "; new callers wait" : "");
    }
    resp->status = ready ? 200 : 503;
    resp->content_type = "text/plain; charset=utf-8";
    resp->body = body;
    resp->body_len = n;
    resp->body_owned = 1;
}

/*
 * /metrics, from a table as the settings are (core/config.c): one row per
 * metric family, with its name, type and help, where its figures come
 * from and which of them are its samples. health_metrics() reads every
 * source once into a struct metrics_snap, then writes the rows in order,
 * so a new figure is a field and a row, and no family's text is written
 * twice. Labels are bounded: fixed words, the listeners, the Redis nodes,
 * the key refusal reasons and the Redis TLS handshake failure reasons; request keys never become labels (the
 * policies' families are stats.c's, written first).
 */

/* Where a family's figures come from; a family is written only when its
 * source is there. The ones after M_EACH are written once per item (a
 * listener, a node, a reason), the item's label first on every sample,
 * their HELP and TYPE once whatever the number of items. */
enum metric_source {
    M_LIMITER,          /* the limiter and Redis: always there */
    M_CLUSTER,          /* Redis Cluster only */
    M_APPKEYS,
    M_FLEET,
    M_SYNC,
    M_SETTLE,
    M_VERIFIER,
    M_GRPC,
    M_SENTINEL,         /* redis+sentinel:// only */
    M_TRAFFIC,          /* the traffic history's writer (MySQL, --traffic-flush-ms) */
    M_RESERVE,          /* the reservations pool (--reserve-workers, --reserve-queue) */
    M_FOLLOW,           /* the change-notice listener */
    M_EACH,
    M_LISTENERS = M_EACH,   /* listener="api", "admin": struct listener_snap */
    M_NODES,            /* node="host:port", in a cluster: struct node_snap */
    M_REASONS,          /* reason="missing", ...: struct reason_snap */
    M_TLS_FAILURES,     /* reason="...", over rediss:// once one failed: struct reason_snap */
    M_SCRIPTS,          /* script="bucket", ...: the scripts of this build, struct reason_snap */
};

enum metric_format {
    M_INT,              /* uint64_t, as an integer */
    M_SECONDS3,         /* double, %.3f */
    M_SECONDS6,         /* double, %.6f */
};

#define METRIC_SAMPLES_MAX 7

struct metric_sample {
    const char *labels;         /* NULL: none */
    size_t offset;              /* into the source's struct */
};

struct metric {
    const char *name;
    const char *type;
    const char *help;
    enum metric_source source;
    enum metric_format format;
    size_t nsamples;
    struct metric_sample samples[METRIC_SAMPLES_MAX];
};

/* What the rows read, taken once per scrape. */
struct metrics_snap {
    uint64_t open_passes, stale_retries;
    uint64_t rsv_reserved, rsv_committed, rsv_expired, rsv_refunded, rsv_debt;
    uint64_t rsv_queue_depth, rsv_queue_capacity, rsv_workers_busy, rsv_refused;
    uint64_t notices, subscriptions;
    uint64_t deny_hits, deny_misses, deny_evictions;
    struct limiter_lease_counters lease;
    uint64_t redis_up, redis_errors, redis_connects;
    uint64_t moved, ask, split_calls, slot_refreshes;
    uint64_t sentinel_changes;
    uint64_t app_auth, app_keys;
    uint64_t fleet_ok, fleet_failed, fleet_commands, fleet_bytes;
    uint64_t traffic_ok, traffic_failed, traffic_rows, traffic_pruned, traffic_dropped;
    uint64_t sync_failures, policies, sync_skipped, sync_passes, sync_policy_failures;
    double sync_lag_s, sync_pass_s, sync_last_success_ts;
    uint64_t settle_pending, settle_running, settle_keys, settles_done, settles_failed;
    double settle_s, settle_last_done_ts;
    uint64_t login_running, login_waiting, login_checked, login_refused;
    uint64_t grpc_open, grpc_limit, grpc_per_ip_limit, grpc_refused_full, grpc_refused_per_ip,
             grpc_shed_idle, grpc_shed_stalled;
};

struct listener_snap {
    uint64_t connections, limit, idle;
    uint64_t header_timeouts, shed_idle, shed_head, refused, refused_per_ip;
    uint64_t request_timeouts, shed_body;
};

struct node_snap {
    uint64_t connects, errors;
};

struct reason_snap {
    uint64_t refused;               /* or failed, for M_TLS_FAILURES; calls, M_SCRIPTS */
};

#define SNAP(field) {NULL, offsetof(struct metrics_snap, field)}
#define SNAPL(labels, field) {labels, offsetof(struct metrics_snap, field)}
#define LIS(labels, field) {labels, offsetof(struct listener_snap, field)}
#define ONE(src, field) {NULL, offsetof(src, field)}
#define ROW(name, type, help, source, format, ...) \
    {name, type, help, source, format, \
     sizeof((struct metric_sample[]){__VA_ARGS__}) / sizeof(struct metric_sample), {__VA_ARGS__}}
#define COUNTER(name, help, source, ...) ROW(name, "counter", help, source, M_INT, __VA_ARGS__)
#define GAUGE(name, help, source, ...) ROW(name, "gauge", help, source, M_INT, __VA_ARGS__)

static const struct metric metrics[] = {
    COUNTER("permitd_failure_mode_open_passes_total",
            "Acquires let through by failure_mode open while Redis could not answer.",
            M_LIMITER, SNAP(open_passes)),
    COUNTER("permitd_policy_stale_retries_total",
            "Decisions asked again after the bucket was found written under a newer policy "
            "version than this instance's copy (the policy reloaded first).",
            M_LIMITER, SNAP(stale_retries)),
    COUNTER("permitd_reservations_total",
            "Reservations made (Reserve held every item).", M_LIMITER, SNAP(rsv_reserved)),
    COUNTER("permitd_reservations_committed_total",
            "Reservations settled by Commit.", M_LIMITER, SNAP(rsv_committed)),
    COUNTER("permitd_reservations_expired_total",
            "Reservations settled at their expiry (kept or refunded as their policy says).",
            M_LIMITER, SNAP(rsv_expired)),
    COUNTER("permitd_reservation_permits_refunded_total",
            "Permits given back by commits below the estimate, cancels and expiries.",
            M_LIMITER, SNAP(rsv_refunded)),
    COUNTER("permitd_reservation_permits_debt_total",
            "Permits charged beyond reservations' estimates (into debt, down to the floor).",
            M_LIMITER, SNAP(rsv_debt)),
    /* The pool Reserve, Commit, Cancel and all_or_nothing batches across
     * slots run on (decisions/service.c): a pool too small shows here
     * before it shows only as resource_exhausted at the callers. */
    GAUGE("permitd_reserve_queue_depth",
          "Reservation calls waiting for a --reserve-workers thread now.",
          M_RESERVE, SNAP(rsv_queue_depth)),
    GAUGE("permitd_reserve_queue_capacity",
          "Reservation calls that may wait for a thread (--reserve-queue); one more is refused.",
          M_RESERVE, SNAP(rsv_queue_capacity)),
    GAUGE("permitd_reserve_workers_busy",
          "Reservations threads running a call now (of --reserve-workers).",
          M_RESERVE, SNAP(rsv_workers_busy)),
    COUNTER("permitd_reserve_refused_total",
            "Reservation calls (Reserve, Commit, Cancel, all_or_nothing batches across slots) "
            "answered resource_exhausted because every thread was busy and --reserve-queue "
            "calls waited.", M_RESERVE, SNAP(rsv_refused)),
    COUNTER("permitd_deny_cache_hits_total",
            "Acquires denied from a worker's deny cache, without asking Redis (--deny-cache).",
            M_LIMITER, SNAP(deny_hits)),
    COUNTER("permitd_deny_cache_misses_total",
            "Acquires the deny cache could have answered but held no denial in force for: "
            "asked of Redis.",
            M_LIMITER, SNAP(deny_misses)),
    COUNTER("permitd_deny_cache_evictions_total",
            "Denials still in force pushed out of a full deny cache by newer ones.",
            M_LIMITER, SNAP(deny_evictions)),
    GAUGE("permitd_redis_up",
          "1 when Redis (every master of a cluster) answered a PING sent at this scrape within "
          "250 ms, as /readyz asks; 0 when it did not.",
          M_LIMITER, SNAP(redis_up)),
    COUNTER("permitd_local_lease_grants_total",
            "Acquires granted from a worker's local lease of a hot bucket, without Redis.",
            M_LIMITER, SNAP(lease.grants)),
    COUNTER("permitd_local_leases_taken_total",
            "Local leases taken from hot buckets (one script call each).",
            M_LIMITER, SNAP(lease.takes)),
    COUNTER("permitd_local_leases_refused_total",
            "Local lease takes Redis refused (the bucket held too few): the Acquire was then "
            "decided as itself.", M_LIMITER, SNAP(lease.refused)),
    COUNTER("permitd_local_lease_returns_total",
            "Give-backs of ended local leases Redis answered.",
            M_LIMITER, SNAP(lease.returns)),
    COUNTER("permitd_local_lease_returned_permits_total",
            "Whole permits local leases gave back to their buckets.",
            M_LIMITER, SNAP(lease.returned)),
    COUNTER("permitd_local_lease_late_permits_total",
            "Unused permits of local leases whose give-back reached Redis after the lease's "
            "key had expired (--local-lease-ms + 50 ms): refused, spent.",
            M_LIMITER, SNAP(lease.late)),
    COUNTER("permitd_local_leases_ended_early_total",
            "Local leases ended before their time by a policy edit, a reset or an override "
            "change.", M_LIMITER, SNAP(lease.ended_early)),
    GAUGE("permitd_local_leases_held",
          "Local leases held now, over every worker (one that ended counts until Redis has "
          "answered its give-back).",
          M_LIMITER, SNAP(lease.held)),
    COUNTER("permitd_redis_errors_total",
            "Redis calls that failed (unreachable, timeouts, broken connections).",
            M_LIMITER, SNAP(redis_errors)),
    COUNTER("permitd_redis_connects_total",
            "Redis connections made (first ones and reconnects).",
            M_LIMITER, SNAP(redis_connects)),
    COUNTER("permitd_redis_script_calls_total",
            "Script calls (EVALSHA) this instance sent to Redis, by script: its own share of "
            "Redis's work, however many instances share that Redis.",
            M_SCRIPTS, ONE(struct reason_snap, refused)),
    COUNTER("permitd_redis_tls_handshake_failures_total",
            "TLS handshakes with Redis that failed, by reason (rediss:// only).",
            M_TLS_FAILURES, ONE(struct reason_snap, refused)),
    COUNTER("permitd_redis_sentinel_master_changes_total",
            "Redis Sentinel failovers followed: the master changed.",
            M_SENTINEL, SNAP(sentinel_changes)),
    COUNTER("permitd_redis_redirects_total", "Redis Cluster redirects followed.",
            M_CLUSTER, SNAPL("kind=\"moved\"", moved), SNAPL("kind=\"ask\"", ask)),
    COUNTER("permitd_redis_split_calls_total",
            "Script calls over several slots that met a redirect, their items sent again one "
            "call per slot.",
            M_CLUSTER, SNAP(split_calls)),
    COUNTER("permitd_redis_slot_map_refreshes_total", "Slot maps fetched.",
            M_CLUSTER, SNAP(slot_refreshes)),
    COUNTER("permitd_redis_node_connects_total", "Connections made, per node.",
            M_NODES, ONE(struct node_snap, connects)),
    COUNTER("permitd_redis_node_errors_total", "Failed calls, per node.",
            M_NODES, ONE(struct node_snap, errors)),
    COUNTER("permitd_unauthenticated_total",
            "API requests refused for their API key, by reason (app_mismatch: a good key for "
            "another app, answered permission_denied).",
            M_REASONS, ONE(struct reason_snap, refused)),
    GAUGE("permitd_app_auth",
          "1 when API keys are checked (--app-auth keys), 0 when the API trusts the app a "
          "request names.",
          M_APPKEYS, SNAP(app_auth)),
    GAUGE("permitd_app_keys", "API keys in memory (revoked ones too).",
          M_APPKEYS, SNAP(app_keys)),
    COUNTER("permitd_fleet_publishes_total",
            "Writes of this instance's counts and heartbeat into Redis (--fleet-publish-ms), by "
            "result.",
            M_FLEET, SNAPL("result=\"ok\"", fleet_ok), SNAPL("result=\"failed\"", fleet_failed)),
    COUNTER("permitd_fleet_commands_total", "Redis commands those writes sent.",
            M_FLEET, SNAP(fleet_commands)),
    COUNTER("permitd_fleet_bytes_total", "Bytes of those commands as sent (RESP).",
            M_FLEET, SNAP(fleet_bytes)),
    COUNTER("permitd_traffic_flushes_total",
            "Additions of this instance's decisions per policy and app to the traffic history "
            "in MySQL (--traffic-flush-ms), by result.",
            M_TRAFFIC, SNAPL("result=\"ok\"", traffic_ok),
            SNAPL("result=\"failed\"", traffic_failed)),
    COUNTER("permitd_traffic_rows_total", "Rows (policy, app, minute) those additions wrote.",
            M_TRAFFIC, SNAP(traffic_rows)),
    COUNTER("permitd_traffic_pruned_rows_total",
            "Traffic history rows this instance deleted past --traffic-history-days.",
            M_TRAFFIC, SNAP(traffic_pruned)),
    COUNTER("permitd_traffic_dropped_total",
            "Decisions left out of the traffic history: the (policy, app) table was full "
            "(--traffic-pairs) and had no place for the policy either.",
            M_TRAFFIC, SNAP(traffic_dropped)),
    COUNTER("permitd_change_notices_total",
            "Change notices (<prefix>changes: a policy written, deleted or reset by any "
            "instance) this instance read.",
            M_FOLLOW, SNAP(notices)),
    COUNTER("permitd_change_subscriptions_total",
            "Subscriptions to the change notices: 1 once this instance listens, one more after "
            "each lost connection (notices sent in between are lost; the next pass heals "
            "them).",
            M_FOLLOW, SNAP(subscriptions)),
    COUNTER("permitd_sync_failures_total", "MySQL -> Redis sync passes that failed.",
            M_SYNC, SNAP(sync_failures)),
    ROW("permitd_sync_lag_seconds", "gauge", "Time since the last successful sync pass.",
        M_SYNC, M_SECONDS3, SNAP(sync_lag_s)),
    ROW("permitd_sync_last_success_timestamp_seconds", "gauge",
        "When the last successful sync pass ended, in Unix seconds (0: none yet).",
        M_SYNC, M_SECONDS3, SNAP(sync_last_success_ts)),
    GAUGE("permitd_policies", "Policies in the last MySQL snapshot.",
          M_SYNC, SNAP(policies)),
    GAUGE("permitd_sync_skipped_rows",
          "MySQL rows the last sync pass skipped because a name fails validation (listed by "
          "/readyz).",
          M_SYNC, SNAP(sync_skipped)),
    COUNTER("permitd_sync_passes_total", "MySQL -> Redis sync passes, failed or not.",
            M_SYNC, SNAP(sync_passes)),
    COUNTER("permitd_sync_policy_failures_total",
            "Policies a sync pass could not write to Redis (logged; offered again at the next "
            "pass).",
            M_SYNC, SNAP(sync_policy_failures)),
    ROW("permitd_sync_pass_seconds", "gauge", "How long the last sync pass took.",
        M_SYNC, M_SECONDS6, SNAP(sync_pass_s)),
    GAUGE("permitd_settle_pending",
          "Policies whose buckets wait for a settle after a limit edit (the set <prefix>settle, "
          "as last read).",
          M_SETTLE, SNAP(settle_pending)),
    GAUGE("permitd_settle_running", "Policies this instance is settling now.",
          M_SETTLE, SNAP(settle_running)),
    COUNTER("permitd_settle_keys_total", "Bucket keys this instance settled.",
            M_SETTLE, SNAP(settle_keys)),
    ROW("permitd_settle_seconds_total", "counter", "Time this instance spent settling.",
        M_SETTLE, M_SECONDS3, SNAP(settle_s)),
    ROW("permitd_settle_last_done_timestamp_seconds", "gauge",
        "When this instance last finished a settle, in Unix seconds (0: none since it started).",
        M_SETTLE, M_SECONDS3, SNAP(settle_last_done_ts)),
    COUNTER("permitd_settles_total",
            "Settles this instance ran, by result (a failed one is tried again at the next sync "
            "pass).",
            M_SETTLE, SNAPL("result=\"done\"", settles_done),
            SNAPL("result=\"failed\"", settles_failed)),
    GAUGE("permitd_login_checks",
          "Admin login password checks (argon2id) running or waiting for a --login-workers "
          "thread.",
          M_VERIFIER, SNAPL("state=\"running\"", login_running),
          SNAPL("state=\"waiting\"", login_waiting)),
    COUNTER("permitd_login_checks_total",
            "Admin login password checks: done, or refused (resource_exhausted) because "
            "--login-queue was full.",
            M_VERIFIER, SNAPL("result=\"checked\"", login_checked),
            SNAPL("result=\"refused\"", login_refused)),
    /* Saturation and what the connection deadlines closed (server/transport/http.c). */
    GAUGE("permitd_http_connections", "HTTP connections open, by listener.",
          M_LISTENERS, LIS(NULL, connections)),
    GAUGE("permitd_http_connections_limit", "Most HTTP connections open at once, by listener.",
          M_LISTENERS, LIS(NULL, limit)),
    GAUGE("permitd_http_connections_idle",
          "Keep-alive HTTP connections between requests, by listener.",
          M_LISTENERS, LIS(NULL, idle)),
    COUNTER("permitd_http_connections_closed_total",
            "HTTP connections closed by permitd: header_timeout (request head not whole in "
            "--header-timeout), shed_idle / shed_head (to make room when full), refused (bad "
            "framing or head over --max-header-bytes), per_ip (at accept: the address had "
            "--max-connections-per-ip open), shed_body (awaiting its body, to make room when "
            "full).",
            M_LISTENERS, LIS("reason=\"header_timeout\"", header_timeouts),
            LIS("reason=\"shed_idle\"", shed_idle), LIS("reason=\"shed_head\"", shed_head),
            LIS("reason=\"refused\"", refused), LIS("reason=\"per_ip\"", refused_per_ip),
            LIS("reason=\"shed_body\"", shed_body)),
    COUNTER("permitd_http_requests_timed_out_total",
            "HTTP connections closed because their request (line, headers and body) was not "
            "whole in --request-timeout, by listener.",
            M_LISTENERS, LIS(NULL, request_timeouts)),
    /* The gRPC listener's (server/transport/grpc.c), when there is one. */
    GAUGE("permitd_grpc_connections", "gRPC connections open, by listener.",
          M_GRPC, SNAPL("listener=\"grpc\"", grpc_open)),
    GAUGE("permitd_grpc_connections_limit",
          "Most gRPC connections open at once (--max-connections), by listener.",
          M_GRPC, SNAPL("listener=\"grpc\"", grpc_limit)),
    GAUGE("permitd_grpc_connections_per_ip_limit",
          "Most gRPC connections open at once from one client address "
          "(--max-connections-per-ip; 0: no limit), by listener.",
          M_GRPC, SNAPL("listener=\"grpc\"", grpc_per_ip_limit)),
    COUNTER("permitd_grpc_connections_refused_total",
            "gRPC connections closed at accept: full (--max-connections open), per_ip (the "
            "client's address had --max-connections-per-ip open).",
            M_GRPC, SNAPL("listener=\"grpc\",reason=\"full\"", grpc_refused_full),
            SNAPL("listener=\"grpc\",reason=\"per_ip\"", grpc_refused_per_ip)),
    COUNTER("permitd_grpc_connections_shed_total",
            "gRPC connections closed to make room when --max-connections were open: idle (no "
            "call), stalled (calls whose requests did not come).",
            M_GRPC, SNAPL("listener=\"grpc\",reason=\"idle\"", grpc_shed_idle),
            SNAPL("listener=\"grpc\",reason=\"stalled\"", grpc_shed_stalled)),
};

/* Reads every source of h into *m (the ones h lacks stay zero). */
static void snap_take(const struct health *h, struct metrics_snap *m)
{
    struct service_rsv_load rsv;

    memset(m, 0, sizeof(*m));
    /* The PING first: a connection it makes is in the counters read below. */
    m->redis_up = redis_ping(h->redis, clock_now_us() + READYZ_REDIS_DEADLINE_MS * 1000,
                             &(struct permitd_error){0, ""}) == PERMITD_OK;
    m->open_passes = limiter_open_passes(h->limiter);
    m->stale_retries = limiter_stale_retries(h->limiter);
    limiter_reserve_counters(h->limiter, &m->rsv_reserved, &m->rsv_committed, &m->rsv_expired,
                             &m->rsv_refunded, &m->rsv_debt);
    if (service_reservations_load(h->service, &rsv) == 0) {
        m->rsv_queue_depth = rsv.waiting;
        m->rsv_queue_capacity = rsv.queue;
        m->rsv_workers_busy = rsv.busy;
        m->rsv_refused = rsv.refused;
    }
    limiter_deny_cache_counters(h->limiter, &m->deny_hits, &m->deny_misses, &m->deny_evictions);
    limiter_lease_counters(h->limiter, &m->lease);
    redis_counters(h->redis, &m->redis_errors, &m->redis_connects);
    (void)redis_sentinel_counters(h->redis, &m->sentinel_changes);
    if (redis_cluster_enabled(h->redis)) {
        redis_cluster_counters(h->redis, &m->moved, &m->ask, &m->slot_refreshes);
        m->split_calls = limiter_split_calls(h->limiter);
    }
    if (h->appkeys != NULL) {
        m->app_auth = (uint64_t)appkeys_enforced(h->appkeys);
        m->app_keys = appkeys_count(h->appkeys);
    }
    if (h->follow != NULL) {
        unsigned long long notices, subscribed;

        follow_counters(h->follow, &notices, &subscribed);
        m->notices = notices;
        m->subscriptions = subscribed;
    }
    if (h->fleet != NULL)
        fleet_counters(h->fleet, &m->fleet_ok, &m->fleet_failed, &m->fleet_commands,
                       &m->fleet_bytes);
    if (h->trafficlog != NULL)
        trafficlog_counters(h->trafficlog, &m->traffic_ok, &m->traffic_failed, &m->traffic_rows,
                            &m->traffic_pruned);
    if (h->traffic != NULL)
        m->traffic_dropped = traffic_dropped(h->traffic);
    if (h->sync != NULL) {
        struct sync_status st;

        sync_get_status(h->sync, &st);
        m->sync_failures = st.failures;
        m->sync_lag_s = st.ever_succeeded
                        ? (double)(clock_now_us() - st.last_success_us) / 1e6 : -1.0;
        m->sync_last_success_ts = (double)st.last_success_unix_ms / 1e3;
        m->policies = st.last.policies;
        m->sync_skipped = st.skipped;
        m->sync_passes = st.passes;
        m->sync_policy_failures = st.policy_failures;
        m->sync_pass_s = (double)st.last_pass_us / 1e6;
        if (sync_settle(h->sync) != NULL) {
            struct settle_status ss;

            settle_get_status(sync_settle(h->sync), &ss);
            m->settle_pending = ss.pending;
            m->settle_running = ss.running;
            m->settle_keys = ss.keys_total;
            m->settle_s = ss.seconds_total;
            m->settles_done = ss.done_total;
            m->settles_failed = ss.failures_total;
            m->settle_last_done_ts = (double)ss.last_done_unix_ms / 1e3;
        }
    }
    if (h->verifier != NULL) {
        struct verifier_load v;

        verifier_load(h->verifier, &v);
        m->login_running = v.busy;
        m->login_waiting = v.waiting;
        m->login_checked = v.checked;
        m->login_refused = v.refused;
    }
    if (h->grpc != NULL) {
        struct grpc_server_load g;

        grpc_server_load(h->grpc, &g);
        m->grpc_open = g.open;
        m->grpc_limit = g.limit;
        m->grpc_per_ip_limit = g.per_ip_limit;
        m->grpc_refused_full = g.refused_full;
        m->grpc_refused_per_ip = g.refused_per_ip;
        m->grpc_shed_idle = g.shed_idle;
        m->grpc_shed_stalled = g.shed_stalled;
    }
}

/* Whether the family of source src is written at all. */
static int source_present(const struct health *h, enum metric_source src)
{
    switch (src) {
    case M_CLUSTER:
    case M_NODES:
        return redis_cluster_enabled(h->redis);
    case M_APPKEYS:
    case M_REASONS:
        return h->appkeys != NULL;
    case M_FLEET:
        return h->fleet != NULL;
    case M_TRAFFIC:
        return h->trafficlog != NULL;
    case M_FOLLOW:
        return h->follow != NULL;
    case M_RESERVE: {
        struct service_rsv_load r;
        return service_reservations_load(h->service, &r) == 0;
    }
    case M_SYNC:
        return h->sync != NULL;
    case M_SETTLE:
        return h->sync != NULL && sync_settle(h->sync) != NULL;
    case M_VERIFIER:
        return h->verifier != NULL;
    case M_TLS_FAILURES: {
        const char *reason;
        uint64_t n;
        return redis_tls_failure_info(h->redis, 0, &reason, &n) == 0;
    }
    case M_GRPC:
        return h->grpc != NULL;
    case M_SENTINEL: {
        uint64_t n;
        return redis_sentinel_counters(h->redis, &n);
    }
    default:
        return 1;
    }
}

/* The samples of row r from the struct at base, each label set led by
 * item (the listener, node or reason; NULL: none). */
static void write_samples(FILE *out, const struct metric *r, const char *item, const void *base)
{
    for (size_t i = 0; i < r->nsamples; i++) {
        const struct metric_sample *sm = &r->samples[i];
        const char *p = (const char *)base + sm->offset;

        fputs(r->name, out);
        if (item != NULL || sm->labels != NULL)
            fprintf(out, "{%s%s%s}", item ? item : "", item && sm->labels ? "," : "",
                    sm->labels ? sm->labels : "");
        if (r->format == M_INT) {
            uint64_t v;
            memcpy(&v, p, sizeof(v));
            fprintf(out, " %llu\n", (unsigned long long)v);
        } else {
            double v;
            memcpy(&v, p, sizeof(v));
            fprintf(out, r->format == M_SECONDS3 ? " %.3f\n" : " %.6f\n", v);
        }
    }
}

/* Row r once per item of its source: the listeners, nodes or reasons. */
static void write_each(FILE *out, const struct health *h, const struct metric *r)
{
    static const char *const listener[2] = {"api", "admin"};
    char item[400];

    if (r->source == M_LISTENERS) {
        for (int i = 0; i < 2; i++) {
            struct http_server_load l;
            struct listener_snap ls;

            if (h->listeners[i] == NULL)
                continue;
            http_server_load(h->listeners[i], &l);
            ls = (struct listener_snap){
                .connections = http_server_connections(h->listeners[i]),
                .limit = l.limit, .idle = l.idle,
                .header_timeouts = l.header_timeouts, .shed_idle = l.shed_idle,
                .shed_head = l.shed_head, .refused = l.refused,
                .refused_per_ip = l.refused_per_ip, .request_timeouts = l.request_timeouts,
                .shed_body = l.shed_body,
            };
            snprintf(item, sizeof(item), "listener=\"%s\"", listener[i]);
            write_samples(out, r, item, &ls);
        }
    } else if (r->source == M_NODES) {
        struct redis_node_info ni;

        for (int i = 0; redis_node_info(h->redis, i, &ni) == 0; i++) {
            struct node_snap ns = {ni.connects, ni.errors};

            snprintf(item, sizeof(item), "node=\"%s\"", ni.where);
            write_samples(out, r, item, &ns);
        }
    } else if (r->source == M_REASONS) {
        unsigned long long refused[APPKEYS_NREASONS];

        appkeys_counters(h->appkeys, refused);
        for (int k = APPKEYS_MISSING; k < APPKEYS_NREASONS; k++) {
            struct reason_snap rs = {refused[k]};

            snprintf(item, sizeof(item), "reason=\"%s\"",
                     appkeys_reason_name((enum appkeys_reason)k));
            write_samples(out, r, item, &rs);
        }
    } else if (r->source == M_TLS_FAILURES) {
        const char *reason;
        uint64_t n;

        for (int i = 0; redis_tls_failure_info(h->redis, i, &reason, &n) == 0; i++) {
            struct reason_snap rs = {n};

            snprintf(item, sizeof(item), "reason=\"%s\"", reason);
            write_samples(out, r, item, &rs);
        }
    } else if (r->source == M_SCRIPTS) {
        for (int s = 0; s < REDIS_SCRIPT_COUNT; s++) {
            const char *file = redis_script_name((enum redis_script)s);
            struct reason_snap rs = {redis_script_calls(h->redis, (enum redis_script)s)};

            if (!redis_script_present(h->redis, (enum redis_script)s))
                continue;
            snprintf(item, sizeof(item), "script=\"%.*s\"",
                     (int)(strcspn(file, ".")), file);
            write_samples(out, r, item, &rs);
        }
    }
}

/* Prometheus text format: the policies' families (stats.c), then every
 * row of metrics[] whose source h has. */
void health_metrics(const struct health *h, struct http_response *resp)
{
    struct metrics_snap m;
    char *body = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&body, &len);

    if (out == NULL) {
        resp->status = 500;
        return;
    }
    stats_prometheus(h->stats, out);
    snap_take(h, &m);
    for (size_t i = 0; i < sizeof(metrics) / sizeof(metrics[0]); i++) {
        const struct metric *r = &metrics[i];

        if (!source_present(h, r->source))
            continue;
        fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", r->name, r->help, r->name, r->type);
        if (r->source >= M_EACH)
            write_each(out, h, r);
        else
            write_samples(out, r, NULL, &m);
    }
    fclose(out);
    resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
    resp->body = body;
    resp->body_len = len;
    resp->body_owned = 1;
}
