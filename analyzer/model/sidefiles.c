/*
 * sidefiles.c - warning about a trace copied without its -wal or .ring
 * (sidefiles.h says which checks and why).
 */
#include "model/sidefiles.h"

#include "cli.h"
#include "cutrace/format.h"
#include "model/trace.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool is_db_name(const char *name)
{
    size_t len = strlen(name);
    return len > 3 && strcmp(name + len - 3, ".db") == 0;
}

/* Whether path+suffix exists; a name that cannot be checked counts as
 * there: no warning on a guess. */
static bool exists(const char *path, const char *suffix)
{
    char *name = xasprintf("%s%s", path, suffix);
    struct stat st;
    bool there = lstat(name, &st) == 0 || errno != ENOENT;
    free(name);
    return there;
}

#define LOOK 64 /* slots searched for a call (stack records have no seq) */

/* What a ring's slots around its tail tell of the calls committed. */
struct ring_view {
    uint64_t committed; /* seq of the last call committed, 0: not told */
    uint64_t pending;   /* seq of the first call not committed, 0: none */
};

/* The seq of the call ticket holds in the state `turn_for` expects, 0 if
 * the slot holds something else (another ticket's record, a stack record). */
static uint64_t slot_seq(int fd, const struct ct_ring_header *h, uint64_t ticket, uint64_t turn)
{
    struct ct_slot slot;
    off_t at = CT_RING_HEADER_BYTES + (off_t)((ticket & (h->capacity - 1)) * sizeof(slot));
    if (pread(fd, &slot, sizeof(slot), at) != (ssize_t)sizeof(slot) || slot.turn != turn)
        return 0;
    return slot.rec.seq;
}

/*
 * The writer hands a slot back after committing its record (turn = ticket
 * + capacity, preload/core/ring.c), so the slots of the tickets just below
 * the header's tail still hold the last records committed, unless newer
 * ones took them (a full ring); the slots from the tail on hold the
 * records not committed (turn = ticket + 1). A foreign or damaged ring
 * tells nothing here: folding reports it.
 */
static struct ring_view read_ring(const char *ring_path)
{
    struct ring_view v = {0};
    struct ct_ring_header h;
    int fd = open(ring_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return v;
    if (pread(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h) &&
        memcmp(h.magic, CT_RING_MAGIC, sizeof(h.magic)) == 0 &&
        h.slot_size == sizeof(struct ct_slot) && h.capacity > 0 &&
        (h.capacity & (h.capacity - 1)) == 0 && h.head >= h.tail) {
        for (uint64_t k = 0; k < LOOK && k < h.tail && k < h.capacity && !v.committed; k++) {
            uint64_t ticket = h.tail - 1 - k;
            v.committed = slot_seq(fd, &h, ticket, ticket + h.capacity);
        }
        for (uint64_t t = h.tail; t < h.head && t < h.tail + LOOK && !v.pending; t++)
            v.pending = slot_seq(fd, &h, t, t + 1);
    }
    close(fd);
    return v;
}

/* What the main file's meta says, read without the -wal that is missing
 * anyway; *readable false when it cannot be read (a main file caught
 * halfway through a checkpoint is inconsistent without its -wal). */
struct main_file {
    bool readable, running, crash_buffer;
    int64_t max_seq; /* of its events, 0 without */
};

static bool meta_text(sqlite3 *db, const char *key, char **value)
{
    bool found = false, is_integer = false;
    int64_t integer = 0;
    *value = NULL;
    return trace_meta_get(db, key, &found, value, &integer, &is_integer) == SQLITE_OK;
}

static struct main_file read_main_file(const char *db_path, bool alone)
{
    struct main_file f = {0};
    sqlite3 *db = NULL;
    if ((alone ? trace_sqlite_open_main_file(db_path, &db)
               : trace_sqlite_open_readonly(db_path, &db)) == SQLITE_OK) {
        char *state = NULL, *ring = NULL;
        f.readable = meta_text(db, "end_state", &state) && meta_text(db, "crash_buffer", &ring);
        sqlite3_stmt *stmt = NULL;
        if (f.readable &&
            sqlite3_prepare_v2(db, "SELECT max(seq) FROM events", -1, &stmt, NULL) == SQLITE_OK &&
            sqlite3_step(stmt) == SQLITE_ROW)
            f.max_seq = sqlite3_column_int64(stmt, 0);
        else
            f.readable = false;
        sqlite3_finalize(stmt);
        f.running = state && strcmp(state, "running") == 0;
        f.crash_buffer = ring != NULL;
        free(state);
        free(ring);
    }
    sqlite3_close(db);
    return f;
}

static void check(const char *db_path)
{
    bool has_wal = exists(db_path, "-wal"), wal_mode = trace_file_in_wal_mode(db_path);
    char *ring = xasprintf("%.*s.ring", (int)(strlen(db_path) - 3), db_path);
    bool has_ring = exists(ring, "");
    const char *missing = NULL;
    if (has_ring) {
        /* Without its -wal, the .db lacks calls the ring says were
         * committed (or stops well before the first it holds), or it is
         * damaged: a checkpoint was under way when the process died. */
        struct main_file f =
            !has_wal && wal_mode ? read_main_file(db_path, true) : (struct main_file){0};
        struct ring_view v = !has_wal && wal_mode ? read_ring(ring) : (struct ring_view){0};
        uint64_t last = (uint64_t)(f.max_seq > 0 ? f.max_seq : 0);
        bool behind = v.committed ? last < v.committed : v.pending > last + LOOK;
        if (!has_wal && wal_mode && (!f.readable || (f.running && behind)))
            missing = "-wal file is";
    } else if (wal_mode || has_wal) {
        struct main_file f = read_main_file(db_path, !has_wal);
        if (f.readable && f.running && f.crash_buffer)
            missing = wal_mode && !has_wal ? "-wal and .ring files are" : ".ring file is";
    }
    free(ring);
    if (missing)
        cli_error(db_path,
                  "warning: its process did not end cleanly and its %s missing: the calls it "
                  "recorded last are not here (copy a run's directory with its *.db-wal and "
                  "*.ring files, or use cutrace pack)",
                  missing);
}

void sidefiles_warn(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return;
    if (S_ISREG(st.st_mode)) {
        if (is_db_name(path))
            check(path);
        return;
    }
    DIR *d = S_ISDIR(st.st_mode) ? opendir(path) : NULL;
    if (!d)
        return;
    struct dirent *entry;
    while ((entry = readdir(d)) != NULL) {
        if (!is_db_name(entry->d_name))
            continue;
        char *db_path = cli_path_join(path, entry->d_name);
        check(db_path);
        free(db_path);
    }
    closedir(d);
}
