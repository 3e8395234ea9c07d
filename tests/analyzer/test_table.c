/*
 * test_table.c - aligned text tables (analyzer/out/table.c): alignment, the
 * 120-column limit, truncation and terminal-safe cell text.
 */
#include "out/table.h"
#include "test_support.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *render(const struct table *t, size_t indent)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(f);
    table_print(t, f, indent);
    fclose(f);
    return text;
}

/* The widest line of text, in code points. */
static size_t widest_line(const char *text)
{
    size_t widest = 0, width = 0;
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        if (*p == '\n') {
            if (width > widest)
                widest = width;
            width = 0;
        } else if ((*p & 0xc0) != 0x80) {
            width++;
        }
    }
    return widest > width ? widest : width;
}

START_TEST(test_alignment)
{
    static const struct table_column cols[] = {
        {"api", TABLE_LEFT, 0}, {"calls", TABLE_RIGHT, 0}, {"note", TABLE_LEFT, 0}};
    struct table *t = table_new(cols, 3);
    table_cell(t, "cudaMalloc");
    table_cellf(t, "%d", 12345);
    table_cell(t, "x");
    table_cell(t, "cudaFree");
    table_cell(t, "7");
    table_cell(t, "");
    ck_assert_uint_eq(table_rows(t), 2);
    char *text = render(t, 2);
    ck_assert_str_eq(text, "  api         calls  note\n"
                           "  cudaMalloc  12345  x\n"
                           "  cudaFree        7\n");
    free(text);
    table_free(t);
}
END_TEST

START_TEST(test_width_limit_and_ellipsis)
{
    static const struct table_column cols[] = {
        {"name", TABLE_LEFT, 0}, {"bytes", TABLE_RIGHT, 0}, {"path", TABLE_LEFT, 0}};
    struct table *t = table_new(cols, 3);
    char longname[200], longpath[300];
    memset(longname, 'n', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    memset(longpath, 'p', sizeof(longpath) - 1);
    longpath[sizeof(longpath) - 1] = '\0';
    table_cell(t, longname);
    table_cell(t, "94.00 GiB");
    table_cell(t, longpath);
    char *text = render(t, 4);
    ck_assert_uint_le(widest_line(text), TABLE_MAX_WIDTH);
    ck_assert_ptr_nonnull(strstr(text, "..."));
    ck_assert_ptr_nonnull(strstr(text, "94.00 GiB")); /* numbers are never cut */
    free(text);
    table_free(t);
}
END_TEST

START_TEST(test_column_max_width)
{
    static const struct table_column cols[] = {{"uuid", TABLE_LEFT, 10}, {"n", TABLE_RIGHT, 0}};
    struct table *t = table_new(cols, 2);
    table_cell(t, "GPU-0123456789abcdef");
    table_cell(t, "1");
    char *text = render(t, 0);
    ck_assert_str_eq(text, "uuid        n\nGPU-012...  1\n");
    free(text);
    table_free(t);
}
END_TEST

START_TEST(test_hostile_cells)
{
    static const struct table_column cols[] = {{"text", TABLE_LEFT, 0}, {"n", TABLE_RIGHT, 0}};
    struct table *t = table_new(cols, 2);
    table_cell(t, "a\x1b[31mred\x07\n\xff\xc3\xa9");
    table_cell(t, NULL);
    char *text = render(t, 0);
    /* No escape, bell, newline inside a row or invalid byte reaches the
     * terminal; valid UTF-8 (é) is kept; NULL prints as "-". */
    ck_assert_ptr_null(strchr(text, '\x1b'));
    ck_assert_ptr_null(strchr(text, '\x07'));
    ck_assert_uint_eq(count_lines(text), 2);
    ck_assert_ptr_nonnull(strstr(text, "a?[31mred???\xc3\xa9  -"));
    free(text);
    table_free(t);
    ck_assert_uint_eq(text_width("\xc3\xa9t\xc3\xa9"), 3);
}
END_TEST

START_TEST(test_text_print_cuts_on_character_boundary)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    /* Six two-byte characters cut to five columns: two kept, then "...". */
    text_print(f, "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", 5, 0);
    fclose(f);
    ck_assert_str_eq(text, "\xc3\xa9\xc3\xa9...");
    free(text);
}
END_TEST

START_TEST(test_incomplete_row_asserts)
{
    static const struct table_column cols[] = {{"a", TABLE_LEFT, 0}, {"b", TABLE_LEFT, 0}};
    struct table *t = table_new(cols, 2);
    table_cell(t, "only one");
    table_print(t, stderr, 0); /* aborts */
}
END_TEST

Suite *table_suite(void)
{
    Suite *s = suite_create("table");
    TCase *tc = tcase_create("table");
    tcase_add_test(tc, test_alignment);
    tcase_add_test(tc, test_width_limit_and_ellipsis);
    tcase_add_test(tc, test_column_max_width);
    tcase_add_test(tc, test_hostile_cells);
    tcase_add_test(tc, test_text_print_cuts_on_character_boundary);
    tcase_add_test_raise_signal(tc, test_incomplete_row_asserts, SIGABRT);
    suite_add_tcase(s, tc);
    return s;
}
