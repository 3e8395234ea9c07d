/*
 * test_json.c - the streaming JSON writer (analyzer/out/json.c): layout,
 * escaping of hostile strings, numbers, and the assertions on misuse.
 */
#include "out/json.h"
#include "test_support.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct capture {
    FILE *f;
    char *text;
    size_t len;
};

static void capture_open(struct capture *c)
{
    c->text = NULL;
    c->len = 0;
    c->f = open_memstream(&c->text, &c->len);
    ck_assert_ptr_nonnull(c->f);
}

static char *capture_close(struct capture *c)
{
    fclose(c->f);
    return c->text;
}

/* The string literal the writer produces for len bytes of s. */
static char *escaped(const char *s, size_t len)
{
    struct capture c;
    capture_open(&c);
    json_write_escaped(c.f, s, len);
    return capture_close(&c);
}

START_TEST(test_layout)
{
    struct capture c;
    capture_open(&c);
    struct json_writer w;
    json_init(&w, c.f);
    json_object_begin(&w);
    json_kv_string(&w, "name", "cutrace");
    json_key(&w, "list");
    json_array_begin(&w);
    json_int(&w, 1);
    json_object_begin(&w);
    json_object_end(&w);
    json_array_begin(&w);
    json_array_end(&w);
    json_null(&w);
    json_array_end(&w);
    json_kv_bool(&w, "ok", true);
    json_kv_bool(&w, "bad", false);
    json_object_end(&w);
    json_finish(&w);
    char *text = capture_close(&c);
    ck_assert_str_eq(text, "{\n"
                           "  \"name\": \"cutrace\",\n"
                           "  \"list\": [\n"
                           "    1,\n"
                           "    {},\n"
                           "    [],\n"
                           "    null\n"
                           "  ],\n"
                           "  \"ok\": true,\n"
                           "  \"bad\": false\n"
                           "}\n");
    ck_assert(json_valid(text));
    free(text);
}
END_TEST

START_TEST(test_numbers)
{
    struct capture c;
    capture_open(&c);
    struct json_writer w;
    json_init(&w, c.f);
    json_array_begin(&w);
    json_int(&w, INT64_MIN);
    json_int(&w, INT64_MAX);
    json_uint(&w, UINT64_MAX);
    json_double(&w, 1.5);
    json_double(&w, 2.0);
    json_double(&w, NAN);
    json_double(&w, -INFINITY);
    json_double(&w, 1e300);
    json_array_end(&w);
    json_finish(&w);
    char *text = capture_close(&c);
    ck_assert_str_eq(text, "[\n  -9223372036854775808,\n  9223372036854775807,\n"
                           "  18446744073709551615,\n  1.5,\n  2.0,\n  null,\n  null,\n"
                           "  1.0000000000000001e+300\n]\n");
    ck_assert(json_valid(text));
    free(text);
}
END_TEST

START_TEST(test_escaping)
{
    char *s;
    s = escaped("plain", 5);
    ck_assert_str_eq(s, "\"plain\"");
    free(s);
    s = escaped("a\"b\\c", 5);
    ck_assert_str_eq(s, "\"a\\\"b\\\\c\"");
    free(s);
    s = escaped("\n\t\x01\x1f\x7f", 5);
    ck_assert_str_eq(s, "\"\\u000a\\u0009\\u0001\\u001f\\u007f\"");
    free(s);
    /* An embedded NUL is data, not the end. */
    s = escaped("a\0b", 3);
    ck_assert_str_eq(s, "\"a\\u0000b\"");
    free(s);
    /* Valid UTF-8 passes through: é, €, 😀 (U+1F600). */
    s = escaped("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9);
    ck_assert_str_eq(s, "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"");
    free(s);
    /* Invalid: lone continuation, truncated sequence, overlong '/', surrogate,
     * past U+10FFFF, 0xff. Each bad byte becomes U+FFFD. */
    s = escaped("\x80", 1);
    ck_assert_str_eq(s, "\"\xef\xbf\xbd\"");
    free(s);
    s = escaped("\xe2\x82", 2);
    ck_assert_str_eq(s, "\"\xef\xbf\xbd\xef\xbf\xbd\"");
    free(s);
    s = escaped("\xc0\xaf", 2);
    ck_assert_str_eq(s, "\"\xef\xbf\xbd\xef\xbf\xbd\"");
    free(s);
    s = escaped("\xed\xa0\x80", 3);
    ck_assert_str_eq(s, "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"");
    free(s);
    s = escaped("\xf4\x90\x80\x80", 4);
    ck_assert(json_valid(s));
    ck_assert_ptr_null(strstr(s, "\xf4\x90"));
    free(s);
    s = escaped("x\xffy", 3);
    ck_assert_str_eq(s, "\"x\xef\xbf\xbdy\"");
    free(s);
}
END_TEST

START_TEST(test_every_byte_gives_valid_json)
{
    /* Every byte value, in every position of a short string: the result must
     * always be a valid JSON string. */
    char input[256];
    for (int i = 0; i < 256; i++)
        input[i] = (char)i;
    char *s = escaped(input, sizeof(input));
    ck_assert(json_valid(s));
    free(s);
    for (int b = 0; b < 256; b++) {
        char three[3] = {(char)0xe2, (char)b, (char)0x82};
        s = escaped(three, 3);
        ck_assert_msg(json_valid(s), "byte %d", b);
        free(s);
    }
}
END_TEST

START_TEST(test_key_escaping_and_null_string)
{
    struct capture c;
    capture_open(&c);
    struct json_writer w;
    json_init(&w, c.f);
    json_object_begin(&w);
    json_kv_string(&w, "we\"ird\n", NULL);
    json_object_end(&w);
    json_finish(&w);
    char *text = capture_close(&c);
    ck_assert_str_eq(text, "{\n  \"we\\\"ird\\u000a\": null\n}\n");
    free(text);
}
END_TEST

START_TEST(test_value_without_key_asserts)
{
    struct json_writer w;
    json_init(&w, stderr);
    json_object_begin(&w);
    json_int(&w, 1); /* aborts */
}
END_TEST

START_TEST(test_mismatched_close_asserts)
{
    struct json_writer w;
    json_init(&w, stderr);
    json_array_begin(&w);
    json_object_end(&w); /* aborts */
}
END_TEST

START_TEST(test_unfinished_document_asserts)
{
    struct json_writer w;
    json_init(&w, stderr);
    json_array_begin(&w);
    json_finish(&w); /* aborts */
}
END_TEST

/* Addresses are strings in every report: a double cannot hold every 64-bit one. */
START_TEST(test_addresses_are_hex_strings)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(f);
    struct json_writer w;
    json_init(&w, f);
    json_object_begin(&w);
    json_kv_address(&w, "ptr", 0x7f3a00000000ull);
    json_kv_address(&w, "top", UINT64_MAX);
    json_key(&w, "ips");
    json_array_begin(&w);
    json_address(&w, 0);
    json_address(&w, 0x401000);
    json_array_end(&w);
    json_object_end(&w);
    json_finish(&w);
    fclose(f);
    ck_assert_str_eq(text, "{\n  \"ptr\": \"0x7f3a00000000\",\n  \"top\": \"0xffffffffffffffff\",\n"
                           "  \"ips\": [\n    \"0x0\",\n    \"0x401000\"\n  ]\n}\n");
    free(text);
}
END_TEST

Suite *json_suite(void)
{
    Suite *s = suite_create("json");
    TCase *tc = tcase_create("writer");
    tcase_add_test(tc, test_layout);
    tcase_add_test(tc, test_numbers);
    tcase_add_test(tc, test_escaping);
    tcase_add_test(tc, test_every_byte_gives_valid_json);
    tcase_add_test(tc, test_key_escaping_and_null_string);
    tcase_add_test(tc, test_addresses_are_hex_strings);
    tcase_add_test_raise_signal(tc, test_value_without_key_asserts, SIGABRT);
    tcase_add_test_raise_signal(tc, test_mismatched_close_asserts, SIGABRT);
    tcase_add_test_raise_signal(tc, test_unfinished_document_asserts, SIGABRT);
    suite_add_tcase(s, tc);
    return s;
}
