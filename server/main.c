/*
 * main.c - permitd: settings -> Redis -> limiter -> API listener -> wait
 * for SIGTERM/SIGINT -> drain -> exit 0.
 *
 * Only wiring lives here. Signals are blocked before any thread starts, so
 * every worker inherits the mask and only the main thread, in sigwait(),
 * ever sees them.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "api.h"
#include "config.h"
#include "http.h"
#include "limiter.h"
#include "log.h"
#include "redis.h"

#define DRAIN_GRACE_MS 10000

int main(int argc, char **argv)
{
    struct config cfg;
    struct permitd_error err = {0, ""};
    struct redis *redis = NULL;
    struct limiter *limiter = NULL;
    struct api *api = NULL;
    struct http_server *server = NULL;
    enum log_level level;
    sigset_t sigs;
    int rc, sig = 0, status = EXIT_FAILURE;
    char url[1400];

    rc = config_load(&cfg, argc, argv, stdout, &err);
    if (rc == 1)
        return EXIT_SUCCESS;
    if (rc != PERMITD_OK) {
        fprintf(stderr, "permitd: %s\n", err.message);
        return 2;
    }
    log_level_parse(cfg.log_level, &level);
    log_set_level(level);

    signal(SIGPIPE, SIG_IGN);
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);

    if (redis_new(&cfg, &redis, &err) != PERMITD_OK ||
        limiter_new(&cfg, redis, &limiter, &err) != PERMITD_OK ||
        api_new(&cfg, limiter, &api, &err) != PERMITD_OK)
        goto out;

    struct http_options http = {
        .host = cfg.listen_host,
        .port = cfg.listen_port,
        .threads = cfg.threads,
        .max_body_bytes = cfg.max_body_bytes,
        .max_connections = cfg.max_connections,
        .connection_timeout_s = cfg.connection_timeout_s,
        .name = "api",
    };
    if (http_server_start(&http, api_handle, api, &server, &err) != PERMITD_OK)
        goto out;

    config_redis_url_masked(&cfg, url, sizeof(url));
    log_msg(LOG_INFO, "permitd started", "version=%s listen=%s:%d threads=%d redis=%s prefix=%s",
            PERMITD_VERSION, cfg.listen_host, http_server_port(server), cfg.threads, url,
            cfg.redis_prefix);

    if (sigwait(&sigs, &sig) != 0)
        sig = SIGTERM;
    log_msg(LOG_INFO, "stopping: finishing requests in flight", "signal=%s grace_ms=%d",
            sig == SIGINT ? "SIGINT" : "SIGTERM", DRAIN_GRACE_MS);
    http_server_stop(server, DRAIN_GRACE_MS);
    server = NULL;
    status = EXIT_SUCCESS;
    log_msg(LOG_INFO, "permitd stopped", NULL);

out:
    if (status != EXIT_SUCCESS)
        fprintf(stderr, "permitd: %s\n", err.message);
    http_server_stop(server, 0);
    api_free(api);
    limiter_free(limiter);
    redis_free(redis);
    return status;
}
