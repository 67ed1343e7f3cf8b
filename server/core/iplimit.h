/*
 * iplimit.h - connections open per client address, with a limit: what
 * --max-connections-per-ip holds each listener to.
 *
 * One table per listener, shared by its worker threads under a mutex. An
 * address is counted without its port (a client opening many connections
 * is one address), IPv4 and IPv6 alike; its count is freed when it falls
 * to zero, so the table holds only the addresses connected now.
 *
 * Two ways to count, for two kinds of accept:
 * - libmicrohttpd asks first (its accept policy callback: iplimit_allows())
 *   and reports later (STARTED / CLOSED: iplimit_count() / iplimit_put()),
 *   and a YES is not always followed by STARTED, so the check counts nothing;
 * - a listener that accepts itself (grpc.c) checks and counts in one step
 *   (iplimit_take()), so two threads cannot both pass for the last slot.
 */
#ifndef PERMITD_IPLIMIT_H
#define PERMITD_IPLIMIT_H

#include <sys/socket.h>

#include "core/status.h"

struct iplimit;

/* A table allowing limit connections per address (0: no limit; every call
 * below then answers yes and counts nothing). PERMITD_OK and *out (free
 * with iplimit_free()), or PERMITD_EINVAL naming a negative limit, or
 * PERMITD_EINTERNAL when out of memory. */
int iplimit_new(int limit, struct iplimit **out, struct permitd_error *err);

/* Frees t and every count in it. NULL is a no-op. */
void iplimit_free(struct iplimit *t);

/* The limit t was made with. */
int iplimit_limit(const struct iplimit *t);

/* 1 when addr's address has fewer than the limit open (or there is no
 * limit, or addr is NULL), 0 when it is at its limit. Counts nothing. */
int iplimit_allows(struct iplimit *t, const struct sockaddr *addr);

/* Counts one more connection for addr's address, limit or not (the
 * connection is open already). PERMITD_OK, or PERMITD_EINTERNAL when out
 * of memory (nothing counted: the matching iplimit_put() must not be
 * made). A NULL addr counts nothing. */
int iplimit_count(struct iplimit *t, const struct sockaddr *addr);

/* Checks and counts in one step: PERMITD_OK and one more counted for
 * addr's address when it was under the limit (or there is no limit: then
 * nothing is counted, and iplimit_put() is a no-op too), PERMITD_EEXHAUSTED
 * when it is at its limit (nothing counted), PERMITD_EINTERNAL when out of
 * memory (nothing counted). */
int iplimit_take(struct iplimit *t, const struct sockaddr *addr);

/* Gives back one connection of addr's address, counted by iplimit_count()
 * or iplimit_take(); the address's record goes at zero. An address with no
 * count is left alone. */
void iplimit_put(struct iplimit *t, const struct sockaddr *addr);

/* Connections counted for addr's address now (0 when none); for tests and
 * reports. */
int iplimit_held(struct iplimit *t, const struct sockaddr *addr);

/* Addresses with a count now; for tests (every count put back: 0). */
unsigned iplimit_addresses(struct iplimit *t);

#endif
