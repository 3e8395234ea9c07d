/*
 * csv.h - the --csv output of the reports: one table as RFC 4180 CSV.
 *
 * One header row, then one record per row; fields are separated by commas
 * and records end with CRLF, as RFC 4180 says. A field is quoted when it
 * holds a comma, a quote, CR or LF (or starts or ends with a blank, which
 * some readers trim), quotes doubled inside. Numbers are raw: bytes and
 * nanoseconds as integers, never "1.50 GiB". An absent value (JSON's null)
 * is an empty field. Invalid UTF-8 from a trace becomes U+FFFD, as in JSON.
 * Misuse (a row longer than the header, a row left incomplete) trips an
 * assertion.
 */
#ifndef CUTRACE_ANALYZER_CSV_H
#define CUTRACE_ANALYZER_CSV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct csv_writer {
    FILE *out;
    size_t columns; /* of the header */
    size_t field;   /* fields written in the current record */
};

/* Writes the header row: `count` column names. */
void csv_begin(struct csv_writer *w, FILE *out, const char *const *names, size_t count);
void csv_string(struct csv_writer *w, const char *s); /* NULL: an empty field */
void csv_int(struct csv_writer *w, int64_t value);
void csv_uint(struct csv_writer *w, uint64_t value);
void csv_double(struct csv_writer *w, double value); /* 17 significant digits; NaN: empty */
void csv_null(struct csv_writer *w);
/* value when present, else an empty field (JSON's null). */
void csv_opt_int(struct csv_writer *w, bool present, int64_t value);
/* Ends the record; asserts it has as many fields as the header. */
void csv_end_row(struct csv_writer *w);

#endif
