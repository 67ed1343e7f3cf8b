/*
 * cidr.h - lists of address ranges (CIDR blocks), IPv4 and IPv6: what
 * --trusted-proxies holds, and the one question asked of it: is this
 * address one of ours?
 *
 * A list is parsed once, at start-up (config.c), into a fixed array; a
 * match is a loop over it with no allocation, on the forward-auth path of
 * every request (decisions/forward.c).
 */
#ifndef PERMITD_CIDR_H
#define PERMITD_CIDR_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

#define CIDR_LIST_MAX 64

struct cidr_block {
    int family;                 /* AF_INET or AF_INET6 */
    uint8_t addr[16];           /* network byte order; IPv4 in the first 4 bytes */
    int bits;                   /* prefix length */
};

struct cidr_list {
    struct cidr_block v[CIDR_LIST_MAX];
    size_t n;
};

/* Parses a comma-separated list of blocks ("10.0.0.0/8, 127.0.0.1,
 * ::1/128"; a bare address is a block of one) into *out; spaces around
 * items are ignored, "" is the empty list. PERMITD_EINVAL naming the bad
 * item and why (not an address, a prefix out of range, bits set past the
 * prefix, too many items). */
int cidr_list_parse(const char *text, struct cidr_list *out, struct permitd_error *err);

/* 1 when addr (text: "192.0.2.1", "2001:db8::1", an IPv4-mapped IPv6
 * address counts as its IPv4 address) falls in a block of l; 0 when it
 * does not or is no address. */
int cidr_list_match(const struct cidr_list *l, const char *addr);

/* 1 when text is an IPv4 or IPv6 address, else 0. */
int cidr_is_addr(const char *text);

#endif
