/*
 * resolve.h - a host name's address, looked up off the event loops.
 *
 * getaddrinfo() blocks for as long as DNS takes (seconds when a resolver is
 * slow or gone). A worker's event loop connects its Redis pipe itself, so it
 * must never be the one waiting: a thread of the resolver's own looks the
 * name up and keeps the answer, and every Redis connection (redis.c) is made
 * to that numeric address. A numeric host needs no lookup and no thread.
 */
#ifndef PERMITD_RESOLVE_H
#define PERMITD_RESOLVE_H

#include <stddef.h>

#include "core/status.h"

#define RESOLVE_ADDR_MAX 64     /* a numeric IPv4 or IPv6 address, NUL included */

struct resolver;

/* Starts resolving host, waiting up to wait_ms for the first answer (so the
 * first connections after start find one); a lookup still running then, or
 * failing, is not an error: resolver_address() says so, and the lookup goes
 * on. Free with resolver_free(). */
int resolver_new(const char *host, int wait_ms, struct resolver **out, struct permitd_error *err);
void resolver_free(struct resolver *rs);

/* The host's last known address, numeric, into ip[RESOLVE_ADDR_MAX]: 0, or
 * -1 with why[] saying what the lookup answered (none yet, or its error).
 * Never blocks. An answer older than a minute is looked up again behind the
 * caller's back, the old one served meanwhile. */
int resolver_address(struct resolver *rs, char *ip, char *why, size_t whylen);

/* A connect to ip (from resolver_address()) failed: the next address of
 * the name is used from now on, and the name is looked up again (it may
 * point elsewhere now). Never blocks; at most one lookup a second. */
void resolver_failed(struct resolver *rs, const char *ip);

#endif
