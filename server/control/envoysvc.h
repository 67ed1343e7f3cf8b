/*
 * envoysvc.h - EnvoyDescriptorService (proto/permit/v1/envoy.proto) on the
 * admin listener, and the sync pass that loads the Envoy descriptor mapping
 * (migration 0011) into this instance's memory (decisions/envoyrls.h).
 *
 * A write goes to MySQL (stores/envoymap.h), then this instance loads the
 * table again at once; every other instance loads it at its next sync pass
 * (--sync-interval-ms).
 */
#ifndef PERMITD_ENVOYSVC_H
#define PERMITD_ENVOYSVC_H

#include "core/config.h"
#include "core/status.h"
#include "decisions/envoyrls.h"
#include "transport/connect.h"
#include "transport/http.h"

struct admin;
struct envoysvc;

/* Returns a new service in *out (free with envoysvc_free()); cfg->mysql
 * must be set; admin (who calls) and rls (where the mapping is loaded)
 * must outlive it. */
int envoysvc_new(const struct config *cfg, struct admin *admin, struct envoyrls *rls,
                 struct envoysvc **out, struct permitd_error *err);
void envoysvc_free(struct envoysvc *s);

/* Loads the whole mapping from MySQL into rls now. */
int envoysvc_load(struct envoysvc *s, struct permitd_error *err);

/* The last load's rows naming no policy, "descriptor api/generic_key=x
 * names policy p, ..." into buf (cut to size); returns how many. Any
 * thread: /readyz reads it. */
int envoysvc_broken(struct envoysvc *s, char *buf, size_t size);

/* The sync's pass hook: envoysvc_load(), a failure logged (the mapping
 * loaded last stays). ud is the struct envoysvc. */
void envoysvc_pass(void *ud);

/* The EnvoyDescriptorService procedures: admin_add_methods() (admin.h) serves them, ud
 * the envoysvc. */
extern const struct connect_method envoysvc_methods[];

#endif
