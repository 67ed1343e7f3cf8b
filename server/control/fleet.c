/*
 * fleet.c - the fleet publisher (see fleet.h): this instance's per-policy
 * counts and its heartbeat, into Redis once a tick.
 *
 * Why so: one instance of ten sees a tenth of the traffic; Redis is the
 * state every instance already shares. Writing per request would double
 * the Redis work of an Acquire; writing what a second added, per policy,
 * costs a few commands per active policy per second, whatever the request
 * rate (README "Redis layout" has the figures).
 *
 * How a tick works: stats_totals() hands over every policy's running
 * totals; per policy and resolution this module keeps what it has written
 * (the totals at the last write that Redis took, the bucket written to and
 * this instance's running count in it). The difference since then goes
 * into the bucket of the second the tick closes; every resolution whose
 * count changed gets an HSET of its field(s), all of the tick's commands
 * in one redis_command_pipeline() (one round trip per master in a
 * cluster, the keys spreading over slots by policy and slab). A slab's
 * EXPIREAT is the same instant from every instance (the end of its life),
 * so it goes with this instance's first write into the slab and again at
 * most once a FLEET_EXPIRE_REFRESH_S (a key lost and remade by a later
 * HSET, as after a failover, gets its expiry back), not with every HSET:
 * a policy with traffic every second costs 3 commands a second, not 6;
 * the heartbeat's sorted set is pruned and its expiry renewed as rarely.
 * A resolution's state moves on only when Redis took its HSET: after a
 * failure the next tick writes the difference again, in the next bucket,
 * so totals over a closed period stay exact (a count lands late, never
 * twice nor never), except for counts made in the last tick before a stop
 * that could not be written, or a policy's place in the stats table taken
 * by another (past --stats-policies: at most one tick of it).
 *
 * Buckets are stamped with this instance's wall clock (the tick closes
 * second t = floor((now - FLEET_TICK_OFFSET_MS) / 1 s)): instances should
 * keep their clocks in step (NTP); a skewed one's counts land in another
 * bucket, the totals stay right.
 */
#include <ctype.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "control/fleet.h"
#include "control/sync.h"
#include "stores/policy.h"

#define FLEET_REDIS_DEADLINE_MS 2000
#define FLEET_TICK_OFFSET_MS 20         /* a tick runs this long after its boundary */
#define FLEET_INSTANCES_KEEP_S 86400    /* the sorted set's entries are pruned after this */
#define FLEET_EXPIRE_REFRESH_S 60       /* a key's EXPIREAT is sent again after this */

const struct fleet_resolution fleet_resolutions[FLEET_RES_COUNT] = {
    {"1s", 1, 60, 300},
    {"10s", 10, 600, 3600},
    {"1m", 60, 3600, 86400},
};

const char fleet_counter_letters[STATS_COUNTERS] = {'a', 'd', 'e', 'p'};

/* What was written of one resolution of one policy. */
struct written {
    uint64_t last[STATS_COUNTERS];      /* the totals as of the last write Redis took */
    int64_t bucket;                     /* the bucket count[] is of */
    uint64_t count[STATS_COUNTERS];     /* this instance's count in it, as written */
    int64_t expire_slab;                /* the slab whose EXPIREAT Redis took last */
    int64_t expire_s;                   /* the tick it was sent in */
};

/* One place of the stats table, as this module last saw it. */
struct place {
    uint64_t gen;                       /* 0: never seen */
    struct written res[FLEET_RES_COUNT];
};

/* A tick's commands: the strings in one buffer (offsets until it stops
 * growing), the commands as runs of arguments. */
struct batch {
    char *buf;
    size_t len, cap;
    struct { size_t off, len; } *args;
    size_t nargs, capargs;
    struct cmd {
        size_t first;
        int n;
        size_t place;                   /* SIZE_MAX: not a counts HSET or EXPIREAT */
        int res;
        int expire;                     /* the EXPIREAT after the HSET of place/res */
        int upkeep;                     /* the instances set's prune or expiry */
        struct written next;            /* the state once Redis took it */
    } *cmds;
    size_t ncmds, capcmds;
    int oom;
};

struct fleet {
    const struct config *cfg;
    struct redis *redis;
    struct stats *stats;
    struct sync *sync;
    struct http_server *api, *admin;
    char id[FLEET_ID_MAX];
    char api_addr[300], admin_addr[300];
    int64_t started;                    /* Unix s */

    struct place *places;               /* stats_capacity() of them */
    size_t nplaces;
    struct batch batch;
    int64_t tick_s;                     /* the second the tick closes */
    uint64_t tick_events;               /* counted events in this tick */
    uint64_t last_events;
    int64_t last_tick_us;
    double rate;                        /* events per second, over the last tick */
    char redis_view[256];               /* "ok" or the last publish's error */
    int64_t set_kept_s;                 /* when the instances set was last pruned */

    pthread_t thread;
    int started_thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int stopping;
    int leaving;                        /* the last tick: the heartbeat is removed */
    _Atomic uint64_t publishes, failures, commands, bytes;
};

void fleet_counts_key(char buf[FLEET_KEY_MAX], const char *prefix, int res, const char *policy,
                      int64_t slab_start)
{
    snprintf(buf, FLEET_KEY_MAX, "%sfleet:%s:%s:%" PRId64, prefix, fleet_resolutions[res].name,
             policy, slab_start);
}

void fleet_instance_key(char buf[FLEET_KEY_MAX], const char *prefix, const char *id)
{
    snprintf(buf, FLEET_KEY_MAX, "%sfleet:instance:%s", prefix, id);
}

void fleet_instances_key(char buf[FLEET_KEY_MAX], const char *prefix)
{
    snprintf(buf, FLEET_KEY_MAX, "%sfleet:instances", prefix);
}

int fleet_parse_field(const char *field, size_t len, int64_t *bucket, char id[FLEET_ID_MAX],
                      int *counter)
{
    const char *bar1 = memchr(field, '|', len), *bar2;
    char *end;
    size_t idlen;

    if (bar1 == NULL || len < 5 || field[len - 2] != '|')
        return PERMITD_EINVAL;
    bar2 = field + len - 2;
    idlen = (size_t)(bar2 - bar1 - 1);
    if (bar2 <= bar1 || idlen == 0 || idlen >= FLEET_ID_MAX)
        return PERMITD_EINVAL;
    *bucket = strtoll(field, &end, 10);
    if (end != bar1 || end == field)
        return PERMITD_EINVAL;
    for (int k = 0; k < STATS_COUNTERS; k++) {
        if (fleet_counter_letters[k] == field[len - 1]) {
            memcpy(id, bar1 + 1, idlen);
            id[idlen] = '\0';
            *counter = k;
            return PERMITD_OK;
        }
    }
    return PERMITD_EINVAL;
}

int fleet_new(const struct config *cfg, struct redis *redis, struct stats *stats,
              struct sync *sync, struct fleet **out, struct permitd_error *err)
{
    struct fleet *f = calloc(1, sizeof(*f));

    *out = NULL;
    if (f == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "fleet: out of memory");
    f->cfg = cfg;
    f->redis = redis;
    f->stats = stats;
    f->sync = sync;
    f->started = (int64_t)time(NULL);
    f->nplaces = stats_capacity(stats);
    /* calloc: the places no policy reaches cost no memory. */
    if ((f->places = calloc(f->nplaces, sizeof(*f->places))) == NULL) {
        free(f);
        return permitd_error_set(err, PERMITD_EINTERNAL, "fleet: out of memory for %zu "
                                 "policies' publishing state (%zu bytes)", stats_capacity(stats),
                                 stats_capacity(stats) * sizeof(struct place));
    }
    snprintf(f->redis_view, sizeof(f->redis_view), "not written yet");
    pthread_mutex_init(&f->lock, NULL);
    pthread_cond_init(&f->wake, NULL);
    *out = f;
    return PERMITD_OK;
}

/* "host:port" of a listener, with the host it was given (0.0.0.0 is
 * reported as the machine's name, which is where it is reachable). */
static void address(char *buf, size_t len, const char *host, const char *hostname,
                    struct http_server *s, int port)
{
    if (s != NULL)
        port = http_server_port(s);
    if (strcmp(host, "0.0.0.0") == 0 || strcmp(host, "::") == 0 || host[0] == '\0')
        host = hostname;
    snprintf(buf, len, "%s:%d", host, port);
}

void fleet_set_listeners(struct fleet *f, struct http_server *api, struct http_server *admin)
{
    char host[64] = "";
    size_t n = 0;

    pthread_mutex_lock(&f->lock);
    f->api = api;
    f->admin = admin;
    pthread_mutex_unlock(&f->lock);
    if (f->id[0] != '\0' || (api == NULL && admin == NULL))
        return;
    if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0')
        snprintf(host, sizeof(host), "localhost");
    /* The id goes into field names split on '|' and keys split on ':'
     * nowhere: only the host name's plain characters are kept. */
    for (char *c = host; *c; c++)
        if (isalnum((unsigned char)*c) || *c == '.' || *c == '-')
            host[n++] = *c;
    host[n] = '\0';
    address(f->api_addr, sizeof(f->api_addr), f->cfg->listen_host, host, api,
            f->cfg->listen_port);
    address(f->admin_addr, sizeof(f->admin_addr), f->cfg->admin_listen_host, host, admin,
            f->cfg->admin_listen_port);
    /* Unique across restarts: a restarted instance must not overwrite the
     * running counts its earlier life wrote into the same bucket. */
    snprintf(f->id, sizeof(f->id), "%s:%d@%" PRId64, host,
             api != NULL ? http_server_port(api) : f->cfg->listen_port, f->started);
}

const char *fleet_instance_id(const struct fleet *f)
{
    return f->id;
}

void fleet_counters(struct fleet *f, uint64_t *publishes, uint64_t *failures,
                    uint64_t *commands, uint64_t *bytes)
{
    *publishes = atomic_load(&f->publishes);
    *failures = atomic_load(&f->failures);
    *commands = atomic_load(&f->commands);
    *bytes = atomic_load(&f->bytes);
}

/* The bytes of one RESP element header: '$' or '*', the number, CRLF. */
static uint64_t resp_head(size_t n)
{
    char num[24];

    return 3 + (uint64_t)snprintf(num, sizeof(num), "%zu", n);
}

/* ---- the batch ---- */

static void batch_reset(struct batch *b)
{
    b->len = b->nargs = b->ncmds = 0;
    b->oom = 0;
}

static void batch_free(struct batch *b)
{
    free(b->buf);
    free(b->args);
    free(b->cmds);
}

static int grow(void **v, size_t *cap, size_t need, size_t size)
{
    size_t c = *cap ? *cap : 64;
    void *p;

    if (need <= *cap)
        return 0;
    while (c < need)
        c *= 2;
    if ((p = realloc(*v, c * size)) == NULL)
        return -1;
    *v = p;
    *cap = c;
    return 0;
}

/* Appends one argument, printf-style. */
static void arg(struct batch *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void arg(struct batch *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (b->oom || grow((void **)&b->args, &b->capargs, b->nargs + 1, sizeof(*b->args)) != 0 ||
        grow((void **)&b->buf, &b->cap, b->len + 512, 1) != 0) {
        b->oom = 1;
        return;
    }
    va_start(ap, fmt);
    n = vsnprintf(b->buf + b->len, 512, fmt, ap);
    va_end(ap);
    if (n < 0 || n >= 512) {
        b->oom = 1;
        return;
    }
    b->args[b->nargs].off = b->len;
    b->args[b->nargs].len = (size_t)n;
    b->nargs++;
    b->len += (size_t)n;
}

/* Starts a command; its arguments follow with arg(). */
static struct cmd *cmd(struct batch *b)
{
    struct cmd *c;

    if (b->oom || grow((void **)&b->cmds, &b->capcmds, b->ncmds + 1, sizeof(*b->cmds)) != 0) {
        b->oom = 1;
        return NULL;
    }
    c = &b->cmds[b->ncmds++];
    memset(c, 0, sizeof(*c));
    c->first = b->nargs;
    c->place = SIZE_MAX;
    return c;
}

/* Ends the command begun last. */
static void cmd_end(struct batch *b)
{
    if (!b->oom && b->ncmds > 0)
        b->cmds[b->ncmds - 1].n = (int)(b->nargs - b->cmds[b->ncmds - 1].first);
}

/* ---- one tick ---- */

/* The HSET of one resolution of one policy, when its count changed since
 * the last write Redis took; and the slab's EXPIREAT after it, when this
 * instance has not had one taken for that slab in FLEET_EXPIRE_REFRESH_S. */
static void counts_commands(struct fleet *f, size_t place, const char *policy,
                            const uint64_t total[STATS_COUNTERS], int res)
{
    const struct fleet_resolution *r = &fleet_resolutions[res];
    struct written *w = &f->places[place].res[res], next;
    int64_t bucket = f->tick_s - f->tick_s % r->step_s, slab = f->tick_s - f->tick_s % r->slab_s;
    char key[FLEET_KEY_MAX];
    int changed = 0, expire;
    struct cmd *c;

    next = *w;
    if (next.bucket != bucket) {
        memset(next.count, 0, sizeof(next.count));
        next.bucket = bucket;
    }
    for (int k = 0; k < STATS_COUNTERS; k++) {
        uint64_t d = total[k] - w->last[k];
        if (d > 0) {
            next.count[k] += d;
            changed = 1;
        }
        next.last[k] = total[k];
    }
    if (!changed)
        return;
    expire = next.expire_slab != slab || f->tick_s - next.expire_s >= FLEET_EXPIRE_REFRESH_S;
    if (expire) {
        next.expire_slab = slab;
        next.expire_s = f->tick_s;
    }
    fleet_counts_key(key, f->cfg->redis_prefix, res, policy, slab);
    if ((c = cmd(&f->batch)) == NULL)
        return;
    c->place = place;
    c->res = res;
    c->next = next;
    arg(&f->batch, "HSET");
    arg(&f->batch, "%s", key);
    for (int k = 0; k < STATS_COUNTERS; k++) {
        if (next.count[k] == 0)
            continue;
        arg(&f->batch, "%" PRId64 "|%s|%c", bucket, f->id, fleet_counter_letters[k]);
        arg(&f->batch, "%" PRIu64, next.count[k]);
    }
    cmd_end(&f->batch);
    if (!expire)
        return;
    /* The slab's whole life: its last bucket ends at slab + slab_s. A
     * refusal is undone after the HSET's state is taken (publish()). */
    if ((c = cmd(&f->batch)) == NULL)
        return;
    c->place = place;
    c->res = res;
    c->expire = 1;
    arg(&f->batch, "EXPIREAT");
    arg(&f->batch, "%s", key);
    arg(&f->batch, "%" PRId64, slab + r->slab_s + r->keep_s);
    cmd_end(&f->batch);
}

static void each_policy(void *ud, size_t place, uint64_t gen, const char *policy,
                        const uint64_t total[STATS_COUNTERS])
{
    struct fleet *f = ud;
    struct place *p;

    if (place >= f->nplaces)
        return;
    p = &f->places[place];
    if (p->gen != gen) {
        /* A place taken for a new policy: its totals start from 0. */
        memset(p, 0, sizeof(*p));
        p->gen = gen;
    }
    for (int k = 0; k < STATS_COUNTERS; k++)
        f->tick_events += total[k] - p->res[FLEET_RES_1S].last[k];
    for (int res = 0; res < FLEET_RES_COUNT; res++)
        counts_commands(f, place, policy, total, res);
}

/* The heartbeat's commands. */
static void heartbeat_commands(struct fleet *f, int64_t now_s)
{
    char key[FLEET_KEY_MAX], set[FLEET_KEY_MAX], mysql[300] = "off";
    struct http_server_load load = {0};
    int64_t lag_ms = -1;
    struct cmd *c;

    if (f->sync != NULL) {
        struct sync_status st;
        sync_get_status(f->sync, &st);
        if (st.ever_succeeded)
            lag_ms = (clock_now_us() - st.last_success_us) / 1000;
        if (st.failing)
            snprintf(mysql, sizeof(mysql), "failing: %.280s", st.last_error);
        else if (!st.ever_succeeded)
            snprintf(mysql, sizeof(mysql), "first pass not done yet");
        else
            snprintf(mysql, sizeof(mysql), "ok");
    }
    pthread_mutex_lock(&f->lock);
    if (f->api != NULL)
        http_server_load(f->api, &load);
    pthread_mutex_unlock(&f->lock);
    fleet_instance_key(key, f->cfg->redis_prefix, f->id);
    fleet_instances_key(set, f->cfg->redis_prefix);
    if (f->leaving) {
        /* A clean stop: off the Instances page at once. */
        if (cmd(&f->batch) == NULL)
            return;
        arg(&f->batch, "DEL");
        arg(&f->batch, "%s", key);
        cmd_end(&f->batch);
        if (cmd(&f->batch) == NULL)
            return;
        arg(&f->batch, "ZREM");
        arg(&f->batch, "%s", set);
        arg(&f->batch, "%s", f->id);
        cmd_end(&f->batch);
        return;
    }
    if (cmd(&f->batch) == NULL)
        return;
    arg(&f->batch, "HSET");
    arg(&f->batch, "%s", key);
    arg(&f->batch, "id");
    arg(&f->batch, "%s", f->id);
    arg(&f->batch, "address");
    arg(&f->batch, "%s", f->api_addr);
    arg(&f->batch, "admin_address");
    arg(&f->batch, "%s", f->admin_addr);
    arg(&f->batch, "version");
    arg(&f->batch, "%s", PERMITD_VERSION);
    arg(&f->batch, "started");
    arg(&f->batch, "%" PRId64, f->started);
    arg(&f->batch, "threads");
    arg(&f->batch, "%d", f->cfg->threads);
    arg(&f->batch, "requests_per_second");
    arg(&f->batch, "%.1f", f->rate);
    arg(&f->batch, "sync_lag_ms");
    arg(&f->batch, "%" PRId64, lag_ms);
    arg(&f->batch, "redis");
    /* Before its first write the view is "not written yet"; but whoever
     * reads this heartbeat reads it because that write reached Redis. */
    arg(&f->batch, "%s", strcmp(f->redis_view, "not written yet") == 0 ? "ok" : f->redis_view);
    arg(&f->batch, "mysql");
    arg(&f->batch, "%s", mysql);
    arg(&f->batch, "connections");
    arg(&f->batch, "%u", load.open);
    arg(&f->batch, "connections_max");
    arg(&f->batch, "%u", load.limit);
    arg(&f->batch, "seen");
    arg(&f->batch, "%" PRId64, now_s);
    cmd_end(&f->batch);
    if (cmd(&f->batch) == NULL)
        return;
    arg(&f->batch, "EXPIRE");
    arg(&f->batch, "%s", key);
    arg(&f->batch, "%d", f->cfg->fleet_heartbeat_ttl_s);
    cmd_end(&f->batch);
    if (cmd(&f->batch) == NULL)
        return;
    arg(&f->batch, "ZADD");
    arg(&f->batch, "%s", set);
    arg(&f->batch, "%" PRId64, now_s);
    arg(&f->batch, "%s", f->id);
    cmd_end(&f->batch);
    /* The set's upkeep, once a FLEET_EXPIRE_REFRESH_S: its old entries
     * out, its expiry pushed on. */
    if (now_s - f->set_kept_s < FLEET_EXPIRE_REFRESH_S)
        return;
    f->set_kept_s = now_s;
    if ((c = cmd(&f->batch)) == NULL)
        return;
    c->upkeep = 1;
    arg(&f->batch, "ZREMRANGEBYSCORE");
    arg(&f->batch, "%s", set);
    arg(&f->batch, "-inf");
    arg(&f->batch, "%" PRId64, now_s - FLEET_INSTANCES_KEEP_S);
    cmd_end(&f->batch);
    if ((c = cmd(&f->batch)) == NULL)
        return;
    c->upkeep = 1;
    arg(&f->batch, "EXPIRE");
    arg(&f->batch, "%s", set);
    arg(&f->batch, "%d", FLEET_INSTANCES_KEEP_S);
    cmd_end(&f->batch);
}

/* One tick: the counts of second tick_s and the heartbeat, in one
 * pipeline; the state of each resolution Redis took moves on. */
static void publish(struct fleet *f, int64_t tick_s)
{
    struct permitd_error err = {0, ""};
    struct redis_str *strs = NULL;
    struct redis_command_call *calls = NULL;
    struct batch *b = &f->batch;
    int64_t now_us = clock_now_us();
    int rc, failed = 0;

    batch_reset(b);
    f->tick_s = tick_s;
    f->tick_events = 0;
    stats_totals(f->stats, each_policy, f);
    if (f->last_tick_us > 0 && now_us > f->last_tick_us)
        f->rate = (double)f->tick_events * 1e6 / (double)(now_us - f->last_tick_us);
    f->last_tick_us = now_us;
    heartbeat_commands(f, tick_s + 1);
    if (b->oom || (strs = calloc(b->nargs + 1, sizeof(*strs))) == NULL ||
        (calls = calloc(b->ncmds + 1, sizeof(*calls))) == NULL) {
        log_msg(LOG_LEVEL_WARN, "fleet counts not published: out of memory", "commands=%zu",
                b->ncmds);
        atomic_fetch_add(&f->failures, 1);
        goto out;
    }
    for (size_t i = 0; i < b->nargs; i++) {
        strs[i].p = b->buf + b->args[i].off;
        strs[i].len = b->args[i].len;
    }
    for (size_t i = 0; i < b->ncmds; i++) {
        uint64_t bytes = resp_head((size_t)b->cmds[i].n);
        calls[i].args = &strs[b->cmds[i].first];
        calls[i].nargs = b->cmds[i].n;
        for (int k = 0; k < calls[i].nargs; k++)
            bytes += resp_head(calls[i].args[k].len) + calls[i].args[k].len + 2;
        atomic_fetch_add(&f->bytes, bytes);
    }
    rc = redis_command_pipeline(f->redis, calls, b->ncmds,
                                now_us + (int64_t)FLEET_REDIS_DEADLINE_MS * 1000, &err);
    atomic_fetch_add(&f->commands, b->ncmds);
    for (size_t i = 0; i < b->ncmds; i++) {
        const struct cmd *c = &b->cmds[i];
        if (calls[i].rc != PERMITD_OK) {
            failed++;
            continue;
        }
        if (c->place != SIZE_MAX && !c->expire)
            f->places[c->place].res[c->res] = c->next;
    }
    /* An EXPIREAT Redis refused (its HSET taken or not): sent again with
     * the next write. */
    for (size_t i = 0; i < b->ncmds; i++)
        if (calls[i].rc != PERMITD_OK) {
            if (b->cmds[i].expire)
                f->places[b->cmds[i].place].res[b->cmds[i].res].expire_slab = 0;
            if (b->cmds[i].upkeep)
                f->set_kept_s = 0;
        }
    if (rc != PERMITD_OK || failed > 0) {
        atomic_fetch_add(&f->failures, 1);
        /* Logged when it starts failing, not every second while it does. */
        if (strcmp(f->redis_view, "ok") == 0 || strcmp(f->redis_view, "not written yet") == 0)
            log_msg(LOG_LEVEL_WARN, "fleet counts not published: written again at every tick "
                    "until redis takes them", "failed=%d of=%zu error=\"%s\"", failed, b->ncmds,
                    rc != PERMITD_OK ? err.message : "");
        snprintf(f->redis_view, sizeof(f->redis_view), "%.*s", (int)sizeof(f->redis_view) - 1,
                 rc != PERMITD_OK ? err.message : "some commands failed (a master down?)");
    } else {
        if (strcmp(f->redis_view, "ok") != 0 && strcmp(f->redis_view, "not written yet") != 0)
            log_msg(LOG_LEVEL_INFO, "fleet counts published again", NULL);
        atomic_fetch_add(&f->publishes, 1);
        snprintf(f->redis_view, sizeof(f->redis_view), "ok");
    }
out:
    free(strs);
    free(calls);
}

static int64_t wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The tick's second: the one that ended at the boundary just passed. */
static int64_t closed_second(int64_t ms)
{
    return (ms - FLEET_TICK_OFFSET_MS - 1) / 1000;
}

static void *run(void *arg)
{
    struct fleet *f = arg;
    int64_t period = f->cfg->fleet_publish_ms;

    pthread_mutex_lock(&f->lock);
    while (!f->stopping) {
        int64_t now = wall_ms();
        int64_t next = (now / period + 1) * period + FLEET_TICK_OFFSET_MS;
        struct timespec at = {(time_t)(next / 1000), (long)(next % 1000) * 1000000};

        while (!f->stopping && wall_ms() < next)
            pthread_cond_timedwait(&f->wake, &f->lock, &at);
        if (f->stopping)
            break;
        pthread_mutex_unlock(&f->lock);
        publish(f, closed_second(wall_ms()));
        pthread_mutex_lock(&f->lock);
    }
    pthread_mutex_unlock(&f->lock);
    return NULL;
}

int fleet_start(struct fleet *f, struct permitd_error *err)
{
    if (f->cfg->fleet_publish_ms == 0) {
        log_msg(LOG_LEVEL_INFO, "fleet publishing off (--fleet-publish-ms 0): this instance "
                "is missing from the fleet's totals and the Instances page", NULL);
        return PERMITD_OK;
    }
    if (pthread_create(&f->thread, NULL, run, f) != 0)
        return permitd_error_set(err, PERMITD_EINTERNAL, "fleet: cannot start its thread");
    f->started_thread = 1;
    return PERMITD_OK;
}

void fleet_free(struct fleet *f)
{
    if (f == NULL)
        return;
    if (f->started_thread) {
        pthread_mutex_lock(&f->lock);
        f->stopping = 1;
        pthread_cond_signal(&f->wake);
        pthread_mutex_unlock(&f->lock);
        pthread_join(f->thread, NULL);
        /* What was counted since the last tick: into the current second;
         * and the heartbeat removed. */
        f->leaving = 1;
        publish(f, closed_second(wall_ms() + 1000));
    }
    pthread_cond_destroy(&f->wake);
    pthread_mutex_destroy(&f->lock);
    batch_free(&f->batch);
    free(f->places);
    free(f);
}
