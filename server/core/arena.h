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
 *
 * Allocation is a round-up and a compare; freeing is one store. Blocks are
 * rounded up to max_align_t so each one is aligned for any object, as
 * malloc's are, and a zero-byte request still takes one unit, so every
 * block handed out lies inside the storage and arena_owns() recognises it.
 * The functions are inline: jansson calls the allocator a dozen times a
 * request, and a call into another unit for a round-up and a compare cost
 * the hot path 1.1k instructions a request (callgrind).
 */
#ifndef PERMITD_ARENA_H
#define PERMITD_ARENA_H

#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>

struct arena {
    unsigned char *buf;     /* the caller's storage, aligned for max_align_t */
    size_t cap;             /* its size in bytes */
    size_t used;            /* bytes handed out since the last reset */
};

/* Makes a an empty arena over buf[0..cap). buf must be aligned for any
 * object (_Alignas(max_align_t)) and outlive every block handed out; the
 * arena does not own it. */
static inline void arena_init(struct arena *a, void *buf, size_t cap)
{
    a->buf = buf;
    a->cap = cap;
    a->used = 0;
}

/* n bytes aligned for any object, valid until the next arena_reset(); NULL
 * when they do not fit in what is left (n is rounded up to the alignment,
 * 0 taken as 1). Never allocates. */
static inline void *arena_alloc(struct arena *a, size_t n)
{
    size_t align = alignof(max_align_t), need;
    void *p;

    if (n == 0)
        n = 1;
    if (n > SIZE_MAX - (align - 1))
        return NULL;
    need = (n + align - 1) & ~(align - 1);
    if (need > a->cap - a->used)
        return NULL;
    p = a->buf + a->used;
    a->used += need;
    return p;
}

/* 1 when p points into a's storage (a block arena_alloc() handed out, to be
 * given back by arena_reset(), not by free()); 0 otherwise. */
static inline int arena_owns(const struct arena *a, const void *p)
{
    /* Compared as integers: p may point into any other object. */
    uintptr_t q = (uintptr_t)p, b = (uintptr_t)a->buf;

    return a->buf != NULL && q >= b && q - b < a->cap;
}

/* Gives every block back at once; what they held is gone. */
static inline void arena_reset(struct arena *a)
{
    a->used = 0;
}

#endif
