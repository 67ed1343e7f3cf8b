/*
 * auth.c - argon2id password hashes, random session tokens, cookies.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include <argon2.h>

#include "control/auth.h"

/* OWASP's minimum for argon2id: 19 MiB, 2 passes, 1 lane. */
#define T_COST 2
#define M_COST_KIB 19456
#define PARALLELISM 1
#define SALT_LEN 16
#define HASH_LEN 32

static int random_bytes(void *buf, size_t n)
{
    size_t got = 0;

    while (got < n) {
        ssize_t r = getrandom((char *)buf + got, n - got, 0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        got += (size_t)r;
    }
    return 0;
}

int auth_hash_password(const char *password, char *out, struct permitd_error *err)
{
    uint8_t salt[SALT_LEN];
    int rc;

    if (random_bytes(salt, sizeof(salt)) != 0)
        return permitd_error_set(err, PERMITD_EINTERNAL, "getrandom failed: %s", strerror(errno));
    rc = argon2id_hash_encoded(T_COST, M_COST_KIB, PARALLELISM, password, strlen(password),
                               salt, sizeof(salt), HASH_LEN, out, AUTH_HASH_MAX);
    if (rc != ARGON2_OK)
        return permitd_error_set(err, PERMITD_EINTERNAL, "argon2id: %s", argon2_error_message(rc));
    return PERMITD_OK;
}

int auth_verify_password(const char *encoded, const char *password)
{
    return argon2id_verify(encoded, password, strlen(password)) == ARGON2_OK;
}

static pthread_once_t dummy_once = PTHREAD_ONCE_INIT;
static char dummy[AUTH_HASH_MAX];

static void make_dummy(void)
{
    char pw[AUTH_TOKEN_LEN + 1];

    if (auth_new_token(pw, NULL) != PERMITD_OK || auth_hash_password(pw, dummy, NULL) != PERMITD_OK)
        dummy[0] = '\0';
}

const char *auth_dummy_hash(void)
{
    pthread_once(&dummy_once, make_dummy);
    return dummy;
}

int auth_new_token(char *out, struct permitd_error *err)
{
    static const char hex[] = "0123456789abcdef";
    uint8_t raw[AUTH_TOKEN_LEN / 2];

    if (random_bytes(raw, sizeof(raw)) != 0)
        return permitd_error_set(err, PERMITD_EINTERNAL, "getrandom failed: %s", strerror(errno));
    for (size_t i = 0; i < sizeof(raw); i++) {
        out[2 * i] = hex[raw[i] >> 4];
        out[2 * i + 1] = hex[raw[i] & 15];
    }
    out[AUTH_TOKEN_LEN] = '\0';
    return PERMITD_OK;
}

int auth_cookie_token(const char *cookie, char *out, size_t outlen)
{
    size_t name = strlen(AUTH_COOKIE);

    if (cookie == NULL)
        return -1;
    for (const char *p = cookie; *p;) {
        while (*p == ' ' || *p == ';')
            p++;
        size_t len = strcspn(p, ";");
        if (len > name && strncmp(p, AUTH_COOKIE, name) == 0 && p[name] == '=') {
            size_t v = len - name - 1;
            if (v == 0 || v >= outlen)
                return -1;
            memcpy(out, p + name + 1, v);
            out[v] = '\0';
            return 0;
        }
        p += len;
    }
    return -1;
}

int auth_check_password(const char *password, struct permitd_error *err)
{
    size_t n = strlen(password);

    if (n < AUTH_PASSWORD_MIN)
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "password: %zu characters; it must be at least %d", n,
                                 AUTH_PASSWORD_MIN);
    if (n > AUTH_PASSWORD_MAX)
        return permitd_error_set(err, PERMITD_EINVAL, "password: %zu bytes; the limit is %d", n,
                                 AUTH_PASSWORD_MAX);
    if (strpbrk(password, "\r\n") != NULL)
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "password: one line only (it holds a line break)");
    return PERMITD_OK;
}
