/*
 * json.h - a small streaming JSON writer for the --json reports.
 *
 * Values are written as they come, so a report never has to be held in
 * memory as a tree. Output is indented two spaces per level and byte-for-byte
 * deterministic. Misuse (a value where a key is expected, closing the wrong
 * container, nesting deeper than JSON_MAX_DEPTH) is a programming error and
 * trips an assertion.
 *
 * Strings are escaped for any input: quotes, backslashes and control
 * characters are escaped (controls as \u00XX), and bytes that are not valid
 * UTF-8 become U+FFFD, so trace contents (command lines, device names) can
 * never produce an invalid document.
 */
#ifndef CUTRACE_ANALYZER_JSON_H
#define CUTRACE_ANALYZER_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 32

struct json_writer {
    FILE *out;
    int depth;
    bool done;        /* the top-level value is complete */
    bool key_pending; /* a key was written; its value must follow */
    struct {
        char kind;     /* '{' or '[' */
        bool has_item; /* a comma is due before the next item */
    } stack[JSON_MAX_DEPTH];
};

void json_init(struct json_writer *w, FILE *out);
/* Asserts the document is complete and ends it with a newline. */
void json_finish(struct json_writer *w);

void json_object_begin(struct json_writer *w);
void json_object_end(struct json_writer *w);
void json_array_begin(struct json_writer *w);
void json_array_end(struct json_writer *w);

/* Inside an object: the key of the next value. */
void json_key(struct json_writer *w, const char *key);

void json_string(struct json_writer *w, const char *s); /* NULL writes null */
void json_string_n(struct json_writer *w, const char *s, size_t len);
void json_int(struct json_writer *w, int64_t value);
void json_uint(struct json_writer *w, uint64_t value);
void json_double(struct json_writer *w, double value); /* NaN and infinities write null */
void json_bool(struct json_writer *w, bool value);
void json_null(struct json_writer *w);

/* Key and value in one call, for the common case. */
void json_kv_string(struct json_writer *w, const char *key, const char *s);
void json_kv_int(struct json_writer *w, const char *key, int64_t value);
void json_kv_uint(struct json_writer *w, const char *key, uint64_t value);
void json_kv_double(struct json_writer *w, const char *key, double value);
void json_kv_bool(struct json_writer *w, const char *key, bool value);
void json_kv_null(struct json_writer *w, const char *key);
/* value when present, else null: a number the trace may not have. */
void json_kv_opt_int(struct json_writer *w, const char *key, bool present, int64_t value);

/* Addresses (device pointers, return addresses) are strings in every report:
 * "0x7f3a00000000", lower-case hex, no padding; a JSON number cannot carry
 * every 64-bit address exactly (doubles hold 53 bits). */
void json_address(struct json_writer *w, uint64_t address);
void json_kv_address(struct json_writer *w, const char *key, uint64_t address);

/* Length of the valid UTF-8 sequence at s (at most n bytes), or 0 if invalid:
 * overlong forms, surrogates and code points past U+10FFFF are invalid. The
 * one decoder of the machine-readable outputs (JSON here, CSV in csv.c). */
size_t utf8_sequence_length(const unsigned char *s, size_t n);

/* Writes the JSON string literal for s[0..len) (quotes included) to out. */
void json_write_escaped(FILE *out, const char *s, size_t len);

#endif
