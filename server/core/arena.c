/*
 * arena.c - a bump allocator over storage the caller owns (arena.h).
 *
 * Allocation is a round-up and a compare; freeing is one store. Blocks are
 * rounded up to max_align_t so each one is aligned for any object, as
 * malloc's are, and a zero-byte request still takes one unit, so every
 * block handed out lies inside the storage and arena_owns() recognises it.
 */
#include <stdalign.h>
#include <stdint.h>

#include "core/arena.h"

void arena_init(struct arena *a, void *buf, size_t cap)
{
    a->buf = buf;
    a->cap = cap;
    a->used = 0;
}

void *arena_alloc(struct arena *a, size_t n)
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

int arena_owns(const struct arena *a, const void *p)
{
    /* Compared as integers: p may point into any other object. */
    uintptr_t q = (uintptr_t)p, b = (uintptr_t)a->buf;

    return a->buf != NULL && q >= b && q - b < a->cap;
}

void arena_reset(struct arena *a)
{
    a->used = 0;
}
