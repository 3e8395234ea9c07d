/*
 * export_proto.h - `cutrace export`'s native format: a Perfetto trace
 * (a stream of TracePacket messages, protos/perfetto/trace/trace_packet.proto),
 * written through the sink of analysis/export_sink.h. docs/export.md says
 * what it holds and how to open it.
 */
#ifndef CUTRACE_ANALYZER_EXPORT_PROTO_H
#define CUTRACE_ANALYZER_EXPORT_PROTO_H

#include "analysis/export_sink.h"

#include <stdio.h>

struct ex_proto;

/* A writer onto `out` (which the caller opens and closes); fills *sink. */
struct ex_proto *ex_proto_open(FILE *out, struct ex_sink *sink);
/* Flushes and frees; 0, or -1 when something could not be written. */
int ex_proto_close(struct ex_proto *p);

#endif
