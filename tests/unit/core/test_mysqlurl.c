/*
 * test_mysqlurl.c - config_parse_mysql_url() and config_mysql_url_masked():
 * the pieces of PERMITD_MYSQL_URL, percent-encoding, ?socket=, the TLS
 * parameters (ssl-mode, ssl-ca, ssl-cert, ssl-key) and the combinations
 * refused, the errors for missing or bad pieces, and that no error or
 * masked URL ever holds the password.
 */
#include "core/config.h"
#include "test.h"

#define SECRET "s3cr3t-Pw"

static int parse(const char *url, struct config_mysql *m, struct permitd_error *err)
{
    err->code = PERMITD_OK;
    err->message[0] = '\0';
    return config_parse_mysql_url(url, m, err);
}

static void test_mysqlurl_full(void)
{
    struct config_mysql m;
    struct permitd_error err;

    CHECK_INT(parse("mysql://permitd:" SECRET "@db.example.com:3307/policies", &m, &err),
              PERMITD_OK);
    CHECK_STR(m.user, "permitd");
    CHECK_STR(m.password, SECRET);
    CHECK_STR(m.host, "db.example.com");
    CHECK_INT(m.port, 3307);
    CHECK_STR(m.database, "policies");
    CHECK_STR(m.socket, "");
}

static void test_mysqlurl_defaults(void)
{
    struct config_mysql m;
    struct permitd_error err;

    /* no port: 3306; no password: empty */
    CHECK_INT(parse("mysql://root@127.0.0.1/permitd", &m, &err), PERMITD_OK);
    CHECK_STR(m.user, "root");
    CHECK_STR(m.password, "");
    CHECK_STR(m.host, "127.0.0.1");
    CHECK_INT(m.port, 3306);
    CHECK_STR(m.database, "permitd");

    /* an empty password after the colon is an empty password */
    CHECK_INT(parse("mysql://root:@localhost/permitd", &m, &err), PERMITD_OK);
    CHECK_STR(m.user, "root");
    CHECK_STR(m.password, "");
}

static void test_mysqlurl_ipv6(void)
{
    struct config_mysql m;
    struct permitd_error err;

    CHECK_INT(parse("mysql://u:p@[::1]:3310/db", &m, &err), PERMITD_OK);
    CHECK_STR(m.host, "::1");
    CHECK_INT(m.port, 3310);
    CHECK_INT(parse("mysql://u:p@[::1]/db", &m, &err), PERMITD_OK);
    CHECK_STR(m.host, "::1");
    CHECK_INT(m.port, 3306);
    CHECK_INT(parse("mysql://u:p@[::1/db", &m, &err), PERMITD_EINVAL);
}

static void test_mysqlurl_percent_encoding(void)
{
    struct config_mysql m;
    struct permitd_error err;

    /* '@', ':', '/' and '%' in user, password and database */
    CHECK_INT(parse("mysql://us%40er:p%40ss%3Aw%2Ford%25@h/my%2Ddb", &m, &err), PERMITD_OK);
    CHECK_STR(m.user, "us@er");
    CHECK_STR(m.password, "p@ss:w/ord%");
    CHECK_STR(m.host, "h");
    CHECK_STR(m.database, "my-db");

    /* lower-case hex too */
    CHECK_INT(parse("mysql://u:a%2fb@h/db", &m, &err), PERMITD_OK);
    CHECK_STR(m.password, "a/b");

    /* the last '@' before the path ends the user info; a ':' in the
     * password after the first one is part of it */
    CHECK_INT(parse("mysql://u:p@ss:x@h:1234/db", &m, &err), PERMITD_OK);
    CHECK_STR(m.user, "u");
    CHECK_STR(m.password, "p@ss:x");
    CHECK_STR(m.host, "h");
    CHECK_INT(m.port, 1234);
}

static void test_mysqlurl_socket(void)
{
    struct config_mysql m;
    struct permitd_error err;

    CHECK_INT(parse("mysql://root@localhost/permitd?socket=/run/mysqld/mysqld.sock", &m, &err),
              PERMITD_OK);
    CHECK_STR(m.socket, "/run/mysqld/mysqld.sock");
    CHECK_STR(m.host, "localhost");
    CHECK_STR(m.database, "permitd");

    CHECK_INT(parse("mysql://root@localhost/permitd?socket=%2Ftmp%2Fmy%20sock", &m, &err),
              PERMITD_OK);
    CHECK_STR(m.socket, "/tmp/my sock");

    CHECK_INT(parse("mysql://root@localhost/permitd?socket=relative.sock", &m, &err),
              PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "socket");
    CHECK_INT(parse("mysql://root@localhost/permitd?sock=/x", &m, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "socket");
}

static void test_mysqlurl_tls_default_is_preferred(void)
{
    struct config_mysql m;
    struct permitd_error err;

    CHECK_INT(parse("mysql://u:p@h/db", &m, &err), PERMITD_OK);
    CHECK_INT(m.ssl_mode, CONFIG_MYSQL_SSL_PREFERRED);
    CHECK_STR(m.ssl_ca, "");
    CHECK_STR(m.ssl_cert, "");
    CHECK_STR(m.ssl_key, "");
}

static void test_mysqlurl_tls_parameters(void)
{
    static const struct { const char *value; int mode; } modes[] = {
        {"DISABLED", CONFIG_MYSQL_SSL_DISABLED}, {"PREFERRED", CONFIG_MYSQL_SSL_PREFERRED},
        {"REQUIRED", CONFIG_MYSQL_SSL_REQUIRED}, {"required", CONFIG_MYSQL_SSL_REQUIRED},
        {"Verify_Identity", CONFIG_MYSQL_SSL_VERIFY_IDENTITY},
        {"VERIFY_IDENTITY", CONFIG_MYSQL_SSL_VERIFY_IDENTITY},
    };
    struct config_mysql m;
    struct permitd_error err;
    char url[256];

    for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
        snprintf(url, sizeof(url), "mysql://u:p@h/db?ssl-mode=%s", modes[i].value);
        CHECK_INT(parse(url, &m, &err), PERMITD_OK);
        CHECK_INT(m.ssl_mode, modes[i].mode);
    }
    CHECK_INT(parse("mysql://u:p@db.example.com:3307/db?ssl-mode=VERIFY_IDENTITY"
                    "&ssl-ca=/etc/ssl/rds/global-bundle.pem&ssl-cert=/etc/permitd/client.pem"
                    "&ssl-key=/etc/permitd/client.key", &m, &err), PERMITD_OK);
    CHECK_INT(m.ssl_mode, CONFIG_MYSQL_SSL_VERIFY_IDENTITY);
    CHECK_STR(m.ssl_ca, "/etc/ssl/rds/global-bundle.pem");
    CHECK_STR(m.ssl_cert, "/etc/permitd/client.pem");
    CHECK_STR(m.ssl_key, "/etc/permitd/client.key");
    CHECK_STR(m.host, "db.example.com");
    CHECK_INT(m.port, 3307);
    CHECK_STR(m.database, "db");

    /* any order, percent-encoded values, with a socket */
    CHECK_INT(parse("mysql://u:p%26ss@localhost/db?ssl-ca=%2Fmy%20certs%2Fca%26b.pem&socket=/s.sock"
                    "&ssl-mode=VERIFY_CA", &m, &err), PERMITD_OK);
    CHECK_STR(m.password, "p&ss");
    CHECK_STR(m.ssl_ca, "/my certs/ca&b.pem");
    CHECK_STR(m.socket, "/s.sock");
    CHECK_INT(m.ssl_mode, CONFIG_MYSQL_SSL_VERIFY_CA);

    /* a client certificate under REQUIRED (no CA: the server unverified) */
    CHECK_INT(parse("mysql://u@h/db?ssl-mode=REQUIRED&ssl-cert=/c.pem&ssl-key=/c.key", &m, &err),
              PERMITD_OK);
    CHECK_STR(m.ssl_cert, "/c.pem");
    CHECK_STR(m.ssl_ca, "");
}

/* What would not do what it says is refused, naming the parameter. */
static void test_mysqlurl_tls_refused(void)
{
    static const struct { const char *query, *says; } bad[] = {
        {"ssl-mode=VERIFY", "ssl-mode"},
        {"ssl-mode=", "ssl-mode"},
        {"ssl-mode=REQUIRED&ssl-mode=DISABLED", "twice"},
        {"ssl-mode", "ssl-mode"},
        {"ssl-ca=", "ssl-ca"},
        {"ssl-mode=VERIFY_IDENTITY&ssl-ca=/ca.pem&ssl-ca=/other.pem", "twice"},
        {"ssl-mode=VERIFY_CA", "ssl-ca"},
        {"ssl-ca=/ca.pem", "VERIFY_IDENTITY"},
        {"ssl-mode=REQUIRED&ssl-ca=/ca.pem", "VERIFY_IDENTITY"},
        {"ssl-mode=DISABLED&ssl-cert=/c.pem&ssl-key=/c.key", "DISABLED"},
        {"ssl-mode=DISABLED&ssl-ca=/ca.pem", "DISABLED"},
        {"ssl-mode=VERIFY_IDENTITY&ssl-cert=/c.pem", "ssl-key"},
        {"ssl-mode=VERIFY_IDENTITY&ssl-key=/c.key", "ssl-cert"},
        {"sslmode=require", "sslmode"},
        {"ssl-mode=REQUIRED&", "unknown"},
        {"ssl-ca=/a%00b&ssl-mode=VERIFY_CA", "ssl-ca"},
    };
    struct config_mysql m;
    struct permitd_error err;
    char url[256];

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(url, sizeof(url), "mysql://u:p@h/db?%s", bad[i].query);
        CHECK_INT(parse(url, &m, &err), PERMITD_EINVAL);
        if (strstr(err.message, bad[i].says) == NULL)
            fprintf(stderr, "  %s: %s\n", url, err.message);
        CHECK_CONTAINS(err.message, bad[i].says);
    }
}

static void test_mysqlurl_missing_pieces(void)
{
    struct config_mysql m;
    struct permitd_error err;

    CHECK_INT(parse("", &m, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "mysql://");
    CHECK_INT(parse("postgres://u:p@h/db", &m, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "mysql://");
    CHECK_INT(parse("mysql:/u:p@h/db", &m, &err), PERMITD_EINVAL);

    CHECK_INT(parse("mysql://h/db", &m, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "user");
    CHECK_INT(parse("mysql://@h/db", &m, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "user");
    CHECK_INT(parse("mysql://:p@h/db", &m, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "user");

    CHECK_INT(parse("mysql://u:p@/db", &m, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "host");
    CHECK_INT(parse("mysql://u:p@:3306/db", &m, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "host");

    CHECK_INT(parse("mysql://u:p@h", &m, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "database");
    CHECK_INT(parse("mysql://u:p@h/", &m, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "database");
    CHECK_INT(parse("mysql://u:p@h:3306", &m, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "database");
    CHECK_INT(parse("mysql://u:p@h/?socket=/x", &m, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "database");
}

static void test_mysqlurl_bad_port(void)
{
    static const char *const bad[] = {
        "mysql://u:p@h:0/db", "mysql://u:p@h:65536/db", "mysql://u:p@h:-1/db",
        "mysql://u:p@h:abc/db", "mysql://u:p@h:/db", "mysql://u:p@h:33o6/db",
        "mysql://u:p@h:123456789012/db", "mysql://u:p@[::1]:x/db",
    };
    struct config_mysql m;
    struct permitd_error err;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        CHECK_INT(parse(bad[i], &m, &err), PERMITD_EINVAL);
        CHECK_CONTAINS(err.message, "port");
    }
    CHECK_INT(parse("mysql://u:p@h:1/db", &m, &err), PERMITD_OK);
    CHECK_INT(m.port, 1);
    CHECK_INT(parse("mysql://u:p@h:65535/db", &m, &err), PERMITD_OK);
    CHECK_INT(m.port, 65535);
}

static void test_mysqlurl_too_long(void)
{
    struct config_mysql m;
    struct permitd_error err;
    char url[2048];
    char big[600];

    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    snprintf(url, sizeof(url), "mysql://u:p@%s/db", big);
    CHECK_INT(parse(url, &m, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "host");
    snprintf(url, sizeof(url), "mysql://u:p@h/%s", big);
    CHECK_INT(parse(url, &m, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "database");
    snprintf(url, sizeof(url), "mysql://u:%s@h/db", big);
    CHECK_INT(parse(url, &m, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "password");
    CHECK(strstr(err.message, "aaaa") == NULL);
}

/* Whatever is wrong with a URL, the message never holds its password
 * (plain or percent-encoded). */
static void test_mysqlurl_error_never_shows_password(void)
{
    static const char *const bad[] = {
        "postgres://u:" SECRET "@h/db",
        ("mysql://u:" SECRET "@h"),
        ("mysql://u:" SECRET "@h/"),
        ("mysql://u:" SECRET "@/db"),
        ("mysql://u:" SECRET "@:3306/db"),
        ("mysql://u:" SECRET "@h:99999/db"),
        ("mysql://u:" SECRET "@h:port/db"),
        ("mysql://u:" SECRET "@[::1/db"),
        ("mysql://u:" SECRET "@h/db?socket=relative"),
        ("mysql://u:" SECRET "@h/db?ssl=1"),
        ("mysql://u:" SECRET "@h/db?ssl-mode=VERIFY_CA"),
        ("mysql://u:" SECRET "@h/db?ssl-mode=" SECRET),
        ("mysql://u:" SECRET "@h/db?ssl-ca=/x&ssl-cert=/c"),
        ("mysql://:" SECRET "@h/db"),
        ("mysql://u:" SECRET "/db"),
        ("mysql://u:" SECRET),
        "mysql://u:s3cr3t%2DPw@h:0/db",
    };
    struct config_mysql m;
    struct permitd_error err;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        CHECK_INT(parse(bad[i], &m, &err), PERMITD_EINVAL);
        CHECK(err.message[0] != '\0');
        if (strstr(err.message, "s3cr3t") != NULL)
            fprintf(stderr, "  password in the message for %s: %s\n", bad[i], err.message);
        CHECK(strstr(err.message, "s3cr3t") == NULL);
    }
}

static void test_mysqlurl_masked(void)
{
    struct config_mysql m;
    struct permitd_error err;
    char buf[1400];

    CHECK_INT(parse("mysql://permitd:" SECRET "@db:3307/policies", &m, &err), PERMITD_OK);
    config_mysql_url_masked(&m, buf, sizeof(buf));
    CHECK_STR(buf, "mysql://permitd:***@db:3307/policies");
    CHECK(strstr(buf, SECRET) == NULL);

    CHECK_INT(parse("mysql://root@localhost/permitd?socket=/tmp/m.sock", &m, &err), PERMITD_OK);
    config_mysql_url_masked(&m, buf, sizeof(buf));
    CHECK_CONTAINS(buf, "mysql://root@localhost");
    CHECK_CONTAINS(buf, "/permitd");
    CHECK_CONTAINS(buf, "socket=/tmp/m.sock");
    CHECK(strstr(buf, "***") == NULL);

    /* the ssl-mode unless it is the default; the files left out */
    CHECK_INT(parse("mysql://u:" SECRET "@db/p?ssl-mode=verify_identity&ssl-ca=/ca.pem", &m, &err),
              PERMITD_OK);
    config_mysql_url_masked(&m, buf, sizeof(buf));
    CHECK_STR(buf, "mysql://u:***@db:3306/p?ssl-mode=VERIFY_IDENTITY");
    CHECK_INT(parse("mysql://u@localhost/p?socket=/s.sock&ssl-mode=DISABLED", &m, &err),
              PERMITD_OK);
    config_mysql_url_masked(&m, buf, sizeof(buf));
    CHECK_STR(buf, "mysql://u@localhost:3306/p?socket=/s.sock&ssl-mode=DISABLED");
    CHECK_INT(parse("mysql://u@db/p?ssl-mode=PREFERRED", &m, &err), PERMITD_OK);
    config_mysql_url_masked(&m, buf, sizeof(buf));
    CHECK_STR(buf, "mysql://u@db:3306/p");
}

int main(void)
{
    TEST_RUN(test_mysqlurl_full);
    TEST_RUN(test_mysqlurl_defaults);
    TEST_RUN(test_mysqlurl_ipv6);
    TEST_RUN(test_mysqlurl_percent_encoding);
    TEST_RUN(test_mysqlurl_socket);
    TEST_RUN(test_mysqlurl_tls_default_is_preferred);
    TEST_RUN(test_mysqlurl_tls_parameters);
    TEST_RUN(test_mysqlurl_tls_refused);
    TEST_RUN(test_mysqlurl_missing_pieces);
    TEST_RUN(test_mysqlurl_bad_port);
    TEST_RUN(test_mysqlurl_too_long);
    TEST_RUN(test_mysqlurl_error_never_shows_password);
    TEST_RUN(test_mysqlurl_masked);
    return TEST_REPORT();
}
