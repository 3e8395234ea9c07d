/*
 * execfold.c - completes, in a new program image, the trace of the image an
 * exec replaced (see execfold.h for the protocol).
 *
 * The ring is one this library wrote, in a directory of mode 0700, but it is
 * still checked before use: a ring the header says is another process's or
 * another boot's, or a record whose seq the database cannot take, is left to
 * `cutrace recover`, which validates rings as hostile input.
 */
#include "execfold.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "procinfo.h"
#include "cutrace/ring.h"
#include "sigfree.h"
#include "cutrace/stackrec.h"
#include "cutrace/store.h"
#include "tracedir.h"

static bool marker_path(char *out, size_t cap, const char *dir, int64_t pid)
{
    int n = snprintf(out, cap, "%s/.exec-%lld", dir, (long long)pid);
    return n > 0 && (size_t)n < cap;
}

/* A visible file of dir (no '/', no leading '.') with that suffix. */
static bool plain_name(const char *name, const char *suffix)
{
    size_t len = strlen(name), slen = strlen(suffix);
    return len > slen && name[0] != '.' && !strchr(name, '/') &&
           strcmp(name + len - slen, suffix) == 0;
}

int ct_execfold_mark(const char *dir, int64_t pid, const char *ring_path)
{
    char marker[PATH_MAX];
    if (!marker_path(marker, sizeof marker, dir, pid)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    const char *slash = strrchr(ring_path, '/');
    const char *name = slash ? slash + 1 : ring_path;
    if (symlink(name, marker) == 0)
        return 0;
    if (errno != EEXIST)
        return -1;
    /* Left by an earlier process of this pid whose new image was not traced:
     * the ring it named is `cutrace recover`'s to fold. */
    unlink(marker);
    return symlink(name, marker);
}

void ct_execfold_unmark(const char *dir, int64_t pid)
{
    char marker[PATH_MAX];
    if (marker_path(marker, sizeof marker, dir, pid))
        unlink(marker);
}

struct fold {
    const char *dir;
    int64_t pid;
    char marker[PATH_MAX];
    char ring_name[256];
};

struct inserter {
    struct ct_store *store;
    int rc;
};

static void insert_record(const struct ct_record *rec, void *arg)
{
    struct inserter *in = arg;
    struct ct_record copy;
    memcpy(&copy, rec, sizeof copy);
    /* SQLite's integers are signed and seq starts at 1 (ct_store_insert asserts it). */
    bool usable = ct_record_is_aux(&copy) || (copy.seq > 0 && copy.seq <= INT64_MAX);
    if (in->rc == 0 && usable)
        in->rc = ct_store_insert(in->store, &copy);
}

/* A header's text field, NUL-terminated whatever the file holds. */
static void header_text(char *out, size_t cap, const char *field, size_t field_cap)
{
    size_t n = strnlen(field, field_cap < cap - 1 ? field_cap : cap - 1);
    memcpy(out, field, n);
    out[n] = '\0';
}

/*
 * As recovery: the ring's end state replaces "running" (a ring that says
 * nothing belongs to an image that died: "killed"), and a writer that gave up
 * says why and after which seq.
 */
static int note_end(struct ct_store *st, const struct ct_ring_header *h)
{
    char end[sizeof h->end_state + 1];
    header_text(end, sizeof end, h->end_state, sizeof h->end_state);
    const char *state = end[0] && strcmp(end, "running") != 0 ? end : "killed";
    sqlite3 *db = ct_store_sqlite(st);
    sqlite3_stmt *s;
    int rc = sqlite3_prepare_v2(
        db, "UPDATE meta SET value = ? WHERE key = 'end_state' AND value = 'running'", -1, &s,
        NULL);
    if (rc != SQLITE_OK)
        return rc;
    sqlite3_bind_text(s, 1, state, -1, SQLITE_STATIC);
    rc = sqlite3_step(s) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(db);
    sqlite3_finalize(s);
    if (rc == SQLITE_OK && h->writer_error[0]) {
        char why[sizeof h->writer_error + 1];
        header_text(why, sizeof why, h->writer_error, sizeof h->writer_error);
        rc = ct_store_set_meta_text(st, "writer_error", why);
        if (!rc)
            rc = ct_store_set_meta_int(st, "writer_stopped_after",
                                       (int64_t)(h->writer_stopped_after & INT64_MAX));
    }
    return rc;
}

/* True when the ring, mapped, was this pid's and is now in its trace. */
static bool fold_mapped(const struct fold *f, void *mem, size_t bytes)
{
    struct ct_ring ring;
    if (!ct_ring_attach(&ring, mem, bytes))
        return false;
    const struct ct_ring_header *h = ring.hdr;
    char boot_id[sizeof h->boot_id + 1], db_name[sizeof h->db_name + 1];
    ct_procinfo_boot_id(boot_id, sizeof boot_id);
    header_text(db_name, sizeof db_name, h->db_name, sizeof h->db_name);
    if (h->pid != f->pid || strncmp(h->boot_id, boot_id, sizeof h->boot_id) != 0 ||
        !plain_name(db_name, ".db"))
        return false;
    char db_path[PATH_MAX], err[512];
    if ((size_t)snprintf(db_path, sizeof db_path, "%s/%s", f->dir, db_name) >= sizeof db_path)
        return false;
    struct ct_store *st = ct_store_open(db_path, err, sizeof err);
    if (!st)
        return false;
    struct inserter in = {st, ct_store_begin(st)};
    if (in.rc == 0)
        ct_ring_scan(&ring, insert_record, &in);
    int rc = in.rc;
    if (!rc)
        rc = note_end(st, h);
    if (!rc)
        rc = ct_store_commit(st);
    else
        sqlite3_exec(ct_store_sqlite(st), "ROLLBACK", NULL, NULL, NULL);
    if (!rc)
        rc = ct_store_seal(st);
    ct_store_close(st);
    return rc == 0;
}

static void fold_ring(void *arg)
{
    struct fold *f = arg;
    char ring_path[PATH_MAX];
    int fd = -1;
    if (plain_name(f->ring_name, ".ring") &&
        (size_t)snprintf(ring_path, sizeof ring_path, "%s/%s", f->dir, f->ring_name) <
            sizeof ring_path)
        fd = open(ring_path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        unlink(f->marker); /* folded already, by `cutrace recover` */
        return;
    }
    /*
     * Held (a POSIX lock of another process, or the flock of an older build
     * or of a cutrace folding it): not the ring this pid's exec let go of,
     * whose lock the exec dropped. F_GETLK never reports this process's own.
     */
    if (ct_ring_lock_held(fd) != 0 || flock(fd, LOCK_EX | LOCK_NB) != 0) {
        close(fd);
        return;
    }
    struct stat st;
    bool folded = false;
    if (fstat(fd, &st) == 0 && st.st_size > 0) {
        void *mem = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
        if (mem != MAP_FAILED) {
            folded = fold_mapped(f, mem, (size_t)st.st_size);
            munmap(mem, (size_t)st.st_size);
        }
    }
    /* Deleted under its lock, as recovery does; one not folded is recovery's. */
    if (folded)
        unlink(ring_path);
    unlink(f->marker);
    close(fd);
}

void ct_execfold_complete(const char *dir, int64_t pid)
{
    int saved = errno;
    struct fold f = {.dir = dir, .pid = pid};
    if (marker_path(f.marker, sizeof f.marker, dir, pid)) {
        ssize_t n = readlink(f.marker, f.ring_name, sizeof f.ring_name - 1);
        char why[PATH_MAX + 128];
        /* The directory is trusted as a session trusts it, or left alone. */
        if (n > 0 && ct_tracedir_use(dir, why, sizeof why) == 0) {
            f.ring_name[n] = '\0';
            ct_sigfree_run(fold_ring, &f);
        }
    }
    errno = saved;
}
