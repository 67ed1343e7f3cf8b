/*
 * cluster.c - Redis Cluster's slot map, redirects and discovery, over
 * hiredis 0.14 (which knows nothing of clusters).
 *
 * The idea: a cluster client needs little beyond a plain one. It must know
 * which master serves a key (CRC16 of the key or its {tag}, mod 16384, then
 * a 16384-entry table of master indexes), learn that table from any node
 * (CLUSTER SHARDS, or CLUSTER SLOTS before Redis 7), and notice when it is
 * stale (a MOVED or ASK error names the slot and the right node). All of
 * that is here, as pure functions over replies, so it can be tested without
 * a server; cluster_discover() is the one place that talks to one, with a
 * blocking connection of its own. Connections per master, pipelining and
 * following redirects belong to redis.c, which will use this.
 *
 * A reply that does not have the shape the spec gives is refused whole,
 * with a message naming the shard, node and field: a half-read map would
 * route calls to the wrong node, and that is worse than asking again.
 */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>

#include <hiredis/hiredis.h>

#include "stores/cluster.h"
#include "stores/redis_tls.h"

/* CRC16/XMODEM (polynomial 0x1021, initial 0), the Redis Cluster spec's. */
static const uint16_t crc16_table[256] = {
    0x0000, 0x1021, 0x2042, 0x3063, 0x4084, 0x50a5, 0x60c6, 0x70e7,
    0x8108, 0x9129, 0xa14a, 0xb16b, 0xc18c, 0xd1ad, 0xe1ce, 0xf1ef,
    0x1231, 0x0210, 0x3273, 0x2252, 0x52b5, 0x4294, 0x72f7, 0x62d6,
    0x9339, 0x8318, 0xb37b, 0xa35a, 0xd3bd, 0xc39c, 0xf3ff, 0xe3de,
    0x2462, 0x3443, 0x0420, 0x1401, 0x64e6, 0x74c7, 0x44a4, 0x5485,
    0xa56a, 0xb54b, 0x8528, 0x9509, 0xe5ee, 0xf5cf, 0xc5ac, 0xd58d,
    0x3653, 0x2672, 0x1611, 0x0630, 0x76d7, 0x66f6, 0x5695, 0x46b4,
    0xb75b, 0xa77a, 0x9719, 0x8738, 0xf7df, 0xe7fe, 0xd79d, 0xc7bc,
    0x48c4, 0x58e5, 0x6886, 0x78a7, 0x0840, 0x1861, 0x2802, 0x3823,
    0xc9cc, 0xd9ed, 0xe98e, 0xf9af, 0x8948, 0x9969, 0xa90a, 0xb92b,
    0x5af5, 0x4ad4, 0x7ab7, 0x6a96, 0x1a71, 0x0a50, 0x3a33, 0x2a12,
    0xdbfd, 0xcbdc, 0xfbbf, 0xeb9e, 0x9b79, 0x8b58, 0xbb3b, 0xab1a,
    0x6ca6, 0x7c87, 0x4ce4, 0x5cc5, 0x2c22, 0x3c03, 0x0c60, 0x1c41,
    0xedae, 0xfd8f, 0xcdec, 0xddcd, 0xad2a, 0xbd0b, 0x8d68, 0x9d49,
    0x7e97, 0x6eb6, 0x5ed5, 0x4ef4, 0x3e13, 0x2e32, 0x1e51, 0x0e70,
    0xff9f, 0xefbe, 0xdfdd, 0xcffc, 0xbf1b, 0xaf3a, 0x9f59, 0x8f78,
    0x9188, 0x81a9, 0xb1ca, 0xa1eb, 0xd10c, 0xc12d, 0xf14e, 0xe16f,
    0x1080, 0x00a1, 0x30c2, 0x20e3, 0x5004, 0x4025, 0x7046, 0x6067,
    0x83b9, 0x9398, 0xa3fb, 0xb3da, 0xc33d, 0xd31c, 0xe37f, 0xf35e,
    0x02b1, 0x1290, 0x22f3, 0x32d2, 0x4235, 0x5214, 0x6277, 0x7256,
    0xb5ea, 0xa5cb, 0x95a8, 0x8589, 0xf56e, 0xe54f, 0xd52c, 0xc50d,
    0x34e2, 0x24c3, 0x14a0, 0x0481, 0x7466, 0x6447, 0x5424, 0x4405,
    0xa7db, 0xb7fa, 0x8799, 0x97b8, 0xe75f, 0xf77e, 0xc71d, 0xd73c,
    0x26d3, 0x36f2, 0x0691, 0x16b0, 0x6657, 0x7676, 0x4615, 0x5634,
    0xd94c, 0xc96d, 0xf90e, 0xe92f, 0x99c8, 0x89e9, 0xb98a, 0xa9ab,
    0x5844, 0x4865, 0x7806, 0x6827, 0x18c0, 0x08e1, 0x3882, 0x28a3,
    0xcb7d, 0xdb5c, 0xeb3f, 0xfb1e, 0x8bf9, 0x9bd8, 0xabbb, 0xbb9a,
    0x4a75, 0x5a54, 0x6a37, 0x7a16, 0x0af1, 0x1ad0, 0x2ab3, 0x3a92,
    0xfd2e, 0xed0f, 0xdd6c, 0xcd4d, 0xbdaa, 0xad8b, 0x9de8, 0x8dc9,
    0x7c26, 0x6c07, 0x5c64, 0x4c45, 0x3ca2, 0x2c83, 0x1ce0, 0x0cc1,
    0xef1f, 0xff3e, 0xcf5d, 0xdf7c, 0xaf9b, 0xbfba, 0x8fd9, 0x9ff8,
    0x6e17, 0x7e36, 0x4e55, 0x5e74, 0x2e93, 0x3eb2, 0x0ed1, 0x1ef0,
};

static uint16_t crc16(const unsigned char *p, size_t len)
{
    uint16_t crc = 0;

    for (size_t i = 0; i < len; i++)
        crc = (uint16_t)((crc << 8) ^ crc16_table[((crc >> 8) ^ p[i]) & 0xff]);
    return crc;
}

unsigned cluster_keyslot(const char *key, size_t len)
{
    const char *lbrace = memchr(key, '{', len);

    if (lbrace != NULL) {
        const char *from = lbrace + 1;
        const char *rbrace = memchr(from, '}', len - (size_t)(from - key));
        if (rbrace != NULL && rbrace > from)
            return crc16((const unsigned char *)from, (size_t)(rbrace - from)) % CLUSTER_SLOTS;
    }
    return crc16((const unsigned char *)key, len) % CLUSTER_SLOTS;
}

/* ------------------------------------------------------------ the map */

struct master {
    struct cluster_node node;
    struct cluster_node *replicas;
    size_t nreplicas;
};

struct cluster_map {
    struct master *masters;
    size_t nmasters, cap;
    int16_t owner[CLUSTER_SLOTS];   /* index into masters; -1: no master */
};

static struct cluster_map *map_new(void)
{
    struct cluster_map *m = calloc(1, sizeof(*m));

    if (m != NULL)
        memset(m->owner, 0xff, sizeof(m->owner));   /* every slot -1 */
    return m;
}

void cluster_map_free(struct cluster_map *m)
{
    if (m == NULL)
        return;
    for (size_t i = 0; i < m->nmasters; i++)
        free(m->masters[i].replicas);
    free(m->masters);
    free(m);
}

/* Appends a master (a copy of node, no replicas yet); its index, or -1
 * when out of memory. */
static int add_master(struct cluster_map *m, const struct cluster_node *node)
{
    if (m->nmasters == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 4;
        struct master *a = realloc(m->masters, cap * sizeof(*a));
        if (a == NULL)
            return -1;
        m->masters = a;
        m->cap = cap;
    }
    memset(&m->masters[m->nmasters], 0, sizeof(m->masters[0]));
    m->masters[m->nmasters].node = *node;
    return (int)m->nmasters++;
}

static int add_replica(struct master *ms, const struct cluster_node *node)
{
    struct cluster_node *a = realloc(ms->replicas, (ms->nreplicas + 1) * sizeof(*a));

    if (a == NULL)
        return -1;
    ms->replicas = a;
    ms->replicas[ms->nreplicas++] = *node;
    return 0;
}

/* Gives slots [from, to] to master index; a slot another master holds
 * already is an error naming both. */
static int claim(struct cluster_map *m, const char *what, long long from, long long to,
                 int index, struct permitd_error *err)
{
    if (from < 0 || to >= CLUSTER_SLOTS || from > to)
        return permitd_error_set(err, PERMITD_EINTERNAL,
                                 "%s: slot range %lld-%lld is not within 0-%d", what, from, to,
                                 CLUSTER_SLOTS - 1);
    for (long long s = from; s <= to; s++) {
        if (m->owner[s] != -1 && m->owner[s] != index) {
            const struct cluster_node *a = &m->masters[m->owner[s]].node;
            const struct cluster_node *b = &m->masters[index].node;
            return permitd_error_set(err, PERMITD_EINTERNAL,
                                     "%s: slot %lld is claimed by both %s:%d and %s:%d", what, s,
                                     a->host, a->port, b->host, b->port);
        }
        m->owner[s] = (int16_t)index;
    }
    return PERMITD_OK;
}

const struct cluster_node *cluster_map_node_for_slot(const struct cluster_map *m, unsigned slot)
{
    int i = cluster_map_master_index(m, slot);

    return i < 0 ? NULL : &m->masters[i].node;
}

int cluster_map_master_index(const struct cluster_map *m, unsigned slot)
{
    if (m == NULL || slot >= CLUSTER_SLOTS)
        return -1;
    return m->owner[slot];
}

size_t cluster_map_masters(const struct cluster_map *m)
{
    return m ? m->nmasters : 0;
}

const struct cluster_node *cluster_map_master(const struct cluster_map *m, size_t i)
{
    return m != NULL && i < m->nmasters ? &m->masters[i].node : NULL;
}

size_t cluster_map_replicas(const struct cluster_map *m, size_t i,
                            const struct cluster_node **replicas)
{
    if (m == NULL || i >= m->nmasters) {
        if (replicas != NULL)
            *replicas = NULL;
        return 0;
    }
    if (replicas != NULL)
        *replicas = m->masters[i].replicas;
    return m->masters[i].nreplicas;
}

unsigned cluster_map_slot_ranges(const struct cluster_map *m, int master, char *buf, size_t len)
{
    unsigned count = 0;
    size_t o = 0;
    int cut = 0;

    if (len > 0)
        buf[0] = '\0';
    for (unsigned s = 0; s < CLUSTER_SLOTS; s++) {
        unsigned e;
        char part[16];
        int n;

        if ((m ? m->owner[s] : -1) != master)
            continue;
        for (e = s; e + 1 < CLUSTER_SLOTS && (m ? m->owner[e + 1] : -1) == master; e++)
            ;
        count += e - s + 1;
        n = e == s ? snprintf(part, sizeof(part), "%s%u", o ? "," : "", s)
                   : snprintf(part, sizeof(part), "%s%u-%u", o ? "," : "", s, e);
        if (!cut && len > 0) {
            if (o + (size_t)n + 4 <= len) {   /* room for "..." after it */
                memcpy(buf + o, part, (size_t)n + 1);
                o += (size_t)n;
            } else {
                snprintf(buf + o, len - o, "...");
                cut = 1;
            }
        }
        s = e;
    }
    return count;
}

/* ------------------------------------------------------ reply reading */

/* The reply's type, by name, for messages. */
static const char *type_name(const redisReply *r)
{
    if (r == NULL)
        return "nothing";
    switch (r->type) {
    case REDIS_REPLY_STRING: return "a string";
    case REDIS_REPLY_ARRAY: return "an array";
    case REDIS_REPLY_INTEGER: return "an integer";
    case REDIS_REPLY_NIL: return "nil";
    case REDIS_REPLY_STATUS: return "a status";
    case REDIS_REPLY_ERROR: return "an error";
    default: return "an unknown type";
    }
}

static int is_str(const redisReply *r)
{
    return r != NULL && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS);
}

static int str_eq(const redisReply *r, const char *s)
{
    return is_str(r) && r->len == strlen(s) && memcmp(r->str, s, r->len) == 0;
}

/* Copies a string reply into dst, or fails naming where and what. */
static int copy_str(char *dst, size_t dstlen, const redisReply *r, const char *where,
                    const char *field, struct permitd_error *err)
{
    if (!is_str(r))
        return permitd_error_set(err, PERMITD_EINTERNAL, "%s: \"%s\" is %s, not a string",
                                 where, field, type_name(r));
    if (r->len >= dstlen || memchr(r->str, '\0', r->len) != NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL,
                                 "%s: \"%s\" (%zu bytes) is too long or holds a NUL byte",
                                 where, field, r->len);
    memcpy(dst, r->str, r->len);
    dst[r->len] = '\0';
    return PERMITD_OK;
}

static int get_port(int *port, const redisReply *r, const char *where, const char *field,
                    struct permitd_error *err)
{
    if (r == NULL || r->type != REDIS_REPLY_INTEGER)
        return permitd_error_set(err, PERMITD_EINTERNAL, "%s: \"%s\" is %s, not an integer",
                                 where, field, type_name(r));
    if (r->integer < 1 || r->integer > 65535)
        return permitd_error_set(err, PERMITD_EINTERNAL,
                                 "%s: \"%s\" %lld is not a port from 1 to 65535", where, field,
                                 r->integer);
    *port = (int)r->integer;
    return PERMITD_OK;
}

/* A node id: up to 40 hex digits (Redis writes exactly 40). */
static int get_id(char *id, const redisReply *r, const char *where, struct permitd_error *err)
{
    int rc = copy_str(id, CLUSTER_NODE_ID_MAX + 1, r, where, "id", err);

    for (const char *p = id; rc == PERMITD_OK && *p; p++)
        if (!isxdigit((unsigned char)*p))
            rc = permitd_error_set(err, PERMITD_EINTERNAL,
                                   "%s: node id \"%s\" is not hexadecimal", where, id);
    return rc;
}

/* An error reply is the server's refusal, not a malformed answer: say it. */
static int not_an_answer(const redisReply *r, const char *cmd, struct permitd_error *err)
{
    if (r != NULL && r->type == REDIS_REPLY_ERROR)
        return permitd_error_set(err, PERMITD_EINTERNAL, "%s: the server answered \"%.*s\"",
                                 cmd, (int)(r->len > 200 ? 200 : r->len), r->str);
    return permitd_error_set(err, PERMITD_EINTERNAL, "%s: the reply is %s, not an array",
                             cmd, type_name(r));
}

/* One node of a CLUSTER SHARDS shard: a flat array of name/value pairs.
 * Sets *is_master from "role". */
static int shards_node(const redisReply *r, const char *where, const char *asked_host, int tls,
                       struct cluster_node *node, int *is_master, struct permitd_error *err)
{
    char ip[256] = "", endpoint[256] = "", role[16] = "", health[16] = "";
    int have_port = 0, have_tls = 0, tls_port = 0, rc = PERMITD_OK;

    memset(node, 0, sizeof(*node));
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements % 2 != 0)
        return permitd_error_set(err, PERMITD_EINTERNAL,
                                 "%s is %s, not a map (name/value pairs)", where, type_name(r));
    for (size_t k = 0; rc == PERMITD_OK && k < r->elements; k += 2) {
        const redisReply *name = r->element[k], *v = r->element[k + 1];

        if (!is_str(name))
            return permitd_error_set(err, PERMITD_EINTERNAL, "%s: field name %zu is %s",
                                     where, k / 2 + 1, type_name(name));
        if (str_eq(name, "id"))
            rc = get_id(node->id, v, where, err);
        else if (str_eq(name, "port"))
            rc = get_port(&node->port, v, where, "port", err), have_port = 1;
        else if (str_eq(name, "tls-port"))
            rc = get_port(&tls_port, v, where, "tls-port", err), have_tls = 1;
        else if (str_eq(name, "ip"))
            rc = copy_str(ip, sizeof(ip), v, where, "ip", err);
        else if (str_eq(name, "endpoint"))
            rc = copy_str(endpoint, sizeof(endpoint), v, where, "endpoint", err);
        else if (str_eq(name, "role"))
            rc = copy_str(role, sizeof(role), v, where, "role", err);
        else if (str_eq(name, "health"))
            rc = copy_str(health, sizeof(health), v, where, "health", err);
        /* hostname, replication-offset, and fields to come: not needed */
    }
    if (rc != PERMITD_OK)
        return rc;
    /* Over TLS (rediss+cluster://) the node's TLS port; else its port. */
    if (tls && have_tls)
        node->port = tls_port;
    else if (tls)
        return permitd_error_set(err, PERMITD_EINTERNAL, "%s has no \"tls-port\" (rediss+cluster:// "
                                 "needs TLS on every node)", where);
    else if (!have_port)
        return permitd_error_set(err, PERMITD_EINTERNAL, "%s has no \"port\"%s", where,
                                 have_tls ? " (only a TLS port: use rediss+cluster://)" : "");
    if (strcmp(role, "master") == 0)
        *is_master = 1;
    else if (strcmp(role, "replica") == 0 || strcmp(role, "slave") == 0)
        *is_master = 0;
    else
        return permitd_error_set(err, PERMITD_EINTERNAL,
                                 "%s: role \"%s\" is neither master nor replica", where, role);
    if (strcmp(health, "online") == 0)
        node->health = CLUSTER_HEALTH_ONLINE;
    else if (strcmp(health, "loading") == 0)
        node->health = CLUSTER_HEALTH_LOADING;
    else if (strcmp(health, "failed") == 0)
        node->health = CLUSTER_HEALTH_FAILED;
    else
        node->health = CLUSTER_HEALTH_UNKNOWN;
    /* The endpoint is what redirects name; "?" means the cluster does not
     * know one for the node's preferred kind, and the IP still works. A
     * node that has never met another knows no address of its own (both
     * empty, Redis 7.0): the spec's "the host you asked", as in SLOTS. */
    if (endpoint[0] != '\0' && strcmp(endpoint, "?") != 0)
        snprintf(node->host, sizeof(node->host), "%s", endpoint);
    else if (ip[0] != '\0')
        snprintf(node->host, sizeof(node->host), "%s", ip);
    else if (asked_host != NULL && asked_host[0] != '\0')
        snprintf(node->host, sizeof(node->host), "%s", asked_host);
    else
        return permitd_error_set(err, PERMITD_EINTERNAL,
                                 "%s has neither \"endpoint\" nor \"ip\"", where);
    return PERMITD_OK;
}

/* One shard: {"slots": [from, to, ...], "nodes": [node, ...]}. A shard
 * without slots (an empty master, or its replicas) adds nothing. */
static int shards_one(struct cluster_map *m, const redisReply *r, size_t i,
                      const char *asked_host, int tls, struct permitd_error *err)
{
    const redisReply *slots = NULL, *nodes = NULL;
    char where[96];
    int index = -1, rc;

    snprintf(where, sizeof(where), "CLUSTER SHARDS: shard %zu", i + 1);
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements % 2 != 0)
        return permitd_error_set(err, PERMITD_EINTERNAL,
                                 "%s is %s, not a map (name/value pairs)", where, type_name(r));
    for (size_t k = 0; k < r->elements; k += 2) {
        if (!is_str(r->element[k]))
            return permitd_error_set(err, PERMITD_EINTERNAL, "%s: field name %zu is %s",
                                     where, k / 2 + 1, type_name(r->element[k]));
        if (str_eq(r->element[k], "slots"))
            slots = r->element[k + 1];
        else if (str_eq(r->element[k], "nodes"))
            nodes = r->element[k + 1];
    }
    if (slots == NULL || slots->type != REDIS_REPLY_ARRAY)
        return permitd_error_set(err, PERMITD_EINTERNAL, "%s: \"slots\" is %s, not an array",
                                 where, slots ? type_name(slots) : "missing");
    if (nodes == NULL || nodes->type != REDIS_REPLY_ARRAY)
        return permitd_error_set(err, PERMITD_EINTERNAL, "%s: \"nodes\" is %s, not an array",
                                 where, nodes ? type_name(nodes) : "missing");
    if (slots->elements % 2 != 0)
        return permitd_error_set(err, PERMITD_EINTERNAL,
                                 "%s: \"slots\" has %zu numbers, not start/end pairs", where,
                                 slots->elements);
    for (size_t k = 0; k < slots->elements; k++)
        if (slots->element[k]->type != REDIS_REPLY_INTEGER)
            return permitd_error_set(err, PERMITD_EINTERNAL,
                                     "%s: \"slots\" item %zu is %s, not an integer", where,
                                     k + 1, type_name(slots->element[k]));
    /* The master first, so the replicas have somewhere to go. */
    for (size_t k = 0; k < nodes->elements; k++) {
        struct cluster_node node;
        char nwhere[128];
        int is_master = 0;

        snprintf(nwhere, sizeof(nwhere), "%s: node %zu", where, k + 1);
        if ((rc = shards_node(nodes->element[k], nwhere, asked_host, tls, &node, &is_master, err)) !=
            PERMITD_OK)
            return rc;
        if (!is_master || slots->elements == 0)
            continue;
        /* Just after a failover the shard lists the failed old master as a
         * master still (it is one until it comes back as a replica): the
         * promoted one serves the slots. */
        if (index >= 0 && node.health == CLUSTER_HEALTH_FAILED &&
            m->masters[index].node.health != CLUSTER_HEALTH_FAILED)
            continue;
        if (index >= 0 && m->masters[index].node.health == CLUSTER_HEALTH_FAILED &&
            node.health != CLUSTER_HEALTH_FAILED) {
            m->masters[index].node = node;
            continue;
        }
        if (index >= 0)
            return permitd_error_set(err, PERMITD_EINTERNAL,
                                     "%s has two masters: %s:%d and %s:%d", where,
                                     m->masters[index].node.host, m->masters[index].node.port,
                                     node.host, node.port);
        if ((index = add_master(m, &node)) < 0)
            return permitd_error_set(err, PERMITD_EINTERNAL, "%s: out of memory", where);
    }
    if (slots->elements == 0)
        return PERMITD_OK;
    if (index < 0)
        return permitd_error_set(err, PERMITD_EINTERNAL,
                                 "%s serves slots %lld-%lld but lists no master", where,
                                 slots->element[0]->integer, slots->element[1]->integer);
    for (size_t k = 0; k < nodes->elements; k++) {
        struct cluster_node node;
        int is_master = 0;

        shards_node(nodes->element[k], where, asked_host, tls, &node, &is_master, NULL); /* read above */
        if (!is_master && add_replica(&m->masters[index], &node) != 0)
            return permitd_error_set(err, PERMITD_EINTERNAL, "%s: out of memory", where);
    }
    for (size_t k = 0; k < slots->elements; k += 2)
        if ((rc = claim(m, where, slots->element[k]->integer, slots->element[k + 1]->integer,
                        index, err)) != PERMITD_OK)
            return rc;
    return PERMITD_OK;
}

int cluster_map_parse_shards(const struct redisReply *reply, const char *asked_host, int tls,
                             struct cluster_map **out, struct permitd_error *err)
{
    struct cluster_map *m = NULL;
    int rc;

    *out = NULL;
    if (reply == NULL || reply->type != REDIS_REPLY_ARRAY)
        return not_an_answer(reply, "CLUSTER SHARDS", err);
    if ((m = map_new()) == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "CLUSTER SHARDS: out of memory");
    for (size_t i = 0; i < reply->elements; i++)
        if ((rc = shards_one(m, reply->element[i], i, asked_host, tls, err)) != PERMITD_OK)
            goto fail;
    *out = m;
    return PERMITD_OK;
fail:
    cluster_map_free(m);
    return rc;
}

/* One node of a CLUSTER SLOTS entry: [host, port, id?, metadata?]. */
static int slots_node(const redisReply *r, const char *where, const char *asked_host,
                      struct cluster_node *node, struct permitd_error *err)
{
    int rc;

    memset(node, 0, sizeof(*node));
    node->health = CLUSTER_HEALTH_UNKNOWN;
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements < 2)
        return permitd_error_set(err, PERMITD_EINTERNAL,
                                 "%s is %s, not an array [host, port, id]", where,
                                 r && r->type == REDIS_REPLY_ARRAY ? "too short" : type_name(r));
    if ((rc = copy_str(node->host, sizeof(node->host), r->element[0], where, "host", err)) != 0 ||
        (rc = get_port(&node->port, r->element[1], where, "port", err)) != 0)
        return rc;
    if (r->elements >= 3 && (rc = get_id(node->id, r->element[2], where, err)) != 0)
        return rc;
    if (node->host[0] == '\0') {
        if (asked_host == NULL || asked_host[0] == '\0')
            return permitd_error_set(err, PERMITD_EINTERNAL,
                                     "%s: the host is empty (\"the one asked\") and no host "
                                     "was given", where);
        snprintf(node->host, sizeof(node->host), "%s", asked_host);
    }
    return PERMITD_OK;
}

/* The master already in m that node is (same id, or same address when the
 * reply has no ids), or -1. */
static int find_master(const struct cluster_map *m, const struct cluster_node *node)
{
    for (size_t i = 0; i < m->nmasters; i++) {
        const struct cluster_node *n = &m->masters[i].node;
        if (node->id[0] != '\0' ? strcmp(n->id, node->id) == 0
                                : n->port == node->port && strcmp(n->host, node->host) == 0)
            return (int)i;
    }
    return -1;
}

int cluster_map_parse_slots(const struct redisReply *reply, const char *asked_host,
                            struct cluster_map **out, struct permitd_error *err)
{
    struct cluster_map *m = NULL;
    int rc = PERMITD_OK;

    *out = NULL;
    if (reply == NULL || reply->type != REDIS_REPLY_ARRAY)
        return not_an_answer(reply, "CLUSTER SLOTS", err);
    if ((m = map_new()) == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "CLUSTER SLOTS: out of memory");
    for (size_t i = 0; i < reply->elements; i++) {
        const redisReply *e = reply->element[i];
        struct cluster_node node;
        char where[96], nwhere[128];
        int index, known;

        snprintf(where, sizeof(where), "CLUSTER SLOTS: entry %zu", i + 1);
        if (e == NULL || e->type != REDIS_REPLY_ARRAY || e->elements < 3) {
            rc = permitd_error_set(err, PERMITD_EINTERNAL,
                                   "%s is %s, not [start, end, master, replicas...]", where,
                                   e && e->type == REDIS_REPLY_ARRAY ? "too short" : type_name(e));
            goto fail;
        }
        for (int k = 0; k < 2; k++)
            if (e->element[k]->type != REDIS_REPLY_INTEGER) {
                rc = permitd_error_set(err, PERMITD_EINTERNAL, "%s: the %s slot is %s, not an "
                                       "integer", where, k ? "end" : "start",
                                       type_name(e->element[k]));
                goto fail;
            }
        snprintf(nwhere, sizeof(nwhere), "%s: master", where);
        if ((rc = slots_node(e->element[2], nwhere, asked_host, &node, err)) != PERMITD_OK)
            goto fail;
        known = (index = find_master(m, &node)) >= 0;
        if (!known && (index = add_master(m, &node)) < 0) {
            rc = permitd_error_set(err, PERMITD_EINTERNAL, "%s: out of memory", where);
            goto fail;
        }
        for (size_t k = 3; k < e->elements; k++) {
            snprintf(nwhere, sizeof(nwhere), "%s: replica %zu", where, k - 2);
            if ((rc = slots_node(e->element[k], nwhere, asked_host, &node, err)) != PERMITD_OK)
                goto fail;
            /* A master with several ranges lists its replicas with each. */
            if (!known && add_replica(&m->masters[index], &node) != 0) {
                rc = permitd_error_set(err, PERMITD_EINTERNAL, "%s: out of memory", where);
                goto fail;
            }
        }
        if ((rc = claim(m, where, e->element[0]->integer, e->element[1]->integer, index,
                        err)) != PERMITD_OK)
            goto fail;
    }
    *out = m;
    return PERMITD_OK;
fail:
    cluster_map_free(m);
    return rc;
}

/* ----------------------------------------------------------- redirects */

enum cluster_redirect_kind cluster_redirect_parse(const char *s, size_t len,
                                                  struct cluster_redirect *out)
{
    const char *p = s, *end = s + len, *ep, *colon, *h, *he;
    enum cluster_redirect_kind kind;
    unsigned long slot = 0, port = 0;

    memset(out, 0, sizeof(*out));
    if (len > 6 && memcmp(s, "MOVED ", 6) == 0) {
        kind = CLUSTER_REDIRECT_MOVED;
        p += 6;
    } else if (len > 4 && memcmp(s, "ASK ", 4) == 0) {
        kind = CLUSTER_REDIRECT_ASK;
        p += 4;
    } else {
        return CLUSTER_REDIRECT_NONE;
    }
    if (p == end || !isdigit((unsigned char)*p))
        return CLUSTER_REDIRECT_NONE;
    for (; p < end && isdigit((unsigned char)*p); p++)
        if ((slot = slot * 10 + (unsigned long)(*p - '0')) >= CLUSTER_SLOTS)
            return CLUSTER_REDIRECT_NONE;
    if (p == end || *p != ' ')
        return CLUSTER_REDIRECT_NONE;
    ep = ++p;
    /* The endpoint ends at the last ':'; what is before it may be empty
     * (unknown endpoint), a name, IPv4, or IPv6 bare or in brackets. */
    colon = NULL;
    for (const char *q = ep; q < end; q++) {
        if (*q == ':')
            colon = q;
        else if (*q == ' ' || !isprint((unsigned char)*q))
            return CLUSTER_REDIRECT_NONE;
    }
    if (colon == NULL || colon + 1 == end)
        return CLUSTER_REDIRECT_NONE;
    for (p = colon + 1; p < end; p++) {
        if (!isdigit((unsigned char)*p) || (port = port * 10 + (unsigned long)(*p - '0')) > 65535)
            return CLUSTER_REDIRECT_NONE;
    }
    if (port == 0)
        return CLUSTER_REDIRECT_NONE;
    h = ep;
    he = colon;
    if (he > h && *h == '[') {
        if (he[-1] != ']')
            return CLUSTER_REDIRECT_NONE;
        h++;
        he--;
    }
    if ((size_t)(he - h) >= sizeof(out->host) || memchr(h, '[', (size_t)(he - h)) != NULL ||
        memchr(h, ']', (size_t)(he - h)) != NULL)
        return CLUSTER_REDIRECT_NONE;
    memcpy(out->host, h, (size_t)(he - h));
    out->host[he - h] = '\0';
    out->kind = kind;
    out->slot = (unsigned)slot;
    out->port = (int)port;
    return kind;
}

/* ------------------------------------------------------------ discover */

/* The server does not know CLUSTER SHARDS: Redis 7 "ERR unknown
 * subcommand 'SHARDS'...", 6.x "ERR Unknown subcommand or wrong number of
 * arguments for 'SHARDS'...", older "ERR Wrong CLUSTER subcommand...". */
static int unknown_subcommand(const redisReply *r)
{
    static const char *const starts[] = {"ERR unknown subcommand", "ERR wrong cluster subcommand"};

    if (r == NULL || r->type != REDIS_REPLY_ERROR)
        return 0;
    for (size_t i = 0; i < sizeof(starts) / sizeof(starts[0]); i++)
        if (r->len >= strlen(starts[i]) && strncasecmp(r->str, starts[i], strlen(starts[i])) == 0)
            return 1;
    return 0;
}

/* Asks one seed for the map: a new map in *out, or an error saying why not. */
static int ask_seed(const struct config_redis_cluster *seeds, const struct config_redis_seed *seed,
                    struct redis_tls *tls, int timeout_ms, struct cluster_map **out,
                    struct permitd_error *err)
{
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    redisContext *c = NULL;
    struct redis_tls_session *ts = NULL;
    redisReply *reply = NULL;
    char where[300];
    int rc;

    c = redisConnectWithTimeout(seed->host, seed->port, tv);
    if (c == NULL) {
        rc = permitd_error_set(err, PERMITD_EUNAVAILABLE, "out of memory");
        goto done;
    }
    if (c->err) {
        rc = permitd_error_set(err, PERMITD_EUNAVAILABLE, "cannot connect: %s", c->errstr);
        goto done;
    }
    redisSetTimeout(c, tv);
    if (tls != NULL) {
        snprintf(where, sizeof(where), "%s:%d", seed->host, seed->port);
        if ((rc = redis_tls_start(tls, c, seed->host, where, timeout_ms, 1, &ts, err)) != 0)
            goto done;
    }
    if (seeds->password[0] != '\0') {
        const char *argv[3] = {"AUTH", seeds->user, seeds->password};
        size_t lens[3] = {4, strlen(seeds->user), strlen(seeds->password)};
        int no_user = seeds->user[0] == '\0';     /* AUTH password */
        if (no_user) {
            argv[1] = argv[2];
            lens[1] = lens[2];
        }
        reply = redis_io_command(c, ts, 3 - no_user, argv, lens);
        if (reply == NULL || reply->type == REDIS_REPLY_ERROR) {
            rc = permitd_error_set(err, PERMITD_EUNAVAILABLE, "AUTH failed: %s",
                                   reply ? reply->str : c->errstr);
            goto done;
        }
        freeReplyObject(reply);
    }
    reply = redis_io_command(c, ts, 2, (const char *[]){"CLUSTER", "SHARDS"}, (size_t[]){7, 6});
    if (reply != NULL && unknown_subcommand(reply)) {
        freeReplyObject(reply);
        reply = redis_io_command(c, ts, 2, (const char *[]){"CLUSTER", "SLOTS"}, (size_t[]){7, 5});
        if (reply == NULL) {
            rc = permitd_error_set(err, PERMITD_EUNAVAILABLE, "CLUSTER SLOTS: %s", c->errstr);
            goto done;
        }
        rc = cluster_map_parse_slots(reply, seed->host, out, err);
    } else if (reply == NULL) {
        rc = permitd_error_set(err, PERMITD_EUNAVAILABLE, "CLUSTER SHARDS: %s", c->errstr);
        goto done;
    } else {
        rc = cluster_map_parse_shards(reply, seed->host, tls != NULL, out, err);
    }
    if (rc == PERMITD_OK && cluster_map_masters(*out) == 0) {
        /* A node that has not joined yet knows of no master: ask another. */
        cluster_map_free(*out);
        *out = NULL;
        rc = permitd_error_set(err, PERMITD_EUNAVAILABLE, "knows no master serving any slot");
    }
done:
    freeReplyObject(reply);
    redis_tls_session_free(ts);
    if (c != NULL)
        redisFree(c);
    return rc;
}

int cluster_discover(const struct config_redis_cluster *seeds, struct redis_tls *tls,
                     int timeout_ms, struct cluster_map **out, struct permitd_error *err)
{
    char why[sizeof(err->message)] = "";
    size_t o = 0;

    *out = NULL;
    if (seeds->nseeds == 0)
        return permitd_error_set(err, PERMITD_EINVAL, "redis cluster: no seed node given");
    for (int i = 0; i < seeds->nseeds; i++) {
        const struct config_redis_seed *s = &seeds->seeds[i];
        struct permitd_error e = {0, ""};
        int v6 = strchr(s->host, ':') != NULL;

        if (ask_seed(seeds, s, tls, timeout_ms, out, &e) == PERMITD_OK)
            return PERMITD_OK;
        if (o < sizeof(why))
            o += (size_t)snprintf(why + o, sizeof(why) - o, "%s%s%s%s:%d: %s", o ? "; " : "",
                                  v6 ? "[" : "", s->host, v6 ? "]" : "", s->port, e.message);
    }
    return permitd_error_set(err, PERMITD_EUNAVAILABLE,
                             "redis cluster: no seed node answered with the slot map (%s)", why);
}
