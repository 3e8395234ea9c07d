/*
 * trace_fixture.h - builds synthetic trace files for the analyzer's tests.
 *
 * A fixture is created exactly as libcutrace creates a trace: CT_SCHEMA_SQL
 * from include/cutrace/schema.h, the apis table from include/cutrace/apis.h
 * (api_id = enum ct_api) and the meta keys, in WAL mode. Helpers add process,
 * device, env, module and event rows (an event's caller is the return
 * address the `module` columns map to a modules row), NCCL records laid out
 * as the NCCL hooks lay them out (the field comment above CT_SCHEMA_SQL) and
 * driver lookups as the driver_lookups view reads them; fixture_downgrade
 * turns a trace into one of an older format. Anything the helpers cannot
 * express (damaged or foreign files) goes through fixture_exec. Failures
 * abort the test.
 */
#ifndef CUTRACE_TESTS_TRACE_FIXTURE_H
#define CUTRACE_TESTS_TRACE_FIXTURE_H

#include "cutrace/apis.h"
#include "cutrace/format.h"

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

enum fixture_flags {
    FIXTURE_DEFAULT = 0,
    FIXTURE_NULLABLE = 1 << 0, /* the schema without NOT NULL, to store NULLs in events */
    FIXTURE_NO_META = 1 << 1,  /* no meta rows at all */
};

struct fixture_process {
    int64_t pid, ppid;
    const char *host, *cmdline, *exe;
    int64_t start_wall_ns, start_mono_ns;
    int64_t cuda_runtime_version, cuda_driver_version;
    int64_t nccl_version; /* 0 is stored as NULL: NCCL was not loaded */
};

/* One row of `events`; a zero seq takes the next number, a zero t_ns
 * puts the event 1 us after the previous one and a zero ret_seq is seq
 * (the call returned before the next one started). */
struct fixture_event {
    int64_t seq, parent_seq; /* parent_seq 0 is stored as NULL */
    int64_t ret_seq;         /* calls started by the time it returned (format 6) */
    int64_t t_ns, dur_ns, wait_ns, tid;
    enum ct_api api;
    int64_t device, result, depth, ptr, size, flags, stream;
    int64_t arg[CT_RECORD_ARGS];
    int64_t caller;     /* return address into the issuing module; 0 unknown */
    const void *handle; /* NULL: no handle */
    size_t handle_len;
};

struct fixture;

/* Creates path (which must not exist) with the schema, apis and meta
 * schema/format_version/producer/end_state('exit'). */
struct fixture *fixture_create(const char *path, unsigned flags);
/* Commits, checkpoints and closes: the file is complete afterwards. */
void fixture_close(struct fixture *f);
/* Commits what was added so far but keeps the writer open with its data in
 * the -wal file, like a traced process that is still running. */
void fixture_flush(struct fixture *f);

sqlite3 *fixture_db(struct fixture *f);
void fixture_exec(struct fixture *f, const char *sql);
/* sql with one integer parameter. */
void fixture_exec_int(struct fixture *f, const char *sql, int64_t value);
void fixture_meta(struct fixture *f, const char *key, const char *value);
void fixture_meta_int(struct fixture *f, const char *key, int64_t value);

void fixture_process(struct fixture *f, const struct fixture_process *p);
void fixture_device(struct fixture *f, int64_t device, const char *uuid, const char *name,
                    int64_t total_bytes);
void fixture_env(struct fixture *f, const char *name, const char *value);

/* Adds a modules row (path NULL stores NULL, for FIXTURE_NULLABLE) covering
 * [start, end) and returns its module_id; base is start. */
int64_t fixture_module(struct fixture *f, const char *path, int64_t start, int64_t end);

/*
 * A driver entry-point lookup (cuGetProcAddress[_v2],
 * cudaGetDriverEntryPoint[ByVersion]) of `symbol` as the view reads it: the
 * name in the handle blob, its length in arg2, the CUDA version asked for
 * in arg0 (12000), wrapped in arg1, the address returned in ptr (0 when it
 * failed). parent_seq 0: made at top level.
 */
int64_t fixture_lookup(struct fixture *f, enum ct_api api, const char *symbol, int wrapped,
                       int64_t result, int64_t parent_seq, int64_t caller);

/*
 * Makes the complete (closed) trace at path look written by an older
 * cutrace: format 6 has no ancestors table; format 5 also has no events.ret_seq and no effect
 * orders (its views pair frees by seq); format 2 also has no modules table, no driver_lookups view
 * and no module column in calls and allocations; format 1 also lacks the NCCL views and
 * process.nccl_version.
 */
void fixture_downgrade(const char *path, int format);

/* Adds an event and returns its seq. */
int64_t fixture_event(struct fixture *f, const struct fixture_event *e);
/* Shorthands for the common shapes. */
int64_t fixture_call(struct fixture *f, enum ct_api api, int64_t device, int64_t ptr, int64_t size,
                     int64_t result);
int64_t fixture_meminfo(struct fixture *f, int64_t device, int64_t free_bytes, int64_t total_bytes);
/* An NVTX record as hook_nvtx.c writes it (docs/nvtx.md): the message (NULL:
 * none) in the handle with its length in arg2, the domain in arg0, the range
 * id or push level in arg1; device 0. */
int64_t fixture_nvtx(struct fixture *f, enum ct_api api, int64_t tid, int64_t domain, int64_t arg1,
                     const char *message);

/*
 * NCCL records. Communicator handles are the `comm` values the program
 * would see (any non-zero number); the views join calls to inits by them.
 */

/* ncclDataType_t numbers as NCCL defines them (and the collectives view names). */
enum fixture_nccl_type {
    NCCL_INT8 = 0,
    NCCL_INT32 = 2,
    NCCL_FLOAT16 = 6,
    NCCL_FLOAT32 = 7,
    NCCL_BFLOAT16 = 9,
};
#define FIXTURE_NCCL_NONE (-1) /* redop or root/peer not applicable */

/* An init (ncclCommInitRank and friends, or ncclCommSplit with parent != 0). */
struct fixture_nccl_init {
    enum ct_api api; /* 0: ncclCommInitRank, or ncclCommSplit when parent != 0 */
    int64_t comm;    /* the new handle; 0 with a failed init */
    int64_t nranks, rank;
    uint64_t hash;                /* unique-id hash, the same in every rank */
    int64_t parent, color, key;   /* splits only */
    int64_t device, result, t_ns; /* t_ns 0: the fixture's clock */
    int64_t caller;               /* return address into the issuing module; 0 unknown */
    int64_t dur_ns;               /* time inside the init; 0: 50 us */
};
int64_t fixture_nccl_init(struct fixture *f, const struct fixture_nccl_init *init);

/* One collective or p2p call, every field explicit (see the helpers below). */
struct fixture_nccl_call {
    enum ct_api api;
    int64_t comm, count, datatype;
    int64_t redop; /* FIXTURE_NCCL_NONE or ncclRedOp_t (0 sum) */
    int64_t peer;  /* FIXTURE_NCCL_NONE, or the root / the peer */
    int64_t bytes, group_depth;
    int captured; /* 1: the stream was capturing a CUDA graph */
    int64_t device, result, dur_ns, stream, sendbuff, recvbuff;
};
int64_t fixture_nccl_call(struct fixture *f, const struct fixture_nccl_call *c);

/*
 * A collective of `bytes` on comm as a program makes it: count from the
 * type's size, sum for the reducing ops, root 0 for the rooted ones,
 * device 0, 2 us inside NCCL.
 */
int64_t fixture_nccl_collective(struct fixture *f, enum ct_api op, int64_t comm, int64_t datatype,
                                int64_t bytes, int64_t group_depth, int captured);
/* ncclSend/ncclRecv of `bytes` (int8) to/from peer. */
int64_t fixture_nccl_p2p(struct fixture *f, enum ct_api op, int64_t comm, int64_t peer,
                         int64_t bytes, int64_t group_depth);
/* ncclCommDestroy, ncclCommAbort or ncclCommFinalize of comm. */
int64_t fixture_nccl_end(struct fixture *f, enum ct_api api, int64_t comm);
/* ncclGroupStart / ncclGroupEnd. */
int64_t fixture_nccl_group(struct fixture *f, enum ct_api api);

/*
 * Call stacks (docs/stacks.md), as the writer stores them: loaded_modules
 * rows, stack_frames rows (format 5: with instr and entry), py_code rows,
 * names in the symbols table, line tables in py_linetables.
 */
#define FIXTURE_NULL INT64_MIN /* an instr or entry stored as NULL */

struct fixture_frame {
    int python;           /* 0: native, 1: Python */
    int64_t ip;           /* native: the return address */
    const char *symbol;   /* native: its name in the symbols table (NULL: none); Python: function */
    const char *file;     /* Python: co_filename */
    int64_t line;         /* Python: 0 unknown */
    int64_t instr, entry; /* Python, format 5: stored as given, FIXTURE_NULL as NULL */
};

/* A loaded_modules row for path (build_id NULL: none recorded) covering
 * [start, end) with base start; returns its load_id. */
int64_t fixture_loaded_module(struct fixture *f, const char *path, const char *build_id,
                              int64_t start, int64_t end);
/* The code id of (function, file) in py_code, added when new. */
int64_t fixture_py_code(struct fixture *f, const char *function, const char *file);
/* Stack `id`: frames innermost first (the writer puts the native ones
 * first, then the Python ones), at depths 0, 1, ... */
void fixture_stack(struct fixture *f, int64_t id, const struct fixture_frame *frames, size_t n);
/* Makes call seq's stack `id` (events.stack_id). */
void fixture_call_stack(struct fixture *f, int64_t seq, int64_t stack_id);
/* A py_linetables row for code_id (format CT_PYLINES_*). */
void fixture_linetable(struct fixture *f, int64_t code_id, int64_t format, int64_t first_line,
                       const void *bytes, size_t len);
/* Gives the (open) trace format 4's stack tables: stack_frames and the
 * stacks view without instr and entry, no py_linetables; meta
 * format_version 4. Before any fixture_stack. */
void fixture_stacks_format4(struct fixture *f);

/* Monotonic time of the next event and the default spacing (1 us). */
int64_t fixture_next_t(const struct fixture *f);
void fixture_set_clock(struct fixture *f, int64_t next_t_ns);

/* "<dir>/<host>-<pid>-<start_wall_ns>.db", malloc'd. */
char *fixture_trace_path(const char *dir, const char *host, int64_t pid, int64_t start_wall_ns);

#endif
