/*
 * symcache.c - the names cache beside a trace (symcache.h).
 *
 * The cache is input like any trace: it is opened read-only, without
 * following links, with triggers and untrusted schema off, and a cache
 * that is not what it should be (another owner, another key, damage)
 * reads as empty rather than as an error: the names are then recomputed.
 */
#include "symbols/symcache.h"

#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CACHE_SUFFIX ".symbols"

char *symcache_path(const char *trace_path)
{
    size_t len = strlen(trace_path);
    if (len > 3 && strcmp(trace_path + len - 3, ".db") == 0)
        len -= 3;
    return xasprintf("%.*s" CACHE_SUFFIX, (int)len, trace_path);
}

static void harden(sqlite3 *db)
{
    sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, NULL);
    sqlite3_db_config(db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, NULL);
    sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_TRIGGER, 0, NULL);
}

static int compare_entries(const void *a, const void *b)
{
    const struct symcache_entry *x = a, *y = b;
    return (x->ip > y->ip) - (x->ip < y->ip);
}

/* Whether the cache's meta key is key. */
static bool key_matches(sqlite3 *db, const char *key)
{
    sqlite3_stmt *q = NULL;
    bool ok = sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key = 'key'", -1, &q, NULL) ==
                  SQLITE_OK &&
              sqlite3_step(q) == SQLITE_ROW && sqlite3_column_type(q, 0) == SQLITE_TEXT &&
              strcmp((const char *)sqlite3_column_text(q, 0), key) == 0;
    sqlite3_finalize(q);
    return ok;
}

void symcache_load(struct symcache *c, const char *trace_path, const char *key)
{
    memset(c, 0, sizeof(*c));
    char *path = symcache_path(trace_path);
    struct stat st;
    sqlite3 *db = NULL;
    /* Only ours: names from another user's file would be theirs to choose. */
    if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
        sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOFOLLOW, NULL) !=
            SQLITE_OK) {
        sqlite3_close(db);
        free(path);
        return;
    }
    free(path);
    harden(db);
    sqlite3_stmt *q = NULL;
    size_t cap = 0;
    bool ok = key_matches(db, key) &&
              sqlite3_prepare_v2(db, "SELECT ip, symbol FROM symbols ORDER BY ip", -1, &q, NULL) ==
                  SQLITE_OK;
    int rc = SQLITE_DONE;
    while (ok && (rc = sqlite3_step(q)) == SQLITE_ROW) {
        if (sqlite3_column_type(q, 1) != SQLITE_TEXT)
            continue;
        c->entries = xgrow(c->entries, &cap, c->n + 1, sizeof(*c->entries));
        c->entries[c->n].ip = (uint64_t)sqlite3_column_int64(q, 0);
        c->entries[c->n++].symbol = xstrdup((const char *)sqlite3_column_text(q, 1));
    }
    sqlite3_finalize(q);
    sqlite3_close(db);
    if (rc != SQLITE_DONE)
        symcache_free(c); /* damaged: as if there were none */
    else if (c->n > 1)
        qsort(c->entries, c->n, sizeof(*c->entries), compare_entries); /* ip as unsigned */
}

const char *symcache_lookup(const struct symcache *c, uint64_t ip)
{
    size_t lo = 0, hi = c->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->entries[mid].ip == ip)
            return c->entries[mid].symbol;
        if (c->entries[mid].ip < ip)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

void symcache_free(struct symcache *c)
{
    for (size_t i = 0; i < c->n; i++)
        free(c->entries[i].symbol);
    free(c->entries);
    memset(c, 0, sizeof(*c));
}

static bool write_db(const char *tmp, const char *key, const struct symcache_entry *entries,
                     size_t n)
{
    sqlite3 *db = NULL;
    if (sqlite3_open_v2(tmp, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOFOLLOW, NULL) !=
        SQLITE_OK) {
        sqlite3_close(db);
        return false;
    }
    harden(db);
    sqlite3_stmt *q = NULL, *m = NULL;
    bool ok =
        sqlite3_exec(db,
                     "PRAGMA journal_mode = OFF; BEGIN;"
                     " CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
                     " CREATE TABLE symbols(ip INTEGER PRIMARY KEY, symbol TEXT NOT NULL);",
                     NULL, NULL, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, "INSERT INTO meta VALUES('key', ?)", -1, &m, NULL) == SQLITE_OK &&
        sqlite3_bind_text(m, 1, key, -1, SQLITE_STATIC) == SQLITE_OK &&
        sqlite3_step(m) == SQLITE_DONE &&
        sqlite3_prepare_v2(db, "INSERT OR IGNORE INTO symbols VALUES(?, ?)", -1, &q, NULL) ==
            SQLITE_OK;
    for (size_t i = 0; ok && i < n; i++) {
        sqlite3_bind_int64(q, 1, (int64_t)entries[i].ip);
        sqlite3_bind_text(q, 2, entries[i].symbol, -1, SQLITE_STATIC);
        ok = sqlite3_step(q) == SQLITE_DONE;
        sqlite3_reset(q);
    }
    sqlite3_finalize(q);
    sqlite3_finalize(m);
    ok = ok && sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK;
    return sqlite3_close(db) == SQLITE_OK && ok;
}

void symcache_write(const char *trace_path, const char *key, const struct symcache_entry *entries,
                    size_t n)
{
    char *path = symcache_path(trace_path);
    const char *slash = strrchr(path, '/');
    size_t dir_len = slash ? (size_t)(slash - path + 1) : 0;
    /* Hidden and unique to this process; `cutrace recover` leaves it alone. */
    char *tmp = xasprintf("%.*s.%s.%ld.tmp", (int)dir_len, path, path + dir_len, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd >= 0) {
        close(fd);
        if (!write_db(tmp, key, entries, n) || rename(tmp, path) != 0)
            unlink(tmp);
    }
    free(tmp);
    free(path);
}
