/*
 * loop.c - one worker thread's event loop over epoll (see loop.h).
 *
 * The loop is small on purpose: a fixed array of sources, each with the
 * registration epoll holds for it, and one eventfd to wake it. On the hot
 * path a turn costs one epoll_wait: a source's fd is registered again only
 * when what it wants changed (another socket, EPOLLOUT on or off), never
 * per request, and nothing is allocated.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/loop.h"

#define LOOP_EVENTS 64

/* A source attached, with what is registered in epoll for it. */
struct attached {
    struct loop_source src;
    struct loop_want armed;         /* what epoll has (fd -1: nothing) */
};

struct loop {
    int epfd;
    int wakefd;                     /* eventfd: loop_wake() */
    int again;                      /* a source asked for one more pass */
    int nsources;
    struct attached sources[LOOP_SOURCES_MAX];
};

static const struct loop_want WANT_NOTHING = {-1, 0, INT64_MAX, 0};

int loop_new(struct loop **out, struct permitd_error *err)
{
    struct loop *l = calloc(1, sizeof(*l));
    struct epoll_event ev;

    *out = NULL;
    if (l == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "event loop: out of memory");
    l->wakefd = -1;
    if ((l->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
        (l->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
        int e = errno;
        const char *what = l->epfd < 0 ? "epoll fd" : "eventfd";
        loop_free(l);
        return permitd_error_set(err, PERMITD_EINTERNAL, "event loop: cannot create its %s: %s",
                                 what, strerror(e));
    }
    ev = (struct epoll_event){.events = EPOLLIN, .data.ptr = &l->wakefd};
    if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->wakefd, &ev) != 0) {
        int e = errno;
        loop_free(l);
        return permitd_error_set(err, PERMITD_EINTERNAL,
                                 "event loop: cannot watch its eventfd: %s", strerror(e));
    }
    *out = l;
    return PERMITD_OK;
}

void loop_free(struct loop *l)
{
    if (l == NULL)
        return;
    if (l->epfd >= 0)
        close(l->epfd);
    if (l->wakefd >= 0)
        close(l->wakefd);
    free(l);
}

int loop_attach(struct loop *l, const struct loop_source *src, struct permitd_error *err)
{
    if (l->nsources == LOOP_SOURCES_MAX)
        return permitd_error_set(err, PERMITD_EEXHAUSTED,
                                 "event loop: %d sources attached already, the most it takes",
                                 LOOP_SOURCES_MAX);
    l->sources[l->nsources++] = (struct attached){*src, WANT_NOTHING};
    return PERMITD_OK;
}

void loop_again(struct loop *l)
{
    l->again = 1;
}

void loop_wake(struct loop *l)
{
    eventfd_write(l->wakefd, 1);
}

/* Brings the epoll registration of every source in line with what it
 * wants now; returns the earliest time one asked to be called at. */
static int64_t arm(struct loop *l)
{
    int64_t first = INT64_MAX;

    for (int i = 0; i < l->nsources; i++) {
        struct attached *a = &l->sources[i];
        struct loop_want now = WANT_NOTHING;
        int same_fd;

        a->src.want(a->src.ud, &now);
        if (now.at_us < first)
            first = now.at_us;
        same_fd = now.fd == a->armed.fd && now.generation == a->armed.generation;
        if (same_fd && now.events == a->armed.events)
            continue;
        /* A closed fd has left epoll by itself; its number may be back
         * already as another socket (hence the generation). */
        if (a->armed.fd >= 0 && !same_fd)
            epoll_ctl(l->epfd, EPOLL_CTL_DEL, a->armed.fd, NULL);
        if (now.fd >= 0) {
            struct epoll_event ev = {.events = now.events, .data.ptr = a};
            if (!same_fd || epoll_ctl(l->epfd, EPOLL_CTL_MOD, now.fd, &ev) != 0)
                epoll_ctl(l->epfd, EPOLL_CTL_ADD, now.fd, &ev);
        }
        a->armed = now;
    }
    return first;
}

void loop_turn(struct loop *l)
{
    struct epoll_event ev[LOOP_EVENTS];
    int64_t at = arm(l), wait_ms = -1, now;
    int n, woke;

    if (at != INT64_MAX) {
        wait_ms = (at - clock_now_us() + 999) / 1000;
        if (wait_ms < 0)
            wait_ms = 0;
        if (wait_ms > INT32_MAX)
            wait_ms = INT32_MAX;
    }
    n = epoll_wait(l->epfd, ev, LOOP_EVENTS, (int)wait_ms);
    woke = n == 0;              /* a time came */
    for (int i = 0; i < n; i++) {
        if (ev[i].data.ptr == &l->wakefd) {
            eventfd_t v;
            eventfd_read(l->wakefd, &v);
        } else {
            struct attached *a = ev[i].data.ptr;
            a->src.ready(a->src.ud, ev[i].events);
            woke = 1;
        }
    }
    if (at != INT64_MAX && (now = clock_now_us()) >= at) {
        /* Asked again: a source the events above served may want no time now. */
        for (int i = 0; i < l->nsources; i++) {
            struct loop_want due = WANT_NOTHING;
            l->sources[i].src.want(l->sources[i].src.ud, &due);
            if (due.at_us <= now)
                l->sources[i].src.ready(l->sources[i].src.ud, 0);
        }
        woke = 1;
    }
    do {
        l->again = 0;
        for (int i = 0; i < l->nsources; i++)
            l->sources[i].src.flush(l->sources[i].src.ud, woke);
        woke = 0;
    } while (l->again);
}

void loop_close(struct loop *l)
{
    for (int i = 0; i < l->nsources; i++)
        l->sources[i].src.close(l->sources[i].src.ud);
    l->nsources = 0;
}
