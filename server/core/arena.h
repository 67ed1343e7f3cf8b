/*
 * arena.h - a bump allocator over storage the caller owns.
 *
 * Memory that lives exactly as long as one unit of work (a request, a
 * codec call) is carved off the front of a fixed buffer and given back all
 * at once by arena_reset(): no allocation, no free, no lock. The arena
 * never falls back to malloc itself: when a block does not fit, arena_alloc()
 * answers NULL and the caller decides (malloc and free it on its own, or
 * chain it to its unit of work), and arena_owns() tells the two apart when
 * a pointer comes back. Used by json.c (jansson's trees), connect.c (decoded
 * request messages) and http.c (a request's storage).
 *
 * An arena is used from one thread at a time; a thread-local one is the
 * usual shape.
 */
#ifndef PERMITD_ARENA_H
#define PERMITD_ARENA_H

#include <stddef.h>

struct arena {
    unsigned char *buf;     /* the caller's storage, aligned for max_align_t */
    size_t cap;             /* its size in bytes */
    size_t used;            /* bytes handed out since the last reset */
};

/* Makes a an empty arena over buf[0..cap). buf must be aligned for any
 * object (_Alignas(max_align_t)) and outlive every block handed out; the
 * arena does not own it. */
void arena_init(struct arena *a, void *buf, size_t cap);

/* n bytes aligned for any object, valid until the next arena_reset(); NULL
 * when they do not fit in what is left (n is rounded up to the alignment,
 * 0 taken as 1). Never allocates. */
void *arena_alloc(struct arena *a, size_t n);

/* 1 when p points into a's storage (a block arena_alloc() handed out, to be
 * given back by arena_reset(), not by free()); 0 otherwise. */
int arena_owns(const struct arena *a, const void *p);

/* Gives every block back at once; what they held is gone. */
void arena_reset(struct arena *a);

#endif
