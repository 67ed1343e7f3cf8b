/*
 * stats.h - allowed and denied Acquires per second, per policy, for the
 * admin UI's live chart. Counted by this instance, kept for 5 minutes.
 */
#ifndef PERMITD_STATS_H
#define PERMITD_STATS_H

#include <stddef.h>
#include <stdint.h>

#define STATS_SECONDS 300

struct stats;

struct stats *stats_new(void);
void stats_free(struct stats *s);

/* Counts one decision for policy (lock-free; safe from any thread). A
 * policy that finds no free slot among the tracked ones is not counted. */
void stats_record(struct stats *s, const char *policy, int allowed);

/* Fills allowed[] and denied[] with the last `seconds` seconds ending at
 * *end_unix (the current second), oldest first. Returns seconds. */
size_t stats_series(struct stats *s, const char *policy, size_t seconds, int64_t *end_unix,
                    int64_t *allowed, int64_t *denied);

#endif
