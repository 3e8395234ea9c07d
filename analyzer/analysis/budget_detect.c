/*
 * budget_detect.c - the server and SGLang code path a trace comes from
 * (budget_detect.h). One pass over the Python frames of every measurement
 * (cudaMemGetInfo) collects what tells servers and versions apart: the
 * module a frame's file is in (.../sglang/... or .../vllm/...), the servers'
 * own measuring functions, and which file SGLang's profiling function lives
 * in; the launch lines are read only when the stacks show no server.
 */
#include "analysis/budget_detect.h"
#include "analysis/budget_version.h"
#include "cli.h"
#include "symbols/stacks.h"

#include <assert.h>
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SG = BUDGET_SGLANG, VL = BUDGET_VLLM, NFRAMEWORKS = 2 };

const char *budget_framework_name(enum budget_framework f)
{
    return f == BUDGET_VLLM ? "vllm" : "sglang";
}

/* The functions each server measures in (budget_ranks.c says which
 * measurement each makes): a stack that shows one is that server's even
 * when its files are not under a sglang/ or vllm/ directory. */
static const char *const server_functions[NFRAMEWORKS][3] = {
    [SG] = {"init_torch_distributed", "_profile_available_bytes", "profile_max_num_token"},
    [VL] = {"init_device", "determine_available_memory", "memory_profiling"},
};

/* What the SGLang path hangs on, by the frame that showed it. */
enum path_clue {
    CLUE_CONFIGURATOR, /* _profile_available_bytes in kv_cache_configurator.py */
    CLUE_BOOTSTRAP,    /* init_torch_distributed in distributed/bootstrap.py */
    CLUE_OLDER,        /* profile_max_num_token */
    CLUE_AMBIGUOUS,    /* _profile_available_bytes elsewhere (the mixin's) */
    NCLUES
};

struct clue {
    bool seen;
    char *frame; /* "function (file.py)" */
    int64_t pid;
};

struct evidence {
    struct clue module[NFRAMEWORKS]; /* frame = the file from "sglang/" or "vllm/" on */
    size_t module_count[NFRAMEWORKS];
    struct clue function[NFRAMEWORKS];
    struct clue path[NCLUES];
    int64_t pid; /* of the process being read */
    bool in_module[NFRAMEWORKS], in_function[NFRAMEWORKS];
};

static const char *base_name(const char *path)
{
    const char *slash = path ? strrchr(path, '/') : NULL;
    return slash ? slash + 1 : path ? path : "";
}

/* The part of file from the package directory on, "sglang/srt/x.py", or
 * NULL when file is in no directory of that name. */
static const char *package_part(const char *file, const char *package)
{
    size_t n = strlen(package);
    for (const char *at = file ? strstr(file, package) : NULL; at; at = strstr(at + 1, package))
        if ((at == file || at[-1] == '/') && at[n] == '/')
            return at;
    return NULL;
}

static void note(struct clue *c, int64_t pid, char *frame)
{
    if (c->seen) {
        free(frame);
        return;
    }
    *c = (struct clue){true, frame, pid};
}

static bool file_ends_with(const char *file, const char *tail)
{
    size_t n = file ? strlen(file) : 0, t = strlen(tail);
    return n >= t && strcmp(file + n - t, tail) == 0 && (n == t || file[n - t - 1] == '/');
}

static bool visit_frame(void *ctx, const char *function, const char *file, int64_t line)
{
    (void)line;
    struct evidence *e = ctx;
    static const char *const packages[NFRAMEWORKS] = {[SG] = "sglang", [VL] = "vllm"};
    for (int fw = 0; fw < NFRAMEWORKS; fw++) {
        const char *part = package_part(file, packages[fw]);
        if (part) {
            note(&e->module[fw], e->pid, xstrdup(part));
            e->in_module[fw] = true;
        }
        for (size_t k = 0; k < 3; k++)
            if (strcmp(function, server_functions[fw][k]) == 0) {
                note(&e->function[fw], e->pid, xasprintf("%s (%s)", function, base_name(file)));
                e->in_function[fw] = true;
            }
    }
    enum path_clue clue = NCLUES;
    if (strcmp(function, "_profile_available_bytes") == 0)
        clue = strcmp(base_name(file), "kv_cache_configurator.py") == 0 ? CLUE_CONFIGURATOR
                                                                        : CLUE_AMBIGUOUS;
    else if (strcmp(function, "init_torch_distributed") == 0 &&
             (file_ends_with(file, "distributed/bootstrap.py") ||
              strcmp(base_name(file), "bootstrap.py") == 0))
        clue = CLUE_BOOTSTRAP;
    else if (strcmp(function, "profile_max_num_token") == 0)
        clue = CLUE_OLDER;
    if (clue != NCLUES)
        note(&e->path[clue], e->pid, xasprintf("%s (%s)", function, base_name(file)));
    return true;
}

/* Reads the Python frames of every measurement of every process. */
static void gather(const struct gm_model *m, struct evidence *e)
{
    memset(e, 0, sizeof(*e));
    for (size_t i = 0; i < m->nprocs; i++) {
        const struct gm_process *p = &m->procs[i];
        struct trace *t = (struct trace *)p->trace; /* read only */
        e->pid = p->pid;
        for (size_t k = 0; k < p->nevents; k++) {
            if (p->events[k].type != GM_EV_MEASURE)
                continue;
            memset(e->in_module, 0, sizeof(e->in_module));
            stacks_python_frames(t, p->events[k].seq, visit_frame, e);
            for (int fw = 0; fw < NFRAMEWORKS; fw++)
                e->module_count[fw] += e->in_module[fw];
        }
    }
}

static void evidence_free(struct evidence *e)
{
    for (int fw = 0; fw < NFRAMEWORKS; fw++) {
        free(e->module[fw].frame);
        free(e->function[fw].frame);
    }
    for (int c = 0; c < NCLUES; c++)
        free(e->path[c].frame);
}

/* The server the stacks show, with why; false when they show none. */
static bool from_stacks(const struct evidence *e, enum budget_framework *out, char **why)
{
    bool sg = e->module[SG].seen, vl = e->module[VL].seen;
    if (sg || vl) {
        int fw = sg && vl ? (e->module_count[VL] > e->module_count[SG] ? VL : SG) : sg ? SG : VL;
        *out = (enum budget_framework)fw;
        *why = xasprintf("the measurements' Python stacks are in %s (pid %" PRId64 ")%s",
                         e->module[fw].frame, e->module[fw].pid,
                         sg && vl ? ", more of them than in the other server's modules" : "");
        return true;
    }
    sg = e->function[SG].seen, vl = e->function[VL].seen;
    if (sg == vl)
        return false; /* neither, or both servers' names: the names alone cannot tell */
    int fw = sg ? SG : VL;
    *out = (enum budget_framework)fw;
    *why = xasprintf("the measurements' Python stacks show %s's %s (pid %" PRId64 ")",
                     fw == SG ? "SGLang" : "vLLM", e->function[fw].frame, e->function[fw].pid);
    return true;
}

/* A command line's words, shell quotes dropped at their ends: enough to
 * find a program and its subcommand. */
#define MAX_WORDS 64
static size_t split_words(const char *line, char *buf, size_t size, char **words)
{
    size_t n = 0;
    snprintf(buf, size, "%s", line);
    for (char *at = strtok(buf, " \t"); at && n < MAX_WORDS; at = strtok(NULL, " \t")) {
        at += strspn(at, "'\"");
        size_t len = strlen(at);
        while (len > 0 && (at[len - 1] == '\'' || at[len - 1] == '"'))
            at[--len] = '\0';
        if (len > 0)
            words[n++] = at;
    }
    return n;
}

/* What a launch line runs, "sglang.launch_server", or NULL. */
static const char *server_of_line(const char *line, enum budget_framework *fw, char *what,
                                  size_t size)
{
    char buf[4096], *w[MAX_WORDS];
    size_t n = split_words(line, buf, sizeof(buf), w);
    for (size_t i = 0; i < n; i++) {
        const char *next = i + 1 < n ? w[i + 1] : "";
        if (strncmp(w[i], "sglang.launch_server", 20) == 0 ||
            file_ends_with(w[i], "sglang/launch_server.py")) {
            *fw = BUDGET_SGLANG;
            snprintf(what, size, "sglang.launch_server");
        } else if (strcmp(base_name(w[i]), "sglang") == 0 && strcmp(next, "serve") == 0) {
            *fw = BUDGET_SGLANG;
            snprintf(what, size, "sglang serve");
        } else if (strcmp(base_name(w[i]), "vllm") == 0 && strcmp(next, "serve") == 0) {
            *fw = BUDGET_VLLM;
            snprintf(what, size, "vllm serve");
        } else if (strncmp(w[i], "vllm.entrypoints", 16) == 0) {
            *fw = BUDGET_VLLM;
            snprintf(what, size, "%.100s", w[i]);
        } else {
            continue;
        }
        return what;
    }
    return NULL;
}

/* Whose gm_launch_line(m, p, k) is: "own", "launcher" or "run", and the pid. */
static const char *line_owner(const struct gm_process *p, size_t k, int64_t *pid)
{
    *pid = k == 0 ? p->pid : k <= p->nancestors ? p->ancestors[k - 1].pid : 0;
    return k == 0 ? "own" : k <= p->nancestors ? "launcher" : "run";
}

/* The same in budget_source_text's words. */
static char *line_owner_text(const struct gm_process *p, size_t k, char *buf, size_t size)
{
    struct budget_options o = {0};
    o.source_process = line_owner(p, k, &o.source_pid);
    return budget_source_text(&o, buf, size);
}

static bool from_launch_lines(const struct gm_model *m, enum budget_framework *out, char **why)
{
    for (size_t i = 0; i < m->nprocs; i++) {
        const struct gm_process *p = &m->procs[i];
        const char *line;
        for (size_t k = 0; (line = gm_launch_line(m, p, k)) != NULL; k++) {
            char what[128], whose[128];
            if (!server_of_line(line, out, what, sizeof(what)))
                continue;
            *why = xasprintf("%s runs %s", line_owner_text(p, k, whose, sizeof(whose)), what);
            return true;
        }
    }
    return false;
}

bool budget_detect_framework(const struct gm_model *m, enum budget_framework *out, char **why)
{
    struct evidence e;
    gather(m, &e);
    char *stack_why = NULL, *line_why = NULL;
    enum budget_framework by_stacks = BUDGET_SGLANG, by_lines = BUDGET_SGLANG;
    bool stacks = from_stacks(&e, &by_stacks, &stack_why);
    bool lines = from_launch_lines(m, &by_lines, &line_why);
    evidence_free(&e);
    *why = NULL;
    if (stacks) {
        *out = by_stacks;
        if (lines && by_lines != by_stacks) {
            *why = xasprintf("%s; %s (%s): the stacks win", stack_why, line_why,
                             budget_framework_name(by_lines));
            free(stack_why);
        } else {
            *why = stack_why;
        }
    } else if (lines) {
        *out = by_lines;
        *why = line_why;
        line_why = NULL;
    }
    free(line_why);
    return stacks || lines;
}

char *budget_framework_mismatch(const struct gm_model *m, enum budget_framework given)
{
    enum budget_framework shown;
    char *why = NULL;
    if (!budget_detect_framework(m, &shown, &why) || shown == given) {
        free(why);
        return NULL;
    }
    char *text = xasprintf("--framework %s, but the trace shows %s: %s; the %s replay may not "
                           "be this server's",
                           budget_framework_name(given), budget_framework_name(shown), why,
                           budget_framework_name(given));
    free(why);
    return text;
}

/* The path --server-version names, with why; UNKNOWN when it names none. */
static enum budget_path path_of_version(const char *version, char **why, const char *context)
{
    int v[4], since[4];
    bool ok = budget_parse_server_version(BUDGET_SGLANG_CURRENT_SINCE, since);
    assert(ok);
    (void)ok;
    if (!budget_parse_server_version(version, v)) {
        *why = xasprintf("%s; --server-version %s is not a version number", context, version);
        return BUDGET_PATH_UNKNOWN;
    }
    bool current = budget_version_compare(v, since) >= 0;
    *why = xasprintf("%s; --server-version %s is %s " BUDGET_SGLANG_CURRENT_SINCE
                     ", the first release known to raise the ValueError",
                     context, version, current ? "at or after" : "before");
    return current ? BUDGET_PATH_SGLANG_CURRENT : BUDGET_PATH_SGLANG_OLDER;
}

enum budget_path budget_sglang_path(const struct gm_model *m, const char *server_version,
                                    const char **source, char **why)
{
    struct evidence e;
    gather(m, &e);
    const struct clue *c = NULL;
    enum budget_path path = BUDGET_PATH_UNKNOWN;
    if (e.path[CLUE_CONFIGURATOR].seen || e.path[CLUE_BOOTSTRAP].seen) {
        c = e.path[CLUE_CONFIGURATOR].seen ? &e.path[CLUE_CONFIGURATOR] : &e.path[CLUE_BOOTSTRAP];
        path = BUDGET_PATH_SGLANG_CURRENT;
    } else if (e.path[CLUE_OLDER].seen) {
        c = &e.path[CLUE_OLDER];
        path = BUDGET_PATH_SGLANG_OLDER;
    }
    if (c) {
        *source = "trace";
        *why = xasprintf("the measurements' Python stacks show %s (pid %" PRId64 "): the %s path "
                         "(%s)",
                         c->frame, c->pid, path == BUDGET_PATH_SGLANG_CURRENT ? "current" : "older",
                         path == BUDGET_PATH_SGLANG_CURRENT
                             ? "ValueError when rest <= 0"
                             : "RuntimeError \"Not enough memory\" only");
        evidence_free(&e);
        return path;
    }
    bool ambiguous = e.path[CLUE_AMBIGUOUS].seen;
    char *context =
        ambiguous
            ? xasprintf("the measurements' Python stacks show %s (pid %" PRId64
                        "), which releases had both before and after the ValueError",
                        e.path[CLUE_AMBIGUOUS].frame, e.path[CLUE_AMBIGUOUS].pid)
            : xstrdup("the measurements' Python stacks show none of SGLang's profiling functions");
    evidence_free(&e);
    char *version_why = NULL;
    if (server_version) {
        path = path_of_version(server_version, &version_why, context);
        if (path != BUDGET_PATH_UNKNOWN) {
            free(context);
            *source = "option";
            *why = version_why;
            return path;
        }
    }
    /* Without SGLang's frames the trace is a C program's or one whose
     * stacks were off: the older path, the one such traces were made for. */
    *source = "default";
    *why = xasprintf("%s: the %s path, the default %s", version_why ? version_why : context,
                     ambiguous ? "current" : "older",
                     ambiguous ? "(--server-version names the release)"
                               : "without SGLang's Python frames (--server-version 0.5.16 "
                                 "replays the current one)");
    free(version_why);
    free(context);
    return ambiguous ? BUDGET_PATH_SGLANG_CURRENT : BUDGET_PATH_SGLANG_OLDER;
}

/* Where `--name` or `--name=` starts a word of line, what follows it. */
static bool flag_in_line(const char *line, const char *name, const char **value)
{
    size_t n = strlen(name);
    for (const char *at = strstr(line, name); at; at = strstr(at + 1, name)) {
        const char *before = at;
        while (before > line && (before[-1] == '\'' || before[-1] == '"'))
            before--;
        if (before != line && before[-1] != ' ')
            continue;
        const char *end = at + n;
        end += strspn(end, "'\"");
        if (*end != '\0' && *end != ' ' && *end != '=')
            continue;
        if (*end == '=' || *end == ' ')
            end++;
        end += strspn(end, " ");
        *value = *end ? end : NULL;
        return true;
    }
    return false;
}

bool budget_launch_flag(void *ctx, const char *name, const char **value)
{
    struct budget_launch_flags *f = ctx;
    const struct gm_model *m = f->m;
    for (size_t i = 0; i < m->nprocs; i++) {
        const struct gm_process *p = &m->procs[i];
        const char *line;
        for (size_t k = 0; (line = gm_launch_line(m, p, k)) != NULL; k++)
            if (flag_in_line(line, name, value)) {
                f->owner = line_owner(p, k, &f->pid);
                return true;
            }
    }
    return false;
}

void budget_choose_path(struct budget_analysis *r)
{
    struct budget_server *sv = &r->server;
    sv->path = budget_sglang_path(r->m, r->o->server_version, &sv->path_source, &sv->path_why);
}
