/*
 * test_arena.c - server/core/arena.h: blocks carved off the caller's
 * storage, aligned for any object, never overlapping, refused (NULL, not
 * malloc'd) once the storage is spent, recognised by arena_owns(), all
 * given back by arena_reset().
 */
#include <stdalign.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "test.h"

#define ALIGN alignof(max_align_t)

static _Alignas(max_align_t) unsigned char storage[256];

static void test_arena_blocks_aligned_and_disjoint(void)
{
    struct arena a;
    unsigned char *p[6];
    static const size_t sizes[6] = {1, 0, 7, ALIGN, ALIGN + 1, 3};

    arena_init(&a, storage, sizeof(storage));
    for (int i = 0; i < 6; i++) {
        p[i] = arena_alloc(&a, sizes[i]);
        CHECK(p[i] != NULL);
        CHECK_INT((uintptr_t)p[i] % ALIGN, 0);
        CHECK(arena_owns(&a, p[i]));
        if (p[i] != NULL)
            memset(p[i], 0xa0 + i, sizes[i]);
    }
    /* each block starts past the previous one's bytes, rounded up; a
     * zero-byte block still takes one unit, so it is inside the storage */
    for (int i = 1; i < 6; i++)
        CHECK(p[i] >= p[i - 1] + (sizes[i - 1] ? sizes[i - 1] : 1));
    CHECK_INT(a.used, ALIGN * 7);
    CHECK_INT(p[2][6], 0xa2);
    CHECK_INT(p[4][ALIGN], 0xa4);
}

static void test_arena_full_refuses_without_malloc(void)
{
    struct arena a;
    void *p;

    arena_init(&a, storage, sizeof(storage));
    CHECK(arena_alloc(&a, sizeof(storage) + 1) == NULL);
    CHECK_INT(a.used, 0);
    CHECK(arena_alloc(&a, sizeof(storage) - ALIGN) != NULL);
    CHECK(arena_alloc(&a, ALIGN + 1) == NULL);             /* would cross the end */
    CHECK((p = arena_alloc(&a, ALIGN)) == storage + sizeof(storage) - ALIGN);
    CHECK(arena_alloc(&a, 1) == NULL);
    CHECK(arena_alloc(&a, 0) == NULL);                     /* nothing past the end */
    CHECK(arena_alloc(&a, SIZE_MAX) == NULL);              /* no wrap when rounding up */
    CHECK(arena_alloc(&a, SIZE_MAX - ALIGN + 2) == NULL);
    CHECK_INT(a.used, sizeof(storage));
}

static void test_arena_owns(void)
{
    /* the arena over the middle of a larger buffer: its neighbours on
     * either side are not the arena's */
    static _Alignas(max_align_t) unsigned char around[ALIGN + 64 + ALIGN];
    unsigned char *mid = around + ALIGN;
    struct arena a, unset = {NULL, 0, 0};
    int on_stack = 0;
    void *heap = malloc(8);

    arena_init(&a, mid, 64);
    CHECK(arena_owns(&a, mid));
    CHECK(arena_owns(&a, mid + 63));
    CHECK(!arena_owns(&a, mid + 64));
    CHECK(!arena_owns(&a, around + ALIGN - 1));
    CHECK(!arena_owns(&a, around));
    CHECK(!arena_owns(&a, heap));
    CHECK(!arena_owns(&a, &on_stack));
    CHECK(!arena_owns(&a, NULL));
    CHECK(!arena_owns(&unset, NULL));
    CHECK(!arena_owns(&unset, heap));
    free(heap);
}

static void test_arena_reset_gives_all_back(void)
{
    struct arena a;
    void *first, *again;

    arena_init(&a, storage, sizeof(storage));
    first = arena_alloc(&a, 100);
    CHECK(arena_alloc(&a, 100) != NULL);
    CHECK(arena_alloc(&a, 100) == NULL);
    arena_reset(&a);
    CHECK_INT(a.used, 0);
    again = arena_alloc(&a, 200);
    CHECK(again == first);
    CHECK(arena_owns(&a, again));
}

int main(void)
{
    TEST_RUN(test_arena_blocks_aligned_and_disjoint);
    TEST_RUN(test_arena_full_refuses_without_malloc);
    TEST_RUN(test_arena_owns);
    TEST_RUN(test_arena_reset_gives_all_back);
    return TEST_REPORT();
}
