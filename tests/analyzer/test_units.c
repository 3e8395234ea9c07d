/*
 * test_units.c - byte, duration, time and version formatting, and size
 * parsing (analyzer/out/units.c).
 */
#include "test_support.h"
#include "out/units.h"

#include <stdint.h>

static const char *bytes(uint64_t value)
{
    static char buf[UNITS_BUF];
    return format_bytes(buf, sizeof(buf), value);
}

static const char *duration(int64_t ns)
{
    static char buf[UNITS_BUF];
    return format_duration(buf, sizeof(buf), ns);
}

START_TEST(test_format_bytes)
{
    ck_assert_str_eq(bytes(0), "0 B");
    ck_assert_str_eq(bytes(512), "512 B");
    ck_assert_str_eq(bytes(1023), "1023 B");
    ck_assert_str_eq(bytes(1024), "1.00 KiB");
    ck_assert_str_eq(bytes(1536), "1.50 KiB");
    ck_assert_str_eq(bytes(8ull << 20), "8.00 MiB");
    ck_assert_str_eq(bytes(94ull << 30), "94.00 GiB");
    ck_assert_str_eq(bytes((1ull << 20) - 1), "1.00 MiB"); /* never "1024.00 KiB" */
    ck_assert_str_eq(bytes(3ull << 40), "3.00 TiB");
    ck_assert_str_eq(bytes(UINT64_MAX), "16.00 EiB");
    char buf[UNITS_BUF];
    ck_assert_str_eq(format_bytes_signed(buf, sizeof(buf), -(12ll << 20)), "-12.00 MiB");
    ck_assert_str_eq(format_bytes_signed(buf, sizeof(buf), INT64_MIN), "-8.00 EiB");
    ck_assert_str_eq(format_bytes_signed(buf, sizeof(buf), 100), "100 B");
}
END_TEST

START_TEST(test_format_duration)
{
    ck_assert_str_eq(duration(0), "0 ns");
    ck_assert_str_eq(duration(999), "999 ns");
    ck_assert_str_eq(duration(1000), "1.00 us");
    ck_assert_str_eq(duration(12345), "12.3 us");
    ck_assert_str_eq(duration(123456), "123 us");
    ck_assert_str_eq(duration(4560000), "4.56 ms");
    ck_assert_str_eq(duration(1230000000), "1.23 s");
    ck_assert_str_eq(duration(999999), "1.00 ms"); /* rounds up a unit, not "1000 us" */
    ck_assert_str_eq(duration(1234000000000), "1234 s");
    ck_assert_str_eq(duration(-4560000), "-4.56 ms");
    ck_assert_str_eq(duration(INT64_MIN), "-9223372037 s");
    char buf[UNITS_BUF];
    ck_assert_str_eq(format_offset(buf, sizeof(buf), 1500000), "+1.50 ms");
    ck_assert_str_eq(format_offset(buf, sizeof(buf), -2000), "-2.00 us");
}
END_TEST

START_TEST(test_format_wall_time_and_version)
{
    char buf[UNITS_BUF];
    ck_assert_str_eq(format_wall_time(buf, sizeof(buf), 1736071872345678901ll, 3),
                     "2025-01-05T10:11:12.345Z");
    ck_assert_str_eq(format_wall_time(buf, sizeof(buf), 1736071872345678901ll, 9),
                     "2025-01-05T10:11:12.345678901Z");
    ck_assert_str_eq(format_wall_time(buf, sizeof(buf), 0, 0), "1970-01-01T00:00:00Z");
    ck_assert_str_eq(format_wall_time(buf, sizeof(buf), -1, 3), "1969-12-31T23:59:59.999Z");
    ck_assert_str_eq(format_cuda_version(buf, sizeof(buf), 12080), "12.8");
    ck_assert_str_eq(format_cuda_version(buf, sizeof(buf), 11020), "11.2");
    ck_assert_str_eq(format_cuda_version(buf, sizeof(buf), 13000), "13.0");
    ck_assert_str_eq(format_cuda_version(buf, sizeof(buf), 0), "unknown");
}
END_TEST

START_TEST(test_parse_size)
{
    uint64_t v;
    ck_assert_int_eq(parse_size("4096", &v), 0);
    ck_assert_uint_eq(v, 4096);
    ck_assert_int_eq(parse_size("512B", &v), 0);
    ck_assert_uint_eq(v, 512);
    ck_assert_int_eq(parse_size("64k", &v), 0);
    ck_assert_uint_eq(v, 64 * 1024);
    ck_assert_int_eq(parse_size("8MB", &v), 0);
    ck_assert_uint_eq(v, 8ull << 20);
    ck_assert_int_eq(parse_size("1.5 GiB", &v), 0);
    ck_assert_uint_eq(v, 3ull << 29);
    ck_assert_int_eq(parse_size(" 2 tib ", &v), 0);
    ck_assert_uint_eq(v, 2ull << 40);
    ck_assert_int_eq(parse_size("18446744073709551615", &v), 0);
    ck_assert_uint_eq(v, UINT64_MAX);

    ck_assert_int_eq(parse_size("18446744073709551616", &v), -1);
    ck_assert_int_eq(parse_size("16384P", &v), -1);
    ck_assert_int_eq(parse_size("", &v), -1);
    ck_assert_int_eq(parse_size("GiB", &v), -1);
    ck_assert_int_eq(parse_size("-1", &v), -1);
    ck_assert_int_eq(parse_size("1e9", &v), -1);
    ck_assert_int_eq(parse_size("0x10", &v), -1);
    ck_assert_int_eq(parse_size("5 XB", &v), -1);
    ck_assert_int_eq(parse_size(".", &v), -1);
    ck_assert_int_eq(parse_size(NULL, &v), -1);
}
END_TEST

/* The column format of timeline and diff (out/units.h's rule): MiB with one
 * decimal below 1 GiB, GiB with two above, "0" for nothing. */
START_TEST(test_format_size)
{
    char buf[UNITS_BUF];
    ck_assert_str_eq(format_size(buf, sizeof(buf), 0), "0");
    ck_assert_str_eq(format_size(buf, sizeof(buf), 512 << 10), "0.5 MiB");
    ck_assert_str_eq(format_size(buf, sizeof(buf), 528ll << 20), "528.0 MiB");
    ck_assert_str_eq(format_size(buf, sizeof(buf), (1ll << 30) - 1), "1024.0 MiB");
    ck_assert_str_eq(format_size(buf, sizeof(buf), 1ll << 30), "1.00 GiB");
    ck_assert_str_eq(format_size(buf, sizeof(buf), 141ll << 29), "70.50 GiB");
    ck_assert_str_eq(format_size(buf, sizeof(buf), -(12ll << 20)), "-12.0 MiB");
    ck_assert_str_eq(format_size(buf, sizeof(buf), -(3ll << 30)), "-3.00 GiB");
    ck_assert_str_eq(format_size(buf, sizeof(buf), INT64_MIN), "-8589934592.00 GiB");
}
END_TEST

Suite *units_suite(void)
{
    Suite *s = suite_create("units");
    TCase *tc = tcase_create("units");
    tcase_add_test(tc, test_format_bytes);
    tcase_add_test(tc, test_format_size);
    tcase_add_test(tc, test_format_duration);
    tcase_add_test(tc, test_format_wall_time_and_version);
    tcase_add_test(tc, test_parse_size);
    suite_add_tcase(s, tc);
    return s;
}
