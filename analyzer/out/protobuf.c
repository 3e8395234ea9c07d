/*
 * protobuf.c - the protobuf wire format (protobuf.h): tags are
 * (field << 3) | wire type; wire types 0 varint, 1 fixed64, 2
 * length-delimited.
 */
#include "out/protobuf.h"

#include "cli.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

enum { WIRE_VARINT = 0, WIRE_FIXED64 = 1, WIRE_LEN = 2 };

void pb_reset(struct pb_buf *b)
{
    b->len = 0;
}

void pb_free(struct pb_buf *b)
{
    free(b->data);
    *b = (struct pb_buf){0};
}

static uint8_t *room(struct pb_buf *b, size_t n)
{
    if (b->len + n > b->cap)
        b->data = xgrow(b->data, &b->cap, b->len + n, 1);
    uint8_t *at = b->data + b->len;
    b->len += n;
    return at;
}

/* v as a varint into out (10 bytes of room); returns its length. */
static size_t encode_varint(uint8_t *out, uint64_t v)
{
    size_t n = 0;
    do {
        out[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v)
            out[n] |= 0x80;
        n++;
    } while (v);
    return n;
}

static void varint(struct pb_buf *b, uint64_t v)
{
    uint8_t tmp[10];
    size_t n = encode_varint(tmp, v);
    memcpy(room(b, n), tmp, n);
}

static void tag(struct pb_buf *b, uint32_t field, unsigned wire)
{
    assert(field > 0 && field < (1u << 29));
    varint(b, ((uint64_t)field << 3) | wire);
}

void pb_uint(struct pb_buf *b, uint32_t field, uint64_t value)
{
    tag(b, field, WIRE_VARINT);
    varint(b, value);
}

void pb_int(struct pb_buf *b, uint32_t field, int64_t value)
{
    pb_uint(b, field, (uint64_t)value);
}

void pb_fixed64(struct pb_buf *b, uint32_t field, uint64_t value)
{
    tag(b, field, WIRE_FIXED64);
    uint8_t *at = room(b, 8);
    for (int i = 0; i < 8; i++)
        at[i] = (uint8_t)(value >> (8 * i)); /* little-endian on the wire */
}

void pb_bytes(struct pb_buf *b, uint32_t field, const void *data, size_t len)
{
    tag(b, field, WIRE_LEN);
    varint(b, len);
    if (len)
        memcpy(room(b, len), data, len);
}

void pb_string(struct pb_buf *b, uint32_t field, const char *s)
{
    pb_bytes(b, field, s, s ? strlen(s) : 0);
}

size_t pb_begin(struct pb_buf *b, uint32_t field)
{
    tag(b, field, WIRE_LEN);
    size_t mark = b->len;
    memset(room(b, 4), 0, 4);
    return mark;
}

void pb_end(struct pb_buf *b, size_t mark)
{
    assert(mark + 4 <= b->len);
    size_t len = b->len - mark - 4;
    assert(len <= PB_MAX_NESTED);
    /* The length in as few bytes as it needs: the message moves back over
     * the room left unused. Only bytes after the mark move, so the marks of
     * the messages still open around this one stay right. */
    uint8_t head[10];
    size_t n = encode_varint(head, len);
    assert(n <= 4);
    uint8_t *at = b->data + mark;
    if (n < 4)
        memmove(at + n, at + 4, len);
    memcpy(at, head, n);
    b->len = mark + n + len;
}
