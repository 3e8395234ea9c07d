/*
 * inflight.h - the calls a process was inside when it died or hung: the
 * "entered" marks of its ring (include/cutrace/format.h, struct ct_mark)
 * turned into `inflight` rows (include/cutrace/schema.h) when a killed
 * process's ring is folded, and read straight from the ring of a process
 * that still runs (a hung rank keeps its ring locked, so it is never
 * folded, yet its report must say where it waits).
 */
#ifndef CUTRACE_ANALYZER_INFLIGHT_H
#define CUTRACE_ANALYZER_INFLIGHT_H

#include "cutrace/format.h"
#include "cutrace/ring.h"

#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>

/* A bitmap of the api ids a trace lists, one bit per uint16_t id. */
static inline bool inflight_api_known(const uint8_t *apis, uint16_t api)
{
    return (apis[api >> 3] >> (api & 7)) & 1;
}

/*
 * Inside the fold's transaction: makes the inflight table and view where
 * the trace lacks them, and inserts one row per complete mark of `ring`
 * whose call has no events row (a mark whose record also reached the ring
 * is a call that returned just before the kill). Marks with a seq outside
 * 1..INT64_MAX or an api the trace does not list are left out: a damaged
 * mark must not cost the records. Returns 0 or the SQLite error, with the
 * rows added in *added.
 */
int inflight_fold(sqlite3 *db, const struct ct_ring *ring, const uint8_t *apis, int64_t *added);

/*
 * Reads the marks of the ring file at ring_path, which may belong to a
 * running process, without writing or locking it: fn gets a copy of each
 * complete mark's record. Returns the number of marks found, 0 when the
 * file is missing, is no ring this build reads, or has no marks (ring 6
 * and older): a ring that cannot be read is the folding code's to report.
 */
size_t inflight_read_ring(const char *ring_path, void (*fn)(const struct ct_record *, void *),
                          void *arg);

#endif
