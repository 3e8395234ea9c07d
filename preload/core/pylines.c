/*
 * pylines.c - CPython 3.10 and 3.11+ line tables decoded as the interpreter
 * decodes them (Objects/lnotab_notes.txt, Objects/locations.md and
 * PyCode_Addr2Line() in Objects/codeobject.c).
 *
 * Both formats are walked forward from the table's start, as
 * _PyCode_CheckLineNumber() does from a fresh PyCodeAddressRange: the first
 * range whose end lies past the offset gives the line. Where CPython would
 * read past the table (a varint or a pair cut short), the walk stops and the
 * answer is "no line", which is also what makes a table the tracer cut at
 * CT_PYLINES_MAX safe: the ranges before the cut are decoded exactly as in
 * the whole table, later ones not at all.
 */
#include "cutrace/pylines.h"

#include <stdbool.h>

#include "cutrace/format.h"

/* CPython keeps the running line in a C int: a table whose lines leave that
 * range was not written by the compiler, and stopping there also keeps the
 * sum of a huge hostile table from overflowing. */
#define LINE_MIN (-2147483647LL - 1)
#define LINE_MAX 2147483647LL

/* 3.10: (byte count, signed line delta) pairs. A delta of -128 marks a range
 * with no line and leaves the running line alone; a pair of 0 bytes only
 * moves the line (CPython's NextAddressRange skips empty ranges). */
static int64_t line_310(int64_t line, const uint8_t *t, size_t len, uint64_t offset)
{
    uint64_t end = 0;
    for (size_t i = 0; len - i >= 2; i += 2) {
        int delta = (int8_t)t[i + 1];
        bool no_line = delta == -128;
        if (!no_line) {
            line += delta;
            if (line < LINE_MIN || line > LINE_MAX)
                return 0;
        }
        end += t[i];
        /* An empty range cannot end past the offset unless the one before did. */
        if (offset < end)
            return no_line || line == -1 ? 0 : line;
    }
    return 0;
}

/* The unsigned varint at t[*i, len): 6 bits a byte, least significant first,
 * bit 6 set on all but the last. Like CPython's scan_varint() it does not
 * stop at a byte with bit 7 set, so that garbage decodes as CPython decodes
 * it; unlike it, it stops at the table's end (false) and at a seventh chunk,
 * which CPython would shift past the width of its unsigned int (false). */
static bool read_varint(const uint8_t *t, size_t len, size_t *i, uint32_t *val)
{
    uint32_t v = 0;
    for (unsigned shift = 0; shift <= 30; shift += 6) {
        if (*i >= len)
            return false;
        uint8_t b = t[(*i)++];
        v |= (uint32_t)(b & 63) << shift;
        if (!(b & 64)) {
            *val = v;
            return true;
        }
    }
    return false;
}

/* 3.11+: location entries, each a head byte with bit 7 set (code in bits
 * 6-3, length - 1 in code units in bits 2-0) and the bytes up to the next
 * such byte. Only the head and, for the no-column and long forms, the
 * signed varint that follows it bear on the line; the delta applies to the
 * entry's own range. Code 15 (no location) has no line and moves nothing. */
static int64_t line_311(int64_t line, const uint8_t *t, size_t len, uint64_t offset)
{
    uint64_t end = 0;
    size_t i = 0;
    while (i < len) {
        uint8_t head = t[i];
        unsigned code = (head >> 3) & 15;
        int64_t delta = 0;
        if (code == 13 || code == 14) {
            size_t at = i + 1;
            uint32_t u;
            if (!read_varint(t, len, &at, &u))
                return 0;
            delta = (u & 1) ? -(int64_t)(u >> 1) : (int64_t)(u >> 1);
        } else if (code >= 10 && code <= 12) {
            delta = code - 10;
        }
        line += delta;
        if (line < LINE_MIN || line > LINE_MAX)
            return 0;
        end += ((uint64_t)(head & 7) + 1) * 2;
        if (offset < end)
            return code == 15 || line == -1 ? 0 : line;
        /* CPython finds the next entry by its head bit, not by the entry's
         * size: so do we, so that both agree on any bytes. */
        do
            i++;
        while (i < len && !(t[i] & 128));
    }
    return 0;
}

int64_t ct_pylines_line(unsigned format, int64_t first_line, const uint8_t *table, size_t len,
                        uint64_t offset)
{
    /* An unknown format says nothing about what the offset means either. */
    if (format != CT_PYLINES_310 && format != CT_PYLINES_311)
        return 0;
    if (offset == CT_PYFRAME_VALUE_MASK)
        return first_line;
    if (table == NULL)
        len = 0;
    if (first_line < LINE_MIN || first_line > LINE_MAX)
        return 0;
    if (format == CT_PYLINES_310)
        return line_310(first_line, table, len, offset);
    return line_311(first_line, table, len, offset);
}
