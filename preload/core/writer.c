/*
 * writer.c - drains the ring into the trace's SQLite file on its own thread.
 *
 * Two locks, neither ever taken by a producer:
 *   work_mu  held while the writer is inside SQLite, and only then. fork()
 *            takes it (ct_writer_before_fork) so that a child never inherits
 *            SQLite's internal mutexes in a locked state. Nothing foreign (the
 *            CUDA driver or runtime) is ever called under it: their own fork
 *            handlers run before ours and take their locks, so a writer that
 *            waited for the driver while holding work_mu would deadlock fork.
 *   mu       guards the flush handshake (targets, end state, stop flag).
 *
 * The thread blocks every signal (sigfree.h): the program's handlers keep
 * running on the program's threads, as they would untraced, and SIGXFSZ from
 * a write over the file-size limit never reaches them.
 */
#include "writer.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>

#include "clock.h"
#include "cutrace/apis.h"
#include "modmap.h"
#include "objects.h"
#include "sigfree.h"
#include "cutrace/stackrec.h"
#include "thread.h"
#include "warn.h"

#define CT_MAX_DEVICES 64
#define CT_BATCH_MAX   16384 /* records per drain round (context learned between rounds) */
/* Records per transaction, and so per release of ring slots: small enough
 * that a producer waiting for a full ring waits well under 1 ms, large
 * enough that the commit's cost is shared (writer19.md has the measure). */
#ifndef CT_COMMIT_STEP
#define CT_COMMIT_STEP 256
#endif
#define CT_VERSION_RETRY_NS 1000000000ull

enum { DEVICE_UNSEEN = 0, DEVICE_PENDING, DEVICE_DONE };

struct ct_writer {
    struct ct_writer_config cfg;
    struct ct_store *store;
    pthread_t thread;

    pthread_mutex_t work_mu;

    pthread_mutex_t mu;
    pthread_cond_t wake;
    pthread_cond_t done;
    uint64_t flush_target;
    const char *end_state;  /* pending meta('end_state'), written once target is reached */
    uint64_t end_requested; /* end-state requests made ... */
    uint64_t end_served;    /* ... and written, file closed */
    int exit_status;        /* 1 + the status stored with the end state, 0 none */
    bool stop;

    int alive;          /* atomic */
    uint64_t committed; /* atomic: ring tickets committed and released */
    uint64_t cursor;    /* writer thread only: next ticket to read */
    struct ct_modmap modules;
    struct ct_objects objects; /* loaded objects recorded for stacks */
    uint8_t device_state[CT_MAX_DEVICES];
    uint64_t device_first_seq[CT_MAX_DEVICES];
    bool versions_known;
    uint64_t versions_tried_ns;
    uint64_t last_seq;        /* highest sequence number committed */
    bool more_to_drain;       /* the last drain stopped early, not for lack of records */
    uint64_t file_checked_ns; /* when the trace file was last seen in place */
    uint64_t dropped_noted;   /* the ring's `dropped` as last stored in meta */
    char last_error[512];
};

bool ct_writer_alive(const struct ct_writer *w)
{
    return w && __atomic_load_n(&w->alive, __ATOMIC_ACQUIRE);
}

uint64_t ct_writer_committed(struct ct_writer *w)
{
    return __atomic_load_n(&w->committed, __ATOMIC_ACQUIRE);
}

/*
 * The writer gives up for good: producers stop recording (ct_writer_alive),
 * and the ring's header says where and why, for `cutrace recover` to store
 * once the file can be written again; the records not yet committed stay in
 * the ring.
 */
static void die(struct ct_writer *w, const char *why)
{
    ct_ring_note_writer_failure(w->cfg.ring, w->last_seq, why);
    ct_warn_once(CT_PROBLEM_WRITER, "trace writer stopped, the trace ends here: %s", why);
    pthread_mutex_lock(&w->mu);
    __atomic_store_n(&w->alive, 0, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&w->done);
    pthread_mutex_unlock(&w->mu);
}

static bool open_trace_file(struct ct_writer *w);

/*
 * Identity of devices, the CUDA versions and the modules calls came from are
 * learned from what the program did, in three steps so that no foreign code runs under work_mu:
 * noting what is new (under work_mu, while records are inserted), asking the driver and runtime (no
 * lock held: the driver has fork handlers and locks of its own), and storing the answers (under
 * work_mu again).
 */
/* False when the record must wait for the next round (its caller cannot be noted yet). */
static bool note_context(struct ct_writer *w, const struct ct_record *r)
{
    if (!ct_modmap_note(&w->modules, r->caller))
        return false;
    /* Identity only after the program's own call on that device succeeded. */
    if (r->result == 0 && r->device >= 0 && r->device < CT_MAX_DEVICES &&
        w->device_state[r->device] == DEVICE_UNSEEN) {
        w->device_state[r->device] = DEVICE_PENDING;
        w->device_first_seq[r->device] = r->seq;
    }
    return true;
}

/* An auxiliary record's native frames: objects holding them must be recorded. */
static void note_frames(struct ct_writer *w, const struct ct_record *r)
{
    struct ct_aux_record a;
    memcpy(&a, r, sizeof a);
    if (!w->cfg.record_objects || a.kind != CT_AUX_FRAMES || !ct_aux_valid(&a))
        return;
    for (unsigned i = 0; i < a.count && a.first + i < a.native; i++)
        ct_objects_note(&w->objects, ct_aux_frame(&a, i));
}

struct learned {
    struct ct_module modules[CT_MODMAP_FOUND];
    size_t n_modules;
    struct ct_object *objects; /* malloc'd, NULL when none */
    size_t n_objects;
    struct ct_device_info devices[CT_MAX_DEVICES];
    uint64_t first_seq[CT_MAX_DEVICES];
    int n_devices;
    struct ct_versions versions; /* what this round learned; 0 = nothing new */
};

static void learn_context(struct ct_writer *w, struct learned *out)
{
    out->n_devices = 0;
    out->versions = (struct ct_versions){0, 0, 0};
    out->n_modules = ct_modmap_resolve(&w->modules, out->modules, CT_MODMAP_FOUND);
    free(out->objects);
    out->objects = NULL;
    out->n_objects = 0;
    if (w->cfg.record_objects) {
        bool changed;
        out->n_objects = ct_objects_scan(&w->objects, &out->objects, &changed);
        if (changed && w->cfg.probes.objects_changed)
            w->cfg.probes.objects_changed();
    }
    for (int d = 0; d < CT_MAX_DEVICES; d++) {
        if (w->device_state[d] != DEVICE_PENDING)
            continue;
        w->device_state[d] = DEVICE_DONE;
        if (w->cfg.probes.describe_device &&
            w->cfg.probes.describe_device(d, &out->devices[out->n_devices]))
            out->first_seq[out->n_devices++] = w->device_first_seq[d];
    }
    /* Versions are queryable without a working driver (and say which runtime failed). */
    uint64_t now = ct_now_ns();
    if (!w->versions_known && w->cfg.probes.versions && w->store && w->cursor > 0 &&
        now - w->versions_tried_ns > CT_VERSION_RETRY_NS) {
        w->versions_tried_ns = now;
        w->cfg.probes.versions(&out->versions);
        struct ct_versions *v = &out->versions;
        w->versions_known = v->runtime > 0 && v->driver > 0 && v->nccl > 0;
    }
}

static int store_context(struct ct_writer *w, const struct learned *l)
{
    const struct ct_versions *v = &l->versions;
    bool new_versions = v->runtime > 0 || v->driver > 0 || v->nccl > 0;
    if (l->n_devices == 0 && !new_versions && l->n_modules == 0 && l->n_objects == 0)
        return 0;
    if (!w->store && !open_trace_file(w))
        return -1;
    int rc = ct_store_begin(w->store);
    for (size_t i = 0; !rc && i < l->n_modules; i++) {
        const struct ct_module *m = &l->modules[i];
        rc = ct_store_write_module(w->store, m->path, m->base, m->start, m->end);
        if (!rc)
            ct_modmap_add(&w->modules, m);
    }
    for (size_t i = 0; !rc && i < l->n_objects; i++) {
        const struct ct_object *o = &l->objects[i];
        rc = ct_store_write_object(w->store, o->path, o->build_id, o->base, o->start, o->end,
                                   w->last_seq);
        if (!rc)
            ct_objects_add(&w->objects, o);
    }
    for (int i = 0; !rc && i < l->n_devices; i++)
        rc = ct_store_write_device(w->store, &l->devices[i], l->first_seq[i]);
    if (!rc && new_versions)
        rc = ct_store_set_versions(w->store, v);
    return rc ? rc : ct_store_commit(w->store);
}

/* Opens the trace the session created. */
static bool open_trace_file(struct ct_writer *w)
{
    char err[512];
    if (w->cfg.make_store) {
        w->store = w->cfg.make_store(w->cfg.make_arg, err, sizeof err);
        w->cfg.make_store = NULL; /* made once: a later open is of the file it made */
    } else {
        w->store = ct_store_open(w->cfg.db_path, err, sizeof err);
    }
    if (w->store)
        ct_store_defer_checkpoints(w->store);
    if (w->store && ct_store_batch_events(w->store)) {
        snprintf(err, sizeof err, "%s", ct_store_error(w->store));
        ct_store_close(w->store);
        w->store = NULL;
    }
    if (!w->store)
        snprintf(w->last_error, sizeof w->last_error, "%s", err);
    return w->store != NULL;
}

/*
 * The ring's count of dropped records, into meta('dropped_records') within
 * the open transaction when it changed: a gap in seq is always explained.
 */
static int note_dropped(struct ct_writer *w)
{
    uint64_t dropped = ct_ring_dropped(w->cfg.ring);
    if (dropped == w->dropped_noted || dropped > INT64_MAX)
        return 0;
    int rc = ct_store_set_meta_int(w->store, "dropped_records", (int64_t)dropped);
    if (!rc)
        w->dropped_noted = dropped;
    return rc;
}

/*
 * One step: a transaction of at most CT_COMMIT_STEP published records, then
 * their slots released. Returns records written, or -1. *stop_round is set
 * when the drain must end early (a record whose caller cannot be noted yet).
 */
/* Out of line: `callgrind --toggle-collect=commit_step` measures the writer's
 * cost per record (docs/performance.md). */
__attribute__((noinline)) static long commit_step(struct ct_writer *w, const struct ct_record *r,
                                                  bool *stop_round)
{
    uint64_t start = w->cursor - 1; /* r was peeked already */
    if (!w->store && !open_trace_file(w))
        return -1;
    if (ct_store_begin(w->store))
        return -1;
    long n = 0;
    uint64_t last_seq = w->last_seq;
    for (; r; r = (n < CT_COMMIT_STEP) ? ct_ring_peek(w->cfg.ring, &w->cursor) : NULL) {
        if (ct_record_is_aux(r))
            note_frames(w, r);
        else if (!note_context(w, r)) {
            w->cursor--; /* not consumed: it stays published in the ring */
            *stop_round = true;
            break;
        }
        if (ct_store_insert(w->store, r))
            return -1;
        if (r->seq > last_seq)
            last_seq = r->seq;
        n++;
    }
    if (note_dropped(w) || ct_store_commit(w->store))
        return -1;
    w->last_seq = last_seq;
    assert(w->cursor - start == (uint64_t)n);
    /* Only now, with every record of the step durable in the trace, may the
     * slots be reused: a SIGKILL at any moment finds each record in the
     * committed WAL or in its published slot. */
    ct_ring_release(w->cfg.ring, w->cursor);
    __atomic_store_n(&w->committed, w->cursor, __ATOMIC_RELEASE);
    /* After the release: the program goes on while the checkpoint syncs. */
    return ct_store_checkpoint_if_due(w->store) ? -1 : n;
}

/*
 * Everything published so far, up to CT_BATCH_MAX records, in steps of
 * CT_COMMIT_STEP: a producer waiting for a full ring gets slots back after
 * one step (well under a millisecond), not after a whole batch. Returns
 * records written or -1.
 */
static long drain_once(struct ct_writer *w)
{
    w->more_to_drain = false;
    long total = 0;
    bool stop_round = false;
    while (total < CT_BATCH_MAX && !stop_round) {
        const struct ct_record *r = ct_ring_peek(w->cfg.ring, &w->cursor);
        if (!r)
            break;
        long n = commit_step(w, r, &stop_round);
        if (n < 0)
            return -1;
        total += n;
    }
    w->more_to_drain = stop_round;
    return total;
}

/*
 * The process is ending: record how, and seal the file so that it is
 * complete on its own (no -wal or -shm beside it) and stays so: the
 * connection stays open for the records made later (another library's
 * destructor), which then go into the .db itself. "running" is the one state
 * that is not an end: an exec failed and the process goes on, back in WAL.
 */
static int finish_store(struct ct_writer *w, const char *end_state, int exit_status)
{
    if (!w->store && !open_trace_file(w))
        return -1;
    /* Autocommit: the drop count, when it changed since the last drain, and the end. */
    if (note_dropped(w) || ct_store_set_meta_text(w->store, "end_state", end_state))
        return -1;
    if (strcmp(end_state, "running") == 0)
        return ct_store_unseal(w->store);
    if (exit_status && ct_store_set_meta_int(w->store, "exit_status", exit_status - 1))
        return -1;
    /* A seal that fails (disk full) leaves every commit in the WAL beside
     * the file: the trace is complete, if not one file. */
    ct_store_seal(w->store);
    return 0;
}

/*
 * A trace file deleted under a running process (its directory removed) would
 * swallow every later record unseen; notice it, at most once a second.
 */
static bool trace_file_gone(struct ct_writer *w, bool now_please)
{
    uint64_t now = ct_now_ns();
    if (!w->store || (!now_please && now - w->file_checked_ns < 1000000000ull))
        return false;
    w->file_checked_ns = now;
    struct stat st;
    if (stat(w->cfg.db_path, &st) == 0 || errno != ENOENT)
        return false;
    snprintf(w->last_error, sizeof w->last_error, "the trace file was removed (%.*s)", 400,
             w->cfg.db_path);
    return true;
}

static struct timespec deadline_after_ms(unsigned ms)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    uint64_t ns = (uint64_t)t.tv_nsec + (uint64_t)ms * 1000000u;
    t.tv_sec += (time_t)(ns / 1000000000u);
    t.tv_nsec = (long)(ns % 1000000000u);
    return t;
}

/* Sleeps until the commit interval passes or a flush asks for more; w->mu held. */
static void wait_interval(struct ct_writer *w)
{
    struct timespec until = deadline_after_ms(w->cfg.interval_ms);
    pthread_cond_timedwait(&w->wake, &w->mu, &until);
}

static void *writer_main(void *arg)
{
    struct ct_writer *w = arg;
    ct_self.internal = true;
    prctl(PR_SET_NAME, "cutrace-writer", 0, 0, 0);

    pthread_mutex_lock(&w->work_mu);
    bool ok = open_trace_file(w);
    pthread_mutex_unlock(&w->work_mu);
    if (!ok) {
        die(w, w->last_error);
        return NULL;
    }

    struct learned *learned = calloc(1, sizeof *learned);
    if (!learned) {
        die(w, "out of memory");
        return NULL;
    }
    for (;;) {
        pthread_mutex_lock(&w->work_mu);
        long n = drain_once(w);
        pthread_mutex_unlock(&w->work_mu);
        /* The heartbeat: a killed process's calls in flight are dated from it. */
        ct_ring_note_alive(w->cfg.ring, ct_now_ns());

        learn_context(w, learned);
        pthread_mutex_lock(&w->work_mu);
        if (n >= 0 && store_context(w, learned) != 0)
            n = -1;
        pthread_mutex_lock(&w->mu);
        const char *end_state = NULL;
        uint64_t serving = 0;
        int exit_status = 0;
        if (w->end_state && w->cursor >= w->flush_target) {
            end_state = w->end_state;
            serving = w->end_requested;
            exit_status = w->exit_status;
            w->end_state = NULL;
        }
        pthread_mutex_unlock(&w->mu);
        /* A commit that failed may have failed for a removed file: say that. */
        bool gone = trace_file_gone(w, end_state != NULL || n < 0);
        if (n >= 0 && !gone && end_state && finish_store(w, end_state, exit_status) != 0)
            n = -1;
        pthread_mutex_unlock(&w->work_mu);
        if (n >= 0 && !gone && end_state) {
            pthread_mutex_lock(&w->mu);
            w->end_served = serving;
            pthread_mutex_unlock(&w->mu);
        }
        if (n < 0 || gone) {
            die(w, (n < 0 && !gone && w->store) ? ct_store_error(w->store) : w->last_error);
            free(learned->objects);
            free(learned);
            return NULL;
        }

        pthread_mutex_lock(&w->mu);
        pthread_cond_broadcast(&w->done);
        /* A flusher waits for a record whose producer is still copying it in. */
        bool behind = w->cursor < w->flush_target || w->end_state != NULL;
        if (w->stop && !behind && w->cursor == ct_ring_claimed(w->cfg.ring)) {
            pthread_mutex_unlock(&w->mu);
            free(learned->objects);
            free(learned);
            break;
        }
        if (n < CT_BATCH_MAX && !w->more_to_drain && !behind)
            wait_interval(w);
        pthread_mutex_unlock(&w->mu);
        if (behind && n == 0) {
            struct timespec ts = {0, 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    return NULL;
}

static void init_cond_monotonic(pthread_cond_t *c)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(c, &a);
    pthread_condattr_destroy(&a);
}

struct ct_writer *ct_writer_start(const struct ct_writer_config *cfg, char *err, size_t errlen)
{
    struct ct_writer *w = calloc(1, sizeof *w);
    if (!w) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    w->cfg = *cfg;
    w->cursor = ct_ring_committed(cfg->ring);
    w->committed = w->cursor;
    if (w->cfg.interval_ms == 0)
        w->cfg.interval_ms = 20;
    pthread_mutex_init(&w->work_mu, NULL);
    pthread_mutex_init(&w->mu, NULL);
    init_cond_monotonic(&w->wake);
    init_cond_monotonic(&w->done);
    w->alive = 1;

    int rc = ct_sigfree_create(&w->thread, writer_main, w);
    if (rc != 0) {
        snprintf(err, errlen, "cannot start writer thread: %s", strerror(rc));
        free(w);
        return NULL;
    }
    return w;
}

bool ct_writer_flush(struct ct_writer *w, const char *end_state, unsigned timeout_ms)
{
    if (!ct_writer_alive(w))
        return false;
    uint64_t target = ct_ring_claimed(w->cfg.ring);
    struct timespec until = deadline_after_ms(timeout_ms);

    pthread_mutex_lock(&w->mu);
    if (target > w->flush_target)
        w->flush_target = target;
    uint64_t want = 0;
    if (end_state) {
        w->end_state = end_state;
        want = ++w->end_requested;
    }
    pthread_cond_signal(&w->wake);
    bool done = false;
    for (;;) {
        done = ct_writer_committed(w) >= target && w->end_served >= want;
        if (done || !ct_writer_alive(w))
            break;
        if (pthread_cond_timedwait(&w->done, &w->mu, &until) == ETIMEDOUT)
            break;
    }
    pthread_mutex_unlock(&w->mu);
    return done;
}

void ct_writer_note_exit_status(struct ct_writer *w, int status)
{
    assert(status >= 0 && status <= 255);
    if (!ct_writer_alive(w))
        return;
    pthread_mutex_lock(&w->mu);
    w->exit_status = 1 + status;
    pthread_mutex_unlock(&w->mu);
}

void ct_writer_stop(struct ct_writer *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    w->stop = true;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    ct_store_close(w->store);
    ct_objects_free(&w->objects);
    pthread_mutex_destroy(&w->work_mu);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->wake);
    pthread_cond_destroy(&w->done);
    free(w);
}

void ct_writer_before_fork(struct ct_writer *w)
{
    pthread_mutex_lock(&w->work_mu);
}

void ct_writer_after_fork_parent(struct ct_writer *w)
{
    pthread_mutex_unlock(&w->work_mu);
}
