/*
 * cli_users.c - `permitd admin add-user`, which stays for the first user
 * and for scripts (moved out of control/usersvc.c, whose checks it
 * shares): the password is read from standard input, hashed here
 * (control/auth.h) and stored through stores/users.h, which audits every
 * change and keeps the last enabled admin.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli_users.h"
#include "control/auth.h"
#include "control/usersvc.h"
#include "stores/users.h"

void cli_users_usage(FILE *out)
{
    fprintf(out, "Usage: permitd admin add-user NAME [--role viewer|editor|admin]\n");
}

static void add_user_usage(FILE *out)
{
    fprintf(out,
            "Usage: permitd admin add-user NAME [--role viewer|editor|admin]\n"
            "\n"
            "Creates a user of the admin UI, or sets a new password and role for an\n"
            "existing one (enabling it, and ending the sessions it has). The password\n"
            "is read from standard input (one line; at least 8 characters). NAME:\n"
            "letters, digits, '.', '_' and '-', up to 64. Viewers read, editors also\n"
            "change policies and apps, admins also manage users. --role may be left out\n"
            "for the first user only, which is then an admin. The last enabled admin\n"
            "cannot be demoted. The database is PERMITD_MYSQL_URL, as for `permitd\n"
            "migrate`.\n"
            "\n"
            "  -h, --help   this text (anywhere on the line)\n");
}

/* Reads one line from stdin without its newline. */
static int read_password(char *buf, size_t len)
{
    size_t n;

    if (fgets(buf, (int)len, stdin) == NULL)
        return -1;
    n = strlen(buf);
    if (n > 0 && buf[n - 1] == '\n')
        buf[--n] = '\0';
    if (n > 0 && buf[n - 1] == '\r')
        buf[--n] = '\0';
    return 0;
}

int cli_users_main(const struct config *cfg, const char *actor, int argc, char **argv)
{
    struct permitd_error err = {0, ""};
    const char *name = NULL, *role = NULL;
    char password[AUTH_PASSWORD_MAX + 2], hash[AUTH_HASH_MAX];
    struct users_db *db = NULL;
    size_t users = 0;
    int rc, created = 0;

    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            add_user_usage(stdout);     /* anywhere after the verb, as for migrate */
            return 0;
        }
    }
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--role") == 0 && i + 1 < argc)
            role = argv[++i];
        else if (strncmp(argv[i], "--role=", 7) == 0)
            role = argv[i] + 7;
        else if (argv[i][0] != '-' && name == NULL)
            name = argv[i];
        else {
            fprintf(stderr, "permitd admin add-user: unexpected argument \"%s\"\n", argv[i]);
            return 2;
        }
    }
    if (name == NULL) {
        fprintf(stderr, "permitd admin add-user: give a NAME (and --role viewer|editor|admin)\n");
        return 2;
    }
    if (role != NULL && usersvc_check_role(role, &err) != PERMITD_OK) {
        fprintf(stderr, "permitd admin add-user: --role \"%s\" is not viewer, editor or admin\n",
                role);
        return 2;
    }
    if (usersvc_check_username(name, &err) != PERMITD_OK) {
        fprintf(stderr, "permitd admin add-user: NAME: %s\n", err.message);
        return 2;
    }
    if (cfg->mysql_url[0] == '\0') {
        fprintf(stderr, "permitd admin: set PERMITD_MYSQL_URL (mysql://user:pass@host:port/db)\n");
        return 2;
    }
    if ((rc = users_db_new(cfg, &db, &err)) == PERMITD_OK && role == NULL)
        rc = users_count(db, &users, &err);
    if (rc == PERMITD_OK && role == NULL && users > 0) {
        fprintf(stderr, "permitd admin add-user: give --role viewer|editor|admin (%zu users "
                        "exist; only the first may leave it out, and is then an admin)\n", users);
        users_db_free(db);
        return 2;
    }
    if (rc == PERMITD_OK) {
        if (isatty(STDIN_FILENO))
            fprintf(stderr, "Password for %s: ", name);
        if (read_password(password, sizeof(password)) != 0 ||
            auth_check_password(password, &err) != PERMITD_OK) {
            fprintf(stderr, "permitd admin add-user: the password (one line on standard input) "
                            "must be at least %d characters and at most %d bytes%s%s\n",
                    AUTH_PASSWORD_MIN, AUTH_PASSWORD_MAX, err.message[0] ? ": " : "",
                    err.message);
            explicit_bzero(password, sizeof(password));
            users_db_free(db);
            return 2;
        }
        rc = auth_hash_password(password, hash, &err);
        explicit_bzero(password, sizeof(password));
    }
    if (role == NULL)
        role = "admin";
    if (rc == PERMITD_OK)
        rc = users_put(db, name, hash, role, actor, &created, &err);
    users_db_free(db);
    if (rc != PERMITD_OK) {
        fprintf(stderr, "permitd admin add-user: %s\n", err.message);
        return 1;
    }
    printf("admin user %s (%s) %s\n", name, role, created ? "created" : "saved");
    return 0;
}
