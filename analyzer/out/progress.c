/*
 * progress.c - the progress line of a long load (progress.h).
 */
#include "out/progress.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_AFTER_MS 2000
#define EVERY_MS         250 /* at most four updates a second */

static struct {
    bool active; /* between begin and end, on a terminal */
    bool shown;  /* a line is on the screen */
    int64_t start_ms, last_ms, after_ms;
    size_t width; /* of the line shown, to clear it */
} state;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t after_ms(void)
{
    const char *env = getenv("CUTRACE_PROGRESS_AFTER_MS");
    if (!env || !*env)
        return DEFAULT_AFTER_MS;
    char *end;
    long long v = strtoll(env, &end, 10);
    return *end == '\0' && v >= 0 ? (int64_t)v : DEFAULT_AFTER_MS;
}

void progress_begin(void)
{
    progress_end();
    memset(&state, 0, sizeof(state));
    state.active = isatty(STDERR_FILENO) == 1;
    if (!state.active)
        return;
    state.after_ms = after_ms();
    state.start_ms = now_ms();
}

/* 1234 -> "1234", 1234567 -> "1.2M". */
static void format_count(char *buf, size_t size, int64_t n)
{
    if (n >= 1000000000)
        snprintf(buf, size, "%.1fG", (double)n / 1e9);
    else if (n >= 1000000)
        snprintf(buf, size, "%.1fM", (double)n / 1e6);
    else if (n >= 10000)
        snprintf(buf, size, "%.0fk", (double)n / 1e3);
    else
        snprintf(buf, size, "%" PRId64, n);
}

void progress_update(size_t traces_done, size_t traces, int64_t events)
{
    if (!state.active)
        return;
    int64_t now = now_ms();
    if (now - state.start_ms < state.after_ms || (state.shown && now - state.last_ms < EVERY_MS))
        return;
    char count[32], line[128];
    format_count(count, sizeof(count), events);
    int n = snprintf(line, sizeof(line), "cutrace: loading %zu/%zu trace%s, %s events", traces_done,
                     traces, traces == 1 ? "" : "s", count);
    if (n < 0)
        return;
    size_t len = (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1;
    /* Pad over a longer line shown before. */
    fprintf(stderr, "\r%s%*s", line, state.width > len ? (int)(state.width - len) : 0, "");
    fflush(stderr);
    if (len > state.width)
        state.width = len;
    state.shown = true;
    state.last_ms = now;
}

void progress_end(void)
{
    if (state.shown) {
        fprintf(stderr, "\r%*s\r", (int)state.width, "");
        fflush(stderr);
    }
    state.shown = false;
    state.active = false;
}
