/*
 * cidr.c - address ranges and the match against them (see cidr.h).
 *
 * Addresses are compared as bytes under the block's prefix mask, after
 * inet_pton(): no string compare, so "127.000.0.1" is no address rather
 * than a near miss, and an IPv4-mapped IPv6 address ("::ffff:10.1.2.3",
 * what a dual-stack socket reports) matches the IPv4 block it is.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/cidr.h"

static const uint8_t mapped_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

/* text into family + bytes; IPv4-mapped IPv6 becomes IPv4. 0, or -1. */
static int parse_addr(const char *text, int *family, uint8_t out[16])
{
    memset(out, 0, 16);
    if (inet_pton(AF_INET, text, out) == 1) {
        *family = AF_INET;
        return 0;
    }
    if (inet_pton(AF_INET6, text, out) == 1) {
        *family = AF_INET6;
        if (memcmp(out, mapped_prefix, 12) == 0) {
            memmove(out, out + 12, 4);
            memset(out + 4, 0, 12);
            *family = AF_INET;
        }
        return 0;
    }
    return -1;
}

int cidr_is_addr(const char *text)
{
    int family;
    uint8_t b[16];

    return parse_addr(text, &family, b) == 0;
}

/* Whether the bytes of a and b agree on their first bits bits. */
static int same_prefix(const uint8_t *a, const uint8_t *b, int bits)
{
    int whole = bits / 8, rest = bits % 8;

    if (memcmp(a, b, (size_t)whole) != 0)
        return 0;
    if (rest == 0)
        return 1;
    uint8_t mask = (uint8_t)(0xff << (8 - rest));
    return (a[whole] & mask) == (b[whole] & mask);
}

static int parse_block(const char *item, struct cidr_block *b, struct permitd_error *err)
{
    char addr[64];
    const char *slash = strchr(item, '/');
    size_t alen = slash ? (size_t)(slash - item) : strlen(item);
    int max;

    if (alen == 0 || alen >= sizeof(addr))
        return permitd_error_set(err, PERMITD_EINVAL, "\"%.80s\" is not an address or "
                                 "address/prefix (e.g. 10.0.0.0/8, ::1)", item);
    memcpy(addr, item, alen);
    addr[alen] = '\0';
    if (parse_addr(addr, &b->family, b->addr) != 0)
        return permitd_error_set(err, PERMITD_EINVAL, "\"%.80s\": \"%s\" is not an IPv4 or IPv6 "
                                 "address", item, addr);
    max = b->family == AF_INET ? 32 : 128;
    b->bits = max;
    if (slash != NULL) {
        char *end;
        long v;
        errno = 0;
        v = strtol(slash + 1, &end, 10);
        if (errno != 0 || end == slash + 1 || *end != '\0' || v < 0 || v > max)
            return permitd_error_set(err, PERMITD_EINVAL, "\"%.80s\": the prefix length \"%s\" "
                                     "is not a whole number from 0 to %d", item, slash + 1, max);
        b->bits = (int)v;
    }
    for (int i = b->bits; i < max; i++)
        if (b->addr[i / 8] & (0x80 >> (i % 8)))
            return permitd_error_set(err, PERMITD_EINVAL, "\"%.80s\": the address has bits set "
                                     "past the /%d prefix (did you mean the network's own "
                                     "address?)", item, b->bits);
    return PERMITD_OK;
}

int cidr_list_parse(const char *text, struct cidr_list *out, struct permitd_error *err)
{
    const char *p = text;

    out->n = 0;
    while (*p != '\0') {
        char item[128];
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        while (len > 0 && (*p == ' ' || *p == '\t')) {
            p++;
            len--;
        }
        while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t'))
            len--;
        if (len == 0)
            return permitd_error_set(err, PERMITD_EINVAL, "item %zu is empty (a stray comma?)",
                                     out->n + 1);
        if (len >= sizeof(item))
            return permitd_error_set(err, PERMITD_EINVAL, "item %zu (\"%.40s...\") is too long",
                                     out->n + 1, p);
        if (out->n == CIDR_LIST_MAX)
            return permitd_error_set(err, PERMITD_EINVAL, "more than %d items", CIDR_LIST_MAX);
        memcpy(item, p, len);
        item[len] = '\0';
        if (parse_block(item, &out->v[out->n], err) != PERMITD_OK)
            return PERMITD_EINVAL;
        out->n++;
        if (end == NULL)
            break;
        p = end + 1;
        if (*p == '\0')
            return permitd_error_set(err, PERMITD_EINVAL, "item %zu is empty (a stray comma?)",
                                     out->n + 1);
    }
    return PERMITD_OK;
}

int cidr_list_match(const struct cidr_list *l, const char *addr)
{
    uint8_t b[16];
    int family;

    if (l->n == 0 || parse_addr(addr, &family, b) != 0)
        return 0;
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i].family == family && same_prefix(b, l->v[i].addr, l->v[i].bits))
            return 1;
    return 0;
}
