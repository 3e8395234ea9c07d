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
#include <unistd.h>

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

/* A narrow width shrinks text columns; a number column is never cut, the
 * table gets wider than the width instead. */
START_TEST(test_narrow_width_never_cuts_numbers)
{
    static const struct table_column cols[] = {
        {"site", TABLE_LEFT, 0}, {"bytes", TABLE_RIGHT, 0}, {"share", TABLE_RIGHT, 0}};
    struct table *t = table_new(cols, 3);
    table_cell(t, "model_runner.py:312 init_torch_distributed");
    table_cell(t, "70.50 GiB");
    table_cell(t, "99.9%");
    table_cell(t, "x");
    table_cell(t, "123456789012 B");
    table_cell(t, "0.1%");
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    table_print_width(t, f, 2, 40);
    fclose(f);
    ck_assert_uint_le(widest_line(text), 40);
    assert_contains(text, "70.50 GiB");
    assert_contains(text, "123456789012 B");
    assert_contains(text, "...");
    free(text);
    /* Narrower than the numbers: wider than asked, numbers whole. */
    f = open_memstream(&text, &len);
    table_print_width(t, f, 2, 12);
    fclose(f);
    ck_assert_uint_gt(widest_line(text), 12);
    assert_contains(text, "  70.50 GiB  99.9%\n");
    assert_contains(text, "  123456789012 B   0.1%\n");
    free(text);
    table_free(t);
}
END_TEST

/* The width: fixed by the tests, else the terminal, else $COLUMNS, else 120. */
START_TEST(test_width_from_columns)
{
    ck_assert_uint_eq(table_width(), TABLE_MAX_WIDTH); /* test_main fixes it */
    table_set_width(77);
    ck_assert_uint_eq(table_width(), 77);
    table_set_width(3);
    ck_assert_uint_eq(table_width(), TABLE_MIN_WIDTH);
    table_set_width(0);
    if (!isatty(STDOUT_FILENO)) {
        setenv("COLUMNS", "93", 1);
        ck_assert_uint_eq(table_width(), 93);
        setenv("COLUMNS", "10", 1);
        ck_assert_uint_eq(table_width(), TABLE_MIN_WIDTH);
        setenv("COLUMNS", "wide", 1);
        ck_assert_uint_eq(table_width(), TABLE_MAX_WIDTH);
        unsetenv("COLUMNS");
        ck_assert_uint_eq(table_width(), TABLE_MAX_WIDTH);
    }
    table_set_width(TABLE_MAX_WIDTH);
}
END_TEST

/* text_break: a line's worth of words, a size and its unit kept together. */
START_TEST(test_text_break)
{
    ck_assert_uint_eq(text_break("short", 10), 5);
    ck_assert_uint_eq(text_break("first call (cudaMalloc)", 12), 10);
    /* "2.00 GiB" is one word: the break goes before the number. */
    ck_assert_uint_eq(text_break("burst: 1 allocs, 2.00 GiB", 22), 16);
    ck_assert_uint_eq(text_break("abcdefghij", 4), 4); /* a word longer than the line */
    ck_assert_uint_eq(text_break("ab cd", 2), 2);
}
END_TEST

Suite *table_suite(void)
{
    Suite *s = suite_create("table");
    TCase *tc = tcase_create("table");
    tcase_add_test(tc, test_alignment);
    tcase_add_test(tc, test_width_limit_and_ellipsis);
    tcase_add_test(tc, test_narrow_width_never_cuts_numbers);
    tcase_add_test(tc, test_width_from_columns);
    tcase_add_test(tc, test_text_break);
    tcase_add_test(tc, test_column_max_width);
    tcase_add_test(tc, test_hostile_cells);
    tcase_add_test(tc, test_text_print_cuts_on_character_boundary);
    tcase_add_test_raise_signal(tc, test_incomplete_row_asserts, SIGABRT);
    suite_add_tcase(s, tc);
    return s;
}
