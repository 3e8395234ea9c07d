/*
 * schema.h - the SQL of a trace file: private tables and the public views.
 *
 * The writer stores raw facts only (one `events` row per intercepted call);
 * everything derived, such as which free ended which allocation, lives in
 * views. That keeps the hot path and the writer dumb, makes crash recovery a
 * matter of inserting missing events, and lets a later release fix a
 * derivation without rewriting old traces.
 *
 * Public contract (docs/schema.md documents every column): the views
 * calls, allocations, meminfo, ipc, stacks, nvtx and the tables process, ancestors,
 * devices, env, loaded_modules.
 * Everything else (events, apis, meta, mem_events) is an implementation detail
 * that tools should not query.
 */
#ifndef CUTRACE_SCHEMA_H
#define CUTRACE_SCHEMA_H

/*
 * Tables and views, created once in a new trace inside one transaction.
 *
 * logical_events: one row per logical event. A call made inside a traced
 * call of the same role (the cuMemGetInfo_v2 of a cudaMemGetInfo, the
 * cuMemAlloc_v2 of a cudaMalloc: any memory call inside another) is the same
 * event seen twice, and is left out; a cuMemCreate inside ncclCommInitRank
 * is not, because NCCL's buffers exist only at the driver level.
 *
 * mem_events: successful memory events of logical_events. cuMemCreate at a host location (arg1 =
 * location type
 * != CU_MEM_LOCATION_TYPE_DEVICE) is kind vmm_host: not GPU memory.
 *
 * modules: the loaded objects the writer found callers in; calls.module is
 * the one holding the call's return address, i.e. the library that issued
 * it ("NCCL's own buffers" are the allocations whose module is libnccl).
 *
 * allocations: an allocation ends at the first later free of the same
 * pointer in the same space, at a reset of its device, or, when the pointer
 * is handed out again without a traced free, at that new allocation
 * (free_api = 'implicit'). "Later" is in effect order (CT_EFFECT_ORDER_SQL),
 * not seq: threads reuse each other's pointers.
 *
 * ancestors (format 7): the processes this one descends from that were
 * started inside the run (their environment held CUTRACE_DIR), depth 1 the
 * parent, with command lines redacted as process.cmdline is: where a
 * spawned worker's launcher flags are (preload/core/ancestry.c).
 *
 * communicators, collectives: NCCL records carry the communicator handle in
 * arg0. A communicator's id is the seq of the successful init that made it;
 * a later call on the same handle belongs to the latest such init before it
 * (handles are reused after destroy), found with a running MAX over the
 * calls of each handle. NCCL fields: init: arg1 nranks, arg2 rank, arg3
 * unique-id hash, arg4 parent comm (split), arg5 color, arg6 key;
 * collectives: arg1 count, arg2 datatype, arg3 redop (-1 none), arg4 root or
 * peer (-1 none), arg5 recvbuff, arg6 group depth, arg7 capture status.
 */
/*
 * The order in which calls took effect (format 6: calls.effect_order, in
 * logical_events, mem_events and allocations too), over events e joined to
 * apis a. seq is taken when a call starts, but a free takes effect after it
 * started and an allocation before it returned; ret_seq counts the calls
 * started by the time the real function returned (ret_seq >= seq). A
 * release - any call but an acquisition - takes effect at 2 * seq, an
 * acquisition (role alloc: mallocs, opens, imports, cuMemCreate,
 * reservations) at 2 * ret_seq + 1. So a free that started before an
 * allocation returned (seq <= ret_seq) comes first: the pointer it gave back
 * may be the one the allocation got from another thread; one that started
 * after it returned (seq > ret_seq) comes after. An allocation still comes
 * before its own free, whoever makes it: that thread got the pointer from
 * its return. Never below 2 * seq (ret_seq below seq, only in a damaged
 * trace, counts as seq); acquisitions that returned at the same count tie
 * and go by seq. gpumodel.c reads the column: one definition, here.
 */
#define CT_EFFECT_ORDER_SQL                                                                        \
    "(CASE WHEN a.role = 'alloc' THEN 2 * max(e.seq, coalesce(e.ret_seq, e.seq)) + 1"              \
    " ELSE 2 * e.seq END)"

#define CT_SCHEMA_SQL                                                                              \
    "CREATE TABLE meta(key TEXT PRIMARY KEY, value) WITHOUT ROWID;\n"                              \
    "CREATE TABLE apis(api_id INTEGER PRIMARY KEY, name TEXT NOT NULL, layer TEXT NOT NULL,"       \
    " role TEXT NOT NULL, space TEXT NOT NULL, kind TEXT NOT NULL);\n"                             \
    "CREATE TABLE process(pid INTEGER, ppid INTEGER, host TEXT, cmdline TEXT,"                     \
    " start_wall_ns INTEGER, start_mono_ns INTEGER, cuda_runtime_version INTEGER,"                 \
    " cuda_driver_version INTEGER, exe TEXT, boot_id TEXT, uid INTEGER, nccl_version INTEGER);\n"  \
    "CREATE TABLE ancestors(depth INTEGER PRIMARY KEY, pid INTEGER, start_ticks INTEGER,"          \
    " cmdline TEXT);\n"                                                                            \
    "CREATE TABLE devices(device INTEGER PRIMARY KEY, uuid TEXT, pci_bus_id TEXT, name TEXT,"      \
    " total_bytes INTEGER, first_seq INTEGER);\n"                                                  \
    "CREATE TABLE env(name TEXT PRIMARY KEY, value TEXT) WITHOUT ROWID;\n"                         \
    "CREATE TABLE modules(module_id INTEGER PRIMARY KEY, path TEXT NOT NULL, base INTEGER,"        \
    " start_addr INTEGER NOT NULL, end_addr INTEGER NOT NULL);\n"                                  \
    "CREATE TABLE events(seq INTEGER PRIMARY KEY, parent_seq INTEGER, t_ns INTEGER NOT NULL,"      \
    " dur_ns INTEGER NOT NULL, wait_ns INTEGER NOT NULL, tid INTEGER NOT NULL,"                    \
    " api_id INTEGER NOT NULL, device INTEGER NOT NULL, result INTEGER NOT NULL,"                  \
    " depth INTEGER NOT NULL, ptr INTEGER NOT NULL, size INTEGER NOT NULL,"                        \
    " flags INTEGER NOT NULL, stream INTEGER NOT NULL, arg0 INTEGER NOT NULL,"                     \
    " arg1 INTEGER NOT NULL, arg2 INTEGER NOT NULL, arg3 INTEGER NOT NULL,"                        \
    " arg4 INTEGER NOT NULL, arg5 INTEGER NOT NULL, arg6 INTEGER NOT NULL,"                        \
    " arg7 INTEGER NOT NULL, caller INTEGER NOT NULL, stack_id INTEGER NOT NULL, handle BLOB,"     \
    " ret_seq INTEGER NOT NULL);\n" CT_VIEWS_SQL(CT_ONE_Q, CT_ONE_P, CT_ONE_A, CT_ONE_W)           \
        CT_SCHEMA_STACKS_SQL CT_SCHEMA_INFLIGHT_SQL

/*
 * The views, written once for two schemas: a trace's (one process), and a
 * packed run's (analyzer/model/packed.h), whose tables hold every process
 * of a run and start with a `process` column. The parameters are macros:
 * Q(x) and P() start a select list or a PARTITION BY ("x.process, " and
 * "process, " in a pack), A(x, y) ends the condition of a join or of a
 * correlated subquery (" AND x.process = y.process"), W(x, y) starts one
 * ("x.process = y.process AND "). In a trace they are all empty, so that
 * CT_SCHEMA_SQL is the SQL it always was. A view added here uses them
 * wherever it joins, correlates or partitions rows.
 */
#define CT_ONE_Q(x)     ""
#define CT_ONE_P()      ""
#define CT_ONE_A(x, y)  ""
#define CT_ONE_W(x, y)  ""
#define CT_PACK_Q(x)    #x ".process, "
#define CT_PACK_P()     "process, "
#define CT_PACK_A(x, y) " AND " #x ".process = " #y ".process"
#define CT_PACK_W(x, y) #x ".process = " #y ".process AND "

// clang-format off
#define CT_VIEWS_SQL(Q, P, A, W)                                                                   \
    "CREATE VIEW calls AS SELECT " Q(e) "e.seq, e.t_ns, e.dur_ns, e.tid, a.name AS api, a.layer,"  \
    " e.device, e.ptr, e.size, e.result, (e.depth > 0) AS nested, e.parent_seq, e.flags,"          \
    " e.stream, e.arg0, e.arg1, e.arg2, e.arg3, e.wait_ns, e.arg4, e.arg5, e.arg6, e.arg7,"        \
    " (SELECT m.path FROM modules m WHERE " W(m, e)                                                \
    "e.caller >= m.start_addr AND e.caller < m.end_addr)"                                          \
    " AS module, e.caller, e.stack_id, e.ret_seq, " CT_EFFECT_ORDER_SQL " AS effect_order"         \
    " FROM events e JOIN apis a ON a.api_id = e.api_id" A(a, e) ";\n"                              \
    "CREATE VIEW logical_events AS SELECT e.*, a.name AS api, a.layer, a.role, a.space,"           \
    " a.kind AS api_kind, " CT_EFFECT_ORDER_SQL " AS effect_order"                                 \
    " FROM events e JOIN apis a ON a.api_id = e.api_id" A(a, e)                                    \
    " LEFT JOIN events p ON p.seq = e.parent_seq" A(p, e)                                          \
    " LEFT JOIN apis pa ON pa.api_id = p.api_id" A(pa, p)                                          \
    " WHERE pa.role IS NULL OR NOT (pa.role = a.role OR (pa.role IN ('alloc', 'free', 'reset')"    \
    " AND a.role IN ('alloc', 'free', 'reset')));\n"                                               \
    "CREATE VIEW mem_events AS SELECT " P() "seq, t_ns, device, ptr, size, api, role, space,"      \
    " CASE WHEN api_kind = 'vmm' AND arg1 != 1 THEN 'vmm_host' ELSE api_kind END AS kind,"         \
    " caller, effect_order FROM logical_events WHERE result = 0"                                   \
    " AND role IN ('alloc', 'free', 'reset');\n"                                                   \
    "CREATE VIEW allocations AS WITH m AS (SELECT *, LEAD(role) OVER w AS next_role,"              \
    " LEAD(seq) OVER w AS next_seq, LEAD(t_ns) OVER w AS next_t_ns, LEAD(api) OVER w AS next_api," \
    " LEAD(effect_order) OVER w AS next_order FROM mem_events WHERE role IN ('alloc', 'free')"     \
    " WINDOW w AS (PARTITION BY " P() "space, ptr ORDER BY effect_order, seq))," " r AS (SELECT "  \
    P() "seq, t_ns, device, api, effect_order FROM mem_events WHERE role = 'reset'),"              \
    " j AS (SELECT m.*, (SELECT MIN(r.effect_order) FROM r WHERE r.device = m.device" A(r, m)      \
    " AND r.effect_order > m.effect_order AND m.space IN ('device', 'host', 'ipc'))"               \
    " AS reset_order FROM m WHERE m.role = 'alloc'),"                                              \
    " k AS (SELECT j.*, (j.next_seq IS NOT NULL AND (j.reset_order IS NULL"                        \
    " OR j.next_order < j.reset_order)) AS by_next FROM j)" " SELECT " Q(k)                        \
    "k.seq, k.api, k.device, k.ptr, k.size, k.kind, k.t_ns,"                                       \
    " CASE WHEN k.by_next THEN k.next_seq"                                                         \
    " ELSE (SELECT r.seq FROM r WHERE r.effect_order = k.reset_order" A(r, k) ") END AS free_seq," \
    " CASE WHEN k.by_next THEN k.next_t_ns"                                                        \
    " ELSE (SELECT r.t_ns FROM r WHERE r.effect_order = k.reset_order" A(r, k)                     \
    ") END AS free_t_ns,"                                                                          \
    " CASE WHEN k.by_next THEN (CASE WHEN k.next_role = 'free' THEN k.next_api"                    \
    " ELSE 'implicit' END)" " ELSE (SELECT r.api FROM r WHERE r.effect_order = k.reset_order"      \
    A(r, k) ") END AS free_api," " (SELECT md.path FROM modules md WHERE " W(md, k)                \
    "k.caller >= md.start_addr AND k.caller < md.end_addr)"                                        \
    " AS module, k.effect_order, CASE WHEN k.by_next THEN k.next_order ELSE k.reset_order END"     \
    " AS free_effect_order FROM k;\n"                                                              \
    "CREATE VIEW meminfo AS SELECT " P()                                                           \
    "seq, t_ns, device, arg0 AS free_bytes, arg1 AS total_bytes"                                   \
    " FROM logical_events WHERE role = 'meminfo' AND result = 0;\n"                                \
    "CREATE VIEW ipc AS SELECT " P()                                                               \
    "seq, t_ns, api, device, ptr, lower(hex(handle)) AS handle_hex,"                               \
    " result, flags FROM logical_events WHERE handle IS NOT NULL"                                  \
    " AND (role = 'ipc_export' OR (role = 'alloc' AND space = 'ipc'));\n"                          \
    "CREATE VIEW driver_lookups AS SELECT " Q(e) "e.seq, e.t_ns, a.name AS api,"                   \
    " CAST(substr(e.handle, 1, e.arg2) AS TEXT) AS symbol, e.arg0 AS version, e.flags,"            \
    " e.result, e.ptr, e.arg1 AS wrapped FROM events e JOIN apis a ON a.api_id = e.api_id" A(a, e) \
    " WHERE a.role = 'lookup';\n"                                                                  \
    "CREATE VIEW nccl_events AS SELECT e.*, a.name AS api, a.role FROM events e"                   \
    " JOIN apis a ON a.api_id = e.api_id" A(a, e) " WHERE a.layer = 'nccl';\n"                     \
    "CREATE VIEW communicators AS WITH x AS (SELECT " P() "seq, t_ns, role, result, arg0,"         \
    " MAX(CASE WHEN role = 'comm_init' AND result = 0 THEN seq END) OVER (PARTITION BY " P()       \
    "arg0" " ORDER BY seq ROWS UNBOUNDED PRECEDING) AS comm_id FROM nccl_events"                   \
    " WHERE role IN ('comm_init', 'comm_destroy', 'comm_finalize'))," " ends AS (SELECT " P()      \
    "comm_id, MIN(CASE WHEN role = 'comm_destroy' THEN t_ns END) AS " "t_destroy_ns,"              \
    " MIN(CASE WHEN role = 'comm_finalize' THEN t_ns END) AS t_finalize_ns FROM x"                 \
    " WHERE result = 0 AND comm_id IS NOT NULL AND role != 'comm_init' GROUP BY " P() "comm_id)"   \
    " SELECT " Q(i) "i.seq AS comm_id, printf('%016x', i.arg3) AS unique_id_hash, i.arg2 AS rank," \
    " i.arg1 AS nranks, i.device, CASE WHEN i.arg4 != 0 THEN (SELECT MAX(p.seq) FROM x p"          \
    " WHERE p.role = 'comm_init' AND p.result = 0 AND p.arg0 = i.arg4 AND p.seq < i.seq" A(p, i)   \
    ") END" " AS parent_comm_id, i.t_ns AS t_init_ns, ends.t_destroy_ns, i.result AS init_result," \
    " i.api, i.arg0 AS comm, CASE WHEN i.arg4 != 0 THEN i.arg5 END AS color,"                      \
    " CASE WHEN i.arg4 != 0 THEN i.arg6 END AS key, ends.t_finalize_ns"                            \
    " FROM nccl_events i LEFT JOIN ends ON ends.comm_id = i.seq" A(ends, i)                        \
    " WHERE i.role = 'comm_init' AND NOT (i.result = 0 AND i.arg0 = 0);\n"                         \
    "CREATE VIEW collectives AS WITH x AS (SELECT *, MAX(CASE WHEN role = 'comm_init'"             \
    " AND result = 0 THEN seq END) OVER (PARTITION BY " P() "arg0 ORDER BY seq"                    \
    " ROWS UNBOUNDED PRECEDING) AS comm_id FROM nccl_events"                                       \
    " WHERE role IN ('comm_init', 'collective', 'p2p'))" " SELECT " P()                            \
    "seq, t_ns, dur_ns, api AS op, comm_id, arg1 AS count, CASE arg2"                              \
    " WHEN 0 THEN 'int8' WHEN 1 THEN 'uint8' WHEN 2 THEN 'int32' WHEN 3 THEN 'uint32'"             \
    " WHEN 4 THEN 'int64' WHEN 5 THEN 'uint64' WHEN 6 THEN 'float16' WHEN 7 THEN 'float32'"        \
    " WHEN 8 THEN 'float64' WHEN 9 THEN 'bfloat16' WHEN 10 THEN 'float8e4m3'"                      \
    " WHEN 11 THEN 'float8e5m2' ELSE 'type' || arg2 END AS datatype, size AS bytes,"               \
    " CASE WHEN arg3 < 0 THEN NULL WHEN arg3 = 0 THEN 'sum' WHEN arg3 = 1 THEN 'prod'"             \
    " WHEN arg3 = 2 THEN 'max' WHEN arg3 = 3 THEN 'min' WHEN arg3 = 4 THEN 'avg'"                  \
    " ELSE 'custom' END AS redop, CASE WHEN arg4 >= 0 THEN arg4 END AS peer, stream,"              \
    " arg6 AS in_group, (arg7 = 1) AS captured, result, ptr AS sendbuff, arg5 AS recvbuff,"        \
    " tid, device FROM x WHERE role IN ('collective', 'p2p');\n" CT_NVTX_VIEW_SQL(Q, P, A)
// clang-format on

/*
 * nvtx: the program's NVTX ranges and marks (libcutrace.so is NVTX's
 * injection library: preload/hooks/hook_nvtx.c says what each column of
 * the records holds, docs/nvtx.md what they mean). kind is mark, start,
 * end, push, pop or domain (a domain's creation, which names its id);
 * NCCL's own ranges (domain NCCL) carry its extended payload: the
 * communicator hash, and a collective's bytes. No format bump: the records
 * are rows of `events` like any call, and a trace without NVTX has none.
 */
// clang-format off
#define CT_NVTX_VIEW_SQL(Q, P, A)                                                                  \
    "CREATE VIEW nvtx AS WITH x AS (SELECT e.*, a.name AS api, a.role FROM events e"               \
    " JOIN apis a ON a.api_id = e.api_id" A(a, e) " WHERE a.layer = 'nvtx'),"                      \
    " d AS (SELECT " P() "arg0 AS domain_id, CAST(substr(handle, 1, arg2) AS TEXT) AS name,"       \
    " MIN(seq) AS first_seq FROM x WHERE role = 'nvtx_domain' GROUP BY " P() "arg0)"               \
    " SELECT " Q(x) "x.seq, x.t_ns, x.tid, x.device, substr(x.role, 6) AS kind,"                   \
    " x.arg0 AS domain_id, d.name AS domain, CAST(substr(x.handle, 1, x.arg2) AS TEXT) AS message,"\
    " (x.flags >> 33) & 1 AS cut, CASE WHEN x.role IN ('nvtx_start', 'nvtx_end') THEN x.arg1 END"  \
    " AS range_id, CASE WHEN x.role IN ('nvtx_push', 'nvtx_pop') THEN x.arg1 END AS level,"      \
    " x.arg3 AS category, CASE WHEN x.flags & 4294967296 THEN x.flags & 4294967295 END AS color,"  \
    " x.arg4 AS payload_type, x.arg5 AS payload,"                                                  \
    " CASE WHEN d.name = 'NCCL' AND x.arg4 = 3753705481 THEN printf('%016x', x.arg6) END"          \
    " AS nccl_comm_hash, CASE WHEN d.name = 'NCCL' AND x.arg4 = 3753705481"                        \
    " AND CAST(substr(x.handle, 1, x.arg2) AS TEXT) IN ('ncclAllReduce', 'ncclAllGather',"         \
    " 'ncclBroadcast', 'ncclReduce', 'ncclReduceScatter', 'ncclSend', 'ncclRecv')"                 \
    " THEN x.arg7 END AS nccl_bytes, x.parent_seq, x.caller"                                       \
    " FROM x LEFT JOIN d ON d.domain_id = x.arg0" A(d, x) ";\n"
// clang-format on

/*
 * Call stacks (format 4, docs/stacks.md). stack_frames: one row per frame of
 * each distinct stack (calls.stack_id), innermost first: the native frames
 * (kind 0, value = return address) then the Python frames (kind 1, value =
 * (code_id << 32) | line, line 0 = unknown). Format 5 adds to Python frames
 * instr (the byte offset of the frame's instruction in its bytecode, NULL
 * when the frame was read through CPython's API) and entry (1: the first
 * frame its eval-loop invocation ran, 0: not, NULL: unknown).
 * py_code: the names of each Python code object; py_linetables (format 5):
 * its line table as the interpreter had it (format 310 or 311, the first
 * line, the table's full size; bytes may be shorter when it was cut), from
 * which the writer took each frame's line. loaded_modules: every object
 * loaded in the process, recorded at the writer's start and again whenever
 * the set changed (first_seq: the last call committed then). symbols:
 * native frame names, filled by the analyzer when it symbolizes (the
 * process never does). The view stacks joins them.
 */
#define CT_SCHEMA_STACKS_SQL                                                                       \
    "CREATE TABLE stack_frames(stack_id INTEGER NOT NULL, depth INTEGER NOT NULL,"                 \
    " kind INTEGER NOT NULL, value INTEGER NOT NULL, instr INTEGER, entry INTEGER,"                \
    " PRIMARY KEY (stack_id, depth)) WITHOUT ROWID;\n"                                             \
    "CREATE TABLE py_code(code_id INTEGER PRIMARY KEY, function TEXT NOT NULL,"                    \
    " file TEXT NOT NULL);\n"                                                                      \
    "CREATE TABLE py_linetables(code_id INTEGER PRIMARY KEY, format INTEGER NOT NULL,"             \
    " first_line INTEGER NOT NULL, size INTEGER NOT NULL, bytes BLOB NOT NULL);\n"                 \
    "CREATE TABLE loaded_modules(load_id INTEGER PRIMARY KEY, path TEXT NOT NULL, build_id TEXT,"  \
    " base INTEGER NOT NULL, start_addr INTEGER NOT NULL, end_addr INTEGER NOT NULL,"              \
    " first_seq INTEGER NOT NULL);\n"                                                              \
    "CREATE TABLE symbols(ip INTEGER PRIMARY KEY, symbol TEXT NOT NULL);\n" CT_STACKS_VIEW_SQL(    \
        CT_ONE_Q, CT_ONE_A, CT_ONE_W)

/* The stacks view, for a trace or a pack (CT_VIEWS_SQL says how). */
// clang-format off
#define CT_STACKS_VIEW_SQL(Q, A, W)                                                                \
    "CREATE VIEW stacks AS SELECT " Q(f) "f.stack_id, f.depth, m.path AS module,"                  \
    " CASE WHEN f.kind = 0 THEN s.symbol ELSE c.function END AS symbol,"                           \
    " CASE WHEN f.kind = 0 THEN f.value - m.base END AS offset, c.file,"                           \
    " CASE WHEN f.kind = 1 THEN nullif(f.value & 4294967295, 0) END AS line,"                      \
    " CASE WHEN f.kind = 0 THEN 'native' ELSE 'python' END AS kind,"                               \
    " CASE WHEN f.kind = 0 THEN f.value END AS ip, f.instr, f.entry FROM stack_frames f"           \
    " LEFT JOIN loaded_modules m ON f.kind = 0" A(m, f) " AND m.load_id = (SELECT x.load_id"       \
    " FROM loaded_modules x WHERE " W(x, f) "f.value >= x.start_addr AND f.value < x.end_addr"     \
    " ORDER BY x.load_id DESC LIMIT 1)" " LEFT JOIN py_code c ON f.kind = 1" A(c, f)               \
    " AND c.code_id = (f.value >> 32)" " LEFT JOIN symbols s ON f.kind = 0" A(s, f)                \
    " AND s.ip = f.value;\n"
// clang-format on

/* A packed run's views: every process at once, with its `process` column. */
#define CT_PACK_VIEWS_SQL                                                                          \
    CT_VIEWS_SQL(CT_PACK_Q, CT_PACK_P, CT_PACK_A, CT_PACK_W)                                       \
    CT_STACKS_VIEW_SQL(CT_PACK_Q, CT_PACK_A, CT_PACK_W)                                            \
    CT_INFLIGHT_VIEW_SQL(CT_PACK_Q, CT_PACK_A)

/*
 * Calls that never returned (format 7): a call that can block leaves an
 * "entered" mark in its ring (format.h, struct ct_mark), and `cutrace
 * recover` turns each mark of a killed process whose call has no events
 * row into an `inflight` row: the record as it was at entry (what the
 * call's arguments say; no duration, no result, no ret_seq). They are kept
 * apart from `events`, so no view counts them as calls; the view
 * inflight_calls names their api. A trace folded by an older cutrace has
 * no such table; both are made IF NOT EXISTS so a fold can add them to a
 * trace that lacks them.
 */
// clang-format off
#define CT_SCHEMA_INFLIGHT_SQL                                                                     \
    "CREATE TABLE IF NOT EXISTS inflight(seq INTEGER PRIMARY KEY, parent_seq INTEGER,"             \
    " t_ns INTEGER NOT NULL, tid INTEGER NOT NULL, api_id INTEGER NOT NULL,"                       \
    " device INTEGER NOT NULL, depth INTEGER NOT NULL, ptr INTEGER NOT NULL,"                      \
    " size INTEGER NOT NULL, flags INTEGER NOT NULL, stream INTEGER NOT NULL,"                     \
    " arg0 INTEGER NOT NULL, arg1 INTEGER NOT NULL, arg2 INTEGER NOT NULL,"                        \
    " arg3 INTEGER NOT NULL, arg4 INTEGER NOT NULL, arg5 INTEGER NOT NULL,"                        \
    " arg6 INTEGER NOT NULL, arg7 INTEGER NOT NULL, caller INTEGER NOT NULL);\n"                   \
    CT_INFLIGHT_VIEW_SQL(CT_ONE_Q, CT_ONE_A)
// clang-format on

/* The inflight_calls view, for a trace or a pack (CT_VIEWS_SQL says how). */
// clang-format off
#define CT_INFLIGHT_VIEW_SQL(Q, A)                                                                 \
    "CREATE VIEW IF NOT EXISTS inflight_calls AS SELECT " Q(i) "i.seq, i.t_ns, i.tid,"             \
    " a.name AS api, a.layer, a.role, i.device, (i.depth > 0) AS nested, i.parent_seq, i.ptr,"     \
    " i.size, i.flags, i.stream, i.arg0, i.arg1, i.arg2, i.arg3, i.arg4, i.arg5, i.arg6, i.arg7,"  \
    " i.caller FROM inflight i JOIN apis a ON a.api_id = i.api_id" A(a, i) ";\n"
// clang-format on

/* Tables a valid trace must have; the analyzer checks them before trusting a file. */
#define CT_SCHEMA_REQUIRED_TABLES                                                                  \
    {                                                                                              \
        "meta", "apis", "process", "devices", "env", "events", "calls", "modules", "allocations",  \
            "meminfo", "ipc", "communicators", "collectives", "driver_lookups"                     \
    }

#endif
