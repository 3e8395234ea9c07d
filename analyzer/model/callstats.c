/*
 * callstats.c - what `cutrace summary` reports of each process besides its
 * memory, counted in the GPU model's one pass over the events (loader.h):
 * the device ordinals its calls used, calls per device and API (the
 * program's own apart from those made inside other traced calls, which are
 * counted by the API they were made in), failed calls, driver lookups, the
 * last cudaMemGetInfo per device with the live bytes when it took effect,
 * and how many NCCL communicator inits there were. (NCCL's calls per
 * communicator are the sums of the process's nccl_calls cells, collcalls.h:
 * one mechanism, the `collectives` view's.)
 *
 * Each is what a public view says (the `calls`, `meminfo`,
 * `driver_lookups` views; tests/analyzer/
 * test_model_views.c holds them to it), computed in C because the views'
 * GROUP BY and window functions cost more than the whole load.
 */
#include "cli.h"
#include "model/loader.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* int64 -> int64, open addressing; the table is kept at most half full. */
struct i64map {
    struct i64slot {
        int64_t key, value;
        bool used;
    } * slots;
    size_t nslots, used;
};

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

static struct i64slot *i64map_slot(struct i64map *m, int64_t key, bool create)
{
    if (create && (m->used + 1) * 2 > m->nslots) {
        size_t n = m->nslots ? m->nslots * 2 : 64;
        struct i64slot *old = m->slots;
        size_t nold = m->nslots;
        m->slots = xcalloc(n, sizeof(*m->slots));
        m->nslots = n;
        for (size_t i = 0; i < nold; i++) {
            if (!old[i].used)
                continue;
            size_t j = mix((uint64_t)old[i].key) & (n - 1);
            while (m->slots[j].used)
                j = (j + 1) & (n - 1);
            m->slots[j] = old[i];
        }
        free(old);
    }
    if (!m->nslots)
        return NULL;
    size_t i = mix((uint64_t)key) & (m->nslots - 1);
    while (m->slots[i].used) {
        if (m->slots[i].key == key)
            return &m->slots[i];
        i = (i + 1) & (m->nslots - 1);
    }
    if (!create)
        return NULL;
    m->slots[i] = (struct i64slot){.key = key, .used = true, .value = -1};
    m->used++;
    return &m->slots[i];
}

/* A counter's identity while counting: the trace's apis row, not its
 * name, as the views group (the report merges equal names). */
struct count_key {
    int64_t device;
    uint32_t row;    /* index into the trace's apis */
    uint32_t inside; /* api name of the parent, GM_NONE unknown; per-API rows GM_NONE */
    bool nested_row;
};

/* A nested call whose parent comes later in the trace (a damaged one):
 * counted once every call has been read. */
struct deferred {
    int64_t device, parent_seq, dur_ns, ok_bytes;
    uint32_t row;
    bool failed;
};

/* A distinct looked-up symbol (its bytes: NULs are possible). */
struct symbol {
    uint64_t hash;
    size_t len;
    char *bytes;
};

struct callstats {
    struct i64map devices;     /* ordinal -> index into p->devices (sorted only at the end) */
    int64_t (*live)[GM_KINDS]; /* per device: the live bytes by kind, as the pass applies */
    size_t live_cap;
    struct gm_call_count *counts;
    struct count_key *keys;
    size_t ncounts, counts_cap, keys_cap;
    uint32_t *count_slots; /* index + 1, 0 empty */
    size_t ncount_slots;
    struct deferred *deferred;
    size_t ndeferred, deferred_cap;
    size_t failed_cap;
    struct symbol *symbols; /* open addressing, len SIZE_MAX: empty */
    size_t nsymbol_slots, nsymbols;
};

static int64_t positive(int64_t v)
{
    return v > 0 ? v : 0;
}

struct gm_device *ld_device(struct pass *s, int64_t ordinal)
{
    struct gm_process *p = s->p;
    struct i64slot *slot = i64map_slot(&s->stats->devices, ordinal, true);
    if (slot->value < 0) {
        p->devices = xgrow(p->devices, &s->devices_cap, p->ndevices + 1, sizeof(*p->devices));
        struct gm_device *d = &p->devices[p->ndevices];
        memset(d, 0, sizeof(*d));
        d->ordinal = ordinal;
        d->total = -1;
        slot->value = (int64_t)p->ndevices++;
    }
    struct callstats *cs = s->stats;
    if (cs->live_cap < p->ndevices) {
        size_t old = cs->live_cap;
        cs->live = xgrow(cs->live, &cs->live_cap, p->ndevices, sizeof(*cs->live));
        memset(cs->live + old, 0, (cs->live_cap - old) * sizeof(*cs->live));
    }
    assert((size_t)slot->value < p->ndevices);
    return &p->devices[slot->value];
}

void cs_begin(struct pass *s)
{
    s->stats = xcalloc(1, sizeof(*s->stats));
    for (size_t i = 0; i < s->p->ndevices; i++)
        i64map_slot(&s->stats->devices, s->p->devices[i].ordinal, true)->value = (int64_t)i;
    if (s->p->ndevices)
        ld_device(s, s->p->devices[0].ordinal); /* sizes live[] */
    s->p->lookups.present = s->p->modules;      /* the driver_lookups view: format 3 on */
}

static uint64_t key_hash(const struct count_key *k)
{
    uint64_t h = mix((uint64_t)k->device);
    h = mix(h ^ ((uint64_t)k->row << 1 | k->nested_row));
    return mix(h ^ k->inside);
}

static bool same_key(const struct count_key *a, const struct count_key *b)
{
    return a->device == b->device && a->row == b->row && a->inside == b->inside &&
           a->nested_row == b->nested_row;
}

static void rehash_counts(struct callstats *cs)
{
    size_t n = cs->ncount_slots ? cs->ncount_slots * 2 : 256;
    free(cs->count_slots);
    cs->count_slots = xcalloc(n, sizeof(*cs->count_slots));
    cs->ncount_slots = n;
    for (size_t i = 0; i < cs->ncounts; i++) {
        size_t j = key_hash(&cs->keys[i]) & (n - 1);
        while (cs->count_slots[j])
            j = (j + 1) & (n - 1);
        cs->count_slots[j] = (uint32_t)i + 1;
    }
}

static struct gm_call_count *counter(struct pass *s, const struct count_key *k)
{
    struct callstats *cs = s->stats;
    if ((cs->ncounts + 1) * 2 > cs->ncount_slots)
        rehash_counts(cs);
    size_t i = key_hash(k) & (cs->ncount_slots - 1);
    while (cs->count_slots[i]) {
        uint32_t index = cs->count_slots[i] - 1;
        if (same_key(&cs->keys[index], k))
            return &cs->counts[index];
        i = (i + 1) & (cs->ncount_slots - 1);
    }
    assert(cs->ncounts < UINT32_MAX - 1);
    cs->counts = xgrow(cs->counts, &cs->counts_cap, cs->ncounts + 1, sizeof(*cs->counts));
    cs->keys = xgrow(cs->keys, &cs->keys_cap, cs->ncounts + 1, sizeof(*cs->keys));
    const struct api_info *info = &s->infos[k->row];
    cs->keys[cs->ncounts] = *k;
    cs->counts[cs->ncounts] = (struct gm_call_count){.device = k->device,
                                                     .api = info->name,
                                                     .layer = info->layer_text,
                                                     .role = info->role_text,
                                                     .inside = k->inside,
                                                     .nested_row = k->nested_row};
    cs->count_slots[i] = (uint32_t)cs->ncounts + 1;
    return &cs->counts[cs->ncounts++];
}

static void count_nested(struct pass *s, int64_t device, uint32_t row, uint32_t inside, bool failed,
                         int64_t dur_ns, int64_t ok_bytes)
{
    struct count_key k = {.device = device, .row = row, .inside = inside, .nested_row = true};
    struct gm_call_count *n = counter(s, &k);
    n->calls = gm_add(n->calls, 1);
    n->nested = n->calls;
    n->failed += failed;
    n->dur_ns = gm_add(n->dur_ns, dur_ns);
    n->ok_bytes = gm_add(n->ok_bytes, ok_bytes);
}

/* The api name of the call with that seq, among the calls read so far. */
static bool api_of_seq(const struct pass *s, int64_t seq, uint32_t *api)
{
    size_t i = ld_seq_index(s, seq);
    if (i == SIZE_MAX)
        return false;
    *api = s->seq_calls[i].api;
    return true;
}

static void add_symbol(struct callstats *cs, const void *bytes, size_t len)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) {
        h ^= ((const unsigned char *)bytes)[i];
        h *= 1099511628211ull;
    }
    if ((cs->nsymbols + 1) * 2 > cs->nsymbol_slots) {
        size_t n = cs->nsymbol_slots ? cs->nsymbol_slots * 2 : 64;
        struct symbol *old = cs->symbols;
        size_t nold = cs->nsymbol_slots;
        cs->symbols = xcalloc(n, sizeof(*cs->symbols));
        for (size_t i = 0; i < n; i++)
            cs->symbols[i].len = SIZE_MAX;
        cs->nsymbol_slots = n;
        for (size_t i = 0; i < nold; i++) {
            if (old[i].len == SIZE_MAX)
                continue;
            size_t j = old[i].hash & (n - 1);
            while (cs->symbols[j].len != SIZE_MAX)
                j = (j + 1) & (n - 1);
            cs->symbols[j] = old[i];
        }
        free(old);
    }
    size_t i = h & (cs->nsymbol_slots - 1);
    for (; cs->symbols[i].len != SIZE_MAX; i = (i + 1) & (cs->nsymbol_slots - 1))
        if (cs->symbols[i].hash == h && cs->symbols[i].len == len &&
            (len == 0 || memcmp(cs->symbols[i].bytes, bytes, len) == 0))
            return;
    char *copy = xcalloc(len + 1, 1);
    if (len)
        memcpy(copy, bytes, len);
    cs->symbols[i] = (struct symbol){h, len, copy};
    cs->nsymbols++;
}

void cs_row(struct pass *s, const struct call_row *c, const void *handle, int handle_len)
{
    struct gm_process *p = s->p;
    const struct api_info *info = c->info;
    ld_device(s, c->device);
    bool failed = c->result != 0;
    int64_t dur = positive(c->dur_ns);
    int64_t ok_bytes = failed ? 0 : positive(c->size);

    struct count_key k = {.device = c->device, .row = info->index, .inside = GM_NONE};
    struct gm_call_count *a = counter(s, &k);
    a->calls = gm_add(a->calls, 1);
    a->failed += failed;
    a->nested += c->nested;
    a->dur_ns = gm_add(a->dur_ns, dur);
    a->ok_bytes = gm_add(a->ok_bytes, ok_bytes);
    if (!c->nested) {
        a->top_calls = gm_add(a->top_calls, 1);
        a->top_failed += failed;
        a->top_dur_ns = gm_add(a->top_dur_ns, dur);
        a->top_ok_bytes = gm_add(a->top_ok_bytes, ok_bytes);
    } else {
        uint32_t inside = GM_NONE;
        if (c->has_parent && !api_of_seq(s, c->parent_seq, &inside) && c->parent_seq > c->seq) {
            struct callstats *cs = s->stats;
            cs->deferred =
                xgrow(cs->deferred, &cs->deferred_cap, cs->ndeferred + 1, sizeof(*cs->deferred));
            cs->deferred[cs->ndeferred++] =
                (struct deferred){c->device, c->parent_seq, dur, ok_bytes, info->index, failed};
        } else {
            count_nested(s, c->device, info->index, inside, failed, dur, ok_bytes);
        }
    }

    p->failed_calls += failed;
    p->nested_calls += c->nested;
    p->wait_ns = gm_add(p->wait_ns, positive(c->wait_ns));
    p->waited_calls += c->wait_ns > 0;
    if (failed && info->role != ROLE_LOOKUP) {
        p->failed = xgrow(p->failed, &s->stats->failed_cap, p->nfailed + 1, sizeof(*p->failed));
        p->failed[p->nfailed++] = (struct gm_failed_call){.seq = c->seq,
                                                          .t_ns = c->t_ns,
                                                          .device = c->device,
                                                          .result = c->result,
                                                          .size = c->size,
                                                          .ptr = c->ptr,
                                                          .api = info->name,
                                                          .layer = info->layer_text};
    }
    if (info->role == ROLE_LOOKUP && p->lookups.present) {
        p->lookups.calls++;
        p->lookups.wrapped += c->arg1 != 0;
        p->lookups.failed += failed;
        /* symbol: CAST(substr(handle, 1, arg2) AS TEXT), NULL without a
         * handle. SQLite's substr() reads its length as a 32-bit int (so
         * 2^63 - 1 is -1), and a negative one takes what precedes the
         * start: nothing. */
        if (handle_len >= 0) {
            int32_t n = (int32_t)(uint32_t)(uint64_t)c->arg2;
            size_t len = n > 0 ? (size_t)n : 0;
            if (len > (size_t)handle_len)
                len = (size_t)handle_len;
            add_symbol(s->stats, handle, len);
        }
    }
    if (info->nccl_layer && info->role == ROLE_COMM_INIT)
        p->comm_inits++;
}

void cs_meminfo(struct pass *s, const struct call_row *c)
{
    struct gm_device *d = ld_device(s, c->device);
    if (d->has_meminfo && d->meminfo_seq > c->seq)
        return;
    d->has_meminfo = true;
    d->meminfo_seq = c->seq;
    d->meminfo_t_ns = c->t_ns;
    /* Like sizes, 2^63 bytes or more is not something a GPU reported. */
    d->meminfo_free = positive(c->arg0);
    d->meminfo_total = positive(c->arg1);
    /* What is live now is what took effect before it (pairing.c applies
     * calls in effect order). */
    memcpy(d->meminfo_live, s->stats->live[d - s->p->devices], sizeof(d->meminfo_live));
}

void cs_live(struct pass *s, const struct gm_alloc *a, int sign)
{
    struct gm_device *d = ld_device(s, a->device);
    assert(a->kind < GM_KINDS);
    int64_t *live = &s->stats->live[d - s->p->devices][a->kind];
    *live = sign > 0 ? gm_add(*live, a->size) : gm_sub(*live, a->size);
    if (*live < 0) /* only through saturation on garbage sizes */
        *live = 0;
}

static int compare_devices(const void *a, const void *b)
{
    const struct gm_device *x = a, *y = b;
    return (x->ordinal > y->ordinal) - (x->ordinal < y->ordinal);
}

void cs_finish(struct pass *s)
{
    struct callstats *cs = s->stats;
    struct gm_process *p = s->p;
    if (!cs)
        return;
    for (size_t i = 0; i < cs->ndeferred; i++) {
        const struct deferred *d = &cs->deferred[i];
        uint32_t inside = GM_NONE;
        api_of_seq(s, d->parent_seq, &inside);
        count_nested(s, d->device, d->row, inside, d->failed, d->dur_ns, d->ok_bytes);
    }
    p->call_counts = cs->counts;
    p->ncall_counts = cs->ncounts;
    if (p->ndevices > 1)
        qsort(p->devices, p->ndevices, sizeof(*p->devices), compare_devices);
    p->lookups.symbols = (int64_t)cs->nsymbols;
    for (size_t i = 0; i < cs->nsymbol_slots; i++)
        if (cs->symbols[i].len != SIZE_MAX)
            free(cs->symbols[i].bytes);
    free(cs->symbols);
    free(cs->live);
    free(cs->devices.slots);
    free(cs->keys);
    free(cs->count_slots);
    free(cs->deferred);
    free(cs);
    s->stats = NULL;
}
