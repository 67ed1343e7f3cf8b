/*
 * ui.h - the admin UI's static files (admin-ui/), embedded or read from
 * --admin-ui-dir.
 */
#ifndef PERMITD_UI_H
#define PERMITD_UI_H

#include "transport/http.h"

/* Fills resp with the UI file name (a bare file name: letters, digits,
 * '.', '-', '_', not starting with '.'; anything else is not found): read
 * from the folder dir when dir is not "" (development), else the copy
 * embedded in the binary; with its content type and the UI's headers
 * (no-cache, nosniff, no framing, a same-origin Content-Security-Policy).
 * accept_encoding is the request's Accept-Encoding (or NULL): when it
 * allows gzip, an embedded file is sent as its gzipped copy with
 * Content-Encoding: gzip (Vary: Accept-Encoding either way).
 * Returns 1 when served (resp->body_owned tells whether resp owns the
 * body), 0 when there is no such file. */
int ui_file(const char *dir, const char *name, const char *accept_encoding,
            struct http_response *resp);

#endif
