/*
 * hook_null.c - a template for a new hook family. Not linked into
 * libcutrace.so; `make test` compiles it so that it keeps matching the core.
 *
 * A hook family is one file in preload/hooks/ that wraps the functions of one
 * API (the CUDA runtime, the driver, NCCL, ...). It never touches files,
 * SQLite, threads or locks: the core does all of that. To add a family:
 *
 *   1. List its functions in include/cutrace/apis.h, one X() line each, with
 *      the layer and the role the analyzer should give them (alloc, free,
 *      meminfo, ...). That is all the SQL views and the analyzer need.
 *   2. Copy this file to preload/hooks/hook_<family>.c, include the API's
 *      official header (so every hook is type-checked against it), and write
 *      one hook per function as shown below.
 *   3. Add the file to PRELOAD_HOOK_SRC in preload/preload.mk.
 *   4. Document what ptr/size/flags/stream/arg[] mean for each function in the
 *      header comment of the file and in docs/schema.md.
 *
 * The example wraps `int nullAlloc(void **out, size_t bytes)`, a stand-in for
 * a vendor function that would be declared by the vendor's header.
 */
#include <stddef.h>
#include <stdint.h>

#include "../core/hook.h"

/* Normally from the vendor's header; declared here so the template compiles. */
int nullAlloc(void **out, size_t bytes);

/*
 * Step 1 (an X() line in apis.h) makes CT_API_nullAlloc; until then the
 * template borrows CT_API_NONE so that it compiles. The X() line's layer
 * tells the registry which library holds the real function (a new library
 * needs an entry in enum ct_lib and in registry.c's library_of()).
 */
#ifndef CT_API_nullAlloc
#define CT_API_nullAlloc CT_API_NONE
#endif

/* What a hook returns when the real function cannot be found (warned once). */
#define NULL_MISSING (-1)

/*
 * The hook: same name and prototype as the real function, exported with
 * CT_EXPORT, no symbol version. CT_REAL declares `real`, typed from the
 * prototype above, resolved once by the registry - which also hands this
 * hook out when a program finds nullAlloc with dlsym on a library handle.
 * CT_TRACE records one event around the call (even when the real function
 * is missing: then it returns NULL_MISSING); its trailing statements fill
 * the record from the arguments and the result `rc`.
 */
CT_EXPORT int nullAlloc(void **out, size_t bytes)
{
    CT_REAL(nullAlloc);
    CT_TRACE(CT_API_nullAlloc, int, NULL_MISSING, real(out, bytes), {
        ev.rec.size = bytes;
        ev.rec.ptr = (rc == 0 && out) ? ct_addr(*out) : 0;
    });
}
