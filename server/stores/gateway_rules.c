/*
 * gateway_rules.c - the forward-auth rules in MySQL (see gateway_rules.h).
 *
 * Every write runs as one transaction with @permitd_actor set to whoever
 * asked: the triggers of migration 0010 write the audit rows and read the
 * actor from there, so a change made here and one made with plain SQL are
 * audited by the same code (as apps.c does for apps). An update or delete
 * names the version it started from; the row is locked and compared first,
 * so of two admins editing one rule the second is told, not overwritten.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mysql.h>

#include "stores/dbconn.h"
#include "stores/gateway_rules.h"
#include "stores/policy.h"
#include "stores/policyrefs.h"

#define TIME_FMT "'%%Y-%%m-%%dT%%H:%%i:%%s.%%fZ'"

struct gateway_rules_db {
    struct dbconn_kept conn;        /* (dbconn.h) */
};

static const char *const source_names[] = {"client", "header", "none"};

const char *gateway_key_source_name(enum gateway_key_source s)
{
    return (unsigned)s < 3 ? source_names[s] : "none";
}

int gateway_key_source_parse(const char *s, enum gateway_key_source *out,
                             struct permitd_error *err)
{
    for (int i = 0; i < 3; i++)
        if (strcmp(s, source_names[i]) == 0) {
            *out = (enum gateway_key_source)i;
            return PERMITD_OK;
        }
    return permitd_error_set(err, PERMITD_EINVAL, "key_source: \"%.40s\" is not client, header "
                             "or none", s);
}

static int is_host_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-';
}

int gateway_rule_check(const struct gateway_rule *r, struct permitd_error *err)
{
    size_t n = strlen(r->host);
    int rc;

    for (size_t i = 0; i < n; i++)
        if (!is_host_char(r->host[i]) ||
            ((i == 0 || i == n - 1) && (r->host[i] == '.' || r->host[i] == '-')))
            return permitd_error_set(err, PERMITD_EINVAL, "host: \"%.80s\" is not a host name "
                                     "(letters, digits, '.' and '-', without a port; empty for "
                                     "any host)", r->host);
    if (r->path_prefix[0] != '/')
        return permitd_error_set(err, PERMITD_EINVAL, "path_prefix: \"%.80s\" does not start "
                                 "with '/' (\"/\" matches every path)", r->path_prefix);
    for (const char *c = r->path_prefix; *c; c++)
        if (*c <= ' ' || *c > '~')
            return permitd_error_set(err, PERMITD_EINVAL, "path_prefix: \"%.80s\" holds byte "
                                     "0x%02x at %zu: only printable ASCII, no space (write "
                                     "others percent-encoded, as they arrive)", r->path_prefix,
                                     (unsigned char)*c, (size_t)(c - r->path_prefix));
    for (const char *c = r->method; *c; c++)
        if (*c < 'A' || *c > 'Z')
            return permitd_error_set(err, PERMITD_EINVAL, "method: \"%.20s\" is not an HTTP "
                                     "method in capitals (GET, POST, ...; empty for any)",
                                     r->method);
    if ((rc = policy_check_name("policy", r->policy, err)) != PERMITD_OK)
        return rc;
    if (r->key_source == GATEWAY_KEY_HEADER) {
        size_t h = strlen(r->key_header);
        int ok = h > 0;
        for (size_t i = 0; ok && i < h; i++) {
            char c = r->key_header[i];
            ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '-';
        }
        if (!ok)
            return permitd_error_set(err, PERMITD_EINVAL, "key_header: \"%.80s\" is not a "
                                     "header name (letters, digits and '-'), which key_source "
                                     "header needs", r->key_header);
    } else if (r->key_header[0] != '\0') {
        return permitd_error_set(err, PERMITD_EINVAL, "key_header: \"%.80s\" is given but "
                                 "key_source is %s (only key_source header reads a header)",
                                 r->key_header, gateway_key_source_name(r->key_source));
    }
    if (r->permits < 1)
        return permitd_error_set(err, PERMITD_EINVAL, "permits: %" PRId64 " is less than 1",
                                 r->permits);
    if (strlen(r->description) > GATEWAY_DESCRIPTION_MAX)
        return permitd_error_set(err, PERMITD_EINVAL, "description: %zu bytes, the limit is %d",
                                 strlen(r->description), GATEWAY_DESCRIPTION_MAX);
    return PERMITD_OK;
}

int gateway_rules_db_new(const struct config *cfg, struct gateway_rules_db **out,
                         struct permitd_error *err)
{
    struct gateway_rules_db *d = calloc(1, sizeof(*d));

    *out = NULL;
    if (d == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    dbconn_kept_init(&d->conn, cfg, NULL);
    *out = d;
    return PERMITD_OK;
}

void gateway_rules_db_free(struct gateway_rules_db *d)
{
    if (d == NULL)
        return;
    dbconn_kept_close(&d->conn);
    free(d);
}

static int begin(struct gateway_rules_db *d, const char *actor, struct permitd_error *err)
{
    return dbconn_kept_begin(&d->conn, actor, err);
}

static int finish(struct gateway_rules_db *d, int rc, struct permitd_error *err)
{
    return dbconn_kept_finish(&d->conn, rc, err);
}

int gateway_rules_load(struct gateway_rules_db *d, struct gateway_rule **out, size_t *n,
                       struct permitd_error *err)
{
    MYSQL_RES *res = NULL;
    MYSQL_ROW row;
    struct gateway_rule *v;
    size_t count = 0;
    int rc;

    *out = NULL;
    *n = 0;
    if ((rc = dbconn_kept_ensure(&d->conn, err)) != PERMITD_OK ||
        (rc = dbconn_kept_queryf(&d->conn, &res, err, "SELECT id, position, host, path_prefix, method, policy, "
                  "key_source, key_header, permits, description, version, created_by, "
                  "updated_by, DATE_FORMAT(created_at, " TIME_FMT "), DATE_FORMAT(updated_at, "
                  TIME_FMT "), hash_key, NOT EXISTS (SELECT 1 FROM policies p WHERE p.name = "
                  "gateway_rules.policy) FROM gateway_rules ORDER BY position, id LIMIT %d",
                  GATEWAY_RULES_MAX)) != PERMITD_OK)
        return rc;
    v = calloc(mysql_num_rows(res) + 1, sizeof(*v));
    if (v == NULL) {
        mysql_free_result(res);
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    }
    while ((row = mysql_fetch_row(res)) != NULL) {
        struct gateway_rule *r = &v[count];
        struct permitd_error ignored;
        r->id = strtoll(row[0], NULL, 10);
        r->position = atoi(row[1]);
        dbconn_field_copy(r->host, sizeof(r->host), row[2]);
        dbconn_field_copy(r->path_prefix, sizeof(r->path_prefix), row[3]);
        dbconn_field_copy(r->method, sizeof(r->method), row[4]);
        dbconn_field_copy(r->policy, sizeof(r->policy), row[5]);
        if (gateway_key_source_parse(row[6] ? row[6] : "", &r->key_source, &ignored) !=
            PERMITD_OK)
            r->key_source = GATEWAY_KEY_NONE;   /* the CHECK constraint keeps this away */
        dbconn_field_copy(r->key_header, sizeof(r->key_header), row[7]);
        r->permits = row[8] ? strtoll(row[8], NULL, 10) : 1;
        dbconn_field_copy(r->description, sizeof(r->description), row[9]);
        r->version = row[10] ? strtoll(row[10], NULL, 10) : 1;
        dbconn_field_copy(r->created_by, sizeof(r->created_by), row[11]);
        dbconn_field_copy(r->updated_by, sizeof(r->updated_by), row[12]);
        dbconn_field_copy(r->created_at, sizeof(r->created_at), row[13]);
        dbconn_field_copy(r->updated_at, sizeof(r->updated_at), row[14]);
        r->hash_key = row[15] != NULL && row[15][0] == '1';
        r->policy_missing = row[16] != NULL && row[16][0] == '1';
        count++;
    }
    mysql_free_result(res);
    *out = v;
    *n = count;
    return PERMITD_OK;
}

/* The quoted strings of r's text fields, for one statement. */
struct quoted {
    char *host, *path, *method, *policy, *header, *description, *actor;
};

static void quoted_free(struct quoted *q)
{
    free(q->host);
    free(q->path);
    free(q->method);
    free(q->policy);
    free(q->header);
    free(q->description);
    free(q->actor);
}

static int quote_rule(struct gateway_rules_db *d, const struct gateway_rule *r, const char *actor,
                      struct quoted *q, struct permitd_error *err)
{
    memset(q, 0, sizeof(*q));
    q->host = dbconn_kept_quote(&d->conn, r->host);
    q->path = dbconn_kept_quote(&d->conn, r->path_prefix);
    q->method = dbconn_kept_quote(&d->conn, r->method);
    q->policy = dbconn_kept_quote(&d->conn, r->policy);
    q->header = dbconn_kept_quote(&d->conn, r->key_header);
    q->description = dbconn_kept_quote(&d->conn, r->description);
    q->actor = dbconn_kept_quote(&d->conn, actor);
    if (!q->host || !q->path || !q->method || !q->policy || !q->header || !q->description ||
        !q->actor)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    return PERMITD_OK;
}

int gateway_rules_create(struct gateway_rules_db *d, const struct gateway_rule *r,
                         const char *actor, int64_t *id, struct permitd_error *err)
{
    struct quoted q;
    MYSQL_RES *res = NULL;
    int rc = begin(d, actor, err);

    memset(&q, 0, sizeof(q));
    if (rc == PERMITD_OK)
        rc = quote_rule(d, r, actor, &q, err);
    if (rc == PERMITD_OK)
        rc = policyrefs_require(&d->conn, "policy", r->policy, err);
    if (rc == PERMITD_OK)
        rc = dbconn_kept_queryf(&d->conn, &res, err, "SELECT COUNT(*) FROM gateway_rules FOR UPDATE");
    if (rc == PERMITD_OK) {
        MYSQL_ROW row = mysql_fetch_row(res);
        if (row != NULL && row[0] != NULL && atol(row[0]) >= GATEWAY_RULES_MAX)
            rc = permitd_error_set(err, PERMITD_EEXHAUSTED, "there are %d gateway rules "
                                   "already, the most permitd loads; delete one first",
                                   GATEWAY_RULES_MAX);
    }
    if (res != NULL)
        mysql_free_result(res);
    if (rc == PERMITD_OK)
        rc = dbconn_kept_queryf(&d->conn, NULL, err, "INSERT INTO gateway_rules (position, host, path_prefix, method, "
                 "policy, key_source, key_header, hash_key, permits, description, created_by, "
                 "updated_by) VALUES (%d, %s, %s, %s, %s, '%s', %s, %d, %" PRId64 ", %s, %s, %s)",
                 r->position, q.host, q.path, q.method, q.policy,
                 gateway_key_source_name(r->key_source), q.header, r->hash_key ? 1 : 0, r->permits, q.description, q.actor, q.actor);
    if (rc == PERMITD_OK)
        *id = (int64_t)mysql_insert_id(d->conn.db);
    quoted_free(&q);
    return finish(d, rc, err);
}

/* Locks rule id and compares its version with version (0: any). */
static int lock_rule(struct gateway_rules_db *d, int64_t id, int64_t version,
                     struct permitd_error *err)
{
    MYSQL_RES *res = NULL;
    MYSQL_ROW row;
    int rc = dbconn_kept_queryf(&d->conn, &res, err, "SELECT version FROM gateway_rules WHERE id = %" PRId64
                 " FOR UPDATE", id);

    if (rc != PERMITD_OK)
        return rc;
    row = mysql_fetch_row(res);
    if (row == NULL)
        rc = permitd_error_set(err, PERMITD_ENOTFOUND, "id: no gateway rule %" PRId64, id);
    else if (version != 0 && strtoll(row[0], NULL, 10) != version)
        rc = permitd_error_set(err, PERMITD_EABORTED, "version: gateway rule %" PRId64 " was "
                               "changed meanwhile (you started from version %" PRId64 ", it is "
                               "at %s now): reload it and edit again", id, version, row[0]);
    mysql_free_result(res);
    return rc;
}

int gateway_rules_update(struct gateway_rules_db *d, const struct gateway_rule *r,
                         const char *actor, struct permitd_error *err)
{
    struct quoted q;
    int rc = begin(d, actor, err);

    memset(&q, 0, sizeof(q));
    if (rc == PERMITD_OK)
        rc = quote_rule(d, r, actor, &q, err);
    if (rc == PERMITD_OK)
        rc = lock_rule(d, r->id, r->version, err);
    if (rc == PERMITD_OK)
        rc = policyrefs_require(&d->conn, "policy", r->policy, err);
    if (rc == PERMITD_OK)
        rc = dbconn_kept_queryf(&d->conn, NULL, err, "UPDATE gateway_rules SET position = %d, host = %s, "
                 "path_prefix = %s, method = %s, policy = %s, key_source = '%s', key_header = %s, "
                 "hash_key = %d, permits = %" PRId64 ", description = %s, updated_by = %s "
                 "WHERE id = %" PRId64, r->position, q.host, q.path, q.method, q.policy,
                 gateway_key_source_name(r->key_source), q.header, r->hash_key ? 1 : 0, r->permits, q.description,
                 q.actor, r->id);
    quoted_free(&q);
    return finish(d, rc, err);
}

int gateway_rules_delete(struct gateway_rules_db *d, int64_t id, int64_t version,
                         const char *actor, struct permitd_error *err)
{
    int rc = begin(d, actor, err);

    if (rc == PERMITD_OK)
        rc = lock_rule(d, id, version, err);
    if (rc == PERMITD_OK)
        rc = dbconn_kept_queryf(&d->conn, NULL, err, "DELETE FROM gateway_rules WHERE id = %" PRId64, id);
    return finish(d, rc, err);
}
