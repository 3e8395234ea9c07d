/*
 * svg.h - the SVG pieces of the HTML reports (out/html.h): scales from a
 * value to a pixel, paths built point by point, rectangles, lines and text.
 * Every text and title goes through html_text; coordinates are written with
 * one decimal, and a value that is not finite is drawn at 0 rather than
 * written as "nan", which a browser would reject with the whole path.
 */
#ifndef CUTRACE_ANALYZER_SVG_H
#define CUTRACE_ANALYZER_SVG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* A linear map of [d0, d1] onto [r0, r1]; a degenerate domain maps to r0. */
struct svg_scale {
    double d0, d1, r0, r1;
};
double svg_map(const struct svg_scale *s, double v);

/* <svg id="id" class="cls" ...> with its size and an accessible label. */
void svg_begin(FILE *out, const char *id, const char *cls, int width, int height,
               const char *label);
void svg_end(FILE *out);

/* title (NULL: none) becomes the element's <title>, what hovering shows;
 * data (NULL: none) its data-v attribute, what the page's readout shows. */
void svg_rect(FILE *out, double x, double y, double w, double h, const char *cls, const char *title,
              const char *data);
void svg_line(FILE *out, double x1, double y1, double x2, double y2, const char *cls,
              const char *title);
/* anchor: "start", "middle" or "end"; rotate: degrees about (x, y). */
void svg_text(FILE *out, double x, double y, const char *anchor, double rotate, const char *text);

/* A path written as it is built: begin, points, end. */
struct svg_path {
    FILE *out;
    size_t points;
};
void svg_path_begin(struct svg_path *p, FILE *out, const char *cls);
void svg_path_point(struct svg_path *p, double x, double y); /* the first moves, the rest draw */
void svg_path_close(struct svg_path *p);
/* Ends the element (with title, NULL none); a path must have a point. */
void svg_path_end(struct svg_path *p, const char *title);

#endif
