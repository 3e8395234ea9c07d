/*
 * suites.h - the integration suites: runtime (what is recorded, the program
 * unchanged), reliability (crashes, signals, threads, fork, hostile files) and
 * nccl (communicators and collectives joined across ranks) and roads (ctypes,
 * cuGetProcAddress, entry points, nesting, other shims) and budget (the
 * simulated server's own budget found again by `cutrace budget`) and run
 * (`cutrace run` in front of launchers that start workers) and diff (a
 * baseline and a custom all-reduce run compared by `cutrace diff`) and
 * stacks (native and Python call stacks, `cutrace sites`) and security
 * (other users, symlinked trace directories, secrets).
 * stacks (native and Python call stacks, `cutrace sites`) and startfinish
 * (creating a trace on a full disk or under a file-size limit, exec, calls
 * after the tracer's destructor).
 * stacks (native and Python call stacks, `cutrace sites`) and hotpath
 * (signal handlers that call CUDA, raw fork, the ring's size).
 * stacks (native and Python call stacks, `cutrace sites`) and order
 * (frees across threads, signal handlers' calls).
 * stacks (native and Python call stacks, `cutrace sites`) and fds (the
 * program's descriptor table left to it).
 * launch (servers whose launcher holds the flags and starts workers with
 * multiprocessing spawn, forkserver or fork: the ancestors' command lines).
 * pack (a killed run packed by `cutrace pack` and read elsewhere, several
 * directories as one run).
 * entered (ranks killed inside blocking NCCL calls: calls that never returned).
 * budget_paths (each SGLang code path replayed as the server computed it,
 * by tests/progs/sglang_sim.py's simulated start-ups).
 * budget_vllm (vLLM's start-up on each code path, simulated, against
 * `cutrace budget --json`).
 * nvtx (NVTX ranges and marks recorded as NVTX's injection library, and
 * another injection library chained).
 */
#ifndef CUTRACE_INTEGRATION_SUITES_H
#define CUTRACE_INTEGRATION_SUITES_H

#include <check.h>

Suite *runtime_suite(void);
Suite *reliability_suite(void);
Suite *nccl_suite(void);
Suite *roads_suite(void);
Suite *budget_suite(void);
Suite *stacks_suite(void);
Suite *diff_suite(void);
Suite *run_suite(void);
Suite *budget_names_suite(void);
Suite *budget_vllm_suite(void);
Suite *pyframes_suite(void);
Suite *security_suite(void);
Suite *creation_kill_suite(void);
Suite *startfinish_suite(void);
Suite *hotpath_suite(void);
Suite *order_suite(void);
Suite *fds_suite(void);
Suite *launch_suite(void);
Suite *pack_suite(void);
Suite *entered_suite(void);
Suite *budget_paths_suite(void);
Suite *nvtx_suite(void);

#endif
