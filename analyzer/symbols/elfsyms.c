/*
 * elfsyms.c - function symbols of an ELF file (elfsyms.h).
 */
#include "symbols/elfsyms.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_FILE_BYTES   (16ull << 30) /* larger than any library: a sparse decoy */
#define MAX_SYMBOLS      (64u << 20)
#define UNSIZED_REACH    65536 /* how far a symbol of unknown size may extend */
#define LOOKUP_BACKTRACK 32

struct image {
    const uint8_t *data;
    uint64_t size;
};

static int fail(char *err, size_t errlen, const char *fmt, const char *detail)
{
    snprintf(err, errlen, fmt, detail);
    return -1;
}

/* [off, off + len) lies in the file. */
static bool in_file(const struct image *im, uint64_t off, uint64_t len)
{
    return off <= im->size && len <= im->size - off;
}

static bool section_at(const struct image *im, const Elf64_Ehdr *eh, uint64_t nsec, uint64_t i,
                       Elf64_Shdr *out)
{
    if (i >= nsec)
        return false;
    memcpy(out, im->data + eh->e_shoff + i * sizeof(Elf64_Shdr), sizeof *out);
    return out->sh_type == SHT_NOBITS || in_file(im, out->sh_offset, out->sh_size);
}

static void read_build_id(const struct image *im, const Elf64_Shdr *sh, char *hex, size_t cap)
{
    if (sh->sh_type != SHT_NOTE || hex[0])
        return;
    uint64_t align = sh->sh_addralign == 8 ? 8 : 4;
    uint64_t at = sh->sh_offset, end = sh->sh_offset + sh->sh_size;
    while (end - at >= sizeof(Elf64_Nhdr)) {
        Elf64_Nhdr nh;
        memcpy(&nh, im->data + at, sizeof nh);
        uint64_t name = ((uint64_t)nh.n_namesz + align - 1) & ~(align - 1);
        uint64_t desc = ((uint64_t)nh.n_descsz + align - 1) & ~(align - 1);
        uint64_t body = at + sizeof nh;
        if (name > end - body || desc > end - body - name)
            return;
        if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
            memcmp(im->data + body, "GNU", 4) == 0 && nh.n_descsz > 0 && 2 * nh.n_descsz < cap) {
            for (uint32_t k = 0; k < nh.n_descsz; k++)
                snprintf(hex + 2 * k, 3, "%02x", im->data[body + name + k]);
            return;
        }
        at = body + name + desc;
    }
}

static int compare_syms(const void *a, const void *b)
{
    const struct elf_sym *x = a, *y = b;
    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    if (x->size != y->size)
        return x->size > y->size ? -1 : 1;
    if (x->global != y->global)
        return x->global ? -1 : 1;
    return x->name < y->name ? -1 : x->name > y->name;
}

static int read_symbols(const struct image *im, const Elf64_Ehdr *eh, uint64_t nsec,
                        const Elf64_Shdr *table, struct elf_symtab *out, char *err, size_t errlen)
{
    Elf64_Shdr strings;
    if (!section_at(im, eh, nsec, table->sh_link, &strings) || strings.sh_type != SHT_STRTAB)
        return fail(err, errlen, "%s", "corrupt ELF file: bad symbol string table");
    if (table->sh_entsize != 0 && table->sh_entsize != sizeof(Elf64_Sym))
        return fail(err, errlen, "%s", "corrupt ELF file: bad symbol size");
    uint64_t count = table->sh_size / sizeof(Elf64_Sym);
    if (count > MAX_SYMBOLS)
        return fail(err, errlen, "%s", "corrupt ELF file: too many symbols");
    /* The names are copied: the file is unmapped once loaded. */
    out->names = malloc(strings.sh_size + 1);
    out->syms = malloc((count ? count : 1) * sizeof *out->syms);
    if (!out->names || !out->syms)
        return fail(err, errlen, "%s", "out of memory");
    memcpy(out->names, im->data + strings.sh_offset, strings.sh_size);
    out->names[strings.sh_size] = '\0';
    out->names_len = strings.sh_size + 1;
    for (uint64_t i = 0; i < count; i++) {
        Elf64_Sym s;
        memcpy(&s, im->data + table->sh_offset + i * sizeof s, sizeof s);
        int type = ELF64_ST_TYPE(s.st_info);
        if ((type != STT_FUNC && type != STT_GNU_IFUNC) || s.st_shndx == SHN_UNDEF ||
            s.st_value == 0 || s.st_name == 0 || s.st_name >= strings.sh_size)
            continue;
        struct elf_sym *e = &out->syms[out->nsyms++];
        e->addr = s.st_value;
        e->size = s.st_size;
        e->name = s.st_name;
        e->global = ELF64_ST_BIND(s.st_info) != STB_LOCAL;
    }
    if (out->nsyms > 1)
        qsort(out->syms, out->nsyms, sizeof *out->syms, compare_syms);
    return 0;
}

static int parse(const struct image *im, struct elf_symtab *out, char *err, size_t errlen)
{
    if (im->size < sizeof(Elf64_Ehdr) || memcmp(im->data, ELFMAG, SELFMAG) != 0)
        return fail(err, errlen, "%s", "not an ELF file");
    Elf64_Ehdr eh;
    memcpy(&eh, im->data, sizeof eh);
    if (eh.e_ident[EI_CLASS] != ELFCLASS64)
        return fail(err, errlen, "%s", "not a 64-bit ELF file");
    if (eh.e_ident[EI_DATA] != ELFDATA2LSB || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__)
        return fail(err, errlen, "%s", "not a little-endian ELF file");
    if (eh.e_shoff == 0)
        return 0; /* no sections: nothing to name */
    if (eh.e_shentsize != sizeof(Elf64_Shdr) || !in_file(im, eh.e_shoff, sizeof(Elf64_Shdr)))
        return fail(err, errlen, "%s", "corrupt ELF file: bad section headers");
    uint64_t nsec = eh.e_shnum;
    if (nsec == 0) { /* extended numbering: the count is in section 0 */
        Elf64_Shdr first;
        memcpy(&first, im->data + eh.e_shoff, sizeof first);
        nsec = first.sh_size;
    }
    if (nsec > im->size / sizeof(Elf64_Shdr) || !in_file(im, eh.e_shoff, nsec * sizeof(Elf64_Shdr)))
        return fail(err, errlen, "%s", "corrupt ELF file: bad section headers");
    Elf64_Shdr symtab = {0}, dynsym = {0};
    bool has_symtab = false, has_dynsym = false;
    for (uint64_t i = 0; i < nsec; i++) {
        Elf64_Shdr sh;
        if (!section_at(im, &eh, nsec, i, &sh))
            return fail(err, errlen, "%s", "corrupt ELF file: a section lies outside the file");
        if (sh.sh_type == SHT_SYMTAB && !has_symtab) {
            symtab = sh;
            has_symtab = true;
        } else if (sh.sh_type == SHT_DYNSYM && !has_dynsym) {
            dynsym = sh;
            has_dynsym = true;
        }
        read_build_id(im, &sh, out->build_id, sizeof out->build_id);
    }
    out->full = has_symtab;
    if (has_symtab)
        return read_symbols(im, &eh, nsec, &symtab, out, err, errlen);
    if (has_dynsym)
        return read_symbols(im, &eh, nsec, &dynsym, out, err, errlen);
    return 0;
}

int elf_symtab_load(const char *path, struct elf_symtab *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    /* Opening is itself an action on a device node (a tape rewinds, a
     * watchdog arms, a FIFO's writer wakes up): the path is checked to name
     * a regular file first, and what was opened is checked to be that same
     * file, so a swap in between is refused too. */
    struct stat named, st;
    if (stat(path, &named) != 0)
        return fail(err, errlen, "%s", strerror(errno));
    if (!S_ISREG(named.st_mode))
        return fail(err, errlen, "%s", "not a regular file");
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return fail(err, errlen, "%s", strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_dev != named.st_dev ||
        st.st_ino != named.st_ino) {
        close(fd);
        return fail(err, errlen, "%s", "not a regular file");
    }
    if (st.st_size < (off_t)sizeof(Elf64_Ehdr) || (uint64_t)st.st_size > MAX_FILE_BYTES) {
        close(fd);
        return fail(err, errlen, "%s", "not an ELF file (size)");
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return fail(err, errlen, "%s", strerror(errno));
    struct image im = {map, (uint64_t)st.st_size};
    int rc = parse(&im, out, err, errlen);
    munmap(map, (size_t)st.st_size);
    return rc;
}

void elf_symtab_free(struct elf_symtab *t)
{
    free(t->syms);
    free(t->names);
    memset(t, 0, sizeof *t);
}

long elf_symtab_find(const struct elf_symtab *t, uint64_t vaddr, uint64_t *offset)
{
    size_t lo = 0, hi = t->nsyms;
    while (lo < hi) { /* the first symbol starting after vaddr */
        size_t mid = lo + (hi - lo) / 2;
        if (t->syms[mid].addr <= vaddr)
            lo = mid + 1;
        else
            hi = mid;
    }
    uint64_t next = lo < t->nsyms ? t->syms[lo].addr : UINT64_MAX;
    for (size_t k = 0; k < LOOKUP_BACKTRACK && lo > 0; k++) {
        const struct elf_sym *s = &t->syms[--lo];
        /* The first of a run at one address is the preferred name. */
        while (lo > 0 && t->syms[lo - 1].addr == s->addr)
            s = &t->syms[--lo];
        bool inside =
            s->size ? vaddr - s->addr < s->size : vaddr < next && vaddr - s->addr < UNSIZED_REACH;
        if (inside) {
            *offset = vaddr - s->addr;
            return (long)lo;
        }
        next = s->addr;
    }
    return -1;
}

const char *elf_symtab_lookup(const struct elf_symtab *t, uint64_t vaddr, uint64_t *offset)
{
    long i = elf_symtab_find(t, vaddr, offset);
    return i < 0 ? NULL : t->names + t->syms[i].name;
}

char *elf_debug_path(const char *build_id, char *buf, size_t cap)
{
    size_t n = strlen(build_id);
    if (n < 4 || strspn(build_id, "0123456789abcdef") != n)
        return NULL;
    int len = snprintf(buf, cap, "/usr/lib/debug/.build-id/%c%c/%s.debug", build_id[0], build_id[1],
                       build_id + 2);
    return len > 0 && (size_t)len < cap ? buf : NULL;
}
