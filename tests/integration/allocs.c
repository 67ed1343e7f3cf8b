/*
 * allocs.c - an LD_PRELOAD shim that counts the heap allocations made by
 * permitd's own code, by hiredis and by jansson, and every epoll_ctl call
 * (test_hotpath.py).
 *
 * malloc, calloc and realloc are passed on untouched; a call counts when
 * the code that made it lies in the main program, libhiredis or libjansson
 * (the return address, against their mapped segments). libmicrohttpd's and
 * libc's own allocations do not count: they are not permitd's to remove.
 *
 * epoll_ctl calls count whoever makes them (libmicrohttpd's too): a request
 * should cost none, the loops' registrations staying put.
 *
 * SIGUSR2 writes the counts so far, as one line "ALLOCATIONS EPOLL_CTLS",
 * to the file named by ALLOCS_OUT (replacing it). The test reads them
 * before and after a run of requests; the difference is what those
 * requests cost.
 *
 * Built without sanitizers: it is preloaded in front of the ASan build
 * (ASAN_OPTIONS=verify_asan_link_order=0), whose malloc it then calls.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#define RANGES_MAX 32

static struct {
    uintptr_t start, end;
} ranges[RANGES_MAX];
static atomic_int nranges;
static atomic_long counted;
static atomic_long epoll_ctls;

static void *(*next_malloc)(size_t);
static void *(*next_calloc)(size_t, size_t);
static void *(*next_realloc)(void *, size_t);
static void (*next_free)(void *);
static int (*next_epoll_ctl)(int, int, int, struct epoll_event *);

/* dlsym() may allocate before the real functions are known: from here. */
static _Alignas(16) char early[16384];
static size_t early_used;

static void *early_alloc(size_t n)
{
    void *p;

    n = (n + 15) & ~(size_t)15;
    if (n > sizeof(early) - early_used)
        return NULL;
    p = early + early_used;
    early_used += n;
    return p;
}

static int is_early(const void *p)
{
    return (const char *)p >= early && (const char *)p < early + sizeof(early);
}

static void count(const void *ra)
{
    uintptr_t a = (uintptr_t)ra;
    int n = atomic_load_explicit(&nranges, memory_order_acquire);

    for (int i = 0; i < n; i++)
        if (a >= ranges[i].start && a < ranges[i].end) {
            atomic_fetch_add_explicit(&counted, 1, memory_order_relaxed);
            return;
        }
}

/* The executable segments of the main program ("" name), libhiredis and
 * libjansson. */
static int add_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    int n = atomic_load(&nranges);

    (void)size;
    (void)arg;
    if (info->dlpi_name[0] != '\0' && strstr(info->dlpi_name, "libhiredis") == NULL &&
        strstr(info->dlpi_name, "libjansson") == NULL)
        return 0;
    for (int i = 0; i < info->dlpi_phnum && n < RANGES_MAX; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
            continue;
        ranges[n].start = info->dlpi_addr + ph->p_vaddr;
        ranges[n].end = ranges[n].start + ph->p_memsz;
        n++;
    }
    atomic_store_explicit(&nranges, n, memory_order_release);
    return 0;
}

/* v in decimal, written backwards ending at p; returns where it starts. */
static char *put_decimal(char *p, long v)
{
    do {
        *--p = (char)('0' + v % 10);
        v /= 10;
    } while (v > 0);
    return p;
}

static void put_count(int sig)
{
    const char *path = getenv("ALLOCS_OUT");
    char buf[48], *p = buf + sizeof(buf);
    int fd;

    (void)sig;
    if (path == NULL)
        return;
    *--p = '\n';
    p = put_decimal(p, atomic_load(&epoll_ctls));
    *--p = ' ';
    p = put_decimal(p, atomic_load(&counted));
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) {
        ssize_t w = write(fd, p, (size_t)(buf + sizeof(buf) - p));
        (void)w;
        close(fd);
    }
}

static void resolve(void)
{
    static atomic_int busy;

    if (atomic_exchange(&busy, 1))
        return;             /* dlsym() is allocating: early_alloc() serves it */
    next_malloc = dlsym(RTLD_NEXT, "malloc");
    next_calloc = dlsym(RTLD_NEXT, "calloc");
    next_realloc = dlsym(RTLD_NEXT, "realloc");
    next_free = dlsym(RTLD_NEXT, "free");
    next_epoll_ctl = dlsym(RTLD_NEXT, "epoll_ctl");
}

__attribute__((constructor)) static void init(void)
{
    resolve();
    dl_iterate_phdr(add_object, NULL);
    signal(SIGUSR2, put_count);
}

void *malloc(size_t n)
{
    if (next_malloc == NULL)
        resolve();
    if (next_malloc == NULL)
        return early_alloc(n);
    count(__builtin_return_address(0));
    return next_malloc(n);
}

void *calloc(size_t n, size_t size)
{
    if (next_calloc == NULL)
        resolve();
    if (next_calloc == NULL)
        return early_alloc(n * size);     /* early[] is zero: never reused */
    count(__builtin_return_address(0));
    return next_calloc(n, size);
}

void *realloc(void *p, size_t n)
{
    if (is_early(p)) {
        /* The old block's size is not kept: copy what early[] holds past p,
         * at most n (never read outside early[]). */
        size_t have = (size_t)(early + sizeof(early) - (char *)p);
        void *q = malloc(n);
        if (q != NULL)
            memcpy(q, p, n < have ? n : have);
        return q;
    }
    if (next_realloc == NULL)
        resolve();
    count(__builtin_return_address(0));
    return next_realloc(p, n);
}

void free(void *p)
{
    if (p == NULL || is_early(p))
        return;
    if (next_free == NULL)
        resolve();
    if (next_free != NULL)
        next_free(p);           /* else dlsym() is freeing its own: let it be */
}

int epoll_ctl(int epfd, int op, int fd, struct epoll_event *event)
{
    if (next_epoll_ctl == NULL)
        resolve();
    atomic_fetch_add_explicit(&epoll_ctls, 1, memory_order_relaxed);
    return next_epoll_ctl(epfd, op, fd, event);
}
