/*
 * export_json.c - the Chrome trace-event JSON writer behind export_json.h.
 *
 * One object {"traceEvents": [...], "displayTimeUnit": "ns"}, one event a
 * line (no indentation: a 10^6-call export stays a few hundred MB). Times
 * are microseconds with three decimals, so no nanosecond is lost. Tracks
 * map onto the format's (pid, tid): a process track is its pid, a thread
 * track its (pid, tid); a group (a GPU, a communicator) gets a pid of its
 * own above any Linux pid (EX_JSON_GROUP_PID), its slice tracks tids 1, 2,
 * ... in it, and its counters are counters of that pid, by name; a
 * process's slice tracks (NVTX) are tids of its pid above any Linux tid. Names
 * come as "M" (metadata) events, with ts 0 like every event, so that each
 * event has ph, ts and pid.
 */
#include "out/export_json.h"

#include "cli.h"
#include "out/json.h"

#include <assert.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Pids of groups: above 2^22 (the kernel's PID_MAX_LIMIT) times the
 * remapping factor export.c may use for colliding pids. */
#define EX_JSON_GROUP_PID (1ll << 30)

struct jtrack {
    uint64_t uuid; /* 0: empty slot */
    int64_t pid, tid;
    enum ex_track_kind kind;
    int64_t next_tid; /* groups: the next slice track's tid */
    char *name;       /* counters: their name in the pid */
};

struct ex_json {
    FILE *out;
    bool first;
    struct jtrack *tracks;
    size_t nslots, used;
    int64_t groups;
};

static struct jtrack *find(struct ex_json *j, uint64_t uuid)
{
    assert(uuid != 0);
    size_t i = (size_t)(uuid * 0x9e3779b97f4a7c15ull) & (j->nslots - 1);
    while (j->tracks[i].uuid && j->tracks[i].uuid != uuid)
        i = (i + 1) & (j->nslots - 1);
    return &j->tracks[i];
}

static struct jtrack *add(struct ex_json *j, uint64_t uuid)
{
    if ((j->used + 1) * 2 > j->nslots) {
        struct ex_json old = *j;
        j->nslots = j->nslots ? j->nslots * 2 : 64;
        j->tracks = xcalloc(j->nslots, sizeof(*j->tracks));
        for (size_t i = 0; i < old.nslots; i++)
            if (old.tracks[i].uuid)
                *find(j, old.tracks[i].uuid) = old.tracks[i];
        free(old.tracks);
    }
    struct jtrack *t = find(j, uuid);
    assert(t->uuid == 0); /* declared once */
    t->uuid = uuid;
    j->used++;
    return t;
}

static void str(struct ex_json *j, const char *s)
{
    if (!s)
        s = "";
    json_write_escaped(j->out, s, strlen(s));
}

static void ts(struct ex_json *j, int64_t ns)
{
    assert(ns >= 0);
    fprintf(j->out, "%" PRId64 ".%03d", ns / 1000, (int)(ns % 1000));
}

/* `{"ph":"X","pid":P,"tid":T,"ts":` with the separator before it. */
static void head(struct ex_json *j, const char *ph, int64_t pid, int64_t tid)
{
    fputs(j->first ? "\n" : ",\n", j->out);
    j->first = false;
    fprintf(j->out, "{\"ph\":\"%s\",\"pid\":%" PRId64 ",\"tid\":%" PRId64 ",\"ts\":", ph, pid, tid);
}

static void metadata(struct ex_json *j, const char *what, int64_t pid, int64_t tid,
                     const char *name)
{
    head(j, "M", pid, tid);
    fprintf(j->out, "0,\"name\":\"%s\",\"args\":{\"name\":", what);
    str(j, name);
    fputs("}}", j->out);
}

static int json_stream_begin(void *state)
{
    struct ex_json *j = state;
    return ferror(j->out) ? -1 : 0;
}

static int json_track(void *state, const struct ex_track *t)
{
    struct ex_json *j = state;
    struct jtrack *n = add(j, t->uuid);
    /* Looked up after the add, which may move every entry. */
    struct jtrack *parent = t->parent ? find(j, t->parent) : NULL;
    assert(!t->parent || parent->uuid == t->parent);
    n->kind = t->kind;
    switch (t->kind) {
    case EX_TRACK_PROCESS:
        n->pid = t->pid;
        n->tid = 0;                      /* its instants; threads have tids of their own */
        n->next_tid = EX_JSON_GROUP_PID; /* its slice tracks: above any tid */
        metadata(j, "process_name", n->pid, 0, t->name);
        break;
    case EX_TRACK_THREAD:
        n->pid = t->pid;
        n->tid = t->tid;
        metadata(j, "thread_name", n->pid, n->tid, t->name);
        break;
    case EX_TRACK_GROUP:
        n->pid = EX_JSON_GROUP_PID + j->groups++;
        n->tid = 0;
        n->next_tid = 1;
        metadata(j, "process_name", n->pid, 0, t->name);
        break;
    case EX_TRACK_SLICES:
        assert(parent && (parent->kind == EX_TRACK_GROUP || parent->kind == EX_TRACK_PROCESS));
        n->pid = parent->pid;
        n->tid = parent->next_tid++;
        metadata(j, "thread_name", n->pid, n->tid, t->name);
        break;
    case EX_TRACK_COUNTER:
        assert(parent && parent->kind == EX_TRACK_GROUP);
        n->pid = parent->pid;
        n->tid = 0;
        n->name = xstrdup(t->name ? t->name : "");
        break;
    }
    return ferror(j->out) ? -1 : 0;
}

static void args(struct ex_json *j, const struct ex_event *e)
{
    fputs(",\"args\":{", j->out);
    for (size_t i = 0; i < e->nargs; i++) {
        const struct ex_arg *a = &e->args[i];
        if (i)
            fputc(',', j->out);
        str(j, a->name);
        fputc(':', j->out);
        if (a->type == EX_ARG_STRING)
            str(j, a->s);
        else if (a->type == EX_ARG_POINTER)
            fprintf(j->out, "\"0x%" PRIx64 "\"", (uint64_t)a->i);
        else
            fprintf(j->out, "%" PRId64, a->i);
    }
    fputc('}', j->out);
}

static void flow(struct ex_json *j, const struct jtrack *t, const struct ex_event *e, uint64_t id,
                 bool end)
{
    head(j, end ? "f" : "s", t->pid, t->tid);
    ts(j, e->ts);
    fprintf(j->out, ",\"name\":\"ipc\",\"cat\":\"ipc\",\"id\":%" PRIu64 "%s}", id,
            end ? ",\"bp\":\"e\"" : "");
}

static int json_event(void *state, const struct ex_event *e)
{
    struct ex_json *j = state;
    const struct jtrack *t = find(j, e->track);
    assert(t->uuid == e->track);
    assert((e->type == EX_COUNTER) == (t->kind == EX_TRACK_COUNTER));
    static const char *const phases[] = {
        [EX_BEGIN] = "B", [EX_END] = "E", [EX_INSTANT] = "i", [EX_COUNTER] = "C"};
    head(j, phases[e->type], t->pid, t->tid);
    ts(j, e->ts);
    if (e->type == EX_COUNTER) {
        fputs(",\"name\":", j->out);
        str(j, t->name);
        fprintf(j->out, ",\"args\":{\"bytes\":%" PRId64 "}}", e->value);
    } else if (e->type == EX_END) {
        fputc('}', j->out);
    } else {
        fputs(",\"name\":", j->out);
        str(j, e->name);
        if (e->category) {
            fputs(",\"cat\":", j->out);
            str(j, e->category);
        }
        if (e->type == EX_INSTANT)
            fprintf(j->out, ",\"s\":\"%s\"", t->kind == EX_TRACK_PROCESS ? "p" : "t");
        args(j, e);
        fputc('}', j->out);
    }
    for (size_t i = 0; i < e->nflows; i++)
        flow(j, t, e, e->flows[i], false);
    for (size_t i = 0; i < e->nterminating; i++)
        flow(j, t, e, e->terminating[i], true);
    return ferror(j->out) ? -1 : 0;
}

struct ex_json *ex_json_open(FILE *out, struct ex_sink *sink)
{
    struct ex_json *j = xcalloc(1, sizeof(*j));
    j->out = out;
    j->first = true;
    fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[", out);
    *sink = (struct ex_sink){j, json_stream_begin, json_track, json_event};
    return j;
}

int ex_json_close(struct ex_json *j)
{
    fputs("\n]}\n", j->out);
    int status = fflush(j->out) != 0 || ferror(j->out) ? -1 : 0;
    for (size_t i = 0; i < j->nslots; i++)
        free(j->tracks[i].name);
    free(j->tracks);
    free(j);
    return status;
}
