/*
 * filter.c - which processes and GPUs of a model pass a report's filters.
 */
#include "model/filter.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool gm_filter_host_listed(const char *list, const char *host)
{
    size_t n = strlen(host);
    for (const char *p = list; *p;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len == n && strncmp(p, host, n) == 0)
            return true;
        p += len + (comma != NULL);
    }
    return false;
}

static bool used_gpu(const struct gm_process *p, uint32_t gpu)
{
    for (size_t i = 0; i < p->ngpus; i++)
        if (p->gpus[i] == gpu)
            return true;
    return false;
}

/* Up to 8 of m's pids (or its hosts, each once) after text ("; " between
 * parts): "pids 1000, 1001, ..." or "hosts node1, node2". Frees text. */
static char *append_list(char *text, const struct gm_model *m, bool hosts)
{
    enum { SHOWN = 8 };
    char *next = xasprintf("%s%s%s", text, text[0] ? "; " : "", hosts ? "hosts" : "pids");
    free(text);
    text = next;
    size_t shown = 0;
    bool more = false;
    for (size_t i = 0; i < m->nprocs; i++) {
        const struct gm_process *p = &m->procs[i];
        bool seen = false;
        for (size_t k = 0; hosts && k < i && !seen; k++)
            seen = strcmp(m->procs[k].host, p->host) == 0;
        if (seen)
            continue;
        if (shown == SHOWN) {
            more = true;
            break;
        }
        next = hosts ? xasprintf("%s%s %s", text, shown ? "," : "", p->host)
                     : xasprintf("%s%s %" PRId64, text, shown ? "," : "", p->pid);
        free(text);
        text = next;
        shown++;
    }
    if (more) {
        next = xasprintf("%s, ...", text);
        free(text);
        text = next;
    }
    return text;
}

char *gm_filter_what_there_is(const struct gm_model *m, const struct cli_report_opts *o)
{
    char *text = xstrdup("");
    if (o->rank) {
        int64_t lo = INT64_MAX, hi = -1;
        int64_t rank;
        for (size_t i = 0; i < m->nprocs; i++)
            if (gm_process_rank(&m->procs[i], &rank, NULL)) {
                lo = rank < lo ? rank : lo;
                hi = rank > hi ? rank : hi;
            }
        char *next = hi < 0 ? xasprintf("%sno process has a rank", text)
                            : xasprintf("%sranks %" PRId64 " to %" PRId64, text, lo, hi);
        free(text);
        text = next;
    }
    /* One list: the pids when --pid is given (they name one process each). */
    if (o->pid || o->host)
        text = append_list(text, m, !o->pid);
    return text;
}

void gm_filter_given(char *buf, size_t size, const struct cli_report_opts *o)
{
    assert(size > 0);
    buf[0] = '\0';
    const struct {
        const char *name, *value;
    } all[] = {{"--rank", o->rank}, {"--pid", o->pid}, {"--host", o->host}, {"--gpu", o->gpu}};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        if (all[i].value)
            snprintf(buf + strlen(buf), size - strlen(buf), "%s%s %s", buf[0] ? " " : "",
                     all[i].name, all[i].value);
}

int gm_filter_init(struct gm_filter *f, const struct gm_model *m, const struct cli_report_opts *o,
                   const char *command)
{
    *f = (struct gm_filter){.gpu = -1};
    f->proc_ok = xcalloc(m->nprocs ? m->nprocs : 1, sizeof(*f->proc_ok));
    f->gpu_ok = xcalloc(m->ngpus ? m->ngpus : 1, sizeof(*f->gpu_ok));
    f->procs_filtered = o->rank || o->pid || o->host;
    f->gpus_filtered = cli_report_filtered(o);
    if (o->gpu) {
        f->gpu = gm_select_gpu(m, o->gpu, command);
        if (f->gpu < 0)
            return CLI_EXIT_USAGE;
    }
    struct cli_range *ranks = NULL, *pids = NULL;
    size_t nranks = 0, npids = 0;
    /* cli_report_finish has parsed these once already: they cannot fail. */
    if (o->rank && cli_parse_ranges(o->rank, &ranks, &nranks) != 0)
        assert(!"--rank was checked");
    if (o->pid && cli_parse_ranges(o->pid, &pids, &npids) != 0)
        assert(!"--pid was checked");
    for (size_t i = 0; i < m->nprocs; i++) {
        const struct gm_process *p = &m->procs[i];
        bool ok = true;
        int64_t rank;
        if (o->rank)
            ok = ok && gm_process_rank(p, &rank, NULL) && cli_ranges_contain(ranks, nranks, rank);
        if (o->pid)
            ok = ok && cli_ranges_contain(pids, npids, p->pid);
        if (o->host)
            ok = ok && gm_filter_host_listed(o->host, p->host);
        if (f->gpu >= 0)
            ok = ok && used_gpu(p, (uint32_t)f->gpu);
        f->proc_ok[i] = ok;
        f->nprocs += ok;
    }
    free(ranks);
    free(pids);
    for (size_t g = 0; g < m->ngpus; g++) {
        bool ok = f->gpu < 0 || (uint32_t)f->gpu == g;
        if (ok && f->procs_filtered) {
            const struct gm_gpu *gpu = &m->gpus[g];
            ok = false;
            for (size_t k = 0; k < gpu->nprocs && !ok; k++)
                ok = f->proc_ok[gpu->procs[k]];
        }
        f->gpu_ok[g] = ok;
        f->ngpus += ok;
    }
    if (f->procs_filtered && f->nprocs == 0) {
        char given[256];
        gm_filter_given(given, sizeof(given), o);
        char *there = gm_filter_what_there_is(m, o);
        cli_usage_error(command, "%s: no process of these traces matches (%s)", given, there);
        free(there);
        return CLI_EXIT_USAGE;
    }
    return CLI_EXIT_OK;
}

void gm_filter_free(struct gm_filter *f)
{
    free(f->proc_ok);
    free(f->gpu_ok);
    *f = (struct gm_filter){.gpu = -1};
}
