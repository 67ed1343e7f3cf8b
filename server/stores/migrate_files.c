/*
 * migrate_files.c - loading the migration files: the embedded ones
 * (cmake/embed.cmake, PREFIX migration) or a directory's.
 *
 * A file's name carries its version and title (the golang-migrate
 * convention), so loading is parsing names and pairing an up file with its
 * down file; every rule a set must keep is checked here, before any
 * connection is made, with an error that names the file. The checksum of
 * each up file (SHA-256, sha256.c) is what the history table records, and
 * what tells a DBA that an applied file was changed afterwards.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/embed.h"
#include "stores/migrate_files.h"

/* The files of migrations/, embedded by cmake/embed.cmake (PREFIX migration). */
extern const struct embedded_file migration_files[];

void migrate_files_free(struct migrate_files *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->v[i].title);
        free(s->v[i].up_name);
        free(s->v[i].down_name);
        free(s->v[i].up);
        free(s->v[i].down);
    }
    free(s->v);
    s->v = NULL;
    s->n = 0;
}

/* Parses "NNNN_title.up.sql" / ".down.sql". Returns 1 and fills the parts,
 * 0 when name does not follow the convention. */
static int parse_name(const char *name, unsigned long long *version, char *title,
                      size_t titlelen, int *is_up)
{
    const char *us, *dot;
    size_t n = strlen(name), tl;
    char *end;

    if (n > 7 && strcmp(name + n - 7, ".up.sql") == 0) {
        *is_up = 1;
        dot = name + n - 7;
    } else if (n > 9 && strcmp(name + n - 9, ".down.sql") == 0) {
        *is_up = 0;
        dot = name + n - 9;
    } else {
        return 0;
    }
    if (!isdigit((unsigned char)name[0]))
        return 0;
    errno = 0;
    *version = strtoull(name, &end, 10);
    if (errno != 0 || *end != '_' || *version == 0)
        return 0;
    us = end;
    tl = (size_t)(dot - us - 1);
    if (dot <= us + 1 || tl >= titlelen)
        return 0;
    memcpy(title, us + 1, tl);
    title[tl] = '\0';
    return 1;
}

struct migrate_file *migrate_files_find(const struct migrate_files *s, unsigned long long v)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i].version == v)
            return &s->v[i];
    return NULL;
}

/* Adds one file to the set; takes ownership of data. */
static int set_add(struct migrate_files *s, const char *name, char *data, size_t len,
                   struct permitd_error *err)
{
    unsigned long long version;
    char title[256];
    int is_up;
    struct migrate_file *m;

    if (!parse_name(name, &version, title, sizeof(title), &is_up)) {
        free(data);
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "%s: %s is not named NNNN_title.up.sql or NNNN_title.down.sql "
                                 "(NNNN a version from 1)", s->source, name);
    }
    m = migrate_files_find(s, version);
    if (m == NULL) {
        struct migrate_file *v = realloc(s->v, (s->n + 1) * sizeof(*v));
        if (v == NULL) {
            free(data);
            return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        }
        s->v = v;
        m = &s->v[s->n++];
        memset(m, 0, sizeof(*m));
        m->version = version;
        m->title = strdup(title);
        if (m->title == NULL) {
            free(data);
            return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        }
    } else if (strcmp(m->title, title) != 0) {
        free(data);
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "%s: %s and %s share version %llu: give each migration a "
                                 "version of its own and its up and down files the same title",
                                 s->source, name, m->up_name ? m->up_name : m->down_name, version);
    }
    if ((is_up && m->up != NULL) || (!is_up && m->down != NULL)) {
        free(data);
        return permitd_error_set(err, PERMITD_EINVAL, "%s: two %s files for version %llu (%s and %s)",
                                 s->source, is_up ? "up" : "down", version, name,
                                 is_up ? m->up_name : m->down_name);
    }
    if (is_up) {
        m->up = data;
        m->up_len = len;
        m->up_name = strdup(name);
        sha256_hex(data, len, m->checksum);
    } else {
        m->down = data;
        m->down_len = len;
        m->down_name = strdup(name);
    }
    if ((is_up && m->up_name == NULL) || (!is_up && m->down_name == NULL))
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    return PERMITD_OK;
}

static int by_version(const void *a, const void *b)
{
    const struct migrate_file *x = a, *y = b;

    return x->version < y->version ? -1 : x->version > y->version;
}

static int read_file(const char *path, char **data, size_t *len, struct permitd_error *err)
{
    FILE *f = fopen(path, "rb");
    char *p = NULL;
    size_t n = 0, cap = 0, got;

    *data = NULL;
    if (f == NULL)
        return permitd_error_set(err, PERMITD_EINVAL, "cannot read %s: %s", path, strerror(errno));
    for (;;) {
        if (cap - n < 4096) {
            char *q = realloc(p, cap ? cap * 2 : 8192);
            if (q == NULL) {
                free(p);
                fclose(f);
                return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
            }
            p = q;
            cap = cap ? cap * 2 : 8192;
        }
        got = fread(p + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0)
            break;
    }
    if (ferror(f)) {
        free(p);
        fclose(f);
        return permitd_error_set(err, PERMITD_EINVAL, "cannot read %s", path);
    }
    fclose(f);
    p[n] = '\0';
    *data = p;
    *len = n;
    return PERMITD_OK;
}

int migrate_files_load(struct migrate_files *s, const char *dir, struct permitd_error *err)
{
    int rc = PERMITD_OK;

    memset(s, 0, sizeof(*s));
    s->dir = dir;
    if (dir == NULL) {
        snprintf(s->source, sizeof(s->source), "embedded migrations");
        for (const struct embedded_file *f = migration_files; f->name != NULL; f++) {
            char *copy = malloc(f->len + 1);
            if (copy == NULL)
                return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
            memcpy(copy, f->data, f->len + 1);
            if ((rc = set_add(s, f->name, copy, f->len, err)) != PERMITD_OK)
                return rc;
        }
    } else {
        DIR *d = opendir(dir);
        struct dirent *e;

        snprintf(s->source, sizeof(s->source), "%s", dir);
        if (d == NULL)
            return permitd_error_set(err, PERMITD_EINVAL, "cannot open migrations directory %s: %s",
                                     dir, strerror(errno));
        while ((e = readdir(d)) != NULL) {
            size_t n = strlen(e->d_name);
            char path[4096], *data;
            size_t len = 0;
            if (n < 4 || strcmp(e->d_name + n - 4, ".sql") != 0)
                continue;
            snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
            if ((rc = read_file(path, &data, &len, err)) != PERMITD_OK ||
                (rc = set_add(s, e->d_name, data, len, err)) != PERMITD_OK)
                break;
        }
        closedir(d);
        if (rc != PERMITD_OK)
            return rc;
    }
    if (s->n > 1)
        qsort(s->v, s->n, sizeof(*s->v), by_version);
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i].up == NULL)
            return permitd_error_set(err, PERMITD_EINVAL, "%s: %s has no %.*s.up.sql",
                                     s->source, s->v[i].down_name,
                                     (int)(strlen(s->v[i].down_name) - 9), s->v[i].down_name);
    return PERMITD_OK;
}
