/*
 * leftovers.c - finds and cleans what a process killed during trace creation
 * leaves (see leftovers.h for the states and the rules).
 *
 * Every decision to remove or change a file rests on owner_judge() saying
 * its process is gone; names and headers are read as untrusted input and
 * anything that does not look like cutrace's own is left alone. Files are
 * removed with unlink() only after lstat() shows a regular file, so a
 * directory or device that happens to have such a name is never touched.
 */
#include "recover/leftovers.h"
#include "model/trace.h"

#include "cli.h"
#include "recover/owner.h"

#include "cutrace/format.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BUSY_TIMEOUT_MS 2000

static const char *const db_tmp_side_files[] = {"-wal", "-shm", "-journal"};

static bool has_suffix(const char *name, const char *suffix)
{
    size_t len = strlen(name), slen = strlen(suffix);
    return len > slen && strcmp(name + len - slen, suffix) == 0;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* ---- names ---- */

/* Decimal digits only (no sign, no space), at most max; false otherwise. */
static bool parse_decimal(const char *s, size_t len, uint64_t max, uint64_t *out)
{
    if (len == 0 || len > 20)
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        if (__builtin_mul_overflow(v, 10, &v) ||
            __builtin_add_overflow(v, (uint64_t)(s[i] - '0'), &v))
            return false;
    }
    if (v > max)
        return false;
    *out = v;
    return true;
}

/* "<pid>-<start_wall_ns>" or "<pid>-<start_wall_ns>-<N>" (N from 1 to 99, a
 * taken name moved on), as tracefile.c writes after the host. */
static bool parse_numbers(const char *s, struct owner *o)
{
    const char *dash = strchr(s, '-');
    uint64_t pid, wall, attempt;
    if (!dash || !parse_decimal(s, (size_t)(dash - s), INT32_MAX, &pid) || pid == 0)
        return false;
    const char *wall_text = dash + 1;
    const char *second = strchr(wall_text, '-');
    size_t wall_len = second ? (size_t)(second - wall_text) : strlen(wall_text);
    if (!parse_decimal(wall_text, wall_len, UINT64_MAX, &wall))
        return false;
    if (second && (!parse_decimal(second + 1, strlen(second + 1), 99, &attempt) || attempt == 0))
        return false;
    o->pid = (int64_t)pid;
    o->start_wall_ns = wall;
    o->start_mono_ns = 0;
    o->boot_id = NULL;
    return true;
}

/*
 * The length of this host's name as tracefile.c puts it in file names
 * ([A-Za-z0-9.-] kept, any other byte '_', at most 99 of them, "host" for
 * an empty name) when base starts with it and a '-'; 0 otherwise.
 */
static size_t this_host_prefix(const char *base)
{
    const char *host = owner_host();
    if (!*host)
        host = "host";
    size_t i = 0;
    for (; host[i] && i < 99; i++) {
        char c = host[i];
        bool kept = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '.';
        if (base[i] != (kept ? c : '_'))
            return 0;
    }
    return base[i] == '-' ? i + 1 : 0;
}

/* Some host's name, then the numbers: a name cutrace may have written. */
static bool looks_like_trace_base(const char *base)
{
    for (const char *dash = strchr(base, '-'); dash; dash = strchr(dash + 1, '-')) {
        struct owner o;
        if (dash > base && parse_numbers(dash + 1, &o))
            return true;
    }
    return false;
}

/*
 * The owner named by base: LEFTOVER_NONE when it is this host's (o filled),
 * LEFTOVER_FOREIGN when another's, and for a name cutrace does not write
 * (left alone, silently) LEFTOVER_NONE with o->pid 0.
 */
static enum leftover_status owner_from_name(const char *base, struct owner *o)
{
    memset(o, 0, sizeof(*o));
    size_t host_len = this_host_prefix(base);
    if (host_len && parse_numbers(base + host_len, o))
        return LEFTOVER_NONE;
    memset(o, 0, sizeof(*o));
    return looks_like_trace_base(base) ? LEFTOVER_FOREIGN : LEFTOVER_NONE;
}

/* base of DIR/.<base><suffix> (malloc'd), or NULL when the name is not one. */
static char *hidden_base(const char *path, const char *suffix)
{
    const char *name = base_name(path);
    size_t len = strlen(name), slen = strlen(suffix);
    if (name[0] != '.' || len <= slen + 1 || strcmp(name + len - slen, suffix) != 0)
        return NULL;
    return xstrndup(name + 1, len - slen - 1);
}

/* ---- results ---- */

static void failed(struct leftover *l, bool read_only, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void failed(struct leftover *l, bool read_only, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(l->error, sizeof(l->error), fmt, ap);
    va_end(ap);
    for (char *c = l->error; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = ' ';
    l->status = LEFTOVER_FAILED;
    l->read_only = read_only;
}

static bool read_only_errno(int err)
{
    return err == EROFS || err == EACCES || err == EPERM;
}

/* Whether the directory of path can take a removal or a new file; else fails l. */
static bool directory_writable(struct leftover *l)
{
    char *dir = xstrndup(l->path, (size_t)(base_name(l->path) - l->path));
    if (!dir[0]) {
        free(dir);
        dir = xstrdup(".");
    }
    bool ok = faccessat(AT_FDCWD, dir, W_OK | X_OK, AT_EACCESS) == 0;
    if (!ok)
        failed(l, read_only_errno(errno), "cannot write to %s (%s)", dir, strerror(errno));
    free(dir);
    return ok;
}

/* Removes path if it is a regular file: 1 removed, 0 not there (or not a
 * regular file: not ours), -1 failed (l says why). */
static int remove_regular(struct leftover *l, const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT)
            return 0;
        failed(l, false, "cannot remove %s: %s", base_name(path), strerror(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode))
        return 0;
    if (unlink(path) != 0) {
        if (errno == ENOENT)
            return 0;
        failed(l, read_only_errno(errno), "cannot remove %s: %s", base_name(path), strerror(errno));
        return -1;
    }
    return 1;
}

/* ---- .<base>.db.tmp ---- */

/* Whether the .db.tmp or any of its side files is there. */
static bool db_tmp_present(const char *path)
{
    struct stat st;
    bool present = lstat(path, &st) == 0;
    for (size_t i = 0; !present && i < sizeof(db_tmp_side_files) / sizeof(db_tmp_side_files[0]);
         i++) {
        char *side = xasprintf("%s%s", path, db_tmp_side_files[i]);
        present = lstat(side, &st) == 0;
        free(side);
    }
    return present;
}

static void clean_db_tmp(struct leftover *l)
{
    l->status = LEFTOVER_NONE;
    if (!db_tmp_present(l->path))
        return;
    char *base = hidden_base(l->path, ".db.tmp");
    assert(base); /* leftovers_find made the path */
    struct owner o;
    l->status = owner_from_name(base, &o);
    free(base);
    if (o.pid == 0)
        return;
    l->pid = o.pid;
    if (owner_judge(&o, &l->why) != OWNER_GONE) {
        l->status = LEFTOVER_LIVE;
        return;
    }
    if (!directory_writable(l))
        return;
    /* Side files first: an interrupted clean-up then still leaves the
     * .db.tmp that names them. */
    size_t used = 0;
    for (size_t i = 0; i < sizeof(db_tmp_side_files) / sizeof(db_tmp_side_files[0]); i++) {
        char *side = xasprintf("%s%s", l->path, db_tmp_side_files[i]);
        int rc = remove_regular(l, side);
        free(side);
        if (rc < 0)
            return;
        if (rc > 0)
            used += (size_t)snprintf(l->side_files + used, sizeof(l->side_files) - used, "%s%s",
                                     used ? ", " : "", db_tmp_side_files[i]);
        assert(used < sizeof(l->side_files));
    }
    int rc = remove_regular(l, l->path);
    if (rc < 0)
        return;
    /* Nothing of ours was there after all (not regular files). */
    l->status = rc > 0 || used > 0 ? LEFTOVER_CLEANED : LEFTOVER_NONE;
}

/* ---- .<base>.ring.tmp ---- */

/* What a formatted header adds to the name: start_mono_ns and the boot id,
 * taken only when the header is the named process's own. */
static void owner_from_header(int fd, struct owner *o, char *boot_id, size_t cap)
{
    struct ct_ring_header h;
    if (pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
        return;
    if (memcmp(h.magic, CT_RING_MAGIC, sizeof(h.magic)) != 0 || h.pid != o->pid ||
        h.start_wall_ns != o->start_wall_ns || !memchr(h.boot_id, '\0', sizeof(h.boot_id)))
        return;
    snprintf(boot_id, cap, "%s", h.boot_id);
    o->start_mono_ns = h.start_mono_ns;
    o->boot_id = boot_id;
}

static void clean_ring_tmp(struct leftover *l)
{
    l->status = LEFTOVER_NONE;
    /* O_NONBLOCK: a FIFO under this name must not hang us. */
    int fd = open(l->path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) {
        /* Not there (FILE.db's, or gone meanwhile), or a link: not ours. */
        if (errno != ENOENT && errno != ELOOP)
            failed(l, false, "cannot open: %s", strerror(errno));
        return;
    }
    char *base = hidden_base(l->path, ".ring.tmp");
    assert(base);
    struct owner o;
    l->status = owner_from_name(base, &o);
    free(base);
    l->pid = o.pid;
    struct stat st;
    char boot_id[sizeof(((struct ct_ring_header *)0)->boot_id)];
    if (o.pid == 0) {
        /* not a name cutrace writes, or another host's: as owner_from_name said */
    } else if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        l->status = LEFTOVER_NONE;
    } else {
        owner_from_header(fd, &o, boot_id, sizeof(boot_id));
        if (owner_judge(&o, &l->why) != OWNER_GONE) {
            l->status = LEFTOVER_LIVE;
        } else if (directory_writable(l)) {
            /* Gone by the process table; the lock must agree (a child that
             * inherited the fd may hold it still). */
            switch (owner_ring_lock(fd)) {
            case OWNER_RING_HELD:
                l->status = LEFTOVER_LIVE;
                l->why = NULL;
                break;
            case OWNER_RING_FAILED:
                failed(l, false, "cannot lock it (%s), so cannot tell whether its process lives",
                       strerror(errno));
                break;
            case OWNER_RING_TAKEN: {
                /* Still the file we locked, and removed under the lock. */
                struct stat now;
                if (lstat(l->path, &now) != 0 || now.st_dev != st.st_dev || now.st_ino != st.st_ino)
                    l->status = LEFTOVER_NONE;
                else if (remove_regular(l, l->path) >= 0)
                    l->status = LEFTOVER_CLEANED;
                break;
            }
            }
        }
    }
    close(fd);
}

/* ---- <base>.db without a ring ---- */

/* Whether meta says the process has not ended (end_state 'running' or none). */
static bool says_running(sqlite3 *db, bool *readable)
{
    char *state;
    bool found, is_integer;
    int64_t integer;
    *readable = trace_meta_get(db, "end_state", &found, &state, &integer, &is_integer) == SQLITE_OK;
    bool running = *readable && (!found || !state || strcmp(state, "running") == 0);
    free(state);
    return running;
}

/* The trace's one process, as the tracer wrote it: false when there is not
 * exactly one row or it cannot be read (then the trace is not judged). */
struct process_row {
    struct owner owner;
    char host[256];
    char boot_id[64];
    bool has_calls;
};

static bool read_process_row(sqlite3 *db, struct process_row *p)
{
    memset(p, 0, sizeof(*p));
    sqlite3_stmt *stmt = NULL;
    if (sqlite3_prepare_v2(db,
                           "SELECT pid, host, boot_id, start_wall_ns, start_mono_ns,"
                           " (SELECT count(*) FROM process), EXISTS (SELECT 1 FROM events)"
                           " FROM process",
                           -1, &stmt, NULL) != SQLITE_OK) {
        sqlite3_finalize(stmt);
        return false;
    }
    bool ok = sqlite3_step(stmt) == SQLITE_ROW && sqlite3_column_int64(stmt, 5) == 1 &&
              sqlite3_column_type(stmt, 0) == SQLITE_INTEGER &&
              sqlite3_column_type(stmt, 1) == SQLITE_TEXT &&
              sqlite3_column_type(stmt, 3) == SQLITE_INTEGER;
    if (ok) {
        int64_t pid = sqlite3_column_int64(stmt, 0);
        ok = pid > 0 && pid <= INT32_MAX;
        p->owner.pid = pid;
        p->owner.start_wall_ns = (uint64_t)sqlite3_column_int64(stmt, 3);
        snprintf(p->host, sizeof(p->host), "%s", (const char *)sqlite3_column_text(stmt, 1));
        /* The boot id only with the monotonic start it qualifies. */
        if (sqlite3_column_type(stmt, 2) == SQLITE_TEXT &&
            sqlite3_column_type(stmt, 4) == SQLITE_INTEGER) {
            snprintf(p->boot_id, sizeof(p->boot_id), "%s",
                     (const char *)sqlite3_column_text(stmt, 2));
            p->owner.start_mono_ns = (uint64_t)sqlite3_column_int64(stmt, 4);
            p->owner.boot_id = p->boot_id;
        }
        p->has_calls = sqlite3_column_int64(stmt, 6) != 0;
    }
    sqlite3_finalize(stmt);
    return ok;
}

static const char note_in_creation[] =
    "killed while its trace was being created, before its first call was recorded";
static const char note_no_ring[] =
    "ended without recording how and left no crash buffer (.ring): records not yet written "
    "when it died are lost";

/* Sets end_state 'killed' and end_note, if the trace still says running. */
static void mark_killed(struct leftover *l, const char *note)
{
    if (!directory_writable(l))
        return;
    if (faccessat(AT_FDCWD, l->path, W_OK, AT_EACCESS) != 0) {
        failed(l, read_only_errno(errno), "cannot write %s (%s)", base_name(l->path),
               strerror(errno));
        return;
    }
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2(l->path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOFOLLOW, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_busy_timeout(db, BUSY_TIMEOUT_MS);
        rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    }
    bool readable = false;
    /* Read again under the write lock: another cutrace may have marked it. */
    if (rc == SQLITE_OK && !says_running(db, &readable)) {
        if (readable)
            l->status = LEFTOVER_NONE;
        else
            failed(l, false, "cannot read its meta table: %s", sqlite3_errmsg(db));
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
        sqlite3_close(db);
        return;
    }
    sqlite3_stmt *stmt = NULL;
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(db,
                                "INSERT OR REPLACE INTO meta(key, value) VALUES"
                                " ('end_state', 'killed'), ('end_note', ?)",
                                -1, &stmt, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(stmt, 1, note, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(stmt) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(db);
    sqlite3_finalize(stmt);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        int code = rc & 0xff;
        failed(l, code == SQLITE_READONLY || code == SQLITE_PERM,
               "cannot mark it ended (end_state killed): %s",
               db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
        sqlite3_close(db);
        return;
    }
    /* As after a fold: the change goes into the .db itself when no reader holds it off. */
    sqlite3_wal_checkpoint_v2(db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
    sqlite3_close(db);
    l->status = LEFTOVER_CLEANED;
    l->end_note = note;
}

static void clean_trace(struct leftover *l)
{
    l->status = LEFTOVER_NONE;
    char *ring = xasprintf("%.*s.ring", (int)(strlen(l->path) - 3), l->path);
    struct stat st;
    bool has_ring = lstat(ring, &st) == 0 || errno != ENOENT;
    free(ring);
    /* A ring says how its process ended once folded; a trace that is not a
     * plain file is the loader's to refuse. */
    if (has_ring || lstat(l->path, &st) != 0 || !S_ISREG(st.st_mode))
        return;

    sqlite3 *db = NULL;
    struct process_row p;
    bool readable = false, judge = false;
    /* As reports read it: a finished trace is left exactly as found. */
    if (trace_sqlite_open_readonly(l->path, &db) == SQLITE_OK) {
        sqlite3_busy_timeout(db, BUSY_TIMEOUT_MS);
        judge = says_running(db, &readable) && read_process_row(db, &p);
    }
    sqlite3_close(db);
    /* Unreadable or not a trace: the report that follows says so. A trace made
     * by recovery from a ring header has no host, and says how it ended. */
    if (!judge || !p.host[0])
        return;
    l->pid = p.owner.pid;
    if (strcmp(p.host, owner_host()) != 0) {
        l->status = LEFTOVER_FOREIGN;
        l->host = xstrdup(p.host);
        return;
    }
    if (owner_judge(&p.owner, &l->why) != OWNER_GONE) {
        l->status = LEFTOVER_LIVE;
        return;
    }
    mark_killed(l, p.has_calls ? note_no_ring : note_in_creation);
}

void leftover_clean(struct leftover *l)
{
    switch (l->kind) {
    case LEFTOVER_DB_TMP:
        clean_db_tmp(l);
        break;
    case LEFTOVER_RING_TMP:
        clean_ring_tmp(l);
        break;
    case LEFTOVER_TRACE:
        clean_trace(l);
        break;
    }
}

/* ---- finding them ---- */

struct found {
    struct leftover *items;
    size_t count, cap;
};

static void add(struct found *f, enum leftover_kind kind, char *path)
{
    f->items = xgrow(f->items, &f->cap, f->count + 1, sizeof(*f->items));
    struct leftover *l = &f->items[f->count++];
    memset(l, 0, sizeof(*l));
    l->kind = kind;
    l->path = path;
}

/* What a directory entry is a leftover of, if anything: *path (malloc'd)
 * names the leftover, the .db.tmp for its side files. */
static bool classify(const char *dir, const char *name, enum leftover_kind *kind, char **path)
{
    if (name[0] == '.') {
        if (has_suffix(name, ".ring.tmp")) {
            *kind = LEFTOVER_RING_TMP;
            *path = cli_path_join(dir, name);
            return true;
        }
        size_t len = strlen(name);
        for (size_t i = 0; i < sizeof(db_tmp_side_files) / sizeof(db_tmp_side_files[0]); i++)
            if (has_suffix(name, db_tmp_side_files[i]))
                len -= strlen(db_tmp_side_files[i]);
        char *main_name = xstrndup(name, len);
        bool db_tmp = has_suffix(main_name, ".db.tmp");
        if (db_tmp) {
            *kind = LEFTOVER_DB_TMP;
            *path = cli_path_join(dir, main_name);
        }
        free(main_name);
        return db_tmp;
    }
    if (has_suffix(name, ".db")) {
        *kind = LEFTOVER_TRACE;
        *path = cli_path_join(dir, name);
        return true;
    }
    return false;
}

static int by_path(const void *a, const void *b)
{
    const struct leftover *x = a, *y = b;
    int c = strcmp(x->path, y->path);
    return c ? c : (int)x->kind - (int)y->kind;
}

int leftovers_find(const char *path, struct leftover **items, size_t *count, char *err,
                   size_t errlen)
{
    struct found f = {0};
    struct stat st;
    bool exists = stat(path, &st) == 0;
    if (exists && S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        if (!d) {
            snprintf(err, errlen, "cannot read directory: %s", strerror(errno));
            *items = NULL;
            *count = 0;
            return -1;
        }
        struct dirent *entry;
        while ((entry = readdir(d)) != NULL) {
            enum leftover_kind kind;
            char *leftover_path;
            if (classify(path, entry->d_name, &kind, &leftover_path))
                add(&f, kind, leftover_path);
        }
        closedir(d);
    } else if (has_suffix(base_name(path), ".db") && base_name(path)[0] != '.') {
        /* FILE.db: its own base's temporaries, and itself. */
        size_t dir_len = (size_t)(base_name(path) - path);
        const char *name = base_name(path);
        int base_len = (int)(strlen(name) - 3);
        add(&f, LEFTOVER_DB_TMP, xasprintf("%.*s.%.*s.db.tmp", (int)dir_len, path, base_len, name));
        add(&f, LEFTOVER_RING_TMP,
            xasprintf("%.*s.%.*s.ring.tmp", (int)dir_len, path, base_len, name));
        if (exists && S_ISREG(st.st_mode))
            add(&f, LEFTOVER_TRACE, xstrdup(path));
    }
    /* One leftover per file: a .db.tmp is found again through its side files. */
    if (f.count > 1)
        qsort(f.items, f.count, sizeof(*f.items), by_path);
    size_t kept = 0;
    for (size_t i = 0; i < f.count; i++) {
        if (kept && f.items[kept - 1].kind == f.items[i].kind &&
            strcmp(f.items[kept - 1].path, f.items[i].path) == 0) {
            free(f.items[i].path);
            continue;
        }
        f.items[kept++] = f.items[i];
    }
    *items = f.items;
    *count = kept;
    return 0;
}

void leftovers_free(struct leftover *items, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        free(items[i].path);
        free(items[i].host);
    }
    free(items);
}
