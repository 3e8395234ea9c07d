/*
 * html.c - escaping and the page skeleton of the HTML reports (html.h).
 * The style and the script are constants of this file: nothing from a
 * trace reaches them, so the only way in for a trace's text is html_text.
 */
#include "out/html.h"

#include "cli.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The length of the valid UTF-8 sequence at s (1-4), 0 when invalid. */
static size_t utf8_length(const unsigned char *s)
{
    unsigned char c = s[0];
    size_t n;
    uint32_t cp;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
        cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0; /* also stops at the terminating NUL */
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    /* overlong forms, surrogates and code points past U+10FFFF */
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

void html_text(FILE *out, const char *s)
{
    if (!s)
        return;
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned char c = *p;
        switch (c) {
        case '&':
            fputs("&amp;", out);
            break;
        case '<':
            fputs("&lt;", out);
            break;
        case '>':
            fputs("&gt;", out);
            break;
        case '"':
            fputs("&quot;", out);
            break;
        case '\'':
            fputs("&#39;", out);
            break;
        default:
            if ((c < 0x20 && c != '\t' && c != '\n') || c == 0x7f) {
                fputs("\xef\xbf\xbd", out);
                break;
            }
            size_t n = utf8_length(p);
            if (n == 0) {
                fputs("\xef\xbf\xbd", out); /* one replacement per invalid byte */
                break;
            }
            fwrite(p, 1, n, out);
            p += n;
            continue;
        }
        p++;
    }
}

void html_textf(FILE *out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    assert(n >= 0);
    char *text = xmalloc((size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(text, (size_t)n + 1, fmt, ap);
    va_end(ap);
    html_text(out, text);
    free(text);
}

void html_elem(FILE *out, const char *tag, const char *cls, const char *text)
{
    assert(tag && strpbrk(tag, "<>\"' ") == NULL);
    fprintf(out, "<%s", tag);
    if (cls) {
        fputs(" class=\"", out);
        html_text(out, cls);
        fputc('"', out);
    }
    fputc('>', out);
    html_text(out, text);
    fprintf(out, "</%s>", tag);
}

static const char style[] =
    "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222;background:#fff}\n"
    "h1{font-size:1.5em}h2{font-size:1.25em;margin-top:2em;border-bottom:1px solid #ccc}\n"
    "h3{font-size:1.05em}\n"
    "table{border-collapse:collapse;margin:.5em 0}\n"
    "td,th{border:1px solid #ddd;padding:2px 6px;text-align:left;vertical-align:top}\n"
    "td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}\n"
    "tr.problem td{background:#fde2e2}tr.diverged td{background:#fff1cc}\n"
    ".problem{color:#b00020}.note{color:#555}.mono{font-family:monospace}\n"
    ".legend span{display:inline-block;margin-right:1em}\n"
    ".legend i{display:inline-block;width:.9em;height:.9em;margin-right:.3em;"
    "vertical-align:-.1em}\n"
    "svg{display:block;margin:.3em 0}svg text{font:11px sans-serif;fill:#333}\n"
    "svg .axis{stroke:#888;stroke-width:1}svg .grid{stroke:#eee;stroke-width:1}\n"
    "svg .ms{stroke:#666;stroke-width:1;stroke-dasharray:3 3}\n"
    "svg .fail{fill:#d00;stroke:none}svg .used{fill:none;stroke:#000;stroke-width:1.5}\n"
    "svg .unexpl{fill:none;stroke:#d00;stroke-width:1.5;stroke-dasharray:5 3}\n"
    "svg .hover{fill:transparent}svg .hover:hover{fill:rgba(0,0,0,.06)}\n"
    "svg .diverged{fill:rgba(255,190,0,.22)}\n"
    "svg .nvtx{fill:rgba(120,90,200,.10)}svg .nvtxbar{fill:rgba(120,90,200,.45)}\n"
    "svg .nvtxbar:hover{fill:rgba(120,90,200,.75)}svg .nvtxlabel{pointer-events:none}\n"
    "svg .c0{fill:#4e79a7}svg .c1{fill:#f28e2b}svg .c2{fill:#59a14f}svg .c3{fill:#76b7b2}\n"
    "svg .c4{fill:#edc948}svg .c5{fill:#b07aa1}svg .c6{fill:#9c755f}\n"
    ".k0{background:#4e79a7}.k1{background:#f28e2b}.k2{background:#59a14f}"
    ".k3{background:#76b7b2}.k4{background:#edc948}.kn{background:rgba(120,90,200,.45)}\n"
    "svg .la{fill:none;stroke:#4e79a7;stroke-width:2}svg .lb{fill:none;stroke:#e15759;"
    "stroke-width:2}\n"
    "svg .up{fill:#e15759}svg .down{fill:#59a14f}svg .level{fill:#4e79a7}\n"
    "svg .neg{fill:#b00020}svg .flame{stroke:#fff;stroke-width:.5}\n"
    ".readout{font-family:monospace;white-space:pre;min-height:1.4em;color:#333}\n"
    ".sides{display:flex;gap:1.5em;align-items:flex-start}.side{flex:1 1 0;min-width:0}\n"
    ".side svg{max-width:100%;height:auto}\n";

/* Shows the values of the chart column under the pointer (its data-v) in
 * the chart's readout line; the <title> of each column says the same where
 * scripts are off. */
static const char script[] = "(function(){\n"
                             "  document.querySelectorAll('svg.chart').forEach(function(svg){\n"
                             "    var readout = document.getElementById(svg.id + '-readout');\n"
                             "    if (!readout) return;\n"
                             "    svg.addEventListener('mousemove', function(ev){\n"
                             "      var t = ev.target;\n"
                             "      if (t && t.getAttribute && t.getAttribute('data-v') !== null)\n"
                             "        readout.textContent = t.getAttribute('data-v');\n"
                             "    });\n"
                             "  });\n"
                             "})();\n";

void html_page_begin(FILE *out, const char *title)
{
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<meta name=\"viewport\" content=\"width=device-width\">\n"
          "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
          "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\n<title>",
          out);
    html_text(out, title);
    fprintf(out, "</title>\n<style>\n%s</style>\n</head>\n<body>\n", style);
}

int html_page_end(FILE *out)
{
    fprintf(out, "<script>\n%s</script>\n</body>\n</html>\n", script);
    return fflush(out) != 0 || ferror(out) ? -1 : 0;
}
