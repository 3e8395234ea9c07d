/*
 * export.h - the walk of `cutrace export` over a loaded run: every track
 * and event of the picture docs/export.md describes, handed to a sink
 * (export_sink.h) in the order the sink's promises need.
 *
 * What is drawn, and from where:
 *   - a process track per traced process ("pid 1000 (rank 0) on node1"),
 *     a thread track per thread of its calls;
 *   - every intercepted call (the `calls` view) as a slice on its thread
 *     track, named by its api, with its arguments (seq, result and its
 *     name, device, size, ptr, stream, flags, arg0..arg3, parent, module);
 *   - per physical GPU (the model's), a group with one counter track (bytes)
 *     per category of traced live memory, the used memory (total - free) at
 *     each cudaMemGetInfo, the unexplained part of it, and a milestones
 *     track: every milestone of `cutrace timeline` (model/milestones.h) as an
 *     instant;
 *   - per NCCL communicator (unique-id hash), a group with a track per rank
 *     holding its collectives (the `collectives` view) as slices;
 *   - on each process track, what it was inside when its trace ended
 *     ("died inside ...") and its end, as instants;
 *   - a flow from each IPC export (the `ipc` view) to every open of that
 *     handle by another process.
 *
 * Times are the run's one axis (model/clocks.h: other hosts' clocks moved
 * onto the reference host's), clamped at 0. Within a stream they never go
 * back: a GPU's stream is in effect order, which may put an event a few
 * ns before the one it follows; such an event is drawn at the time of the
 * one before. On one thread, a call that outlasts the call it started in
 * is cut at its parent's end, so slices nest as Perfetto requires.
 *
 * A filter (model/filter.h) chooses what is drawn: the processes it passes
 * (their tracks, collectives and NVTX ranges, and the flows between two of
 * them) and the GPUs it passes, whose counters stay their whole memory.
 *
 * Two processes with the same pid (two hosts, or a pid reused) would be
 * merged by the viewers: the second one's pid and tids are shown plus
 * 2^22 (above any Linux pid), the third's plus 2 * 2^22, ...; the names
 * keep the real pid.
 */
#ifndef CUTRACE_ANALYZER_EXPORT_H
#define CUTRACE_ANALYZER_EXPORT_H

#include "analysis/export_sink.h"
#include "model/filter.h"
#include "model/gpumodel.h"
#include "model/traceset.h"

/* What export_run returns besides 0. */
#define EXPORT_WRITE_FAILED (-1) /* the sink could not write */
#define EXPORT_READ_FAILED  (-2) /* a trace could not be read (its one-line error printed) */

/* Walks what f passes of run m (loaded from set) into sink. 0, or one of the above. */
int export_run(const struct gm_model *m, struct trace_set *set, const struct gm_filter *f,
               const struct ex_sink *sink);

#endif
