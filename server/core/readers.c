/*
 * readers.c - the reading threads' slots (see readers.h).
 */
#include <sched.h>

#include "core/readers.h"

static _Atomic int slots_given;
_Thread_local int readers_mine = -1;

int readers_first_slot(void)
{
    readers_mine = atomic_fetch_add(&slots_given, 1);
    return readers_mine;
}

void readers_wait(struct readers *r)
{
    int used = atomic_load(&slots_given);

    if (used > READERS_MAX)
        used = READERS_MAX;
    for (int i = 0; i < used; i++) {
        unsigned long v = atomic_load(&r->slot[i].n);
        if (v & 1)
            while (atomic_load(&r->slot[i].n) == v)
                sched_yield();
    }
}
