/*
 * stackrec.h - packing, reading and checking the auxiliary ring records
 * (struct ct_aux_record in include/cutrace/format.h) that carry a new call
 * stack's frames and a Python code object's names to the writer.
 *
 * Shared by the producer (stacks.c, pyframes.c), the store (store.c turns
 * them into stack_frames and py_code rows) and crash recovery (recover.c
 * checks them like any record of an untrusted ring before they reach a
 * database). Header-only: every function is small and the analyzer builds
 * store.c without the rest of the preload.
 */
#ifndef CUTRACE_STACKREC_H
#define CUTRACE_STACKREC_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "cutrace/format.h"

/* Frames one stack may have: CUTRACE_STACK_DEPTH (at most 128) of each kind. */
#define CT_STACK_MAX_FRAMES 256
/* A Python frame's value: (code id << 32) | line. */
#define CT_PYFRAME(code_id, line) (((uint64_t)(code_id) << 32) | (uint32_t)(line))

/* A ring slot holds either; the union makes the pun explicit. */
union ct_any_record {
    struct ct_record rec;
    struct ct_aux_record aux;
};

static inline bool ct_record_is_aux(const struct ct_record *r)
{
    return r->seq == 0 && r->api == CT_AUX_API;
}

static inline void ct_aux_init(union ct_any_record *u, enum ct_aux_kind kind, uint64_t key)
{
    memset(u, 0, sizeof *u);
    u->aux.kind = (uint8_t)kind;
    u->aux.key = key;
    u->aux.api = CT_AUX_API;
}

/* Frame i of a CT_AUX_FRAMES record; indexes past CT_AUX_FRAMES_PER are ignored (read 0). */
static inline void ct_aux_set_frame(struct ct_aux_record *a, unsigned i, uint64_t v)
{
    if (i >= CT_AUX_FRAMES_PER)
        return;
    if (i < 15)
        memcpy(a->payload_a + 8 * i, &v, 8);
    else
        memcpy(a->payload_b + 8 * (i - 15), &v, 8);
}

static inline uint64_t ct_aux_frame(const struct ct_aux_record *a, unsigned i)
{
    uint64_t v = 0;
    if (i >= CT_AUX_FRAMES_PER)
        return v;
    if (i < 15)
        memcpy(&v, a->payload_a + 8 * i, 8);
    else
        memcpy(&v, a->payload_b + 8 * (i - 15), 8);
    return v;
}

/* The payload as one run of bytes [at, at + len); bytes past CT_AUX_PAYLOAD_BYTES are not. */
static inline void ct_aux_put_bytes(struct ct_aux_record *a, unsigned at, const void *src,
                                    unsigned len)
{
    const uint8_t *s = src;
    for (unsigned i = 0; i < len && at < CT_AUX_PAYLOAD_BYTES; i++, at++) {
        if (at < sizeof a->payload_a)
            a->payload_a[at] = s[i];
        else
            a->payload_b[at - sizeof a->payload_a] = s[i];
    }
}

static inline void ct_aux_get_bytes(const struct ct_aux_record *a, unsigned at, void *dst,
                                    unsigned len)
{
    uint8_t *d = dst;
    for (unsigned i = 0; i < len && at < CT_AUX_PAYLOAD_BYTES; i++, at++)
        d[i] = at < sizeof a->payload_a ? a->payload_a[at] : a->payload_b[at - sizeof a->payload_a];
}

/* A CT_AUX_PYCODE record's line table: its size in the interpreter (capped
 * at 65535), first line and format (format.h); all 0 from a ring-4 writer. */
static inline void ct_aux_set_pycode_lines(struct ct_aux_record *a, uint32_t size,
                                           uint32_t first_line, unsigned format)
{
    a->first = (uint16_t)(size > UINT16_MAX ? UINT16_MAX : size);
    a->extra[0] = (uint16_t)(first_line & 0xffff);
    a->extra[1] = (uint16_t)(first_line >> 16);
    a->extra[2] = (uint16_t)format;
}

static inline uint32_t ct_aux_pycode_first_line(const struct ct_aux_record *a)
{
    return (uint32_t)a->extra[0] | (uint32_t)a->extra[1] << 16;
}

/* Meta keys a traced process may set through CT_AUX_META: only these, so
 * that a damaged or hostile ring can never rewrite a trace's identity. */
static inline bool ct_aux_meta_key_allowed(const char *key, unsigned len)
{
    static const char allowed[] = "python_frames";
    return len == sizeof allowed - 1 && memcmp(key, allowed, len) == 0;
}

/* Whether the first len payload bytes are text a record may carry: within
 * the payload, no NUL. */
static inline bool ct_aux_text_valid(const struct ct_aux_record *a, unsigned len)
{
    if (len > CT_AUX_PAYLOAD_BYTES)
        return false;
    for (unsigned i = 0; i < len; i++) {
        char c;
        ct_aux_get_bytes(a, i, &c, 1);
        if (c == '\0')
            return false;
    }
    return true;
}

/*
 * Whether an auxiliary record is one libcutrace could have written: a
 * known kind, an id SQLite stores as a positive integer, frame ranges and
 * name lengths within the record. Recovery refuses a ring holding one that
 * is not (a bad ring is refused as a whole).
 */
static inline bool ct_aux_valid(const struct ct_aux_record *a)
{
    if (a->seq != 0 || a->api != CT_AUX_API || a->key == 0 || a->key > INT64_MAX)
        return false;
    if (a->kind == CT_AUX_FRAMES)
        return a->count >= 1 && a->count <= CT_AUX_FRAMES_PER && a->total <= CT_STACK_MAX_FRAMES &&
               (unsigned)a->first + a->count <= a->total && a->native <= a->total;
    if (a->kind == CT_AUX_PYCODE)
        return a->key <= UINT32_MAX &&
               (a->extra[2] == CT_PYLINES_NONE || a->extra[2] == CT_PYLINES_310 ||
                a->extra[2] == CT_PYLINES_311) &&
               ct_aux_text_valid(a, (unsigned)a->count + a->total);
    if (a->kind == CT_AUX_PYLINES)
        return a->key <= UINT32_MAX && a->count >= 1 && a->count <= CT_AUX_PAYLOAD_BYTES &&
               a->total <= CT_PYLINES_MAX && (unsigned)a->first + a->count <= a->total;
    if (a->kind == CT_AUX_META) {
        char key[CT_AUX_PAYLOAD_BYTES];
        if (!ct_aux_text_valid(a, (unsigned)a->count + a->total))
            return false;
        ct_aux_get_bytes(a, 0, key, a->count);
        return ct_aux_meta_key_allowed(key, a->count);
    }
    return false;
}

#endif
