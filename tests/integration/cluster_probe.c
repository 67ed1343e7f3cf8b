/*
 * cluster_probe.c - server/stores/cluster.c driven from the command line, for
 * tests/integration/test_cluster.py, which compares what it prints with
 * what a real Redis Cluster says.
 *
 *   cluster_probe discover URL        cluster_discover() on a redis+cluster:// URL
 *   cluster_probe slots HOST PORT     CLUSTER SLOTS from one node, through
 *                                     cluster_map_parse_slots()
 *   cluster_probe keyslot             stdin: one hex-encoded key a line;
 *                                     stdout: its cluster_keyslot()
 *   cluster_probe redirect            stdin: one error text a line;
 *                                     stdout: "MOVED|ASK SLOT HOST PORT" or "NONE"
 *
 * A map is printed as lines
 *   master ID HOST PORT SLOTCOUNT RANGES
 *   replica MASTER-ID ID HOST PORT HEALTH
 *   uncovered SLOTCOUNT RANGES
 * A failure prints the error on stderr and exits 1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "stores/cluster.h"

static const char *health_name(enum cluster_health h)
{
    switch (h) {
    case CLUSTER_HEALTH_ONLINE: return "online";
    case CLUSTER_HEALTH_LOADING: return "loading";
    case CLUSTER_HEALTH_FAILED: return "failed";
    default: return "unknown";
    }
}

static void print_map(const struct cluster_map *m)
{
    static char ranges[CLUSTER_SLOTS * 7];
    unsigned n;

    for (size_t i = 0; i < cluster_map_masters(m); i++) {
        const struct cluster_node *master = cluster_map_master(m, i), *reps;
        size_t nrep = cluster_map_replicas(m, i, &reps);

        n = cluster_map_slot_ranges(m, (int)i, ranges, sizeof(ranges));
        printf("master %s %s %d %u %s\n", master->id[0] ? master->id : "-", master->host,
               master->port, n, ranges);
        for (size_t k = 0; k < nrep; k++)
            printf("replica %s %s %s %d %s\n", master->id[0] ? master->id : "-",
                   reps[k].id[0] ? reps[k].id : "-", reps[k].host, reps[k].port,
                   health_name(reps[k].health));
    }
    n = cluster_map_slot_ranges(m, -1, ranges, sizeof(ranges));
    printf("uncovered %u %s\n", n, n ? ranges : "-");
}

static int discover(const char *url)
{
    struct config_redis_cluster seeds;
    struct permitd_error err = {0, ""};
    struct cluster_map *m = NULL;

    if (config_parse_redis_cluster_url(url, &seeds, &err) != PERMITD_OK ||
        cluster_discover(&seeds, NULL, 1000, &m, &err) != PERMITD_OK) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    print_map(m);
    cluster_map_free(m);
    return 0;
}

static int slots(const char *host, int port)
{
    struct timeval tv = {2, 0};
    struct permitd_error err = {0, ""};
    struct cluster_map *m = NULL;
    redisContext *c = redisConnectWithTimeout(host, port, tv);
    redisReply *reply;
    int rc;

    if (c == NULL || c->err) {
        fprintf(stderr, "cannot connect to %s:%d\n", host, port);
        redisFree(c);
        return 1;
    }
    reply = redisCommand(c, "CLUSTER SLOTS");
    rc = cluster_map_parse_slots(reply, host, &m, &err);
    freeReplyObject(reply);
    redisFree(c);
    if (rc != PERMITD_OK) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    print_map(m);
    cluster_map_free(m);
    return 0;
}

static int keyslot(void)
{
    char line[4096], key[2048];

    while (fgets(line, sizeof(line), stdin) != NULL) {
        size_t n = strcspn(line, "\r\n"), len = 0;

        for (size_t i = 0; i + 1 < n && len < sizeof(key); i += 2) {
            unsigned b;
            if (sscanf(line + i, "%2x", &b) != 1)
                return fprintf(stderr, "not hex: %s\n", line), 1;
            key[len++] = (char)b;
        }
        printf("%u\n", cluster_keyslot(key, len));
    }
    return 0;
}

static int redirect(void)
{
    char line[1024];

    while (fgets(line, sizeof(line), stdin) != NULL) {
        struct cluster_redirect rd;

        switch (cluster_redirect_parse(line, strcspn(line, "\r\n"), &rd)) {
        case CLUSTER_REDIRECT_MOVED:
            printf("MOVED %u %s %d\n", rd.slot, rd.host, rd.port);
            break;
        case CLUSTER_REDIRECT_ASK:
            printf("ASK %u %s %d\n", rd.slot, rd.host, rd.port);
            break;
        default:
            printf("NONE\n");
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "discover") == 0)
        return discover(argv[2]);
    if (argc == 4 && strcmp(argv[1], "slots") == 0)
        return slots(argv[2], atoi(argv[3]));
    if (argc == 2 && strcmp(argv[1], "keyslot") == 0)
        return keyslot();
    if (argc == 2 && strcmp(argv[1], "redirect") == 0)
        return redirect();
    fprintf(stderr, "usage: cluster_probe discover URL | slots HOST PORT | keyslot | redirect\n");
    return 2;
}
