/*
 * admin.h - the admin listener: /healthz, /readyz.
 *
 * Separate from the API listener, so what administrators and operators
 * reach is never what applications reach.
 */
#ifndef PERMITD_ADMIN_H
#define PERMITD_ADMIN_H

#include "config.h"
#include "http.h"
#include "redis.h"
#include "sync.h"

struct admin;

/* Returns a new admin in *out (free with admin_free()). sync may be NULL
 * (no policy store configured). Everything passed must outlive it. */
int admin_new(const struct config *cfg, struct redis *redis, struct sync *sync,
              struct admin **out, struct permitd_error *err);
void admin_free(struct admin *a);

/* The http_handler_fn of the admin listener; ud is the struct admin. */
void admin_handle(void *ud, const struct http_request *req, struct http_response *resp);

#endif
