/*
 * hook_nvtx.c - libcutrace.so as an NVTX injection library: every NVTX
 * range and mark of the traced program becomes an event (docs/nvtx.md).
 *
 * NVTX is header-only: each shared object built on the nvtx3 headers
 * (NCCL, libtorch, the program) keeps its own table of function pointers,
 * and on its first NVTX call loads $NVTX_INJECTION64_PATH (which `cutrace
 * run` points at libcutrace.so) and calls InitializeInjectionNvtx2 with a
 * function that hands out its table. So the initializer runs once per
 * object, and fills the same callbacks into each object's CORE and CORE2
 * slots: idempotent, nothing is kept per object.
 *
 * Records (layer nvtx, docs/schema.md): handle = the message, UTF-8, cut
 * at 64 bytes; arg0 the domain id (0 the default domain, else the id of a
 * nvtxDomainCreate record of the process); arg1 the range id (start/end)
 * or the thread's nesting level in the domain (push/pop: what they return;
 * result is 0: a level is no error); arg2 the message's length in handle; arg3 the category;
 * arg4 the payload type (0 none); arg5 the payload's value, or for an
 * extended payload (NCCL's) its schema id; arg6, arg7 the extended
 * payload's first two 64-bit words (NCCL: the communicator hash, then the
 * bytes of a collective or nranks | rank << 32 of an init); flags the
 * ARGB color | 1 << 32 when one is given, | 1 << 33 when the message was
 * cut, | 1 << 34 when it is a registered string.
 *
 * The hot path is the usual one: no lock, no allocation, no I/O. Domains
 * and registered strings live in fixed tables claimed with one atomic add
 * (their handles point into them); a table that is full hands out one
 * shared overflow entry, or, chained, the other tool's own handle (which
 * cutrace then records as the overflow entry). Only the initializer
 * takes a lock (once per object), to load and initialise a chained
 * library.
 *
 * Chaining: when `cutrace run` found NVTX_INJECTION64_PATH already set
 * (Nsight Systems sets it), it moved that path to CUTRACE_NVTX_CHAIN. The
 * initializer then loads that library too and runs its initializer against
 * tables of our own, so that every callback it installs is called after
 * its own). Other callback modules (naming CUDA objects, sync) and NVTX's
 * extension modules (InitializeInjectionNvtxExtension) are handed to it
 * untouched: we do not record them.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtPayload.h>

#include "../core/hook.h"
#include "../core/thread.h"
#include "../core/device.h"

#define NVTX_TEXT_BYTES      CT_IPC_HANDLE_BYTES
#define NVTX_DOMAINS         256
#define NVTX_STRINGS         4096
#define NVTX_LEVEL_DOMAINS   64 /* domains whose push levels are kept per thread */
#define NVTX_FLAG_COLOR      (1ull << 32)
#define NVTX_FLAG_CUT        (1ull << 33)
#define NVTX_FLAG_REGISTERED (1ull << 34)

struct text {
    char bytes[NVTX_TEXT_BYTES];
    uint32_t len;
    bool cut;
};

struct domain {
    struct text name;
    uint32_t id;                /* index + 1 */
    nvtxDomainHandle_t chained; /* the chained library's handle for it */
    uint32_t published;         /* name is complete (release/acquire) */
};

struct string {
    struct text text;
    uint32_t domain;
    nvtxStringHandle_t chained;
};

#define OVERFLOW_DOMAIN "(more NVTX domains than cutrace keeps)"
#define OVERFLOW_STRING "(more NVTX strings than cutrace keeps)"

/* The last entry of each is the overflow one, complete from the start:
 * no thread ever writes it. */
static struct domain domains[NVTX_DOMAINS + 1] = {
    [NVTX_DOMAINS] = {.name = {OVERFLOW_DOMAIN, sizeof OVERFLOW_DOMAIN - 1, false},
                      .id = NVTX_DOMAINS + 1,
                      .published = 1}};
static uint32_t domains_used;
static struct string strings[NVTX_STRINGS + 1] = {
    [NVTX_STRINGS] = {.text = {OVERFLOW_STRING, sizeof OVERFLOW_STRING - 1, true}}};
static uint32_t strings_used;
static uint64_t next_range_id;

/* Push levels per thread and domain (arg1, and what push and pop return). */
static __thread int32_t levels[NVTX_LEVEL_DOMAINS] __attribute__((tls_model("initial-exec")));

/* ---- text ---- */

static void text_ascii(struct text *t, const char *s)
{
    t->len = 0;
    t->cut = false;
    if (!s)
        return;
    size_t n = strnlen(s, NVTX_TEXT_BYTES + 1);
    t->cut = n > NVTX_TEXT_BYTES;
    t->len = (uint32_t)(t->cut ? NVTX_TEXT_BYTES : n);
    memcpy(t->bytes, s, t->len);
}

/* Wide text as UTF-8, cut at a whole character. */
static void text_wide(struct text *t, const wchar_t *s)
{
    t->len = 0;
    t->cut = false;
    if (!s)
        return;
    for (; *s; s++) {
        uint32_t c = (uint32_t)*s;
        uint8_t out[4];
        unsigned n;
        if (c < 0x80) {
            out[0] = (uint8_t)c;
            n = 1;
        } else if (c < 0x800) {
            out[0] = (uint8_t)(0xc0 | c >> 6);
            out[1] = (uint8_t)(0x80 | (c & 0x3f));
            n = 2;
        } else if (c < 0x10000 || c > 0x10ffff) {
            if (c > 0x10ffff || (c >= 0xd800 && c < 0xe000))
                c = 0xfffd;
            out[0] = (uint8_t)(0xe0 | c >> 12);
            out[1] = (uint8_t)(0x80 | ((c >> 6) & 0x3f));
            out[2] = (uint8_t)(0x80 | (c & 0x3f));
            n = 3;
        } else {
            out[0] = (uint8_t)(0xf0 | c >> 18);
            out[1] = (uint8_t)(0x80 | ((c >> 12) & 0x3f));
            out[2] = (uint8_t)(0x80 | ((c >> 6) & 0x3f));
            out[3] = (uint8_t)(0x80 | (c & 0x3f));
            n = 4;
        }
        if (t->len + n > NVTX_TEXT_BYTES) {
            t->cut = true;
            return;
        }
        memcpy(t->bytes + t->len, out, n);
        t->len += n;
    }
}

/* ---- domains and registered strings ---- */

static struct domain *domain_of(nvtxDomainHandle_t h)
{
    struct domain *d = (struct domain *)h;
    if (d >= domains && d <= &domains[NVTX_DOMAINS])
        return d;
    return NULL; /* the default domain (NULL), or a handle not ours */
}

/* 0 for the default domain; a handle not ours is one the chained tool
 * made once our table was full: the overflow domain's. */
static uint32_t domain_id(nvtxDomainHandle_t h)
{
    if (!h)
        return 0;
    struct domain *d = domain_of(h);
    return d ? d->id : domains[NVTX_DOMAINS].id;
}

static struct string *string_of(nvtxStringHandle_t h)
{
    struct string *s = (struct string *)h;
    if (s >= strings && s <= &strings[NVTX_STRINGS])
        return s;
    return NULL;
}

/* The same name gives the same domain, as NVTX asks; two threads creating
 * one name at once may get two ids, which the analyzer names alike. */
static struct domain *domain_find_or_claim(const struct text *name)
{
    uint32_t used = __atomic_load_n(&domains_used, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; i < used && i < NVTX_DOMAINS; i++) {
        struct domain *d = &domains[i];
        if (__atomic_load_n(&d->published, __ATOMIC_ACQUIRE) && d->name.len == name->len &&
            memcmp(d->name.bytes, name->bytes, name->len) == 0)
            return d;
    }
    uint32_t i = __atomic_fetch_add(&domains_used, 1, __ATOMIC_ACQ_REL);
    struct domain *d = &domains[i < NVTX_DOMAINS ? i : NVTX_DOMAINS];
    if (i >= NVTX_DOMAINS) {
        /* Kept from wrapping around: every slot is taken. */
        __atomic_store_n(&domains_used, NVTX_DOMAINS, __ATOMIC_RELEASE);
        return d;
    }
    d->name = *name;
    d->id = i + 1;
    __atomic_store_n(&d->published, 1, __ATOMIC_RELEASE);
    return d;
}

static struct string *string_claim(void)
{
    uint32_t i = __atomic_fetch_add(&strings_used, 1, __ATOMIC_ACQ_REL);
    if (i >= NVTX_STRINGS) {
        __atomic_store_n(&strings_used, NVTX_STRINGS, __ATOMIC_RELEASE);
        return &strings[NVTX_STRINGS];
    }
    return &strings[i];
}

/* ---- the chained library's callbacks ---- */

static NvtxFunctionPointer chain_core[NVTX_CBID_CORE_SIZE];
static NvtxFunctionPointer chain_core2[NVTX_CBID_CORE2_SIZE];

#define CHAINED(table, id, type) ((type)__atomic_load_n(&table[id], __ATOMIC_ACQUIRE))

/* ---- recording ---- */

static int level_step(uint32_t domain, int delta)
{
    if (domain >= NVTX_LEVEL_DOMAINS)
        return 0;
    int32_t *l = &levels[domain];
    if (delta > 0)
        return (*l)++;
    if (*l == 0)
        return -1; /* a pop with nothing pushed: NVTX's error value */
    return --(*l);
}

static void fill_attributes(struct ct_event *ev, const nvtxEventAttributes_t *a)
{
    struct text t = {.len = 0};
    if (!a || a->size < offsetof(nvtxEventAttributes_t, message) + sizeof(a->message))
        return;
    if (a->messageType == NVTX_MESSAGE_TYPE_ASCII)
        text_ascii(&t, a->message.ascii);
    else if (a->messageType == NVTX_MESSAGE_TYPE_UNICODE)
        text_wide(&t, a->message.unicode);
    else if (a->messageType == NVTX_MESSAGE_TYPE_REGISTERED) {
        /* A handle not ours: the chained tool's, past our full table. */
        struct string *s = string_of(a->message.registered);
        t = s ? s->text : strings[NVTX_STRINGS].text;
        ev->rec.flags |= NVTX_FLAG_REGISTERED;
    }
    memcpy(ev->rec.handle, t.bytes, t.len);
    ev->rec.has_handle = 1;
    ev->rec.arg[2] = t.len;
    if (t.cut)
        ev->rec.flags |= NVTX_FLAG_CUT;
    ev->rec.arg[3] = a->category;
    if (a->colorType == NVTX_COLOR_ARGB)
        ev->rec.flags |= NVTX_FLAG_COLOR | a->color;
    ev->rec.arg[4] = (uint32_t)a->payloadType;
    switch (a->payloadType) {
    case NVTX_PAYLOAD_TYPE_UNSIGNED_INT64:
    case NVTX_PAYLOAD_TYPE_INT64:
    case NVTX_PAYLOAD_TYPE_DOUBLE:
        ev->rec.arg[5] = a->payload.ullValue;
        break;
    case NVTX_PAYLOAD_TYPE_UNSIGNED_INT32:
    case NVTX_PAYLOAD_TYPE_INT32:
    case NVTX_PAYLOAD_TYPE_FLOAT:
        ev->rec.arg[5] = a->payload.uiValue;
        break;
    case NVTX_PAYLOAD_TYPE_EXT: {
        /* The first of its payloads: NCCL's structs start with the
         * communicator hash and the bytes (or nranks, rank). */
        const nvtxPayloadData_t *p = (const nvtxPayloadData_t *)(uintptr_t)a->payload.ullValue;
        if (!p || a->reserved0 < 1)
            break;
        ev->rec.arg[5] = p->schemaId;
        if (p->payload && p->size != (size_t)-1) {
            size_t n = p->size < 16 ? p->size : 16;
            memcpy(&ev->rec.arg[6], p->payload, n);
        }
        break;
    }
    default:
        break;
    }
}

static void fill_text(struct ct_event *ev, const struct text *t)
{
    memcpy(ev->rec.handle, t->bytes, t->len);
    ev->rec.has_handle = 1;
    ev->rec.arg[2] = t->len;
    if (t->cut)
        ev->rec.flags |= NVTX_FLAG_CUT;
}

/* The message: from the attributes (a call ...Ex), or the text (...A, ...W). */
static void describe(struct ct_event *ev, const nvtxEventAttributes_t *a, const struct text *t)
{
    if (t)
        fill_text(ev, t);
    else
        fill_attributes(ev, a);
}

/*
 * One record: begun and ended at once (an NVTX call takes no time of its
 * own), with the thread's device when it is known: asking the runtime
 * could start CUDA in a program that has not.
 */
static void begin(struct ct_event *ev, enum ct_api api, const void *caller, uint32_t domain)
{
    ct_event_begin(ev, api, caller);
    ct_event_returned(ev); /* its duration: 0, what cutrace does is not the program's */
    ev->rec.arg[0] = domain;
}

static void end(struct ct_event *ev, int result)
{
    ct_event_set_device(ev, ct_device_current(false));
    ct_event_end(ev, result);
}

static void mark(nvtxDomainHandle_t domain, const nvtxEventAttributes_t *a, const struct text *t,
                 const void *caller)
{
    struct ct_event ev;
    begin(&ev, CT_API_nvtxMark, caller, domain_id(domain));
    describe(&ev, a, t);
    end(&ev, 0);
}

static nvtxRangeId_t range_start(nvtxDomainHandle_t domain, const nvtxEventAttributes_t *a,
                                 const struct text *t, nvtxRangeId_t chained, const void *caller)
{
    /* The chained tool's id, when it gave one: its end is then its own. */
    nvtxRangeId_t id = chained ? chained : __atomic_add_fetch(&next_range_id, 1, __ATOMIC_RELAXED);
    struct ct_event ev;
    begin(&ev, CT_API_nvtxRangeStart, caller, domain_id(domain));
    ev.rec.arg[1] = id;
    describe(&ev, a, t);
    end(&ev, 0);
    return id;
}

static void range_end(nvtxDomainHandle_t domain, nvtxRangeId_t id, const void *caller)
{
    struct ct_event ev;
    begin(&ev, CT_API_nvtxRangeEnd, caller, domain_id(domain));
    ev.rec.arg[1] = id;
    end(&ev, 0);
}

static int range_push(nvtxDomainHandle_t domain, const nvtxEventAttributes_t *a,
                      const struct text *t, const void *caller)
{
    uint32_t id = domain_id(domain);
    struct ct_event ev;
    begin(&ev, CT_API_nvtxRangePush, caller, id);
    int level = level_step(id, +1);
    ev.rec.arg[1] = (uint64_t)level;
    describe(&ev, a, t);
    end(&ev, 0);
    return level;
}

static int range_pop(nvtxDomainHandle_t domain, const void *caller)
{
    uint32_t id = domain_id(domain);
    struct ct_event ev;
    begin(&ev, CT_API_nvtxRangePop, caller, id);
    int level = level_step(id, -1);
    ev.rec.arg[1] = (uint64_t)(int64_t)level;
    end(&ev, 0);
    return level;
}

/* Attributes for the chained library: its own handle for a registered message. */
static const nvtxEventAttributes_t *chained_attributes(const nvtxEventAttributes_t *a,
                                                       nvtxEventAttributes_t *copy)
{
    if (!a || a->messageType != NVTX_MESSAGE_TYPE_REGISTERED || a->size > sizeof *copy)
        return a;
    memcpy(copy, a, a->size);
    struct string *s = string_of(a->message.registered);
    copy->message.registered =
        s ? __atomic_load_n(&s->chained, __ATOMIC_ACQUIRE) : a->message.registered;
    return copy;
}

static nvtxDomainHandle_t chained_domain(nvtxDomainHandle_t h)
{
    struct domain *d = domain_of(h);
    return d ? __atomic_load_n(&d->chained, __ATOMIC_ACQUIRE) : h;
}

/* ---- the CORE callbacks ---- */

static void NVTX_API cb_mark_ex(const nvtxEventAttributes_t *a)
{
    mark(NULL, a, NULL, CT_CALLER);
    nvtxEventAttributes_t copy;
    nvtxMarkEx_impl_fntype next =
        CHAINED(chain_core, NVTX_CBID_CORE_MarkEx, nvtxMarkEx_impl_fntype);
    if (next)
        next(chained_attributes(a, &copy));
}

static void NVTX_API cb_mark_a(const char *message)
{
    struct text t;
    text_ascii(&t, message);
    mark(NULL, NULL, &t, CT_CALLER);
    nvtxMarkA_impl_fntype next = CHAINED(chain_core, NVTX_CBID_CORE_MarkA, nvtxMarkA_impl_fntype);
    if (next)
        next(message);
}

static void NVTX_API cb_mark_w(const wchar_t *message)
{
    struct text t;
    text_wide(&t, message);
    mark(NULL, NULL, &t, CT_CALLER);
    nvtxMarkW_impl_fntype next = CHAINED(chain_core, NVTX_CBID_CORE_MarkW, nvtxMarkW_impl_fntype);
    if (next)
        next(message);
}

static nvtxRangeId_t NVTX_API cb_range_start_ex(const nvtxEventAttributes_t *a)
{
    nvtxEventAttributes_t copy;
    nvtxRangeStartEx_impl_fntype next =
        CHAINED(chain_core, NVTX_CBID_CORE_RangeStartEx, nvtxRangeStartEx_impl_fntype);
    nvtxRangeId_t theirs = next ? next(chained_attributes(a, &copy)) : 0;
    return range_start(NULL, a, NULL, theirs, CT_CALLER);
}

static nvtxRangeId_t NVTX_API cb_range_start_a(const char *message)
{
    struct text t;
    text_ascii(&t, message);
    nvtxRangeStartA_impl_fntype next =
        CHAINED(chain_core, NVTX_CBID_CORE_RangeStartA, nvtxRangeStartA_impl_fntype);
    nvtxRangeId_t theirs = next ? next(message) : 0;
    return range_start(NULL, NULL, &t, theirs, CT_CALLER);
}

static nvtxRangeId_t NVTX_API cb_range_start_w(const wchar_t *message)
{
    struct text t;
    text_wide(&t, message);
    nvtxRangeStartW_impl_fntype next =
        CHAINED(chain_core, NVTX_CBID_CORE_RangeStartW, nvtxRangeStartW_impl_fntype);
    nvtxRangeId_t theirs = next ? next(message) : 0;
    return range_start(NULL, NULL, &t, theirs, CT_CALLER);
}

static void NVTX_API cb_range_end(nvtxRangeId_t id)
{
    range_end(NULL, id, CT_CALLER);
    nvtxRangeEnd_impl_fntype next =
        CHAINED(chain_core, NVTX_CBID_CORE_RangeEnd, nvtxRangeEnd_impl_fntype);
    if (next)
        next(id);
}

/* Push and pop return the chained tool's levels when it has those
 * callbacks: the program sees what it would see without cutrace. */
static int NVTX_API cb_range_push_ex(const nvtxEventAttributes_t *a)
{
    int level = range_push(NULL, a, NULL, CT_CALLER);
    nvtxEventAttributes_t copy;
    nvtxRangePushEx_impl_fntype next =
        CHAINED(chain_core, NVTX_CBID_CORE_RangePushEx, nvtxRangePushEx_impl_fntype);
    return next ? next(chained_attributes(a, &copy)) : level;
}

static int NVTX_API cb_range_push_a(const char *message)
{
    struct text t;
    text_ascii(&t, message);
    int level = range_push(NULL, NULL, &t, CT_CALLER);
    nvtxRangePushA_impl_fntype next =
        CHAINED(chain_core, NVTX_CBID_CORE_RangePushA, nvtxRangePushA_impl_fntype);
    return next ? next(message) : level;
}

static int NVTX_API cb_range_push_w(const wchar_t *message)
{
    struct text t;
    text_wide(&t, message);
    int level = range_push(NULL, NULL, &t, CT_CALLER);
    nvtxRangePushW_impl_fntype next =
        CHAINED(chain_core, NVTX_CBID_CORE_RangePushW, nvtxRangePushW_impl_fntype);
    return next ? next(message) : level;
}

static int NVTX_API cb_range_pop(void)
{
    int level = range_pop(NULL, CT_CALLER);
    nvtxRangePop_impl_fntype next =
        CHAINED(chain_core, NVTX_CBID_CORE_RangePop, nvtxRangePop_impl_fntype);
    return next ? next() : level;
}

/* ---- the CORE2 callbacks (domains) ---- */

static void NVTX_API cb_domain_mark_ex(nvtxDomainHandle_t domain, const nvtxEventAttributes_t *a)
{
    mark(domain, a, NULL, CT_CALLER);
    nvtxEventAttributes_t copy;
    nvtxDomainMarkEx_impl_fntype next =
        CHAINED(chain_core2, NVTX_CBID_CORE2_DomainMarkEx, nvtxDomainMarkEx_impl_fntype);
    if (next)
        next(chained_domain(domain), chained_attributes(a, &copy));
}

static nvtxRangeId_t NVTX_API cb_domain_range_start_ex(nvtxDomainHandle_t domain,
                                                       const nvtxEventAttributes_t *a)
{
    nvtxEventAttributes_t copy;
    nvtxDomainRangeStartEx_impl_fntype next = CHAINED(
        chain_core2, NVTX_CBID_CORE2_DomainRangeStartEx, nvtxDomainRangeStartEx_impl_fntype);
    nvtxRangeId_t theirs = next ? next(chained_domain(domain), chained_attributes(a, &copy)) : 0;
    return range_start(domain, a, NULL, theirs, CT_CALLER);
}

static void NVTX_API cb_domain_range_end(nvtxDomainHandle_t domain, nvtxRangeId_t id)
{
    range_end(domain, id, CT_CALLER);
    nvtxDomainRangeEnd_impl_fntype next =
        CHAINED(chain_core2, NVTX_CBID_CORE2_DomainRangeEnd, nvtxDomainRangeEnd_impl_fntype);
    if (next)
        next(chained_domain(domain), id);
}

static int NVTX_API cb_domain_range_push_ex(nvtxDomainHandle_t domain,
                                            const nvtxEventAttributes_t *a)
{
    int level = range_push(domain, a, NULL, CT_CALLER);
    nvtxEventAttributes_t copy;
    nvtxDomainRangePushEx_impl_fntype next =
        CHAINED(chain_core2, NVTX_CBID_CORE2_DomainRangePushEx, nvtxDomainRangePushEx_impl_fntype);
    return next ? next(chained_domain(domain), chained_attributes(a, &copy)) : level;
}

static int NVTX_API cb_domain_range_pop(nvtxDomainHandle_t domain)
{
    int level = range_pop(domain, CT_CALLER);
    nvtxDomainRangePop_impl_fntype next =
        CHAINED(chain_core2, NVTX_CBID_CORE2_DomainRangePop, nvtxDomainRangePop_impl_fntype);
    return next ? next(chained_domain(domain)) : level;
}

static nvtxResourceHandle_t NVTX_API cb_domain_resource_create(nvtxDomainHandle_t domain,
                                                               nvtxResourceAttributes_t *attribs)
{
    nvtxDomainResourceCreate_impl_fntype next = CHAINED(
        chain_core2, NVTX_CBID_CORE2_DomainResourceCreate, nvtxDomainResourceCreate_impl_fntype);
    return next ? next(chained_domain(domain), attribs) : NULL;
}

static nvtxStringHandle_t register_string(nvtxDomainHandle_t domain, const struct text *t)
{
    struct string *s = string_claim();
    if (s != &strings[NVTX_STRINGS]) {
        s->text = *t;
        s->domain = domain_id(domain);
    }
    return (nvtxStringHandle_t)s;
}

static nvtxStringHandle_t NVTX_API cb_domain_register_string_a(nvtxDomainHandle_t domain,
                                                               const char *string)
{
    struct text t;
    text_ascii(&t, string);
    struct string *s = (struct string *)register_string(domain, &t);
    nvtxDomainRegisterStringA_impl_fntype next = CHAINED(
        chain_core2, NVTX_CBID_CORE2_DomainRegisterStringA, nvtxDomainRegisterStringA_impl_fntype);
    if (next && s == &strings[NVTX_STRINGS])
        return next(chained_domain(domain), string); /* past our table: the tool's own */
    if (next)
        __atomic_store_n(&s->chained, next(chained_domain(domain), string), __ATOMIC_RELEASE);
    return (nvtxStringHandle_t)s;
}

static nvtxStringHandle_t NVTX_API cb_domain_register_string_w(nvtxDomainHandle_t domain,
                                                               const wchar_t *string)
{
    struct text t;
    text_wide(&t, string);
    struct string *s = (struct string *)register_string(domain, &t);
    nvtxDomainRegisterStringW_impl_fntype next = CHAINED(
        chain_core2, NVTX_CBID_CORE2_DomainRegisterStringW, nvtxDomainRegisterStringW_impl_fntype);
    if (next && s == &strings[NVTX_STRINGS])
        return next(chained_domain(domain), string); /* past our table: the tool's own */
    if (next)
        __atomic_store_n(&s->chained, next(chained_domain(domain), string), __ATOMIC_RELEASE);
    return (nvtxStringHandle_t)s;
}

/* A record per creation, so that the analyzer can name the domain's ids. */
static nvtxDomainHandle_t domain_create(const struct text *name, const void *caller)
{
    struct domain *d = domain_find_or_claim(name);
    struct ct_event ev;
    begin(&ev, CT_API_nvtxDomainCreate, caller, d->id);
    fill_text(&ev, &d->name);
    end(&ev, 0);
    return (nvtxDomainHandle_t)d;
}

static nvtxDomainHandle_t NVTX_API cb_domain_create_a(const char *name)
{
    struct text t;
    text_ascii(&t, name);
    struct domain *d = (struct domain *)domain_create(&t, CT_CALLER);
    nvtxDomainCreateA_impl_fntype next =
        CHAINED(chain_core2, NVTX_CBID_CORE2_DomainCreateA, nvtxDomainCreateA_impl_fntype);
    if (next && d == &domains[NVTX_DOMAINS])
        return next(name); /* past our table: the tool's own, which domain_id knows */
    if (next && !__atomic_load_n(&d->chained, __ATOMIC_ACQUIRE))
        __atomic_store_n(&d->chained, next(name), __ATOMIC_RELEASE);
    return (nvtxDomainHandle_t)d;
}

static nvtxDomainHandle_t NVTX_API cb_domain_create_w(const wchar_t *name)
{
    struct text t;
    text_wide(&t, name);
    struct domain *d = (struct domain *)domain_create(&t, CT_CALLER);
    nvtxDomainCreateW_impl_fntype next =
        CHAINED(chain_core2, NVTX_CBID_CORE2_DomainCreateW, nvtxDomainCreateW_impl_fntype);
    if (next && d == &domains[NVTX_DOMAINS])
        return next(name); /* past our table: the tool's own, which domain_id knows */
    if (next && !__atomic_load_n(&d->chained, __ATOMIC_ACQUIRE))
        __atomic_store_n(&d->chained, next(name), __ATOMIC_RELEASE);
    return (nvtxDomainHandle_t)d;
}

static void NVTX_API cb_domain_destroy(nvtxDomainHandle_t domain)
{
    /* Kept: a handle may still be used by another object of the process. */
    nvtxDomainDestroy_impl_fntype next =
        CHAINED(chain_core2, NVTX_CBID_CORE2_DomainDestroy, nvtxDomainDestroy_impl_fntype);
    if (next)
        next(chained_domain(domain));
}

/*
 * Callbacks cutrace does not record: the chained tool's, called as they
 * came (a domain translated to its own), or nothing.
 */
#define FORWARD(fn, table, id, type, params, ...)                                                  \
    static void NVTX_API fn params                                                                 \
    {                                                                                              \
        type next = CHAINED(table, id, type);                                                      \
        if (next)                                                                                  \
            next(__VA_ARGS__);                                                                     \
    }

FORWARD(cb_name_category_a, chain_core, NVTX_CBID_CORE_NameCategoryA, nvtxNameCategoryA_impl_fntype,
        (uint32_t category, const char *name), category, name)
FORWARD(cb_name_category_w, chain_core, NVTX_CBID_CORE_NameCategoryW, nvtxNameCategoryW_impl_fntype,
        (uint32_t category, const wchar_t *name), category, name)
FORWARD(cb_name_os_thread_a, chain_core, NVTX_CBID_CORE_NameOsThreadA,
        nvtxNameOsThreadA_impl_fntype, (uint32_t tid, const char *name), tid, name)
FORWARD(cb_name_os_thread_w, chain_core, NVTX_CBID_CORE_NameOsThreadW,
        nvtxNameOsThreadW_impl_fntype, (uint32_t tid, const wchar_t *name), tid, name)
FORWARD(cb_domain_resource_destroy, chain_core2, NVTX_CBID_CORE2_DomainResourceDestroy,
        nvtxDomainResourceDestroy_impl_fntype, (nvtxResourceHandle_t resource), resource)
FORWARD(cb_domain_name_category_a, chain_core2, NVTX_CBID_CORE2_DomainNameCategoryA,
        nvtxDomainNameCategoryA_impl_fntype,
        (nvtxDomainHandle_t domain, uint32_t category, const char *name), chained_domain(domain),
        category, name)
FORWARD(cb_domain_name_category_w, chain_core2, NVTX_CBID_CORE2_DomainNameCategoryW,
        nvtxDomainNameCategoryW_impl_fntype,
        (nvtxDomainHandle_t domain, uint32_t category, const wchar_t *name), chained_domain(domain),
        category, name)
FORWARD(cb_initialize, chain_core2, NVTX_CBID_CORE2_Initialize, nvtxInitialize_impl_fntype,
        (const void *reserved), reserved)

/* ---- the tables ---- */

static const NvtxFunctionPointer our_core[NVTX_CBID_CORE_SIZE] = {
    [NVTX_CBID_CORE_MarkEx] = (NvtxFunctionPointer)cb_mark_ex,
    [NVTX_CBID_CORE_MarkA] = (NvtxFunctionPointer)cb_mark_a,
    [NVTX_CBID_CORE_MarkW] = (NvtxFunctionPointer)cb_mark_w,
    [NVTX_CBID_CORE_RangeStartEx] = (NvtxFunctionPointer)cb_range_start_ex,
    [NVTX_CBID_CORE_RangeStartA] = (NvtxFunctionPointer)cb_range_start_a,
    [NVTX_CBID_CORE_RangeStartW] = (NvtxFunctionPointer)cb_range_start_w,
    [NVTX_CBID_CORE_RangeEnd] = (NvtxFunctionPointer)cb_range_end,
    [NVTX_CBID_CORE_RangePushEx] = (NvtxFunctionPointer)cb_range_push_ex,
    [NVTX_CBID_CORE_RangePushA] = (NvtxFunctionPointer)cb_range_push_a,
    [NVTX_CBID_CORE_RangePushW] = (NvtxFunctionPointer)cb_range_push_w,
    [NVTX_CBID_CORE_RangePop] = (NvtxFunctionPointer)cb_range_pop,
    [NVTX_CBID_CORE_NameCategoryA] = (NvtxFunctionPointer)cb_name_category_a,
    [NVTX_CBID_CORE_NameCategoryW] = (NvtxFunctionPointer)cb_name_category_w,
    [NVTX_CBID_CORE_NameOsThreadA] = (NvtxFunctionPointer)cb_name_os_thread_a,
    [NVTX_CBID_CORE_NameOsThreadW] = (NvtxFunctionPointer)cb_name_os_thread_w,
};

static const NvtxFunctionPointer our_core2[NVTX_CBID_CORE2_SIZE] = {
    [NVTX_CBID_CORE2_DomainMarkEx] = (NvtxFunctionPointer)cb_domain_mark_ex,
    [NVTX_CBID_CORE2_DomainRangeStartEx] = (NvtxFunctionPointer)cb_domain_range_start_ex,
    [NVTX_CBID_CORE2_DomainRangeEnd] = (NvtxFunctionPointer)cb_domain_range_end,
    [NVTX_CBID_CORE2_DomainRangePushEx] = (NvtxFunctionPointer)cb_domain_range_push_ex,
    [NVTX_CBID_CORE2_DomainRangePop] = (NvtxFunctionPointer)cb_domain_range_pop,
    [NVTX_CBID_CORE2_DomainResourceCreate] = (NvtxFunctionPointer)cb_domain_resource_create,
    [NVTX_CBID_CORE2_DomainResourceDestroy] = (NvtxFunctionPointer)cb_domain_resource_destroy,
    [NVTX_CBID_CORE2_DomainNameCategoryA] = (NvtxFunctionPointer)cb_domain_name_category_a,
    [NVTX_CBID_CORE2_DomainNameCategoryW] = (NvtxFunctionPointer)cb_domain_name_category_w,
    [NVTX_CBID_CORE2_DomainRegisterStringA] = (NvtxFunctionPointer)cb_domain_register_string_a,
    [NVTX_CBID_CORE2_DomainRegisterStringW] = (NvtxFunctionPointer)cb_domain_register_string_w,
    [NVTX_CBID_CORE2_DomainCreateA] = (NvtxFunctionPointer)cb_domain_create_a,
    [NVTX_CBID_CORE2_DomainCreateW] = (NvtxFunctionPointer)cb_domain_create_w,
    [NVTX_CBID_CORE2_DomainDestroy] = (NvtxFunctionPointer)cb_domain_destroy,
    [NVTX_CBID_CORE2_Initialize] = (NvtxFunctionPointer)cb_initialize,
};

/* Fills one module's slots (out_size: its last valid index) with ours. */
static bool fill_module(const NvtxExportTableCallbacks *etc, NvtxCallbackModule module,
                        const NvtxFunctionPointer *ours, unsigned count)
{
    NvtxFunctionTable table = NULL;
    unsigned int size = 0;
    if (!etc->GetModuleFunctionTable(module, &table, &size) || !table)
        return false;
    for (unsigned i = 1; i <= size && i < count; i++)
        if (ours[i] && table[i])
            *table[i] = ours[i];
    return true;
}

/* ---- chaining: the other library's initializer against our tables ---- */

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

/* A fork while another thread initialises leaves the child a lock no one
 * will release: the child's only thread starts with it free. */
static void child_after_fork(void)
{
    pthread_mutex_init(&init_lock, NULL);
}

static void register_atfork(void)
{
    pthread_atfork(NULL, NULL, child_after_fork);
}
static NvtxInitializeInjectionNvtxFunc_t chain_init;
static NvtxExtInitializeInjectionFunc_t chain_ext_init; /* its extensions' initializer */
static bool chain_tried;
static NvtxGetExportTableFunc_t chain_target; /* the object being initialised (under the lock) */
static NvtxFunctionPointer chain_slots_core[NVTX_CBID_CORE_SIZE];
static NvtxFunctionPointer chain_slots_core2[NVTX_CBID_CORE2_SIZE];
static NvtxFunctionPointer *chain_ptrs_core[NVTX_CBID_CORE_SIZE];
static NvtxFunctionPointer *chain_ptrs_core2[NVTX_CBID_CORE2_SIZE];

static int NVTX_API chain_get_module(NvtxCallbackModule module, NvtxFunctionTable *out_table,
                                     unsigned int *out_size)
{
    if (module == NVTX_CB_MODULE_CORE || module == NVTX_CB_MODULE_CORE2) {
        bool core = module == NVTX_CB_MODULE_CORE;
        if (out_table)
            *out_table = core ? chain_ptrs_core : chain_ptrs_core2;
        if (out_size)
            *out_size = (core ? NVTX_CBID_CORE_SIZE : NVTX_CBID_CORE2_SIZE) - 1;
        return 1;
    }
    /* What we do not record goes to the object's own table. */
    const NvtxExportTableCallbacks *real =
        (const NvtxExportTableCallbacks *)chain_target(NVTX_ETID_CALLBACKS);
    return real ? real->GetModuleFunctionTable(module, out_table, out_size) : 0;
}

static const NvtxExportTableCallbacks chain_callbacks = {sizeof chain_callbacks, chain_get_module};

static const void *NVTX_API chain_export_table(uint32_t id)
{
    if (id == NVTX_ETID_CALLBACKS)
        return &chain_callbacks;
    return chain_target(id);
}

int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table);

/* Under init_lock: loads CUTRACE_NVTX_CHAIN once (failures warned once). */
static void chain_load(void)
{
    if (chain_tried)
        return;
    chain_tried = true;
    const char *path = getenv("CUTRACE_NVTX_CHAIN");
    if (!path || !*path)
        return;
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    void *init = lib ? dlsym(lib, "InitializeInjectionNvtx2") : NULL;
    if (!init) {
        ct_warn_once(CT_PROBLEM_NVTX_CHAIN,
                     "CUTRACE_NVTX_CHAIN=%s: not an NVTX injection library (%s); its NVTX "
                     "tool gets nothing",
                     path, lib ? "no InitializeInjectionNvtx2" : dlerror());
        return;
    }
    if (init == (void *)InitializeInjectionNvtx2)
        return; /* ourselves, through another path */
    chain_init = (NvtxInitializeInjectionNvtxFunc_t)init;
    chain_ext_init =
        (NvtxExtInitializeInjectionFunc_t)dlsym(lib, "InitializeInjectionNvtxExtension");
}

/* Under init_lock: runs the chained initializer for one object and keeps
 * the callbacks it installed (one tool installs the same ones for every
 * object; the latest wins). */
static void chain_object(NvtxGetExportTableFunc_t get_export_table)
{
    memset(chain_slots_core, 0, sizeof chain_slots_core);
    memset(chain_slots_core2, 0, sizeof chain_slots_core2);
    for (unsigned i = 0; i < NVTX_CBID_CORE_SIZE; i++)
        chain_ptrs_core[i] = &chain_slots_core[i];
    for (unsigned i = 0; i < NVTX_CBID_CORE2_SIZE; i++)
        chain_ptrs_core2[i] = &chain_slots_core2[i];
    chain_target = get_export_table;
    if (!chain_init(chain_export_table)) {
        ct_warn_once(CT_PROBLEM_NVTX_CHAIN,
                     "the chained NVTX injection library refused to initialise; its NVTX tool "
                     "gets nothing");
        return;
    }
    for (unsigned i = 1; i < NVTX_CBID_CORE_SIZE; i++)
        if (chain_slots_core[i])
            __atomic_store_n(&chain_core[i], chain_slots_core[i], __ATOMIC_RELEASE);
    for (unsigned i = 1; i < NVTX_CBID_CORE2_SIZE; i++)
        if (chain_slots_core2[i])
            __atomic_store_n(&chain_core2[i], chain_slots_core2[i], __ATOMIC_RELEASE);
}

/*
 * The entry point NVTX looks up in $NVTX_INJECTION64_PATH; nonzero when
 * the object's callbacks are ours. The chained library is initialised
 * first, so that its callbacks are known before any of ours can run.
 */
CT_EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table)
{
    if (!get_export_table)
        return 0;
    const NvtxExportTableCallbacks *etc =
        (const NvtxExportTableCallbacks *)get_export_table(NVTX_ETID_CALLBACKS);
    if (!etc || etc->struct_size < sizeof *etc || !etc->GetModuleFunctionTable)
        return 0;
    pthread_once(&atfork_once, register_atfork);
    pthread_mutex_lock(&init_lock);
    chain_load();
    if (chain_init)
        chain_object(get_export_table);
    pthread_mutex_unlock(&init_lock);
    bool core = fill_module(etc, NVTX_CB_MODULE_CORE, our_core, NVTX_CBID_CORE_SIZE);
    bool core2 = fill_module(etc, NVTX_CB_MODULE_CORE2, our_core2, NVTX_CBID_CORE2_SIZE);
    return core || core2;
}

/*
 * NVTX's extension modules (payload schemas, counters, memory regions)
 * look for this entry point in the same library. cutrace records none of
 * them: a chained tool's own initializer gets each module, as it would
 * alone; without one they stay no-ops (0: not initialised).
 */
int InitializeInjectionNvtxExtension(nvtxExtModuleInfo_t *info);
CT_EXPORT int InitializeInjectionNvtxExtension(nvtxExtModuleInfo_t *info)
{
    pthread_once(&atfork_once, register_atfork);
    pthread_mutex_lock(&init_lock);
    chain_load();
    NvtxExtInitializeInjectionFunc_t next = chain_ext_init;
    pthread_mutex_unlock(&init_lock);
    return next && info ? next(info) : 0;
}
