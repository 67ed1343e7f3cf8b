/*
 * config.c - the settings table and its loader.
 *
 * Each row of `settings` is one setting: its flag (--name), its environment
 * variable, its type and bounds, its default and one line of help. Loading
 * applies the defaults, then the environment, then argv, validating every
 * value as it is applied; derived fields (the parsed listen address and
 * Redis URL) are filled once at the end. Nothing here is global: the table
 * is const and the values land in the caller's struct.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/config.h"
#include "core/log.h"

enum setting_type { T_STRING, T_INT };

struct setting {
    const char *name;      /* flag without "--" */
    const char *env;
    enum setting_type type;
    size_t offset;         /* into struct config */
    size_t size;           /* T_STRING: buffer size */
    const char *def;       /* default as text; NULL = computed */
    long min, max;         /* T_INT bounds */
    const char *help;
};

#define STR(field, name, env, def, help) \
    {name, env, T_STRING, offsetof(struct config, field), \
     sizeof(((struct config *)0)->field), def, 0, 0, help}
#define INT(field, name, env, def, lo, hi, help) \
    {name, env, T_INT, offsetof(struct config, field), 0, def, lo, hi, help}

/* --admin-hosts: comma-separated DNS names ([A-Za-z0-9.-], a letter or
 * digit first), or "*". */
static int check_admin_hosts(const char *list, struct permitd_error *err)
{
    const char *p = list;

    while (*p != '\0') {
        size_t len = strcspn(p, ",");
        const char *item = p;
        while (len > 0 && *item == ' ')
            item++, len--;
        while (len > 0 && item[len - 1] == ' ')
            len--;
        if (!(len == 1 && item[0] == '*') &&
            (len == 0 || len > 253 || !isalnum((unsigned char)item[0]) ||
             strspn(item, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-") < len))
            return permitd_error_set(err, PERMITD_EINVAL,
                                     "--admin-hosts (PERMITD_ADMIN_HOSTS): \"%.*s\" is not a DNS "
                                     "name (or *)",
                                     (int)(len > 64 ? 64 : len), item);
        p += strcspn(p, ",");
        if (*p == ',')
            p++;
    }
    return PERMITD_OK;
}

static const struct setting settings[] = {
    STR(listen, "listen", "PERMITD_LISTEN", "127.0.0.1:8080",
        "API listener address, host:port"),
    INT(threads, "threads", "PERMITD_THREADS", NULL, 1, 1024,
        "HTTP worker threads, each an event loop with its own Redis connections (default: 1 per CPU)"),
    INT(max_body_bytes, "max-body-bytes", "PERMITD_MAX_BODY_BYTES", "65536",
        64, 64 * 1024 * 1024, "largest request body accepted, in bytes"),
    INT(max_connections, "max-connections", "PERMITD_MAX_CONNECTIONS", "4096",
        1, 1000000, "most HTTP connections open at once"),
    INT(connection_timeout_s, "connection-timeout", "PERMITD_CONNECTION_TIMEOUT",
        "30", 1, 3600, "seconds a connection may stay idle or slow"),
    INT(header_timeout_s, "header-timeout", "PERMITD_HEADER_TIMEOUT", "10", 1, 3600,
        "seconds a request's line + headers may take in all, however steadily they trickle"),
    INT(request_timeout_s, "request-timeout", "PERMITD_REQUEST_TIMEOUT", "30", 1, 3600,
        "seconds a whole request (line, headers and body) may take in all, however steadily "
        "its bytes trickle"),
    INT(first_byte_timeout_s, "first-byte-timeout", "PERMITD_FIRST_BYTE_TIMEOUT", "3", 1, 3600,
        "seconds a new connection may stay silent (and pause while sending its first head)"),
    INT(max_connections_per_ip, "max-connections-per-ip", "PERMITD_MAX_CONNECTIONS_PER_IP",
        "0", 0, 1000000, "most connections from one client address; 0 = no limit "
        "(behind a load balancer every client has its address)"),
    INT(max_header_bytes, "max-header-bytes", "PERMITD_MAX_HEADER_BYTES", "8192",
        2048, 1048576, "largest request line + headers, in bytes"),
    INT(access_log, "access-log", "PERMITD_ACCESS_LOG", "0", 0, 1,
        "1: log one line per HTTP request (method, path, status, time)"),
    STR(tls_cert, "tls-cert", "PERMITD_TLS_CERT", "",
        "PEM certificate (chain) file: both listeners serve HTTPS; needs --tls-key"),
    STR(tls_key, "tls-key", "PERMITD_TLS_KEY", "", "PEM private key file for --tls-cert"),
    STR(tls_priorities, "tls-priorities", "PERMITD_TLS_PRIORITIES", CONFIG_TLS_PRIORITIES,
        "GnuTLS priority string of both listeners (default: TLS 1.2 and 1.3, forward-secret "
        "AEAD suites only)"),
    STR(grpc_listen, "grpc-listen", "PERMITD_GRPC_LISTEN", "",
        "gRPC listener address, host:port (HTTP/2: permit.v1.RateLimitService and Envoy's "
        "envoy.service.ratelimit.v3.RateLimitService); empty: off"),
    INT(grpc_max_streams, "grpc-max-streams", "PERMITD_GRPC_MAX_STREAMS", "256", 1, 65536,
        "most calls open at once on one gRPC connection (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS)"),
    INT(grpc_request_timeout_s, "grpc-request-timeout", "PERMITD_GRPC_REQUEST_TIMEOUT", "10", 1,
        3600, "seconds a gRPC call's request (HEADERS to END_STREAM) may take in all, whatever "
        "its grpc-timeout; past it the call is answered DEADLINE_EXCEEDED and its stream reset"),
    STR(grpc_tls_cert, "grpc-tls-cert", "PERMITD_GRPC_TLS_CERT", "",
        "PEM certificate (chain) file: the gRPC listener speaks TLS (ALPN h2); needs "
        "--grpc-tls-key"),
    STR(grpc_tls_key, "grpc-tls-key", "PERMITD_GRPC_TLS_KEY", "",
        "PEM private key file for --grpc-tls-cert"),
    STR(redis_url, "redis-url", "PERMITD_REDIS_URL", "redis://127.0.0.1:6379",
        "redis://[[user]:pass@]host[:port][/db], unix:///path/redis.sock, or a Redis Cluster: "
        "redis+cluster://[[user]:pass@]host1:port,host2:port,... (seed nodes); rediss:// and "
        "rediss+cluster://: the same over TLS (1.2 or 1.3) on every connection; Redis Sentinel: "
        "redis+sentinel://[[user]:pass@]host1:port,host2:port,.../master-name (the sentinels; "
        "user and password are the master's), rediss+sentinel:// over TLS (sentinels too)"),
    STR(redis_tls_ca_file, "redis-tls-ca-file", "PERMITD_REDIS_TLS_CA_FILE", "",
        "rediss:// and rediss+cluster://: PEM file of the CAs that may sign Redis's certificate "
        "(default: the system's trust store)"),
    STR(redis_tls_cert_file, "redis-tls-cert-file", "PERMITD_REDIS_TLS_CERT_FILE", "",
        "rediss://: PEM client certificate (chain) permitd shows Redis (mutual TLS, "
        "tls-auth-clients yes); needs --redis-tls-key-file"),
    STR(redis_tls_key_file, "redis-tls-key-file", "PERMITD_REDIS_TLS_KEY_FILE", "",
        "rediss://: PEM private key of --redis-tls-cert-file"),
    STR(redis_tls_server_name, "redis-tls-server-name", "PERMITD_REDIS_TLS_SERVER_NAME", "",
        "rediss://: the name Redis's certificate must carry, also sent as SNI (default: the "
        "host permitd dials: the URL's, or a cluster node's as the cluster announces it)"),
    STR(redis_sentinel_user, "redis-sentinel-user", "PERMITD_REDIS_SENTINEL_USER", "",
        "redis+sentinel://: the ACL user permitd authenticates as on the sentinels (with "
        "--redis-sentinel-password)"),
    STR(redis_sentinel_password, "redis-sentinel-password", "PERMITD_REDIS_SENTINEL_PASSWORD", "",
        "redis+sentinel://: the sentinels' own password (requirepass or the user's); \"\": "
        "the sentinels are not sent AUTH"),
    INT(redis_tls_insecure_skip_verify, "redis-tls-insecure-skip-verify",
        "PERMITD_REDIS_TLS_INSECURE_SKIP_VERIFY", "0", 0, 1,
        "1: accept ANY certificate from Redis (no CA, name or date check: anyone on the path "
        "can read and change every decision); logged as a warning at start"),
    STR(redis_prefix, "redis-prefix", "PERMITD_REDIS_PREFIX", "permitd:",
        "prefix of every Redis key permitd reads or writes"),
    INT(redis_timeout_ms, "redis-timeout-ms", "PERMITD_REDIS_TIMEOUT_MS", "50",
        1, 60000, "Redis connect and command timeout, in milliseconds"),
    STR(request_id_ttl, "request-id-ttl", "PERMITD_REQUEST_ID_TTL", "10m",
        "how long an Acquire's answer is kept for its request_id (a retry with the id answers "
        "it again and takes nothing): a duration, 1s .. 7d (\"90s\", \"10m\", \"1h\")"),
    STR(mysql_url, "mysql-url", "PERMITD_MYSQL_URL", "",
        "mysql://user:pass@host[:port]/db[?name=value&...]: socket=/path, ssl-mode=, "
        "ssl-ca=, ssl-cert=, ssl-key= (README \"MySQL over TLS\"); empty: no policy store"),
    INT(mysql_timeout_ms, "mysql-timeout-ms", "PERMITD_MYSQL_TIMEOUT_MS", "5000",
        100, 600000, "MySQL connect, read and write timeout, in milliseconds"),
    INT(deny_cache, "deny-cache", "PERMITD_DENY_CACHE", "4096", 0, 1000000,
        "buckets each worker remembers Redis denied (about 450 bytes each): until their wait "
        "is over, a take of the same size is denied without asking Redis; 0 = off"),
    STR(local_leases, "local-leases", "PERMITD_LOCAL_LEASES", "auto",
        "local leases for hot buckets (token_bucket and fixed_window policies; docs/algorithms.md "
        "\"Local leases\"): off, on (every bucket a worker decides), or auto (a bucket one worker "
        "decides at --local-lease-auto-rate or more); a policy's own local_lease overrides it"),
    INT(local_lease_ms, "local-lease-ms", "PERMITD_LOCAL_LEASE_MS", "100", 10, 10000,
        "how long a local lease grants its permits without Redis, in milliseconds (it also ends "
        "when they run out, and at once on an edit or reset of its policy)"),
    INT(local_lease_permits, "local-lease-permits", "PERMITD_LOCAL_LEASE_PERMITS", "0", 0,
        1000000, "permits a local lease takes from its bucket; 0 = twice what the worker decided "
        "on the bucket in the last lease's time (8 at least), at most a quarter of max_permits"),
    INT(local_lease_auto_rate, "local-lease-auto-rate", "PERMITD_LOCAL_LEASE_AUTO_RATE", "1000",
        1, 100000000, "--local-leases auto: a worker leases a bucket once it decides at least "
        "this many Acquires a second on it"),
    INT(sync_interval_ms, "sync-interval-ms", "PERMITD_SYNC_INTERVAL_MS", "5000",
        100, 3600000, "how often policies are reconciled from MySQL into Redis"),
    INT(index_prune_ms, "index-prune-ms", "PERMITD_INDEX_PRUNE_MS", "60000", 0, 3600000,
        "how often this instance prunes a slice of the bucket index (100 SCAN steps per Redis "
        "master; the entries of buckets gone full are removed), the first ten times this after "
        "its start; 0 = off (a settle still removes the entries it meets)"),
    INT(stats_policies, "stats-policies", "PERMITD_STATS_POLICIES", "10000", 1, 1000000,
        "policies the admin UI's traffic chart keeps figures for (about 4.9 KB each, taken "
        "as policies get traffic); past it the least recently active one's are dropped"),
    INT(fleet_publish_ms, "fleet-publish-ms", "PERMITD_FLEET_PUBLISH_MS", "1000", 0, 60000,
        "how often this instance writes its per-policy counts and its heartbeat into Redis "
        "for the fleet's totals and the Instances page (control/fleet.c); 0 = off"),
    INT(fleet_heartbeat_ttl_s, "fleet-heartbeat-ttl", "PERMITD_FLEET_HEARTBEAT_TTL", "60", 2,
        86400, "seconds an instance's heartbeat stays listed after its last write"),
    INT(traffic_history_days, "traffic-history-days", "PERMITD_TRAFFIC_HISTORY_DAYS", "30", 1,
        3650, "days the traffic history (decisions per policy, app and minute, in MySQL's "
        "traffic_minutes) is kept; older minutes are deleted"),
    INT(traffic_flush_ms, "traffic-flush-ms", "PERMITD_TRAFFIC_FLUSH_MS", "60000", 0, 60000,
        "how often this instance adds its decisions per policy and app to the traffic history "
        "in MySQL (what a killed instance can lose); 0 = off"),
    INT(traffic_pairs, "traffic-pairs", "PERMITD_TRAFFIC_PAIRS", "100000", 1, 10000000,
        "(policy, app) pairs counted for the traffic history (about 400 bytes each, taken as "
        "they get traffic); past it a pair is counted under its policy without the app"),
    INT(reserve_sweep_ms, "reserve-sweep-ms", "PERMITD_RESERVE_SWEEP_MS", "500", 0, 60000,
        "how often this instance settles the reservations past their expiry (issue 38: "
        "control/sweep.c); 0 = off (a late Commit or Cancel, or another instance, settles them)"),
    INT(hotkeys_publish_ms, "hotkeys-publish-ms", "PERMITD_HOTKEYS_PUBLISH_MS", "5000", 100,
        600000, "how often this instance writes each policy's hot keys (its most allowed and "
        "most denied keys of the last minute or two) to Redis, for GetHotKeys"),
    INT(reserve_workers, "reserve-workers", "PERMITD_RESERVE_WORKERS", "2", 1, 64,
        "threads that run Reserve, Commit and Cancel (a few blocking Redis round trips each, "
        "on each thread's own connections), off the HTTP and gRPC workers' loops"),
    INT(reserve_queue, "reserve-queue", "PERMITD_RESERVE_QUEUE", "256", 0, 65536,
        "Reserve, Commit and Cancel calls that may wait for a reservations thread; more at "
        "once are answered resource_exhausted (429)"),
    STR(admin_listen, "admin-listen", "PERMITD_ADMIN_LISTEN", "127.0.0.1:8081",
        "admin listener address (/healthz, /readyz), host:port"),
    STR(admin_hosts, "admin-hosts", "PERMITD_ADMIN_HOSTS", "",
        "DNS names the admin listener answers to besides localhost and IP addresses "
        "(comma-separated, e.g. admin.example.com; * = any): a Host naming anything else is "
        "refused, whatever the bind (DNS rebinding)"),
    STR(admin_ui_dir, "admin-ui-dir", "PERMITD_ADMIN_UI_DIR", "",
        "serve the admin UI from this directory (development); default: built in"),
    INT(login_workers, "login-workers", "PERMITD_LOGIN_WORKERS", "1", 1, 64,
        "threads that check admin login passwords (argon2id, ~50 ms of a core each), "
        "off the admin listener's thread"),
    INT(login_queue, "login-queue", "PERMITD_LOGIN_QUEUE", "8", 0, 1024,
        "admin logins that may wait for a password check; more at once are answered "
        "resource_exhausted (429)"),
    INT(login_account_tries, "login-account-tries", "PERMITD_LOGIN_ACCOUNT_TRIES", "10", 0,
        10000, "admin logins one user name may try per minute from all addresses together "
        "(a burst of this many, then one every 60/N s; a login that finds none left is "
        "answered resource_exhausted); 0 = no cap per account"),
    INT(core_dumps, "core-dumps", "PERMITD_CORE_DUMPS", "0", 0, 1,
        "1: allow core dumps (within the limit permitd was started with), to debug a crash; "
        "a core holds the passwords and keys in memory. 0: the process is not dumpable and "
        "its core size limit is 0"),
    STR(log_level, "log-level", "PERMITD_LOG_LEVEL", "info",
        "debug, info, warn or error"),
    STR(app_auth, "app-auth", "PERMITD_APP_AUTH", "keys",
        "keys: every API request needs Authorization: Bearer <app key> (kept in MySQL: needs "
        "--mysql-url); off: trust the app a request names (only behind a gateway that "
        "authenticates apps)"),
    STR(trusted_proxies, "trusted-proxies", "PERMITD_TRUSTED_PROXIES", "",
        "comma-separated addresses or CIDR blocks of the proxies whose X-Forwarded-For / "
        "X-Real-IP forward-auth believes (the gateway itself included); empty: none"),
};

#define NSETTINGS (sizeof(settings) / sizeof(settings[0]))

void config_usage(FILE *out)
{
    fprintf(out,
            "Usage: permitd [options]\n"
            "\n"
            "permitd answers Acquire/Peek over the Connect protocol from token\n"
            "buckets kept in Redis. Every option can also be set by its\n"
            "environment variable; a flag wins over the variable.\n"
            "\n"
            "Commands:\n"
            "  permitd migrate VERB          schema migrations (permitd migrate --help)\n"
            "  permitd admin add-user NAME   admin UI accounts (permitd admin --help)\n"
            "\n"
            "Options:\n");
    for (size_t i = 0; i < NSETTINGS; i++) {
        const struct setting *s = &settings[i];
        char flag[64];
        snprintf(flag, sizeof(flag), "--%s %s", s->name,
                 s->type == T_INT ? "N" : "VALUE");
        fprintf(out, "  %-28s %s\n  %-28s env %s", flag, s->help, "", s->env);
        if (s->def != NULL)
            fprintf(out, ", default %s", s->def);
        if (s->type == T_INT)
            fprintf(out, ", %ld..%ld", s->min, s->max);
        fputc('\n', out);
    }
    fprintf(out,
            "  %-28s print this help and exit\n"
            "  %-28s print the version and exit\n",
            "-h, --help", "--version");
}

/* Applies one textual value to setting s; `from` names where it came from
 * ("--threads" or "PERMITD_THREADS") for the error message. */
static int apply(struct config *cfg, const struct setting *s, const char *value,
                 const char *from, struct permitd_error *err)
{
    char *field = (char *)cfg + s->offset;

    if (s->type == T_STRING) {
        size_t len = strlen(value);
        if (len >= s->size)
            return permitd_error_set(err, PERMITD_EINVAL,
                                     "%s: value is %zu bytes long, the limit is %zu",
                                     from, len, s->size - 1);
        memcpy(field, value, len + 1);
        return PERMITD_OK;
    }

    char *end;
    long v;
    errno = 0;
    v = strtol(value, &end, 10);
    if (errno != 0 || end == value || *end != '\0' || v < s->min || v > s->max)
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "%s: \"%s\" is not a whole number from %ld to %ld",
                                 from, value, s->min, s->max);
    *(int *)field = (int)v;
    return PERMITD_OK;
}

static const struct setting *find(const char *name, size_t len)
{
    for (size_t i = 0; i < NSETTINGS; i++)
        if (strlen(settings[i].name) == len && strncmp(settings[i].name, name, len) == 0)
            return &settings[i];
    return NULL;
}

int config_parse_listen(const char *s, char *host, size_t hostlen, int *port,
                        struct permitd_error *err)
{
    const char *colon, *hstart = s, *hend;
    char *end;
    long p;

    if (s[0] == '[') {
        hend = strchr(s, ']');
        if (hend == NULL || hend[1] != ':')
            return permitd_error_set(err, PERMITD_EINVAL,
                                     "\"%s\" is not host:port ([v6]:port for IPv6)", s);
        hstart = s + 1;
        colon = hend + 1;
    } else {
        colon = strrchr(s, ':');
        if (colon == NULL)
            return permitd_error_set(err, PERMITD_EINVAL, "\"%s\" is not host:port", s);
        hend = colon;
    }
    if ((size_t)(hend - hstart) >= hostlen)
        return permitd_error_set(err, PERMITD_EINVAL, "\"%s\": host too long", s);
    errno = 0;
    p = strtol(colon + 1, &end, 10);
    if (errno != 0 || end == colon + 1 || *end != '\0' || p < 0 || p > 65535)
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "\"%s\": port must be a number from 0 to 65535", s);
    memcpy(host, hstart, (size_t)(hend - hstart));
    host[hend - hstart] = '\0';
    *port = (int)p;
    return PERMITD_OK;
}

/* Copies [from, to) into dst (size dstlen), or fails naming what. */
static int copy_part(char *dst, size_t dstlen, const char *from, const char *to,
                     const char *what, struct permitd_error *err)
{
    if ((size_t)(to - from) >= dstlen)
        return permitd_error_set(err, PERMITD_EINVAL, "%s is too long", what);
    memcpy(dst, from, (size_t)(to - from));
    dst[to - from] = '\0';
    return PERMITD_OK;
}

static int parse_db(const char *s, int *db, struct permitd_error *err)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < 0 || v > 65535)
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "redis url: database \"%s\" is not a number from 0 to 65535", s);
    *db = (int)v;
    return PERMITD_OK;
}

static int parse_redis_url(struct config *cfg, const char *url, struct permitd_error *err);

/* An error past the scheme names the URL as given, its password (all
 * between the user's ':' and the last '@') masked: redis://u:***@h:99999. */
int config_parse_redis_url(struct config *cfg, const char *url,
                           struct permitd_error *err)
{
    const char *at, *colon, *p = url + 8;
    char why[sizeof(err->message)];
    int rc = parse_redis_url(cfg, url, err);

    if (rc == PERMITD_OK || err == NULL || strncmp(url, "redis://", 8) != 0 ||
        (at = strrchr(p, '@')) == NULL)
        return rc;
    colon = memchr(p, ':', (size_t)(at - p));
    snprintf(why, sizeof(why), "%s", err->message);
    return permitd_error_set(err, rc, "%s (in redis://%.*s%s%.200s)", why,
                             (int)((colon ? colon : p) - p > 64 ? 64 : (colon ? colon : p) - p),
                             p, colon ? ":***" : "***", at);
}

static int parse_redis_url(struct config *cfg, const char *url, struct permitd_error *err)
{
    const char *p, *at, *slash, *hostend;
    int rc;

    cfg->redis_host[0] = cfg->redis_socket[0] = '\0';
    cfg->redis_password[0] = cfg->redis_user[0] = '\0';
    cfg->redis_port = 6379;
    cfg->redis_db = 0;

    if (strncmp(url, "unix://", 7) == 0 || strncmp(url, "redis+unix://", 13) == 0) {
        const char *path = strstr(url, "://") + 3;
        const char *q = strchr(path, '?');
        if (path[0] != '/')
            return permitd_error_set(err, PERMITD_EINVAL,
                                     "redis url: \"%s\" needs an absolute socket path "
                                     "(unix:///path/redis.sock)", url);
        rc = copy_part(cfg->redis_socket, sizeof(cfg->redis_socket), path,
                       q ? q : path + strlen(path), "redis url: socket path", err);
        if (rc == PERMITD_OK && q != NULL) {
            if (strncmp(q, "?db=", 4) != 0)
                return permitd_error_set(err, PERMITD_EINVAL,
                                         "redis url: unknown parameter \"%s\" (only ?db=N)", q);
            rc = parse_db(q + 4, &cfg->redis_db, err);
        }
        return rc;
    }
    if (strncmp(url, "redis://", 8) != 0) {
        /* A URL with credentials is named by its scheme only: what
         * follows may hold a password. */
        const char *scheme = strstr(url, "://");
        int shown = scheme ? (int)(scheme - url) + 3 : (int)strcspn(url, ":@/");
        if (strchr(url, '@') == NULL)
            return permitd_error_set(err, PERMITD_EINVAL,
                                     "redis url \"%.64s\" must start with redis:// or unix://",
                                     url);
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "redis url \"%.*s...\" must start with redis:// or unix://",
                                 shown > 32 ? 32 : shown, url);
    }
    p = url + 8;
    /* The last '@' ends the user part: a password may hold '@' or '/' (as
     * in a cluster URL), a host, port and database hold neither; the
     * database's '/' is the first after it. */
    at = strrchr(p, '@');
    slash = strchr(at != NULL ? at : p, '/');
    if (at != NULL) {
        const char *colon = memchr(p, ':', (size_t)(at - p));
        if (colon == NULL) {
            /* redis://password@host, as redis-cli accepts */
            rc = copy_part(cfg->redis_password, sizeof(cfg->redis_password), p, at,
                           "redis url: password", err);
        } else {
            rc = copy_part(cfg->redis_user, sizeof(cfg->redis_user), p, colon, "redis url: user", err);
            if (rc == PERMITD_OK)
                rc = copy_part(cfg->redis_password, sizeof(cfg->redis_password),
                               colon + 1, at, "redis url: password", err);
        }
        if (rc != PERMITD_OK)
            return rc;
        p = at + 1;
    }
    hostend = slash ? slash : p + strlen(p);
    if (hostend == p)
        return permitd_error_set(err, PERMITD_EINVAL, "redis url: no host given");
    {
        char hostport[300];
        const char *colon;
        char *end;
        long port;

        rc = copy_part(hostport, sizeof(hostport), p, hostend, "redis url: host", err);
        if (rc != PERMITD_OK)
            return rc;
        colon = strrchr(hostport, ':');
        if (colon != NULL && strchr(hostport, ']') != NULL && colon < strchr(hostport, ']'))
            colon = NULL;
        if (colon != NULL) {
            errno = 0;
            port = strtol(colon + 1, &end, 10);
            if (errno != 0 || end == colon + 1 || *end != '\0' || port < 1 || port > 65535)
                return permitd_error_set(err, PERMITD_EINVAL,
                                         "redis url: port \"%s\" is not a number from 1 to 65535",
                                         colon + 1);
            cfg->redis_port = (int)port;
        } else {
            colon = hostport + strlen(hostport);
        }
        {
            const char *h = hostport, *he = colon;
            if (*h == '[' && he > h && he[-1] == ']') {
                h++;
                he--;
            }
            rc = copy_part(cfg->redis_host, sizeof(cfg->redis_host), h, he, "redis url: host", err);
            if (rc != PERMITD_OK)
                return rc;
            if (cfg->redis_host[0] == '\0')    /* "redis://:6379", "redis://u:p@[]" */
                return permitd_error_set(err, PERMITD_EINVAL, "redis url: no host given");
        }
    }
    if (slash != NULL && slash[1] != '\0')
        return parse_db(slash + 1, &cfg->redis_db, err);
    return PERMITD_OK;
}

void config_redis_url_masked(const struct config *cfg, char *buf, size_t len)
{
    if (cfg->redis_sentinel) {
        size_t o;
        config_redis_cluster_url_masked(&cfg->redis_seeds, buf, len);
        /* "redis+cluster://..." -> "redis+sentinel://.../name" */
        if (strlen(buf) > 13) {
            char rest[1024];
            snprintf(rest, sizeof(rest), "%s", buf + 13);
            snprintf(buf, len, "redis%s+sentinel%s", cfg->redis_tls ? "s" : "", rest);
        }
        o = strlen(buf);
        if (o < len)
            snprintf(buf + o, len - o, "/%s", cfg->redis_sentinel_master);
    } else if (cfg->redis_cluster)
        config_redis_cluster_url_masked(&cfg->redis_seeds, buf, len);
    else if (cfg->redis_socket[0] != '\0')
        snprintf(buf, len, "unix://%s?db=%d", cfg->redis_socket, cfg->redis_db);
    else
        snprintf(buf, len, "redis%s://%s%s%s:%d/%d", cfg->redis_tls ? "s" : "",
                 cfg->redis_user,
                 cfg->redis_password[0] ? ":***@" : (cfg->redis_user[0] ? "@" : ""),
                 cfg->redis_host, cfg->redis_port, cfg->redis_db);
}

/* One seed of a cluster URL, [from, to): "host", "host:port", "[v6]" or
 * "[v6]:port". n is its position (from 1) for the messages. */
static int parse_seed(const char *from, const char *to, int n,
                      struct config_redis_seed *seed, struct permitd_error *err)
{
    char text[300];
    const char *h, *he, *portp = NULL;
    int len = (int)(to - from);

    if (to == from)
        return permitd_error_set(err, PERMITD_EINVAL, "redis cluster url: seed %d is empty", n);
    if ((size_t)(to - from) >= sizeof(text))
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "redis cluster url: seed %d (\"%.40s...\") is too long", n, from);
    memcpy(text, from, (size_t)len);
    text[len] = '\0';
    if (text[0] == '[') {
        h = text + 1;
        he = strchr(h, ']');
        if (he == NULL || (he[1] != '\0' && he[1] != ':'))
            return permitd_error_set(err, PERMITD_EINVAL,
                                     "redis cluster url: seed %d \"%s\" is not [address]:port",
                                     n, text);
        if (he[1] == ':')
            portp = he + 2;
    } else {
        const char *colon = strchr(text, ':');
        if (colon != NULL && strchr(colon + 1, ':') != NULL)
            return permitd_error_set(err, PERMITD_EINVAL,
                                     "redis cluster url: seed %d \"%s\": an IPv6 address goes "
                                     "in brackets ([::1]:6379)", n, text);
        h = text;
        he = colon ? colon : text + len;
        if (colon != NULL)
            portp = colon + 1;
    }
    if (he == h)
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "redis cluster url: seed %d \"%s\" has no host", n, text);
    for (const char *c = h; c < he; c++) {
        /* A name, an IPv4 address, or (in brackets) an IPv6 one with a zone. */
        if (!isalnum((unsigned char)*c) && strchr(".-_", *c) == NULL &&
            !(text[0] == '[' && strchr(":%", *c) != NULL))
            return permitd_error_set(err, PERMITD_EINVAL,
                                     "redis cluster url: seed %d \"%s\": '%c' may not appear "
                                     "in a host", n, text, isprint((unsigned char)*c) ? *c : '?');
    }
    if ((size_t)(he - h) >= sizeof(seed->host))
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "redis cluster url: seed %d: host is too long", n);
    memcpy(seed->host, h, (size_t)(he - h));
    seed->host[he - h] = '\0';
    seed->port = 6379;
    if (portp != NULL) {
        char *end;
        long port;

        errno = 0;
        port = strtol(portp, &end, 10);
        if (errno != 0 || end == portp || *end != '\0' || !isdigit((unsigned char)*portp) ||
            port < 1 || port > 65535)
            return permitd_error_set(err, PERMITD_EINVAL,
                                     "redis cluster url: seed %d \"%s\": port \"%s\" is not a "
                                     "number from 1 to 65535", n, text, portp);
        seed->port = (int)port;
    }
    return PERMITD_OK;
}

int config_parse_redis_cluster_url(const char *url, struct config_redis_cluster *out,
                                   struct permitd_error *err)
{
    static const char scheme[] = "redis+cluster://";
    const char *p, *at, *hosts, *slash, *end;
    int rc;

    memset(out, 0, sizeof(*out));
    if (strncmp(url, scheme, sizeof(scheme) - 1) != 0) {
        /* Name the scheme only: what follows may hold a password. */
        const char *sep = strstr(url, "://");
        if (sep == NULL)
            return permitd_error_set(err, PERMITD_EINVAL,
                                     "redis cluster url: no scheme: it reads "
                                     "redis+cluster://host1:port,host2:port,...");
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "redis cluster url: the scheme \"%.*s\" is not redis+cluster "
                                 "(redis+cluster://host1:port,host2:port,...)",
                                 (int)(sep - url > 32 ? 32 : sep - url), url);
    }
    p = url + sizeof(scheme) - 1;
    /* The last '@' ends the user part: a password may hold '@' or '/', a
     * host list holds neither. */
    at = strrchr(p, '@');
    if (at != NULL) {
        const char *colon = memchr(p, ':', (size_t)(at - p));
        if (colon == NULL) {
            rc = copy_part(out->password, sizeof(out->password), p, at,
                           "redis cluster url: password", err);
        } else {
            rc = copy_part(out->user, sizeof(out->user), p, colon, "redis cluster url: user", err);
            if (rc == PERMITD_OK)
                rc = copy_part(out->password, sizeof(out->password), colon + 1, at,
                               "redis cluster url: password", err);
        }
        if (rc != PERMITD_OK)
            return rc;
        if (out->password[0] == '\0')
            return permitd_error_set(err, PERMITD_EINVAL,
                                     "redis cluster url: empty password before '@'%s%s%s",
                                     out->user[0] ? " (user \"" : "", out->user,
                                     out->user[0] ? "\")" : "");
        hosts = at + 1;
    } else {
        hosts = p;
    }
    slash = strchr(hosts, '/');
    end = slash ? slash : hosts + strlen(hosts);
    if (end == hosts)
        return permitd_error_set(err, PERMITD_EINVAL, "redis cluster url: no seed node given");
    for (const char *s = hosts; s <= end; ) {
        const char *comma = memchr(s, ',', (size_t)(end - s));
        const char *se = comma ? comma : end;
        int n = out->nseeds + 1;

        if (out->nseeds == CONFIG_REDIS_SEEDS_MAX)
            return permitd_error_set(err, PERMITD_EINVAL,
                                     "redis cluster url: more than %d seed nodes",
                                     CONFIG_REDIS_SEEDS_MAX);
        if ((rc = parse_seed(s, se, n, &out->seeds[out->nseeds], err)) != PERMITD_OK)
            return rc;
        for (int i = 0; i < out->nseeds; i++)
            if (out->seeds[i].port == out->seeds[n - 1].port &&
                strcmp(out->seeds[i].host, out->seeds[n - 1].host) == 0)
                return permitd_error_set(err, PERMITD_EINVAL,
                                         "redis cluster url: seed %d \"%.*s\" repeats seed %d",
                                         n, (int)(se - s), s, i + 1);
        out->nseeds++;
        s = se + 1;
    }
    if (slash != NULL && slash[1] != '\0' && strcmp(slash + 1, "0") != 0)
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "redis cluster url: database \"%s\": a Redis Cluster has "
                                 "database 0 only", slash + 1);
    return PERMITD_OK;
}

int config_parse_redis_sentinel_url(const char *url, struct config_redis_cluster *out,
                                    char *master, size_t master_len, struct permitd_error *err)
{
    static const char scheme[] = "redis+sentinel://";
    char seeds[1024];
    const char *p, *at, *slash;
    int rc;

    memset(out, 0, sizeof(*out));
    if (strncmp(url, scheme, sizeof(scheme) - 1) != 0)
        return permitd_error_set(err, PERMITD_EINVAL, "redis sentinel url: it reads "
                                 "redis+sentinel://host1:port,host2:port,.../master-name");
    p = url + sizeof(scheme) - 1;
    /* The last '@' ends the user part (a password may hold '/'); the first
     * '/' after it starts the master's name. */
    at = strrchr(p, '@');
    slash = strchr(at != NULL ? at + 1 : p, '/');
    if (slash == NULL || slash[1] == '\0')
        return permitd_error_set(err, PERMITD_EINVAL, "redis sentinel url: no master name: it "
                                 "reads redis+sentinel://host1:port,host2:port,.../master-name");
    if (strlen(slash + 1) >= master_len || strpbrk(slash + 1, "/ ?#") != NULL)
        return permitd_error_set(err, PERMITD_EINVAL, "redis sentinel url: the master name "
                                 "\"%.64s\" is longer than %zu bytes or holds '/', ' ', '?' or "
                                 "'#'", slash + 1, master_len - 1);
    if (snprintf(seeds, sizeof(seeds), "redis+cluster://%.*s", (int)(slash - p), p) >=
        (int)sizeof(seeds))
        return permitd_error_set(err, PERMITD_EINVAL, "redis sentinel url: too long");
    if ((rc = config_parse_redis_cluster_url(seeds, out, err)) != PERMITD_OK && err != NULL) {
        /* The seeds' messages say "redis cluster url: seed": they are the
         * sentinels here. */
        char msg[sizeof(err->message)];
        const char *tail = strncmp(err->message, "redis cluster url: ", 19) == 0
                           ? err->message + 19 : err->message;
        snprintf(msg, sizeof(msg), "redis sentinel url: %.480s", tail);
        snprintf(err->message, sizeof(err->message), "%s", msg);
    }
    if (rc != PERMITD_OK)
        return rc;
    snprintf(master, master_len, "%s", slash + 1);
    return PERMITD_OK;
}

void config_redis_cluster_url_masked(const struct config_redis_cluster *c, char *buf,
                                     size_t len)
{
    size_t o;

    if (len == 0)
        return;
    o = (size_t)snprintf(buf, len, "redis+cluster://%s%s", c->user,
                         c->password[0] ? ":***@" : "");
    for (int i = 0; i < c->nseeds && o < len; i++) {
        const struct config_redis_seed *s = &c->seeds[i];
        int v6 = strchr(s->host, ':') != NULL;
        o += (size_t)snprintf(buf + o, len - o, "%s%s%s%s:%d", i ? "," : "", v6 ? "[" : "",
                              s->host, v6 ? "]" : "", s->port);
    }
}

/* Percent-decodes [from, to) into dst (dstlen bytes). */
static int unescape(char *dst, size_t dstlen, const char *from, const char *to,
                    const char *what, struct permitd_error *err)
{
    size_t o = 0;

    for (const char *p = from; p < to; p++) {
        int c = (unsigned char)*p;
        if (c == '%' && to - p >= 3 && isxdigit((unsigned char)p[1]) &&
            isxdigit((unsigned char)p[2])) {
            char hex[3] = {p[1], p[2], '\0'};
            c = (int)strtol(hex, NULL, 16);
            p += 2;
        }
        if (c == '\0')    /* would cut the C string short, or leave it empty */
            return permitd_error_set(err, PERMITD_EINVAL,
                                     "mysql url: %s may not hold %%00 (a NUL byte)", what);
        if (o + 1 >= dstlen)
            return permitd_error_set(err, PERMITD_EINVAL, "%s is too long", what);
        dst[o++] = (char)c;
    }
    dst[o] = '\0';
    return PERMITD_OK;
}

static const char *const mysql_ssl_modes[] = {
    [CONFIG_MYSQL_SSL_PREFERRED] = "PREFERRED",
    [CONFIG_MYSQL_SSL_DISABLED] = "DISABLED",
    [CONFIG_MYSQL_SSL_REQUIRED] = "REQUIRED",
    [CONFIG_MYSQL_SSL_VERIFY_CA] = "VERIFY_CA",
    [CONFIG_MYSQL_SSL_VERIFY_IDENTITY] = "VERIFY_IDENTITY",
};

const char *config_mysql_ssl_mode_name(enum config_mysql_ssl_mode mode)
{
    return (unsigned int)mode < sizeof(mysql_ssl_modes) / sizeof(mysql_ssl_modes[0])
               ? mysql_ssl_modes[mode] : "?";
}

/* The query of a MySQL URL (after the '?'): name=value pairs joined by '&',
 * each name at most once, then the TLS settings checked together. An
 * unknown name is quoted (cut to 40 bytes), a value never is: it may be a
 * secret pasted in the wrong place. */
static int mysql_params(struct config_mysql *m, const char *q, struct permitd_error *err)
{
    static const char *const names[] = {"socket", "ssl-mode", "ssl-ca", "ssl-cert", "ssl-key"};
    char *const dst[] = {m->socket, NULL, m->ssl_ca, m->ssl_cert, m->ssl_key};
    const size_t dstlen[] = {sizeof(m->socket), 0, sizeof(m->ssl_ca), sizeof(m->ssl_cert),
                             sizeof(m->ssl_key)};
    int seen[5] = {0};
    char mode[24];
    int rc;

    for (const char *p = q;; p++) {
        const char *amp = p + strcspn(p, "&"), *eq = memchr(p, '=', (size_t)(amp - p));
        size_t nlen = eq ? (size_t)(eq - p) : (size_t)(amp - p);
        size_t i = 0;

        while (i < 5 && !(strlen(names[i]) == nlen && strncmp(p, names[i], nlen) == 0))
            i++;
        if (i == 5 || eq == NULL)
            return permitd_error_set(err, PERMITD_EINVAL,
                                     "mysql url: %s parameter \"%.*s\" (known: socket=, "
                                     "ssl-mode=, ssl-ca=, ssl-cert=, ssl-key=)",
                                     i == 5 ? "unknown" : "no value for the",
                                     nlen > 40 ? 40 : (int)nlen, p);
        if (seen[i]++)
            return permitd_error_set(err, PERMITD_EINVAL, "mysql url: %s= is given twice",
                                     names[i]);
        if (dst[i] != NULL)
            rc = unescape(dst[i], dstlen[i], eq + 1, amp, names[i], err);
        else
            rc = unescape(mode, sizeof(mode), eq + 1, amp, names[i], err);
        if (rc != PERMITD_OK)
            return rc;
        if (dst[i] == NULL) {
            size_t k = 0;
            while (k < 5 && strcasecmp(mode, mysql_ssl_modes[k]) != 0)
                k++;
            if (k == 5)
                return permitd_error_set(err, PERMITD_EINVAL,
                                         "mysql url: ssl-mode is none of DISABLED, "
                                         "PREFERRED, REQUIRED, VERIFY_CA, VERIFY_IDENTITY");
            m->ssl_mode = (enum config_mysql_ssl_mode)k;
        } else if (dst[i][0] == '\0') {
            return permitd_error_set(err, PERMITD_EINVAL, "mysql url: %s= is empty", names[i]);
        }
        if (*(p = amp) == '\0')
            break;
    }
    if (seen[0] && m->socket[0] != '/')
        return permitd_error_set(err, PERMITD_EINVAL, "mysql url: socket must be an absolute path");
    if ((m->ssl_cert[0] != '\0') != (m->ssl_key[0] != '\0'))
        return permitd_error_set(err, PERMITD_EINVAL, "mysql url: ssl-cert and ssl-key go "
                                 "together (a client certificate and its private key)");
    if (m->ssl_mode == CONFIG_MYSQL_SSL_DISABLED && (m->ssl_ca[0] || m->ssl_cert[0]))
        return permitd_error_set(err, PERMITD_EINVAL, "mysql url: ssl-mode=DISABLED uses no "
                                 "ssl-ca, ssl-cert or ssl-key");
    if (m->ssl_ca[0] != '\0' && m->ssl_mode != CONFIG_MYSQL_SSL_VERIFY_CA &&
        m->ssl_mode != CONFIG_MYSQL_SSL_VERIFY_IDENTITY)
        return permitd_error_set(err, PERMITD_EINVAL, "mysql url: ssl-ca is for ssl-mode="
                                 "VERIFY_IDENTITY (or VERIFY_CA), not %s",
                                 mysql_ssl_modes[m->ssl_mode]);
    if (m->ssl_mode == CONFIG_MYSQL_SSL_VERIFY_CA && m->ssl_ca[0] == '\0')
        return permitd_error_set(err, PERMITD_EINVAL, "mysql url: ssl-mode=VERIFY_CA needs "
                                 "ssl-ca (the CA the server's certificate must come from)");
    return PERMITD_OK;
}

int config_parse_mysql_url(const char *url, struct config_mysql *m,
                           struct permitd_error *err)
{
    const char *p, *at, *colon, *slash, *q, *hostend, *end;
    int rc;

    memset(m, 0, sizeof(*m));
    m->port = 3306;
    if (strncmp(url, "mysql://", 8) != 0) {
        const char *scheme = strstr(url, "://");
        int shown = scheme ? (int)(scheme - url) + 3 : (int)strcspn(url, ":@/");
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "mysql url \"%.*s...\" must look like "
                                 "mysql://user:pass@host:port/db", shown > 32 ? 32 : shown, url);
    }
    p = url + 8;
    end = p + strlen(p);
    q = strchr(p, '?');
    if (q != NULL)
        end = q;
    slash = memchr(p, '/', (size_t)(end - p));
    at = NULL;
    for (const char *c = p; c < (slash ? slash : end); c++)
        if (*c == '@')
            at = c;
    if (at == NULL)
        return permitd_error_set(err, PERMITD_EINVAL, "mysql url: no user given (mysql://user:pass@host/db)");
    colon = memchr(p, ':', (size_t)(at - p));
    if ((rc = unescape(m->user, sizeof(m->user), p, colon ? colon : at, "user", err)) != PERMITD_OK)
        return rc;
    if (colon != NULL &&
        (rc = unescape(m->password, sizeof(m->password), colon + 1, at, "password", err)) != PERMITD_OK)
        return rc;
    if (m->user[0] == '\0')
        return permitd_error_set(err, PERMITD_EINVAL, "mysql url: no user given");
    p = at + 1;
    hostend = slash ? slash : end;
    {
        const char *pc = NULL;
        if (*p == '[') {
            const char *rb = memchr(p, ']', (size_t)(hostend - p));
            if (rb == NULL)
                return permitd_error_set(err, PERMITD_EINVAL, "mysql url: unclosed [ in host");
            if ((rc = copy_part(m->host, sizeof(m->host), p + 1, rb, "mysql url: host", err)) != PERMITD_OK)
                return rc;
            if (rb + 1 < hostend && rb[1] == ':')
                pc = rb + 1;
        } else {
            pc = memchr(p, ':', (size_t)(hostend - p));
            if ((rc = copy_part(m->host, sizeof(m->host), p, pc ? pc : hostend, "mysql url: host", err)) != PERMITD_OK)
                return rc;
        }
        if (pc != NULL) {
            char port[8];
            char *e;
            long v;
            if ((size_t)(hostend - pc - 1) >= sizeof(port))
                return permitd_error_set(err, PERMITD_EINVAL, "mysql url: port is not a number from 1 to 65535");
            memcpy(port, pc + 1, (size_t)(hostend - pc - 1));
            port[hostend - pc - 1] = '\0';
            errno = 0;
            v = strtol(port, &e, 10);
            if (errno != 0 || e == port || *e != '\0' || v < 1 || v > 65535)
                return permitd_error_set(err, PERMITD_EINVAL,
                                         "mysql url: port \"%s\" is not a number from 1 to 65535", port);
            m->port = (int)v;
        }
    }
    if (m->host[0] == '\0')
        return permitd_error_set(err, PERMITD_EINVAL, "mysql url: no host given");
    if (slash == NULL || slash + 1 >= end)
        return permitd_error_set(err, PERMITD_EINVAL, "mysql url: no database given (mysql://user:pass@host/db)");
    if ((rc = unescape(m->database, sizeof(m->database), slash + 1, end, "database", err)) != PERMITD_OK)
        return rc;
    if (q != NULL && (rc = mysql_params(m, q + 1, err)) != PERMITD_OK)
        return rc;
    return PERMITD_OK;
}

void config_mysql_url_masked(const struct config_mysql *m, char *buf, size_t len)
{
    int mode = m->ssl_mode != CONFIG_MYSQL_SSL_PREFERRED;

    snprintf(buf, len, "mysql://%s%s@%s:%d/%s%s%s%s%s", m->user, m->password[0] ? ":***" : "",
             m->host, m->port, m->database, m->socket[0] ? "?socket=" : "", m->socket,
             mode ? (m->socket[0] ? "&ssl-mode=" : "?ssl-mode=") : "",
             mode ? config_mysql_ssl_mode_name(m->ssl_mode) : "");
}

/* The Redis prefix ends up inside every key name; braces would move the
 * Cluster hash tag off the policy name, and control characters make keys
 * unreadable in redis-cli. */
static int check_prefix(const char *prefix, struct permitd_error *err)
{
    for (const char *c = prefix; *c; c++)
        if (*c == '{' || *c == '}' || (unsigned char)*c < 0x21 || *c == 0x7f)
            return permitd_error_set(err, PERMITD_EINVAL,
                                     "--redis-prefix (PERMITD_REDIS_PREFIX): \"%s\" may not "
                                     "hold braces, spaces or control characters", prefix);
    return PERMITD_OK;
}

/* --request-id-ttl: a whole number and a unit (ms, s, m, h, d), 1 s .. 7 d,
 * into cfg->request_id_ttl_ms. */
static int parse_request_id_ttl(struct config *cfg, struct permitd_error *err)
{
    static const struct { const char *unit; long long ms; } units[] = {
        {"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {"d", 86400000}};
    const char *s = cfg->request_id_ttl;
    char *end;
    long long v = (*s >= '0' && *s <= '9') ? strtoll(s, &end, 10) : -1;

    for (size_t i = 0; v >= 0 && i < sizeof(units) / sizeof(units[0]); i++)
        if (strcmp(end, units[i].unit) == 0 && v <= 7LL * 86400000 / units[i].ms) {
            cfg->request_id_ttl_ms = v * units[i].ms;
            if (cfg->request_id_ttl_ms >= 1000)
                return PERMITD_OK;
        }
    return permitd_error_set(err, PERMITD_EINVAL, "--request-id-ttl (PERMITD_REQUEST_ID_TTL): "
                             "\"%s\" is no duration from 1s to 7d (a whole number and ms, s, "
                             "m, h or d: \"10m\")", s);
}

/* Puts the setting's name in front of the message a parser left in err. */
static int prefixed(struct permitd_error *err, const char *setting)
{
    char why[sizeof(err->message)];

    memcpy(why, err->message, sizeof(why));
    return permitd_error_set(err, PERMITD_EINVAL, "%s: %s", setting, why);
}

int config_load(struct config *cfg, int argc, char **argv, FILE *out,
                struct permitd_error *err)
{
    char from[96], plain_url[sizeof(cfg->redis_url)];
    int rc;
    enum log_level lvl;

    memset(cfg, 0, sizeof(*cfg));
    for (size_t i = 0; i < NSETTINGS; i++) {
        const struct setting *s = &settings[i];
        const char *env = getenv(s->env);
        if (s->def != NULL && (rc = apply(cfg, s, s->def, s->name, err)) != PERMITD_OK)
            return rc;
        if (env != NULL && (rc = apply(cfg, s, env, s->env, err)) != PERMITD_OK)
            return rc;
    }
    if (getenv("PERMITD_THREADS") == NULL) {
        /* One event loop per CPU: a worker never waits for Redis on an
         * Acquire (its loop pipelines them), so more loops than CPUs only
         * add thread switches. */
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        n = n < 1 ? 1 : n;
        cfg->threads = n > 256 ? 256 : (int)n;
    }

    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *name, *eq, *value;
        const struct setting *s;
        size_t namelen;

        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            config_usage(out);
            return 1;
        }
        if (strcmp(arg, "--version") == 0) {
            fprintf(out, "permitd %s\n", PERMITD_VERSION);
            return 1;
        }
        if (strncmp(arg, "--", 2) != 0)
            return permitd_error_set(err, PERMITD_EINVAL,
                                     "unexpected argument \"%s\" (see --help)", arg);
        name = arg + 2;
        eq = strchr(name, '=');
        namelen = eq ? (size_t)(eq - name) : strlen(name);
        s = find(name, namelen);
        if (s == NULL)
            return permitd_error_set(err, PERMITD_EINVAL,
                                     "unknown option \"%.*s\" (see --help)",
                                     (int)namelen + 2, arg);
        if (eq != NULL) {
            value = eq + 1;
        } else if (i + 1 < argc) {
            value = argv[++i];
        } else {
            return permitd_error_set(err, PERMITD_EINVAL, "--%s needs a value", s->name);
        }
        snprintf(from, sizeof(from), "--%s", s->name);
        if ((rc = apply(cfg, s, value, from, err)) != PERMITD_OK)
            return rc;
    }

    if (config_parse_listen(cfg->listen, cfg->listen_host, sizeof(cfg->listen_host),
                            &cfg->listen_port, err) != PERMITD_OK)
        return prefixed(err, "--listen (PERMITD_LISTEN)");
    if (config_parse_listen(cfg->admin_listen, cfg->admin_listen_host,
                            sizeof(cfg->admin_listen_host), &cfg->admin_listen_port,
                            err) != PERMITD_OK)
        return prefixed(err, "--admin-listen (PERMITD_ADMIN_LISTEN)");
    if (cfg->grpc_listen[0] != '\0' &&
        config_parse_listen(cfg->grpc_listen, cfg->grpc_listen_host,
                            sizeof(cfg->grpc_listen_host), &cfg->grpc_listen_port,
                            err) != PERMITD_OK)
        return prefixed(err, "--grpc-listen (PERMITD_GRPC_LISTEN)");
    /* rediss://, rediss+cluster:// and rediss+sentinel://: the plain URL's
     * form, over TLS. */
    cfg->redis_tls = strncmp(cfg->redis_url, "rediss://", 9) == 0 ||
                     strncmp(cfg->redis_url, "rediss+cluster://", 17) == 0 ||
                     strncmp(cfg->redis_url, "rediss+sentinel://", 18) == 0;
    snprintf(plain_url, sizeof(plain_url), "redis%s", cfg->redis_url + (cfg->redis_tls ? 6 : 5));
    if (!cfg->redis_tls)
        snprintf(plain_url, sizeof(plain_url), "%s", cfg->redis_url);
    cfg->redis_cluster = strncmp(plain_url, "redis+cluster://", 16) == 0;
    cfg->redis_sentinel = strncmp(plain_url, "redis+sentinel://", 17) == 0;
    if (cfg->redis_sentinel) {
        if (config_parse_redis_sentinel_url(plain_url, &cfg->redis_seeds,
                                            cfg->redis_sentinel_master,
                                            sizeof(cfg->redis_sentinel_master),
                                            err) != PERMITD_OK)
            return prefixed(err, "--redis-url (PERMITD_REDIS_URL)");
        cfg->redis_host[0] = cfg->redis_socket[0] = '\0';
        cfg->redis_port = 0;
        cfg->redis_db = 0;
        snprintf(cfg->redis_user, sizeof(cfg->redis_user), "%s", cfg->redis_seeds.user);
        snprintf(cfg->redis_password, sizeof(cfg->redis_password), "%s", cfg->redis_seeds.password);
    } else if (cfg->redis_cluster) {
        /* The seeds; AUTH on every node with the URL's user and password. */
        if (config_parse_redis_cluster_url(plain_url, &cfg->redis_seeds, err) != PERMITD_OK)
            return prefixed(err, "--redis-url (PERMITD_REDIS_URL)");
        cfg->redis_host[0] = cfg->redis_socket[0] = '\0';
        cfg->redis_port = 0;
        cfg->redis_db = 0;
        snprintf(cfg->redis_user, sizeof(cfg->redis_user), "%s", cfg->redis_seeds.user);
        snprintf(cfg->redis_password, sizeof(cfg->redis_password), "%s", cfg->redis_seeds.password);
    } else if (config_parse_redis_url(cfg, plain_url, err) != PERMITD_OK) {
        return prefixed(err, "--redis-url (PERMITD_REDIS_URL)");
    }
    if ((cfg->redis_tls_cert_file[0] == '\0') != (cfg->redis_tls_key_file[0] == '\0'))
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "--redis-tls-cert-file (PERMITD_REDIS_TLS_CERT_FILE) and "
                                 "--redis-tls-key-file (PERMITD_REDIS_TLS_KEY_FILE) go together: "
                                 "\"%s\" was given without the other",
                                 cfg->redis_tls_cert_file[0] ? cfg->redis_tls_cert_file
                                                             : cfg->redis_tls_key_file);
    if (cfg->mysql_url[0] != '\0' &&
        config_parse_mysql_url(cfg->mysql_url, &cfg->mysql, err) != PERMITD_OK)
        return prefixed(err, "--mysql-url (PERMITD_MYSQL_URL)");
    if ((rc = check_admin_hosts(cfg->admin_hosts, err)) != PERMITD_OK)
        return rc;
    if ((rc = check_prefix(cfg->redis_prefix, err)) != PERMITD_OK)
        return rc;
    if ((rc = parse_request_id_ttl(cfg, err)) != PERMITD_OK)
        return rc;
    if ((cfg->tls_cert[0] == '\0') != (cfg->tls_key[0] == '\0'))
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "--tls-cert (PERMITD_TLS_CERT) and --tls-key (PERMITD_TLS_KEY) "
                                 "go together: \"%s\" was given without the other",
                                 cfg->tls_cert[0] ? cfg->tls_cert : cfg->tls_key);
    if ((cfg->grpc_tls_cert[0] == '\0') != (cfg->grpc_tls_key[0] == '\0'))
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "--grpc-tls-cert (PERMITD_GRPC_TLS_CERT) and --grpc-tls-key "
                                 "(PERMITD_GRPC_TLS_KEY) go together: \"%s\" was given without "
                                 "the other",
                                 cfg->grpc_tls_cert[0] ? cfg->grpc_tls_cert : cfg->grpc_tls_key);
    if (log_level_parse(cfg->log_level, &lvl, err) != PERMITD_OK)
        return prefixed(err, "--log-level (PERMITD_LOG_LEVEL)");
    if (strcmp(cfg->app_auth, "keys") != 0 && strcmp(cfg->app_auth, "off") != 0)
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "--app-auth (PERMITD_APP_AUTH): \"%s\" is not keys or off",
                                 cfg->app_auth);
    cfg->app_auth_off = strcmp(cfg->app_auth, "off") == 0;
    if (strcmp(cfg->local_leases, "off") == 0)
        cfg->local_leases_mode = CONFIG_LOCAL_LEASES_OFF;
    else if (strcmp(cfg->local_leases, "on") == 0)
        cfg->local_leases_mode = CONFIG_LOCAL_LEASES_ON;
    else if (strcmp(cfg->local_leases, "auto") == 0)
        cfg->local_leases_mode = CONFIG_LOCAL_LEASES_AUTO;
    else
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "--local-leases (PERMITD_LOCAL_LEASES): \"%s\" is not off, on "
                                 "or auto", cfg->local_leases);
    if (cidr_list_parse(cfg->trusted_proxies, &cfg->trusted_proxy_list, err) != PERMITD_OK)
        return prefixed(err, "--trusted-proxies (PERMITD_TRUSTED_PROXIES)");
    return PERMITD_OK;
}
