/*
 * csv.c - RFC 4180 fields and records for the --csv reports.
 */
#include "out/csv.h"

#include "out/json.h"

#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

void csv_begin(struct csv_writer *w, FILE *out, const char *const *names, size_t count)
{
    assert(out && names && count > 0);
    *w = (struct csv_writer){.out = out, .columns = count};
    for (size_t i = 0; i < count; i++)
        csv_string(w, names[i]);
    csv_end_row(w);
}

static void separator(struct csv_writer *w)
{
    assert(w->field < w->columns && "CSV row longer than its header");
    if (w->field++ > 0)
        fputc(',', w->out);
}

void csv_string(struct csv_writer *w, const char *s)
{
    separator(w);
    if (!s)
        return;
    size_t n = strlen(s);
    bool quote = strpbrk(s, ",\"\r\n") != NULL ||
                 (n > 0 && (s[0] == ' ' || s[0] == '\t' || s[n - 1] == ' ' || s[n - 1] == '\t'));
    if (quote)
        fputc('"', w->out);
    const unsigned char *end = (const unsigned char *)s + n;
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        size_t len = utf8_sequence_length(p, (size_t)(end - p));
        if (len == 0) {
            fputs("\xef\xbf\xbd", w->out); /* U+FFFD */
            p++;
            continue;
        }
        if (*p == '"')
            fputc('"', w->out);
        fwrite(p, 1, len, w->out);
        p += len;
    }
    if (quote)
        fputc('"', w->out);
}

void csv_int(struct csv_writer *w, int64_t value)
{
    separator(w);
    fprintf(w->out, "%" PRId64, value);
}

void csv_uint(struct csv_writer *w, uint64_t value)
{
    separator(w);
    fprintf(w->out, "%" PRIu64, value);
}

void csv_double(struct csv_writer *w, double value)
{
    separator(w);
    if (isfinite(value))
        fprintf(w->out, "%.17g", value);
}

void csv_null(struct csv_writer *w)
{
    separator(w);
}

void csv_opt_int(struct csv_writer *w, bool present, int64_t value)
{
    if (present)
        csv_int(w, value);
    else
        csv_null(w);
}

void csv_end_row(struct csv_writer *w)
{
    assert(w->field == w->columns && "CSV row shorter than its header");
    fputs("\r\n", w->out);
    w->field = 0;
}
