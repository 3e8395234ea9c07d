/*
 * json.c - the streaming JSON writer: structure bookkeeping, indentation and
 * string escaping with UTF-8 validation.
 */
#include "out/json.h"

#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>

void json_init(struct json_writer *w, FILE *out)
{
    assert(w && out);
    memset(w, 0, sizeof(*w));
    w->out = out;
}

void json_finish(struct json_writer *w)
{
    assert(w->depth == 0 && w->done && !w->key_pending);
    fputc('\n', w->out);
}

static void newline_indent(struct json_writer *w)
{
    fputc('\n', w->out);
    for (int i = 0; i < w->depth; i++)
        fputs("  ", w->out);
}

/* Everything a value needs before it: a comma and indentation in an array;
 * in an object the key (already written) has done that. */
static void before_value(struct json_writer *w)
{
    assert(!w->done);
    if (w->depth == 0)
        return;
    if (w->stack[w->depth - 1].kind == '{') {
        assert(w->key_pending && "a value inside an object needs a key first");
        w->key_pending = false;
        return;
    }
    if (w->stack[w->depth - 1].has_item)
        fputc(',', w->out);
    w->stack[w->depth - 1].has_item = true;
    newline_indent(w);
}

static void after_value(struct json_writer *w)
{
    if (w->depth == 0)
        w->done = true;
}

static void begin(struct json_writer *w, char kind)
{
    before_value(w);
    assert(w->depth < JSON_MAX_DEPTH && "JSON nested too deeply");
    fputc(kind, w->out);
    w->stack[w->depth].kind = kind;
    w->stack[w->depth].has_item = false;
    w->depth++;
}

static void end(struct json_writer *w, char kind)
{
    assert(w->depth > 0 && w->stack[w->depth - 1].kind == kind && "mismatched JSON close");
    assert(!w->key_pending && "JSON key without a value");
    bool had_items = w->stack[w->depth - 1].has_item;
    w->depth--;
    if (had_items)
        newline_indent(w);
    fputc(kind == '{' ? '}' : ']', w->out);
    after_value(w);
}

void json_object_begin(struct json_writer *w)
{
    begin(w, '{');
}

void json_object_end(struct json_writer *w)
{
    end(w, '{');
}

void json_array_begin(struct json_writer *w)
{
    begin(w, '[');
}

void json_array_end(struct json_writer *w)
{
    end(w, '[');
}

void json_key(struct json_writer *w, const char *key)
{
    assert(key);
    assert(w->depth > 0 && w->stack[w->depth - 1].kind == '{' && "JSON key outside an object");
    assert(!w->key_pending && "two JSON keys in a row");
    if (w->stack[w->depth - 1].has_item)
        fputc(',', w->out);
    w->stack[w->depth - 1].has_item = true;
    newline_indent(w);
    json_write_escaped(w->out, key, strlen(key));
    fputs(": ", w->out);
    w->key_pending = true;
}

size_t utf8_sequence_length(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t len;
    uint32_t min, cp;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2, min = 0x80, cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3, min = 0x800, cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4, min = 0x10000, cp = c & 0x07;
    } else {
        return 0;
    }
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

void json_write_escaped(FILE *out, const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    fputc('"', out);
    size_t i = 0;
    while (i < len) {
        unsigned char c = p[i];
        if (c == '"' || c == '\\') {
            fputc('\\', out);
            fputc(c, out);
            i++;
        } else if (c < 0x20 || c == 0x7f) {
            fprintf(out, "\\u%04x", c);
            i++;
        } else if (c < 0x80) {
            fputc(c, out);
            i++;
        } else {
            size_t n = utf8_sequence_length(p + i, len - i);
            if (n == 0) {
                fputs("\xef\xbf\xbd", out); /* U+FFFD for one bad byte */
                i++;
            } else {
                fwrite(p + i, 1, n, out);
                i += n;
            }
        }
    }
    fputc('"', out);
}

void json_string_n(struct json_writer *w, const char *s, size_t len)
{
    before_value(w);
    json_write_escaped(w->out, s, len);
    after_value(w);
}

void json_string(struct json_writer *w, const char *s)
{
    if (!s) {
        json_null(w);
        return;
    }
    json_string_n(w, s, strlen(s));
}

void json_int(struct json_writer *w, int64_t value)
{
    before_value(w);
    fprintf(w->out, "%" PRId64, value);
    after_value(w);
}

void json_uint(struct json_writer *w, uint64_t value)
{
    before_value(w);
    fprintf(w->out, "%" PRIu64, value);
    after_value(w);
}

void json_double(struct json_writer *w, double value)
{
    if (!isfinite(value)) {
        json_null(w);
        return;
    }
    before_value(w);
    /* %.17g round-trips; make sure a whole number still reads as a number
     * with a fraction so consumers keep it a float. */
    char buf[40];
    snprintf(buf, sizeof(buf), "%.17g", value);
    fputs(buf, w->out);
    if (!strpbrk(buf, ".eE"))
        fputs(".0", w->out);
    after_value(w);
}

void json_bool(struct json_writer *w, bool value)
{
    before_value(w);
    fputs(value ? "true" : "false", w->out);
    after_value(w);
}

void json_null(struct json_writer *w)
{
    before_value(w);
    fputs("null", w->out);
    after_value(w);
}

void json_kv_string(struct json_writer *w, const char *key, const char *s)
{
    json_key(w, key);
    json_string(w, s);
}

void json_kv_int(struct json_writer *w, const char *key, int64_t value)
{
    json_key(w, key);
    json_int(w, value);
}

void json_kv_uint(struct json_writer *w, const char *key, uint64_t value)
{
    json_key(w, key);
    json_uint(w, value);
}

void json_kv_double(struct json_writer *w, const char *key, double value)
{
    json_key(w, key);
    json_double(w, value);
}

void json_kv_bool(struct json_writer *w, const char *key, bool value)
{
    json_key(w, key);
    json_bool(w, value);
}

void json_kv_null(struct json_writer *w, const char *key)
{
    json_key(w, key);
    json_null(w);
}

void json_address(struct json_writer *w, uint64_t address)
{
    char buf[24];
    snprintf(buf, sizeof(buf), "0x%" PRIx64, address);
    json_string(w, buf);
}

void json_kv_address(struct json_writer *w, const char *key, uint64_t address)
{
    json_key(w, key);
    json_address(w, address);
}

void json_kv_opt_int(struct json_writer *w, const char *key, bool present, int64_t value)
{
    if (present)
        json_kv_int(w, key, value);
    else
        json_kv_null(w, key);
}
