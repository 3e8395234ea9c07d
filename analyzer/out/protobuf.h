/*
 * protobuf.h - the protobuf wire format, written by hand for `cutrace
 * export` (Perfetto's TracePacket stream): varints, fixed64 and
 * length-delimited fields into a growable buffer. No protobuf library is
 * needed for a format this small, and none is a dependency of cutrace.
 *
 * Nested messages are written in place: pb_begin leaves room for the
 * length as up to 4 varint bytes, pb_end writes it in as few as it needs
 * and moves the message back over the rest, so the output is the minimal
 * encoding. One nested message is thus at most PB_MAX_NESTED bytes, which
 * a single trace packet never approaches.
 */
#ifndef CUTRACE_ANALYZER_PROTOBUF_H
#define CUTRACE_ANALYZER_PROTOBUF_H

#include <stddef.h>
#include <stdint.h>

#define PB_MAX_NESTED ((1u << 28) - 1) /* what 4 varint bytes can say */

struct pb_buf {
    uint8_t *data;
    size_t len, cap;
};

/* Empties the buffer, keeping its memory. */
void pb_reset(struct pb_buf *b);
void pb_free(struct pb_buf *b);

/* Field `field` with wire type varint: unsigned, or a signed int64 (two's
 * complement in 10 bytes when negative, as int64 fields are encoded). */
void pb_uint(struct pb_buf *b, uint32_t field, uint64_t value);
void pb_int(struct pb_buf *b, uint32_t field, int64_t value);
void pb_fixed64(struct pb_buf *b, uint32_t field, uint64_t value);
/* A length-delimited field: a string or bytes (NULL writes an empty one). */
void pb_bytes(struct pb_buf *b, uint32_t field, const void *data, size_t len);
void pb_string(struct pb_buf *b, uint32_t field, const char *s);

/* A nested message: pb_begin returns its mark, pb_end closes it. */
size_t pb_begin(struct pb_buf *b, uint32_t field);
void pb_end(struct pb_buf *b, size_t mark);

#endif
