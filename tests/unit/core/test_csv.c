/*
 * test_csv.c - RFC 4180 read and written: quotes, commas and line breaks
 * inside fields, a byte order mark, CRLF and LF, empty lines, what is
 * refused with its line and column, and a written field read back as it
 * was.
 */
#include <stdlib.h>
#include <string.h>

#include "core/csv.h"
#include "test.h"

/* The records read, as "line:field|field|...\n". */
struct got {
    char text[4096];
};

static int collect(void *ud, size_t line, char **fields, size_t n, struct permitd_error *err)
{
    struct got *g = ud;
    size_t len = strlen(g->text);

    (void)err;
    len += (size_t)snprintf(g->text + len, sizeof(g->text) - len, "%zu:", line);
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(g->text + len, sizeof(g->text) - len, "%s%s", i ? "|" : "",
                                fields[i]);
    snprintf(g->text + len, sizeof(g->text) - len, "\n");
    return PERMITD_OK;
}

static int read_all(const char *text, struct got *g, struct permitd_error *err)
{
    memset(g, 0, sizeof(*g));
    return csv_read(text, strlen(text), 4, collect, g, err);
}

static void test_csv_fields_with_quotes_commas_and_line_breaks(void)
{
    struct permitd_error err = {0, ""};
    struct got g;

    CHECK_INT(read_all("\xef\xbb\xbf" "a,b\r\n\"x,y\",\"say \"\"hi\"\"\"\r\n\r\n"
                       "\"two\nlines\",\n,last", &g, &err), PERMITD_OK);
    CHECK_STR(g.text, "1:a|b\n2:x,y|say \"hi\"\n4:two\nlines|\n6:|last\n");
    /* a lone CR ends a line too; a record without its last line break is read */
    CHECK_INT(read_all("a\rb", &g, &err), PERMITD_OK);
    CHECK_STR(g.text, "1:a\n2:b\n");
    CHECK_INT(read_all("", &g, &err), PERMITD_OK);
    CHECK_STR(g.text, "");
}

static void test_csv_refusals_name_line_and_column(void)
{
    struct permitd_error err = {0, ""};
    struct got g;

    CHECK_INT(read_all("a,b\r\nc,\"open\r\nmore", &g, &err), PERMITD_EINVAL);
    CHECK(strncmp(err.message, "line 2, column 2: the quote", 27) == 0);
    CHECK_INT(read_all("a,b\nc,\"q\"x\n", &g, &err), PERMITD_EINVAL);
    CHECK(strncmp(err.message, "line 2, column 2: text after", 28) == 0);
    CHECK_INT(read_all("a\"b\n", &g, &err), PERMITD_EINVAL);
    CHECK(strncmp(err.message, "line 1, column 1: a quote", 25) == 0);
    CHECK_INT(read_all("1,2,3,4,5\n", &g, &err), PERMITD_EINVAL);
    CHECK(strncmp(err.message, "line 1, column 5: more than", 27) == 0);
    CHECK_INT(csv_read("a\0b", 3, 4, collect, &g, &err), PERMITD_EINVAL);
    CHECK(strncmp(err.message, "line 1, column 1: a NUL", 23) == 0);
}

static void test_csv_written_fields_read_back(void)
{
    const char *fields[] = {"plain", "with,comma", "say \"hi\"", "two\r\nlines", "", "=1+2"};
    struct csv_out o = {0};
    struct permitd_error err = {0, ""};
    struct got g;

    for (size_t i = 0; i < 3; i++)
        csv_put(&o, fields[i], i == 2);
    for (size_t i = 3; i < 6; i++)
        csv_put(&o, fields[i], i == 5);
    CHECK(!o.oom);
    CHECK_STR(o.s, "plain,\"with,comma\",\"say \"\"hi\"\"\"\r\n\"two\r\nlines\",,=1+2\r\n");
    CHECK_INT(read_all(o.s, &g, &err), PERMITD_OK);
    CHECK_STR(g.text, "1:plain|with,comma|say \"hi\"\n2:two\r\nlines||=1+2\n");
    free(o.s);
}

int main(void)
{
    TEST_RUN(test_csv_fields_with_quotes_commas_and_line_breaks);
    TEST_RUN(test_csv_refusals_name_line_and_column);
    TEST_RUN(test_csv_written_fields_read_back);
    return TEST_REPORT();
}
