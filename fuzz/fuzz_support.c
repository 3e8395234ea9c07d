/*
 * fuzz_support.c - scratch directory and in-process command runs for the
 * libFuzzer targets (see fuzz_support.h).
 */
#include "fuzz_support.h"

#include <assert.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char scratch[PATH_MAX];

static void remove_scratch(void)
{
    if (!scratch[0])
        return;
    fuzz_clean();
    rmdir(scratch);
}

const char *fuzz_setup(void)
{
    if (scratch[0])
        return scratch;
    const char *tmp = getenv("TMPDIR");
    snprintf(scratch, sizeof(scratch), "%s/cutrace-fuzz-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(scratch)) {
        perror("fuzz: mkdtemp");
        abort();
    }
    atexit(remove_scratch);
    /* Reports go nowhere; libFuzzer's -close_fd_mask hides their stderr. */
    int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null < 0 || dup2(null, STDOUT_FILENO) < 0) {
        perror("fuzz: /dev/null");
        abort();
    }
    close(null);
    return scratch;
}

void fuzz_clean(void)
{
    DIR *d = opendir(scratch);
    if (!d)
        return;
    struct dirent *entry;
    while ((entry = readdir(d)) != NULL) {
        if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0)
            continue;
        unlinkat(dirfd(d), entry->d_name, 0);
    }
    closedir(d);
}

const char *fuzz_path(const char *name)
{
    static char path[PATH_MAX + 256];
    snprintf(path, sizeof(path), "%s/%s", scratch, name);
    return path;
}

void fuzz_write(const char *name, const uint8_t *data, size_t size)
{
    int fd = open(fuzz_path(name), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        perror("fuzz: write input");
        abort();
    }
    size_t done = 0;
    while (done < size) {
        ssize_t n = write(fd, data + done, size - done);
        if (n <= 0) {
            perror("fuzz: write input");
            abort();
        }
        done += (size_t)n;
    }
    close(fd);
}

int fuzz_run(int (*command)(int, char **), const char *name, const char *path, int json)
{
    /* Writable copies: getopt may permute argv. */
    char arg0[32], flag[] = "--json", file[PATH_MAX + 256];
    snprintf(arg0, sizeof(arg0), "%s", name);
    snprintf(file, sizeof(file), "%s", path);
    char *argv[] = {arg0, json ? flag : file, json ? file : NULL, NULL};
    int argc = json ? 3 : 2;
    int status = command(argc, argv);
    fflush(stdout);
    assert(status >= 0 && status <= 2);
    return status;
}

int fuzz_run_args(int (*command)(int, char **), const char *const *args)
{
    /* Writable copies: getopt may permute argv. */
    char copies[16][PATH_MAX + 256];
    char *argv[17];
    int argc = 0;
    for (; args[argc] && argc < 16; argc++) {
        snprintf(copies[argc], sizeof(copies[argc]), "%s", args[argc]);
        argv[argc] = copies[argc];
    }
    argv[argc] = NULL;
    int status = command(argc, argv);
    fflush(stdout);
    assert(status >= 0 && status <= 2);
    return status;
}
