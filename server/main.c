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
#include "control/gatewaysync.h"
#include "control/fleet.h"
#include "control/fleetsvc.h"
#include "decisions/appkeys.h"
#include "decisions/forward.h"
#include "decisions/api.h"
#include "decisions/service.h"
#include "decisions/envoyrls.h"
#include "decisions/grpcapi.h"
#include "core/config.h"
#include "transport/connect.h"
#include "transport/grpc.h"
#include "transport/http.h"
#include "decisions/limiter.h"
#include "core/log.h"
#include "stores/redis.h"
#include "decisions/stats.h"
#include "control/follow.h"
#include "control/sync.h"

#define DRAIN_GRACE_MS 10000

/* What the sync runs after each pass, in its rhythm: the app keys, the
 * gateway rules and the Envoy descriptor mapping are loaded from MySQL
 * (each NULL when there is none). */
struct pass_hooks {
    struct appsync *appsync;
    struct gatewaysync *gwsync;
    struct envoysvc *envoysvc;
};

static void after_pass(void *ud)
{
    struct pass_hooks *h = ud;

    if (h->appsync != NULL)
        appsync_pass(h->appsync);
    if (h->gwsync != NULL)
        gatewaysync_pass(h->gwsync);
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

static int serve(const struct config *cfg)
{
    struct permitd_error err = {0, ""};
    struct redis *redis = NULL;
    struct limiter *limiter = NULL;
    struct api *api = NULL;
    struct service *service = NULL;
    struct sync *sync = NULL;
    struct follow *follow = NULL;
    struct admin *admin = NULL;
    struct stats *stats = NULL;
    struct appkeys *keys = NULL;
    struct appsync *appsync = NULL;
    struct appsvc *appsvc = NULL;
    struct forward_rules *rules = NULL;
    struct forward *forward = NULL;
    struct gatewaysync *gwsync = NULL;
    struct gatewaysvc *gwsvc = NULL;
    struct fleet *fleet = NULL;
    struct fleetsvc *fleetsvc = NULL;
    struct hotkeys *hotkeys = NULL;
    struct hotkeysvc *hotkeysvc = NULL;
    struct usersvc *usersvc = NULL;
    struct auditsvc *auditsvc = NULL;
    struct http_server *server = NULL, *admin_server = NULL;
    struct grpcapi *grpcapi = NULL;
    struct envoyrls *envoyrls = NULL;
    struct envoysvc *envoysvc = NULL;
    struct pass_hooks hooks = {NULL, NULL, NULL};
    struct grpc_server *grpc = NULL;
    sigset_t sigs;
    int sig = 0, status = EXIT_FAILURE;
    char url[1400], mysql[1400] = "off";
    char *cert = NULL, *key = NULL, *grpc_cert = NULL, *grpc_key = NULL;

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
        goto out;
    }
    if (stats_new((size_t)cfg->stats_policies, &stats, &err) != PERMITD_OK ||
        redis_new(cfg, &redis, &err) != PERMITD_OK ||
        limiter_new(cfg, redis, &limiter, &err) != PERMITD_OK ||
        service_new(limiter, stats, &service, &err) != PERMITD_OK ||
        api_new(cfg, service, &api, &err) != PERMITD_OK ||
        appkeys_new(cfg->app_auth_off, &keys, &err) != PERMITD_OK ||
        forward_rules_new(&rules, &err) != PERMITD_OK ||
        forward_new(cfg, rules, service, &forward, &err) != PERMITD_OK ||
        grpcapi_new(cfg, service, &grpcapi, &err) != PERMITD_OK ||
        envoyrls_new(service, &envoyrls, &err) != PERMITD_OK)
        goto out;
    service_set_appkeys(service, keys);
    api_set_forward(api, forward);
    /* Issue 25: Envoy's ShouldRateLimit beside permit.v1 on the gRPC listener. */
    grpcapi_chain(grpcapi, envoyrls_handle, envoyrls);
    if (cfg->mysql_url[0] != '\0') {
        if (sync_new(cfg, redis, limiter, &sync, &err) != PERMITD_OK)
            goto out;
        limiter_set_missing_hook(limiter, sync_kick, sync);
        config_mysql_url_masked(&cfg->mysql, mysql, sizeof(mysql));
    }
    if (admin_new(cfg, redis, limiter, sync, stats, &admin, &err) != PERMITD_OK ||
        hotkeys_new(cfg, redis, &hotkeys, &err) != PERMITD_OK ||
        hotkeysvc_new(cfg, admin, redis, limiter, &hotkeysvc, &err) != PERMITD_OK ||
        admin_add_methods(admin, hotkeysvc_methods, hotkeysvc, &err) != PERMITD_OK)
        goto out;
    service_set_hotkeys(service, hotkeys);
    if (sync != NULL) {
        struct permitd_error why = {0, ""};
        if (appsync_new(cfg, redis, keys, &appsync, &err) != PERMITD_OK ||
            appsvc_new(cfg, admin, redis, keys, &appsvc, &err) != PERMITD_OK ||
            admin_add_methods(admin, appsvc_methods, appsvc, &err) != PERMITD_OK ||
            gatewaysync_new(cfg, redis, rules, &gwsync, &err) != PERMITD_OK ||
            gatewaysvc_new(cfg, admin, redis, gwsync, &gwsvc, &err) != PERMITD_OK ||
            admin_add_methods(admin, gatewaysvc_methods, gwsvc, &err) != PERMITD_OK ||
            usersvc_new(cfg, admin, &usersvc, &err) != PERMITD_OK ||
            admin_add_methods(admin, usersvc_methods, usersvc, &err) != PERMITD_OK ||
            auditsvc_new(cfg, admin, &auditsvc, &err) != PERMITD_OK ||
            admin_add_methods(admin, auditsvc_methods, auditsvc, &err) != PERMITD_OK)
            goto out;
        if (envoysvc_new(cfg, admin, envoyrls, &envoysvc, &err) != PERMITD_OK ||
            admin_add_methods(admin, envoysvc_methods, envoysvc, &err) != PERMITD_OK)
            goto out;
        hooks.appsync = appsync;
        hooks.gwsync = gwsync;
        hooks.envoysvc = envoysvc;
        sync_set_pass_hook(sync, after_pass, &hooks);
        if (gatewaysync_load(gwsync, &why) != PERMITD_OK)
            log_msg(LOG_LEVEL_WARN, "gateway rules not loaded at start: forward-auth allows "
                    "every request until MySQL answers", "error=\"%s\"", why.message);
        if (envoysvc_load(envoysvc, &why) != PERMITD_OK)
            log_msg(LOG_LEVEL_WARN, "envoy descriptor mapping not loaded at start: every "
                    "descriptor answers OK until MySQL answers", "error=\"%s\"", why.message);
        /* The keys before the first request; MySQL down now leaves the
         * table empty (401 unknown) until the sync's first pass that
         * reaches it. */
        if (!cfg->app_auth_off && appsync_load(appsync, &why) != PERMITD_OK)
            log_msg(LOG_LEVEL_WARN, "app keys not loaded at start: every API request answers "
                    "unauthenticated until MySQL answers", "error=\"%s\"", why.message);
    }
    admin_set_appkeys(admin, keys);
    if (fleet_new(cfg, redis, stats, sync, &fleet, &err) != PERMITD_OK ||
        fleetsvc_new(cfg, admin, redis, fleet, &fleetsvc, &err) != PERMITD_OK ||
        admin_add_methods(admin, fleetsvc_methods, fleetsvc, &err) != PERMITD_OK)
        goto out;
    admin_set_fleet(admin, fleet);
    if (cfg->app_auth_off)
        log_msg(LOG_LEVEL_WARN, "APP AUTH IS OFF (--app-auth off): the API trusts the app every "
                "request names, and anyone who reaches the API port may act as any app; run it "
                "only behind a gateway that authenticates apps", NULL);

    if (cfg->tls_cert[0] != '\0' &&
        ((cert = read_pem(cfg->tls_cert, "--tls-cert (PERMITD_TLS_CERT)", &err)) == NULL ||
         (key = read_pem(cfg->tls_key, "--tls-key (PERMITD_TLS_KEY)", &err)) == NULL))
        goto out;
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
        .tls_cert_pem = cert,
        .tls_key_pem = key,
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
    if (http_server_start(&admin_http, admin_handle, admin, &admin_server, &err) != PERMITD_OK ||
        http_server_start(&http, api_handle, api, &server, &err) != PERMITD_OK)
        goto out;
    admin_set_listeners(admin, server, admin_server);
    if (cfg->grpc_listen[0] != '\0') {
        /* Issue 25: gRPC over HTTP/2, same limits as the API listener. */
        if (cfg->grpc_tls_cert[0] != '\0' &&
            ((grpc_cert = read_pem(cfg->grpc_tls_cert, "--grpc-tls-cert (PERMITD_GRPC_TLS_CERT)",
                                   &err)) == NULL ||
             (grpc_key = read_pem(cfg->grpc_tls_key, "--grpc-tls-key (PERMITD_GRPC_TLS_KEY)",
                                  &err)) == NULL))
            goto out;
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
            .tls_cert_pem = grpc_cert,
            .tls_key_pem = grpc_key,
            .tls_priorities = cfg->tls_priorities,
            .name = "grpc",
            .access_log = cfg->access_log,
            .worker_open = grpcapi_worker_open,
            .worker_close = grpcapi_worker_close,
        };
        if (grpc_server_start(&g, grpcapi_handle, grpcapi, &grpc, &err) != PERMITD_OK)
            goto out;
        admin_set_grpc(admin, grpc);
        log_msg(LOG_LEVEL_INFO, "grpc listener started", "listen=%s:%d tls=%s max_streams=%d",
                cfg->grpc_listen_host, grpc_server_port(grpc), grpc_cert ? "on" : "off",
                cfg->grpc_max_streams);
    }
    fleet_set_listeners(fleet, server, admin_server);
    if (fleet_start(fleet, &err) != PERMITD_OK)
        goto out;
    if (sync != NULL && sync_start(sync, &err) != PERMITD_OK)
        goto out;
    if (follow_start(cfg, redis, limiter, sync == NULL, &follow, &err) != PERMITD_OK)
        goto out;
    if (appsync != NULL && appsync_start(appsync, &err) != PERMITD_OK)
        goto out;
    if (gwsync != NULL && gatewaysync_start(gwsync, &err) != PERMITD_OK)
        goto out;
    if (hotkeys_start(hotkeys, &err) != PERMITD_OK)
        goto out;

    config_redis_url_masked(cfg, url, sizeof(url));
    log_msg(LOG_LEVEL_INFO, "permitd started",
            "version=%s listen=%s:%d admin=%s:%d tls=%s threads=%d redis=%s prefix=%s mysql=%s "
            "app_auth=%s",
            PERMITD_VERSION, cfg->listen_host, http_server_port(server), cfg->admin_listen_host,
            http_server_port(admin_server), cert ? "on" : "off", cfg->threads, url,
            cfg->redis_prefix, mysql, cfg->app_auth);

    if (sigwait(&sigs, &sig) != 0)
        sig = SIGTERM;
    log_msg(LOG_LEVEL_INFO, "stopping: finishing requests in flight", "signal=%s grace_ms=%d",
            sig == SIGINT ? "SIGINT" : "SIGTERM", DRAIN_GRACE_MS);
    fleet_set_listeners(fleet, NULL, NULL);
    /* The admin listener first: it reports on the API listener, which is
     * then drained. */
    http_server_stop(admin_server, 0);
    admin_server = NULL;
    http_server_stop(server, DRAIN_GRACE_MS);
    server = NULL;
    grpc_server_stop(grpc, DRAIN_GRACE_MS);
    grpc = NULL;
    /* After the drain: the last requests' counts go out with its last tick. */
    fleet_free(fleet);
    fleet = NULL;
    status = EXIT_SUCCESS;

out:
    if (status != EXIT_SUCCESS)
        fprintf(stderr, "permitd: %s\n", err.message);
    fleet_free(fleet);      /* before the listeners it reports on */
    http_server_stop(server, 0);
    http_server_stop(admin_server, 0);
    grpc_server_stop(grpc, 0);
    follow_stop(follow);
    sync_free(sync);
    appsync_free(appsync);
    gatewaysync_free(gwsync);
    hotkeys_free(hotkeys);
    hotkeysvc_free(hotkeysvc);
    admin_free(admin);
    envoysvc_free(envoysvc);    /* after the sync and the admin listener, its callers */
    envoyrls_free(envoyrls);
    grpcapi_free(grpcapi);
    fleetsvc_free(fleetsvc);
    appsvc_free(appsvc);
    gatewaysvc_free(gwsvc);
    usersvc_free(usersvc);
    auditsvc_free(auditsvc);
    api_free(api);
    forward_free(forward);
    service_free(service);
    forward_rules_free(rules);
    limiter_free(limiter);
    appkeys_free(keys);
    redis_free(redis);
    stats_free(stats);
    free(cert);
    if (key != NULL) {
        memset(key, 0, strlen(key));
        free(key);
    }
    free(grpc_cert);
    if (grpc_key != NULL) {
        memset(grpc_key, 0, strlen(grpc_key));
        free(grpc_key);
    }
    if (status == EXIT_SUCCESS)
        log_msg(LOG_LEVEL_INFO, "permitd stopped", NULL);
    return status;
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
