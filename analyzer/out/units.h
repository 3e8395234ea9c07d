/*
 * units.h - how the CLI shows and reads quantities: byte counts in binary
 * units, durations, wall-clock times and CUDA version numbers. Text reports
 * use these and nothing else (no report formats a quantity by itself);
 * JSON and CSV always carry the raw integers instead.
 *
 * The rule for sizes in text (docs/cli.md, "Conventions"): binary units
 * (KiB = 1024 B) always. A quantity said on its own (a peak, an option's
 * value, a site's bytes) is format_bytes: "0 B", "512 B", "1.50 KiB",
 * "8.00 MiB", two decimals from KiB up. A column of memory that is compared
 * down a table or between runs (timeline's live bytes per category, diff's
 * deltas) is format_size: MiB with one decimal below 1 GiB and GiB with two
 * above, so the eye reads one unit down a column; zero is "0".
 */
#ifndef CUTRACE_ANALYZER_UNITS_H
#define CUTRACE_ANALYZER_UNITS_H

#include <stddef.h>
#include <stdint.h>

/* Large enough for every formatter below. */
#define UNITS_BUF 48

/* "0 B", "512 B", "1.50 KiB", "8.00 MiB", "94.00 GiB", up to EiB. Returns buf. */
char *format_bytes(char *buf, size_t size, uint64_t bytes);
/* As format_bytes, with a leading '-' for negative values ("-12.00 MiB"). */
char *format_bytes_signed(char *buf, size_t size, int64_t bytes);

/* "0", "0.5 MiB", "528.0 MiB", "70.50 GiB", "-12.0 MiB" (see the rule above).
 * Returns buf. */
char *format_size(char *buf, size_t size, int64_t bytes);

/*
 * Three significant digits in the largest unit that keeps the value >= 1:
 * "0 ns", "999 ns", "12.3 us", "4.56 ms", "1.23 s", "1234 s". Negative
 * durations (clock steps, damaged traces) keep their sign.
 */
char *format_duration(char *buf, size_t size, int64_t ns);

/* A duration since a reference, as "+1.23 s" (or "-4.00 ms"). */
char *format_offset(char *buf, size_t size, int64_t ns);

/* UTC ISO-8601 of nanoseconds since the epoch, with `decimals` (0-9) digits of
 * the second: "2025-01-05T10:11:12.345Z". */
char *format_wall_time(char *buf, size_t size, int64_t epoch_ns, int decimals);

/* A CUDA version number as major.minor: 12080 -> "12.8", 0 -> "unknown". */
char *format_cuda_version(char *buf, size_t size, int64_t version);

/*
 * Parses a size such as "4096", "512B", "64k", "1.5 GiB", "8MB": a decimal
 * number (fraction allowed), optional blanks, then an optional suffix
 * B, K/KB/KiB, M/MB/MiB, G/GB/GiB, T/TB/TiB, P/PB/PiB, case-insensitive. All
 * suffixes are binary (K = 1024): GPU memory is sized in powers of two, and
 * nvidia-smi's "MiB" and PyTorch's "MB" mean the same. Returns 0 and sets
 * *bytes, or -1 on anything else (including overflow past 2^64-1).
 */
int parse_size(const char *text, uint64_t *bytes);

#endif
