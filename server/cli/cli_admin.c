/*
 * cli_admin.c - `permitd admin`: finds the verb's file (add-user:
 * cli_users.c; the app verbs: cli_apps.c) and names who runs it for the
 * audit rows. Every command-line verb lives in server/cli/, beside main.c,
 * so no layer below knows a command line (DESIGN.md's Layout).
 */
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli_admin.h"
#include "cli/cli_apps.h"
#include "cli/cli_users.h"

/* Who runs the command line, for the audit rows: "cli:<OS user>". */
static void actor_name(char *out, size_t len)
{
    struct passwd *pw = getpwuid(geteuid());
    const char *user = pw != NULL ? pw->pw_name : getenv("USER");

    snprintf(out, len, "cli:%.100s", user != NULL ? user : "unknown");
}

static void usage(FILE *out)
{
    cli_users_usage(out);
    cli_apps_usage(out);
    fprintf(out,
            "\n"
            "The database is PERMITD_MYSQL_URL, as for `permitd migrate`.\n"
            "Each verb's own help: permitd admin VERB --help.\n"
            "\n"
            "  -h, --help   this text (anywhere on the line)\n");
}

int cli_admin_main(const struct config *cfg, int argc, char **argv)
{
    char actor[128];

    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    actor_name(actor, sizeof(actor));
    if (cli_apps_verb(argv[1]))
        return cli_apps_main(cfg, actor, argc, argv);
    if (strcmp(argv[1], "add-user") == 0)
        return cli_users_main(cfg, actor, argc, argv);
    fprintf(stderr, "permitd admin: unknown command \"%s\"\n\n", argv[1]);
    usage(stderr);
    return 2;
}
