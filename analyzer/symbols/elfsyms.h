/*
 * elfsyms.h - the function symbols and GNU build id of an ELF file, for
 * naming native stack frames offline (symbolize.h).
 *
 * Reads ELF64 little-endian files (x86-64, aarch64): the full symbol table
 * (.symtab) when the file has one, else the dynamic one (.dynsym), and the
 * build id note. The file's path comes from a trace, so it is untrusted:
 * only regular files are opened (checked before the open, since opening a
 * device node acts on it, and opened without blocking), every offset and
 * size is checked against the file, and a bad file is a one-line error,
 * never a crash.
 *
 * Self-contained (libc only), so the unit tests link it alone.
 */
#ifndef CUTRACE_ANALYZER_ELFSYMS_H
#define CUTRACE_ANALYZER_ELFSYMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct elf_sym {
    uint64_t addr; /* st_value: the file's virtual address */
    uint64_t size; /* 0: unknown (assembly); it then extends to the next symbol */
    uint32_t name; /* offset into elf_symtab.names */
    bool global;
};

struct elf_symtab {
    char build_id[129];   /* hex, "" when none */
    bool full;            /* from .symtab (local functions too), not only .dynsym */
    struct elf_sym *syms; /* functions, sorted by addr (globals first at one address) */
    size_t nsyms;
    char *names; /* NUL-terminated names, copied out of the file */
    size_t names_len;
};

/*
 * Loads path. Returns 0, or -1 with a one-line reason in err ("not an ELF
 * file", "no such file", ...). out is zeroed first and must be freed with
 * elf_symtab_free either way.
 */
int elf_symtab_load(const char *path, struct elf_symtab *out, char *err, size_t errlen);
void elf_symtab_free(struct elf_symtab *t);

/*
 * The function containing the file address vaddr, or NULL; *offset is
 * vaddr minus its start. A symbol of unknown size covers up to the next
 * symbol, at most 64 KiB.
 */
const char *elf_symtab_lookup(const struct elf_symtab *t, uint64_t vaddr, uint64_t *offset);
/* The same as an index into t->syms, -1 for none. */
long elf_symtab_find(const struct elf_symtab *t, uint64_t vaddr, uint64_t *offset);

/*
 * Where a stripped file's debug symbols live when its distribution ships
 * them: /usr/lib/debug/.build-id/xx/yyyy.debug for build id xxyyyy. Writes
 * it to buf (size cap) and returns buf, NULL without a usable build id.
 */
char *elf_debug_path(const char *build_id, char *buf, size_t cap);

#endif
