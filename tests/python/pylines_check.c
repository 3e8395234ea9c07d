/*
 * pylines_check.c - preload/core/pylines.c against a real interpreter: reads
 * what tests/python/pylines_dump.py printed (PyCode_Addr2Line() for every
 * instruction offset of thousands of code objects) and decodes the same
 * tables, offsets and cut tables with ct_pylines_line().
 *
 * Usage: pylines_check [DUMP] (default: standard input). Exit status 0 when
 * every answer agrees, 1 on any mismatch, 2 on an unreadable dump.
 *
 * Besides the interpreter's own answers (whole tables, "F", and tables cut
 * at an entry boundary, "P", which CPython decodes itself), every whole
 * table is also cut at arbitrary bytes here, mid-entry and mid-varint
 * included, and at CT_PYLINES_MAX as the tracer cuts it: each answer of a
 * cut table must be the whole table's answer or 0, and a longer cut must
 * keep every line a shorter one gave.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cutrace/format.h"
#include "cutrace/pylines.h"

#define EXTRA        3       /* offsets past the bytecode's end, as in pylines_dump.py */
#define MAX_REPORTED 20      /* mismatches printed in full */
#define CUT_BUDGET   1000000 /* table bytes walked per code object for its cuts */
#define MAX_CUTS     32

struct counts {
    uint64_t whole_codes, whole_offsets;
    uint64_t cpython_cuts, cpython_cut_offsets;
    uint64_t own_cuts, own_cut_offsets;
    uint64_t nonzero, mismatches;
};

static struct counts n;
static unsigned format;

static void mismatch(const char *what, int64_t first, size_t len, size_t cut, uint64_t offset,
                     int64_t want, int64_t got)
{
    n.mismatches++;
    if (n.mismatches <= MAX_REPORTED)
        fprintf(stderr,
                "MISMATCH %s: first line %" PRId64 ", table %zu bytes cut at %zu, offset %" PRIu64
                ": want %" PRId64 ", got %" PRId64 "\n",
                what, first, len, cut, offset, want, got);
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* Cheap deterministic choice of cut points: the same every run. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

/* Cuts of a whole table at bytes this program picks. `have` keeps, per
 * offset, the line the previous (shorter) cut gave, to see that a longer
 * cut never loses one. */
static void check_own_cuts(int64_t first, const uint8_t *t, size_t len, const int64_t *want,
                           size_t noff, int64_t *have)
{
    size_t cuts[MAX_CUTS + 4];
    size_t ncuts = 0;
    uint64_t per_cut = (uint64_t)noff * (len ? len : 1);
    size_t room = per_cut ? (size_t)(CUT_BUDGET / per_cut) : MAX_CUTS;
    if (room < 1)
        room = 1;
    if (room > MAX_CUTS)
        room = MAX_CUTS;
    if (len + 1 <= room) {
        for (size_t p = 0; p <= len; p++)
            cuts[ncuts++] = p;
    } else {
        /* Where the tracer cuts first, then the last byte (mid-entry or
         * mid-pair, at the very end), then anywhere. */
        if (len > CT_PYLINES_MAX)
            cuts[ncuts++] = CT_PYLINES_MAX;
        if (ncuts < room)
            cuts[ncuts++] = len - 1;
        while (ncuts < room)
            cuts[ncuts++] = (size_t)(rng() % len);
    }
    qsort(cuts, ncuts, sizeof cuts[0], cmp_size);
    for (size_t k = 0; k < noff; k++)
        have[k] = 0;
    for (size_t c = 0; c < ncuts; c++) {
        if (c > 0 && cuts[c] == cuts[c - 1])
            continue;
        n.own_cuts++;
        for (size_t k = 0; k < noff; k++) {
            uint64_t off = 2 * (uint64_t)k;
            int64_t got = ct_pylines_line(format, first, t, cuts[c], off);
            int64_t w = want[k] == -1 ? 0 : want[k];
            n.own_cut_offsets++;
            if (got != 0 && got != w)
                mismatch("cut table, wrong line", first, len, cuts[c], off, w, got);
            else if (have[k] != 0 && got == 0)
                mismatch("longer cut lost a line", first, len, cuts[c], off, have[k], got);
            have[k] = got;
        }
    }
}

/* One F or P record: "<first> <neg> <nbytes> <hex|-> <line>*<count>,..." */
static bool check_record(char kind, char *rest)
{
    static uint8_t *table;
    static int64_t *want, *have;
    static size_t table_cap, want_cap;
    char *save = NULL;
    char *f_first = strtok_r(rest, " \n", &save);
    char *f_neg = strtok_r(NULL, " \n", &save);
    char *f_nbytes = strtok_r(NULL, " \n", &save);
    char *f_hex = strtok_r(NULL, " \n", &save);
    char *f_runs = strtok_r(NULL, " \n", &save);
    if (!f_runs)
        return false;
    int64_t first = strtoll(f_first, NULL, 10);
    int64_t neg = strtoll(f_neg, NULL, 10);
    size_t nbytes = strtoull(f_nbytes, NULL, 10);
    size_t len = strcmp(f_hex, "-") == 0 ? 0 : strlen(f_hex) / 2;
    if (len > table_cap) {
        table_cap = len * 2;
        table = realloc(table, table_cap);
    }
    for (size_t i = 0; i < len; i++) {
        int hi = hexval(f_hex[2 * i]), lo = hexval(f_hex[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return false;
        table[i] = (uint8_t)(hi << 4 | lo);
    }
    size_t noff = nbytes / 2 + EXTRA;
    if (noff > want_cap) {
        want_cap = noff * 2;
        want = realloc(want, want_cap * sizeof *want);
        have = realloc(have, want_cap * sizeof *have);
    }
    size_t k = 0;
    for (char *run = strtok_r(f_runs, ",", &save); run; run = strtok_r(NULL, ",", &save)) {
        char *star = strchr(run, '*');
        if (!star)
            return false;
        int64_t line = strtoll(run, NULL, 10);
        size_t count = strtoull(star + 1, NULL, 10);
        if (count > noff - k)
            return false;
        while (count--)
            want[k++] = line;
    }
    if (k != noff)
        return false;

    const char *what = kind == 'F' ? "whole table" : "table cut by CPython";
    for (k = 0; k < noff; k++) {
        uint64_t off = 2 * (uint64_t)k;
        int64_t got = ct_pylines_line(format, first, table, len, off);
        int64_t w = want[k] == -1 ? 0 : want[k];
        if (got != w)
            mismatch(what, first, len, len, off, w, got);
        n.nonzero += kind == 'F' && w != 0;
    }
    int64_t got = ct_pylines_line(format, first, table, len, CT_PYFRAME_VALUE_MASK);
    if (got != (neg == -1 ? 0 : neg))
        mismatch("not started", first, len, len, CT_PYFRAME_VALUE_MASK, neg, got);
    if (kind == 'F') {
        n.whole_codes++;
        n.whole_offsets += noff;
        check_own_cuts(first, table, len, want, noff, have);
    } else {
        n.cpython_cuts++;
        n.cpython_cut_offsets += noff;
    }
    return true;
}

int main(int argc, char **argv)
{
    FILE *in = argc > 1 ? fopen(argv[1], "r") : stdin;
    if (!in) {
        perror(argv[1]);
        return 2;
    }
    char *line = NULL, version[32] = "?", stats[512] = "";
    size_t cap = 0;
    unsigned long lineno = 0;
    while (getline(&line, &cap, in) > 0) {
        lineno++;
        bool ok = true;
        if (line[0] == 'V')
            ok = sscanf(line, "V %31s %u", version, &format) == 2;
        else if (line[0] == 'S')
            snprintf(stats, sizeof stats, "%s", line + 2);
        else if ((line[0] == 'F' || line[0] == 'P') && line[1] == ' ')
            ok = format != 0 && check_record(line[0], line + 2);
        else
            ok = false;
        if (!ok) {
            fprintf(stderr, "pylines_check: unreadable dump line %lu\n", lineno);
            return 2;
        }
    }
    free(line);
    if (n.whole_codes == 0 || stats[0] == '\0') {
        fprintf(stderr, "pylines_check: the dump is empty or incomplete\n");
        return 2;
    }
    stats[strcspn(stats, "\n")] = '\0';
    printf("CPython %s (format %u): %" PRIu64 " code objects, %" PRIu64 " offsets (%" PRIu64
           " with a line); %" PRIu64 " tables cut by CPython, %" PRIu64 " offsets; %" PRIu64
           " own cuts, %" PRIu64 " offsets; %" PRIu64 " mismatches\n",
           version, format, n.whole_codes, n.whole_offsets, n.nonzero, n.cpython_cuts,
           n.cpython_cut_offsets, n.own_cuts, n.own_cut_offsets, n.mismatches);
    printf("  dump: %s\n", stats);
    return n.mismatches ? 1 : 0;
}
