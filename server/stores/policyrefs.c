/*
 * policyrefs.c - what names a policy: the check on a gateway rule's,
 * Envoy descriptor's or override's write, and the list and removal on a
 * policy's delete
 * (see policyrefs.h).
 */
#define _GNU_SOURCE                 /* open_memstream */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mysql.h>

#include "core/wordlist.h"
#include "stores/policyrefs.h"

int policyrefs_require(struct dbconn_kept *k, const char *field, const char *policy,
                       struct permitd_error *err)
{
    MYSQL_RES *res = NULL;
    char *q = dbconn_kept_quote(k, policy);
    int rc;

    if (q == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    rc = dbconn_kept_queryf(k, &res, err, "SELECT id FROM policies WHERE name = %s "
                            "LOCK IN SHARE MODE", q);
    free(q);
    if (rc != PERMITD_OK)
        return rc;
    if (mysql_num_rows(res) == 0)
        rc = permitd_error_set(err, PERMITD_EPRECONDITION, "%s: policy \"%s\" does not exist "
                               "(create it first, or pick one ListPolicies shows)", field, policy);
    mysql_free_result(res);
    return rc;
}

/* How many overrides policy has (issue 37): they are counted, not named
 * one by one, since a policy may have 10,000 of them. */
static int count_overrides(struct dbconn_kept *k, const char *policy, long long *n,
                           struct permitd_error *err)
{
    MYSQL_RES *res = NULL;
    MYSQL_ROW row;
    char *q = dbconn_kept_quote(k, policy);
    int rc;

    *n = 0;
    if (q == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    rc = dbconn_kept_queryf(k, &res, err, "SELECT COUNT(*) FROM policy_overrides WHERE policy = %s",
                            q);
    free(q);
    if (rc != PERMITD_OK)
        return rc;
    if ((row = mysql_fetch_row(res)) != NULL && row[0] != NULL)
        *n = strtoll(row[0], NULL, 10);
    mysql_free_result(res);
    return PERMITD_OK;
}

int policyrefs_list(struct dbconn_kept *k, const char *policy, char *buf, size_t size,
                    int *count, struct permitd_error *err)
{
    MYSQL_RES *res = NULL;
    MYSQL_ROW row;
    struct wordlist l;
    char *q = dbconn_kept_quote(k, policy);
    long long overrides = 0;
    int rc;

    *count = 0;
    wordlist_init(&l, buf, size);
    if (q == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    rc = dbconn_kept_queryf(k, &res, err, "SELECT CONCAT('gateway rule ', id) FROM gateway_rules "
                            "WHERE policy = %s UNION ALL SELECT CONCAT('envoy descriptor ', "
                            "domain, '/', descriptor) FROM envoy_descriptors WHERE policy = %s",
                            q, q);
    free(q);
    if (rc != PERMITD_OK)
        return rc;
    while ((row = mysql_fetch_row(res)) != NULL)
        wordlist_add(&l, "%s", row[0] ? row[0] : "");   /* cut: the count still says how many */
    mysql_free_result(res);
    if ((rc = count_overrides(k, policy, &overrides, err)) != PERMITD_OK)
        return rc;
    *count = l.count + (int)(overrides > INT_MAX / 2 ? INT_MAX / 2 : overrides);
    if (overrides > 0)          /* one item of words, each override one of the count */
        wordlist_add(&l, "%lld override%s", overrides, overrides == 1 ? "" : "s");
    return PERMITD_OK;
}

/* The Envoy descriptors naming policy (quoted: q) as a JSON array, read
 * with their rows locked for the delete that follows. */
static int envoy_rows_json(struct dbconn_kept *k, const char *q, char **out,
                           struct permitd_error *err)
{
    MYSQL_RES *res = NULL;
    MYSQL_ROW row;
    char *buf = NULL;
    size_t len = 0;
    FILE *f;
    int rc, first = 1;

    *out = NULL;
    rc = dbconn_kept_queryf(k, &res, err, "SELECT JSON_OBJECT('domain', domain, 'descriptor', "
                            "descriptor, 'policy', policy, 'key_entry', key_entry, 'description', "
                            "description, 'version', version, 'updated_by', updated_by) "
                            "FROM envoy_descriptors WHERE policy = %s ORDER BY domain, descriptor "
                            "FOR UPDATE", q);
    if (rc != PERMITD_OK)
        return rc;
    if ((f = open_memstream(&buf, &len)) == NULL) {
        mysql_free_result(res);
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    }
    fputc('[', f);
    while ((row = mysql_fetch_row(res)) != NULL) {
        fprintf(f, "%s%s", first ? "" : ",", row[0] ? row[0] : "null");
        first = 0;
    }
    fputc(']', f);
    mysql_free_result(res);
    if (fclose(f) != 0 || buf == NULL) {
        free(buf);
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    }
    *out = buf;
    return PERMITD_OK;
}

int policyrefs_remove(struct dbconn_kept *k, const char *policy, char **removed,
                      struct permitd_error *err)
{
    char *q = dbconn_kept_quote(k, policy);
    int rc;

    *removed = NULL;
    if (q == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    rc = dbconn_kept_queryf(k, NULL, err, "DELETE FROM gateway_rules WHERE policy = %s", q);
    if (rc == PERMITD_OK)
        rc = dbconn_kept_queryf(k, NULL, err, "DELETE FROM policy_overrides WHERE policy = %s", q);
    if (rc == PERMITD_OK)
        rc = envoy_rows_json(k, q, removed, err);
    if (rc == PERMITD_OK)
        rc = dbconn_kept_queryf(k, NULL, err, "DELETE FROM envoy_descriptors WHERE policy = %s", q);
    free(q);
    if (rc != PERMITD_OK) {
        free(*removed);
        *removed = NULL;
    }
    return rc;
}
