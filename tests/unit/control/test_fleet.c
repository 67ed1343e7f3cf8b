/*
 * test_fleet.c - the fleet publisher's key layout (server/control/fleet.c):
 * the keys and fields control/fleetsvc.c reads back must be the ones the
 * publisher writes, and a field that is not one of ours is refused rather
 * than counted. The publishing itself is tested against a real Redis
 * (tests/integration/test_fleet.py).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "control/fleet.h"
#include "core/status.h"
#include "test.h"

static void test_fleet_keys(void)
{
    char k[FLEET_KEY_MAX];

    fleet_counts_key(k, "permitd:", FLEET_RES_1S, "checkout", 1700000040);
    CHECK_STR(k, "permitd:fleet:1s:checkout:1700000040");
    fleet_counts_key(k, "p:", FLEET_RES_1M, "a.b-c", 1699999200);
    CHECK_STR(k, "p:fleet:1m:a.b-c:1699999200");
    fleet_instance_key(k, "permitd:", "web-1:8080@1700000000");
    CHECK_STR(k, "permitd:fleet:instance:web-1:8080@1700000000");
    fleet_instances_key(k, "permitd:");
    CHECK_STR(k, "permitd:fleet:instances");
}

/* Each resolution's slab holds whole buckets, and the three keep 5 min,
 * 1 h and 1 day at 1 s, 10 s and 1 min (issue 23). */
static void test_fleet_resolutions(void)
{
    static const int step[] = {1, 10, 60}, keep[] = {300, 3600, 86400};

    for (int r = 0; r < FLEET_RES_COUNT; r++) {
        CHECK_INT(fleet_resolutions[r].step_s, step[r]);
        CHECK_INT(fleet_resolutions[r].keep_s, keep[r]);
        CHECK_INT(fleet_resolutions[r].slab_s % fleet_resolutions[r].step_s, 0);
    }
}

static void test_fleet_fields(void)
{
    static const char *const bad[] = {
        "", "x", "1700000000", "1700000000|id", "1700000000|id|", "1700000000|id|z",
        "17x|id|a", "|id|a", "1700000000||a", "1700000000|id|ab",
    };
    char id[FLEET_ID_MAX];
    int64_t bucket = 0;
    int counter = -1;
    const char *f = "1700000010|web-1:8080@1700000000|d";
    char longid[FLEET_ID_MAX + 40];

    CHECK_INT(fleet_parse_field(f, strlen(f), &bucket, id, &counter), PERMITD_OK);
    CHECK_INT(bucket, 1700000010);
    CHECK_STR(id, "web-1:8080@1700000000");
    CHECK_INT(counter, STATS_DENIED);
    for (int k = 0; k < STATS_COUNTERS; k++) {
        char g[64];
        snprintf(g, sizeof(g), "5|i|%c", fleet_counter_letters[k]);
        CHECK_INT(fleet_parse_field(g, strlen(g), &bucket, id, &counter), PERMITD_OK);
        CHECK_INT(counter, k);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int rc = fleet_parse_field(bad[i], strlen(bad[i]), &bucket, id, &counter);
        if (rc != PERMITD_EINVAL)
            fprintf(stderr, "field \"%s\" was taken\n", bad[i]);
        CHECK_INT(rc, PERMITD_EINVAL);
    }
    /* An id longer than FLEET_ID_MAX - 1 is refused, not cut. */
    memset(longid, 0, sizeof(longid));
    memcpy(longid, "1|", 2);
    memset(longid + 2, 'x', FLEET_ID_MAX);
    memcpy(longid + 2 + FLEET_ID_MAX, "|a", 2);
    CHECK_INT(fleet_parse_field(longid, strlen(longid), &bucket, id, &counter), PERMITD_EINVAL);
}

int main(void)
{
    TEST_RUN(test_fleet_keys);
    TEST_RUN(test_fleet_resolutions);
    TEST_RUN(test_fleet_fields);
    return TEST_REPORT();
}
