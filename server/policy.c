/*
 * policy.c - policy name rules and the Redis key layout (see policy.h).
 */
#include <stdio.h>
#include <string.h>

#include "policy.h"

static int name_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '.' || c == '_' || c == '-';
}

/* Prints at most 64 bytes of value, escaping what would garble a message. */
static void quote(char *out, size_t outlen, const char *value)
{
    size_t o = 0;

    for (size_t i = 0; value[i] != '\0' && o + 6 < outlen; i++) {
        unsigned char c = (unsigned char)value[i];
        if (i == 64) {
            memcpy(out + o, "...", 3);
            o += 3;
            break;
        }
        if (c < 0x20 || c == 0x7f || c == '"' || c == '\\')
            o += (size_t)snprintf(out + o, outlen - o, "\\x%02x", c);
        else
            out[o++] = (char)c;
    }
    out[o] = '\0';
}

int policy_check_name(const char *field, const char *value, struct permitd_error *err)
{
    size_t len = strlen(value);
    char q[300];

    if (len == 0)
        return permitd_error_set(err, PERMITD_EINVAL, "%s: is required", field);
    if (len > POLICY_NAME_MAX) {
        quote(q, sizeof(q), value);
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "%s: \"%s\" is %zu characters long, the limit is %d",
                                 field, q, len, POLICY_NAME_MAX);
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)value[i];
        if (!name_char(c) || (i == 0 && (c == '.' || c == '_' || c == '-'))) {
            quote(q, sizeof(q), value);
            return permitd_error_set(err, PERMITD_EINVAL,
                                     "%s: \"%s\" is not a valid name: use letters, digits, "
                                     "'.', '_' and '-', starting with a letter or digit",
                                     field, q);
        }
    }
    return PERMITD_OK;
}

int policy_check_key(const char *field, const char *value, struct permitd_error *err)
{
    size_t len = strlen(value);
    char q[300];

    if (len > POLICY_KEY_MAX) {
        quote(q, sizeof(q), value);
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "%s: \"%s\" is %zu bytes long, the limit is %d",
                                 field, q, len, POLICY_KEY_MAX);
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)value[i];
        if (c < 0x20 || c == 0x7f) {
            quote(q, sizeof(q), value);
            return permitd_error_set(err, PERMITD_EINVAL,
                                     "%s: \"%s\" holds a control character", field, q);
        }
    }
    return PERMITD_OK;
}

size_t policy_redis_key(char *buf, const char *prefix, const char *name,
                        enum policy_key_kind kind, const char *key)
{
    int n;

    if (kind == POLICY_KEY_HASH)
        n = snprintf(buf, POLICY_REDIS_KEY_MAX, "%s{%s}:policy", prefix, name);
    else if (key == NULL || key[0] == '\0')
        n = snprintf(buf, POLICY_REDIS_KEY_MAX, "%s{%s}:b", prefix, name);
    else
        n = snprintf(buf, POLICY_REDIS_KEY_MAX, "%s{%s}:k:%s", prefix, name, key);
    return n < 0 ? 0 : ((size_t)n < POLICY_REDIS_KEY_MAX ? (size_t)n : POLICY_REDIS_KEY_MAX - 1);
}
