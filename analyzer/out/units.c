/*
 * units.c - formatting and parsing of bytes, durations, times and CUDA
 * versions for text reports and command-line options.
 */
#include "out/units.h"

#include <assert.h>
#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static const char *const byte_units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};

char *format_bytes(char *buf, size_t size, uint64_t bytes)
{
    assert(buf && size > 0);
    if (bytes < 1024) {
        snprintf(buf, size, "%" PRIu64 " B", bytes);
        return buf;
    }
    size_t unit = 0;
    double value = (double)bytes;
    /* Promote early enough that rounding never prints "1024.00 KiB". */
    while (value >= 1023.995 && unit + 1 < sizeof(byte_units) / sizeof(byte_units[0])) {
        value /= 1024.0;
        unit++;
    }
    snprintf(buf, size, "%.2f %s", value, byte_units[unit]);
    return buf;
}

char *format_bytes_signed(char *buf, size_t size, int64_t bytes)
{
    assert(buf && size > 1);
    if (bytes >= 0)
        return format_bytes(buf, size, (uint64_t)bytes);
    buf[0] = '-';
    /* Negate through unsigned arithmetic: -INT64_MIN does not fit int64_t. */
    format_bytes(buf + 1, size - 1, 0 - (uint64_t)bytes);
    return buf;
}

char *format_size(char *buf, size_t size, int64_t bytes)
{
    assert(buf && size > 0);
    double value = (double)bytes;
    if (bytes == 0)
        snprintf(buf, size, "0");
    else if (value > -1073741824.0 && value < 1073741824.0)
        snprintf(buf, size, "%.1f MiB", value / 1048576.0);
    else
        snprintf(buf, size, "%.2f GiB", value / 1073741824.0);
    return buf;
}

char *format_duration(char *buf, size_t size, int64_t ns)
{
    assert(buf && size > 1);
    const char *sign = "";
    uint64_t magnitude = (uint64_t)ns;
    if (ns < 0) {
        sign = "-";
        magnitude = 0 - (uint64_t)ns;
    }
    if (magnitude < 1000) {
        snprintf(buf, size, "%s%" PRIu64 " ns", sign, magnitude);
        return buf;
    }
    static const struct {
        double scale;
        const char *name;
    } units[] = {{1e3, "us"}, {1e6, "ms"}, {1e9, "s"}};
    size_t unit = 0;
    /* Move up while the value would print as 1000 or more in this unit. */
    while (unit + 1 < sizeof(units) / sizeof(units[0]) &&
           (double)magnitude / units[unit].scale >= 999.5)
        unit++;
    double value = (double)magnitude / units[unit].scale;
    if (value < 9.995)
        snprintf(buf, size, "%s%.2f %s", sign, value, units[unit].name);
    else if (value < 99.95)
        snprintf(buf, size, "%s%.1f %s", sign, value, units[unit].name);
    else
        snprintf(buf, size, "%s%.0f %s", sign, value, units[unit].name);
    return buf;
}

char *format_offset(char *buf, size_t size, int64_t ns)
{
    assert(buf && size > 2);
    if (ns < 0)
        return format_duration(buf, size, ns);
    buf[0] = '+';
    format_duration(buf + 1, size - 1, ns);
    return buf;
}

char *format_wall_time(char *buf, size_t size, int64_t epoch_ns, int decimals)
{
    assert(buf && size > 0 && decimals >= 0 && decimals <= 9);
    /* Floor division so that times before 1970 still print a valid date. */
    int64_t seconds = epoch_ns / 1000000000;
    int64_t fraction = epoch_ns % 1000000000;
    if (fraction < 0) {
        fraction += 1000000000;
        seconds -= 1;
    }
    time_t t = (time_t)seconds;
    struct tm tm;
    if (!gmtime_r(&t, &tm)) {
        snprintf(buf, size, "%" PRId64 " ns", epoch_ns);
        return buf;
    }
    char date[40];
    strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &tm);
    if (decimals == 0) {
        snprintf(buf, size, "%sZ", date);
        return buf;
    }
    int64_t divisor = 1;
    for (int i = decimals; i < 9; i++)
        divisor *= 10;
    snprintf(buf, size, "%s.%0*" PRId64 "Z", date, decimals, fraction / divisor);
    return buf;
}

char *format_cuda_version(char *buf, size_t size, int64_t version)
{
    assert(buf && size > 0);
    /* CUDA encodes 1000 * major + 10 * minor (12080 is 12.8). */
    if (version <= 0)
        snprintf(buf, size, "unknown");
    else
        snprintf(buf, size, "%" PRId64 ".%" PRId64, version / 1000, (version % 1000) / 10);
    return buf;
}

int parse_size(const char *text, uint64_t *bytes)
{
    assert(bytes);
    if (!text)
        return -1;
    const char *p = text;
    while (isblank((unsigned char)*p))
        p++;
    if (!isdigit((unsigned char)*p) && *p != '.')
        return -1;

    /* Parse integer and fraction digits separately: strtod would accept
     * hex, infinities and exponents, which are not sizes. */
    uint64_t whole = 0;
    int digits = 0;
    while (isdigit((unsigned char)*p)) {
        unsigned digit = (unsigned)(*p - '0');
        if (whole > (UINT64_MAX - digit) / 10)
            return -1;
        whole = whole * 10 + digit;
        p++;
        digits++;
    }
    double fraction = 0.0, place = 0.1;
    if (*p == '.') {
        p++;
        while (isdigit((unsigned char)*p)) {
            fraction += (*p - '0') * place;
            place /= 10;
            p++;
            digits++;
        }
    }
    if (digits == 0)
        return -1;
    while (isblank((unsigned char)*p))
        p++;

    static const struct {
        const char *suffix;
        unsigned shift;
    } suffixes[] = {
        {"", 0},    {"b", 0},    {"k", 10}, {"kb", 10}, {"kib", 10}, {"m", 20},
        {"mb", 20}, {"mib", 20}, {"g", 30}, {"gb", 30}, {"gib", 30}, {"t", 40},
        {"tb", 40}, {"tib", 40}, {"p", 50}, {"pb", 50}, {"pib", 50},
    };
    size_t len = strlen(p);
    while (len > 0 && isblank((unsigned char)p[len - 1]))
        len--;
    for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
        if (strlen(suffixes[i].suffix) != len || strncasecmp(p, suffixes[i].suffix, len) != 0)
            continue;
        unsigned shift = suffixes[i].shift;
        if (shift > 0 && whole > (UINT64_MAX >> shift))
            return -1;
        uint64_t result = whole << shift;
        double extra = floor(fraction * (double)((uint64_t)1 << shift) + 0.5);
        if (extra > 0) {
            if ((double)(UINT64_MAX - result) < extra)
                return -1;
            result += (uint64_t)extra;
        }
        *bytes = result;
        return 0;
    }
    return -1;
}
