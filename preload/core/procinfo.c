/*
 * procinfo.c - host, command line and identity of the traced process.
 *
 * The command line is stored shell-quoted so that a user can paste it back
 * to rerun a rank exactly, after redaction (redact.h: --api-key X loses X);
 * the boot id names the host's monotonic clock
 * domain, which is what lets the analyzer put processes on one timeline.
 */
#include "procinfo.h"

#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "redact.h"

size_t ct_procinfo_read(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    size_t used = 0;
    while (used < cap) {
        ssize_t n = read(fd, buf + used, cap - used);
        if (n <= 0)
            break;
        used += (size_t)n;
    }
    close(fd);
    return used;
}

static bool needs_quotes(const char *arg, size_t len)
{
    if (len == 0)
        return true;
    for (size_t i = 0; i < len; i++) {
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%",
                    arg[i]))
            return true;
    }
    return false;
}

char *ct_quote_argv(const char *args, size_t len)
{
    /* Worst case every byte is a quote, which becomes '\'' (4 bytes), plus separators. */
    char *out = malloc(len * 4 + 3 * (len + 1) + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    size_t i = 0;
    while (i < len) {
        const char *arg = args + i;
        size_t alen = strnlen(arg, len - i);
        if (o)
            out[o++] = ' ';
        if (!needs_quotes(arg, alen)) {
            memcpy(out + o, arg, alen);
            o += alen;
        } else {
            out[o++] = '\'';
            for (size_t k = 0; k < alen; k++) {
                if (arg[k] == '\'') {
                    memcpy(out + o, "'\\''", 4);
                    o += 4;
                } else {
                    out[o++] = arg[k];
                }
            }
            out[o++] = '\'';
        }
        i += alen + 1;
    }
    out[o] = '\0';
    return out;
}

void ct_procinfo_boot_id(char *out, size_t cap)
{
    size_t n = ct_procinfo_read("/proc/sys/kernel/random/boot_id", out, cap - 1);
    while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == '\0'))
        n--;
    out[n] = '\0';
}

void ct_procinfo_collect(struct ct_process_info *info)
{
    info->pid = getpid();
    info->ppid = getppid();
    info->uid = getuid();
    if (gethostname(info->host, sizeof info->host - 1) != 0)
        strcpy(info->host, "unknown");
    info->host[sizeof info->host - 1] = '\0';

    ct_procinfo_boot_id(info->boot_id, sizeof info->boot_id);

    ssize_t e = readlink("/proc/self/exe", info->exe, sizeof info->exe - 1);
    info->exe[e > 0 ? e : 0] = '\0';

    info->cmdline = ct_procinfo_cmdline("/proc/self/cmdline");
}

char *ct_procinfo_cmdline(const char *path)
{
    size_t cap = 1 << 16;
    char *raw = malloc(cap);
    if (!raw)
        return NULL;
    size_t len = ct_procinfo_read(path, raw, cap);
    size_t safe_len;
    char *safe = ct_redact_argv(raw, len, &safe_len);
    free(raw);
    /* Without memory to redact, no command line rather than an unredacted one. */
    char *line = safe ? ct_quote_argv(safe, safe_len) : NULL;
    free(safe);
    return line;
}

void ct_procinfo_free(struct ct_process_info *info)
{
    free(info->cmdline);
    info->cmdline = NULL;
}
