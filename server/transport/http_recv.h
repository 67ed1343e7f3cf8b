/*
 * http_recv.h - the recv() libmicrohttpd calls (http_recv.c): every byte of
 * a connection goes through framing.c first: a plain one's as recv() reads
 * them, a TLS one's as gnutls_record_recv() decrypts them. Internal to the
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

/* gnutls_record_recv() for libmicrohttpd's TLS connections: the
 * executable's definition comes first here too. For a session of a framed
 * TLS connection of the calling worker, what GnuTLS decrypted goes through
 * framing.c as http_recv() does for plain bytes; for any other session
 * (Redis over TLS, another thread) it is GnuTLS's own, unchanged. The
 * session is declared void * so that this header needs no gnutls.h
 * (gnutls_session_t is a pointer). */
ssize_t http_recv_tls(void *session, void *data, size_t size) __asm__("gnutls_record_recv");

/* Sends c's refusal (the request its framing failed on) on its socket;
 * the caller closes the connection. On w's thread. http.c calls it (from
 * on_completed()), which is also what links http_recv.c, and with it
 * recv, into the executable from the static core library. */
void http_recv_answer(struct http_worker *w, struct http_conn *c);

#endif
