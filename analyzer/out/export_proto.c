/*
 * export_proto.c - the Perfetto protobuf writer behind export_proto.h.
 *
 * The file is a `Trace` message: field 1 (packet) repeated, each one
 * TracePacket. Field numbers are Perfetto's (trace_packet.proto,
 * track_event/track_event.proto, track_descriptor.proto,
 * interned_data.proto, debug_annotation.proto, clock_snapshot.proto).
 *
 * Every stream of the walk is one packet sequence
 * (trusted_packet_sequence_id): its first packet clears the incremental
 * state, and names, categories, argument names and string values are
 * interned per sequence (each new one goes into the interned_data of the
 * packet that first uses it), which is what keeps a 10^6-call export small.
 * Timestamps are CLOCK_MONOTONIC (timestamp_clock_id 3); a clock snapshot
 * first makes it the trace's primary clock, so the trace processor shows
 * the times as they are instead of looking for a way to BOOTTIME.
 */
#include "out/export_proto.h"

#include "cli.h"
#include "out/protobuf.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* TracePacket */
#define TP_CLOCK_SNAPSHOT             6
#define TP_TIMESTAMP                  8
#define TP_SEQUENCE_ID                10
#define TP_TRACK_EVENT                11
#define TP_INTERNED_DATA              12
#define TP_SEQUENCE_FLAGS             13
#define TP_CLOCK_ID                   58
#define TP_TRACK_DESCRIPTOR           60
#define SEQ_INCREMENTAL_STATE_CLEARED 1
#define SEQ_NEEDS_INCREMENTAL_STATE   2
#define CLOCK_MONOTONIC_ID            3
#define CLOCK_BOOTTIME_ID             6
/* TrackEvent */
#define TE_CATEGORY_IIDS     3
#define TE_DEBUG_ANNOTATIONS 4
#define TE_TYPE              9
#define TE_NAME_IID          10
#define TE_TRACK_UUID        11
#define TE_COUNTER_VALUE     30
#define TE_FLOW_IDS          47
#define TE_TERMINATING_FLOWS 48
/* DebugAnnotation */
#define DA_NAME_IID         1
#define DA_INT_VALUE        4
#define DA_POINTER_VALUE    7
#define DA_STRING_VALUE_IID 17
/* TrackDescriptor */
#define TD_UUID         1
#define TD_NAME         2
#define TD_PROCESS      3
#define TD_THREAD       4
#define TD_PARENT       5
#define TD_COUNTER      8
#define UNIT_SIZE_BYTES 3

/* What is interned, and the InternedData field of each (their iids are separate). */
enum intern_kind { IN_CATEGORY, IN_NAME, IN_ARG_NAME, IN_STRING, IN_KINDS };
static const uint32_t intern_field[IN_KINDS] = {1, 2, 3, 29};

struct entry {
    char *s; /* NULL: empty slot */
    uint64_t iid;
    uint8_t kind;
};

struct ex_proto {
    FILE *out;
    bool failed;
    uint32_t sequence; /* the current stream's id; 0 before the first */
    bool first_packet; /* of the current sequence */
    int64_t last_ts;   /* of the current sequence */
    struct entry *table;
    size_t nslots, used;
    uint64_t next_iid[IN_KINDS];
    /* The strings the packet being built interns for the first time. */
    struct entry fresh[2 + 2 * EX_MAX_ARGS];
    size_t nfresh;
    struct pb_buf packet, frame;
};

static uint64_t hash_of(const char *s, uint8_t kind)
{
    uint64_t h = 1469598103934665603ull ^ kind; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

static void table_clear(struct ex_proto *p)
{
    for (size_t i = 0; i < p->nslots; i++)
        free(p->table[i].s);
    free(p->table);
    p->table = NULL;
    p->nslots = p->used = 0;
    for (int k = 0; k < IN_KINDS; k++)
        p->next_iid[k] = 1;
}

static struct entry *slot_of(struct entry *table, size_t nslots, const char *s, uint8_t kind)
{
    size_t i = hash_of(s, kind) & (nslots - 1);
    while (table[i].s && (table[i].kind != kind || strcmp(table[i].s, s) != 0))
        i = (i + 1) & (nslots - 1);
    return &table[i];
}

/* The iid of s in this sequence; a new one is queued for the packet's interned_data. */
static uint64_t intern(struct ex_proto *p, enum intern_kind kind, const char *s)
{
    if (!s)
        s = "";
    if ((p->used + 1) * 2 > p->nslots) {
        size_t n = p->nslots ? p->nslots * 2 : 256;
        struct entry *t = xcalloc(n, sizeof(*t));
        for (size_t i = 0; i < p->nslots; i++)
            if (p->table[i].s)
                *slot_of(t, n, p->table[i].s, p->table[i].kind) = p->table[i];
        free(p->table);
        p->table = t;
        p->nslots = n;
    }
    struct entry *e = slot_of(p->table, p->nslots, s, (uint8_t)kind);
    if (e->s)
        return e->iid;
    assert(p->nfresh < sizeof(p->fresh) / sizeof(p->fresh[0]));
    *e = (struct entry){xstrdup(s), p->next_iid[kind]++, (uint8_t)kind};
    p->used++;
    p->fresh[p->nfresh++] = *e;
    return e->iid;
}

static void write_packet(struct ex_proto *p)
{
    pb_reset(&p->frame);
    pb_bytes(&p->frame, 1, p->packet.data, p->packet.len);
    if (fwrite(p->frame.data, 1, p->frame.len, p->out) != p->frame.len)
        p->failed = true;
    pb_reset(&p->packet);
}

/* The sequence fields every packet of the current stream carries. */
static void packet_head(struct ex_proto *p)
{
    assert(p->sequence > 0);
    pb_uint(&p->packet, TP_SEQUENCE_ID, p->sequence);
    pb_uint(&p->packet, TP_SEQUENCE_FLAGS,
            p->first_packet ? SEQ_INCREMENTAL_STATE_CLEARED | SEQ_NEEDS_INCREMENTAL_STATE
                            : SEQ_NEEDS_INCREMENTAL_STATE);
    p->first_packet = false;
}

static int proto_stream_begin(void *state)
{
    struct ex_proto *p = state;
    table_clear(p);
    p->sequence++;
    assert(p->sequence != 0);
    p->first_packet = true;
    p->last_ts = 0;
    return p->failed ? -1 : 0;
}

static int proto_track(void *state, const struct ex_track *t)
{
    struct ex_proto *p = state;
    assert(t->uuid != 0);
    packet_head(p);
    size_t td = pb_begin(&p->packet, TP_TRACK_DESCRIPTOR);
    pb_uint(&p->packet, TD_UUID, t->uuid);
    /* A thread track belongs to its process by the ThreadDescriptor's pid,
     * which is how Perfetto's own producers say it; the other tracks by
     * parent_uuid. */
    if (t->parent && t->kind != EX_TRACK_THREAD)
        pb_uint(&p->packet, TD_PARENT, t->parent);
    pb_string(&p->packet, TD_NAME, t->name);
    if (t->kind == EX_TRACK_PROCESS) {
        size_t pd = pb_begin(&p->packet, TD_PROCESS);
        pb_int(&p->packet, 1, t->pid);     /* ProcessDescriptor.pid */
        pb_string(&p->packet, 6, t->name); /* .process_name */
        pb_end(&p->packet, pd);
    } else if (t->kind == EX_TRACK_THREAD) {
        size_t th = pb_begin(&p->packet, TD_THREAD);
        pb_int(&p->packet, 1, t->pid);     /* ThreadDescriptor.pid */
        pb_int(&p->packet, 2, t->tid);     /* .tid */
        pb_string(&p->packet, 5, t->name); /* .thread_name */
        pb_end(&p->packet, th);
    } else if (t->kind == EX_TRACK_COUNTER) {
        size_t cd = pb_begin(&p->packet, TD_COUNTER);
        pb_uint(&p->packet, 3, UNIT_SIZE_BYTES); /* CounterDescriptor.unit */
        pb_end(&p->packet, cd);
    }
    pb_end(&p->packet, td);
    write_packet(p);
    return p->failed ? -1 : 0;
}

static int proto_event(void *state, const struct ex_event *e)
{
    struct ex_proto *p = state;
    assert(e->ts >= p->last_ts && e->ts >= 0);
    p->last_ts = e->ts;
    /* Intern first: the packet's interned_data holds what the event then names. */
    p->nfresh = 0;
    bool named = e->type == EX_BEGIN || e->type == EX_INSTANT;
    uint64_t name = named ? intern(p, IN_NAME, e->name) : 0;
    uint64_t category = named && e->category ? intern(p, IN_CATEGORY, e->category) : 0;
    uint64_t arg_names[EX_MAX_ARGS], arg_strings[EX_MAX_ARGS];
    assert(e->nargs <= EX_MAX_ARGS);
    for (size_t i = 0; i < e->nargs; i++) {
        arg_names[i] = intern(p, IN_ARG_NAME, e->args[i].name);
        arg_strings[i] = e->args[i].type == EX_ARG_STRING ? intern(p, IN_STRING, e->args[i].s) : 0;
    }

    pb_uint(&p->packet, TP_TIMESTAMP, (uint64_t)e->ts);
    pb_uint(&p->packet, TP_CLOCK_ID, CLOCK_MONOTONIC_ID);
    packet_head(p);
    if (p->nfresh) {
        size_t id = pb_begin(&p->packet, TP_INTERNED_DATA);
        for (size_t i = 0; i < p->nfresh; i++) {
            const struct entry *f = &p->fresh[i];
            size_t m = pb_begin(&p->packet, intern_field[f->kind]);
            pb_uint(&p->packet, 1, f->iid); /* iid */
            pb_string(&p->packet, 2, f->s); /* name, or InternedString.str */
            pb_end(&p->packet, m);
        }
        pb_end(&p->packet, id);
    }
    size_t te = pb_begin(&p->packet, TP_TRACK_EVENT);
    static const uint64_t types[] = {
        [EX_BEGIN] = 1, [EX_END] = 2, [EX_INSTANT] = 3, [EX_COUNTER] = 4};
    pb_uint(&p->packet, TE_TYPE, types[e->type]);
    pb_uint(&p->packet, TE_TRACK_UUID, e->track);
    if (named)
        pb_uint(&p->packet, TE_NAME_IID, name);
    if (category)
        pb_uint(&p->packet, TE_CATEGORY_IIDS, category);
    if (e->type == EX_COUNTER)
        pb_int(&p->packet, TE_COUNTER_VALUE, e->value);
    for (size_t i = 0; i < e->nargs; i++) {
        size_t da = pb_begin(&p->packet, TE_DEBUG_ANNOTATIONS);
        pb_uint(&p->packet, DA_NAME_IID, arg_names[i]);
        if (e->args[i].type == EX_ARG_STRING)
            pb_uint(&p->packet, DA_STRING_VALUE_IID, arg_strings[i]);
        else if (e->args[i].type == EX_ARG_POINTER)
            pb_uint(&p->packet, DA_POINTER_VALUE, (uint64_t)e->args[i].i);
        else
            pb_int(&p->packet, DA_INT_VALUE, e->args[i].i);
        pb_end(&p->packet, da);
    }
    for (size_t i = 0; i < e->nflows; i++)
        pb_fixed64(&p->packet, TE_FLOW_IDS, e->flows[i]);
    for (size_t i = 0; i < e->nterminating; i++)
        pb_fixed64(&p->packet, TE_TERMINATING_FLOWS, e->terminating[i]);
    pb_end(&p->packet, te);
    write_packet(p);
    return p->failed ? -1 : 0;
}

struct ex_proto *ex_proto_open(FILE *out, struct ex_sink *sink)
{
    struct ex_proto *p = xcalloc(1, sizeof(*p));
    p->out = out;
    table_clear(p);
    /* Sequence 1: the clock snapshot that makes MONOTONIC the trace's clock. */
    proto_stream_begin(p);
    packet_head(p);
    size_t cs = pb_begin(&p->packet, TP_CLOCK_SNAPSHOT);
    const uint32_t clocks[] = {CLOCK_MONOTONIC_ID, CLOCK_BOOTTIME_ID};
    for (size_t i = 0; i < 2; i++) {
        size_t c = pb_begin(&p->packet, 1); /* ClockSnapshot.clocks */
        pb_uint(&p->packet, 1, clocks[i]);  /* Clock.clock_id */
        pb_uint(&p->packet, 2, 0);          /* Clock.timestamp: the same moment in both */
        pb_end(&p->packet, c);
    }
    pb_uint(&p->packet, 2, CLOCK_MONOTONIC_ID); /* primary_trace_clock */
    pb_end(&p->packet, cs);
    write_packet(p);
    *sink = (struct ex_sink){p, proto_stream_begin, proto_track, proto_event};
    return p;
}

int ex_proto_close(struct ex_proto *p)
{
    int status = p->failed || fflush(p->out) != 0 || ferror(p->out) ? -1 : 0;
    table_clear(p);
    pb_free(&p->packet);
    pb_free(&p->frame);
    free(p);
    return status;
}
