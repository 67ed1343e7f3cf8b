/*
 * main.c - permitd's entry point; wiring only.
 *
 *   permitd [options]                 serve: Redis -> limiter -> API listener,
 *                                     admin listener, MySQL sync thread; wait
 *                                     for SIGTERM/SIGINT; drain; exit 0
 *   permitd migrate VERB [args]       the schema migrations (cli/cli_migrate.c)
 *   permitd admin VERB [args]         admin accounts, apps and their API
 *                                     keys (cli/cli_admin.c)
 *
 * Signals are blocked before any thread starts, so every worker inherits the
 * mask and only the main thread, in sigwait(), ever sees them.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>

#include "cli/cli_admin.h"
#include "cli/cli_migrate.h"
#include "control/admin.h"
#include "control/appsvc.h"
#include "control/hotkeysvc.h"
#include "decisions/hotkeys.h"
#include "control/auditsvc.h"
#include "control/usersvc.h"
#include "control/appsync.h"
#include "control/envoysvc.h"
#include "control/gatewaysvc.h"
#include "control/overridesvc.h"
#include "control/gatewaysync.h"
#include "control/overridesync.h"
#include "control/fleet.h"
#include "control/fleetsvc.h"
#include "control/trafficlog.h"
#include "control/trafficsvc.h"
#include "decisions/traffic.h"
#include "decisions/appkeys.h"
#include "decisions/forward.h"
#include "decisions/api.h"
#include "decisions/service.h"
#include "decisions/envoyrls.h"
#include "decisions/grpcapi.h"
#include "core/config.h"
#include "core/parts.h"
#include "transport/connect.h"
#include "transport/grpc.h"
#include "transport/http.h"
#include "decisions/limiter.h"
#include "core/log.h"
#include "stores/redis.h"
#include "decisions/stats.h"
#include "control/follow.h"
#include "control/sweep.h"
#include "control/sync.h"

#define DRAIN_GRACE_MS 10000

/* What the sync runs after each pass, in its rhythm: the app keys, the
 * gateway rules and the Envoy descriptor mapping are loaded from MySQL
 * (each NULL when there is none). */
struct pass_hooks {
    struct appsync *appsync;
    struct gatewaysync *gwsync;
    struct overridesync *ovsync;
    struct envoysvc *envoysvc;
};

static void after_pass(void *ud)
{
    struct pass_hooks *h = ud;

    if (h->appsync != NULL)
        appsync_pass(h->appsync);
    if (h->gwsync != NULL)
        gatewaysync_pass(h->gwsync);
    if (h->ovsync != NULL)
        overridesync_pass(h->ovsync);
    if (h->envoysvc != NULL)
        envoysvc_pass(h->envoysvc);
}

/* Reads a whole (PEM) file into a new string (free()). */
static char *read_pem(const char *path, const char *setting, struct permitd_error *err)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long len;

    if (f == NULL) {
        permitd_error_set(err, PERMITD_EINVAL, "%s: cannot read \"%s\": %s", setting, path,
                          strerror(errno));
        return NULL;
    }
    if (fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) >= 0 && len < 1024 * 1024 &&
        fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)len + 1)) != NULL) {
        buf[fread(buf, 1, (size_t)len, f)] = '\0';
        if (strstr(buf, "-----BEGIN ") == NULL) {
            permitd_error_set(err, PERMITD_EINVAL, "%s: \"%s\" is not a PEM file", setting, path);
            free(buf);
            buf = NULL;
        }
    } else {
        permitd_error_set(err, PERMITD_EINVAL, "%s: cannot read \"%s\"", setting, path);
    }
    fclose(f);
    return buf;
}

/* Everything serve() makes, in one place: each part of the table below
 * keeps what it made here and finds what it needs from the parts above it. */
struct serve {
    const struct config *cfg;
    struct stats *stats;
    struct traffic *traffic;
    struct trafficlog *trafficlog;
    struct trafficsvc *trafficsvc;
    struct redis *redis;
    struct appkeys *keys;
    struct limiter *limiter;
    struct forward_rules *rules;
    struct service *service;
    struct forward *forward;
    struct api *api;
    struct grpcapi *grpcapi;
    struct envoyrls *envoyrls;
    struct hotkeys *hotkeys;
    struct gatewaysync *gwsync;
    struct overridesync *ovsync;
    struct appsync *appsync;
    struct sync *sync;
    struct follow *follow;
    struct sweep *sweep;                /* reservations' expiry (issue 38) */
    struct admin *admin;
    struct hotkeysvc *hotkeysvc;
    struct appsvc *appsvc;
    struct gatewaysvc *gwsvc;
    struct usersvc *usersvc;
    struct auditsvc *auditsvc;
    struct envoysvc *envoysvc;
    struct overridesvc *overridesvc;
    struct pass_hooks hooks;
    struct fleet *fleet;
    struct fleetsvc *fleetsvc;
    struct http_server *server, *admin_server;
    struct grpc_server *grpc;
    char *cert, *key, *grpc_cert, *grpc_key;
    char mysql[1400];                   /* the MySQL URL as logged, or "off" */
};

/* The parts' hooks (core/parts.h), in the table's order. Most only call
 * the module's own _new/_start/_free with what the parts above made. */
static int mysql_on(void *ctx)
{
    return ((struct serve *)ctx)->cfg->mysql_url[0] != '\0';
}

static int stats_part(void *ctx, struct permitd_error *err)
{
    struct serve *s = ctx;
    return stats_new((size_t)s->cfg->stats_policies, &s->stats, err);
}
static void stats_part_free(void *ctx) { stats_free(((struct serve *)ctx)->stats); }

/* The traffic history's counts per policy and app (issue 39): kept with
 * MySQL only, where they are written (trafficlog below). */
static int traffic_part(void *ctx, struct permitd_error *err)
{
    struct serve *s = ctx;
    return traffic_new((size_t)s->cfg->traffic_pairs, &s->traffic, err);
}
static void traffic_part_free(void *ctx) { traffic_free(((struct serve *)ctx)->traffic); }

static int redis_part(void *ctx, struct permitd_error *err)
{
    struct serve *s = ctx;
    return redis_new(s->cfg, &s->redis, err);
}
static void redis_part_free(void *ctx) { redis_free(((struct serve *)ctx)->redis); }

static int keys_part(void *ctx, struct permitd_error *err)
{
    struct serve *s = ctx;
    return appkeys_new(s->cfg->app_auth_off, &s->keys, err);
}
static void keys_part_free(void *ctx) { appkeys_free(((struct serve *)ctx)->keys); }

static int limiter_part(void *ctx, struct permitd_error *err)
{
    struct serve *s = ctx;
    return limiter_new(s->cfg, s->redis, &s->limiter, err);
}
static void limiter_part_free(void *ctx) { limiter_free(((struct serve *)ctx)->limiter); }
/* Stopped after the listeners: says what their workers' leases gave back. */
static void limiter_part_stop(void *ctx) { limiter_stopped(((struct serve *)ctx)->limiter); }

static int rules_part(void *ctx, struct permitd_error *err)
{
    return forward_rules_new(&((struct serve *)ctx)->rules, err);
}
static void rules_part_free(void *ctx) { forward_rules_free(((struct serve *)ctx)->rules); }

/* The decision service every door calls (decisions/service.c). */
static int service_part(void *ctx, struct permitd_error *err)
{
    struct serve *s = ctx;
    int rc = service_new(s->limiter, s->stats, &s->service, err);

    if (rc == PERMITD_OK) {
        service_set_appkeys(s->service, s->keys);
        service_set_traffic(s->service, s->traffic);
        rc = service_start_reservations(s->service, s->cfg->reserve_workers,
                                        s->cfg->reserve_queue, err);
    }
    return rc;
}
static void service_part_free(void *ctx) { service_free(((struct serve *)ctx)->service); }

static int forward_part(void *ctx, struct permitd_error *err)
{
    struct serve *s = ctx;
    return forward_new(s->cfg, s->rules, s->service, &s->forward, err);
}
static void forward_part_free(void *ctx) { forward_free(((struct serve *)ctx)->forward); }

static int api_part(void *ctx, struct permitd_error *err)
{
    struct serve *s = ctx;
    int rc = api_new(s->cfg, s->service, &s->api, err);

    if (rc == PERMITD_OK)
        api_set_forward(s->api, s->forward);
    return rc;
}
static void api_part_free(void *ctx) { api_free(((struct serve *)ctx)->api); }

static int grpcapi_part(void *ctx, struct permitd_error *err)
{
    struct serve *s = ctx;
    return grpcapi_new(s->cfg, s->service, &s->grpcapi, err);
}
static void grpcapi_part_free(void *ctx) { grpcapi_free(((struct serve *)ctx)->grpcapi); }

/* Issue 25: Envoy's ShouldRateLimit beside permit.v1 on the gRPC listener. */
static int envoyrls_part(void *ctx, struct permitd_error *err)
{
    struct serve *s = ctx;
    int rc = envoyrls_new(s->service, &s->envoyrls, err);

    if (rc == PERMITD_OK)
        grpcapi_chain(s->grpcapi, envoyrls_handle, s->envoyrls);
    return rc;
}
static void envoyrls_part_free(void *ctx) { envoyrls_free(((struct serve *)ctx)->envoyrls); }

/* The threads below stop by being freed (their modules have no other
 * stop), so their stop frees and clears the pointer; their free is for a
 * start that never came. */
static int hotkeys_part(void *ctx, struct permitd_error *err)
{
    struct serve *s = ctx;
    int rc = hotkeys_new(s->cfg, s->redis, &s->hotkeys, err);

    if (rc == PERMITD_OK)
        service_set_hotkeys(s->service, s->hotkeys);
    return rc;
}
static int hotkeys_part_start(void *ctx, struct permitd_error *err)
{
    return hotkeys_start(((struct serve *)ctx)->hotkeys, err);
}
static void hotkeys_part_free(void *ctx)
{
    struct serve *s = ctx;
    hotkeys_free(s->hotkeys);
    s->hotkeys = NULL;
}

static int sweep_part_start(void *ctx, struct permitd_error *err)
{
    struct serve *s = ctx;
    return sweep_start(s->limiter, s->cfg->reserve_sweep_ms, &s->sweep, err);
}
static void sweep_part_stop(void *ctx)
{
    struct serve *s = ctx;
    sweep_stop(s->sweep);
    s->sweep = NULL;
}

static int gwsync_part(void *ctx, struct permitd_error *err)
{
    struct serve *s = ctx;
    return gatewaysync_new(s->cfg, s->redis, s->rules, &s->gwsync, err);
}
static int gwsync_part_start(void *ctx, struct permitd_error *err)
{
    return gatewaysync_start(((struct serve *)ctx)->gwsync, err);
}
static void gwsync_part_free(void *ctx)
{
    struct serve *s = ctx;
    gatewaysync_free(s->gwsync);
    s->gwsync = NULL;
}

static int ovsync_part(void *ctx, struct permitd_error *err)
{
    struct serve *s = ctx;
    return overridesync_new(s->cfg, s->redis, s->limiter, &s->ovsync, err);
}
static int ovsync_part_start(void *ctx, struct permitd_error *err)
{
    return overridesync_start(((struct serve *)ctx)->ovsync, err);
}
static void ovsync_part_free(void *ctx)
{
    struct serve *s = ctx;
    overridesync_free(s->ovsync);
    s->ovsync = NULL;
}

static int appsync_part(void *ctx, struct permitd_error *err)
{
    struct serve *s = ctx;
    return appsync_new(s->cfg, s->redis, s->keys, &s->appsync, err);
}
static int appsync_part_start(void *ctx, struct permitd_error *err)
{
    return appsync_start(((struct serve *)ctx)->appsync, err);
}
static void appsync_part_free(void *ctx)
{
    struct serve *s = ctx;
    appsync_free(s->appsync);
    s->appsync = NULL;
}

static int sync_part(void *ctx, struct permitd_error *err)
{
    struct serve *s = ctx;
    int rc = sync_new(s->cfg, s->redis, s->limiter, &s->sync, err);

    if (rc == PERMITD_OK) {
        limiter_set_missing_hook(s->limiter, sync_kick, s->sync);
        config_mysql_url_masked(&s->cfg->mysql, s->mysql, sizeof(s->mysql));
    }
    return rc;
}
static int sync_part_start(void *ctx, struct permitd_error *err)
{
    return sync_start(((struct serve *)ctx)->sync, err);
}
static void sync_part_free(void *ctx)
{
    struct serve *s = ctx;
    sync_free(s->sync);
    s->sync = NULL;
}

static int follow_part_start(void *ctx, struct permitd_error *err)
{
    struct serve *s = ctx;
    int rc = follow_start(s->cfg, s->redis, s->limiter, s->sync == NULL, &s->follow, err);

    if (rc == PERMITD_OK)
        admin_set_follow(s->admin, s->follow);
    return rc;
}
static void follow_part_stop(void *ctx)
{
    struct serve *s = ctx;
    admin_set_follow(s->admin, NULL);
    follow_stop(s->follow);
    s->follow = NULL;
}

static int admin_part(void *ctx, struct permitd_error *err)
{
    struct serve *s = ctx;
    int rc = admin_new(s->cfg, s->redis, s->limiter, s->sync, s->stats, &s->admin, err);

    if (rc == PERMITD_OK) {
        admin_set_appkeys(s->admin, s->keys);
        admin_set_service(s->admin, s->service);
    }
    return rc;
}
/* The admin RPC pool and login checks stop with it (admin_free()): after
 * the threads above, before the services its RPCs call are freed. */
static void admin_part_free(void *ctx)
{
    struct serve *s = ctx;
    admin_free(s->admin);
    s->admin = NULL;
}

/* The admin services: each made, then its procedures put on the admin
 * listener when the parts start (before the listener opens). */
static int hotkeysvc_part(void *ctx, struct permitd_error *err)
{
    struct serve *s = ctx;
    return hotkeysvc_new(s->cfg, s->admin, s->redis, s->limiter, &s->hotkeysvc, err);
}
static int hotkeysvc_part_start(void *ctx, struct permitd_error *err)
{
    struct serve *s = ctx;
    return admin_add_methods(s->admin, hotkeysvc_methods, s->hotkeysvc, err);
}
static void hotkeysvc_part_free(void *ctx) { hotkeysvc_free(((struct serve *)ctx)->hotkeysvc); }

static int appsvc_part(void *ctx, struct permitd_error *err)
{
    struct serve *s = ctx;
    return appsvc_new(s->cfg, s->admin, s->redis, s->keys, &s->appsvc, err);
}
static int appsvc_part_start(void *ctx, struct permitd_error *err)
{
    struct serve *s = ctx;
    return admin_add_methods(s->admin, appsvc_methods, s->appsvc, err);
}
static void appsvc_part_free(void *ctx) { appsvc_free(((struct serve *)ctx)->appsvc); }

static int gwsvc_part(void *ctx, struct permitd_error *err)
{
    struct serve *s = ctx;
    admin_set_gatewaysync(s->admin, s->gwsync);
    return gatewaysvc_new(s->cfg, s->admin, s->redis, s->gwsync, &s->gwsvc, err);
}
static int gwsvc_part_start(void *ctx, struct permitd_error *err)
{
    struct serve *s = ctx;
    return admin_add_methods(s->admin, gatewaysvc_methods, s->gwsvc, err);
}
static void gwsvc_part_free(void *ctx) { gatewaysvc_free(((struct serve *)ctx)->gwsvc); }

static int usersvc_part(void *ctx, struct permitd_error *err)
{
    struct serve *s = ctx;
    return usersvc_new(s->cfg, s->admin, &s->usersvc, err);
}
static int usersvc_part_start(void *ctx, struct permitd_error *err)
{
    struct serve *s = ctx;
    return admin_add_methods(s->admin, usersvc_methods, s->usersvc, err);
}
static void usersvc_part_free(void *ctx) { usersvc_free(((struct serve *)ctx)->usersvc); }

static int auditsvc_part(void *ctx, struct permitd_error *err)
{
    struct serve *s = ctx;
    return auditsvc_new(s->cfg, s->admin, &s->auditsvc, err);
}
static int auditsvc_part_start(void *ctx, struct permitd_error *err)
{
    struct serve *s = ctx;
    return admin_add_methods(s->admin, auditsvc_methods, s->auditsvc, err);
}
static void auditsvc_part_free(void *ctx) { auditsvc_free(((struct serve *)ctx)->auditsvc); }

static int envoysvc_part(void *ctx, struct permitd_error *err)
{
    struct serve *s = ctx;
    int rc = envoysvc_new(s->cfg, s->admin, s->envoyrls, &s->envoysvc, err);

    if (rc == PERMITD_OK)
        admin_set_envoysvc(s->admin, s->envoysvc);
    return rc;
}
static int envoysvc_part_start(void *ctx, struct permitd_error *err)
{
    struct serve *s = ctx;
    return admin_add_methods(s->admin, envoysvc_methods, s->envoysvc, err);
}
static void envoysvc_part_free(void *ctx) { envoysvc_free(((struct serve *)ctx)->envoysvc); }

static int overridesvc_part(void *ctx, struct permitd_error *err)
{
    struct serve *s = ctx;
    return overridesvc_new(s->cfg, s->admin, s->redis, s->ovsync, &s->overridesvc, err);
}
static int overridesvc_part_start(void *ctx, struct permitd_error *err)
{
    struct serve *s = ctx;
    return admin_add_methods(s->admin, overridesvc_methods, s->overridesvc, err);
}
static void overridesvc_part_free(void *ctx) { overridesvc_free(((struct serve *)ctx)->overridesvc); }

/* What the sync runs after each pass, and the first load of each before
 * the first request (MySQL down leaves them empty until a pass reaches it). */
static int mysql_loads_part(void *ctx, struct permitd_error *err)
{
    struct serve *s = ctx;
    struct permitd_error why = {0, ""};

    (void)err;
    s->hooks.appsync = s->appsync;
    s->hooks.gwsync = s->gwsync;
    s->hooks.ovsync = s->ovsync;
    s->hooks.envoysvc = s->envoysvc;
    sync_set_pass_hook(s->sync, after_pass, &s->hooks);
    if (gatewaysync_load(s->gwsync, &why) != PERMITD_OK)
        log_msg(LOG_LEVEL_WARN, "gateway rules not loaded at start: forward-auth allows "
                "every request until MySQL answers", "error=\"%s\"", why.message);
    if (overridesync_load(s->ovsync, &why) != PERMITD_OK) {
        log_msg(LOG_LEVEL_WARN, "overrides not loaded at start: every caller is limited by "
                "its policy until MySQL answers", "error=\"%s\"", why.message);
    } else {
        size_t rows, policies, bytes;
        double ms;
        overridesync_last(s->ovsync, &rows, &policies, &ms, &bytes);
        log_msg(LOG_LEVEL_INFO, "overrides loaded", "overrides=%zu policies=%zu ms=%.1f "
                "bytes=%zu", rows, policies, ms, bytes);
    }
    if (envoysvc_load(s->envoysvc, &why) != PERMITD_OK)
        log_msg(LOG_LEVEL_WARN, "envoy descriptor mapping not loaded at start: every "
                "descriptor answers OK until MySQL answers", "error=\"%s\"", why.message);
    /* The keys before the first request; MySQL down now leaves the
     * table empty (401 unknown) until the sync's first pass that
     * reaches it. */
    if (!s->cfg->app_auth_off && appsync_load(s->appsync, &why) != PERMITD_OK)
        log_msg(LOG_LEVEL_WARN, "app keys not loaded at start: every API request answers "
                "unauthenticated until MySQL answers", "error=\"%s\"", why.message);
    return PERMITD_OK;
}

/* The fleet publisher: made here, started once the listeners it reports
 * on are open (fleet_pub below); stopped after they are drained, so the
 * last requests' counts go out with its last tick. */
static int fleet_part(void *ctx, struct permitd_error *err)
{
    struct serve *s = ctx;
    int rc = fleet_new(s->cfg, s->redis, s->stats, s->sync, &s->fleet, err);

    if (rc == PERMITD_OK)
        admin_set_fleet(s->admin, s->fleet);
    return rc;
}
static void fleet_part_free(void *ctx)
{
    struct serve *s = ctx;
    fleet_free(s->fleet);
    s->fleet = NULL;
}

static int fleetsvc_part(void *ctx, struct permitd_error *err)
{
    struct serve *s = ctx;
    return fleetsvc_new(s->cfg, s->admin, s->redis, s->fleet, &s->fleetsvc, err);
}
static int fleetsvc_part_start(void *ctx, struct permitd_error *err)
{
    struct serve *s = ctx;
    return admin_add_methods(s->admin, fleetsvc_methods, s->fleetsvc, err);
}
static void fleetsvc_part_free(void *ctx) { fleetsvc_free(((struct serve *)ctx)->fleetsvc); }

/* The traffic history: its reader on the admin listener, and its writer,
 * made and started here and stopped after the listeners drained, so the
 * last requests' counts go into its last flush. */
static int trafficsvc_part(void *ctx, struct permitd_error *err)
{
    struct serve *s = ctx;
    return trafficsvc_new(s->cfg, s->admin, &s->trafficsvc, err);
}
static int trafficsvc_part_start(void *ctx, struct permitd_error *err)
{
    struct serve *s = ctx;
    return admin_add_methods(s->admin, trafficsvc_methods, s->trafficsvc, err);
}
static void trafficsvc_part_free(void *ctx) { trafficsvc_free(((struct serve *)ctx)->trafficsvc); }

static int trafficlog_part(void *ctx, struct permitd_error *err)
{
    struct serve *s = ctx;
    int rc = trafficlog_new(s->cfg, s->traffic, &s->trafficlog, err);

    if (rc == PERMITD_OK)
        admin_set_traffic(s->admin, s->traffic, s->trafficlog);
    return rc;
}
static int trafficlog_part_start(void *ctx, struct permitd_error *err)
{
    struct serve *s = ctx;
    return trafficlog_start(s->trafficlog, err);
}
static void trafficlog_part_free(void *ctx)
{
    struct serve *s = ctx;
    trafficlog_free(s->trafficlog);
    s->trafficlog = NULL;
}

/* The listeners' certificates and keys, read before any listener opens. */
static int listeners_part(void *ctx, struct permitd_error *err)
{
    struct serve *s = ctx;
    const struct config *cfg = s->cfg;

    if (cfg->app_auth_off)
        log_msg(LOG_LEVEL_WARN, "APP AUTH IS OFF (--app-auth off): the API trusts the app every "
                "request names, and anyone who reaches the API port may act as any app; run it "
                "only behind a gateway that authenticates apps", NULL);
    if (cfg->tls_cert[0] != '\0' &&
        ((s->cert = read_pem(cfg->tls_cert, "--tls-cert (PERMITD_TLS_CERT)", err)) == NULL ||
         (s->key = read_pem(cfg->tls_key, "--tls-key (PERMITD_TLS_KEY)", err)) == NULL))
        return err->code;
    if (cfg->grpc_listen[0] != '\0' && cfg->grpc_tls_cert[0] != '\0' &&
        ((s->grpc_cert = read_pem(cfg->grpc_tls_cert, "--grpc-tls-cert (PERMITD_GRPC_TLS_CERT)",
                                  err)) == NULL ||
         (s->grpc_key = read_pem(cfg->grpc_tls_key, "--grpc-tls-key (PERMITD_GRPC_TLS_KEY)",
                                 err)) == NULL))
        return err->code;
    return PERMITD_OK;
}

static void free_secret(char **pem)
{
    if (*pem != NULL) {
        memset(*pem, 0, strlen(*pem));
        free(*pem);
        *pem = NULL;
    }
}

static void listeners_part_free(void *ctx)
{
    struct serve *s = ctx;

    free(s->cert);
    s->cert = NULL;
    free_secret(&s->key);
    free(s->grpc_cert);
    s->grpc_cert = NULL;
    free_secret(&s->grpc_key);
}

/* Stops the listeners: the admin listener first (it reports on the API
 * listener, which is then drained), then the API and gRPC ones, each
 * finishing the requests in flight. */
static void listeners_part_stop(void *ctx)
{
    struct serve *s = ctx;

    http_server_stop(s->admin_server, 0);
    s->admin_server = NULL;
    http_server_stop(s->server, DRAIN_GRACE_MS);
    s->server = NULL;
    grpc_server_stop(s->grpc, DRAIN_GRACE_MS);
    s->grpc = NULL;
}

static int listeners_part_start(void *ctx, struct permitd_error *err)
{
    struct serve *s = ctx;
    const struct config *cfg = s->cfg;

    struct http_options http = {
        .host = cfg->listen_host,
        .port = cfg->listen_port,
        .threads = cfg->threads,
        .max_body_bytes = cfg->max_body_bytes,
        .max_connections = cfg->max_connections,
        .connection_timeout_s = cfg->connection_timeout_s,
        .header_timeout_s = cfg->header_timeout_s,
        .request_timeout_s = cfg->request_timeout_s,
        .first_byte_timeout_s = cfg->first_byte_timeout_s,
        .max_connections_per_ip = cfg->max_connections_per_ip,
        .max_header_bytes = cfg->max_header_bytes,
        .access_log = cfg->access_log,
        .tls_cert_pem = s->cert,
        .tls_key_pem = s->key,
        .tls_priorities = cfg->tls_priorities,
        .name = "api",
        .refuse = connect_error_reply,
        .worker_open = api_worker_open,
        .worker_close = api_worker_close,
    };
    struct http_options admin_http = http;
    admin_http.worker_open = admin_worker_open;   /* password checks come back to its loop */
    admin_http.worker_close = admin_worker_close;
    admin_http.host = cfg->admin_listen_host;
    admin_http.port = cfg->admin_listen_port;
    admin_http.threads = 1;
    admin_http.max_connections = 256;
    admin_http.name = "admin";
    /* The admin listener first: once the API listener answers /healthz,
     * /readyz and the admin RPCs are reachable too (a client that waited
     * for the API port found the admin port still closed). */
    if (http_server_start(&admin_http, admin_handle, s->admin, &s->admin_server, err) != PERMITD_OK ||
        http_server_start(&http, api_handle, s->api, &s->server, err) != PERMITD_OK)
        goto fail;
    admin_set_listeners(s->admin, s->server, s->admin_server);
    if (cfg->grpc_listen[0] != '\0') {
        /* Issue 25: gRPC over HTTP/2, same limits as the API listener. */
        struct grpc_options g = {
            .host = cfg->grpc_listen_host,
            .port = cfg->grpc_listen_port,
            .threads = cfg->threads,
            .max_connections = cfg->max_connections,
            .max_connections_per_ip = cfg->max_connections_per_ip,
            .max_streams = cfg->grpc_max_streams,
            .max_message_bytes = (size_t)cfg->max_body_bytes,
            .idle_timeout_s = cfg->connection_timeout_s,
            .request_timeout_s = cfg->grpc_request_timeout_s,
            .tls_cert_pem = s->grpc_cert,
            .tls_key_pem = s->grpc_key,
            .tls_priorities = cfg->tls_priorities,
            .name = "grpc",
            .access_log = cfg->access_log,
            .worker_open = grpcapi_worker_open,
            .worker_close = grpcapi_worker_close,
        };
        if (grpc_server_start(&g, grpcapi_handle, s->grpcapi, &s->grpc, err) != PERMITD_OK)
            goto fail;
        admin_set_grpc(s->admin, s->grpc);
        log_msg(LOG_LEVEL_INFO, "grpc listener started", "listen=%s:%d tls=%s max_streams=%d",
                cfg->grpc_listen_host, grpc_server_port(s->grpc), s->grpc_cert ? "on" : "off",
                cfg->grpc_max_streams);
    }
    return PERMITD_OK;

fail:
    listeners_part_stop(s);
    return err->code;
}

/* The fleet publishes once it knows the listeners (its instance id holds
 * the API port), and lets go of them before they stop. */
static int fleet_pub_start(void *ctx, struct permitd_error *err)
{
    struct serve *s = ctx;

    fleet_set_listeners(s->fleet, s->server, s->admin_server);
    if (fleet_start(s->fleet, err) != PERMITD_OK) {
        fleet_set_listeners(s->fleet, NULL, NULL);
        return err->code;
    }
    return PERMITD_OK;
}
static void fleet_pub_stop(void *ctx)
{
    struct serve *s = ctx;
    fleet_set_listeners(s->fleet, NULL, NULL);
}

/* permitd's parts, made and started from the top, stopped and freed from
 * the bottom (core/parts.h). The order is the dependencies': a part uses
 * only the parts above it, so on the way down, in order: the fleet lets go
 * of the listeners; the admin listener closes and the API and gRPC ones
 * drain; the fleet sends its last counts; the threads stop (follow, then
 * the sync before the app and gateway syncs and the hot keys, whose passes
 * and lists it and the requests feed); the admin RPC pool stops; the
 * limiter says what the workers' local leases gave back; and then
 * everything is freed, the services before the admin that called them. */
static const struct part serve_parts[] = {
    /* name          enabled   new               start                 stop               free */
    {"stats",        NULL,     stats_part,       NULL,                 NULL,              stats_part_free},
    {"traffic",      mysql_on, traffic_part,     NULL,                 NULL,              traffic_part_free},
    {"redis",        NULL,     redis_part,       NULL,                 NULL,              redis_part_free},
    {"appkeys",      NULL,     keys_part,        NULL,                 NULL,              keys_part_free},
    {"limiter",      NULL,     limiter_part,     NULL,                 limiter_part_stop, limiter_part_free},
    {"rules",        NULL,     rules_part,       NULL,                 NULL,              rules_part_free},
    {"service",      NULL,     service_part,     NULL,                 NULL,              service_part_free},
    {"forward",      NULL,     forward_part,     NULL,                 NULL,              forward_part_free},
    {"api",          NULL,     api_part,         NULL,                 NULL,              api_part_free},
    {"grpcapi",      NULL,     grpcapi_part,     NULL,                 NULL,              grpcapi_part_free},
    {"envoyrls",     NULL,     envoyrls_part,    NULL,                 NULL,              envoyrls_part_free},
    {"admin rpcs",   NULL,     NULL,             NULL,                 admin_part_free,   NULL},
    {"hotkeys",      NULL,     hotkeys_part,     hotkeys_part_start,   hotkeys_part_free, hotkeys_part_free},
    {"gatewaysync",  mysql_on, gwsync_part,      gwsync_part_start,    gwsync_part_free,  gwsync_part_free},
    {"overridesync", mysql_on, ovsync_part,      ovsync_part_start,    ovsync_part_free,  ovsync_part_free},
    {"appsync",      mysql_on, appsync_part,     appsync_part_start,   appsync_part_free, appsync_part_free},
    {"sync",         mysql_on, sync_part,        sync_part_start,      sync_part_free,    sync_part_free},
    {"follow",       NULL,     NULL,             follow_part_start,    follow_part_stop,  NULL},
    {"sweep",        NULL,     NULL,             sweep_part_start,     sweep_part_stop,   NULL},
    {"admin",        NULL,     admin_part,       NULL,                 NULL,              admin_part_free},
    {"hotkeysvc",    NULL,     hotkeysvc_part,   hotkeysvc_part_start, NULL,              hotkeysvc_part_free},
    {"appsvc",       mysql_on, appsvc_part,      appsvc_part_start,    NULL,              appsvc_part_free},
    {"gatewaysvc",   mysql_on, gwsvc_part,       gwsvc_part_start,     NULL,              gwsvc_part_free},
    {"usersvc",      mysql_on, usersvc_part,     usersvc_part_start,   NULL,              usersvc_part_free},
    {"auditsvc",     mysql_on, auditsvc_part,    auditsvc_part_start,  NULL,              auditsvc_part_free},
    {"envoysvc",     mysql_on, envoysvc_part,    envoysvc_part_start,  NULL,              envoysvc_part_free},
    {"overridesvc",  mysql_on, overridesvc_part, overridesvc_part_start, NULL,            overridesvc_part_free},
    {"trafficsvc",   mysql_on, trafficsvc_part,  trafficsvc_part_start, NULL,             trafficsvc_part_free},
    {"trafficlog",   mysql_on, trafficlog_part,  trafficlog_part_start, trafficlog_part_free, trafficlog_part_free},
    {"mysql loads",  mysql_on, mysql_loads_part, NULL,                 NULL,              NULL},
    {"fleet",        NULL,     fleet_part,       NULL,                 fleet_part_free,   fleet_part_free},
    {"fleetsvc",     NULL,     fleetsvc_part,    fleetsvc_part_start,  NULL,              fleetsvc_part_free},
    {"listeners",    NULL,     listeners_part,   listeners_part_start, listeners_part_stop, listeners_part_free},
    {"fleet publish", NULL,    NULL,             fleet_pub_start,      fleet_pub_stop,    NULL},
};

static int serve(const struct config *cfg)
{
    struct permitd_error err = {0, ""};
    struct serve s = {.cfg = cfg, .mysql = "off"};
    struct parts parts;
    sigset_t sigs;
    int sig = 0;
    char url[1400];

    signal(SIGPIPE, SIG_IGN);
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);

    /* Issue 21: the app keys live in MySQL; without it no key could ever
     * be checked, so a start that would refuse every request is refused. */
    if (!cfg->app_auth_off && cfg->mysql_url[0] == '\0') {
        permitd_error_set(&err, PERMITD_EINVAL,
                          "--app-auth keys (the default) needs --mysql-url (PERMITD_MYSQL_URL): "
                          "the apps' API keys are kept in MySQL. Without MySQL (policies kept by "
                          "hand in Redis) give --app-auth off, and put permitd behind a gateway "
                          "that authenticates apps");
        fprintf(stderr, "permitd: %s\n", err.message);
        return EXIT_FAILURE;
    }
    if (parts_start(&parts, serve_parts, sizeof(serve_parts) / sizeof(serve_parts[0]), &s,
                    &err) != PERMITD_OK) {
        fprintf(stderr, "permitd: %s\n", err.message);
        return EXIT_FAILURE;
    }
    config_redis_url_masked(cfg, url, sizeof(url));
    log_msg(LOG_LEVEL_INFO, "permitd started",
            "version=%s listen=%s:%d admin=%s:%d tls=%s threads=%d redis=%s prefix=%s mysql=%s "
            "app_auth=%s",
            PERMITD_VERSION, cfg->listen_host, http_server_port(s.server), cfg->admin_listen_host,
            http_server_port(s.admin_server), s.cert ? "on" : "off", cfg->threads, url,
            cfg->redis_prefix, s.mysql, cfg->app_auth);

    if (sigwait(&sigs, &sig) != 0)
        sig = SIGTERM;
    log_msg(LOG_LEVEL_INFO, "stopping: finishing requests in flight", "signal=%s grace_ms=%d",
            sig == SIGINT ? "SIGINT" : "SIGTERM", DRAIN_GRACE_MS);
    parts_stop(&parts);
    log_msg(LOG_LEVEL_INFO, "permitd stopped", NULL);
    return EXIT_SUCCESS;
}

/* A core dump (or a debugger of the same user attaching) would hold the
 * passwords and keys permitd keeps in memory: the Redis and MySQL
 * passwords, admin passwords being checked, session tokens, app keys. So
 * from the first line of main(), before any of them is read, the process
 * is not dumpable and its core size limit is 0; core_dumps_settle() puts
 * them back only when --core-dumps 1 asks for it (debugging a crash). */
static void core_dumps_off(struct rlimit *inherited)
{
    struct rlimit zero = {0, 0};

    if (getrlimit(RLIMIT_CORE, inherited) == 0) {
        zero.rlim_max = inherited->rlim_max;    /* lowered too once settled */
        setrlimit(RLIMIT_CORE, &zero);
    } else {
        *inherited = zero;
    }
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

static void core_dumps_settle(const struct config *cfg, const struct rlimit *inherited)
{
    struct rlimit zero = {0, 0};

    if (cfg->core_dumps) {
        setrlimit(RLIMIT_CORE, inherited);
        prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
        log_msg(LOG_LEVEL_WARN, "core dumps on (--core-dumps 1): a core holds the passwords "
                "and keys permitd has in memory", NULL);
    } else {
        setrlimit(RLIMIT_CORE, &zero);
    }
}

int main(int argc, char **argv)
{
    struct config cfg;
    struct permitd_error err = {0, ""};
    struct rlimit core_limit;
    enum log_level level;
    int rc, sub = argc > 1 && (strcmp(argv[1], "migrate") == 0 || strcmp(argv[1], "admin") == 0);

    core_dumps_off(&core_limit);
    /* A subcommand takes its settings from the environment; its own
     * arguments are its own to parse. */
    rc = config_load(&cfg, sub ? 1 : argc, argv, stdout, &err);
    if (rc == 1)
        return EXIT_SUCCESS;
    if (rc != PERMITD_OK) {
        fprintf(stderr, "permitd: %s\n", err.message);
        return 2;
    }
    core_dumps_settle(&cfg, &core_limit);
    /* Checked even without TLS: a typo is found before it is needed. */
    if (!sub && http_tls_check_priorities(cfg.tls_priorities, &err) != PERMITD_OK) {
        fprintf(stderr, "permitd: --tls-priorities (PERMITD_TLS_PRIORITIES): %s\n", err.message);
        return 2;
    }
    log_level_parse(cfg.log_level, &level, NULL);   /* config_load() checked it */
    log_set_level(level);
    if (sub && strcmp(argv[1], "migrate") == 0)
        return cli_migrate_main(&cfg, argc - 1, argv + 1);
    if (sub)
        return cli_admin_main(&cfg, argc - 1, argv + 1);
    return serve(&cfg);
}
