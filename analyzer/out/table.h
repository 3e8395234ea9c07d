/*
 * table.h - aligned text tables for the human-readable reports.
 *
 * Cells are strings (numbers are formatted by the caller, see units.h).
 * Text columns are left-aligned, number columns right-aligned. A table
 * fits table_width() columns: the widest text columns are shortened and
 * their cells truncated with "..."; a number column is never cut: when the
 * numbers alone are wider than the terminal, the table is wider. Cell text is made safe for
 * a terminal (control characters and invalid UTF-8 become '?'), since it
 * comes from trace files that may be damaged or hostile.
 */
#ifndef CUTRACE_ANALYZER_TABLE_H
#define CUTRACE_ANALYZER_TABLE_H

#include <stddef.h>
#include <stdio.h>

/* The width of a report when stdout is not a terminal and COLUMNS is unset. */
#define TABLE_MAX_WIDTH 120
/* Narrower widths are taken as this: below it no table row can be read. */
#define TABLE_MIN_WIDTH 40

/*
 * The columns a report may use: the width of stdout when it is a terminal
 * (TIOCGWINSZ), else $COLUMNS when it is a number, else TABLE_MAX_WIDTH;
 * never below TABLE_MIN_WIDTH. table_set_width(n) fixes it at n (tests;
 * 0 goes back to asking the terminal).
 */
size_t table_width(void);
void table_set_width(size_t width);

enum table_align { TABLE_LEFT, TABLE_RIGHT };

struct table_column {
    const char *header;
    enum table_align align;
    size_t max_width; /* 0: as wide as the widest cell (within the table limit) */
};

struct table;

struct table *table_new(const struct table_column *columns, size_t count);
void table_free(struct table *t);

/* Appends the next cell, row by row; NULL prints as "-". */
void table_cell(struct table *t, const char *text);
void table_cellf(struct table *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Complete rows so far. */
size_t table_rows(const struct table *t);

/* Prints headers and rows, each line starting with `indent` spaces, within
 * table_width() (table_print_width: within `width`). */
void table_print(const struct table *t, FILE *out, size_t indent);
void table_print_width(const struct table *t, FILE *out, size_t indent, size_t width);

/* Terminal columns the text takes once made safe (one per code point). */
size_t text_width(const char *text);

/*
 * Writes `text` made terminal-safe and cut to at most `width` columns (with
 * "..." when cut) to `out`; pads with spaces to `pad_to` columns. Returns the
 * columns written.
 */
size_t text_print(FILE *out, const char *text, size_t width, size_t pad_to);

/* The bytes of text's first line when it is wrapped at `width` columns: up
 * to its last blank that fits (the whole text when it fits; a word longer
 * than width is broken at width). Never 0 for non-empty text. */
size_t text_break(const char *text, size_t width);

/*
 * Writes `text` made terminal-safe, wrapped at spaces so that no line is
 * wider than table_width(): the first line indented `indent` columns,
 * the next ones two more. Ends with a newline.
 */
void text_print_wrapped(FILE *out, const char *text, size_t indent);

#endif
