/*
 * urlpath.h - the one normal form of a request path that gateway rules
 * are matched against, whichever gateway (nginx, Caddy, Traefik, Envoy)
 * described the request and however the client spelled it.
 *
 * A client chooses the bytes of its request line; a path rule ("/api/")
 * compared with those raw bytes is missed by "/%61pi/x", "//api/x",
 * "/./api/x" or "/x/../api/x", which every server behind the gateway
 * reads as /api/x. RFC 3986's normalisation closes that: percent-escapes
 * of unreserved characters decoded (section 6.2.2.2), dot segments
 * removed (5.2.4), and, as nginx's merge_slashes and most routers do,
 * repeated slashes collapsed. Escapes of other characters stay escaped,
 * their hex digits in capitals (6.2.2.1): "%2F" is not "/".
 */
#ifndef PERMITD_URLPATH_H
#define PERMITD_URLPATH_H

#include <stddef.h>

/* Writes the normal form of uri's path into out (len bytes, len >= 2,
 * always NUL-terminated): the query ("?...") and fragment ("#...")
 * dropped; an absolute-form URI ("http://host/p") reduced to its path;
 * a path not starting with '/' given one. A path longer than out is cut
 * after normalisation's first len - 1 bytes (the caller's buffer bounds
 * what it matches). Returns the length written. */
size_t urlpath_normalise(const char *uri, char *out, size_t len);

#endif
