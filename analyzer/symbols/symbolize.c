/*
 * symbolize.c - module files to frame names, cached (symbolize.h).
 */
#include "symbols/symbolize.h"

#include "cli.h"
#include "symbols/demangle.h"
#include "symbols/elfsyms.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct module_entry {
    char *path, *build_id; /* the key */
    struct elf_symtab syms;
    char **shown; /* per symbol: its demangled name, NULL until asked */
    bool *done;
    char *problem; /* NULL when names are available */
};

struct symbolizer {
    struct module_entry *modules;
    size_t n, cap;
    size_t last; /* the entry asked last: frames come in runs of one module */
};

struct symbolizer *symbolizer_new(void)
{
    return xcalloc(1, sizeof(struct symbolizer));
}

void symbolizer_free(struct symbolizer *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++) {
        struct module_entry *e = &s->modules[i];
        for (size_t k = 0; e->shown && k < e->syms.nsyms; k++)
            free(e->shown[k]);
        free(e->shown);
        free(e->done);
        elf_symtab_free(&e->syms);
        free(e->path);
        free(e->build_id);
        free(e->problem);
    }
    free(s->modules);
    free(s);
}

/* A stripped module's debug file, when the system has one for its build id. */
static void try_debug_file(struct module_entry *e)
{
    char path[512];
    if (e->syms.full || !e->syms.build_id[0] ||
        !elf_debug_path(e->syms.build_id, path, sizeof(path)))
        return;
    struct elf_symtab debug;
    char err[256];
    if (elf_symtab_load(path, &debug, err, sizeof(err)) == 0 && debug.full &&
        (!debug.build_id[0] || strcmp(debug.build_id, e->syms.build_id) == 0)) {
        elf_symtab_free(&e->syms);
        e->syms = debug;
        return;
    }
    elf_symtab_free(&debug);
}

static struct module_entry *module_for(struct symbolizer *s, const char *path, const char *build_id)
{
    if (!build_id)
        build_id = "";
    for (size_t k = 0; k < s->n; k++) {
        size_t i = (s->last + k) % s->n;
        if (strcmp(s->modules[i].path, path) == 0 &&
            strcmp(s->modules[i].build_id, build_id) == 0) {
            s->last = i;
            return &s->modules[i];
        }
    }
    s->last = s->n;
    s->modules = xgrow(s->modules, &s->cap, s->n + 1, sizeof(*s->modules));
    struct module_entry *e = &s->modules[s->n++];
    memset(e, 0, sizeof(*e));
    e->path = xstrdup(path);
    e->build_id = xstrdup(build_id);
    char err[256];
    if (elf_symtab_load(path, &e->syms, err, sizeof(err)) != 0) {
        e->problem = xstrdup(err);
        elf_symtab_free(&e->syms);
        return e;
    }
    if (build_id[0] && e->syms.build_id[0] && strcmp(build_id, e->syms.build_id) != 0) {
        e->problem = xstrdup("changed since the trace (its build id differs)");
        elf_symtab_free(&e->syms);
        return e;
    }
    if (build_id[0] && !e->syms.build_id[0])
        snprintf(e->syms.build_id, sizeof(e->syms.build_id), "%s", build_id);
    try_debug_file(e);
    if (e->syms.nsyms == 0)
        e->problem = xstrdup("no function symbols");
    e->shown = xcalloc(e->syms.nsyms ? e->syms.nsyms : 1, sizeof(*e->shown));
    e->done = xcalloc(e->syms.nsyms ? e->syms.nsyms : 1, sizeof(*e->done));
    return e;
}

const char *symbolizer_lookup(struct symbolizer *s, const char *path, const char *build_id,
                              uint64_t offset, uint64_t *sym_offset)
{
    if (!path || !path[0])
        return NULL;
    struct module_entry *e = module_for(s, path, build_id);
    if (e->syms.nsyms == 0)
        return NULL;
    long i = elf_symtab_find(&e->syms, offset, sym_offset);
    if (i < 0)
        return NULL;
    if (!e->done[i]) {
        e->done[i] = true;
        /* The symbol table names versioned symbols "name@@VERSION". */
        const char *raw = e->syms.names + e->syms.syms[i].name;
        size_t len = strcspn(raw, "@");
        char *plain = raw[len] ? xstrndup(raw, len) : NULL;
        e->shown[i] = demangle(plain ? plain : raw);
        if (!e->shown[i])
            e->shown[i] = plain;
        else
            free(plain);
    }
    return e->shown[i] ? e->shown[i] : e->syms.names + e->syms.syms[i].name;
}

const char *symbolizer_problem(struct symbolizer *s, const char *path, const char *build_id)
{
    if (!path || !path[0])
        return "no module";
    return module_for(s, path, build_id)->problem;
}
