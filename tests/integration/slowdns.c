/*
 * slowdns.c - an LD_PRELOAD shim for the integration tests: a DNS that
 * answers slowly, which a test cannot summon on demand.
 *
 * getaddrinfo() of a name ending in ".slow.test" waits SLOWDNS_MS
 * milliseconds (default 2000; a name like "3000ms.slow.test" says its own),
 * then answers as for 127.0.0.1; the name
 * "two.slow.test" answers two addresses, ::1 then 127.0.0.1. Every other
 * name goes to the real getaddrinfo() at once.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int (*getaddrinfo_fn)(const char *, const char *, const struct addrinfo *,
                              struct addrinfo **);

int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                struct addrinfo **res)
{
    static const char suffix[] = ".slow.test";
    getaddrinfo_fn real = (getaddrinfo_fn)dlsym(RTLD_NEXT, "getaddrinfo");
    size_t n = node != NULL ? strlen(node) : 0;

    if (n > sizeof(suffix) - 1 && strcmp(node + n - (sizeof(suffix) - 1), suffix) == 0) {
        const char *env = getenv("SLOWDNS_MS");
        long ms = env != NULL ? atol(env) : 2000, own;
        struct timespec ts;

        if (sscanf(node, "%ldms.", &own) == 1)
            ms = own;
        ts.tv_sec = ms / 1000;
        ts.tv_nsec = (ms % 1000) * 1000000L;

        struct addrinfo *v6 = NULL;
        int rc;

        while (nanosleep(&ts, &ts) != 0)
            ;
        rc = real("127.0.0.1", service, hints, res);
        if (rc == 0 && strcmp(node, "two.slow.test") == 0 &&
            real("::1", service, hints, &v6) == 0) {
            struct addrinfo *last = v6;
            while (last->ai_next != NULL)
                last = last->ai_next;
            last->ai_next = *res;       /* freeaddrinfo() frees the chain */
            *res = v6;
        }
        return rc;
    }
    return real(node, service, hints, res);
}
