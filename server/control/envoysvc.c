/*
 * envoysvc.c - EnvoyDescriptorService on the admin listener, and the
 * mapping's sync pass (see envoysvc.h).
 *
 * Every row is checked by envoyrls_check_row() before it reaches MySQL, so
 * what an admin writes is what the gRPC workers can match; a row a DBA
 * wrote by hand that does not pass is skipped at load (and counted in the
 * log line of the pass that met it). The store's connection is used under
 * one lock: the sync's thread loads, the admin listener's thread writes.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/admin.h"
#include "control/envoysvc.h"
#include "core/log.h"
#include "core/wordlist.h"
#include "permit/v1/envoy.pb-c.h"
#include "stores/envoymap.h"
#include "transport/connect.h"

struct envoysvc {
    struct admin *admin;
    struct envoyrls *rls;
    struct envoymap *db;
    pthread_mutex_t lock;           /* db's connection, broken */
    int load_failing;               /* the last pass failed: logged once until one works */
    char broken[1024];              /* the last load's rows naming no policy */
    int nbroken;
};

int envoysvc_new(const struct config *cfg, struct admin *admin, struct envoyrls *rls,
                 struct envoysvc **out, struct permitd_error *err)
{
    struct envoysvc *s = calloc(1, sizeof(*s));
    int rc;

    *out = NULL;
    if (s == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    if ((rc = envoymap_new(cfg, &s->db, err)) != PERMITD_OK) {
        free(s);
        return rc;
    }
    pthread_mutex_init(&s->lock, NULL);
    s->admin = admin;
    s->rls = rls;
    *out = s;
    return PERMITD_OK;
}

void envoysvc_free(struct envoysvc *s)
{
    if (s == NULL)
        return;
    envoymap_free(s->db);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

/* Notes the rows of a load naming no policy, for /readyz (s->lock held). */
static void note_broken(struct envoysvc *s, const struct envoymap_row *rows, size_t n)
{
    struct wordlist l;

    wordlist_init(&l, s->broken, sizeof(s->broken));
    for (size_t i = 0; i < n; i++)
        if (rows[i].policy_missing)
            wordlist_add(&l, "descriptor %s/%s names policy %s", rows[i].domain,
                         rows[i].descriptor, rows[i].policy);
    s->nbroken = l.count;
}

int envoysvc_load(struct envoysvc *s, struct permitd_error *err)
{
    struct envoymap_row *rows = NULL;
    size_t n = 0, skipped = 0;
    int rc;

    pthread_mutex_lock(&s->lock);
    rc = envoymap_load(s->db, &rows, &n, err);
    if (rc == PERMITD_OK)
        note_broken(s, rows, n);
    pthread_mutex_unlock(&s->lock);
    if (rc == PERMITD_OK)
        rc = envoyrls_replace(s->rls, rows, n, &skipped, err);
    free(rows);
    if (rc == PERMITD_OK && skipped > 0)
        log_msg(LOG_LEVEL_WARN, "envoy descriptor rows skipped: not a valid mapping (see "
                "README: Envoy's rate limit service)", "skipped=%zu loaded=%zu", skipped,
                n - skipped);
    return rc;
}

int envoysvc_broken(struct envoysvc *s, char *buf, size_t size)
{
    int n;

    pthread_mutex_lock(&s->lock);
    snprintf(buf, size, "%s", s->broken);
    n = s->nbroken;
    pthread_mutex_unlock(&s->lock);
    return n;
}

void envoysvc_pass(void *ud)
{
    struct envoysvc *s = ud;
    struct permitd_error err = {0, ""};

    if (envoysvc_load(s, &err) != PERMITD_OK) {
        if (!s->load_failing)
            log_msg(LOG_LEVEL_WARN, "envoy descriptor mapping not loaded: the last one stays",
                    "error=%s", log_q(err.message));
        s->load_failing = 1;
    } else {
        s->load_failing = 0;
    }
}

/* A row as the RPCs answer it, its strings in the call's memory. */
static Permit__V1__EnvoyDescriptor *row_proto(struct connect_call *call,
                                              const struct envoymap_row *r)
{
    Permit__V1__EnvoyDescriptor *d = connect_call_alloc(call, sizeof(*d));

    if (d == NULL)
        return NULL;
    permit__v1__envoy_descriptor__init(d);
    if ((d->domain = connect_call_strdup(call, r->domain)) == NULL ||
        (d->descriptor = connect_call_strdup(call, r->descriptor)) == NULL ||
        (d->policy = connect_call_strdup(call, r->policy)) == NULL ||
        (d->key_entry = connect_call_strdup(call, r->key_entry)) == NULL ||
        (d->description = connect_call_strdup(call, r->description)) == NULL ||
        (d->updated_by = connect_call_strdup(call, r->updated_by)) == NULL ||
        (d->updated_at = connect_call_strdup(call, r->updated_at)) == NULL)
        return NULL;
    d->version = r->version;
    d->policy_missing = r->policy_missing != 0;
    return d;
}

/* The rows of domain ("" = all) into *out (free()), *n of them. */
static int load_rows(struct envoysvc *s, const char *domain, struct envoymap_row **out,
                     size_t *n, struct permitd_error *err)
{
    size_t m = 0;
    int rc;

    pthread_mutex_lock(&s->lock);
    rc = envoymap_load(s->db, out, n, err);
    pthread_mutex_unlock(&s->lock);
    if (rc != PERMITD_OK || domain[0] == '\0')
        return rc;
    for (size_t i = 0; i < *n; i++)
        if (strcmp((*out)[i].domain, domain) == 0)
            (*out)[m++] = (*out)[i];
    *n = m;
    return PERMITD_OK;
}

static int list(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct envoysvc *s = ud;
    const Permit__V1__ListEnvoyDescriptorsRequest *rq = (const void *)in_;
    Permit__V1__ListEnvoyDescriptorsResponse *rs = (void *)out_;
    struct envoymap_row *rows = NULL;
    char user[129];
    size_t n = 0;
    int rc;

    (void)scratch;
    if ((rc = admin_authenticate(s->admin, call, 0, user, sizeof(user), err)) != PERMITD_OK ||
        (rc = load_rows(s, rq->domain, &rows, &n, err)) != PERMITD_OK)
        return rc;
    if ((rs->descriptors = connect_call_alloc(call, (n + 1) * sizeof(*rs->descriptors))) == NULL)
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    for (size_t i = 0; rc == PERMITD_OK && i < n; i++)
        if ((rs->descriptors[rs->n_descriptors++] = row_proto(call, &rows[i])) == NULL)
            rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    free(rows);
    return rc;
}

/* The row (domain, descriptor) as it is now, for an answer. */
static int one_row(struct envoysvc *s, struct connect_call *call, const char *domain,
                   const char *descriptor, Permit__V1__EnvoyDescriptor **out,
                   struct permitd_error *err)
{
    struct envoymap_row *rows = NULL;
    size_t n = 0;
    int rc = load_rows(s, domain, &rows, &n, err);

    for (size_t i = 0; rc == PERMITD_OK && i < n; i++)
        if (strcmp(rows[i].descriptor, descriptor) == 0) {
            if ((*out = row_proto(call, &rows[i])) == NULL)
                rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
            free(rows);
            return rc;
        }
    free(rows);
    return rc != PERMITD_OK ? rc : permitd_error_set(err, PERMITD_ENOTFOUND, "no descriptor "
                                                     "\"%s\" in domain \"%s\"", descriptor,
                                                     domain);
}

/* After a write: this instance matches with the new table at once. */
static void reload(struct envoysvc *s)
{
    struct permitd_error err;

    if (envoysvc_load(s, &err) != PERMITD_OK)
        log_msg(LOG_LEVEL_WARN, "envoy descriptor mapping not reloaded after a write: the next "
                "sync pass will", "error=%s", log_q(err.message));
}

static int put(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
               ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct envoysvc *s = ud;
    const Permit__V1__PutEnvoyDescriptorRequest *rq = (const void *)in_;
    Permit__V1__PutEnvoyDescriptorResponse *rs = (void *)out_;
    const Permit__V1__EnvoyDescriptor *d = rq->descriptor;
    struct envoymap_row row;
    char user[129];
    int rc;

    (void)scratch;
    if ((rc = admin_authenticate(s->admin, call, 1, user, sizeof(user), err)) != PERMITD_OK)
        return rc;
    if (d == NULL)
        return permitd_error_set(err, PERMITD_EINVAL, "descriptor: missing");
    memset(&row, 0, sizeof(row));
    if (strlen(d->domain) >= sizeof(row.domain) || strlen(d->descriptor) >= sizeof(row.descriptor) ||
        strlen(d->policy) >= sizeof(row.policy) || strlen(d->key_entry) >= sizeof(row.key_entry) ||
        strlen(d->description) >= sizeof(row.description))
        return permitd_error_set(err, PERMITD_EINVAL, "descriptor: a field is too long (domain "
                                 "%d, descriptor %d, policy 128, key_entry %d, description 1024 "
                                 "bytes at most)", ENVOYMAP_DOMAIN_MAX, ENVOYMAP_DESCRIPTOR_MAX,
                                 ENVOYMAP_KEY_ENTRY_MAX);
    snprintf(row.domain, sizeof(row.domain), "%s", d->domain);
    snprintf(row.descriptor, sizeof(row.descriptor), "%s", d->descriptor);
    snprintf(row.policy, sizeof(row.policy), "%s", d->policy);
    snprintf(row.key_entry, sizeof(row.key_entry), "%s", d->key_entry);
    snprintf(row.description, sizeof(row.description), "%s", d->description);
    if ((rc = envoyrls_check_row(&row, err)) != PERMITD_OK)
        return rc;
    pthread_mutex_lock(&s->lock);
    rc = envoymap_put(s->db, &row, d->version, user, err);
    pthread_mutex_unlock(&s->lock);
    if (rc != PERMITD_OK)
        return rc;
    log_msg(LOG_LEVEL_INFO, "envoy descriptor written", "domain=%s descriptor=%s policy=%s "
            "key_entry=%s by=%s", row.domain, row.descriptor, row.policy, row.key_entry, user);
    reload(s);
    return one_row(s, call, row.domain, row.descriptor, &rs->descriptor, err);
}

static int delete(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                  ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct envoysvc *s = ud;
    const Permit__V1__DeleteEnvoyDescriptorRequest *rq = (const void *)in_;
    char user[129];
    int rc;

    (void)out_;
    (void)scratch;
    if ((rc = admin_authenticate(s->admin, call, 1, user, sizeof(user), err)) != PERMITD_OK)
        return rc;
    pthread_mutex_lock(&s->lock);
    rc = envoymap_delete(s->db, rq->domain, rq->descriptor, user, err);
    pthread_mutex_unlock(&s->lock);
    if (rc != PERMITD_OK)
        return rc;
    log_msg(LOG_LEVEL_INFO, "envoy descriptor deleted", "domain=%s descriptor=%s by=%s",
            rq->domain, rq->descriptor, user);
    reload(s);
    return PERMITD_OK;
}

const struct connect_method envoysvc_methods[] = {
    ADMIN_METHOD("EnvoyDescriptorService", "ListEnvoyDescriptors", list_envoy_descriptors, 1,
                 list),
    ADMIN_METHOD("EnvoyDescriptorService", "PutEnvoyDescriptor", put_envoy_descriptor, 0, put),
    ADMIN_METHOD("EnvoyDescriptorService", "DeleteEnvoyDescriptor", delete_envoy_descriptor, 0,
                 delete),
    {NULL, NULL, NULL, 0, NULL},
};
