/*
 * fuzz_config.c - libFuzzer target for start-up configuration: the Redis
 * and MySQL URLs, listen addresses, and config_load() on a whole command
 * line.
 *
 * The first input byte picks the parser; the rest is its text (for
 * config_load, argv[1..] split on NUL bytes). Beyond "no crash, no leak",
 * each parser is held to its contract in config.h:
 *   - what is accepted is complete and in range (a host, a port in
 *     1..65535, a database, an absolute socket path);
 *   - it reads back: the parsed fields, written out again as a URL or
 *     address in the documented syntax, parse to the same fields;
 *   - a password never shows in an error message or a masked URL.
 * config_load() reads PERMITD_* variables, so LLVMFuzzerInitialize()
 * clears them: the command line alone decides.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/config.h"
#include "fuzz.h"

extern char **environ;

/* A password no fuzzed text can be confused with. */
#define SECRET "s3cr3t-PW-x9"

static FILE *devnull;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    char name[256];

    /* unsetenv() shifts environ, so start over after each removal */
    for (int again = 1; again;) {
        again = 0;
        for (char **e = environ; *e != NULL; e++) {
            size_t n = strcspn(*e, "=");
            if (strncmp(*e, "PERMITD_", 8) == 0 && n < sizeof(name)) {
                memcpy(name, *e, n);
                name[n] = '\0';
                unsetenv(name);
                again = 1;
                break;
            }
        }
    }
    devnull = fopen("/dev/null", "w");
    FUZZ_CHECK(devnull != NULL);
    return 0;
}

/* Whether the fixed-size string field is NUL-terminated inside itself. */
#define TERMINATED(field) (memchr((field), '\0', sizeof(field)) != NULL)

static int has_any(const char *s, const char *set)
{
    return s[strcspn(s, set)] != '\0';
}

/* Appends printf output to a growing buffer. */
struct buf {
    char *p;
    size_t len, cap;
};

__attribute__((format(printf, 2, 3)))
static void put(struct buf *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    FUZZ_CHECK(n >= 0);
    if (b->len + (size_t)n + 1 > b->cap) {
        b->cap = (b->len + (size_t)n + 1) * 2;
        b->p = realloc(b->p, b->cap);
        FUZZ_CHECK(b->p != NULL);
    }
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* Percent-encodes every byte but letters and digits. */
static void put_escaped(struct buf *b, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
            put(b, "%c", c);
        else
            put(b, "%%%02X", c);
    }
}

/* ---- Redis ---- */

static void check_redis_fields(const struct config *c)
{
    FUZZ_CHECK(TERMINATED(c->redis_host) && TERMINATED(c->redis_socket));
    FUZZ_CHECK(TERMINATED(c->redis_user) && TERMINATED(c->redis_password));
    FUZZ_CHECK(c->redis_db >= 0 && c->redis_db <= 65535);
    if (c->redis_socket[0] != '\0') {
        FUZZ_CHECK(c->redis_socket[0] == '/');
    } else {
        FUZZ_CHECK(c->redis_port >= 1 && c->redis_port <= 65535);
        FUZZ_CHECK(c->redis_host[0] != '\0');
    }
}

static int same_redis(const struct config *a, const struct config *b)
{
    return strcmp(a->redis_host, b->redis_host) == 0 &&
           strcmp(a->redis_socket, b->redis_socket) == 0 &&
           strcmp(a->redis_user, b->redis_user) == 0 &&
           strcmp(a->redis_password, b->redis_password) == 0 &&
           a->redis_port == b->redis_port && a->redis_db == b->redis_db;
}

/* Writes c's Redis fields as a URL again, when the syntax can hold them. */
static int redis_url_of(const struct config *c, struct buf *b)
{
    if (c->redis_socket[0] != '\0') {
        if (has_any(c->redis_socket, "?"))
            return 0;
        put(b, "unix://%s?db=%d", c->redis_socket, c->redis_db);
        return 1;
    }
    if (has_any(c->redis_user, ":/") || has_any(c->redis_password, "/") ||
        has_any(c->redis_host, "/@[]"))
        return 0;
    put(b, "redis://");
    if (c->redis_user[0] != '\0' || c->redis_password[0] != '\0')
        put(b, "%s:%s@", c->redis_user, c->redis_password);
    put(b, strchr(c->redis_host, ':') ? "[%s]:%d/%d" : "%s:%d/%d",
        c->redis_host, c->redis_port, c->redis_db);
    return 1;
}

static void fuzz_redis_url(const char *url)
{
    static struct config c, again;
    struct permitd_error err = { 0 };
    struct buf b = { 0 };
    char masked[2048];

    if (config_parse_redis_url(&c, url, &err) != PERMITD_OK) {
        FUZZ_CHECK(err.code == PERMITD_EINVAL && err.message[0] != '\0');
        return;
    }
    check_redis_fields(&c);
    config_redis_url_masked(&c, masked, sizeof(masked));
    if (c.redis_password[0] != '\0')
        FUZZ_CHECK(strstr(masked, "***") != NULL);
    if (redis_url_of(&c, &b)) {
        int rc = config_parse_redis_url(&again, b.p, &err);
        if (rc != PERMITD_OK)
            fprintf(stderr, "\"%s\" read back as \"%s\": %s\n", url, b.p, err.message);
        FUZZ_CHECK(rc == PERMITD_OK);
        FUZZ_CHECK(same_redis(&c, &again));
    }
    free(b.p);
}

/* The password of redis://u:SECRET@<rest> must stay out of every message. */
static void fuzz_redis_secret(const char *rest)
{
    static struct config c;
    struct permitd_error err = { 0 };
    struct buf b = { 0 };
    char masked[2048];

    if (has_any(rest, "@") || strstr(rest, SECRET) != NULL)
        return;
    put(&b, "redis://u:" SECRET "@%s", rest);
    if (config_parse_redis_url(&c, b.p, &err) != PERMITD_OK) {
        FUZZ_CHECK(strstr(err.message, SECRET) == NULL);
    } else {
        FUZZ_CHECK(strcmp(c.redis_password, SECRET) == 0);
        config_redis_url_masked(&c, masked, sizeof(masked));
        FUZZ_CHECK(strstr(masked, SECRET) == NULL);
    }
    free(b.p);
}

/* ---- MySQL ---- */

static void check_mysql_fields(const struct config_mysql *m)
{
    FUZZ_CHECK(TERMINATED(m->host) && TERMINATED(m->socket) && TERMINATED(m->user) &&
               TERMINATED(m->password) && TERMINATED(m->database) && TERMINATED(m->ssl_ca) &&
               TERMINATED(m->ssl_cert) && TERMINATED(m->ssl_key));
    FUZZ_CHECK(m->user[0] != '\0');
    FUZZ_CHECK(m->host[0] != '\0');
    FUZZ_CHECK(m->database[0] != '\0');
    FUZZ_CHECK(m->port >= 1 && m->port <= 65535);
    FUZZ_CHECK(m->socket[0] == '\0' || m->socket[0] == '/');
    FUZZ_CHECK(m->ssl_mode >= CONFIG_MYSQL_SSL_PREFERRED &&
               m->ssl_mode <= CONFIG_MYSQL_SSL_VERIFY_IDENTITY);
    FUZZ_CHECK((m->ssl_cert[0] != '\0') == (m->ssl_key[0] != '\0'));
}

static int same_mysql(const struct config_mysql *a, const struct config_mysql *b)
{
    return strcmp(a->host, b->host) == 0 && strcmp(a->socket, b->socket) == 0 &&
           strcmp(a->user, b->user) == 0 && strcmp(a->password, b->password) == 0 &&
           strcmp(a->database, b->database) == 0 && a->port == b->port &&
           a->ssl_mode == b->ssl_mode && strcmp(a->ssl_ca, b->ssl_ca) == 0 &&
           strcmp(a->ssl_cert, b->ssl_cert) == 0 && strcmp(a->ssl_key, b->ssl_key) == 0;
}

static void fuzz_mysql_url(const char *url)
{
    struct config_mysql m, again;
    struct permitd_error err = { 0 };
    struct buf b = { 0 };
    char masked[2048];
    int rc;

    if (config_parse_mysql_url(url, &m, &err) != PERMITD_OK) {
        FUZZ_CHECK(err.code == PERMITD_EINVAL && err.message[0] != '\0');
        return;
    }
    check_mysql_fields(&m);
    config_mysql_url_masked(&m, masked, sizeof(masked));
    if (m.password[0] != '\0')
        FUZZ_CHECK(strstr(masked, ":***@") != NULL);
    /* user, password, database and socket are percent-decoded, so any
     * value can be written back; the host is taken as it is */
    if (has_any(m.host, "/?@]") || m.host[0] == '[')
        return;
    put(&b, "mysql://");
    put_escaped(&b, m.user);
    if (m.password[0] != '\0') {
        put(&b, ":");
        put_escaped(&b, m.password);
    }
    put(&b, strchr(m.host, ':') ? "@[%s]:%d/" : "@%s:%d/", m.host, m.port);
    put_escaped(&b, m.database);
    put(&b, "?ssl-mode=%s", config_mysql_ssl_mode_name(m.ssl_mode));
    if (m.socket[0] != '\0') {
        put(&b, "&socket=");
        put_escaped(&b, m.socket);
    }
    if (m.ssl_ca[0] != '\0') {
        put(&b, "&ssl-ca=");
        put_escaped(&b, m.ssl_ca);
    }
    if (m.ssl_cert[0] != '\0') {
        put(&b, "&ssl-cert=");
        put_escaped(&b, m.ssl_cert);
        put(&b, "&ssl-key=");
        put_escaped(&b, m.ssl_key);
    }
    rc = config_parse_mysql_url(b.p, &again, &err);
    if (rc != PERMITD_OK)
        fprintf(stderr, "\"%s\" read back as \"%s\": %s\n", url, b.p, err.message);
    FUZZ_CHECK(rc == PERMITD_OK);
    FUZZ_CHECK(same_mysql(&m, &again));
    free(b.p);
}

static void fuzz_mysql_secret(const char *rest)
{
    struct config_mysql m;
    struct permitd_error err = { 0 };
    struct buf b = { 0 };
    char masked[2048];

    if (has_any(rest, "@") || strstr(rest, SECRET) != NULL)
        return;
    put(&b, "mysql://u:" SECRET "@%s", rest);
    if (config_parse_mysql_url(b.p, &m, &err) != PERMITD_OK) {
        FUZZ_CHECK(strstr(err.message, SECRET) == NULL);
    } else {
        FUZZ_CHECK(strcmp(m.password, SECRET) == 0);
        config_mysql_url_masked(&m, masked, sizeof(masked));
        FUZZ_CHECK(strstr(masked, SECRET) == NULL);
    }
    free(b.p);
}

/* ---- listen addresses ---- */

static void fuzz_listen(const char *s, size_t hostlen)
{
    struct permitd_error err = { 0 };
    char *host = malloc(hostlen), *again = malloc(hostlen);
    struct buf b = { 0 };
    int port = -1, port2 = -1, rc;

    FUZZ_CHECK(host != NULL && again != NULL);
    rc = config_parse_listen(s, host, hostlen, &port, &err);
    if (rc != PERMITD_OK) {
        FUZZ_CHECK(rc == PERMITD_EINVAL && err.message[0] != '\0');
        goto done;
    }
    FUZZ_CHECK(memchr(host, '\0', hostlen) != NULL);
    FUZZ_CHECK(port >= 0 && port <= 65535);
    if (host[0] == '[' || (strchr(host, ':') && strchr(host, ']')))
        goto done;
    put(&b, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
    rc = config_parse_listen(b.p, again, hostlen, &port2, &err);
    if (rc != PERMITD_OK)
        fprintf(stderr, "\"%s\" read back as \"%s\": %s\n", s, b.p, err.message);
    FUZZ_CHECK(rc == PERMITD_OK);
    FUZZ_CHECK(strcmp(host, again) == 0 && port == port2);
done:
    free(b.p);
    free(host);
    free(again);
}

/* ---- the whole command line ---- */

static void fuzz_load(const uint8_t *data, size_t size)
{
    static struct config cfg, check;
    struct permitd_error err = { 0 };
    char *copy = fuzz_cstr(data, size);
    char **argv;
    int argc = 1, rc;

    for (size_t i = 0; i < size; i++)
        argc += copy[i] == '\0';
    argc++;    /* the text after the last NUL */
    argv = calloc((size_t)argc + 1, sizeof(*argv));
    FUZZ_CHECK(argv != NULL);
    argv[0] = (char *)"permitd";
    argc = 1;
    for (size_t i = 0; i <= size; i += strlen(copy + i) + 1)
        argv[argc++] = copy + i;
    argv[argc] = NULL;

    rc = config_load(&cfg, argc, argv, devnull, &err);
    FUZZ_CHECK(rc == PERMITD_OK || rc == PERMITD_EINVAL || rc == 1);
    if (rc == PERMITD_EINVAL) {
        FUZZ_CHECK(err.message[0] != '\0');
        FUZZ_CHECK(memchr(err.message, '\0', sizeof(err.message)) != NULL);
    }
    if (rc == PERMITD_OK) {
        FUZZ_CHECK(TERMINATED(cfg.listen) && TERMINATED(cfg.admin_listen));
        FUZZ_CHECK(TERMINATED(cfg.redis_url) && TERMINATED(cfg.mysql_url));
        FUZZ_CHECK(TERMINATED(cfg.redis_prefix) && TERMINATED(cfg.log_level));
        FUZZ_CHECK(TERMINATED(cfg.admin_ui_dir));
        FUZZ_CHECK(cfg.listen_port >= 0 && cfg.listen_port <= 65535);
        FUZZ_CHECK(cfg.admin_listen_port >= 0 && cfg.admin_listen_port <= 65535);
        FUZZ_CHECK(cfg.threads >= 1 && cfg.threads <= 1024);
        FUZZ_CHECK(cfg.max_body_bytes >= 64);
        FUZZ_CHECK(cfg.redis_timeout_ms >= 1 && cfg.mysql_timeout_ms >= 100);
        FUZZ_CHECK(strchr(cfg.redis_prefix, '{') == NULL &&
                   strchr(cfg.redis_prefix, '}') == NULL);
        if (cfg.redis_cluster || cfg.redis_sentinel) {
            /* a cluster (redis+cluster://) or the sentinels of a master
             * (redis+sentinel://, with its name): seeds, and no single host */
            FUZZ_CHECK(cfg.redis_seeds.nseeds >= 1 && cfg.redis_host[0] == '\0' &&
                       cfg.redis_port == 0);
            FUZZ_CHECK(!cfg.redis_sentinel || (TERMINATED(cfg.redis_sentinel_master) &&
                                               cfg.redis_sentinel_master[0] != '\0'));
            for (int i = 0; i < cfg.redis_seeds.nseeds; i++)
                FUZZ_CHECK(cfg.redis_seeds.seeds[i].host[0] != '\0' &&
                           cfg.redis_seeds.seeds[i].port >= 1 &&
                           cfg.redis_seeds.seeds[i].port <= 65535);
        } else {
            char plain[sizeof(cfg.redis_url)];
            check_redis_fields(&cfg);
            /* the derived fields are what the parser makes of the text (a
             * rediss:// URL's plain form: TLS is the scheme's only change) */
            snprintf(plain, sizeof(plain), "%s%s", cfg.redis_tls ? "redis" : "",
                     cfg.redis_url + (cfg.redis_tls ? 6 : 0));
            FUZZ_CHECK(config_parse_redis_url(&check, plain, &err) == PERMITD_OK);
            FUZZ_CHECK(same_redis(&cfg, &check));
        }
        if (cfg.mysql_url[0] != '\0')
            check_mysql_fields(&cfg.mysql);
    }
    free(argv);
    free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s;
    uint8_t mode;

    if (size == 0)
        return 0;
    mode = data[0];
    data++;
    size--;
    if (mode % 4 == 3) {
        fuzz_load(data, size);
        return 0;
    }
    s = fuzz_cstr(data, size);
    switch (mode % 4) {
    case 0:
        fuzz_redis_url(s);
        fuzz_redis_secret(s);
        break;
    case 1:
        fuzz_mysql_url(s);
        fuzz_mysql_secret(s);
        break;
    case 2:
        /* the size config.c uses, and tight ones around short hosts */
        fuzz_listen(s, (mode / 4) % 2 ? 256 : 1 + (mode / 8) % 16);
        break;
    }
    free(s);
    return 0;
}
