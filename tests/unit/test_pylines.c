/*
 * test_pylines.c - CPython line tables decoded offline (pylines.c): both
 * formats on hand-built tables whose answers were worked out from CPython's
 * PyCode_Addr2Line(), cut tables, and garbage, which must decode without a
 * read outside the table (the ASan build checks that: every table here lives
 * in a heap block of exactly its size).
 *
 * tests/python/pylines_check.c compares with the real interpreters.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cutrace/format.h"
#include "cutrace/pylines.h"
#include "suites.h"

/* A heap copy of exactly `len` bytes, so that the sanitizer sees any read past it. */
static uint8_t *exact(const uint8_t *bytes, size_t len)
{
    uint8_t *p = malloc(len ? len : 1);
    ck_assert_ptr_nonnull(p);
    memcpy(p, bytes, len);
    return p;
}

static int64_t line_of(unsigned format, int64_t first, const uint8_t *bytes, size_t len,
                       uint64_t offset)
{
    uint8_t *t = exact(bytes, len);
    int64_t line = ct_pylines_line(format, first, t, len, offset);
    free(t);
    return line;
}

/* Every cut of a table answers, at every offset up to max_offset (every
 * `1 + offset / sparse`-th one when sparse is not 0), the whole table's line
 * or 0, and a longer cut keeps every line a shorter one gave. */
static void check_cuts(unsigned format, int64_t first, const uint8_t *bytes, size_t len,
                       uint64_t max_offset, uint64_t sparse)
{
    int64_t *whole = calloc(max_offset + 1, sizeof *whole);
    int64_t *have = calloc(max_offset + 1, sizeof *have);
    ck_assert_ptr_nonnull(whole);
    ck_assert_ptr_nonnull(have);
    uint8_t *all = exact(bytes, len);
    for (uint64_t off = 0; off <= max_offset; off++)
        whole[off] = ct_pylines_line(format, first, all, len, off);
    free(all);
    for (size_t cut = 0; cut <= len; cut++) {
        uint8_t *t = exact(bytes, cut);
        for (uint64_t off = 0; off <= max_offset; off += sparse ? 1 + off / sparse : 1) {
            int64_t got = ct_pylines_line(format, first, t, cut, off);
            /* Not ck_assert: Check records every passing one, too slow here. */
            if (got != 0 && got != whole[off])
                ck_abort_msg("cut %zu offset %llu: %lld, whole %lld", cut, (unsigned long long)off,
                             (long long)got, (long long)whole[off]);
            if (have[off] != 0 && got != have[off])
                ck_abort_msg("cut %zu lost offset %llu", cut, (unsigned long long)off);
            have[off] = got;
        }
        free(t);
    }
    free(have);
    free(whole);
}

/* ---- 3.10: (byte count, signed line delta) pairs ---- */

START_TEST(test_310_ranges_and_deltas)
{
    /* The delta applies to its own range: [0,6) is line 2, not 1. */
    const uint8_t t[] = {6, 1, 44, 5, 200, 100, 10, (uint8_t)-3};
    ck_assert_int_eq(line_of(CT_PYLINES_310, 1, t, sizeof t, 0), 2);
    ck_assert_int_eq(line_of(CT_PYLINES_310, 1, t, sizeof t, 4), 2);
    ck_assert_int_eq(line_of(CT_PYLINES_310, 1, t, sizeof t, 5), 2); /* odd: same range */
    ck_assert_int_eq(line_of(CT_PYLINES_310, 1, t, sizeof t, 6), 7);
    ck_assert_int_eq(line_of(CT_PYLINES_310, 1, t, sizeof t, 48), 7);
    ck_assert_int_eq(line_of(CT_PYLINES_310, 1, t, sizeof t, 50), 107);
    ck_assert_int_eq(line_of(CT_PYLINES_310, 1, t, sizeof t, 248), 107);
    ck_assert_int_eq(line_of(CT_PYLINES_310, 1, t, sizeof t, 250), 104); /* negative delta */
    ck_assert_int_eq(line_of(CT_PYLINES_310, 1, t, sizeof t, 258), 104);
    /* Past the last range: CPython's -1. */
    ck_assert_int_eq(line_of(CT_PYLINES_310, 1, t, sizeof t, 260), 0);
    ck_assert_int_eq(line_of(CT_PYLINES_310, 1, t, sizeof t, CT_PYFRAME_VALUE_MASK - 1), 0);
    ck_assert_int_eq(line_of(CT_PYLINES_310, 1, t, sizeof t, UINT64_MAX), 0);
    check_cuts(CT_PYLINES_310, 1, t, sizeof t, 270, 0);
}
END_TEST

START_TEST(test_310_no_line_keeps_the_running_line)
{
    /* -128: no line for [4,6), and the running line stays where it was. */
    const uint8_t t[] = {4, 0, 2, (uint8_t)-128, 4, 1, 2, (uint8_t)-128, 2, 0};
    ck_assert_int_eq(line_of(CT_PYLINES_310, 20, t, sizeof t, 0), 20);
    ck_assert_int_eq(line_of(CT_PYLINES_310, 20, t, sizeof t, 4), 0);
    ck_assert_int_eq(line_of(CT_PYLINES_310, 20, t, sizeof t, 6), 21);
    ck_assert_int_eq(line_of(CT_PYLINES_310, 20, t, sizeof t, 10), 0);
    ck_assert_int_eq(line_of(CT_PYLINES_310, 20, t, sizeof t, 12), 21);
    ck_assert_int_eq(line_of(CT_PYLINES_310, 20, t, sizeof t, 14), 0);
    check_cuts(CT_PYLINES_310, 20, t, sizeof t, 16, 0);
}
END_TEST

START_TEST(test_310_empty_ranges_carry_line_jumps)
{
    /* A jump of 300 lines as the compiler writes it: empty pairs first. And
     * a range over 254 bytes as several pairs of the same line. */
    const uint8_t t[] = {0, 127,           0,   127, 10,  46, 0, (uint8_t)-127,
                         0, (uint8_t)-127, 254, 0,   254, 0,  6, 0};
    ck_assert_int_eq(line_of(CT_PYLINES_310, 1, t, sizeof t, 0), 301);
    ck_assert_int_eq(line_of(CT_PYLINES_310, 1, t, sizeof t, 8), 301);
    ck_assert_int_eq(line_of(CT_PYLINES_310, 1, t, sizeof t, 10), 47);
    ck_assert_int_eq(line_of(CT_PYLINES_310, 1, t, sizeof t, 264), 47);
    ck_assert_int_eq(line_of(CT_PYLINES_310, 1, t, sizeof t, 522), 47);
    ck_assert_int_eq(line_of(CT_PYLINES_310, 1, t, sizeof t, 524), 0);
    /* Cut after the empty pairs: their jump belongs to a range not sent. */
    ck_assert_int_eq(line_of(CT_PYLINES_310, 1, t, 4, 0), 0);
    ck_assert_int_eq(line_of(CT_PYLINES_310, 1, t, 6, 0), 301);
    /* An empty pair at the very end (CPython would read past it): no line. */
    const uint8_t tail[] = {4, 1, 0, 5};
    ck_assert_int_eq(line_of(CT_PYLINES_310, 1, tail, sizeof tail, 2), 2);
    ck_assert_int_eq(line_of(CT_PYLINES_310, 1, tail, sizeof tail, 4), 0);
    check_cuts(CT_PYLINES_310, 1, t, sizeof t, 530, 0);
}
END_TEST

START_TEST(test_310_odd_and_empty_tables)
{
    const uint8_t t[] = {4, 2, 4};
    ck_assert_int_eq(line_of(CT_PYLINES_310, 7, t, 3, 2), 9);
    ck_assert_int_eq(line_of(CT_PYLINES_310, 7, t, 3, 4), 0); /* the lone byte is no pair */
    ck_assert_int_eq(line_of(CT_PYLINES_310, 7, t, 1, 0), 0);
    ck_assert_int_eq(line_of(CT_PYLINES_310, 7, t, 0, 0), 0);
    ck_assert_int_eq(ct_pylines_line(CT_PYLINES_310, 7, NULL, 0, 0), 0);
    ck_assert_int_eq(ct_pylines_line(CT_PYLINES_310, 7, NULL, 100, 0), 0);
}
END_TEST

START_TEST(test_310_line_limits)
{
    /* CPython's -1 is "no line" whether it is a marker or a line. */
    const uint8_t minus[] = {2, (uint8_t)-1, 2, (uint8_t)-2};
    ck_assert_int_eq(line_of(CT_PYLINES_310, 0, minus, sizeof minus, 0), 0);
    ck_assert_int_eq(line_of(CT_PYLINES_310, 0, minus, sizeof minus, 2), -3);
    /* Lines a C int cannot hold come from no compiler. */
    const uint8_t up[] = {2, 0, 2, 1};
    ck_assert_int_eq(line_of(CT_PYLINES_310, INT32_MAX, up, sizeof up, 0), INT32_MAX);
    ck_assert_int_eq(line_of(CT_PYLINES_310, INT32_MAX, up, sizeof up, 2), 0);
    ck_assert_int_eq(line_of(CT_PYLINES_310, (int64_t)INT32_MAX + 1, up, sizeof up, 0), 0);
    /* A long table of +127 pairs stops at the limit instead of overflowing. */
    size_t n = 40000000;
    uint8_t *big = malloc(n);
    ck_assert_ptr_nonnull(big);
    for (size_t i = 0; i < n; i += 2) {
        big[i] = 0;
        big[i + 1] = 127;
    }
    big[n - 2] = 2; /* one range at the end, for a line to be asked of */
    ck_assert_int_eq(ct_pylines_line(CT_PYLINES_310, 1, big, n, 0), 0);
    free(big);
}
END_TEST

/* ---- 3.11+: location entries ---- */

#define HEAD(code, units) (uint8_t)(0x80 | (code) << 3 | ((units)-1))

/* first line 100:
 *   [0,4)    one-line form, delta 1                   101
 *   [4,10)   short form                               101
 *   [10,12)  no location                              none (line stays 101)
 *   [12,28)  long form, delta -5                      96
 *   [28,30)  no-column form, delta +200 (2-byte varint) 296
 *   [30,32)  one-line form, delta 2                   298 */
static const uint8_t loc[] = {
    HEAD(11, 2), 4,    9,           /* columns 4..9 */
    HEAD(3, 3),  0x25,              /* short: column 24+2, width 5 */
    HEAD(15, 1),                    /* no location */
    HEAD(14, 8), 0x0b, 0,    6, 10, /* -5: (5 << 1) | 1 */
    HEAD(13, 1), 0x50, 0x06,        /* 400 = 16 + 6 * 64 */
    HEAD(12, 1), 0,    3,
};

START_TEST(test_311_every_form)
{
    const int64_t want[][2] = {{0, 101},  {2, 101},  {4, 101}, {9, 101}, {10, 0},
                               {11, 0},   {12, 96},  {26, 96}, {27, 96}, {28, 296},
                               {30, 298}, {31, 298}, {32, 0},  {40, 0}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        ck_assert_msg(line_of(CT_PYLINES_311, 100, loc, sizeof loc, (uint64_t)want[i][0]) ==
                          want[i][1],
                      "offset %lld", (long long)want[i][0]);
    check_cuts(CT_PYLINES_311, 100, loc, sizeof loc, 40, 0);
}
END_TEST

START_TEST(test_311_cut_mid_entry)
{
    /* Cut right after the long form's head: its delta is not there. */
    ck_assert_int_eq(line_of(CT_PYLINES_311, 100, loc, 7, 10), 0);
    ck_assert_int_eq(line_of(CT_PYLINES_311, 100, loc, 7, 12), 0);
    ck_assert_int_eq(line_of(CT_PYLINES_311, 100, loc, 7, 4), 101);
    /* After its delta but before its columns: the line is known. */
    ck_assert_int_eq(line_of(CT_PYLINES_311, 100, loc, 8, 12), 96);
    ck_assert_int_eq(line_of(CT_PYLINES_311, 100, loc, 8, 28), 0);
    /* Half of the no-column form's varint. */
    ck_assert_int_eq(line_of(CT_PYLINES_311, 100, loc, 13, 28), 0);
    ck_assert_int_eq(line_of(CT_PYLINES_311, 100, loc, 13, 26), 96);
    ck_assert_int_eq(line_of(CT_PYLINES_311, 100, loc, 14, 28), 296);
    /* A one-line form's head alone holds its delta. */
    ck_assert_int_eq(line_of(CT_PYLINES_311, 100, loc, 15, 30), 298);
}
END_TEST

START_TEST(test_311_varints)
{
    /* The largest delta a C int holds: (2^31 - 1) << 1 in six chunks. */
    const uint8_t maxd[] = {HEAD(13, 1), 0x7e, 0x7f, 0x7f, 0x7f, 0x7f, 0x03};
    ck_assert_int_eq(line_of(CT_PYLINES_311, 0, maxd, sizeof maxd, 0), INT32_MAX);
    ck_assert_int_eq(line_of(CT_PYLINES_311, 1, maxd, sizeof maxd, 0), 0); /* past INT_MAX */
    /* Negative, and back to a line of -1 (CPython cannot tell it from none). */
    const uint8_t neg[] = {HEAD(13, 1), 0x07, HEAD(13, 1), 0x02};
    ck_assert_int_eq(line_of(CT_PYLINES_311, 1, neg, sizeof neg, 0), -2);
    ck_assert_int_eq(line_of(CT_PYLINES_311, 1, neg, sizeof neg, 2), 0);
    /* A seventh chunk would shift past CPython's unsigned int. */
    const uint8_t seven[] = {HEAD(14, 1), 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x00, 0, 1, 1};
    ck_assert_int_eq(line_of(CT_PYLINES_311, 5, seven, sizeof seven, 0), 0);
    /* A varint running off the table. */
    const uint8_t runs[] = {HEAD(2, 1), 0, HEAD(13, 1), 0x7f, 0x7f};
    ck_assert_int_eq(line_of(CT_PYLINES_311, 5, runs, sizeof runs, 0), 5);
    ck_assert_int_eq(line_of(CT_PYLINES_311, 5, runs, sizeof runs, 2), 0);
}
END_TEST

START_TEST(test_311_garbage_as_cpython_reads_it)
{
    /* A first byte without bit 7 is still read as an entry (code 0, 6 units). */
    const uint8_t lead[] = {0x05, HEAD(10, 1), 0, 0, HEAD(11, 1), 0, 0};
    ck_assert_int_eq(line_of(CT_PYLINES_311, 3, lead, sizeof lead, 10), 3);
    ck_assert_int_eq(line_of(CT_PYLINES_311, 3, lead, sizeof lead, 12), 3);
    ck_assert_int_eq(line_of(CT_PYLINES_311, 3, lead, sizeof lead, 14), 4);
    /* scan_varint() reads on through a byte with bit 7 set (0xc2: 2, more),
     * and the next entry still starts at that byte: code 8, 3 units. */
    const uint8_t through[] = {HEAD(13, 1), 0xc2, 0x01};
    ck_assert_int_eq(line_of(CT_PYLINES_311, 10, through, sizeof through, 0), 10 + 33);
    ck_assert_int_eq(line_of(CT_PYLINES_311, 10, through, sizeof through, 2), 10 + 33);
    ck_assert_int_eq(line_of(CT_PYLINES_311, 10, through, sizeof through, 7), 10 + 33);
    ck_assert_int_eq(line_of(CT_PYLINES_311, 10, through, sizeof through, 8), 0);
    /* All no-location entries. */
    uint8_t none[64];
    memset(none, 0xff, sizeof none);
    for (uint64_t off = 0; off < 1100; off += 2)
        if (line_of(CT_PYLINES_311, 10, none, sizeof none, off) != 0)
            ck_abort_msg("offset %llu has a line", (unsigned long long)off);
}
END_TEST

START_TEST(test_311_empty_tables)
{
    ck_assert_int_eq(line_of(CT_PYLINES_311, 7, loc, 0, 0), 0);
    ck_assert_int_eq(ct_pylines_line(CT_PYLINES_311, 7, NULL, 0, 0), 0);
    ck_assert_int_eq(ct_pylines_line(CT_PYLINES_311, 7, NULL, 9, 4), 0);
}
END_TEST

/* ---- both ---- */

START_TEST(test_not_started_and_unknown_formats)
{
    /* 3.10's f_lasti of -1 (and 3.11's first prev_instr): co_firstlineno. */
    ck_assert_int_eq(line_of(CT_PYLINES_310, 42, (const uint8_t[]){2, 1}, 2, CT_PYFRAME_VALUE_MASK),
                     42);
    ck_assert_int_eq(line_of(CT_PYLINES_311, 42, loc, sizeof loc, CT_PYFRAME_VALUE_MASK), 42);
    ck_assert_int_eq(ct_pylines_line(CT_PYLINES_311, 42, NULL, 0, CT_PYFRAME_VALUE_MASK), 42);
    ck_assert_int_eq(ct_pylines_line(CT_PYLINES_310, 42, NULL, 0, CT_PYFRAME_VALUE_MASK), 42);
    /* Nothing is known of a table in another format, not even the sentinel. */
    const unsigned unknown[] = {CT_PYLINES_NONE, 309, 312, 313, 0xffffffffu};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        ck_assert_int_eq(line_of(unknown[i], 42, loc, sizeof loc, 0), 0);
        ck_assert_int_eq(line_of(unknown[i], 42, loc, sizeof loc, CT_PYFRAME_VALUE_MASK), 0);
    }
}
END_TEST

/* Random bytes in both formats, at every offset (odd ones too) and every
 * cut: the sanitizers watch the reads, check_cuts the answers. */
START_TEST(test_random_tables)
{
    uint64_t s = 0x2545f4914f6cdd1dULL;
    uint8_t bytes[48];
    for (int round = 0; round < 300; round++) {
        size_t len = 0;
        for (; len < (size_t)(round % 48); len++) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            /* Half the rounds biased to bytes with bit 7 set: more entries. */
            bytes[len] = (uint8_t)(s >> 24) | (round & 1 ? 0x80 : 0);
        }
        check_cuts(CT_PYLINES_310, 1000, bytes, len, 255 * (len / 2) + 4, 64);
        check_cuts(CT_PYLINES_311, 1000, bytes, len, 16 * len + 4, 0);
    }
}
END_TEST

/* A table the size the tracer sends at most, looked up at its far end:
 * what the trace writer pays for one new frame. */
START_TEST(test_largest_table_is_one_walk)
{
    uint8_t *t = malloc(CT_PYLINES_MAX);
    ck_assert_ptr_nonnull(t);
    for (size_t i = 0; i < CT_PYLINES_MAX; i += 2) {
        t[i] = HEAD(10, 8);
        t[i + 1] = 0;
    }
    uint64_t last = (CT_PYLINES_MAX / 2) * 16 - 2;
    int64_t sum = 0;
    for (int i = 0; i < 1000; i++)
        sum += ct_pylines_line(CT_PYLINES_311, 9, t, CT_PYLINES_MAX, last);
    ck_assert_int_eq(sum, 9000);
    free(t);
}
END_TEST

Suite *pylines_suite(void)
{
    Suite *s = suite_create("pylines");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_310_ranges_and_deltas);
    tcase_add_test(tc, test_310_no_line_keeps_the_running_line);
    tcase_add_test(tc, test_310_empty_ranges_carry_line_jumps);
    tcase_add_test(tc, test_310_odd_and_empty_tables);
    tcase_add_test(tc, test_310_line_limits);
    tcase_add_test(tc, test_311_every_form);
    tcase_add_test(tc, test_311_cut_mid_entry);
    tcase_add_test(tc, test_311_varints);
    tcase_add_test(tc, test_311_garbage_as_cpython_reads_it);
    tcase_add_test(tc, test_311_empty_tables);
    tcase_add_test(tc, test_not_started_and_unknown_formats);
    tcase_add_test(tc, test_random_tables);
    tcase_add_test(tc, test_largest_table_is_one_walk);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    return s;
}
