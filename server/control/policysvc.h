/*
 * policysvc.h - PolicyService (proto/permit/v1/admin.proto) on the admin
 * listener (admin.c serves it): policies in MySQL, written through to
 * Redis, and the live buckets.
 */
#ifndef PERMITD_POLICYSVC_H
#define PERMITD_POLICYSVC_H

#include <pthread.h>

#include "control/session.h"
#include "control/sync.h"
#include "core/config.h"
#include "core/status.h"
#include "decisions/limiter.h"
#include "decisions/stats.h"
#include "stores/redis.h"
#include "stores/store.h"
#include "transport/connect.h"

struct policysvc;

/* Returns a new PolicyService in *out (free with policysvc_free()). store
 * (NULL without --mysql-url: then every RPC answers failed_precondition,
 * from session_authenticate()) is used only under store_lock; sync writes
 * a change through to Redis (NULL without a store); sessions decides who
 * calls. Everything passed must outlive it. */
int policysvc_new(const struct config *cfg, struct redis *redis, struct limiter *limiter,
                  struct sync *sync, struct stats *stats, struct store *store,
                  pthread_mutex_t *store_lock, struct session *sessions,
                  struct policysvc **out, struct permitd_error *err);
void policysvc_free(struct policysvc *p);

/* PolicyService's procedures, ud the policysvc. */
extern const struct connect_method policysvc_methods[];

#endif
