/*
 * svg.c - the SVG pieces of the HTML reports (svg.h).
 */
#include "out/svg.h"

#include "out/html.h"

#include <assert.h>
#include <math.h>
#include <string.h>

double svg_map(const struct svg_scale *s, double v)
{
    if (!(s->d1 != s->d0) || !isfinite(v))
        return s->r0;
    return s->r0 + (v - s->d0) * (s->r1 - s->r0) / (s->d1 - s->d0);
}

/* A coordinate as the page writes it. */
static double coord(double v)
{
    if (!isfinite(v))
        return 0;
    /* far outside any page, but still a number a browser parses */
    return v > 1e7 ? 1e7 : v < -1e7 ? -1e7 : v;
}

static void attr(FILE *out, const char *name, const char *value)
{
    if (!value)
        return;
    fprintf(out, " %s=\"", name);
    html_text(out, value);
    fputc('"', out);
}

void svg_begin(FILE *out, const char *id, const char *cls, int width, int height, const char *label)
{
    assert(width > 0 && height > 0);
    fprintf(out,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" role=\"img\"",
            width, height, width, height);
    attr(out, "id", id);
    attr(out, "class", cls);
    attr(out, "aria-label", label);
    fputs(">\n", out);
}

void svg_end(FILE *out)
{
    fputs("</svg>\n", out);
}

static void close_with_title(FILE *out, const char *tag, const char *title)
{
    if (!title) {
        fputs("/>\n", out);
        return;
    }
    fputs("><title>", out);
    html_text(out, title);
    fprintf(out, "</title></%s>\n", tag);
}

void svg_rect(FILE *out, double x, double y, double w, double h, const char *cls, const char *title,
              const char *data)
{
    if (w < 0) {
        x += w;
        w = -w;
    }
    if (h < 0) {
        y += h;
        h = -h;
    }
    fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"", coord(x), coord(y),
            coord(w), coord(h));
    attr(out, "class", cls);
    attr(out, "data-v", data);
    close_with_title(out, "rect", title);
}

void svg_line(FILE *out, double x1, double y1, double x2, double y2, const char *cls,
              const char *title)
{
    fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"", coord(x1), coord(y1),
            coord(x2), coord(y2));
    attr(out, "class", cls);
    close_with_title(out, "line", title);
}

void svg_text(FILE *out, double x, double y, const char *anchor, double rotate, const char *text)
{
    assert(anchor && strpbrk(anchor, "\"<>&") == NULL);
    fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\"", coord(x), coord(y), anchor);
    if (rotate != 0)
        fprintf(out, " transform=\"rotate(%.1f %.1f %.1f)\"", rotate, coord(x), coord(y));
    fputc('>', out);
    html_text(out, text);
    fputs("</text>\n", out);
}

void svg_path_begin(struct svg_path *p, FILE *out, const char *cls)
{
    p->out = out;
    p->points = 0;
    fputs("<path", out);
    attr(out, "class", cls);
    fputs(" d=\"", out);
}

void svg_path_point(struct svg_path *p, double x, double y)
{
    fprintf(p->out, "%s%.1f %.1f", p->points ? " L" : "M", coord(x), coord(y));
    p->points++;
}

void svg_path_close(struct svg_path *p)
{
    assert(p->points > 0);
    fputs(" Z", p->out);
}

void svg_path_end(struct svg_path *p, const char *title)
{
    assert(p->points > 0); /* an empty d is what the browser test looks for */
    fputc('"', p->out);
    close_with_title(p->out, "path", title);
}
