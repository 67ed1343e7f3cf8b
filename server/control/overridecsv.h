/*
 * overridecsv.h - a policy's overrides as a CSV file (issue 37), for
 * OverrideService's ImportOverridesCsv and ExportOverridesCsv
 * (overridesvc.c): RFC 4180 (core/csv.h), a header naming the columns
 * (match_kind, match_value, action, max_permits, rate, window, expires_at,
 * description; the first two required, the others in any order).
 *
 * An import is all or nothing: every row is checked (overridecheck.h)
 * before anything is written, and the first refused is named by its line
 * and column. A file larger than one request body arrives in pieces: the
 * first piece starts an upload (its id handed back), the next ones append
 * to it, the last applies it. Uploads are held in memory, each of one
 * user, at most OVERRIDECSV_UPLOADS at once of OVERRIDECSV_UPLOAD_MAX
 * bytes, and one left OVERRIDECSV_UPLOAD_TTL_S without a piece is
 * dropped.
 */
#ifndef PERMITD_OVERRIDECSV_H
#define PERMITD_OVERRIDECSV_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "control/auth.h"
#include "core/status.h"
#include "stores/override_edits.h"

#define OVERRIDECSV_UPLOADS 8
#define OVERRIDECSV_UPLOAD_MAX (16 * 1024 * 1024)
#define OVERRIDECSV_UPLOAD_TTL_S 600
#define OVERRIDECSV_ID_LEN AUTH_TOKEN_LEN

struct overridecsv;

/* Returns a new importer and exporter in *out (free with
 * overridecsv_free()) that uses db under lock (the caller's: every use
 * of db is under it). db and lock must outlive it. */
int overridecsv_new(struct override_edits_db *db, pthread_mutex_t *lock,
                    struct overridecsv **out, struct permitd_error *err);
void overridecsv_free(struct overridecsv *c);

/* One piece data[0..len) of a CSV file of policy's overrides from user.
 * upload_id "" starts an upload (a file sent whole: also last); else the
 * id an earlier piece of the same user and policy was given. Not last:
 * the upload's id into next_id (OVERRIDECSV_ID_LEN + 1 bytes). Last: the
 * file is read and written as user (replace: the policy's overrides not
 * in it are deleted), what was done into *counts. PERMITD_EINVAL naming
 * the line and column of the first refused row; PERMITD_ENOTFOUND for an
 * unknown upload; PERMITD_EEXHAUSTED when the uploads or a file's bytes
 * run out; else as override_edits_import(). */
int overridecsv_import(struct overridecsv *c, const char *user, const char *policy,
                       const void *data, size_t len, const char *upload_id, int last,
                       int replace, char *next_id, struct override_import_counts *counts,
                       struct permitd_error *err);

/* The overrides of policy in force (an expired one is left out: an
 * import refuses a past expiry), header first: *out a new string
 * (free()), *count its rows. */
int overridecsv_export(struct overridecsv *c, const char *policy, char **out, int64_t *count,
                       struct permitd_error *err);

#endif
