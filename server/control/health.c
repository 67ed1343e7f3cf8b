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
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "control/fleet.h"
#include "control/health.h"
#include "control/settle.h"

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

/* Prometheus text format. Labels are bounded: policies (at most the ones
 * stats.c tracks, 256) and fixed words; request keys never become labels. */
void health_metrics(const struct health *h, struct http_response *resp)
{
    static const char *const names[2] = {"api", "admin"};
    char *body = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&body, &len);
    uint64_t errors, connects;

    if (out == NULL) {
        resp->status = 500;
        return;
    }
    stats_prometheus(h->stats, out);
    fprintf(out, "# HELP permitd_failure_mode_open_passes_total Acquires let through by "
                 "failure_mode open while Redis could not answer.\n"
                 "# TYPE permitd_failure_mode_open_passes_total counter\n"
                 "permitd_failure_mode_open_passes_total %llu\n",
            (unsigned long long)limiter_open_passes(h->limiter));
    fprintf(out, "# HELP permitd_policy_stale_retries_total Decisions asked again after the "
                 "bucket was found written under a newer policy version than this instance's "
                 "copy (the policy reloaded first).\n"
                 "# TYPE permitd_policy_stale_retries_total counter\n"
                 "permitd_policy_stale_retries_total %llu\n",
            (unsigned long long)limiter_stale_retries(h->limiter));
    {
        uint64_t hits, misses, evictions;

        limiter_deny_cache_counters(h->limiter, &hits, &misses, &evictions);
        fprintf(out, "# HELP permitd_deny_cache_hits_total Acquires denied from a worker's "
                     "deny cache, without asking Redis (--deny-cache).\n"
                     "# TYPE permitd_deny_cache_hits_total counter\n"
                     "permitd_deny_cache_hits_total %llu\n"
                     "# HELP permitd_deny_cache_misses_total Acquires the deny cache could "
                     "have answered but held no denial in force for: asked of Redis.\n"
                     "# TYPE permitd_deny_cache_misses_total counter\n"
                     "permitd_deny_cache_misses_total %llu\n"
                     "# HELP permitd_deny_cache_evictions_total Denials still in force pushed "
                     "out of a full deny cache by newer ones.\n"
                     "# TYPE permitd_deny_cache_evictions_total counter\n"
                     "permitd_deny_cache_evictions_total %llu\n",
                (unsigned long long)hits, (unsigned long long)misses,
                (unsigned long long)evictions);
    }
    redis_counters(h->redis, &errors, &connects);
    fprintf(out, "# HELP permitd_redis_errors_total Redis calls that failed (unreachable, "
                 "timeouts, broken connections).\n# TYPE permitd_redis_errors_total counter\n"
                 "permitd_redis_errors_total %llu\n"
                 "# HELP permitd_redis_connects_total Redis connections made (first ones and "
                 "reconnects).\n# TYPE permitd_redis_connects_total counter\n"
                 "permitd_redis_connects_total %llu\n",
            (unsigned long long)errors, (unsigned long long)connects);
    {
        const char *reason;
        uint64_t n;
        for (int i = 0; redis_tls_failure_info(h->redis, i, &reason, &n) == 0; i++)
            fprintf(out, "%spermitd_redis_tls_handshake_failures_total{reason=\"%s\"} %llu\n",
                    i ? "" : "# HELP permitd_redis_tls_handshake_failures_total TLS handshakes "
                             "with Redis that failed, by reason (rediss:// only).\n"
                             "# TYPE permitd_redis_tls_handshake_failures_total counter\n",
                    reason, (unsigned long long)n);
    }
    {
        uint64_t changes;
        if (redis_sentinel_counters(h->redis, &changes))
            fprintf(out, "# HELP permitd_redis_sentinel_master_changes_total Redis Sentinel "
                         "failovers followed: the master changed.\n"
                         "# TYPE permitd_redis_sentinel_master_changes_total counter\n"
                         "permitd_redis_sentinel_master_changes_total %llu\n",
                    (unsigned long long)changes);
    }
    if (redis_cluster_enabled(h->redis)) {
        struct redis_node_info ni;
        uint64_t moved, ask, refreshes;

        redis_cluster_counters(h->redis, &moved, &ask, &refreshes);
        fprintf(out, "# HELP permitd_redis_redirects_total Redis Cluster redirects followed.\n"
                     "# TYPE permitd_redis_redirects_total counter\n"
                     "permitd_redis_redirects_total{kind=\"moved\"} %llu\n"
                     "permitd_redis_redirects_total{kind=\"ask\"} %llu\n"
                     "# HELP permitd_redis_split_calls_total Script calls over several "
                     "slots that met a redirect, their items sent again one call per slot.\n"
                     "# TYPE permitd_redis_split_calls_total counter\n"
                     "permitd_redis_split_calls_total %llu\n"
                     "# HELP permitd_redis_slot_map_refreshes_total Slot maps fetched.\n"
                     "# TYPE permitd_redis_slot_map_refreshes_total counter\n"
                     "permitd_redis_slot_map_refreshes_total %llu\n"
                     "# HELP permitd_redis_node_connects_total Connections made, per node.\n"
                     "# TYPE permitd_redis_node_connects_total counter\n",
                (unsigned long long)moved, (unsigned long long)ask,
                (unsigned long long)limiter_split_calls(h->limiter),
                (unsigned long long)refreshes);
        for (int i = 0; redis_node_info(h->redis, i, &ni) == 0; i++)
            fprintf(out, "permitd_redis_node_connects_total{node=\"%s\"} %llu\n", ni.where,
                    (unsigned long long)ni.connects);
        fprintf(out, "# HELP permitd_redis_node_errors_total Failed calls, per node.\n"
                     "# TYPE permitd_redis_node_errors_total counter\n");
        for (int i = 0; redis_node_info(h->redis, i, &ni) == 0; i++)
            fprintf(out, "permitd_redis_node_errors_total{node=\"%s\"} %llu\n", ni.where,
                    (unsigned long long)ni.errors);
    }
    if (h->appkeys != NULL) {
        unsigned long long refused[APPKEYS_NREASONS];
        appkeys_counters(h->appkeys, refused);
        fprintf(out, "# HELP permitd_unauthenticated_total API requests refused for their API "
                     "key, by reason (app_mismatch: a good key for another app, answered "
                     "permission_denied).\n# TYPE permitd_unauthenticated_total counter\n");
        for (int r = APPKEYS_MISSING; r < APPKEYS_NREASONS; r++)
            fprintf(out, "permitd_unauthenticated_total{reason=\"%s\"} %llu\n",
                    appkeys_reason_name((enum appkeys_reason)r), refused[r]);
        fprintf(out, "# HELP permitd_app_auth 1 when API keys are checked (--app-auth keys), "
                     "0 when the API trusts the app a request names.\n"
                     "# TYPE permitd_app_auth gauge\npermitd_app_auth %d\n"
                     "# HELP permitd_app_keys API keys in memory (revoked ones too).\n"
                     "# TYPE permitd_app_keys gauge\npermitd_app_keys %zu\n",
                appkeys_enforced(h->appkeys), appkeys_count(h->appkeys));
    }
    if (h->fleet != NULL) {
        uint64_t ok, failed, commands, bytes;
        fleet_counters(h->fleet, &ok, &failed, &commands, &bytes);
        fprintf(out, "# HELP permitd_fleet_publishes_total Writes of this instance's counts and "
                     "heartbeat into Redis (--fleet-publish-ms), by result.\n"
                     "# TYPE permitd_fleet_publishes_total counter\n"
                     "permitd_fleet_publishes_total{result=\"ok\"} %llu\n"
                     "permitd_fleet_publishes_total{result=\"failed\"} %llu\n"
                     "# HELP permitd_fleet_commands_total Redis commands those writes sent.\n"
                     "# TYPE permitd_fleet_commands_total counter\n"
                     "permitd_fleet_commands_total %llu\n"
                     "# HELP permitd_fleet_bytes_total Bytes of those commands as sent (RESP).\n"
                     "# TYPE permitd_fleet_bytes_total counter\n"
                     "permitd_fleet_bytes_total %llu\n",
                (unsigned long long)ok, (unsigned long long)failed,
                (unsigned long long)commands, (unsigned long long)bytes);
    }
    if (h->sync != NULL) {
        struct sync_status st;
        sync_get_status(h->sync, &st);
        fprintf(out, "# HELP permitd_sync_failures_total MySQL -> Redis sync passes that failed.\n"
                     "# TYPE permitd_sync_failures_total counter\n"
                     "permitd_sync_failures_total %llu\n"
                     "# HELP permitd_sync_lag_seconds Time since the last successful sync pass.\n"
                     "# TYPE permitd_sync_lag_seconds gauge\n"
                     "permitd_sync_lag_seconds %.3f\n"
                     "# HELP permitd_policies Policies in the last MySQL snapshot.\n"
                     "# TYPE permitd_policies gauge\n"
                     "permitd_policies %zu\n",
                (unsigned long long)st.failures,
                st.ever_succeeded ? (double)(clock_now_us() - st.last_success_us) / 1e6 : -1.0,
                st.last.policies);
        fprintf(out, "# HELP permitd_sync_skipped_rows MySQL rows the last sync pass skipped "
                     "because a name fails validation (listed by /readyz).\n"
                     "# TYPE permitd_sync_skipped_rows gauge\n"
                     "permitd_sync_skipped_rows %zu\n", st.skipped);
        fprintf(out, "# HELP permitd_sync_passes_total MySQL -> Redis sync passes, failed or "
                     "not.\n# TYPE permitd_sync_passes_total counter\n"
                     "permitd_sync_passes_total %llu\n"
                     "# HELP permitd_sync_policy_failures_total Policies a sync pass could not "
                     "write to Redis (logged; offered again at the next pass).\n"
                     "# TYPE permitd_sync_policy_failures_total counter\n"
                     "permitd_sync_policy_failures_total %llu\n"
                     "# HELP permitd_sync_pass_seconds How long the last sync pass took.\n"
                     "# TYPE permitd_sync_pass_seconds gauge\n"
                     "permitd_sync_pass_seconds %.6f\n",
                (unsigned long long)st.passes, (unsigned long long)st.policy_failures,
                (double)st.last_pass_us / 1e6);
        if (sync_settle(h->sync) != NULL) {
            struct settle_status ss;
            settle_get_status(sync_settle(h->sync), &ss);
            fprintf(out, "# HELP permitd_settle_pending Policies whose buckets wait for a settle "
                         "after a limit edit (the set <prefix>settle, as last read).\n"
                         "# TYPE permitd_settle_pending gauge\n"
                         "permitd_settle_pending %zu\n"
                         "# HELP permitd_settle_running Policies this instance is settling now.\n"
                         "# TYPE permitd_settle_running gauge\n"
                         "permitd_settle_running %zu\n"
                         "# HELP permitd_settle_keys_total Bucket keys this instance settled.\n"
                         "# TYPE permitd_settle_keys_total counter\n"
                         "permitd_settle_keys_total %llu\n"
                         "# HELP permitd_settle_seconds_total Time this instance spent settling.\n"
                         "# TYPE permitd_settle_seconds_total counter\n"
                         "permitd_settle_seconds_total %.3f\n"
                         "# HELP permitd_settles_total Settles this instance ran, by result "
                         "(a failed one is tried again at the next sync pass).\n"
                         "# TYPE permitd_settles_total counter\n"
                         "permitd_settles_total{result=\"done\"} %llu\n"
                         "permitd_settles_total{result=\"failed\"} %llu\n",
                    ss.pending, ss.running, (unsigned long long)ss.keys_total, ss.seconds_total,
                    (unsigned long long)ss.done_total, (unsigned long long)ss.failures_total);
        }
    }
    if (h->verifier != NULL) {
        struct verifier_load v;
        verifier_load(h->verifier, &v);
        fprintf(out, "# HELP permitd_login_checks Admin login password checks (argon2id) running "
                     "or waiting for a --login-workers thread.\n"
                     "# TYPE permitd_login_checks gauge\n"
                     "permitd_login_checks{state=\"running\"} %u\n"
                     "permitd_login_checks{state=\"waiting\"} %u\n"
                     "# HELP permitd_login_checks_total Admin login password checks: done, or "
                     "refused (resource_exhausted) because --login-queue was full.\n"
                     "# TYPE permitd_login_checks_total counter\n"
                     "permitd_login_checks_total{result=\"checked\"} %llu\n"
                     "permitd_login_checks_total{result=\"refused\"} %llu\n",
                v.busy, v.waiting, (unsigned long long)v.checked,
                (unsigned long long)v.refused);
    }
    fprintf(out, "# HELP permitd_http_connections HTTP connections open, by listener.\n"
                 "# TYPE permitd_http_connections gauge\n");
    for (int i = 0; i < 2; i++)
        if (h->listeners[i] != NULL)
            fprintf(out, "permitd_http_connections{listener=\"%s\"} %u\n", names[i],
                    http_server_connections(h->listeners[i]));
    /* Saturation and what the connection deadlines closed (server/transport/http.c). */
    {
        struct http_server_load l[2];

        for (int i = 0; i < 2; i++)
            if (h->listeners[i] != NULL)
                http_server_load(h->listeners[i], &l[i]);
        fprintf(out, "# HELP permitd_http_connections_limit Most HTTP connections open at once, "
                     "by listener.\n# TYPE permitd_http_connections_limit gauge\n");
        for (int i = 0; i < 2; i++)
            if (h->listeners[i] != NULL)
                fprintf(out, "permitd_http_connections_limit{listener=\"%s\"} %u\n", names[i],
                        l[i].limit);
        fprintf(out, "# HELP permitd_http_connections_idle Keep-alive HTTP connections between "
                     "requests, by listener.\n# TYPE permitd_http_connections_idle gauge\n");
        for (int i = 0; i < 2; i++)
            if (h->listeners[i] != NULL)
                fprintf(out, "permitd_http_connections_idle{listener=\"%s\"} %u\n", names[i],
                        l[i].idle);
        fprintf(out, "# HELP permitd_http_connections_closed_total HTTP connections closed by "
                     "permitd: header_timeout (request head not whole in --header-timeout), "
                     "shed_idle / shed_head (to make room when full), refused (bad framing or "
                     "head over --max-header-bytes), per_ip (at accept: the address had "
                     "--max-connections-per-ip open).\n"
                     "# TYPE permitd_http_connections_closed_total counter\n");
        for (int i = 0; i < 2; i++)
            if (h->listeners[i] != NULL)
                fprintf(out,
                        "permitd_http_connections_closed_total{listener=\"%s\",reason=\"header_timeout\"} %llu\n"
                        "permitd_http_connections_closed_total{listener=\"%s\",reason=\"shed_idle\"} %llu\n"
                        "permitd_http_connections_closed_total{listener=\"%s\",reason=\"shed_head\"} %llu\n"
                        "permitd_http_connections_closed_total{listener=\"%s\",reason=\"refused\"} %llu\n"
                        "permitd_http_connections_closed_total{listener=\"%s\",reason=\"per_ip\"} %llu\n",
                        names[i], (unsigned long long)l[i].header_timeouts,
                        names[i], (unsigned long long)l[i].shed_idle,
                        names[i], (unsigned long long)l[i].shed_head,
                        names[i], (unsigned long long)l[i].refused,
                        names[i], (unsigned long long)l[i].refused_per_ip);
    }
    /* The gRPC listener's (server/transport/grpc.c), when there is one. */
    if (h->grpc != NULL) {
        struct grpc_server_load g;

        grpc_server_load(h->grpc, &g);
        fprintf(out, "# HELP permitd_grpc_connections gRPC connections open, by listener.\n"
                     "# TYPE permitd_grpc_connections gauge\n"
                     "permitd_grpc_connections{listener=\"grpc\"} %u\n"
                     "# HELP permitd_grpc_connections_limit Most gRPC connections open at once "
                     "(--max-connections), by listener.\n"
                     "# TYPE permitd_grpc_connections_limit gauge\n"
                     "permitd_grpc_connections_limit{listener=\"grpc\"} %u\n"
                     "# HELP permitd_grpc_connections_per_ip_limit Most gRPC connections open at "
                     "once from one client address (--max-connections-per-ip; 0: no limit), by "
                     "listener.\n"
                     "# TYPE permitd_grpc_connections_per_ip_limit gauge\n"
                     "permitd_grpc_connections_per_ip_limit{listener=\"grpc\"} %u\n"
                     "# HELP permitd_grpc_connections_refused_total gRPC connections closed at "
                     "accept: full (--max-connections open), per_ip (the client's address had "
                     "--max-connections-per-ip open).\n"
                     "# TYPE permitd_grpc_connections_refused_total counter\n"
                     "permitd_grpc_connections_refused_total{listener=\"grpc\",reason=\"full\"} %llu\n"
                     "permitd_grpc_connections_refused_total{listener=\"grpc\",reason=\"per_ip\"} %llu\n",
                g.open, g.limit, g.per_ip_limit, (unsigned long long)g.refused_full,
                (unsigned long long)g.refused_per_ip);
        fprintf(out, "# HELP permitd_grpc_connections_shed_total gRPC connections closed to "
                     "make room when --max-connections were open: idle (no call), stalled (calls "
                     "whose requests did not come).\n"
                     "# TYPE permitd_grpc_connections_shed_total counter\n"
                     "permitd_grpc_connections_shed_total{listener=\"grpc\",reason=\"idle\"} %llu\n"
                     "permitd_grpc_connections_shed_total{listener=\"grpc\",reason=\"stalled\"} %llu\n",
                (unsigned long long)g.shed_idle, (unsigned long long)g.shed_stalled);
    }
    fclose(out);
    resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
    resp->body = body;
    resp->body_len = len;
    resp->body_owned = 1;
}
