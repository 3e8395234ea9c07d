/*
 * nvtx.c - a trace's NVTX records (layer nvtx, preload/hooks/hook_nvtx.c)
 * turned into the model's phase events, during the one pass over its
 * events (pairing.c): marks, and ranges as a begin and an end that carry
 * the range's message, so that timelines and diffs name phases the way
 * the program named them ("load_weights").
 *
 * Ranges pair as NVTX pairs them: a pop ends the latest push of its thread
 * in its domain, an end the start of its domain with the same id. NCCL's
 * own domain is left out: its ranges are one per NCCL call, which the
 * model already has as calls; only the program's (and its libraries')
 * ranges are phases. The records are untrusted: a pop with nothing pushed
 * or an end of an unknown range makes no event, a message is at most the
 * record's 64 bytes.
 */
#include "model/loader.h"

#include "cli.h"

#include <assert.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#define NVTX_MESSAGE_MAX 64 /* the record's handle bytes */

struct open_range {
    int64_t tid, domain, id; /* push: tid; start: id */
    uint32_t text;
};

struct nvtx_state {
    int64_t *left_out; /* domains whose ranges are not phases (NCCL's) */
    size_t nleft_out, left_out_cap;
    struct open_range *pushes, *starts;
    size_t npushes, pushes_cap, nstarts, starts_cap;
    uint32_t unnamed; /* gm_text of "(no message)" */
};

static bool left_out(const struct nvtx_state *n, int64_t domain)
{
    for (size_t i = 0; i < n->nleft_out; i++)
        if (n->left_out[i] == domain)
            return true;
    return false;
}

/* The message of the record: its handle's first arg2 bytes, as text. */
static uint32_t message_of(struct pass *s, const struct call_row *c, sqlite3_stmt *stmt,
                           int col_handle)
{
    struct nvtx_state *n = s->nvtx;
    const void *blob = sqlite3_column_blob(stmt, col_handle);
    int bytes = sqlite3_column_bytes(stmt, col_handle);
    int64_t len = c->arg2 < bytes ? c->arg2 : bytes;
    if (!blob || len <= 0)
        return n->unnamed;
    char text[NVTX_MESSAGE_MAX + 1];
    if (len > NVTX_MESSAGE_MAX)
        len = NVTX_MESSAGE_MAX;
    memcpy(text, blob, (size_t)len);
    text[len] = '\0';
    /* A NUL inside (a damaged record) ends the text there. */
    return text[0] ? strtab_id(&s->L->texts, text) : n->unnamed;
}

void nvtx_read(struct pass *s, struct call_row *c, sqlite3_stmt *stmt, int col_handle, int col_tid)
{
    assert(ROLE_IS_NVTX(c->info->role));
    if (!s->nvtx) {
        s->nvtx = xcalloc(1, sizeof(*s->nvtx));
        s->nvtx->unnamed = strtab_id(&s->L->texts, "(no message)");
    }
    struct nvtx_state *n = s->nvtx;
    int64_t domain = c->arg0, tid = sqlite3_column_int64(stmt, col_tid);
    c->nvtx_event = 0;
    c->nvtx_text = GM_NONE;
    c->nvtx_level = 0;
    switch (c->info->role) {
    case ROLE_NVTX_DOMAIN: {
        uint32_t name = message_of(s, c, stmt, col_handle);
        if (strcmp(s->L->texts.strings[name], "NCCL") == 0 && !left_out(n, domain)) {
            n->left_out = xgrow(n->left_out, &n->left_out_cap, n->nleft_out + 1, sizeof(int64_t));
            n->left_out[n->nleft_out++] = domain;
        }
        return;
    }
    case ROLE_NVTX_MARK:
        if (left_out(n, domain))
            return;
        c->nvtx_event = GM_EV_NVTX_MARK;
        c->nvtx_text = message_of(s, c, stmt, col_handle);
        return;
    case ROLE_NVTX_PUSH:
    case ROLE_NVTX_START: {
        if (left_out(n, domain))
            return;
        bool push = c->info->role == ROLE_NVTX_PUSH;
        struct open_range r = {.tid = push ? tid : 0,
                               .domain = domain,
                               .id = push ? 0 : c->arg1,
                               .text = message_of(s, c, stmt, col_handle)};
        if (push) {
            n->pushes = xgrow(n->pushes, &n->pushes_cap, n->npushes + 1, sizeof(r));
            n->pushes[n->npushes++] = r;
        } else {
            n->starts = xgrow(n->starts, &n->starts_cap, n->nstarts + 1, sizeof(r));
            n->starts[n->nstarts++] = r;
        }
        c->nvtx_event = GM_EV_NVTX_BEGIN;
        c->nvtx_text = r.text;
        c->nvtx_level = push && c->arg1 >= 0 ? c->arg1 : 0;
        return;
    }
    case ROLE_NVTX_POP:
    case ROLE_NVTX_END: {
        bool pop = c->info->role == ROLE_NVTX_POP;
        struct open_range *list = pop ? n->pushes : n->starts;
        size_t *count = pop ? &n->npushes : &n->nstarts;
        /* The latest open one that it ends. */
        for (size_t i = *count; i > 0; i--) {
            struct open_range *r = &list[i - 1];
            if (r->domain != domain || (pop ? r->tid != tid : r->id != c->arg1))
                continue;
            c->nvtx_event = GM_EV_NVTX_END;
            c->nvtx_text = r->text;
            c->nvtx_level = pop && c->arg1 >= 0 ? c->arg1 : 0;
            memmove(r, r + 1, (*count - i) * sizeof(*r));
            (*count)--;
            return;
        }
        return;
    }
    default:
        return;
    }
}

void nvtx_free(struct pass *s)
{
    if (!s->nvtx)
        return;
    free(s->nvtx->left_out);
    free(s->nvtx->pushes);
    free(s->nvtx->starts);
    free(s->nvtx);
    s->nvtx = NULL;
}
