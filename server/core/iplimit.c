/*
 * iplimit.c - connections open per client address, with a limit
 * (--max-connections-per-ip), shared by a listener's threads.
 *
 * A hash table of IPLIMIT_BUCKETS chains under one mutex: the lock is held
 * for a hash, a short chain walk and an increment, once per connection
 * opened or closed, never per request, so one lock for every worker costs
 * nothing measurable. Keys are the address with its port zeroed in a
 * sockaddr_storage, compared with memcmp. A record exists only while its
 * count is above zero, so memory follows the addresses connected now, not
 * every address ever seen.
 *
 * It began inside http.c (libmicrohttpd's listeners); the gRPC listener
 * needs the same count, with a check-and-count in one step for its own
 * accept(), so it lives here, below both.
 */
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/iplimit.h"

#define IPLIMIT_BUCKETS 256

struct ip_count {
    struct ip_count *next;
    struct sockaddr_storage addr;   /* address only: port zeroed */
    int n;
};

struct iplimit {
    int limit;
    unsigned addresses;
    pthread_mutex_t lock;
    struct ip_count *buckets[IPLIMIT_BUCKETS];
};

int iplimit_new(int limit, struct iplimit **out, struct permitd_error *err)
{
    struct iplimit *t;

    *out = NULL;
    if (limit < 0)
        return permitd_error_set(err, PERMITD_EINVAL, "connections per address: %d is "
                                 "negative (0 means no limit)", limit);
    if ((t = calloc(1, sizeof(*t))) == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    t->limit = limit;
    pthread_mutex_init(&t->lock, NULL);
    *out = t;
    return PERMITD_OK;
}

void iplimit_free(struct iplimit *t)
{
    if (t == NULL)
        return;
    for (int i = 0; i < IPLIMIT_BUCKETS; i++)
        while (t->buckets[i] != NULL) {
            struct ip_count *c = t->buckets[i];
            t->buckets[i] = c->next;
            free(c);
        }
    pthread_mutex_destroy(&t->lock);
    free(t);
}

int iplimit_limit(const struct iplimit *t)
{
    return t->limit;
}

/* The address of sa with its port zeroed, comparable with memcmp. */
static void key_of(struct sockaddr_storage *key, const struct sockaddr *sa)
{
    memset(key, 0, sizeof(*key));
    key->ss_family = sa->sa_family;
    if (sa->sa_family == AF_INET6)
        ((struct sockaddr_in6 *)key)->sin6_addr = ((const struct sockaddr_in6 *)sa)->sin6_addr;
    else if (sa->sa_family == AF_INET)
        ((struct sockaddr_in *)key)->sin_addr = ((const struct sockaddr_in *)sa)->sin_addr;
}

/* FNV-1a over the address bytes. */
static unsigned hash(const struct sockaddr_storage *a)
{
    const unsigned char *p;
    size_t n;
    unsigned h = 2166136261u;

    if (a->ss_family == AF_INET6) {
        p = (const unsigned char *)&((const struct sockaddr_in6 *)a)->sin6_addr;
        n = 16;
    } else {
        p = (const unsigned char *)&((const struct sockaddr_in *)a)->sin_addr;
        n = 4;
    }
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 16777619u;
    return h % IPLIMIT_BUCKETS;
}

/* Where the count of key's address is, or would go (call with the lock held). */
static struct ip_count **find(struct iplimit *t, const struct sockaddr_storage *key)
{
    struct ip_count **pp = &t->buckets[hash(key)];

    while (*pp != NULL && memcmp(&(*pp)->addr, key, sizeof(*key)) != 0)
        pp = &(*pp)->next;
    return pp;
}

/* One more for the record at *pp, made when there is none (lock held). */
static int add(struct iplimit *t, struct ip_count **pp, const struct sockaddr_storage *key)
{
    if (*pp == NULL) {
        if ((*pp = calloc(1, sizeof(**pp))) == NULL)
            return PERMITD_EINTERNAL;
        (*pp)->addr = *key;
        t->addresses++;
    }
    (*pp)->n++;
    return PERMITD_OK;
}

int iplimit_allows(struct iplimit *t, const struct sockaddr *addr)
{
    struct sockaddr_storage key;
    struct ip_count **pp;
    int ok;

    if (t->limit <= 0 || addr == NULL)
        return 1;
    key_of(&key, addr);
    pthread_mutex_lock(&t->lock);
    pp = find(t, &key);
    ok = *pp == NULL || (*pp)->n < t->limit;
    pthread_mutex_unlock(&t->lock);
    return ok;
}

int iplimit_count(struct iplimit *t, const struct sockaddr *addr)
{
    struct sockaddr_storage key;
    int rc;

    if (t->limit <= 0 || addr == NULL)
        return PERMITD_OK;
    key_of(&key, addr);
    pthread_mutex_lock(&t->lock);
    rc = add(t, find(t, &key), &key);
    pthread_mutex_unlock(&t->lock);
    return rc;
}

int iplimit_take(struct iplimit *t, const struct sockaddr *addr)
{
    struct sockaddr_storage key;
    struct ip_count **pp;
    int rc;

    if (t->limit <= 0 || addr == NULL)
        return PERMITD_OK;
    key_of(&key, addr);
    pthread_mutex_lock(&t->lock);
    pp = find(t, &key);
    rc = *pp != NULL && (*pp)->n >= t->limit ? PERMITD_EEXHAUSTED : add(t, pp, &key);
    pthread_mutex_unlock(&t->lock);
    return rc;
}

void iplimit_put(struct iplimit *t, const struct sockaddr *addr)
{
    struct sockaddr_storage key;
    struct ip_count **pp, *c;

    if (t->limit <= 0 || addr == NULL)
        return;
    key_of(&key, addr);
    pthread_mutex_lock(&t->lock);
    pp = find(t, &key);
    if (*pp != NULL && --(*pp)->n <= 0) {
        c = *pp;
        *pp = c->next;
        free(c);
        t->addresses--;
    }
    pthread_mutex_unlock(&t->lock);
}

int iplimit_held(struct iplimit *t, const struct sockaddr *addr)
{
    struct sockaddr_storage key;
    struct ip_count **pp;
    int n;

    if (addr == NULL)
        return 0;
    key_of(&key, addr);
    pthread_mutex_lock(&t->lock);
    pp = find(t, &key);
    n = *pp != NULL ? (*pp)->n : 0;
    pthread_mutex_unlock(&t->lock);
    return n;
}

unsigned iplimit_addresses(struct iplimit *t)
{
    unsigned n;

    pthread_mutex_lock(&t->lock);
    n = t->addresses;
    pthread_mutex_unlock(&t->lock);
    return n;
}
