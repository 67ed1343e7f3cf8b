/*
 * grpc_load.c - a closed-loop gRPC load generator for tests/bench/grpc.sh
 * (issue 25): CONNS HTTP/2 connections (nghttp2's client), STREAMS calls in
 * flight on each, for SECONDS; every call is timed from its submission to
 * its stream's close, and one that ends without grpc-status 0 is counted.
 * wrk measures the Connect path the same way (a fixed number of requests
 * in flight, latency per request), so the two compare.
 *
 *   grpc_load HOST PORT MODE CONNS STREAMS SECONDS KEYS NAME APP [AUTHZ]
 *
 * MODE acquire: permit.v1.RateLimitService/Acquire of policy NAME by APP,
 *               key user-000000..user-(KEYS-1) at random (KEYS 0: no key)
 * MODE rls:     envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit,
 *               domain NAME, one descriptor remote_address=10.x.y.z out of
 *               KEYS addresses at random (APP unused)
 * Prints one line:
 *   BENCH rps=... p50_us=... p99_us=... requests=... errors=...
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <nghttp2/nghttp2.h>

struct conn;

struct call {
    struct conn *c;
    int64_t t0;
    int ok;
    uint8_t body[256];
    size_t len, off;
};

struct conn {
    int fd;
    nghttp2_session *s;
    int inflight;
};

static const char *mode, *name, *app, *authz;
static long keys;
static int64_t end_us;
static int64_t *lat;
static size_t nlat, caplat;
static long errors;
static const char *path;

static int64_t now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static size_t varint(uint8_t *p, uint64_t v)
{
    size_t n = 0;

    do {
        p[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v)
            p[n] |= 0x80;
        n++;
    } while (v);
    return n;
}

static size_t field(uint8_t *p, int tag, const void *s, size_t len)
{
    size_t n = 0;

    p[n++] = (uint8_t)(tag << 3 | 2);
    n += varint(p + n, len);
    memcpy(p + n, s, len);
    return n + len;
}

/* The message of one call, after its 5-byte prefix. */
static size_t message(uint8_t *p)
{
    char v[64];
    size_t n = 0;
    long k = keys > 0 ? random() % keys : 0;

    if (strcmp(mode, "acquire") == 0) {
        n += field(p + n, 1, name, strlen(name));
        n += field(p + n, 2, app, strlen(app));
        if (keys > 0) {
            snprintf(v, sizeof(v), "user-%06ld", k);
            n += field(p + n, 3, v, strlen(v));
        }
        p[n++] = 4 << 3;
        p[n++] = 1;
    } else {
        uint8_t entry[96], desc[128];
        size_t e = 0, d;
        snprintf(v, sizeof(v), "10.%ld.%ld.%ld", (k >> 16) & 255, (k >> 8) & 255, k & 255);
        e += field(entry + e, 1, "remote_address", 14);
        e += field(entry + e, 2, v, strlen(v));
        d = field(desc, 1, entry, e);
        n += field(p + n, 1, name, strlen(name));
        n += field(p + n, 2, desc, d);
    }
    return n;
}

static ssize_t read_body(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length,
                         uint32_t *flags, nghttp2_data_source *src, void *ud)
{
    struct call *k = src->ptr;
    size_t n = k->len - k->off;

    (void)s;
    (void)id;
    (void)ud;
    if (n > length)
        n = length;
    memcpy(buf, k->body + k->off, n);
    k->off += n;
    if (k->off == k->len)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

static void submit(struct conn *c)
{
    struct call *k = calloc(1, sizeof(*k));
    nghttp2_data_provider prd = {.source.ptr = k, .read_callback = read_body};
    nghttp2_nv nv[7];
    size_t n = 0, m;

#define NV(a, b) nv[n++] = (nghttp2_nv){(uint8_t *)(a), (uint8_t *)(b), strlen(a), strlen(b), 0}
    NV(":method", "POST");
    NV(":scheme", "http");
    NV(":authority", "permitd");
    NV(":path", path);
    NV("content-type", "application/grpc");
    NV("te", "trailers");
    if (authz != NULL)
        NV("authorization", authz);
#undef NV
    m = message(k->body + 5);
    k->body[0] = 0;
    k->body[1] = k->body[2] = 0;
    k->body[3] = (uint8_t)(m >> 8);
    k->body[4] = (uint8_t)m;
    k->len = m + 5;
    k->c = c;
    k->t0 = now_us();
    if (nghttp2_submit_request(c->s, NULL, nv, n, &prd, k) < 0) {
        free(k);
        return;
    }
    c->inflight++;
}

static int on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *nm, size_t nl,
                     const uint8_t *v, size_t vl, uint8_t flags, void *ud)
{
    struct call *k = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);

    (void)flags;
    (void)ud;
    if (k != NULL && nl == 11 && memcmp(nm, "grpc-status", 11) == 0)
        k->ok = vl == 1 && v[0] == '0';
    return 0;
}

static int on_close(nghttp2_session *s, int32_t id, uint32_t code, void *ud)
{
    struct call *k = nghttp2_session_get_stream_user_data(s, id);
    struct conn *c = ud;

    (void)code;
    if (k == NULL)
        return 0;
    if (nlat == caplat) {
        caplat = caplat ? caplat * 2 : 1 << 16;
        lat = realloc(lat, caplat * sizeof(*lat));
    }
    lat[nlat++] = now_us() - k->t0;
    if (!k->ok)
        errors++;
    free(k);
    c->inflight--;
    if (now_us() < end_us)
        submit(c);
    return 0;
}

static int cmp(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    struct addrinfo hints = {0}, *res;
    nghttp2_session_callbacks *cb;
    struct conn *conns;
    int nconns, streams, seconds, ep;
    int64_t t0;

    if (argc < 10) {
        fprintf(stderr, "usage: grpc_load HOST PORT MODE CONNS STREAMS SECONDS KEYS NAME APP "
                "[AUTHZ]\n");
        return 2;
    }
    mode = argv[3];
    nconns = atoi(argv[4]);
    streams = atoi(argv[5]);
    seconds = atoi(argv[6]);
    keys = atol(argv[7]);
    name = argv[8];
    app = argv[9];
    authz = argc > 10 ? argv[10] : NULL;
    path = strcmp(mode, "acquire") == 0 ? "/permit.v1.RateLimitService/Acquire"
                                        : "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(argv[1], argv[2], &hints, &res) != 0)
        return 2;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_close);
    conns = calloc((size_t)nconns, sizeof(*conns));
    ep = epoll_create1(0);
    end_us = now_us() + (int64_t)seconds * 1000000;
    t0 = now_us();
    for (int i = 0; i < nconns; i++) {
        struct conn *c = &conns[i];
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        int one = 1;
        c->fd = socket(res->ai_family, SOCK_STREAM, 0);
        if (c->fd < 0 || connect(c->fd, res->ai_addr, res->ai_addrlen) != 0) {
            perror("connect");
            return 1;
        }
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        nghttp2_session_client_new(&c->s, cb, c);
        nghttp2_submit_settings(c->s, NGHTTP2_FLAG_NONE, NULL, 0);
        for (int k = 0; k < streams; k++)
            submit(c);
        epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
    }
    for (;;) {
        struct epoll_event evs[64];
        int n, live = 0;
        for (int i = 0; i < nconns; i++) {
            const uint8_t *data;
            ssize_t m;
            while ((m = nghttp2_session_mem_send(conns[i].s, &data)) > 0)
                if (write(conns[i].fd, data, (size_t)m) != m)
                    return 1;
            live += conns[i].inflight;
        }
        if (live == 0)
            break;
        n = epoll_wait(ep, evs, 64, 1000);
        for (int i = 0; i < n; i++) {
            struct conn *c = evs[i].data.ptr;
            uint8_t buf[65536];
            ssize_t m = read(c->fd, buf, sizeof(buf));
            if (m <= 0 || nghttp2_session_mem_recv(c->s, buf, (size_t)m) < 0) {
                fprintf(stderr, "grpc_load: connection lost\n");
                return 1;
            }
        }
    }
    {
        double secs = (double)(now_us() - t0) / 1e6;
        qsort(lat, nlat, sizeof(*lat), cmp);
        printf("BENCH rps=%.0f p50_us=%lld p99_us=%lld requests=%zu errors=%ld\n",
               (double)nlat / secs, nlat ? (long long)lat[nlat / 2] : 0,
               nlat ? (long long)lat[nlat * 99 / 100] : 0, nlat, errors);
    }
    return 0;
}
