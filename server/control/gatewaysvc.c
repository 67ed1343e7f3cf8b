/*
 * gatewaysvc.c - GatewayService: list, create, update and delete the
 * forward-auth rules (see gatewaysvc.h).
 *
 * Every field is checked here before MySQL is asked
 * (gateway_rule_check()), with errors that start with the field's name,
 * so the admin UI shows each at its field; the schema's CHECK constraints
 * hold the same rules for DBAs. The MySQL connection is this module's own,
 * used under one mutex: admin traffic is light.
 */
#include <ctype.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/admin.h"
#include "control/gatewaysvc.h"
#include "core/log.h"
#include "permit/v1/gateway.pb-c.h"
#include "stores/gateway_rules.h"
#include "transport/connect.h"

struct gatewaysvc {
    const struct config *cfg;
    struct admin *admin;
    struct redis *redis;
    struct gatewaysync *sync;
    struct gateway_rules_db *db;
    pthread_mutex_t lock;
};

int gatewaysvc_new(const struct config *cfg, struct admin *admin, struct redis *redis,
                   struct gatewaysync *sync, struct gatewaysvc **out, struct permitd_error *err)
{
    struct gatewaysvc *s = calloc(1, sizeof(*s));
    int rc;

    *out = NULL;
    if (s == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    s->cfg = cfg;
    s->admin = admin;
    s->redis = redis;
    s->sync = sync;
    if ((rc = gateway_rules_db_new(cfg, &s->db, err)) != PERMITD_OK) {
        free(s);
        return rc;
    }
    pthread_mutex_init(&s->lock, NULL);
    *out = s;
    return PERMITD_OK;
}

void gatewaysvc_free(struct gatewaysvc *s)
{
    if (s == NULL)
        return;
    gateway_rules_db_free(s->db);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

/* After a write: this instance at once, the others by the notice (a lost
 * one costs them at most one sync interval). */
static void changed(struct gatewaysvc *s)
{
    struct permitd_error err = {0, ""};

    if (gatewaysync_load(s->sync, &err) != PERMITD_OK)
        log_msg(LOG_LEVEL_WARN, "gateway rules not reloaded after a change; the next sync pass "
                "loads them", "error=%s", log_q(err.message));
    if (gatewaysync_notify(s->cfg, s->redis, &err) != PERMITD_OK)
        log_msg(LOG_LEVEL_WARN, "gateway rule change notice not sent; other instances see the "
                "change at their next sync pass", "error=%s", log_q(err.message));
}

static Permit__V1__GatewayRule *rule_proto(struct connect_call *call, const struct gateway_rule *r)
{
    Permit__V1__GatewayRule *m = connect_call_alloc(call, sizeof(*m));

    if (m == NULL)
        return NULL;
    permit__v1__gateway_rule__init(m);
    m->id = r->id;
    m->position = r->position;
    m->permits = r->permits;
    m->version = r->version;
    m->hash_key = r->hash_key != 0;
    m->policy_missing = r->policy_missing != 0;
    m->key_source = (char *)gateway_key_source_name(r->key_source);
    m->host = connect_call_strdup(call, r->host);
    m->path_prefix = connect_call_strdup(call, r->path_prefix);
    m->method = connect_call_strdup(call, r->method);
    m->policy = connect_call_strdup(call, r->policy);
    m->key_header = connect_call_strdup(call, r->key_header);
    m->description = connect_call_strdup(call, r->description);
    m->created_by = connect_call_strdup(call, r->created_by);
    m->updated_by = connect_call_strdup(call, r->updated_by);
    m->created_at = connect_call_strdup(call, r->created_at);
    m->updated_at = connect_call_strdup(call, r->updated_at);
    if (!m->host || !m->path_prefix || !m->method || !m->policy || !m->key_header ||
        !m->description || !m->created_by || !m->updated_by || !m->created_at || !m->updated_at)
        return NULL;
    return m;
}

/* A string field into dst (size bytes): too long is an error naming it. */
static int field(const char *name, const char *value, char *dst, size_t size,
                 struct permitd_error *err)
{
    size_t n = strlen(value);

    if (n >= size)
        return permitd_error_set(err, PERMITD_EINVAL, "%s: %zu bytes, the limit is %zu", name, n,
                                 size - 1);
    memcpy(dst, value, n + 1);
    return PERMITD_OK;
}

/* The request's rule as the store takes it, checked: the host folded to
 * lowercase, an empty key_source "client", permits 0 read as 1. */
static int rule_from(const Permit__V1__GatewayRule *m, struct gateway_rule *r,
                     struct permitd_error *err)
{
    int rc;

    if (m == NULL)
        return permitd_error_set(err, PERMITD_EINVAL, "rule: missing");
    memset(r, 0, sizeof(*r));
    r->id = m->id;
    r->version = m->version;
    r->position = m->position;
    r->permits = m->permits == 0 ? 1 : m->permits;
    r->hash_key = m->hash_key != 0;
    if ((rc = field("host", m->host, r->host, sizeof(r->host), err)) != PERMITD_OK ||
        (rc = field("path_prefix", m->path_prefix[0] ? m->path_prefix : "/", r->path_prefix,
                    sizeof(r->path_prefix), err)) != PERMITD_OK ||
        (rc = field("method", m->method, r->method, sizeof(r->method), err)) != PERMITD_OK ||
        (rc = field("policy", m->policy, r->policy, sizeof(r->policy), err)) != PERMITD_OK ||
        (rc = field("key_header", m->key_header, r->key_header, sizeof(r->key_header), err)) !=
            PERMITD_OK ||
        (rc = field("description", m->description, r->description, sizeof(r->description),
                    err)) != PERMITD_OK ||
        (rc = gateway_key_source_parse(m->key_source[0] ? m->key_source : "client",
                                       &r->key_source, err)) != PERMITD_OK)
        return rc;
    for (char *c = r->host; *c; c++)
        *c = (char)tolower((unsigned char)*c);
    return gateway_rule_check(r, err);
}

/* Rule id as the list shows it, into *out. */
static int one_rule(struct gatewaysvc *s, struct connect_call *call, int64_t id,
                    Permit__V1__GatewayRule **out, struct permitd_error *err)
{
    struct gateway_rule *v = NULL;
    size_t n = 0;
    int rc;

    *out = NULL;
    pthread_mutex_lock(&s->lock);
    rc = gateway_rules_load(s->db, &v, &n, err);
    pthread_mutex_unlock(&s->lock);
    for (size_t i = 0; rc == PERMITD_OK && i < n; i++)
        if (v[i].id == id && (*out = rule_proto(call, &v[i])) == NULL)
            rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    if (rc == PERMITD_OK && *out == NULL)
        rc = permitd_error_set(err, PERMITD_ENOTFOUND, "id: no gateway rule %" PRId64, id);
    free(v);
    return rc;
}

static int list_rules(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                      ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct gatewaysvc *s = ud;
    Permit__V1__ListGatewayRulesResponse *rs = (void *)out_;
    struct gateway_rule *v = NULL;
    char user[GATEWAY_NAME_MAX + 1];
    size_t n = 0;
    int rc;

    (void)in_;
    (void)scratch;
    if ((rc = admin_authenticate(s->admin, call, 0, user, sizeof(user), err)) != PERMITD_OK)
        return rc;
    pthread_mutex_lock(&s->lock);
    rc = gateway_rules_load(s->db, &v, &n, err);
    pthread_mutex_unlock(&s->lock);
    if (rc == PERMITD_OK &&
        (rs->rules = connect_call_alloc(call, (n + 1) * sizeof(*rs->rules))) == NULL)
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    for (size_t i = 0; rc == PERMITD_OK && i < n; i++)
        if ((rs->rules[rs->n_rules++] = rule_proto(call, &v[i])) == NULL)
            rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    free(v);
    return rc;
}

static int create_rule(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                       ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct gatewaysvc *s = ud;
    const Permit__V1__CreateGatewayRuleRequest *rq = (const void *)in_;
    Permit__V1__CreateGatewayRuleResponse *rs = (void *)out_;
    struct gateway_rule r;
    char user[GATEWAY_NAME_MAX + 1];
    int64_t id = 0;
    int rc;

    (void)scratch;
    if ((rc = admin_authenticate(s->admin, call, 1, user, sizeof(user), err)) != PERMITD_OK ||
        (rc = rule_from(rq->rule, &r, err)) != PERMITD_OK)
        return rc;
    pthread_mutex_lock(&s->lock);
    rc = gateway_rules_create(s->db, &r, user, &id, err);
    pthread_mutex_unlock(&s->lock);
    if (rc != PERMITD_OK)
        return rc;
    log_msg(LOG_LEVEL_INFO, "gateway rule created", "id=%" PRId64 " policy=%s by=%s", id,
            r.policy, user);
    changed(s);
    return one_rule(s, call, id, &rs->rule, err);
}

static int update_rule(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                       ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct gatewaysvc *s = ud;
    const Permit__V1__UpdateGatewayRuleRequest *rq = (const void *)in_;
    Permit__V1__UpdateGatewayRuleResponse *rs = (void *)out_;
    struct gateway_rule r;
    char user[GATEWAY_NAME_MAX + 1];
    int rc;

    (void)scratch;
    if ((rc = admin_authenticate(s->admin, call, 1, user, sizeof(user), err)) != PERMITD_OK ||
        (rc = rule_from(rq->rule, &r, err)) != PERMITD_OK)
        return rc;
    if (r.id <= 0)
        return permitd_error_set(err, PERMITD_EINVAL, "id: %" PRId64 " names no rule (ids start "
                                 "at 1; ListGatewayRules shows them)", r.id);
    pthread_mutex_lock(&s->lock);
    rc = gateway_rules_update(s->db, &r, user, err);
    pthread_mutex_unlock(&s->lock);
    if (rc != PERMITD_OK)
        return rc;
    log_msg(LOG_LEVEL_INFO, "gateway rule updated", "id=%" PRId64 " policy=%s by=%s", r.id,
            r.policy, user);
    changed(s);
    return one_rule(s, call, r.id, &rs->rule, err);
}

static int delete_rule(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                       ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct gatewaysvc *s = ud;
    const Permit__V1__DeleteGatewayRuleRequest *rq = (const void *)in_;
    char user[GATEWAY_NAME_MAX + 1];
    int rc;

    (void)out_;
    (void)scratch;
    if ((rc = admin_authenticate(s->admin, call, 1, user, sizeof(user), err)) != PERMITD_OK)
        return rc;
    pthread_mutex_lock(&s->lock);
    rc = gateway_rules_delete(s->db, rq->id, rq->version, user, err);
    pthread_mutex_unlock(&s->lock);
    if (rc != PERMITD_OK)
        return rc;
    log_msg(LOG_LEVEL_INFO, "gateway rule deleted", "id=%" PRId64 " by=%s", rq->id, user);
    changed(s);
    return PERMITD_OK;
}

const struct connect_method gatewaysvc_methods[] = {
    ADMIN_METHOD("GatewayService", "ListGatewayRules", list_gateway_rules, 1, list_rules),
    ADMIN_METHOD("GatewayService", "CreateGatewayRule", create_gateway_rule, 0, create_rule),
    ADMIN_METHOD("GatewayService", "UpdateGatewayRule", update_gateway_rule, 0, update_rule),
    ADMIN_METHOD("GatewayService", "DeleteGatewayRule", delete_gateway_rule, 0, delete_rule),
    {NULL, NULL, NULL, 0, NULL},
};
