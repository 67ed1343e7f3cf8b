/*
 * cluster.h - the Redis Cluster half of the Redis wrapper: which node owns a
 * key, and what the cluster says about it.
 *
 * A cluster splits the keyspace into 16384 slots; a key's slot is CRC16 of
 * the key (or of its {hash tag}) modulo 16384, and each slot is served by
 * one master (plus replicas). This module holds the pure parts a cluster
 * client needs, over hiredis 0.14, which has no cluster support:
 *   - cluster_keyslot(): the slot of a key;
 *   - struct cluster_map: slot -> master, built from a CLUSTER SHARDS
 *     reply (Redis >= 7) or a CLUSTER SLOTS reply (older servers);
 *   - cluster_redirect_parse(): the MOVED / ASK error replies;
 *   - cluster_discover(): ask the first seed that answers for the map.
 * Like redis.h, this header keeps hiredis out of its callers: replies are
 * passed as `struct redisReply`, declared here and never opened.
 */
#ifndef PERMITD_CLUSTER_H
#define PERMITD_CLUSTER_H

#include <stddef.h>

#include "core/config.h"
#include "core/status.h"

struct redisReply;

#define CLUSTER_SLOTS 16384

/* The slot of a key (len bytes, any bytes): CRC16/XMODEM, as the Redis
 * Cluster spec, modulo 16384. When the key holds a '{' and, after it, a
 * '}', with at least one byte between the first '{' and the next '}', only
 * those bytes are hashed (the hash tag): "{user1}:a" and "{user1}:b" share
 * a slot. "{}x" has no tag and hashes whole. */
unsigned cluster_keyslot(const char *key, size_t len);

/* What a node's peers think of it (CLUSTER SHARDS "health"; CLUSTER SLOTS
 * lists only the nodes it deems usable and says nothing more). */
enum cluster_health {
    CLUSTER_HEALTH_ONLINE,
    CLUSTER_HEALTH_LOADING,     /* a replica still syncing, or never written to */
    CLUSTER_HEALTH_FAILED,
    CLUSTER_HEALTH_UNKNOWN,     /* not said (CLUSTER SLOTS) */
};

#define CLUSTER_NODE_ID_MAX 40   /* hex digits of a node id */

struct cluster_node {
    char id[CLUSTER_NODE_ID_MAX + 1];   /* "" when the reply named none */
    char host[256];                     /* the address clients should use: IP or name */
    int port;
    enum cluster_health health;
};

/* Which master serves each slot, and the replicas of each master. Only
 * masters that serve at least one slot are in the map. */
struct cluster_map;

/* Builds a map from a CLUSTER SHARDS reply (Redis >= 7.0). A node's
 * address is its "endpoint" (the one the cluster hands out in redirects)
 * unless that is empty or "?", then its "ip", and when both are empty (a
 * node that has never met another: a one-node cluster) asked_host, the
 * host the reply came from. Returns PERMITD_OK and a new
 * map in *out (free with cluster_map_free()); PERMITD_EINTERNAL, with err
 * saying which shard, node or field was wrong, for a reply that is not a
 * well-formed SHARDS answer (an error reply, a missing or mistyped field, a
 * slot out of range, a slot claimed twice, a shard with slots but no
 * master). Slots no shard claims are not an error: see
 * cluster_map_slot_ranges(). tls: each node's "tls-port" is its port
 * (rediss+cluster://; a node without one is an error), else "port". */
int cluster_map_parse_shards(const struct redisReply *reply, const char *asked_host, int tls,
                             struct cluster_map **out, struct permitd_error *err);

/* The same from a CLUSTER SLOTS reply (any Redis with cluster support).
 * asked_host is the host the reply came from: the spec's empty endpoint
 * means "the host you asked", and it is stored in its place. Returns and
 * fails as cluster_map_parse_shards(); every node's health is
 * CLUSTER_HEALTH_UNKNOWN. */
int cluster_map_parse_slots(const struct redisReply *reply, const char *asked_host,
                            struct cluster_map **out, struct permitd_error *err);

/* Frees m. NULL is a no-op. */
void cluster_map_free(struct cluster_map *m);

/* The master serving slot, or NULL when no master does (or slot >= 16384).
 * The node belongs to m and lives as long as m. */
const struct cluster_node *cluster_map_node_for_slot(const struct cluster_map *m, unsigned slot);

/* The index (0 .. cluster_map_masters() - 1) of the master serving slot, or
 * -1 as above: a small number to group calls per node by. */
int cluster_map_master_index(const struct cluster_map *m, unsigned slot);

/* How many masters the map holds; cluster_map_master(m, i) is the i-th
 * (NULL when i is out of range), in the order the reply listed them. The
 * nodes belong to m. */
size_t cluster_map_masters(const struct cluster_map *m);
const struct cluster_node *cluster_map_master(const struct cluster_map *m, size_t i);

/* The replicas of the i-th master: their count, and in *replicas (when not
 * NULL) an array of that many that belongs to m. 0 when i is out of range. */
size_t cluster_map_replicas(const struct cluster_map *m, size_t i,
                            const struct cluster_node **replicas);

/* The slots of the i-th master, or (master == -1) the slots no master
 * serves: their count, and in buf (when len > 0, always NUL-terminated,
 * cut short with "..." when it does not fit) their ranges as
 * "0-5460,7000,7002-7003". Uncovered slots are what a caller should report:
 * cluster_map_slot_ranges(m, -1, ...) > 0 means part of the keyspace has no
 * master (a failed one not yet replaced, or a cluster being built). */
unsigned cluster_map_slot_ranges(const struct cluster_map *m, int master, char *buf, size_t len);

/* An error reply that sends the client elsewhere. */
enum cluster_redirect_kind {
    CLUSTER_REDIRECT_NONE = 0,   /* not a redirect */
    CLUSTER_REDIRECT_MOVED,      /* the slot now lives there: refresh the map */
    CLUSTER_REDIRECT_ASK,        /* this once, ASKING then the call there */
};

struct cluster_redirect {
    enum cluster_redirect_kind kind;
    unsigned slot;
    char host[256];   /* "" when the server did not know it: use the host asked */
    int port;
};

/* Parses an error reply's text (s, len bytes, as hiredis gives it, without
 * the leading '-'): "MOVED 3999 127.0.0.1:6381", "ASK 3999 host:6381",
 * "MOVED 3999 ::1:6381" or "[::1]:6381" (an IPv6 address; Redis writes it
 * bare), "MOVED 3999 :6381" (unknown endpoint). Fills *out and returns its
 * kind; anything else, malformed ones included, is CLUSTER_REDIRECT_NONE
 * (and *out has kind NONE). */
enum cluster_redirect_kind cluster_redirect_parse(const char *s, size_t len,
                                                  struct cluster_redirect *out);

/* Connects to each seed in turn (blocking, each connect and command bounded
 * by timeout_ms), AUTHs when seeds has a password, and asks the first that
 * answers for CLUSTER SHARDS, or CLUSTER SLOTS when the server does not know
 * SHARDS (Redis < 7). A seed that cannot be reached, refuses AUTH, is not
 * in cluster mode or answers a malformed reply is skipped. Returns
 * PERMITD_OK and a new map in *out (free with cluster_map_free());
 * PERMITD_EUNAVAILABLE when no seed answered, err naming each seed and why
 * (never the password). Host names are resolved by the blocking connect.
 * tls (redis_tls.h): every seed over TLS; NULL: plaintext. */
struct redis_tls;
int cluster_discover(const struct config_redis_cluster *seeds, struct redis_tls *tls,
                     int timeout_ms, struct cluster_map **out, struct permitd_error *err);

#endif
