/*
 * test_migrate_sql.c - migrate_sql.c: splitting a migration file into
 * statements the way the mysql client does. (The runner itself is tested
 * against real MariaDB in tests/integration/test_migrate.py; the checksum
 * is sha256.c's, tested in test_sha256.c.)
 */
#include "stores/migrate_sql.h"
#include "test.h"

/* Splits sql; returns the number of statements, or -1 on error. */
static int split(const char *sql, struct migrate_sql_script *s, struct permitd_error *err)
{
    err->message[0] = '\0';
    if (migrate_sql_split(sql, strlen(sql), s, err) != PERMITD_OK)
        return -1;
    return (int)s->n;
}

/* Statement i of s as a NUL-terminated copy in buf. */
static const char *stmt(const struct migrate_sql_script *s, size_t i, char *buf, size_t len)
{
    size_t n;

    if (i >= s->n)
        return "(none)";
    n = s->v[i].len < len - 1 ? s->v[i].len : len - 1;
    memcpy(buf, s->v[i].text, n);
    buf[n] = '\0';
    return buf;
}

static void test_migrate_sql_split_plain(void)
{
    struct migrate_sql_script s;
    struct permitd_error err;
    char b[256];

    CHECK_INT(split("CREATE TABLE a (id INT);\nCREATE TABLE b (id INT);\n", &s, &err), 2);
    CHECK_STR(stmt(&s, 0, b, sizeof(b)), "CREATE TABLE a (id INT)");
    CHECK_STR(stmt(&s, 1, b, sizeof(b)), "CREATE TABLE b (id INT)");
    CHECK_INT(s.v[0].line, 1);
    CHECK_INT(s.v[1].line, 2);
    migrate_sql_free(&s);

    /* no final delimiter; empty statements and blank space dropped */
    CHECK_INT(split("  ;;\n\nSELECT 1;  ;\n  SELECT 2  \n\n", &s, &err), 2);
    CHECK_STR(stmt(&s, 0, b, sizeof(b)), "SELECT 1");
    CHECK_STR(stmt(&s, 1, b, sizeof(b)), "SELECT 2");
    CHECK_INT(s.v[1].line, 4);
    migrate_sql_free(&s);

    CHECK_INT(split("", &s, &err), 0);
    migrate_sql_free(&s);
    CHECK_INT(split("-- only a comment\n# and another\n/* and a block */\n", &s, &err), 0);
    migrate_sql_free(&s);
}

static void test_migrate_sql_split_quotes(void)
{
    struct migrate_sql_script s;
    struct permitd_error err;
    char b[256];

    CHECK_INT(split("INSERT INTO t VALUES ('a;b', \"c;d\", `e;f`);\nSELECT 'x''y;z';\n"
                    "SELECT 'back\\'slash;';\nSELECT `odd``name;`;\nSELECT \"q\"\"q;\";",
                    &s, &err), 5);
    CHECK_STR(stmt(&s, 0, b, sizeof(b)), "INSERT INTO t VALUES ('a;b', \"c;d\", `e;f`)");
    CHECK_STR(stmt(&s, 1, b, sizeof(b)), "SELECT 'x''y;z'");
    CHECK_STR(stmt(&s, 2, b, sizeof(b)), "SELECT 'back\\'slash;'");
    CHECK_STR(stmt(&s, 3, b, sizeof(b)), "SELECT `odd``name;`");
    CHECK_STR(stmt(&s, 4, b, sizeof(b)), "SELECT \"q\"\"q;\"");
    migrate_sql_free(&s);

    /* a string over several lines moves the line count on */
    CHECK_INT(split("SELECT 'a\nb\nc';\nSELECT 2;", &s, &err), 2);
    CHECK_INT(s.v[1].line, 4);
    migrate_sql_free(&s);

    /* a backslash does not escape inside backticks */
    CHECK_INT(split("SELECT `a\\`;SELECT 2", &s, &err), 2);
    migrate_sql_free(&s);
}

static void test_migrate_sql_split_comments(void)
{
    struct migrate_sql_script s;
    struct permitd_error err;
    char b[256];

    CHECK_INT(split("-- leading comment; not a statement\n"
                    "# hash comment; neither\n"
                    "/* block; comment */ CREATE TABLE a ( -- inner; comment\n"
                    "  id INT /* ; */ # x;\n"
                    ");\n"
                    "SELECT 5--3;\n"
                    "SELECT 1 -- trailing\n;\n", &s, &err), 3);
    CHECK_STR(stmt(&s, 0, b, sizeof(b)),
              "CREATE TABLE a ( -- inner; comment\n  id INT /* ; */ # x;\n)");
    CHECK_INT(s.v[0].line, 3);
    /* "--" not followed by a space is an operator, not a comment */
    CHECK_STR(stmt(&s, 1, b, sizeof(b)), "SELECT 5--3");
    CHECK_STR(stmt(&s, 2, b, sizeof(b)), "SELECT 1 -- trailing");
    migrate_sql_free(&s);

    /* executable comments are statements (mysqldump writes them) */
    CHECK_INT(split("/*!40101 SET NAMES utf8mb4 */;\n/*M!100100 SET @x = 1 */;\n", &s, &err), 2);
    CHECK_STR(stmt(&s, 0, b, sizeof(b)), "/*!40101 SET NAMES utf8mb4 */");
    CHECK_STR(stmt(&s, 1, b, sizeof(b)), "/*M!100100 SET @x = 1 */");
    migrate_sql_free(&s);

    /* "--" at the very end of the input is a comment */
    CHECK_INT(split("SELECT 1;\n--", &s, &err), 1);
    migrate_sql_free(&s);
}

static void test_migrate_sql_split_delimiter(void)
{
    struct migrate_sql_script s;
    struct permitd_error err;
    char b[512];

    CHECK_INT(split("CREATE TABLE t (id INT);\n"
                    "DELIMITER $$\n"
                    "CREATE TRIGGER trg BEFORE INSERT ON t FOR EACH ROW\n"
                    "BEGIN\n"
                    "  SET NEW.id = NEW.id + 1;\n"
                    "  SET NEW.id = NEW.id * 2;\n"
                    "END$$\n"
                    "  delimiter ;\n"
                    "SELECT 1;\n"
                    "DELIMITER //\n"
                    "SELECT 2 //\n"
                    "SELECT 3; SELECT 4//\n", &s, &err), 5);
    CHECK_STR(stmt(&s, 0, b, sizeof(b)), "CREATE TABLE t (id INT)");
    CHECK_STR(stmt(&s, 1, b, sizeof(b)),
              "CREATE TRIGGER trg BEFORE INSERT ON t FOR EACH ROW\nBEGIN\n"
              "  SET NEW.id = NEW.id + 1;\n  SET NEW.id = NEW.id * 2;\nEND");
    CHECK_INT(s.v[1].line, 3);
    CHECK_STR(stmt(&s, 2, b, sizeof(b)), "SELECT 1");
    CHECK_INT(s.v[2].line, 9);
    CHECK_STR(stmt(&s, 3, b, sizeof(b)), "SELECT 2");
    CHECK_STR(stmt(&s, 4, b, sizeof(b)), "SELECT 3; SELECT 4");
    migrate_sql_free(&s);

    /* a column called "delimiter" inside a statement is just a column */
    CHECK_INT(split("CREATE TABLE t (\ndelimiter VARCHAR(8)\n);\nSELECT 1;", &s, &err), 2);
    CHECK_STR(stmt(&s, 0, b, sizeof(b)), "CREATE TABLE t (\ndelimiter VARCHAR(8)\n)");
    migrate_sql_free(&s);

    CHECK_INT(split("DELIMITER\nSELECT 1;", &s, &err), -1);
    CHECK_CONTAINS(err.message, "DELIMITER");
    CHECK_CONTAINS(err.message, "line 1");
}

static void test_migrate_sql_split_unterminated(void)
{
    struct migrate_sql_script s;
    struct permitd_error err;

    CHECK_INT(split("SELECT 1;\nSELECT 'abc;\n", &s, &err), -1);
    CHECK_CONTAINS(err.message, "line 2");
    CHECK_INT(split("SELECT \"abc;", &s, &err), -1);
    CHECK_CONTAINS(err.message, "never closed");
    CHECK_INT(split("SELECT `abc;", &s, &err), -1);
    CHECK_CONTAINS(err.message, "`");
    CHECK_INT(split("SELECT 1;\n\n/* open comment; SELECT 2;", &s, &err), -1);
    CHECK_CONTAINS(err.message, "line 3");
    CHECK_INT(split("SELECT 'ends in a backslash\\", &s, &err), -1);
}

int main(void)
{
    TEST_RUN(test_migrate_sql_split_plain);
    TEST_RUN(test_migrate_sql_split_quotes);
    TEST_RUN(test_migrate_sql_split_comments);
    TEST_RUN(test_migrate_sql_split_delimiter);
    TEST_RUN(test_migrate_sql_split_unterminated);
    return TEST_REPORT();
}
