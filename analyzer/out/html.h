/*
 * html.h - the HTML of `cutrace report` and `cutrace diff --html`: one
 * self-contained page (no network, no external script, font or style), and
 * the escaping every string from a trace goes through.
 *
 * A trace is untrusted input: command lines, paths, symbols and hosts may
 * hold '<', quotes, control characters or invalid UTF-8. html_text writes
 * them as text that can sit in an element or in a quoted attribute: & < >
 * " ' as character references, control characters (but tab and newline)
 * and invalid UTF-8 as U+FFFD, as out/json.h does. Nothing from a trace is
 * ever written into a <script> or <style> block.
 */
#ifndef CUTRACE_ANALYZER_HTML_H
#define CUTRACE_ANALYZER_HTML_H

#include <stdio.h>

/* s escaped (NULL writes nothing). */
void html_text(FILE *out, const char *s);
/* printf, then the result escaped: for text that mixes numbers and names. */
void html_textf(FILE *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* An element with escaped text: <tag class="cls">text</tag> (cls NULL: none). */
void html_elem(FILE *out, const char *tag, const char *cls, const char *text);

/*
 * The page around the report: doctype, the title (escaped), the inline
 * style and, at the end, the inline script that shows a chart's values
 * under the pointer. html_page_end returns 0, or -1 when writing failed.
 */
void html_page_begin(FILE *out, const char *title);
int html_page_end(FILE *out);

/* A page is written with out_write_file (out/outfile.h): whole or not at all. */

#endif
