/*
 * test_fake_roads.c - tests of the two fake libraries that reach the driver
 * on the roads symbol interposition does not cover:
 *
 *   libfake_static_user.so  a statically linked runtime: dlopen(libcuda.so.1),
 *                           dlsym(cuGetProcAddress_v2), everything else from it;
 *   libfake_expandable.so   PyTorch's expandable segments: VMM functions from
 *                           cudaGetDriverEntryPointByVersion.
 *
 * Each test runs in its own forked process (Check's fork mode, forced below)
 * with a fresh CUTRACE_FAKE_STATE in a mkdtemp directory, because the fakes
 * read their configuration once per process; memory is checked to the byte
 * through cuMemGetInfo (fsu_free_memory, or cudaMemGetInfo of the shared
 * runtime, which shares the primary contexts).
 *
 * How the roads are checked, each in a way that fails when the road is left:
 *   - this binary defines cudaGetDriverEntryPointByVersion, so it interposes
 *     the runtime's for libfake_expandable (which binds it through the PLT):
 *     every call is recorded and the cuMem* pointers handed back are replaced
 *     by counting wrappers, so the counts prove the library calls the pointers
 *     it got there and nothing else;
 *   - LD_DEBUG=symbols in a re-executed child logs every symbol lookup,
 *     dlsym's included: cuGetProcAddress_v2 must be the only driver name looked
 *     up; a child that cheats with dlsym(cuMemAlloc_v2) shows the check fails;
 *   - the ELF files are read for DT_NEEDED and undefined symbols.
 *
 * Run with LD_LIBRARY_PATH pointing at the directory of the fake libraries
 * (make fake-tests does); this binary lives there too.
 */
#include <cuda.h>
#include <cuda_runtime_api.h>

#include "fake_expandable.h"
#include "fake_static_user.h"

#include <check.h>
#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MiB (1ull << 20)
#define GiB (1ull << 30)

/* The configuration every test runs with (setup). */
#define GPU_MEM (16 * GiB)
#define CTX_MEM (512 * MiB)
#define GRAN    (2 * MiB)  /* the fake driver's VMM granularity */
#define CHUNK   (20 * MiB) /* an expandable segment's chunk: 20 MiB is a multiple of GRAN */

static char g_self[PATH_MAX]; /* this binary */
static char g_dir[PATH_MAX];  /* this binary and the libraries */
static char g_tmp[PATH_MAX];  /* per-test scratch directory */

/* ------------------------------------------------------------------------ */
/* The cudaGetDriverEntryPointByVersion interposer                            */
/* ------------------------------------------------------------------------ */

struct ep_call {
    char name[64];
    unsigned version;
    unsigned long long flags;
    cudaError_t result;
};

static pthread_mutex_t g_ep_mu = PTHREAD_MUTEX_INITIALIZER;
static struct ep_call g_ep_calls[64];
static int g_ep_n;

/* What the wrappers forward to, and how often they ran. */
static __typeof__(cuMemCreate) *g_real_create;
static __typeof__(cuMemMap) *g_real_map;
static __typeof__(cuMemUnmap) *g_real_unmap;
static __typeof__(cuMemRelease) *g_real_release;
static int g_n_create, g_n_map, g_n_unmap, g_n_release;

static CUresult counting_create(CUmemGenericAllocationHandle *handle, size_t size,
                                const CUmemAllocationProp *prop, unsigned long long flags)
{
    __atomic_add_fetch(&g_n_create, 1, __ATOMIC_RELAXED);
    return g_real_create(handle, size, prop, flags);
}

static CUresult counting_map(CUdeviceptr ptr, size_t size, size_t offset,
                             CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    __atomic_add_fetch(&g_n_map, 1, __ATOMIC_RELAXED);
    return g_real_map(ptr, size, offset, handle, flags);
}

static CUresult counting_unmap(CUdeviceptr ptr, size_t size)
{
    __atomic_add_fetch(&g_n_unmap, 1, __ATOMIC_RELAXED);
    return g_real_unmap(ptr, size);
}

static CUresult counting_release(CUmemGenericAllocationHandle handle)
{
    __atomic_add_fetch(&g_n_release, 1, __ATOMIC_RELAXED);
    return g_real_release(handle);
}

/*
 * Interposes the runtime's function for every library of this process (the
 * executable comes first in the lookup scope; the link exports it). Only a
 * test double: the real one is found with dlvsym(RTLD_NEXT), which from this
 * frame means "after the executable", i.e. libcudart.so.12.
 */
cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **funcPtr,
                                             unsigned int cudaVersion, unsigned long long flags,
                                             enum cudaDriverEntryPointQueryResult *driverStatus)
{
    static __typeof__(cudaGetDriverEntryPointByVersion) *real;
    if (!real)
        real = (__typeof__(real))dlvsym(RTLD_NEXT, "cudaGetDriverEntryPointByVersion",
                                        "libcudart.so.12");
    if (!real)
        abort(); /* the test cannot mean anything without the real one */
    cudaError_t e = real(symbol, funcPtr, cudaVersion, flags, driverStatus);
    pthread_mutex_lock(&g_ep_mu);
    if (g_ep_n < (int)(sizeof g_ep_calls / sizeof g_ep_calls[0])) {
        struct ep_call *c = &g_ep_calls[g_ep_n++];
        snprintf(c->name, sizeof c->name, "%s", symbol ? symbol : "(null)");
        c->version = cudaVersion;
        c->flags = flags;
        c->result = e;
    }
    if (e == cudaSuccess && symbol && funcPtr && *funcPtr) {
        /* Hand back wrappers: the library must then call exactly these. */
        if (strcmp(symbol, "cuMemCreate") == 0) {
            g_real_create = (__typeof__(g_real_create))*funcPtr;
            *funcPtr = (void *)counting_create;
        } else if (strcmp(symbol, "cuMemMap") == 0) {
            g_real_map = (__typeof__(g_real_map))*funcPtr;
            *funcPtr = (void *)counting_map;
        } else if (strcmp(symbol, "cuMemUnmap") == 0) {
            g_real_unmap = (__typeof__(g_real_unmap))*funcPtr;
            *funcPtr = (void *)counting_unmap;
        } else if (strcmp(symbol, "cuMemRelease") == 0) {
            g_real_release = (__typeof__(g_real_release))*funcPtr;
            *funcPtr = (void *)counting_release;
        }
    }
    pthread_mutex_unlock(&g_ep_mu);
    return e;
}

/* ------------------------------------------------------------------------ */
/* Helpers                                                                    */
/* ------------------------------------------------------------------------ */

/* Checked fixture: runs in the test's own process, before CUDA is touched. */
static void setup(void)
{
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(g_tmp, sizeof g_tmp, "%s/fake-roads-XXXXXX", base);
    ck_assert_ptr_nonnull(mkdtemp(g_tmp));
    char state[PATH_MAX + 16];
    snprintf(state, sizeof state, "%s/state", g_tmp);
    setenv("CUTRACE_FAKE_STATE", state, 1);
    setenv("CUTRACE_FAKE_UUID_SEED", "roads-seed", 1);
    setenv("CUTRACE_FAKE_GPUS", "2", 1);
    setenv("CUTRACE_FAKE_GPU_MEM", "16G", 1);
    setenv("CUTRACE_FAKE_CTX_MEM", "512M", 1);
    unsetenv("CUDA_VISIBLE_DEVICES");
    setenv("LD_LIBRARY_PATH", g_dir, 1);
}

static void rm_rf(const char *path)
{
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            char sub[PATH_MAX + 300];
            snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
            struct stat st;
            if (lstat(sub, &st) == 0 && S_ISDIR(st.st_mode))
                rm_rf(sub);
            else
                unlink(sub);
        }
        closedir(d);
    }
    rmdir(path);
}

static void teardown(void)
{
    rm_rf(g_tmp);
}

/*
 * Free memory of device dev through the shared runtime: cudaSetDevice makes
 * its primary context current (charged once per process, shared with the
 * static user's), cudaMemGetInfo is the driver's cuMemGetInfo.
 */
static size_t free_on(int dev)
{
    size_t f = 0, t = 0;
    ck_assert_int_eq(cudaSetDevice(dev), cudaSuccess);
    ck_assert_int_eq(cudaMemGetInfo(&f, &t), cudaSuccess);
    ck_assert_uint_eq(t, GPU_MEM);
    return f;
}

/* Free memory of the current context's device, through the static user's cuMemGetInfo. */
static size_t fsu_free_now(void)
{
    size_t f = 0, t = 0;
    ck_assert_int_eq(fsu_free_memory(&f, &t), CUDA_SUCCESS);
    ck_assert_uint_eq(t, GPU_MEM);
    return f;
}

static long long field(const char *s, const char *key)
{
    size_t k = strlen(key);
    for (const char *p = s; (p = strstr(p, key)) != NULL; p++) {
        if ((p == s || p[-1] == ' ' || p[-1] == '\n') && p[k] == '=')
            return strtoll(p + k + 1, NULL, 0);
    }
    ck_abort_msg("no %s= in: %s", key, s);
    return 0;
}

/* Runs this binary again in a child mode, with extra "NAME=value" environment; returns stdout. */
static void rerun(const char *mode, const char *const *env, char *out, size_t len)
{
    int pipefd[2];
    ck_assert_int_eq(pipe(pipefd), 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(pipefd[1], 1);
        close(pipefd[0]);
        close(pipefd[1]);
        for (size_t i = 0; env && env[i]; i++)
            putenv((char *)env[i]);
        execl(g_self, g_self, "--child", mode, (char *)NULL);
        _exit(127);
    }
    close(pipefd[1]);
    size_t n = 0;
    ssize_t got;
    while (n < len - 1 && (got = read(pipefd[0], out + n, len - 1 - n)) > 0)
        n += (size_t)got;
    out[n] = '\0';
    close(pipefd[0]);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %s failed: %s", mode, out);
}

struct lookups {
    int files; /* LD_DEBUG output files read */
    int gpa;   /* lookups of cuGetProcAddress_v2 */
    int others;
    char other[128]; /* the last other driver name looked up */
};

/*
 * Reads the LD_DEBUG=symbols files <g_tmp>/ld.<pid>: one line per object
 * searched for a name, "symbol=NAME;  lookup in file=...". Driver API names
 * are "cu" and an upper-case letter (cudaX is the runtime).
 */
static struct lookups read_lookups(void)
{
    struct lookups l;
    memset(&l, 0, sizeof l);
    DIR *d = opendir(g_tmp);
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "ld.", 3) != 0)
            continue;
        l.files++;
        char p[PATH_MAX + 300], line[1024];
        snprintf(p, sizeof p, "%s/%s", g_tmp, e->d_name);
        FILE *f = fopen(p, "r");
        ck_assert_ptr_nonnull(f);
        while (fgets(line, sizeof line, f)) {
            const char *s = strstr(line, "symbol=");
            if (!s)
                continue;
            s += 7;
            if (!(s[0] == 'c' && s[1] == 'u' && s[2] >= 'A' && s[2] <= 'Z'))
                continue;
            size_t n = strcspn(s, ";");
            if (n == strlen("cuGetProcAddress_v2") && strncmp(s, "cuGetProcAddress_v2", n) == 0) {
                l.gpa++;
            } else {
                l.others++;
                snprintf(l.other, sizeof l.other, "%.*s", (int)n, s);
            }
        }
        fclose(f);
    }
    closedir(d);
    return l;
}

/* What the dynamic section and dynamic symbol table of a shared object say. */
struct elfinfo {
    char soname[128];
    int nneeded;
    char needed[16][128];
    int nundef;
    char undef[256][64]; /* undefined dynamic symbols */
    int ndef;
    char def[64][64]; /* defined global or weak dynamic symbols */
};

static void read_elf(const char *path, struct elfinfo *out)
{
    memset(out, 0, sizeof *out);
    int fd = open(path, O_RDONLY);
    ck_assert_msg(fd >= 0, "cannot open %s", path);
    struct stat st;
    ck_assert_int_eq(fstat(fd, &st), 0);
    const unsigned char *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    ck_assert(m != MAP_FAILED);
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)m;
    ck_assert(memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 && eh->e_ident[EI_CLASS] == ELFCLASS64);
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(m + eh->e_shoff);
    for (int i = 0; i < eh->e_shnum; i++) {
        const char *strtab = (const char *)(m + sh[sh[i].sh_link].sh_offset);
        if (sh[i].sh_type == SHT_DYNAMIC) {
            const Elf64_Dyn *dyn = (const Elf64_Dyn *)(m + sh[i].sh_offset);
            for (size_t j = 0; j < sh[i].sh_size / sizeof *dyn && dyn[j].d_tag != DT_NULL; j++) {
                if (dyn[j].d_tag == DT_NEEDED && out->nneeded < 16)
                    snprintf(out->needed[out->nneeded++], 128, "%s", strtab + dyn[j].d_un.d_val);
                if (dyn[j].d_tag == DT_SONAME)
                    snprintf(out->soname, sizeof out->soname, "%s", strtab + dyn[j].d_un.d_val);
            }
        } else if (sh[i].sh_type == SHT_DYNSYM) {
            const Elf64_Sym *sym = (const Elf64_Sym *)(m + sh[i].sh_offset);
            for (size_t j = 1; j < sh[i].sh_size / sizeof *sym; j++) {
                const char *name = strtab + sym[j].st_name;
                int bind = ELF64_ST_BIND(sym[j].st_info);
                if (!*name || (bind != STB_GLOBAL && bind != STB_WEAK))
                    continue;
                if (sym[j].st_shndx == SHN_UNDEF) {
                    ck_assert_int_lt(out->nundef, 256);
                    snprintf(out->undef[out->nundef++], 64, "%s", name);
                } else {
                    ck_assert_int_lt(out->ndef, 64);
                    snprintf(out->def[out->ndef++], 64, "%s", name);
                }
            }
        }
    }
    munmap((void *)m, (size_t)st.st_size);
    close(fd);
}

static int has_name(char (*names)[64], int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0)
            return 1;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* libfake_static_user.so                                                     */
/* ------------------------------------------------------------------------ */

/* The first call retains device 0's primary context; allocations are charged to the byte. */
START_TEST(test_static_alloc_accounting)
{
    ck_assert_uint_eq(fsu_free_now(), GPU_MEM - CTX_MEM);
    void *a = NULL, *b = NULL, *p = NULL;
    ck_assert_int_eq(fsu_alloc(100 * MiB, &a), CUDA_SUCCESS);
    ck_assert_int_eq(fsu_alloc(1000, &b), CUDA_SUCCESS);
    ck_assert(a && b && a != b);
    ck_assert_uint_eq(fsu_free_now(), GPU_MEM - CTX_MEM - 100 * MiB - 1000);
    /* The shared runtime uses the context the static one made current: same device, same bytes. */
    size_t f = 0, t = 0;
    ck_assert_int_eq(cudaMemGetInfo(&f, &t), cudaSuccess);
    ck_assert_uint_eq(f, GPU_MEM - CTX_MEM - 100 * MiB - 1000);

    ck_assert_int_eq(fsu_alloc(0, &p), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(fsu_alloc(1, NULL), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(fsu_alloc(GPU_MEM, &p), CUDA_ERROR_OUT_OF_MEMORY);
    ck_assert_uint_eq(fsu_free_now(), GPU_MEM - CTX_MEM - 100 * MiB - 1000);

    ck_assert_int_eq(fsu_free(a), CUDA_SUCCESS);
    ck_assert_int_eq(fsu_free(b), CUDA_SUCCESS);
    ck_assert_int_eq(fsu_free(a), CUDA_ERROR_INVALID_VALUE);
    ck_assert_uint_eq(fsu_free_now(), GPU_MEM - CTX_MEM);
    ck_assert_int_eq(fsu_free_memory(NULL, &t), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

struct thread_alloc {
    size_t bytes;
    int rc;
    void *ptr;
};

static void *thread_alloc_main(void *arg)
{
    struct thread_alloc *ta = arg;
    ta->rc = fsu_alloc(ta->bytes, &ta->ptr);
    return NULL;
}

/*
 * With a current context (the runtime's, device 1) that context's device is
 * used; a thread without one gets device 0's primary context, retained once.
 */
START_TEST(test_static_uses_current_context)
{
    ck_assert_int_eq(cudaSetDevice(1), cudaSuccess);
    void *p = NULL;
    ck_assert_int_eq(fsu_alloc(64 * MiB, &p), CUDA_SUCCESS);
    ck_assert_uint_eq(free_on(1), GPU_MEM - CTX_MEM - 64 * MiB);

    struct thread_alloc ta[2] = {{.bytes = 32 * MiB}, {.bytes = 16 * MiB}};
    for (int i = 0; i < 2; i++) {
        pthread_t t;
        ck_assert_int_eq(pthread_create(&t, NULL, thread_alloc_main, &ta[i]), 0);
        ck_assert_int_eq(pthread_join(t, NULL), 0);
        ck_assert_int_eq(ta[i].rc, CUDA_SUCCESS);
    }
    /* One context charge on device 0 for both threads: the retain is once per process. */
    ck_assert_uint_eq(free_on(0), GPU_MEM - CTX_MEM - 48 * MiB);
    ck_assert_uint_eq(free_on(1), GPU_MEM - CTX_MEM - 64 * MiB);
    /* cuMemFree takes any context's memory. */
    ck_assert_int_eq(fsu_free(ta[0].ptr), CUDA_SUCCESS);
    ck_assert_int_eq(fsu_free(ta[1].ptr), CUDA_SUCCESS);
    ck_assert_int_eq(fsu_free(p), CUDA_SUCCESS);
    ck_assert_uint_eq(free_on(0), GPU_MEM - CTX_MEM);
    ck_assert_uint_eq(free_on(1), GPU_MEM - CTX_MEM);
}
END_TEST

/* VMM: rounded up to the granularity, charged to the location's device, undone on failure. */
START_TEST(test_static_vmm)
{
    const size_t base = GPU_MEM - CTX_MEM;
    ck_assert_uint_eq(free_on(0), base);
    ck_assert_uint_eq(free_on(1), base);
    void *p = NULL, *q = NULL, *r = NULL;
    ck_assert_int_eq(fsu_vmm_alloc(5 * MiB, 0, &p), CUDA_SUCCESS);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq((uintptr_t)p % GRAN, 0);
    ck_assert_uint_eq(free_on(0), base - 6 * MiB);
    ck_assert_int_eq(fsu_vmm_alloc(4 * MiB, 1, &q), CUDA_SUCCESS);
    ck_assert_uint_eq(free_on(0), base - 6 * MiB);
    ck_assert_uint_eq(free_on(1), base - 4 * MiB);

    /* The mapping is where the pointer says, and as large as rounded. */
    CUdeviceptr rb = 0;
    size_t rs = 0;
    __typeof__(cuMemGetAddressRange_v2) *range = NULL;
    enum cudaDriverEntryPointQueryResult st;
    ck_assert_int_eq(cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", (void **)&range,
                                                      12000, cudaEnableDefault, &st),
                     cudaSuccess);
    ck_assert_ptr_nonnull(range);
    ck_assert_int_eq(range(&rb, &rs, (CUdeviceptr)(uintptr_t)p + 4096), CUDA_SUCCESS);
    ck_assert_uint_eq(rb, (uintptr_t)p);
    ck_assert_uint_eq(rs, 6 * MiB);

    ck_assert_int_eq(fsu_vmm_alloc(2 * MiB, 7, &r), CUDA_ERROR_INVALID_DEVICE);
    ck_assert_int_eq(fsu_vmm_alloc(GPU_MEM, 0, &r), CUDA_ERROR_OUT_OF_MEMORY);
    ck_assert_int_eq(fsu_vmm_alloc(0, 0, &r), CUDA_ERROR_INVALID_VALUE);
    ck_assert_uint_eq(free_on(0), base - 6 * MiB);
    ck_assert_uint_eq(free_on(1), base - 4 * MiB);

    ck_assert_int_eq(fsu_vmm_free(p), CUDA_SUCCESS);
    ck_assert_int_eq(fsu_vmm_free(p), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(fsu_vmm_free(q), CUDA_SUCCESS);
    ck_assert_uint_eq(free_on(0), base);
    ck_assert_uint_eq(free_on(1), base);
    /* The failed attempts gave their reservations back: the first range is reused. */
    ck_assert_int_eq(fsu_vmm_alloc(6 * MiB, 0, &r), CUDA_SUCCESS);
    ck_assert_ptr_eq(r, p);
    ck_assert_int_eq(fsu_vmm_free(r), CUDA_SUCCESS);
}
END_TEST

/* NCCL's host-NUMA probe: host memory, charged to no device. */
START_TEST(test_static_host_numa_probe_not_charged)
{
    const size_t base = GPU_MEM - CTX_MEM;
    ck_assert_uint_eq(free_on(0), base);
    ck_assert_uint_eq(free_on(1), base);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(fsu_host_numa_probe(), CUDA_SUCCESS);
    ck_assert_uint_eq(free_on(0), base);
    ck_assert_uint_eq(free_on(1), base);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* libfake_expandable.so                                                      */
/* ------------------------------------------------------------------------ */

START_TEST(test_expandable_grow_shrink)
{
    const size_t base = GPU_MEM - CTX_MEM;
    ck_assert_uint_eq(free_on(0), base);
    ck_assert_uint_eq(free_on(1), base);
    ck_assert_uint_eq(fex_mapped_bytes(), 0);
    ck_assert_ptr_null(fex_base());
    ck_assert_int_eq(fex_grow(1), CUDA_ERROR_ILLEGAL_STATE);
    ck_assert_int_eq(fex_release(), CUDA_ERROR_ILLEGAL_STATE);
    ck_assert_int_eq(fex_reserve(0, 0), CUDA_ERROR_INVALID_VALUE);

    /* 1 GiB is 51.2 chunks: the reservation is 52 chunks; reserving costs no memory. */
    ck_assert_int_eq(fex_reserve(1 * GiB, 0), CUDA_SUCCESS);
    ck_assert_int_eq(fex_reserve(1 * GiB, 0), CUDA_ERROR_ILLEGAL_STATE);
    ck_assert_uint_eq(fex_chunk_bytes(), CHUNK);
    void *seg = fex_base();
    ck_assert_ptr_nonnull(seg);
    ck_assert_uint_eq(free_on(0), base);

    ck_assert_int_eq(fex_grow(1), CUDA_SUCCESS);
    ck_assert_uint_eq(fex_mapped_bytes(), CHUNK);
    ck_assert_uint_eq(free_on(0), base - CHUNK);
    ck_assert_int_eq(fex_grow(30 * MiB), CUDA_SUCCESS);
    ck_assert_uint_eq(fex_mapped_bytes(), 3 * CHUNK);
    ck_assert_uint_eq(free_on(0), base - 3 * CHUNK);
    ck_assert_int_eq(fex_grow(0), CUDA_SUCCESS);
    ck_assert_uint_eq(fex_mapped_bytes(), 3 * CHUNK);

    ck_assert_int_eq(fex_shrink(CHUNK), CUDA_SUCCESS);
    ck_assert_uint_eq(fex_mapped_bytes(), 2 * CHUNK);
    ck_assert_uint_eq(free_on(0), base - 2 * CHUNK);
    ck_assert_int_eq(fex_shrink(2 * CHUNK + 1), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(fex_grow(1 * GiB), CUDA_ERROR_INVALID_VALUE); /* 52 chunks, 50 left */
    ck_assert_int_eq(fex_grow(50 * CHUNK), CUDA_SUCCESS);          /* exactly to the end */
    ck_assert_uint_eq(fex_mapped_bytes(), 52 * CHUNK);
    ck_assert_uint_eq(free_on(0), base - 52 * CHUNK);
    ck_assert_int_eq(fex_grow(1), CUDA_ERROR_INVALID_VALUE);
    ck_assert_uint_eq(free_on(1), base);
    ck_assert_ptr_eq(fex_base(), seg);

    ck_assert_int_eq(fex_release(), CUDA_SUCCESS);
    ck_assert_uint_eq(fex_mapped_bytes(), 0);
    ck_assert_ptr_null(fex_base());
    ck_assert_uint_eq(free_on(0), base);
    ck_assert_int_eq(fex_release(), CUDA_ERROR_ILLEGAL_STATE);

    /* A segment on device 1 charges device 1 only. */
    ck_assert_int_eq(fex_reserve(100 * MiB, 1), CUDA_SUCCESS);
    ck_assert_int_eq(fex_grow(40 * MiB), CUDA_SUCCESS);
    ck_assert_uint_eq(free_on(1), base - 2 * CHUNK);
    ck_assert_uint_eq(free_on(0), base);
    ck_assert_int_eq(fex_release(), CUDA_SUCCESS);
    ck_assert_uint_eq(free_on(1), base);
}
END_TEST

/* A grow that runs out of memory halfway gives back the chunks it had mapped. */
START_TEST(test_expandable_out_of_memory)
{
    const size_t base = GPU_MEM - CTX_MEM;
    ck_assert_uint_eq(free_on(0), base);
    ck_assert_int_eq(fex_reserve(32 * GiB, 0), CUDA_SUCCESS);
    ck_assert_int_eq(fex_grow(GPU_MEM), CUDA_ERROR_OUT_OF_MEMORY);
    ck_assert_uint_eq(fex_mapped_bytes(), 0);
    ck_assert_uint_eq(free_on(0), base);
    /* 15 GiB is 768 chunks; what is left (512 MiB) holds 25 more, not the 52 asked. */
    ck_assert_int_eq(fex_grow(15 * GiB), CUDA_SUCCESS);
    ck_assert_uint_eq(free_on(0), base - 15 * GiB);
    ck_assert_int_eq(fex_grow(1 * GiB), CUDA_ERROR_OUT_OF_MEMORY);
    ck_assert_uint_eq(fex_mapped_bytes(), 15 * GiB);
    ck_assert_uint_eq(free_on(0), base - 15 * GiB);
    ck_assert_int_eq(fex_grow(25 * CHUNK), CUDA_SUCCESS);
    ck_assert_uint_eq(free_on(0), base - 15 * GiB - 25 * CHUNK);
    ck_assert_int_eq(fex_release(), CUDA_SUCCESS);
    ck_assert_uint_eq(free_on(0), base);
}
END_TEST

/*
 * Every driver function came from cudaGetDriverEntryPointByVersion (once
 * each, base name, 12000), and the library calls the pointers it got: the
 * interposer's counting wrappers see every create, map, unmap and release.
 */
START_TEST(test_expandable_entry_points_only)
{
    ck_assert_int_eq(fex_reserve(200 * MiB, 0), CUDA_SUCCESS);
    ck_assert_int_eq(fex_grow(3 * CHUNK), CUDA_SUCCESS);
    ck_assert_int_eq(fex_shrink(CHUNK), CUDA_SUCCESS);
    ck_assert_int_eq(fex_release(), CUDA_SUCCESS);
    ck_assert_int_eq(fex_reserve(200 * MiB, 1), CUDA_SUCCESS);
    ck_assert_int_eq(fex_grow(CHUNK), CUDA_SUCCESS);
    ck_assert_int_eq(fex_release(), CUDA_SUCCESS);

    static const char *const want[] = {
        "cuMemCreate", "cuMemAddressReserve", "cuMemMap",         "cuMemSetAccess",
        "cuMemUnmap",  "cuMemRelease",        "cuMemAddressFree", "cuMemGetAllocationGranularity"};
    const int nwant = (int)(sizeof want / sizeof want[0]);
    pthread_mutex_lock(&g_ep_mu);
    int n = g_ep_n;
    pthread_mutex_unlock(&g_ep_mu);
    ck_assert_int_eq(n, nwant);
    for (int w = 0; w < nwant; w++) {
        int seen = 0;
        for (int i = 0; i < n; i++) {
            if (strcmp(g_ep_calls[i].name, want[w]) != 0)
                continue;
            seen++;
            ck_assert_uint_eq(g_ep_calls[i].version, 12000);
            ck_assert_uint_eq(g_ep_calls[i].flags, cudaEnableDefault);
            ck_assert_int_eq(g_ep_calls[i].result, cudaSuccess);
        }
        ck_assert_msg(seen == 1, "%s asked for %d times", want[w], seen);
    }
    ck_assert_int_eq(__atomic_load_n(&g_n_create, __ATOMIC_RELAXED), 4);
    ck_assert_int_eq(__atomic_load_n(&g_n_map, __ATOMIC_RELAXED), 4);
    ck_assert_int_eq(__atomic_load_n(&g_n_unmap, __ATOMIC_RELAXED), 4);
    ck_assert_int_eq(__atomic_load_n(&g_n_release, __ATOMIC_RELAXED), 4);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Both                                                                       */
/* ------------------------------------------------------------------------ */

/* Neither library names the driver: no DT_NEEDED, no undefined cu* symbol. */
START_TEST(test_library_structure)
{
    char path[PATH_MAX + 64];
    static struct elfinfo e; /* large: keep it off the stack */

    snprintf(path, sizeof path, "%s/libfake_static_user.so", g_dir);
    read_elf(path, &e);
    ck_assert_str_eq(e.soname, "libfake_static_user.so");
    for (int i = 0; i < e.nneeded; i++)
        ck_assert_msg(strncmp(e.needed[i], "libcuda", 7) != 0, "static user links %s", e.needed[i]);
    for (int i = 0; i < e.nundef; i++)
        ck_assert_msg(strncmp(e.undef[i], "cu", 2) != 0, "static user references %s", e.undef[i]);
    ck_assert(has_name(e.undef, e.nundef, "dlopen") && has_name(e.undef, e.nundef, "dlsym"));
    for (int i = 0; i < e.ndef; i++)
        ck_assert_msg(strncmp(e.def[i], "fsu_", 4) == 0, "static user exports %s", e.def[i]);
    ck_assert(has_name(e.def, e.ndef, "fsu_alloc") && has_name(e.def, e.ndef, "fsu_vmm_free") &&
              has_name(e.def, e.ndef, "fsu_host_numa_probe"));

    snprintf(path, sizeof path, "%s/libfake_expandable.so", g_dir);
    read_elf(path, &e);
    ck_assert_str_eq(e.soname, "libfake_expandable.so");
    int cudart = 0;
    for (int i = 0; i < e.nneeded; i++) {
        cudart |= strcmp(e.needed[i], "libcudart.so.12") == 0;
        ck_assert_msg(strncmp(e.needed[i], "libcuda.so", 10) != 0, "expandable links %s",
                      e.needed[i]);
    }
    ck_assert_msg(cudart, "expandable does not link libcudart.so.12");
    /* The one CUDA name it binds is the entry-point lookup. */
    for (int i = 0; i < e.nundef; i++)
        ck_assert_msg(strncmp(e.undef[i], "cu", 2) != 0 ||
                          strcmp(e.undef[i], "cudaGetDriverEntryPointByVersion") == 0,
                      "expandable references %s", e.undef[i]);
    ck_assert(has_name(e.undef, e.nundef, "cudaGetDriverEntryPointByVersion"));
    ck_assert(!has_name(e.undef, e.nundef, "dlsym"));
    for (int i = 0; i < e.ndef; i++)
        ck_assert_msg(strncmp(e.def[i], "fex_", 4) == 0, "expandable exports %s", e.def[i]);
    ck_assert(has_name(e.def, e.ndef, "fex_reserve") && has_name(e.def, e.ndef, "fex_release"));
}
END_TEST

/* LD_DEBUG=symbols: the static user looks up cuGetProcAddress_v2 and no other driver name. */
START_TEST(test_static_user_looks_up_only_get_proc_address)
{
    char dbg[PATH_MAX + 64], out[256];
    snprintf(dbg, sizeof dbg, "LD_DEBUG_OUTPUT=%s/ld", g_tmp);
    rerun("static-user", (const char *[]){"LD_DEBUG=symbols", dbg, NULL}, out, sizeof out);
    ck_assert_int_eq(field(out, "ok"), 1);
    struct lookups l = read_lookups();
    ck_assert_int_gt(l.files, 0);
    ck_assert_int_gt(l.gpa, 0);
    ck_assert_msg(l.others == 0, "looked up %s by name", l.other);
}
END_TEST

/* The same check sees a dlsym of another driver name: it can fail. */
START_TEST(test_lookup_check_catches_a_direct_dlsym)
{
    char dbg[PATH_MAX + 64], out[256];
    snprintf(dbg, sizeof dbg, "LD_DEBUG_OUTPUT=%s/ld", g_tmp);
    rerun("static-user-cheat", (const char *[]){"LD_DEBUG=symbols", dbg, NULL}, out, sizeof out);
    ck_assert_int_eq(field(out, "ok"), 1);
    ck_assert_int_eq(field(out, "cheated"), 1);
    struct lookups l = read_lookups();
    ck_assert_int_gt(l.gpa, 0);
    ck_assert_int_gt(l.others, 0);
    ck_assert_str_eq(l.other, "cuMemAlloc_v2");
}
END_TEST

/* The expandable library looks up no driver name; the runtime under it only cuGetProcAddress_v2. */
START_TEST(test_expandable_looks_up_no_driver_name)
{
    char dbg[PATH_MAX + 64], out[256];
    snprintf(dbg, sizeof dbg, "LD_DEBUG_OUTPUT=%s/ld", g_tmp);
    rerun("expandable", (const char *[]){"LD_DEBUG=symbols", dbg, NULL}, out, sizeof out);
    ck_assert_int_eq(field(out, "ok"), 1);
    struct lookups l = read_lookups();
    ck_assert_int_gt(l.files, 0);
    ck_assert_int_gt(l.gpa, 0);
    ck_assert_msg(l.others == 0, "looked up %s by name", l.other);
}
END_TEST

/* Without libcuda.so.1 both libraries fail cleanly with CUDA_ERROR_NOT_INITIALIZED. */
START_TEST(test_missing_driver)
{
    const char *libs[] = {"libcudart.so.12", "libfake_static_user.so", "libfake_expandable.so"};
    char lib[PATH_MAX + 64], target[PATH_MAX + 64], env[PATH_MAX + 32], out[512];
    for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++) {
        snprintf(lib, sizeof lib, "%s/%s", g_tmp, libs[i]);
        snprintf(target, sizeof target, "%s/%s", g_dir, libs[i]);
        ck_assert_int_eq(symlink(target, lib), 0);
    }
    snprintf(env, sizeof env, "LD_LIBRARY_PATH=%s", g_tmp);
    rerun("nodriver", (const char *[]){env, NULL}, out, sizeof out);
    if (field(out, "driver_found")) {
        fprintf(stderr, "test_missing_driver: a system libcuda.so.1 exists, skipping\n");
        return;
    }
    ck_assert_int_eq(field(out, "alloc"), CUDA_ERROR_NOT_INITIALIZED);
    ck_assert_int_eq(field(out, "vmm"), CUDA_ERROR_NOT_INITIALIZED);
    ck_assert_int_eq(field(out, "probe"), CUDA_ERROR_NOT_INITIALIZED);
    ck_assert_int_eq(field(out, "meminfo"), CUDA_ERROR_NOT_INITIALIZED);
    ck_assert_int_eq(field(out, "reserve"), CUDA_ERROR_NOT_INITIALIZED);
}
END_TEST

/*
 * A forked child is a new process for the driver: neither library carries
 * the parent's contexts, ranges or segment into it, and both work there.
 */
START_TEST(test_fork_child_starts_clean)
{
    void *a = NULL, *v = NULL;
    ck_assert_int_eq(fsu_alloc(64 * MiB, &a), CUDA_SUCCESS);
    ck_assert_int_eq(fsu_vmm_alloc(4 * MiB, 0, &v), CUDA_SUCCESS);
    ck_assert_int_eq(fex_reserve(100 * MiB, 0), CUDA_SUCCESS);
    ck_assert_int_eq(fex_grow(CHUNK), CUDA_SUCCESS);
    const size_t parent = GPU_MEM - CTX_MEM - 64 * MiB - 4 * MiB - CHUNK;
    ck_assert_uint_eq(fsu_free_now(), parent);

    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        /* No Check asserts here: report through the exit code, which step failed. */
        int step = 0;
        void *b = NULL;
        size_t f = 0, t = 0;
        if (fex_mapped_bytes() != 0 || fex_base() != NULL)
            step = 1;
        else if (fsu_vmm_free(v) != CUDA_ERROR_INVALID_VALUE)
            step = 2;
        else if (fsu_alloc(32 * MiB, &b) != CUDA_SUCCESS)
            step = 3;
        else if (fsu_free_memory(&f, &t) != CUDA_SUCCESS || f != parent - CTX_MEM - 32 * MiB)
            step = 4;
        else if (fex_reserve(100 * MiB, 0) != CUDA_SUCCESS || fex_grow(CHUNK) != CUDA_SUCCESS)
            step = 5;
        else if (fsu_free_memory(&f, &t) != CUDA_SUCCESS ||
                 f != parent - CTX_MEM - 32 * MiB - CHUNK)
            step = 6;
        _exit(step); /* not exit(): the charges go as a dead process's, reclaimed below */
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child failed at step %d",
                  WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    ck_assert_uint_eq(fsu_free_now(), parent);
    ck_assert_uint_eq(fex_mapped_bytes(), CHUNK);
    ck_assert_int_eq(fsu_vmm_free(v), CUDA_SUCCESS);
    ck_assert_int_eq(fex_release(), CUDA_SUCCESS);
    ck_assert_int_eq(fsu_free(a), CUDA_SUCCESS);
    ck_assert_uint_eq(fsu_free_now(), GPU_MEM - CTX_MEM);
}
END_TEST

static void *churn_main(void *arg)
{
    int *failures = arg;
    for (int i = 0; i < 50; i++) {
        void *p = NULL, *v = NULL;
        if (fsu_alloc(MiB, &p) != CUDA_SUCCESS || fsu_vmm_alloc(GRAN, i % 2, &v) != CUDA_SUCCESS ||
            fsu_vmm_free(v) != CUDA_SUCCESS || fsu_free(p) != CUDA_SUCCESS)
            (*failures)++;
    }
    return NULL;
}

/* Several threads allocating and freeing on both roads leave the devices as they found them. */
START_TEST(test_threads)
{
    const size_t base = GPU_MEM - CTX_MEM;
    ck_assert_uint_eq(free_on(1), base);
    ck_assert_uint_eq(free_on(0), base);
    ck_assert_int_eq(fex_reserve(1 * GiB, 1), CUDA_SUCCESS);
    pthread_t t[4];
    int failures[4] = {0};
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, churn_main, &failures[i]), 0);
    for (int i = 0; i < 10; i++) {
        ck_assert_int_eq(fex_grow(CHUNK), CUDA_SUCCESS);
        if (i % 3 == 2)
            ck_assert_int_eq(fex_shrink(CHUNK), CUDA_SUCCESS);
    }
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(pthread_join(t[i], NULL), 0);
        ck_assert_int_eq(failures[i], 0);
    }
    ck_assert_uint_eq(fex_mapped_bytes(), 7 * CHUNK);
    ck_assert_uint_eq(free_on(0), base);
    ck_assert_uint_eq(free_on(1), base - 7 * CHUNK);
    ck_assert_int_eq(fex_release(), CUDA_SUCCESS);
    ck_assert_uint_eq(free_on(1), base);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Child modes and main                                                       */
/* ------------------------------------------------------------------------ */

/* Exercises every fsu_* function once; no cuda* call, so the runtime stays asleep. */
static int exercise_static_user(void)
{
    void *p = NULL, *v = NULL;
    size_t f = 0, t = 0;
    return fsu_alloc(MiB, &p) == 0 && fsu_free_memory(&f, &t) == 0 && fsu_free(p) == 0 &&
           fsu_vmm_alloc(GRAN, 0, &v) == 0 && fsu_vmm_free(v) == 0 && fsu_host_numa_probe() == 0;
}

static int child_main(const char *mode)
{
    if (strcmp(mode, "static-user") == 0) {
        printf("ok=%d\n", exercise_static_user());
        return 0;
    }
    if (strcmp(mode, "static-user-cheat") == 0) {
        int ok = exercise_static_user();
        /* What the library must never do: bind a driver function by name. */
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
        int cheated = h && dlsym(h, "cuMemAlloc_v2") != NULL;
        printf("ok=%d cheated=%d\n", ok, cheated);
        return 0;
    }
    if (strcmp(mode, "expandable") == 0) {
        int ok = fex_reserve(100 * MiB, 0) == 0 && fex_grow(2 * CHUNK) == 0 &&
                 fex_shrink(CHUNK) == 0 && fex_release() == 0;
        printf("ok=%d\n", ok);
        return 0;
    }
    if (strcmp(mode, "nodriver") == 0) {
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        void *p = NULL;
        size_t f = 0, t = 0;
        printf("driver_found=%d alloc=%d vmm=%d probe=%d meminfo=%d reserve=%d\n", h != NULL,
               fsu_alloc(MiB, &p), fsu_vmm_alloc(GRAN, 0, &p), fsu_host_numa_probe(),
               fsu_free_memory(&f, &t), fex_reserve(100 * MiB, 0));
        return 0;
    }
    return 2;
}

static Suite *roads_suite(void)
{
    Suite *s = suite_create("fake_roads");
    TCase *tc = tcase_create("all");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_static_alloc_accounting);
    tcase_add_test(tc, test_static_uses_current_context);
    tcase_add_test(tc, test_static_vmm);
    tcase_add_test(tc, test_static_host_numa_probe_not_charged);
    tcase_add_test(tc, test_expandable_grow_shrink);
    tcase_add_test(tc, test_expandable_out_of_memory);
    tcase_add_test(tc, test_expandable_entry_points_only);
    tcase_add_test(tc, test_library_structure);
    tcase_add_test(tc, test_static_user_looks_up_only_get_proc_address);
    tcase_add_test(tc, test_lookup_check_catches_a_direct_dlsym);
    tcase_add_test(tc, test_expandable_looks_up_no_driver_name);
    tcase_add_test(tc, test_missing_driver);
    tcase_add_test(tc, test_fork_child_starts_clean);
    tcase_add_test(tc, test_threads);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--child") == 0)
        return child_main(argv[2]);
    ssize_t n = readlink("/proc/self/exe", g_self, sizeof g_self - 1);
    if (n <= 0)
        abort();
    g_self[n] = '\0';
    snprintf(g_dir, sizeof g_dir, "%s", g_self);
    *strrchr(g_dir, '/') = '\0';
    SRunner *sr = srunner_create(roads_suite());
    /* Each test needs a process of its own: the fakes configure themselves once. */
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
