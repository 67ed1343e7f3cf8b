/*
 * migrate_files.h - the migrations `permitd migrate` knows: the files of
 * migrations/ built into the binary, or those of a directory (--dir), paired
 * up by version and checksummed.
 */
#ifndef PERMITD_MIGRATE_FILES_H
#define PERMITD_MIGRATE_FILES_H

#include <stddef.h>

#include "core/sha256.h"
#include "core/status.h"

/* Version numbers print as the files name them, at least 4 digits. */
#define MIGRATE_VFMT "%04llu"

/* One migration: NNNN_title.up.sql and, when there is one, its
 * NNNN_title.down.sql. */
struct migrate_file {
    unsigned long long version;
    char *title;                  /* "policies" */
    char *up_name, *down_name;    /* "0001_policies.up.sql"; down may be NULL */
    char *up, *down;              /* file contents, NUL-terminated */
    size_t up_len, down_len;
    char checksum[SHA256_HEX_LEN + 1];  /* SHA-256 of up: what the history records */
};

/* Every migration of one source. */
struct migrate_files {
    struct migrate_file *v;       /* sorted by version */
    size_t n;
    char source[1100];            /* "embedded migrations" or the directory, for messages */
    const char *dir;              /* NULL when embedded */
};

/* Loads the migrations into *s: from dir when not NULL (borrowed: it must
 * outlive s), else the embedded ones. Files are named NNNN_title.up.sql or
 * NNNN_title.down.sql (NNNN a version from 1); every version has one up
 * file, at most one down file, and one title. Files in dir that do not end
 * in .sql are ignored. Returns PERMITD_OK, or PERMITD_EINVAL naming the
 * source and the file that breaks a rule (PERMITD_EINTERNAL: out of
 * memory). Free with migrate_files_free() in either case. */
int migrate_files_load(struct migrate_files *s, const char *dir, struct permitd_error *err);

/* Frees what s holds (not s); an empty s is a no-op. */
void migrate_files_free(struct migrate_files *s);

/* The migration of version v in s, or NULL. */
struct migrate_file *migrate_files_find(const struct migrate_files *s, unsigned long long v);

#endif
