/*
 * config.h - every setting of permitd, filled and validated once.
 *
 * One table (config.c) names each setting, its flag, its environment
 * variable, its type, default and bounds; config_load() fills a struct
 * config from the environment and then argv (flags win), and refuses a bad
 * value with a message that names the setting and the value. Everyone else
 * gets a `const struct config *`.
 */
#ifndef PERMITD_CONFIG_H
#define PERMITD_CONFIG_H

#include <stdio.h>

#include "core/cidr.h"
#include "core/status.h"

/* TLS 1.2 and 1.3 only; key exchanges with forward secrecy only (no
 * static RSA, which the default SECURE levels still offer), and no CBC or
 * SHA-1 MAC suites: what is left is ECDHE with AES-GCM, AES-CCM or
 * ChaCha20-Poly1305, and TLS 1.3's own. */
#define CONFIG_TLS_PRIORITIES \
    "SECURE256:+SECURE128:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:-RSA:-DHE-RSA:-DHE-DSS:" \
    "-AES-256-CBC:-AES-128-CBC:-CAMELLIA-256-CBC:-CAMELLIA-128-CBC:-SHA1:%SERVER_PRECEDENCE"

/* The seed nodes of a Redis Cluster: where permitd asks for the slot map
 * (cluster.c). Any node will do; more than one lets a start survive a dead
 * one. */
#define CONFIG_REDIS_SEEDS_MAX 16

struct config_redis_cluster {
    char user[128];
    char password[256];
    int nseeds;
    struct config_redis_seed {
        char host[256];               /* IP (v6 without brackets) or host name */
        int port;
    } seeds[CONFIG_REDIS_SEEDS_MAX];
};

/* --local-leases, parsed (config.local_leases_mode); a policy's own
 * local_lease (migration 0016) uses the same numbers, and 0 for "as the
 * flag says". */
enum { CONFIG_LOCAL_LEASES_OFF = 1, CONFIG_LOCAL_LEASES_ON = 2, CONFIG_LOCAL_LEASES_AUTO = 3 };

struct config {
    /* API listener */
    char listen[256];             /* as given, "host:port" */
    char listen_host[256];        /* parsed */
    int listen_port;
    int threads;                  /* HTTP worker threads, one Redis conn each */
    int max_body_bytes;           /* largest request body accepted */
    int max_connections;
    int connection_timeout_s;     /* idle/slow connection limit */
    int header_timeout_s;         /* whole request head, however steady its bytes */
    int request_timeout_s;        /* whole request, head and body */
    int first_byte_timeout_s;     /* a new connection's silence */
    int max_connections_per_ip;   /* 0 = no limit */
    int max_header_bytes;         /* per connection: request line + headers */
    int access_log;               /* 1: one log line per request */
    char tls_cert[1024];          /* PEM files; both set = HTTPS on both listeners */
    char tls_key[1024];
    char tls_priorities[512];     /* GnuTLS priority string of both listeners */

    /* gRPC listener (issue 25): HTTP/2, off when grpc_listen is "" */
    char grpc_listen[256];
    char grpc_listen_host[256];   /* parsed */
    int grpc_listen_port;
    int grpc_max_streams;         /* concurrent streams per connection */
    int grpc_request_timeout_s;   /* a call's request, HEADERS to END_STREAM */
    char grpc_tls_cert[1024];     /* PEM files; both set = TLS (ALPN h2) */
    char grpc_tls_key[1024];

    /* Redis */
    char redis_url[1024];         /* as given; may hold a password */
    char redis_host[256];         /* parsed from redis_url */
    int redis_port;
    char redis_socket[256];       /* unix socket path, or "" */
    char redis_password[256];
    char redis_user[128];
    int redis_db;
    char redis_prefix[128];       /* prepended to every key */
    int redis_timeout_ms;         /* per command and connect */
    int redis_cluster;            /* 1: redis_url is redis+cluster:// (the seeds below; the
                                   * user and password are copied to redis_user/_password) */
    struct config_redis_cluster redis_seeds;
    int redis_sentinel;           /* 1: redis_url is redis+sentinel:// (the sentinels in
                                   * redis_seeds, the master's name below; the user and
                                   * password, the master's, in redis_user/_password) */
    char redis_sentinel_master[128];
    char redis_sentinel_user[128];    /* the sentinels' own AUTH; "" password: none */
    char redis_sentinel_password[256];
    int redis_tls;                /* 1: rediss://, rediss+cluster:// or rediss+sentinel://
                                   * (stores/redis_tls.c) */
    char redis_tls_ca_file[1024]; /* "" = the system's trust store */
    char redis_tls_cert_file[1024];   /* mutual TLS: both or neither */
    char redis_tls_key_file[1024];
    char redis_tls_server_name[256];  /* "" = the host dialled */
    int redis_tls_insecure_skip_verify;
    char request_id_ttl[24];      /* how long a take's answer is kept for its request id */
    long long request_id_ttl_ms;  /* parsed: 1 s .. 7 d */
    int deny_cache;               /* deny cache entries per worker; 0 = off */
    char local_leases[8];         /* "off", "on" or "auto" (decisions/locallease.h) */
    int local_leases_mode;        /* derived: LOCALLEASE_OFF, _ON, _AUTO */
    int local_lease_ms;           /* how long a lease grants locally */
    int local_lease_permits;      /* permits a lease takes; 0 = sized by the traffic seen */
    int local_lease_auto_rate;    /* auto: decisions a second one worker sees on one
                                     bucket before it leases */

    /* MySQL policy store */
    char mysql_url[1024];         /* as given; "" = no store (policies by hand) */
    struct config_mysql {
        char host[256];
        int port;
        char socket[256];
        char user[128];
        char password[256];
        char database[128];
        enum config_mysql_ssl_mode {      /* ?ssl-mode=, as MySQL's clients spell it */
            CONFIG_MYSQL_SSL_PREFERRED,   /* the default: TLS when the server offers it */
            CONFIG_MYSQL_SSL_DISABLED,
            CONFIG_MYSQL_SSL_REQUIRED,
            CONFIG_MYSQL_SSL_VERIFY_CA,
            CONFIG_MYSQL_SSL_VERIFY_IDENTITY,
        } ssl_mode;
        char ssl_ca[512];         /* ?ssl-ca=: "" = the system's trust store */
        char ssl_cert[512];       /* ?ssl-cert= and ?ssl-key=: a client certificate */
        char ssl_key[512];
    } mysql;                      /* parsed from mysql_url */
    int mysql_timeout_ms;         /* connect, read and write timeout */
    int sync_interval_ms;         /* MySQL -> Redis reconcile period */
    int index_prune_ms;           /* a slice of the bucket index prune this often; 0 = off */
    int stats_policies;           /* policies the UI's chart keeps figures for */
    int fleet_publish_ms;         /* fleet counts + heartbeat into Redis this often; 0 = off */
    int fleet_heartbeat_ttl_s;    /* a heartbeat's life in Redis */
    int traffic_history_days;     /* traffic_minutes' rows are kept this long (issue 39) */
    int traffic_flush_ms;         /* counts per policy and app added to MySQL this often; 0 = off */
    int traffic_pairs;            /* (policy, app) pairs counted for the history */
    int hotkeys_publish_ms;       /* how often the hot keys go to Redis (decisions/hotkeys.h) */
    int reserve_sweep_ms;         /* the reservations' expiry sweep (control/sweep.h); 0 = off */

    /* Admin listener: /healthz, /readyz (and the admin UI) */
    char admin_listen[256];
    char admin_listen_host[256];
    int admin_listen_port;
    char admin_hosts[1024];       /* DNS names the admin listener answers to; "*": any */
    char admin_ui_dir[1024];      /* serve the UI from here (development); "" = embedded */
    int reserve_workers;          /* threads that run Reserve, Commit, Cancel */
    int reserve_queue;            /* reservation calls that may wait for one; more: 429 */
    int login_workers;            /* threads that check login passwords (argon2id) */
    int login_queue;              /* password checks that may wait for one; more: 429 */
    int core_dumps;               /* 1: leave core dumps on (debugging); 0: off */
    int login_account_tries;      /* logins per minute per user name, all addresses; 0: off */

    char log_level[16];

    /* API keys (issue 21) */
    char app_auth[8];             /* "keys" or "off" */
    int app_auth_off;             /* derived: app_auth is "off" */

    /* Forward-auth (issue 25): the proxies whose client-address headers
     * are believed */
    char trusted_proxies[2048];   /* as given: "10.0.0.0/8,127.0.0.1" */
    struct cidr_list trusted_proxy_list;    /* parsed */
};

/* Fills cfg from the environment and argv. Returns PERMITD_OK;
 * PERMITD_EINVAL with err->message naming the setting and the bad value;
 * or 1 when --help or --version was printed to out (the caller exits 0). */
int config_load(struct config *cfg, int argc, char **argv, FILE *out,
                struct permitd_error *err);

/* Prints the --help text to out. */
void config_usage(FILE *out);

/* Parses a Redis URL into cfg's redis_* fields:
 *   redis://[[user]:password@]host[:port][/db]   (port 6379, db 0)
 *   unix:///path/to/redis.sock[?db=N]            (also redis+unix://)
 * Returns PERMITD_OK or PERMITD_EINVAL with err->message saying what is
 * wrong (the password is never echoed). */
int config_parse_redis_url(struct config *cfg, const char *url,
                           struct permitd_error *err);

/* Parses a cluster URL into *out:
 *   redis+cluster://[[user]:password@]host1[:port],host2[:port],...[/0]
 * (port 6379; "[v6]:port" for IPv6; a cluster has database 0 only). Returns
 * PERMITD_OK or PERMITD_EINVAL with err->message naming the bad part (the
 * seed by its position and text), never echoing the password. */
int config_parse_redis_cluster_url(const char *url, struct config_redis_cluster *out,
                                   struct permitd_error *err);

/* The cluster URL with any password replaced by "***", for logs. */
/* Parses redis+sentinel://[[user]:pass@]host:port,host:port,.../master-name:
 * the sentinels into out (as a cluster's seeds: the user and password are
 * the master's), the name into master. PERMITD_OK or EINVAL. */
int config_parse_redis_sentinel_url(const char *url, struct config_redis_cluster *out,
                                    char *master, size_t master_len, struct permitd_error *err);
void config_redis_cluster_url_masked(const struct config_redis_cluster *c, char *buf,
                                     size_t len);

/* Parses a MySQL URL into *out:
 *   mysql://user[:password]@host[:port]/database        (port 3306)
 *   mysql://user[:password]@localhost/database?socket=/run/mysqld/mysqld.sock
 * and the TLS parameters, joined by '&' (README "MySQL over TLS"):
 *   ssl-mode=DISABLED|PREFERRED|REQUIRED|VERIFY_CA|VERIFY_IDENTITY
 *            (any case; PREFERRED when not given, as MySQL's clients)
 *   ssl-ca=/ca.pem  ssl-cert=/client.pem  ssl-key=/client.key
 * A combination that would not do what it says is refused: ssl-ca under
 * PREFERRED or REQUIRED (libmariadb would verify the chain all the same),
 * VERIFY_CA without ssl-ca, a certificate without its key or the other way
 * round, any file under DISABLED. User, password, database and every
 * parameter's value may be percent-encoded. Returns PERMITD_OK or
 * PERMITD_EINVAL saying what is wrong, never echoing the password. */
int config_parse_mysql_url(const char *url, struct config_mysql *out,
                           struct permitd_error *err);

/* The MySQL URL with the password replaced by "***", for logs: its
 * socket and its ssl-mode unless PREFERRED (the files are left out). */
void config_mysql_url_masked(const struct config_mysql *m, char *buf, size_t len);

/* The ssl-mode's name as the URL spells it ("VERIFY_IDENTITY"). */
const char *config_mysql_ssl_mode_name(enum config_mysql_ssl_mode mode);

/* Parses "host:port", "[v6]:port" or ":port" (all interfaces); port 0..65535. */
int config_parse_listen(const char *s, char *host, size_t hostlen, int *port,
                        struct permitd_error *err);

/* The Redis URL with any password replaced by "***", for logs. */
void config_redis_url_masked(const struct config *cfg, char *buf, size_t len);

#endif
