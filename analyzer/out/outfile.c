/*
 * outfile.c - a report's output file, written whole or not at all (outfile.h).
 */
#include "out/outfile.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

/* After write: 0 if every byte reached the file, else -1 with the error said. */
static int finish(const char *path, FILE *out, int written)
{
    bool failed = ferror(out) != 0;
    int closed = fclose(out);
    if (written == -1)
        return -1; /* the writer said why */
    if (written != 0 || failed || closed != 0) {
        cli_error(path, "cannot write: %s", errno ? strerror(errno) : "write error");
        return -1;
    }
    return 0;
}

int out_write_file(const char *path, int (*write)(FILE *out, void *ctx), void *ctx)
{
    struct stat st;
    bool in_place = lstat(path, &st) == 0 && !S_ISREG(st.st_mode);
    const char *slash = strrchr(path, '/');
    int dirlen = slash ? (int)(slash - path + 1) : 0;
    char *tmp = in_place ? NULL
                         : xasprintf("%.*s.%s.tmp-%ld", dirlen, path, slash ? slash + 1 : path,
                                     (long)getpid());
    FILE *out = fopen(in_place ? path : tmp, "w");
    if (!out) {
        cli_error(path, "cannot write: %s", strerror(errno));
        free(tmp);
        return -1;
    }
    errno = 0;
    int status = finish(path, out, write(out, ctx));
    if (status == 0 && tmp && rename(tmp, path) != 0) {
        cli_error(path, "cannot write: %s", strerror(errno));
        status = -1;
    }
    if (status != 0 && tmp)
        unlink(tmp);
    free(tmp);
    return status;
}
