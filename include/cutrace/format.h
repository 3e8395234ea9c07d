/*
 * format.h - the binary layout shared by libcutrace.so and the cutrace CLI.
 *
 * Two things cross the process boundary and therefore carry a version:
 *   - the ring file (<trace>.ring): a file-backed array of fixed-size slots
 *     that producers fill on the hot path and the writer thread drains into
 *     SQLite. It outlives a killed process, so the analyzer must be able to
 *     read one written by an older or newer build and refuse what it cannot.
 *   - the SQLite trace (<trace>.db): its schema version is CT_FORMAT_VERSION,
 *     stored in meta('format_version'). The analyzer refuses newer versions.
 *
 * Bump CT_FORMAT_VERSION whenever a table, view or column changes meaning;
 * bump CT_RING_VERSION whenever struct ct_record or struct ct_ring_header
 * changes layout.
 */
#ifndef CUTRACE_FORMAT_H
#define CUTRACE_FORMAT_H

#include <assert.h>
#include <stdint.h>

#define CT_FORMAT_VERSION 7
#define CT_SCHEMA_NAME    "cutrace"

#define CT_RING_MAGIC   "CTRING\0\1"
#define CT_RING_VERSION 7
/* Ring 3 has the same layout and no auxiliary records, ring 4 no line
 * tables and no instruction offsets in its Python frames, ring 5 no ret_seq
 * in its records (its bytes were reserved, so 0: read as seq) and no
 * `dropped` in its header (its bytes are zero there), ring 6 no marks after
 * its slots and no `alive_mono_ns` / `unmarked` (zero there): still readable. */
#define CT_RING_VERSION_OLDEST 3

#define CT_IPC_HANDLE_BYTES 64
#define CT_RECORD_ARGS      8

/*
 * One intercepted call. Written once by the thread that made the call, read
 * by the writer thread (and by recovery after a crash). Fixed size so that a
 * slot can be claimed with one atomic increment and no allocation.
 *
 * Field meanings that vary per API (ptr, size, flags, stream, arg[]) are
 * documented next to each hook and, for users, in docs/schema.md.
 */
struct ct_record {
    uint64_t seq;        /* per-process, assigned at call entry, starts at 1 */
    uint64_t parent_seq; /* the traced call of this thread that made this one, 0 = none */
    uint64_t t_ns;       /* CLOCK_MONOTONIC at entry */
    uint64_t dur_ns;     /* time inside the real function */
    uint64_t wait_ns;    /* time spent waiting for ring space after the call */
    uint64_t ptr;        /* the pointer the call made, freed or inspected */
    uint64_t size;       /* bytes requested (or reserved, see docs/schema.md) */
    uint64_t flags;
    uint64_t stream;
    uint64_t arg[CT_RECORD_ARGS]; /* API-specific values */
    uint64_t caller;              /* return address into the calling module, 0 = unknown */
    uint64_t stack_id;            /* 0 = no stack captured */
    int32_t tid;
    int32_t device; /* device current on the calling thread, -1 = unknown */
    int32_t result; /* the value the real function returned */
    uint16_t api;   /* enum ct_api of the writing build; see the apis table */
    uint8_t depth;  /* calls it is nested in: its parent's depth + 1, 0 at top level */
    uint8_t has_handle;
    uint8_t handle[CT_IPC_HANDLE_BYTES];
    /* Ring 6: calls started (seqs taken) by the time the real function
     * returned, >= seq; 0 = unknown (older rings), read as seq. Orders what
     * a call did against the calls of other threads (calls.effect_order). */
    uint64_t ret_seq;
    uint8_t reserved[8];
};

/*
 * A ring slot: `turn` implements the bounded MPSC protocol (see
 * preload/core/ring.c). A slot holds a complete, not yet committed record
 * exactly when ((turn - 1) & (capacity - 1)) == slot index.
 */
struct ct_slot {
    uint64_t turn;
    struct ct_record rec;
};

static_assert(sizeof(struct ct_record) == 248, "ct_record layout changed: bump CT_RING_VERSION");
static_assert(sizeof(struct ct_slot) == 256, "ct_slot must stay 256 bytes");

/*
 * An "entered" mark (ring 7): a call that can block (NCCL init, collectives,
 * synchronisations) copies its record, as far as it is known at entry, into
 * a free mark before it calls the real function, and frees the mark once
 * its record is in the ring. A killed process's marks that are still taken
 * are the calls it died inside. `state` is 0 free, 1 being written, and
 * 2 * seq once the record is complete: a reader that sees the same even
 * state before and after its copy, matching the copy's seq, has a whole
 * record (seqs are never reused, so a mark freed and taken again in between
 * cannot look the same). CT_RING_MARKS of them follow the slots.
 */
struct ct_mark {
    uint64_t state;
    struct ct_record rec;
};
#define CT_RING_MARKS      64
#define CT_MARK_FREE       0
#define CT_MARK_WRITING    1
#define CT_MARK_STATE(seq) ((seq)*2)
static_assert(sizeof(struct ct_mark) == sizeof(struct ct_slot), "a mark is a slot's size");
static_assert(__builtin_offsetof(struct ct_record, ret_seq) % 8 == 0, "ret_seq alignment");

/*
 * First page of a ring file. Slots start at CT_RING_HEADER_BYTES.
 *
 * Besides the queue cursors it carries what a dead process can no longer
 * tell its database: how it ended (end_state, set by exit/_exit/exec even
 * when the database could not be written) and why its writer stopped, if it
 * did (writer_error, writer_stopped_after = last sequence number committed).
 * `cutrace recover` moves both into the trace's meta table.
 *
 * `dropped` (ring 6) counts the calls that took a sequence number but whose
 * record the ring could not take: a signal handler's call that would have
 * waited on its own thread (preload/core/ring.c, session.c), or a call in
 * flight when the writer died. The writer and `cutrace recover` move it
 * into meta('dropped_records'), so a gap in seq is never silent. It sits
 * after the cursors' cache lines, which keep the offsets of ring 5.
 *
 * Ring 7: `alive_mono_ns` is the writer's heartbeat, stored at every pass of
 * its loop (every commit interval): the last moment the process is known to
 * have been alive, which `cutrace recover` keeps as meta('alive_mono_ns') so
 * that a killed process's calls in flight can be dated against its end.
 * `unmarked` counts blocking calls that found every mark taken (they are
 * traced as usual, only their entry is not crash-safe).
 */
struct ct_ring_header {
    char magic[8];
    uint32_t version;
    uint32_t slot_size;
    uint64_t capacity; /* slots, a power of two */
    int64_t pid;
    uint64_t start_wall_ns;
    uint64_t start_mono_ns;        /* CLOCK_MONOTONIC when the process (or fork) started */
    char db_name[256];             /* sibling trace file the records belong to */
    char boot_id[40];              /* liveness of pid is only meaningful on the same boot */
    char end_state[16];            /* "" while running; else as meta('end_state') */
    uint64_t writer_stopped_after; /* 0 unless the writer failed */
    char writer_error[200];
    uint8_t pad0[64 - ((8 + 4 + 4 + 8 + 8 + 8 + 8 + 256 + 40 + 16 + 8 + 200) % 64)];
    uint64_t head; /* next ticket producers claim (own cache line) */
    uint8_t pad1[56];
    uint64_t tail; /* next ticket the writer consumes (own cache line) */
    uint8_t pad2[56];
    uint64_t dropped;       /* atomic: records not taken, see above (ring 6; 0 before) */
    uint64_t alive_mono_ns; /* ring 7: the writer's last heartbeat, CLOCK_MONOTONIC */
    uint64_t unmarked;      /* ring 7, atomic: blocking calls that found no free mark */
};

/*
 * An auxiliary record (ring 4): not a call, but data that calls refer to
 * by id, sent once per process through the same ring so that it is as
 * crash-safe as the calls. Same size as a call's record, told apart by
 * seq == 0 and api == CT_AUX_API; the ring writes wait_ns into it like into
 * any record. include/cutrace/stackrec.h packs, reads and checks them.
 *   CT_AUX_FRAMES: frames [first, first + count) of the call stack `key`
 *     (a 63-bit hash of its frames, calls.stack_id), out of `total`, of
 *     which the first `native` are native return addresses (innermost
 *     first) and the rest Python frames (CT_PYFRAME_* below).
 *   CT_AUX_PYCODE: the names of Python code object `key` (a code id): the
 *     function name (`count` bytes) then its file (`total` bytes), no NULs.
 *     Ring 5: `first` is the size of its line table in the interpreter,
 *     `extra` its first line (extra[0] low 16 bits, extra[1] high) and the
 *     table's format (extra[2]: CT_PYLINES_*; 0 = no table follows).
 *   CT_AUX_PYLINES (ring 5): bytes [first, first + count) of the line table
 *     of code object `key`, out of `total` sent (at most CT_PYLINES_MAX: a
 *     longer table is cut, and its later instructions have no line).
 *   CT_AUX_META (ring 5): a meta entry for the trace, key (`count` bytes)
 *     then value (`total` bytes), no NULs; `key` is 1. Only the keys
 *     ct_aux_meta_key_allowed (stackrec.h) accepts: "python_frames", how
 *     the process read its Python frames, sent whenever that changes.
 */
#define CT_AUX_API 0xffff
enum ct_aux_kind { CT_AUX_FRAMES = 1, CT_AUX_PYCODE = 2, CT_AUX_PYLINES = 3, CT_AUX_META = 4 };

/*
 * A Python frame's 64-bit value in CT_AUX_FRAMES:
 *   bits 63-32  the code id (0: a code object whose names were not sent)
 *   bit  31     CT_PYFRAME_ENTRY: the first frame its eval-loop invocation
 *               ran (the interpreter's own entry marker); meaningful only
 *               with CT_PYFRAME_INSTR
 *   bit  30     CT_PYFRAME_INSTR: bits 29-0 are the byte offset of the
 *               frame's current instruction in its code's bytecode (its line
 *               comes from the code's line table, offline); without it,
 *               bits 29-0 are the line itself (0: unknown), as read through
 *               CPython's API, and nothing is known of entry frames
 * Ring 4 frames are (code id << 32) | line: the same encoding, bits 31-30 clear.
 */
#define CT_PYFRAME_ENTRY      (1u << 31)
#define CT_PYFRAME_INSTR      (1u << 30)
#define CT_PYFRAME_VALUE_MASK ((1u << 30) - 1)

/* Line table formats (CT_AUX_PYCODE extra[2], py_linetables.format). */
#define CT_PYLINES_NONE 0
#define CT_PYLINES_310  310 /* CPython 3.10's co_linetable: (bytes, line delta) pairs */
#define CT_PYLINES_311  311 /* 3.11 and later: the location table (Objects/locations.md) */
#define CT_PYLINES_MAX  32768

struct ct_aux_record {
    uint64_t seq; /* always 0 */
    uint64_t key;
    uint8_t kind; /* enum ct_aux_kind */
    uint8_t pad0;
    uint16_t first, count, total, native;
    uint16_t extra[3];      /* per kind, see above; 0 where unused */
    uint64_t wait_ns;       /* as in struct ct_record */
    uint8_t payload_a[124]; /* the payload: payload_a then payload_b */
    uint16_t api;           /* CT_AUX_API */
    uint16_t pad2;
    uint8_t payload_b[80];
};

#define CT_AUX_PAYLOAD_BYTES 204 /* 124 + 80 */
#define CT_AUX_FRAMES_PER    25  /* 15 in payload_a, 10 in payload_b */

static_assert(sizeof(struct ct_aux_record) == sizeof(struct ct_record), "aux record size");
static_assert(__builtin_offsetof(struct ct_aux_record, seq) ==
                  __builtin_offsetof(struct ct_record, seq),
              "aux seq");
static_assert(__builtin_offsetof(struct ct_aux_record, wait_ns) ==
                  __builtin_offsetof(struct ct_record, wait_ns),
              "aux wait_ns");
static_assert(__builtin_offsetof(struct ct_aux_record, api) ==
                  __builtin_offsetof(struct ct_record, api),
              "aux api");

#define CT_RING_HEADER_BYTES 4096
static_assert(sizeof(struct ct_ring_header) <= CT_RING_HEADER_BYTES, "ring header too large");
static_assert(__builtin_offsetof(struct ct_ring_header, head) % 64 == 0 &&
                  __builtin_offsetof(struct ct_ring_header, tail) % 64 == 0,
              "the ring's cursors have cache lines of their own");

#endif
