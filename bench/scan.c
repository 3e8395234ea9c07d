/*
 * scan.c - the analyzer benchmark's baseline: every events row of a run read
 * by plain SQLite, every column of it, and nothing done with it. What a
 * report costs beyond reading its input is its time over this one's.
 *
 *   scan DIR     prints the rows read
 *
 * Each DIR/\*.db is opened read-only and immutable, as the analyzer opens a
 * finished trace.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

/* The columns, as the analyzer's loader reads them: integers, then the handle blob. */
#define HANDLE_COLUMN 24

static int scan_file(const char *path, uint64_t *rows, uint64_t *sum)
{
    char uri[4200];
    snprintf(uri, sizeof uri, "file:%s?immutable=1", path);
    sqlite3 *db;
    sqlite3_stmt *s = NULL;
    /* No mutex: as the analyzer opens its traces. */
    int rc = sqlite3_open_v2(uri, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX,
                             NULL);
    if (rc == SQLITE_OK)
        rc =
            sqlite3_prepare_v2(db,
                               "SELECT seq, parent_seq, t_ns, dur_ns, wait_ns, tid, api_id, device,"
                               " result, depth, ptr, size, flags, stream, arg0, arg1, arg2, arg3,"
                               " arg4, arg5, arg6, arg7, caller, stack_id, handle, ret_seq"
                               " FROM events",
                               -1, &s, NULL);
    while (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        for (int i = 0; i < HANDLE_COLUMN; i++)
            *sum += (uint64_t)sqlite3_column_int64(s, i);
        const uint8_t *h = sqlite3_column_blob(s, HANDLE_COLUMN);
        *sum += h ? h[0] + (uint64_t)sqlite3_column_bytes(s, HANDLE_COLUMN) : 0;
        *sum += (uint64_t)sqlite3_column_int64(s, HANDLE_COLUMN + 1);
        ++*rows;
        rc = SQLITE_OK;
    }
    if (rc != SQLITE_DONE)
        fprintf(stderr, "scan: %s: %s\n", path, sqlite3_errmsg(db));
    sqlite3_finalize(s);
    sqlite3_close(db);
    return rc == SQLITE_DONE ? 0 : 1;
}

static int is_trace(const struct dirent *e)
{
    size_t n = strlen(e->d_name);
    return n > 3 && strcmp(e->d_name + n - 3, ".db") == 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fputs("usage: scan DIR\n", stderr);
        return 2;
    }
    struct dirent **names;
    int n = scandir(argv[1], &names, is_trace, alphasort);
    if (n <= 0) {
        fprintf(stderr, "scan: %s: no traces\n", argv[1]);
        return 1;
    }
    uint64_t rows = 0, sum = 0;
    int failed = 0;
    for (int i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", argv[1], names[i]->d_name);
        failed |= scan_file(path, &rows, &sum);
        free(names[i]);
    }
    free(names);
    /* The sum keeps the reads from being optimised away. */
    printf("%llu rows (checksum %llx)\n", (unsigned long long)rows, (unsigned long long)sum);
    return failed;
}
