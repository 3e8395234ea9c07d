/*
 * export_json.h - `cutrace export --format json`: the Chrome trace-event
 * JSON format (chrome://tracing, older tools; Perfetto reads it too, as a
 * legacy format), written through the sink of analysis/export_sink.h.
 * Perfetto's tracks become what that format has: processes and threads
 * (pid, tid), counters by name within a process, flow events (s/f).
 */
#ifndef CUTRACE_ANALYZER_EXPORT_JSON_H
#define CUTRACE_ANALYZER_EXPORT_JSON_H

#include "analysis/export_sink.h"

#include <stdio.h>

struct ex_json;

/* A writer onto `out` (which the caller opens and closes); fills *sink. */
struct ex_json *ex_json_open(FILE *out, struct ex_sink *sink);
/* Ends the document, flushes and frees; 0, or -1 when something could not be written. */
int ex_json_close(struct ex_json *j);

#endif
