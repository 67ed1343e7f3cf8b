/*
 * http_recv.h - the recv() libmicrohttpd calls (http_recv.c): every byte of
 * a plain-HTTP connection goes through framing.c first. Internal to the
 * HTTP listener: the layers above include http.h, never this.
 */
#ifndef PERMITD_HTTP_RECV_H
#define PERMITD_HTTP_RECV_H

#include <stddef.h>
#include <sys/types.h>

#include "transport/http_conn.h"

/* recv(2) for libmicrohttpd: the executable's definition of recv comes
 * first in the dynamic linker's search (see http_recv.c). */
ssize_t http_recv(int fd, void *buf, size_t len, int flags) __asm__("recv");

/* Sends c's refusal (the request its framing failed on) on its socket;
 * the caller closes the connection. On w's thread. http.c calls it (from
 * on_completed()), which is also what links http_recv.c, and with it
 * recv, into the executable from the static core library. */
void http_recv_answer(struct http_worker *w, struct http_conn *c);

#endif
