/*
 * envoymap.c - the envoy_descriptors table (migration 0011) in MySQL; see
 * envoymap.h.
 *
 * Its own kept connection (dbconn.h), as the apps' store has: the sync's
 * thread reads, the admin listener's thread writes. The table is small (a
 * row per descriptor shape an operator configured), so a load reads it
 * whole.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mysql.h>

#include "stores/dbconn.h"
#include "stores/envoymap.h"
#include "stores/policyrefs.h"

struct envoymap {
    struct dbconn_kept conn;
};

int envoymap_new(const struct config *cfg, struct envoymap **out, struct permitd_error *err)
{
    struct envoymap *m = calloc(1, sizeof(*m));

    *out = NULL;
    if (m == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    dbconn_kept_init(&m->conn, cfg, NULL);
    *out = m;
    return PERMITD_OK;
}

void envoymap_free(struct envoymap *m)
{
    if (m == NULL)
        return;
    dbconn_kept_close(&m->conn);
    free(m);
}

int envoymap_load(struct envoymap *m, struct envoymap_row **out, size_t *n,
                  struct permitd_error *err)
{
    MYSQL_RES *res = NULL;
    MYSQL_ROW r;
    struct envoymap_row *v = NULL;
    size_t i = 0;
    int rc;

    *out = NULL;
    *n = 0;
    if ((rc = dbconn_kept_ensure(&m->conn, err)) != PERMITD_OK)
        return rc;
    rc = dbconn_kept_queryf(&m->conn, &res, err, "SELECT domain, descriptor, policy, key_entry, description, version, "
             "updated_by, DATE_FORMAT(updated_at, '%%Y-%%m-%%dT%%H:%%i:%%s.%%fZ'), "
             "NOT EXISTS (SELECT 1 FROM policies p WHERE p.name = envoy_descriptors.policy), "
             "allow_limit_override FROM envoy_descriptors ORDER BY domain, descriptor");
    if (rc != PERMITD_OK)
        return rc;
    v = calloc(mysql_num_rows(res) + 1, sizeof(*v));
    if (v == NULL) {
        mysql_free_result(res);
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    }
    while ((r = mysql_fetch_row(res)) != NULL) {
        dbconn_field_copy(v[i].domain, sizeof(v[i].domain), r[0]);
        dbconn_field_copy(v[i].descriptor, sizeof(v[i].descriptor), r[1]);
        dbconn_field_copy(v[i].policy, sizeof(v[i].policy), r[2]);
        dbconn_field_copy(v[i].key_entry, sizeof(v[i].key_entry), r[3]);
        dbconn_field_copy(v[i].description, sizeof(v[i].description), r[4]);
        v[i].version = r[5] ? strtoll(r[5], NULL, 10) : 0;
        dbconn_field_copy(v[i].updated_by, sizeof(v[i].updated_by), r[6]);
        dbconn_field_copy(v[i].updated_at, sizeof(v[i].updated_at), r[7]);
        v[i].policy_missing = r[8] != NULL && r[8][0] == '1';
        v[i].allow_limit_override = r[9] != NULL && strcmp(r[9], "1") == 0;
        i++;
    }
    mysql_free_result(res);
    *out = v;
    *n = i;
    return PERMITD_OK;
}

int envoymap_put(struct envoymap *m, const struct envoymap_row *row, int64_t expect_version,
                 const char *actor, struct permitd_error *err)
{
    char *q[6] = {NULL};
    const char *s[6] = {row->domain, row->descriptor, row->policy, row->key_entry,
                        row->description, actor};
    int rc;

    /* One transaction: the policy checked (and share-locked) with the write. */
    if ((rc = dbconn_kept_begin(&m->conn, actor, err)) != PERMITD_OK)
        return rc;
    for (int i = 0; i < 6; i++)
        if ((q[i] = dbconn_kept_quote(&m->conn, s[i])) == NULL) {
            rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
            goto out;
        }
    if ((rc = policyrefs_require(&m->conn, "policy", row->policy, err)) != PERMITD_OK)
        goto out;
    if (expect_version > 0) {
        rc = dbconn_kept_queryf(&m->conn, NULL, err, "UPDATE envoy_descriptors SET policy = %s, key_entry = %s, "
                 "description = %s, updated_by = %s, version = version + 1 "
                 "WHERE domain = %s AND descriptor = %s AND version = %" PRId64,
                 q[2], q[3], q[4], q[5], q[0], q[1], expect_version);
        if (rc == PERMITD_OK && mysql_affected_rows(m->conn.db) != 1)
            rc = permitd_error_set(err, PERMITD_EABORTED, "descriptor \"%s\" of domain \"%s\" "
                                   "is no longer at version %" PRId64 " (changed or deleted "
                                   "meanwhile): load it again", row->descriptor, row->domain,
                                   expect_version);
    } else {
        rc = dbconn_kept_queryf(&m->conn, NULL, err, "INSERT INTO envoy_descriptors (domain, descriptor, policy, "
                 "key_entry, description, created_by, updated_by) VALUES (%s, %s, %s, %s, %s, "
                 "%s, %s) ON DUPLICATE KEY UPDATE policy = VALUES(policy), key_entry = "
                 "VALUES(key_entry), description = VALUES(description), updated_by = "
                 "VALUES(updated_by), version = version + 1",
                 q[0], q[1], q[2], q[3], q[4], q[5], q[5]);
    }
out:
    for (int i = 0; i < 6; i++)
        free(q[i]);
    return dbconn_kept_finish(&m->conn, rc, err);
}

int envoymap_delete(struct envoymap *m, const char *domain, const char *descriptor,
                    const char *actor, struct permitd_error *err)
{
    char *qd = NULL, *qs = NULL;
    int rc;

    /* @permitd_actor set: envoy_descriptor_audit's trigger (0018) names actor. */
    if ((rc = dbconn_kept_begin(&m->conn, actor, err)) != PERMITD_OK)
        return rc;
    if ((qd = dbconn_kept_quote(&m->conn, domain)) == NULL ||
        (qs = dbconn_kept_quote(&m->conn, descriptor)) == NULL) {
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        goto out;
    }
    rc = dbconn_kept_queryf(&m->conn, NULL, err, "DELETE FROM envoy_descriptors WHERE domain = %s AND descriptor = %s",
             qd, qs);
    if (rc == PERMITD_OK && mysql_affected_rows(m->conn.db) == 0)
        rc = permitd_error_set(err, PERMITD_ENOTFOUND, "no descriptor \"%s\" in domain \"%s\"",
                               descriptor, domain);
out:
    free(qd);
    free(qs);
    return dbconn_kept_finish(&m->conn, rc, err);
}
