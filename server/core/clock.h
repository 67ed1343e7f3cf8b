/*
 * clock.h - the monotonic clock deadlines are measured on, and the wall
 * clock for times shown.
 */
#ifndef PERMITD_CLOCK_H
#define PERMITD_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Microseconds on CLOCK_MONOTONIC: for deadlines and durations only, never
 * for bucket math (that clock is Redis TIME, inside the script). */
static inline int64_t clock_now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Milliseconds since 1970 on CLOCK_REALTIME: for times shown to people and
 * to Prometheus (its time() counts the same), never for deadlines. */
static inline int64_t clock_wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#endif
