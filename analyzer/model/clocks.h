/*
 * clocks.h - many hosts on one time axis. Every trace's times are its
 * host's CLOCK_MONOTONIC (time since that host booted), so the traces of a
 * run that spans hosts (a 2 x 8 GPU job) do not line up: node2's clock may
 * be hours ahead of node1's. The wall clock is no cure (NTP keeps hosts
 * only milliseconds apart, and steps).
 *
 * The offset of each host's clock against a reference host's is estimated
 * from events that happen at one moment on every rank of a communicator,
 * matched across traces by the communicator's unique-id hash (its size and
 * split color) and the call's number on it:
 *   - the return of an NCCL communicator init (ncclCommInitRank, a split):
 *     a barrier, so no rank returns before the last rank entered. For two
 *     hosts A and B (B's clock = A's + d) each init bounds d:
 *       latest entry on B - earliest return on A <= d
 *         <= earliest return on B - latest entry on A;
 *     the bounds of every matched init are intersected;
 *   - blocking collectives (not in a group, not captured, successful): the
 *     host calls of most NCCL collectives only enqueue work and return
 *     whenever their rank got there, so a collective's bound moves with
 *     the ranks' skew and is no bound at all. Those that agree with the
 *     inits' bound choose the point inside it (the median of their
 *     midpoints); they never narrow the error. Only without any matched
 *     init do collectives decide alone: the median of their midpoints.
 * The estimate is that point (the bound's midpoint when no collective
 * agrees), or 0 when the bound holds 0 (then the traces are already on one
 * axis, as fixtures and one-host runs are); its error is how far the true
 * offset can be from it (to the farther end of the inits' bound, or the
 * spread of the midpoints). Hosts linked only through a third are chained,
 * their errors added.
 *
 * gm_load aligns the model: every time of an aligned host's processes
 * (events, allocations, communicators, measurements, failed calls, first
 * and last call, start_mono_ns) has its offset subtracted, so every report
 * and export shows it on the reference host's axis; times relative to a
 * process's own start and wall-clock times are unchanged. A host that
 * shares no communicator with an aligned one keeps its own clock
 * (gm_clock.aligned false), and a model note says so.
 */
#ifndef CUTRACE_ANALYZER_CLOCKS_H
#define CUTRACE_ANALYZER_CLOCKS_H

#include <stddef.h>
#include <stdint.h>

struct gm_model;
struct json_writer;

/* Estimates every clock's offset and puts the model's times on the
 * reference clock's axis; adds one note when the model has several clocks.
 * Called by gm_load with every trace still open. */
void gm_align_clocks(struct gm_model *m);

/* The note's words: "clocks of 2 hosts aligned from 37 matched events:
 * node2 +3.00 s (+/- 400 us)" and which are not; NULL with one clock
 * (malloc'd). */
char *gm_clocks_summary(const struct gm_model *m);

/* The `clocks` JSON object every report with times carries (docs/cli.md,
 * "Time across hosts"). */
void gm_clocks_json(struct json_writer *w, const struct gm_model *m);

/* What JSON and CSV say a clock's alignment is: "reference", "aligned" or
 * "unaligned". */
const char *gm_clock_state(const struct gm_model *m, uint32_t clock);

#endif
