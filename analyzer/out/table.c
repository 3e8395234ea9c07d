/*
 * table.c - layout of aligned text tables: column widths, shrinking to the
 * width limit, truncation and terminal-safe output of cell text.
 */
#include "out/table.h"

#include "cli.h"

#include <assert.h>
#include <ctype.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define COLUMN_GAP       2
#define MIN_SHRUNK_WIDTH 8
#define ELLIPSIS         "..."
#define ELLIPSIS_COLUMNS 3

struct table {
    const struct table_column *columns;
    size_t ncolumns;
    char **cells; /* row-major */
    size_t ncells, cap;
};

struct table *table_new(const struct table_column *columns, size_t count)
{
    assert(columns && count > 0);
    struct table *t = xcalloc(1, sizeof(*t));
    t->columns = columns;
    t->ncolumns = count;
    return t;
}

void table_free(struct table *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->ncells; i++)
        free(t->cells[i]);
    free(t->cells);
    free(t);
}

void table_cell(struct table *t, const char *text)
{
    t->cells = xgrow(t->cells, &t->cap, t->ncells + 1, sizeof(*t->cells));
    t->cells[t->ncells++] = xstrdup(text ? text : "-");
}

void table_cellf(struct table *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *text = NULL;
    if (vasprintf(&text, fmt, ap) < 0)
        text = NULL;
    va_end(ap);
    table_cell(t, text ? text : "?");
    free(text);
}

size_t table_rows(const struct table *t)
{
    return t->ncells / t->ncolumns;
}

/* One displayable unit of text: a valid UTF-8 sequence or a replaced byte. */
struct glyph {
    size_t bytes;  /* bytes of input consumed */
    bool replaced; /* print '?' instead of the input bytes */
};

static struct glyph next_glyph(const unsigned char *s)
{
    unsigned char c = s[0];
    if (c < 0x20 || c == 0x7f)
        return (struct glyph){1, true};
    if (c < 0x80)
        return (struct glyph){1, false};
    size_t len;
    uint32_t min, cp;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2, min = 0x80, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef)
        len = 3, min = 0x800, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4)
        len = 4, min = 0x10000, cp = c & 0x07;
    else
        return (struct glyph){1, true};
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) /* also stops at the terminating NUL */
            return (struct glyph){1, true};
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    /* C1 controls (U+0080-U+009F) can drive a terminal as well. */
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) || cp < 0xa0)
        return (struct glyph){len, true};
    return (struct glyph){len, false};
}

size_t text_width(const char *text)
{
    size_t width = 0;
    for (const unsigned char *p = (const unsigned char *)text; *p;) {
        p += next_glyph(p).bytes;
        width++;
    }
    return width;
}

size_t text_print(FILE *out, const char *text, size_t width, size_t pad_to)
{
    size_t total = text_width(text);
    /* Room left for text when the ellipsis has to be shown. */
    size_t keep = total <= width             ? total
                  : width > ELLIPSIS_COLUMNS ? width - ELLIPSIS_COLUMNS
                                             : width;
    size_t written = 0;
    for (const unsigned char *p = (const unsigned char *)text; *p && written < keep; written++) {
        struct glyph g = next_glyph(p);
        if (g.replaced)
            fputc('?', out);
        else
            fwrite(p, 1, g.bytes, out);
        p += g.bytes;
    }
    if (total > width && width > ELLIPSIS_COLUMNS) {
        fputs(ELLIPSIS, out);
        written += ELLIPSIS_COLUMNS;
    }
    for (; written < pad_to; written++)
        fputc(' ', out);
    return written > pad_to ? written : pad_to;
}

static size_t fixed_width; /* table_set_width; 0: ask */

void table_set_width(size_t width)
{
    fixed_width = width;
}

size_t table_width(void)
{
    size_t width = TABLE_MAX_WIDTH;
    struct winsize ws;
    const char *columns = getenv("COLUMNS");
    if (fixed_width) {
        width = fixed_width;
    } else if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 &&
               ws.ws_col > 0) {
        width = ws.ws_col;
    } else if (columns && *columns) {
        char *end;
        unsigned long long n = strtoull(columns, &end, 10);
        if (*end == '\0' && n > 0 && n < 100000)
            width = (size_t)n;
    }
    return width < TABLE_MIN_WIDTH ? TABLE_MIN_WIDTH : width;
}

/* Column widths that fit the width limit, shrinking text columns first. */
static void layout(const struct table *t, size_t indent, size_t limit, size_t *widths)
{
    size_t rows = table_rows(t);
    for (size_t c = 0; c < t->ncolumns; c++) {
        size_t w = text_width(t->columns[c].header);
        for (size_t r = 0; r < rows; r++) {
            size_t cw = text_width(t->cells[r * t->ncolumns + c]);
            if (cw > w)
                w = cw;
        }
        if (t->columns[c].max_width && w > t->columns[c].max_width)
            w = t->columns[c].max_width;
        widths[c] = w;
    }
    for (;;) {
        size_t total = indent + COLUMN_GAP * (t->ncolumns - 1);
        for (size_t c = 0; c < t->ncolumns; c++)
            total += widths[c];
        if (total <= limit)
            return;
        /* Shrink the widest text column; numbers are never cut. */
        size_t widest = t->ncolumns;
        for (size_t c = 0; c < t->ncolumns; c++)
            if (t->columns[c].align == TABLE_LEFT && widths[c] > MIN_SHRUNK_WIDTH &&
                (widest == t->ncolumns || widths[c] > widths[widest]))
                widest = c;
        if (widest == t->ncolumns)
            return; /* nothing left to shrink: callers keep number columns narrow */
        size_t excess = total - limit;
        size_t room = widths[widest] - MIN_SHRUNK_WIDTH;
        widths[widest] -= excess < room ? excess : room;
    }
}

static void print_row(const struct table *t, FILE *out, size_t indent, const size_t *widths,
                      const char *const *cells)
{
    for (size_t i = 0; i < indent; i++)
        fputc(' ', out);
    /* Trailing blanks would make the output awkward to diff and test. */
    size_t last = t->ncolumns - 1;
    while (last > 0 && t->columns[last].align == TABLE_LEFT && cells[last][0] == '\0')
        last--;
    for (size_t c = 0; c <= last; c++) {
        const char *text = cells[c];
        size_t w = text_width(text);
        if (c > 0)
            fputs("  ", out);
        if (t->columns[c].align == TABLE_RIGHT) {
            for (size_t i = w; i < widths[c]; i++)
                fputc(' ', out);
            text_print(out, text, widths[c], 0);
        } else {
            text_print(out, text, widths[c], c == last ? 0 : widths[c]);
        }
    }
    fputc('\n', out);
}

void table_print(const struct table *t, FILE *out, size_t indent)
{
    table_print_width(t, out, indent, table_width());
}

void table_print_width(const struct table *t, FILE *out, size_t indent, size_t width)
{
    assert(t->ncells % t->ncolumns == 0 && "table row left incomplete");
    size_t *widths = xcalloc(t->ncolumns, sizeof(*widths));
    layout(t, indent, width, widths);
    const char **headers = xcalloc(t->ncolumns, sizeof(*headers));
    for (size_t c = 0; c < t->ncolumns; c++)
        headers[c] = t->columns[c].header;
    print_row(t, out, indent, widths, headers);
    for (size_t r = 0; r < table_rows(t); r++)
        print_row(t, out, indent, widths, (const char *const *)&t->cells[r * t->ncolumns]);
    free(headers);
    free(widths);
}

static bool is_unit_word(const char *p);

size_t text_break(const char *text, size_t width)
{
    /* A size's unit stays with its number: "70.50 GiB" is one word. */
    const unsigned char *s = (const unsigned char *)text;
    size_t at = 0, cols = 0, last_blank = 0;
    while (s[at] && cols < width) {
        if (s[at] == ' ' && !is_unit_word(text + at + 1))
            last_blank = at;
        at += next_glyph(s + at).bytes;
        cols++;
    }
    if (!s[at])
        return at;
    if (s[at] == ' ' && !is_unit_word(text + at + 1))
        return at;
    if (last_blank > 0)
        return last_blank;
    return at > 0 ? at : next_glyph(s).bytes;
}

static bool is_unit_word(const char *p)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        size_t n = strlen(units[i]);
        if (strncmp(p, units[i], n) == 0 && !isalnum((unsigned char)p[n]))
            return true;
    }
    return false;
}

void text_print_wrapped(FILE *out, const char *text, size_t indent)
{
    size_t column = 0, limit = table_width();
    const char *p = text;
    while (*p) {
        const char *end = strchr(p, ' ');
        /* "56.31 GiB" stays on one line: a size's unit is part of its word */
        while (end && is_unit_word(end + 1))
            end = strchr(end + 1, ' ');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char *word = xstrndup(p, len);
        size_t width = text_width(word);
        if (column > 0 && column + 1 + width > limit) {
            fputc('\n', out);
            column = 0;
        }
        if (column == 0) {
            size_t pad = indent + (p == text ? 0 : 2);
            fprintf(out, "%*s", (int)pad, "");
            column = pad;
        } else {
            fputc(' ', out);
            column++;
        }
        /* a word longer than a line is cut, never spills past the width */
        size_t room = limit > column ? limit - column : 1;
        column += text_print(out, word, room, 0);
        free(word);
        p += len;
        while (*p == ' ')
            p++;
    }
    fputc('\n', out);
}
