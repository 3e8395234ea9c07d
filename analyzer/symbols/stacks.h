/*
 * stacks.h - the call stacks of one trace, symbolized, with the Python
 * frames merged in, and the call site of any call: what `cutrace sites`,
 * `cutrace diff` and `cutrace budget` use to say who allocated something
 * (docs/stacks.md).
 *
 * A trace of format 4 records a stack id per call (calls.stack_id, 0: none)
 * and each distinct stack once (the view stacks: native return addresses,
 * innermost first, then the Python frames). A call without a stack of its
 * own made inside another traced call (the runtime's cuMemAlloc_v2 inside a
 * cudaMalloc, NCCL's cuMemCreate inside ncclCommInitRank) has its caller's:
 * the GPU model's one pass over the events follows parent_seq and keeps
 * each allocation's stack id (gm_alloc.stack_id; model/pairing.c), so that
 * this module reads only the stack tables. Format 5 adds to each Python frame its
 * instruction offset and whether it was the first frame of its eval-loop
 * invocation (the interpreter's entry marker), which makes the merge of
 * Python frames into the native ones exact; format 4 traces merge as
 * before (docs/stacks.md, "Merging").
 *
 * Typical use, for one trace of an opened set:
 *
 *     struct symbolizer *sym = symbolizer_new();     (one per run: it caches)
 *     struct stack_set ss;
 *     if (stacks_load(t, sym, &ss) != 0) { trace_report_error(t); ... }
 *     enum site_kind kind;
 *     char *note;
 *     char *site = stacks_call_site(&ss, alloc->stack_id, "cudaMalloc", &kind, &note);
 *     ... "custom_all_reduce.py:142 create_shared_buffer", or NULL ...
 *     free(site);
 *     free(note);
 *     stacks_free(&ss);
 *     symbolizer_free(sym);
 */
#ifndef CUTRACE_ANALYZER_STACKS_H
#define CUTRACE_ANALYZER_STACKS_H

#include "out/json.h"
#include "symbols/symbolize.h"
#include "model/trace.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum stack_frame_kind { STACK_NATIVE, STACK_PYTHON };

struct stack_frame {
    enum stack_frame_kind kind;
    uint64_t ip;            /* native: the return address */
    const char *module;     /* native: the module's path, NULL when in none recorded */
    uint64_t offset;        /* native: ip minus the module's load bias */
    const char *symbol;     /* native: the function, demangled, NULL unknown; python: co_name */
    uint64_t symbol_offset; /* native: ip's offset into symbol */
    const char *file;       /* python: co_filename */
    int64_t line;           /* python: the line, 0 unknown */
    int64_t instr;          /* python: its instruction's byte offset in the bytecode, -1 unknown */
    int entry;              /* python: 1 the first frame its eval loop ran, 0 not, -1 unknown */
    bool named_now;         /* native: named by this run's symbolizer, not the trace */
    bool from_cache;        /* native: named from the cache beside the trace (symcache.h) */
    const char *unnamed;    /* native without a name: why, "libfoo.so: no function symbol at
                               this address"; NULL when named */
};

struct stack {
    int64_t id;
    /* Innermost first; Python frames replace the interpreter's eval-loop
     * frames they ran in (docs/stacks.md says how they are placed). */
    struct stack_frame *frames;
    size_t nframes;
    size_t nnative, npython;
    bool placement_guessed; /* several eval loops, not one Python frame each, and no
                               entry markers to say which ran which */
    const char *config;     /* the set's meta 'stacks' (for the site's note), NULL absent */
};

struct stack_set {
    bool present;         /* the trace records stacks (format 4 or later) */
    char *config;         /* meta 'stacks' as the process had it, NULL when absent */
    struct stack *stacks; /* by id */
    size_t nstacks;
    char *unnamed_example; /* the first module whose frames stayed unnamed, and why:
                              "libfoo.so: No such file or directory"; NULL if none */
    char *cache_key;       /* what the names cache beside the trace must be valid for */
    void *strings;         /* private */
};

/*
 * Loads the stacks of t, naming native frames with sym (NULL: leave them
 * unnamed). A trace from before stacks (format 3 or older) loads empty with
 * present = false. Returns 0, or -1 with t->error set (a damaged trace),
 * *out then empty (nothing to free).
 */
int stacks_load(struct trace *t, struct symbolizer *sym, struct stack_set *out);
void stacks_free(struct stack_set *s);

/* The stack of that id (a call's: gm_alloc.stack_id), NULL when none
 * (id 0: the call has none, nor any call it was made in). */
const struct stack *stacks_by_id(const struct stack_set *s, int64_t id);

enum site_kind { SITE_NONE, SITE_PYTHON, SITE_NATIVE };

/*
 * Where a stack's call was made, as people name it (malloc'd): the
 * innermost Python frame, "custom_all_reduce.py:142 create_shared_buffer",
 * passing over wrappers named like the API they call (a Python function
 * `cudaMalloc` around ctypes' cudaMalloc); without Python frames, the
 * innermost native frame that is neither a CUDA layer (libcudart, libcuda,
 * libcutrace) nor glue: between Python and C (libffi, ctypes' _ctypes*.so,
 * the interpreter's libpython3* or python3* executable), or the C library
 * where processes and threads start (libc.so*, libpthread, ld-linux);
 * "load_weights (server)" or "libfoo.so+0x1234". libc10/libtorch frames
 * are passed over too when the stack has Python frames. When only glue is
 * left, its innermost frame. api may be NULL. NULL (and SITE_NONE) when the
 * stack is NULL or empty.
 *
 * note (may be NULL) gets what a reader of the site should know, malloc'd,
 * or NULL: why a site is only module+0xOFFSET ("not named: libfoo.so: no
 * such file or directory"), or that the stack holds only the interpreter's
 * own frames because its Python frames were not read ("... python=off").
 */
char *stacks_site(const struct stack *st, const char *api, enum site_kind *kind, char **note);

/* stacks_site of stacks_by_id(s, stack_id). */
char *stacks_call_site(const struct stack_set *s, int64_t stack_id, const char *api,
                       enum site_kind *kind, char **note);

/* "site.py:12 fn", "fn+0x1c (libfoo.so)", "libfoo.so+0x1234" or "0x7f...": malloc'd. */
char *stack_frame_text(const struct stack_frame *f);

/* A frame for the folded-stack format: no ';', no newline. malloc'd. */
char *stack_frame_folded(const struct stack_frame *f);

/* The innermost Python frame whose function is one of names, or NULL. */
const struct stack_frame *stacks_find_python(const struct stack *st, const char *const *names,
                                             size_t nnames);

/*
 * For one call, without loading the whole trace: the innermost Python frame
 * of its stack (its own or its caller's) whose function is one of names,
 * as "init_torch_distributed (model_runner.py:312)" (malloc'd); NULL when
 * there is none, or the trace has no stacks. Damage reads as "none".
 */
char *stacks_python_function(struct trace *t, int64_t seq, const char *const *names, size_t nnames);

/*
 * The Python frames of one call's stack (its own or its caller's, as
 * above), innermost first, each handed to visit with its function
 * (co_name), file (co_filename, NULL unknown) and line (0 unknown) until
 * visit returns false. Nothing when the trace has no stacks; damage reads
 * as "none". What the budget uses to tell servers and versions apart by
 * the modules their measurements were made in.
 */
typedef bool (*stacks_python_visit)(void *ctx, const char *function, const char *file,
                                    int64_t line);
void stacks_python_frames(struct trace *t, int64_t seq, stacks_python_visit visit, void *ctx);

/*
 * Keeps the names this run gave native frames (with those it read from
 * the cache) in the cache beside the trace at path (symcache.h), never in
 * the trace: the next report, and SQL users who ATTACH the cache, find
 * them there (docs/stacks.md). Best effort: nothing happens when no frame
 * was named now or the directory cannot be written.
 */
void stacks_store_symbols(const char *path, const struct stack_set *s);

/* The frames as a JSON array of {kind, module, symbol, offset, file, line}. */
void stacks_json_frames(struct json_writer *w, const struct stack *st);

#endif
