/*
 * inflight.c - entered marks to inflight rows, and marks of live rings
 * (inflight.h).
 *
 * A mark is untrusted like every other byte of a ring: its record is
 * copied out of the mapping before it is looked at, and only marks with a
 * usable seq and an api the trace names become rows.
 */
#include "recover/inflight.h"

#include "cutrace/schema.h"
#include "cutrace/store.h"

#include <fcntl.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The largest ring inflight_read_ring maps, in slots (recover.c's limit). */
#define INFLIGHT_MAX_CAPACITY (UINT64_C(1) << 24)

struct mark_fold {
    sqlite3_stmt *insert;
    const uint8_t *apis;
    int rc;
    int64_t added;
};

static void fold_mark(const struct ct_record *rec, void *arg)
{
    struct mark_fold *f = arg;
    if (f->rc != SQLITE_OK || rec->seq == 0 || rec->seq > INT64_MAX ||
        !inflight_api_known(f->apis, rec->api))
        return;
    sqlite3_stmt *s = f->insert;
    const uint64_t values[] = {
        rec->seq,    rec->parent_seq,
        rec->t_ns,   (uint64_t)(int64_t)rec->tid,
        rec->api,    (uint64_t)(int64_t)rec->device,
        rec->depth,  rec->ptr,
        rec->size,   rec->flags,
        rec->stream, rec->arg[0],
        rec->arg[1], rec->arg[2],
        rec->arg[3], rec->arg[4],
        rec->arg[5], rec->arg[6],
        rec->arg[7], rec->caller,
    };
    sqlite3_reset(s);
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++)
        sqlite3_bind_int64(s, (int)i + 1, ct_u64_to_sql(values[i]));
    int rc = sqlite3_step(s);
    if (rc != SQLITE_DONE) {
        f->rc = rc;
        return;
    }
    f->added += sqlite3_changes(sqlite3_db_handle(s));
}

int inflight_fold(sqlite3 *db, const struct ct_ring *ring, const uint8_t *apis, int64_t *added)
{
    *added = 0;
    if (!ring->marks)
        return SQLITE_OK;
    int rc = sqlite3_exec(db, CT_SCHEMA_INFLIGHT_SQL, NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return rc;
    struct mark_fold f = {.apis = apis, .rc = SQLITE_OK};
    rc = sqlite3_prepare_v2(
        db,
        "INSERT OR IGNORE INTO inflight(seq, parent_seq, t_ns, tid, api_id, device, depth, ptr,"
        " size, flags, stream, arg0, arg1, arg2, arg3, arg4, arg5, arg6, arg7, caller)"
        " SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,"
        " ?18, ?19, ?20 WHERE NOT EXISTS (SELECT 1 FROM events WHERE seq = ?1)",
        -1, &f.insert, NULL);
    if (rc != SQLITE_OK)
        return rc;
    ct_ring_scan_marks(ring, fold_mark, &f);
    sqlite3_finalize(f.insert);
    *added = f.added;
    return f.rc;
}

size_t inflight_read_ring(const char *ring_path, void (*fn)(const struct ct_record *, void *),
                          void *arg)
{
    int fd = open(ring_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return 0;
    struct stat st;
    struct ct_ring_header h;
    size_t found = 0;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
        pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h ||
        memcmp(h.magic, CT_RING_MAGIC, sizeof h.magic) != 0 || h.version < 7 ||
        h.version > CT_RING_VERSION || h.capacity > INFLIGHT_MAX_CAPACITY) {
        close(fd);
        return 0;
    }
    size_t bytes = ct_ring_file_bytes(h.version, h.capacity);
    if ((uint64_t)st.st_size < bytes) {
        close(fd);
        return 0;
    }
    /* Shared and read-only: the running process's marks as they are now. */
    void *mem = mmap(NULL, bytes, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (mem == MAP_FAILED)
        return 0;
    struct ct_ring ring;
    if (ct_ring_attach(&ring, mem, bytes))
        found = ct_ring_scan_marks(&ring, fn, arg);
    munmap(mem, bytes);
    return found;
}
