/*
 * test_migrate_files.c - migrate_files.c: loading the embedded migrations
 * and a directory's, pairing up and down files by version, sorting them,
 * the checksum of each up file, and the errors that name the file breaking
 * a rule (a bad name, two titles for one version, a down file without its
 * up file, a missing directory).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "stores/migrate_files.h"
#include "core/sha256.h"
#include "test.h"

/* A fresh temporary directory holding the files named in names (NULL-
 * terminated), each containing "-- <name>\n". */
static void make_dir(char *dir, size_t len, const char *const *names)
{
    snprintf(dir, len, "/tmp/permitd-test-migrate-files.XXXXXX");
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        exit(1);
    }
    for (; *names != NULL; names++) {
        char path[512];
        FILE *f;
        snprintf(path, sizeof(path), "%s/%s", dir, *names);
        f = fopen(path, "w");
        if (f == NULL) {
            perror(path);
            exit(1);
        }
        fprintf(f, "-- %s\n", *names);
        fclose(f);
    }
}

static void remove_dir(const char *dir, const char *const *names)
{
    for (; *names != NULL; names++) {
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", dir, *names);
        unlink(path);
    }
    rmdir(dir);
}

/* Loads a directory made of names; returns the status, err filled. */
static int load_names(const char *const *names, struct migrate_files *s,
                      struct permitd_error *err, char *dir, size_t dirlen)
{
    int rc;

    err->code = PERMITD_OK;
    err->message[0] = '\0';
    make_dir(dir, dirlen, names);
    rc = migrate_files_load(s, dir, err);
    return rc;
}

static void test_migrate_files_embedded(void)
{
    struct migrate_files s;
    struct permitd_error err = {0, ""};
    char hex[SHA256_HEX_LEN + 1];

    CHECK_INT(migrate_files_load(&s, NULL, &err), PERMITD_OK);
    CHECK(s.n >= 1);
    CHECK(s.dir == NULL);
    CHECK_STR(s.source, "embedded migrations");
    for (size_t i = 0; i < s.n; i++) {
        CHECK(s.v[i].up != NULL);
        CHECK(i == 0 || s.v[i - 1].version < s.v[i].version);
        sha256_hex(s.v[i].up, s.v[i].up_len, hex);
        CHECK_STR(s.v[i].checksum, hex);
        CHECK(migrate_files_find(&s, s.v[i].version) == &s.v[i]);
    }
    CHECK(migrate_files_find(&s, 999999) == NULL);
    migrate_files_free(&s);
    migrate_files_free(&s);      /* freeing twice is harmless */
}

static void test_migrate_files_directory(void)
{
    static const char *const names[] = {"0010_later.up.sql", "0002_second.up.sql",
                                        "0002_second.down.sql", "0001_first.up.sql",
                                        "README.md", "notes.txt", NULL};
    struct migrate_files s;
    struct permitd_error err;
    char dir[128], hex[SHA256_HEX_LEN + 1];

    CHECK_INT(load_names(names, &s, &err, dir, sizeof(dir)), PERMITD_OK);
    CHECK_STR(err.message, "");
    CHECK_INT(s.n, 3);                       /* files not ending in .sql are ignored */
    CHECK_STR(s.source, dir);
    if (s.n == 3) {
        CHECK_INT(s.v[0].version, 1);
        CHECK_STR(s.v[0].title, "first");
        CHECK_STR(s.v[0].up_name, "0001_first.up.sql");
        CHECK(s.v[0].down == NULL && s.v[0].down_name == NULL);
        CHECK_STR(s.v[0].up, "-- 0001_first.up.sql\n");
        CHECK_INT(s.v[0].up_len, strlen("-- 0001_first.up.sql\n"));
        sha256_hex("-- 0001_first.up.sql\n", strlen("-- 0001_first.up.sql\n"), hex);
        CHECK_STR(s.v[0].checksum, hex);
        CHECK_INT(s.v[1].version, 2);
        CHECK_STR(s.v[1].down_name, "0002_second.down.sql");
        CHECK_STR(s.v[1].down, "-- 0002_second.down.sql\n");
        CHECK_INT(s.v[2].version, 10);
        CHECK_STR(s.v[2].title, "later");
        CHECK(migrate_files_find(&s, 10) == &s.v[2]);
        CHECK(migrate_files_find(&s, 3) == NULL);
    }
    migrate_files_free(&s);
    remove_dir(dir, names);
}

/* Loading a directory made of names fails with PERMITD_EINVAL and a
 * message holding each of want (NULL-terminated). */
static void check_refused(const char *const *names, const char *const *want)
{
    struct migrate_files s;
    struct permitd_error err;
    char dir[128];

    CHECK_INT(load_names(names, &s, &err, dir, sizeof(dir)), PERMITD_EINVAL);
    CHECK_INT(err.code, PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, dir);
    for (; *want != NULL; want++)
        CHECK_CONTAINS(err.message, *want);
    migrate_files_free(&s);
    remove_dir(dir, names);
}

static void test_migrate_files_refused(void)
{
    {
        static const char *const names[] = {"0001_a.up.sql", "notes.sql", NULL};
        static const char *const want[] = {"notes.sql", "NNNN_title.up.sql", NULL};
        check_refused(names, want);
    }
    {
        static const char *const names[] = {"0000_zero.up.sql", NULL};
        static const char *const want[] = {"0000_zero.up.sql", "a version from 1", NULL};
        check_refused(names, want);
    }
    {
        static const char *const names[] = {"0001_a.up.sql", "0001_b.up.sql", NULL};
        static const char *const want[] = {"share version 1", NULL};
        check_refused(names, want);
    }
    {
        static const char *const names[] = {"0001_a.up.sql", "0001_b.down.sql", NULL};
        static const char *const want[] = {"0001_a.up.sql", "0001_b.down.sql", NULL};
        check_refused(names, want);
    }
    {
        static const char *const names[] = {"0001_a.up.sql", "0002_b.down.sql", NULL};
        static const char *const want[] = {"0002_b.down.sql has no 0002_b.up.sql", NULL};
        check_refused(names, want);
    }
}

static void test_migrate_files_missing_dir(void)
{
    struct migrate_files s;
    struct permitd_error err = {0, ""};

    CHECK_INT(migrate_files_load(&s, "/nonexistent/permitd-migrations", &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "cannot open migrations directory /nonexistent/permitd-migrations");
    migrate_files_free(&s);
}

int main(void)
{
    TEST_RUN(test_migrate_files_embedded);
    TEST_RUN(test_migrate_files_directory);
    TEST_RUN(test_migrate_files_refused);
    TEST_RUN(test_migrate_files_missing_dir);
    return TEST_REPORT();
}
