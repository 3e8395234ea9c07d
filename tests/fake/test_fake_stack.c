/*
 * test_fake_stack.c - tests of the fake CUDA stack (libcuda.so.1 and
 * libcudart.so.12) that every other cutrace test runs against.
 *
 * Each test runs in its own forked process (Check's fork mode, forced below)
 * with a fresh CUTRACE_FAKE_STATE file in a mkdtemp directory, because the
 * fake reads its configuration once per process and shares accounting through
 * that file. Second processes are fake_probe, fork+exec'ed from the directory
 * this binary lives in (the libraries are there too).
 *
 * Run with LD_LIBRARY_PATH pointing at that directory (make fake-tests does).
 */
#define CUDA_ENABLE_DEPRECATED 1 /* cudaGetDriverEntryPoint is deprecated in 13.0 */
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <check.h>
#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
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

static char g_dir[PATH_MAX];        /* where this binary, fake_probe and the libraries are */
static char g_tmp[PATH_MAX];        /* per-test scratch directory */
static char g_state[PATH_MAX + 16]; /* per-test state file */

/* The per-thread-stream entry points the header only declares under nvcc's flag. */
extern __typeof__(cudaGraphLaunch) cudaGraphLaunch_ptsz;
extern __typeof__(cudaStreamBeginCapture) cudaStreamBeginCapture_ptsz;
extern __typeof__(cudaStreamEndCapture) cudaStreamEndCapture_ptsz;
extern __typeof__(cudaStreamIsCapturing) cudaStreamIsCapturing_ptsz;
extern __typeof__(cudaMallocAsync) cudaMallocAsync_ptsz;
extern __typeof__(cudaFreeAsync) cudaFreeAsync_ptsz;
extern __typeof__(cudaMallocFromPoolAsync) cudaMallocFromPoolAsync_ptsz;

/* ------------------------------------------------------------------------ */
/* Helpers                                                                    */
/* ------------------------------------------------------------------------ */

static void find_dir(void)
{
    ssize_t n = readlink("/proc/self/exe", g_dir, sizeof g_dir - 1);
    if (n <= 0)
        abort();
    g_dir[n] = '\0';
    *strrchr(g_dir, '/') = '\0';
}

/* Checked fixture: runs in the test's own process, before CUDA is touched. */
static void setup(void)
{
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(g_tmp, sizeof g_tmp, "%s/fake-stack-XXXXXX", base);
    ck_assert_ptr_nonnull(mkdtemp(g_tmp));
    snprintf(g_state, sizeof g_state, "%s/state", g_tmp);
    setenv("CUTRACE_FAKE_STATE", g_state, 1);
    setenv("CUTRACE_FAKE_UUID_SEED", "test-seed", 1);
    setenv("CUTRACE_FAKE_GPUS", "1", 1);
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
            char sub[PATH_MAX];
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

struct probe {
    pid_t pid;
    int in;    /* its stdin */
    FILE *out; /* its stdout */
};

/*
 * Starts fake_probe with extra environment ("NAME=value", or "NAME" to
 * unset). keep_fd, when >= 0, is passed on open across exec.
 */
static struct probe probe_start(const char *const *env, const char *const *args, int keep_fd)
{
    int to[2], from[2];
    /* Close-on-exec, or later probes would hold earlier probes' stdin open. */
    ck_assert_int_eq(pipe2(to, O_CLOEXEC), 0);
    ck_assert_int_eq(pipe2(from, O_CLOEXEC), 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(to[0], 0);
        dup2(from[1], 1);
        close(to[0]);
        close(to[1]);
        close(from[0]);
        close(from[1]);
        if (keep_fd >= 0)
            fcntl(keep_fd, F_SETFD, 0);
        for (size_t i = 0; env && env[i]; i++) {
            if (strchr(env[i], '='))
                putenv((char *)env[i]);
            else
                unsetenv(env[i]);
        }
        char path[PATH_MAX + 16];
        snprintf(path, sizeof path, "%s/fake_probe", g_dir);
        const char *argv[16] = {path};
        for (size_t i = 0; args[i] && i < 14; i++)
            argv[i + 1] = args[i];
        execv(path, (char *const *)argv);
        _exit(127);
    }
    close(to[0]);
    close(from[1]);
    struct probe p = {pid, to[1], fdopen(from[0], "r")};
    ck_assert_ptr_nonnull(p.out);
    return p;
}

static char *probe_line(struct probe *p, char *buf, size_t len)
{
    char *r = fgets(buf, (int)len, p->out);
    ck_assert_msg(r != NULL, "probe ended early");
    return r;
}

/* Closes its stdin, collects the rest of its output and its exit status. */
static int probe_finish(struct probe *p, char *buf, size_t len)
{
    close(p->in);
    size_t n = 0;
    if (buf) {
        n = fread(buf, 1, len - 1, p->out);
        buf[n] = '\0';
    }
    fclose(p->out);
    int status;
    ck_assert_int_eq(waitpid(p->pid, &status, 0), p->pid);
    return status;
}

static void probe_run(const char *const *env, const char *const *args, char *buf, size_t len)
{
    struct probe p = probe_start(env, args, -1);
    int status = probe_finish(&p, buf, len);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "probe failed: %s", buf);
}

/* The value of "key=" in s (a whole word), as an integer; fails when absent. */
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

static void field_str(const char *s, const char *key, char *out, size_t len)
{
    size_t k = strlen(key);
    for (const char *p = s; (p = strstr(p, key)) != NULL; p++) {
        if ((p == s || p[-1] == ' ' || p[-1] == '\n') && p[k] == '=') {
            size_t n = strcspn(p + k + 1, " \n");
            snprintf(out, len, "%.*s", (int)n, p + k + 1);
            return;
        }
    }
    ck_abort_msg("no %s= in: %s", key, s);
}

static size_t free_mem(void)
{
    size_t f = 0, t = 0;
    ck_assert_int_eq(cudaMemGetInfo(&f, &t), cudaSuccess);
    return f;
}

static void *driver(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(h != NULL, "%s", dlerror());
    return h;
}

static void *sym(const char *name)
{
    void *p = dlsym(driver(), name);
    ck_assert_msg(p != NULL, "no %s in libcuda.so.1", name);
    return p;
}

#define DRV(fn) ((__typeof__(&fn))sym(#fn))

static void *entry(const char *name)
{
    void *p = NULL;
    enum cudaDriverEntryPointQueryResult st;
    ck_assert_int_eq(cudaGetDriverEntryPoint(name, &p, cudaEnableDefault, &st), cudaSuccess);
    ck_assert_ptr_nonnull(p);
    return p;
}

/* ------------------------------------------------------------------------ */
/* Accounting                                                                 */
/* ------------------------------------------------------------------------ */

START_TEST(test_meminfo_exact)
{
    setenv("CUTRACE_FAKE_GPU_MEM", "8G", 1);
    size_t f, t;
    ck_assert_int_eq(cudaMemGetInfo(&f, &t), cudaSuccess);
    ck_assert_uint_eq(t, 8 * GiB);
    ck_assert_uint_eq(f, 8 * GiB - 512 * MiB); /* the context is charged */
    size_t base = f;

    void *a, *b, *m, *h, *p, *x;
    ck_assert_int_eq(cudaMalloc(&a, GiB), cudaSuccess);
    ck_assert_uint_eq((uintptr_t)a % (2 * MiB), 0);
    ck_assert_uint_eq(free_mem(), base - GiB);
    ck_assert_int_eq(cudaMalloc(&b, 100), cudaSuccess);
    ck_assert_uint_eq((uintptr_t)b % 512, 0);
    ck_assert_uint_eq(free_mem(), base - GiB - 100);

    /* Managed and pinned memory are real host memory, not charged. */
    ck_assert_int_eq(cudaMallocManaged(&m, MiB, cudaMemAttachGlobal), cudaSuccess);
    memset(m, 0xab, MiB);
    ck_assert_int_eq(cudaMallocHost(&h, MiB + 1), cudaSuccess);
    ck_assert_uint_eq((uintptr_t)h % (uintptr_t)sysconf(_SC_PAGESIZE), 0);
    memset(h, 0xcd, MiB + 1);
    ck_assert_uint_eq(free_mem(), base - GiB - 100);

    size_t pitch;
    ck_assert_int_eq(cudaMallocPitch(&p, &pitch, 1000, 10), cudaSuccess);
    ck_assert_uint_eq(pitch, 1024);
    ck_assert_uint_eq(free_mem(), base - GiB - 100 - 10240);
    struct cudaPitchedPtr pp;
    ck_assert_int_eq(cudaMalloc3D(&pp, (struct cudaExtent){100, 4, 3}), cudaSuccess);
    ck_assert_uint_eq(pp.pitch, 512);
    ck_assert_uint_eq(pp.xsize, 100);
    ck_assert_uint_eq(pp.ysize, 4);
    ck_assert_uint_eq(free_mem(), base - GiB - 100 - 10240 - 512 * 12);
    ck_assert_int_eq(cudaMallocAsync(&x, 4 * MiB, 0), cudaSuccess);
    ck_assert_uint_eq(free_mem(), base - GiB - 100 - 10240 - 512 * 12 - 4 * MiB);
    ck_assert_int_eq(cudaFreeAsync(x, 0), cudaSuccess);

    ck_assert_int_eq(cudaFree(pp.ptr), cudaSuccess);
    ck_assert_int_eq(cudaFree(p), cudaSuccess);
    ck_assert_int_eq(cudaFree(b), cudaSuccess);
    ck_assert_int_eq(cudaFree(a), cudaSuccess);
    ck_assert_int_eq(cudaFree(m), cudaSuccess);
    ck_assert_int_eq(cudaFreeHost(h), cudaSuccess);
    ck_assert_uint_eq(free_mem(), base);

    /* Runtime edge cases, with the real runtime's answers. */
    void *z = (void *)1;
    ck_assert_int_eq(cudaMalloc(&z, 0), cudaSuccess);
    ck_assert_ptr_null(z);
    ck_assert_int_eq(cudaFree(NULL), cudaSuccess);
    ck_assert_int_eq(cudaFree((void *)0x1234), cudaErrorInvalidValue);
    ck_assert_int_eq(cudaMallocHost(&h, 4096), cudaSuccess);
    ck_assert_int_eq(cudaFree(h), cudaErrorInvalidValue); /* host memory is not cudaFree's */
    ck_assert_int_eq(cudaMalloc(&a, 4096), cudaSuccess);
    ck_assert_int_eq(cudaFreeHost(a), cudaErrorInvalidValue);
    ck_assert_int_eq(cudaFree(a), cudaSuccess);
    ck_assert_int_eq(cudaFreeHost(h), cudaSuccess);
    ck_assert_int_eq(cudaGetLastError(), cudaErrorInvalidValue);
    ck_assert_int_eq(cudaGetLastError(), cudaSuccess);

    /* Reset gives everything back, context included; the next call recreates it. */
    ck_assert_int_eq(cudaMalloc(&a, GiB), cudaSuccess);
    ck_assert_int_eq(cudaDeviceReset(), cudaSuccess);
    char out[512];
    probe_run(NULL, (const char *[]){"meminfo", NULL}, out, sizeof out);
    ck_assert_int_eq(field(out, "mem_rc"), 0);
    ck_assert_int_eq(field(out, "mem_free"), (long long)(8 * GiB - 512 * MiB));
    ck_assert_uint_eq(free_mem(), base);
    ck_assert_int_eq(cudaFree(a), cudaErrorInvalidValue); /* gone with the reset */
}
END_TEST

START_TEST(test_oom)
{
    setenv("CUTRACE_FAKE_GPU_MEM", "4G", 1);
    size_t before = free_mem();
    ck_assert_uint_eq(before, 4 * GiB - 512 * MiB);
    void *p = (void *)0x1, *q;
    ck_assert_int_eq(cudaMalloc(&p, before + 1), cudaErrorMemoryAllocation);
    ck_assert_ptr_eq(p, (void *)0x1);
    ck_assert_uint_eq(free_mem(), before);
    ck_assert_int_eq(cudaGetLastError(), cudaErrorMemoryAllocation);
    ck_assert_int_eq(cudaGetLastError(), cudaSuccess);
    ck_assert_int_eq(cudaMallocAsync(&q, before + 1, 0), cudaErrorMemoryAllocation);
    ck_assert_int_eq(cudaPeekAtLastError(), cudaErrorMemoryAllocation);
    ck_assert_int_eq(cudaPeekAtLastError(), cudaErrorMemoryAllocation);

    /* Exactly full is fine; one byte more is not. */
    ck_assert_int_eq(cudaMalloc(&p, before), cudaSuccess);
    ck_assert_uint_eq(free_mem(), 0);
    ck_assert_int_eq(cudaMalloc(&q, 1), cudaErrorMemoryAllocation);
    __typeof__(&cuMemAlloc_v2) mem_alloc = entry("cuMemAlloc");
    CUdeviceptr d;
    ck_assert_int_eq(mem_alloc(&d, 1), CUDA_ERROR_OUT_OF_MEMORY);
    ck_assert_int_eq(mem_alloc(&d, 0), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cudaFree(p), cudaSuccess);
    ck_assert_uint_eq(free_mem(), before);
}
END_TEST

START_TEST(test_pointer_reuse)
{
    void *a, *b, *s1, *s2, *s3;
    ck_assert_int_eq(cudaMalloc(&a, 64 * MiB), cudaSuccess);
    ck_assert_int_eq(cudaFree(a), cudaSuccess);
    ck_assert_int_eq(cudaMalloc(&b, 64 * MiB), cudaSuccess);
    ck_assert_ptr_eq(a, b);
    ck_assert_int_eq(cudaMalloc(&s1, 100), cudaSuccess);
    ck_assert_int_eq(cudaMalloc(&s2, 100), cudaSuccess);
    ck_assert_ptr_ne(s1, s2);
    ck_assert_int_eq(cudaFree(s1), cudaSuccess);
    ck_assert_int_eq(cudaMalloc(&s3, 100), cudaSuccess);
    ck_assert_ptr_eq(s1, s3);
    ck_assert_int_eq(cudaFree(s2), cudaSuccess);
    ck_assert_int_eq(cudaFree(s3), cudaSuccess);
    ck_assert_int_eq(cudaFree(b), cudaSuccess);
    ck_assert_int_eq(cudaFree(b), cudaErrorInvalidValue); /* double free */
}
END_TEST

/* ------------------------------------------------------------------------ */
/* More than one process                                                      */
/* ------------------------------------------------------------------------ */

START_TEST(test_cross_process)
{
    ck_assert_int_eq(cudaSetDevice(0), cudaSuccess);
    size_t f0 = free_mem();
    char line[512], rest[512];
    struct probe p =
        probe_start(NULL, (const char *[]){"alloc", "0", "1073741824", "wait", NULL}, -1);
    probe_line(&p, line, sizeof line);
    ck_assert_int_eq(field(line, "rc"), 0);
    /* Its context and its gigabyte, seen from both sides. */
    ck_assert_uint_eq(free_mem(), f0 - 512 * MiB - GiB);
    ck_assert_int_eq(field(line, "free"), (long long)(f0 - 512 * MiB - GiB));
    int status = probe_finish(&p, rest, sizeof rest);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ck_assert_int_eq(field(rest, "free_rc"), 0);
    ck_assert_uint_eq(free_mem(), f0); /* it exited: its context went too */

    /* Leaving at exit without freeing also gives everything back. */
    probe_run(NULL, (const char *[]){"alloc", "0", "1048576", "exit", NULL}, line, sizeof line);
    ck_assert_uint_eq(free_mem(), f0);
}
END_TEST

START_TEST(test_dead_process_reclaimed)
{
    size_t f0 = free_mem();
    char line[512];
    struct probe p =
        probe_start(NULL, (const char *[]){"alloc", "0", "2147483648", "hang", NULL}, -1);
    probe_line(&p, line, sizeof line);
    ck_assert_int_eq(field(line, "rc"), 0);
    ck_assert_uint_eq(free_mem(), f0 - 2 * GiB - 512 * MiB);
    ck_assert_int_eq(kill(p.pid, SIGKILL), 0);
    probe_finish(&p, NULL, 0);
    ck_assert_uint_eq(free_mem(), f0);

    /* A killed but not yet reaped process (a zombie) holds nothing either. */
    p = probe_start(NULL, (const char *[]){"alloc", "0", "1073741824", "hang", NULL}, -1);
    probe_line(&p, line, sizeof line);
    ck_assert_uint_eq(free_mem(), f0 - GiB - 512 * MiB);
    ck_assert_int_eq(kill(p.pid, SIGKILL), 0);
    siginfo_t si;
    ck_assert_int_eq(waitid(P_PID, (id_t)p.pid, &si, WEXITED | WNOWAIT), 0);
    ck_assert_uint_eq(free_mem(), f0);
    probe_finish(&p, NULL, 0);
}
END_TEST

/* Eight processes race for four gigabytes in 1 GiB pieces: exactly four win. */
START_TEST(test_no_overcommit)
{
    setenv("CUTRACE_FAKE_GPU_MEM", "4G", 1);
    setenv("CUTRACE_FAKE_CTX_MEM", "0", 1);
    struct probe p[8];
    for (int i = 0; i < 8; i++)
        p[i] = probe_start(NULL, (const char *[]){"alloc", "0", "1073741824", "wait", NULL}, -1);
    int won = 0, lost = 0;
    char line[512];
    for (int i = 0; i < 8; i++) {
        probe_line(&p[i], line, sizeof line);
        long long rc = field(line, "rc");
        won += rc == cudaSuccess;
        lost += rc == cudaErrorMemoryAllocation;
    }
    ck_assert_int_eq(won, 4);
    ck_assert_int_eq(lost, 4);
    ck_assert_uint_eq(free_mem(), 0);
    for (int i = 0; i < 8; i++)
        probe_finish(&p[i], NULL, 0);
    ck_assert_uint_eq(free_mem(), 4 * GiB);
}
END_TEST

/* The permissions of the mapping that holds addr, from /proc/self/maps. */
static void mapping_perms(const void *addr, char perms[5])
{
    FILE *f = fopen("/proc/self/maps", "r");
    ck_assert_ptr_nonnull(f);
    char line[512];
    strcpy(perms, "none");
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char pr[5];
        if (sscanf(line, "%lx-%lx %4s", &lo, &hi, pr) == 3 && (uintptr_t)addr >= lo &&
            (uintptr_t)addr < hi) {
            memcpy(perms, pr, 5);
            break;
        }
    }
    fclose(f);
}

START_TEST(test_device_memory_not_host_accessible)
{
    void *d, *h, *m;
    char perms[5];
    ck_assert_int_eq(cudaMalloc(&d, 4 * MiB), cudaSuccess);
    ck_assert_int_eq(cudaMallocHost(&h, 4096), cudaSuccess);
    ck_assert_int_eq(cudaMallocManaged(&m, 4096, cudaMemAttachGlobal), cudaSuccess);
    mapping_perms(d, perms);
    ck_assert_str_eq(perms, "---p");
    mapping_perms(h, perms);
    ck_assert_str_eq(perms, "rw-p");
    mapping_perms(m, perms);
    ck_assert_str_eq(perms, "rw-p");
}
END_TEST

START_TEST(test_fork_child_is_new_process)
{
    setenv("CUTRACE_FAKE_GPU_MEM", "8G", 1);
    void *p;
    ck_assert_int_eq(cudaMalloc(&p, GiB), cudaSuccess);
    size_t f0 = free_mem();
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int bad = 0;
        bad |= cudaFree(p) != cudaErrorInvalidValue; /* not the child's */
        size_t f = 0, t = 0;
        bad |= cudaMemGetInfo(&f, &t) != cudaSuccess;
        bad |= f != f0 - 512 * MiB; /* the parent's use plus the child's own context */
        void *q;
        bad |= cudaMalloc(&q, GiB) != cudaSuccess;
        _exit(bad); /* no cleanup: the parent must reap the slot */
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status));
    ck_assert_int_eq(WEXITSTATUS(status), 0);
    ck_assert_uint_eq(free_mem(), f0);
    ck_assert_int_eq(cudaFree(p), cudaSuccess);
    ck_assert_uint_eq(free_mem(), f0 + GiB);
}
END_TEST

/*
 * exec() keeps the pid and start time but ends the old image, and with it its
 * memory: the new image, finding the old slot, must give it back.
 */
START_TEST(test_exec_replaces_image)
{
    int out[2];
    ck_assert_int_eq(pipe(out), 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        void *p;
        if (cudaMalloc(&p, GiB) != cudaSuccess)
            _exit(3);
        dup2(out[1], 1);
        char path[PATH_MAX + 16];
        snprintf(path, sizeof path, "%s/fake_probe", g_dir);
        execl(path, path, "meminfo", (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    char buf[512];
    FILE *f = fdopen(out[0], "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ck_assert_int_eq(field(buf, "mem_rc"), 0);
    ck_assert_int_eq(field(buf, "mem_free"), (long long)(16 * GiB - 512 * MiB));
}
END_TEST

/* ------------------------------------------------------------------------ */
/* IPC                                                                        */
/* ------------------------------------------------------------------------ */

static void hex(const cudaIpcMemHandle_t *h, char *out)
{
    for (size_t i = 0; i < sizeof h->reserved; i++)
        sprintf(out + 2 * i, "%02x", (unsigned char)h->reserved[i]);
}

START_TEST(test_ipc)
{
    void *p;
    cudaIpcMemHandle_t h1, h2, bad;
    ck_assert_int_eq(cudaMalloc(&p, 32 * MiB), cudaSuccess);
    ck_assert_int_eq(cudaIpcGetMemHandle(&h1, p), cudaSuccess);
    ck_assert_int_eq(cudaIpcGetMemHandle(&h2, p), cudaSuccess);
    ck_assert_mem_eq(h1.reserved, h2.reserved, sizeof h1.reserved);
    ck_assert_int_eq(cudaIpcGetMemHandle(&h2, (char *)p + 512), cudaErrorInvalidValue);

    void *q;
    ck_assert_int_eq(cudaIpcOpenMemHandle(&q, h1, cudaIpcMemLazyEnablePeerAccess),
                     cudaErrorDeviceUninitialized); /* own handle: CUDA_ERROR_INVALID_CONTEXT */
    memset(&bad, 0x5a, sizeof bad);
    ck_assert_int_eq(cudaIpcOpenMemHandle(&q, bad, cudaIpcMemLazyEnablePeerAccess),
                     cudaErrorInvalidResourceHandle);
    ck_assert_int_eq(cudaIpcCloseMemHandle(p), cudaErrorInvalidValue);

    /* Another process opens it: same size, not charged to it. */
    char hx[160], out[2048];
    hex(&h1, hx);
    probe_run(NULL, (const char *[]){"ipc-open", hx, NULL}, out, sizeof out);
    ck_assert_int_eq(field(out, "open_rc"), 0);
    ck_assert_int_eq(field(out, "before_free"), field(out, "after_free"));
    ck_assert_int_eq(field(out, "range_rc"), 0);
    ck_assert_int_eq(field(out, "base"), field(out, "ptr"));
    ck_assert_int_eq(field(out, "size"), (long long)(32 * MiB));
    ck_assert_int_eq(field(out, "reopen_rc"), 0);
    ck_assert_int_eq(field(out, "same"), 1);
    ck_assert_int_eq(field(out, "close1_rc"), 0);
    ck_assert_int_eq(field(out, "close2_rc"), 0);
    ck_assert_int_eq(field(out, "close3_rc"), cudaErrorInvalidValue);

    /* Freed memory is no longer exported. */
    ck_assert_int_eq(cudaFree(p), cudaSuccess);
    probe_run(NULL, (const char *[]){"ipc-open", hx, NULL}, out, sizeof out);
    ck_assert_int_eq(field(out, "open_rc"), cudaErrorInvalidResourceHandle);

    /* The other direction: a probe exports, we open, then the exporter dies. */
    char line[512], handle[160];
    struct probe e = probe_start(NULL, (const char *[]){"ipc-export", "16777216", NULL}, -1);
    probe_line(&e, line, sizeof line);
    ck_assert_int_eq(field(line, "rc"), 0);
    field_str(line, "handle", handle, sizeof handle);
    cudaIpcMemHandle_t ph;
    for (size_t i = 0; i < sizeof ph.reserved; i++) {
        unsigned v;
        sscanf(handle + 2 * i, "%2x", &v);
        ph.reserved[i] = (char)v;
    }
    size_t f0 = free_mem();
    ck_assert_int_eq(cudaIpcOpenMemHandle(&q, ph, cudaIpcMemLazyEnablePeerAccess), cudaSuccess);
    ck_assert_uint_eq(free_mem(), f0);
    __typeof__(&cuMemGetAddressRange_v2) range = entry("cuMemGetAddressRange");
    CUdeviceptr base;
    size_t size;
    ck_assert_int_eq(range(&base, &size, (uintptr_t)q + 100), CUDA_SUCCESS);
    ck_assert_uint_eq(base, (uintptr_t)q);
    ck_assert_uint_eq(size, 16 * MiB);
    ck_assert_int_eq(cudaIpcCloseMemHandle(q), cudaSuccess);
    ck_assert_int_eq(kill(e.pid, SIGKILL), 0);
    probe_finish(&e, NULL, 0);
    ck_assert_int_eq(cudaIpcOpenMemHandle(&q, ph, cudaIpcMemLazyEnablePeerAccess),
                     cudaErrorInvalidResourceHandle);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Devices                                                                    */
/* ------------------------------------------------------------------------ */

START_TEST(test_visible_devices)
{
    setenv("CUTRACE_FAKE_GPUS", "4", 1);
    char all[2048], out[2048], u[64], v[64], b[32];
    probe_run(NULL, (const char *[]){"devices", NULL}, all, sizeof all);
    ck_assert_int_eq(field(all, "count"), 4);
    field_str(all, "dev0_bus", b, sizeof b);
    ck_assert_str_eq(b, "0000:18:00.0");
    field_str(all, "dev3_bus", b, sizeof b);
    ck_assert_str_eq(b, "0000:48:00.0");
    field_str(all, "dev0_name", b, sizeof b);
    ck_assert_str_eq(b, "NVIDIA");

    probe_run((const char *[]){"CUDA_VISIBLE_DEVICES=2,0", NULL}, (const char *[]){"devices", NULL},
              out, sizeof out);
    ck_assert_int_eq(field(out, "count"), 2);
    field_str(out, "dev0_bus", b, sizeof b);
    ck_assert_str_eq(b, "0000:38:00.0");
    field_str(out, "dev0_uuid", u, sizeof u);
    field_str(all, "dev2_uuid", v, sizeof v);
    ck_assert_str_eq(u, v);
    field_str(out, "dev1_uuid", u, sizeof u);
    field_str(all, "dev0_uuid", v, sizeof v);
    ck_assert_str_eq(u, v);

    /* An invalid or repeated entry ends the list; nothing left is no device. */
    probe_run((const char *[]){"CUDA_VISIBLE_DEVICES=1,x,3", NULL},
              (const char *[]){"devices", NULL}, out, sizeof out);
    ck_assert_int_eq(field(out, "count"), 1);
    probe_run((const char *[]){"CUDA_VISIBLE_DEVICES=3,3", NULL}, (const char *[]){"devices", NULL},
              out, sizeof out);
    ck_assert_int_eq(field(out, "count"), 1);
    probe_run((const char *[]){"CUDA_VISIBLE_DEVICES=", NULL}, (const char *[]){"devices", NULL},
              out, sizeof out);
    ck_assert_int_eq(field(out, "count_rc"), cudaErrorNoDevice);
    probe_run((const char *[]){"CUDA_VISIBLE_DEVICES=7", NULL}, (const char *[]){"devices", NULL},
              out, sizeof out);
    ck_assert_int_eq(field(out, "count_rc"), cudaErrorNoDevice);

    /* UUIDs select devices too, by unique prefix. */
    char env[128];
    field_str(all, "dev3_uuid", v, sizeof v);
    snprintf(env, sizeof env, "CUDA_VISIBLE_DEVICES=GPU-%.6s", v);
    probe_run((const char *[]){env, NULL}, (const char *[]){"devices", NULL}, out, sizeof out);
    ck_assert_int_eq(field(out, "count"), 1);
    field_str(out, "dev0_uuid", u, sizeof u);
    ck_assert_str_eq(u, v);

    /* Another seed is another machine. */
    probe_run((const char *[]){"CUTRACE_FAKE_UUID_SEED=other-host", NULL},
              (const char *[]){"devices", NULL}, out, sizeof out);
    field_str(out, "dev3_uuid", u, sizeof u);
    ck_assert_str_ne(u, v);

    /* Accounting is per physical device, whatever the ordinals. */
    ck_assert_int_eq(cudaSetDevice(2), cudaSuccess);
    size_t f2 = free_mem();
    char line[512];
    struct probe p = probe_start((const char *[]){"CUDA_VISIBLE_DEVICES=3,2", NULL},
                                 (const char *[]){"alloc", "1", "1073741824", "wait", NULL}, -1);
    probe_line(&p, line, sizeof line);
    ck_assert_int_eq(field(line, "rc"), 0);
    ck_assert_uint_eq(free_mem(), f2 - GiB - 512 * MiB);
    ck_assert_int_eq(cudaSetDevice(0), cudaSuccess);
    ck_assert_uint_eq(free_mem(), 16 * GiB - 512 * MiB);
    probe_finish(&p, NULL, 0);
    ck_assert_int_eq(cudaSetDevice(2), cudaSuccess);
    ck_assert_uint_eq(free_mem(), f2);
}
END_TEST

START_TEST(test_zero_devices)
{
    setenv("CUTRACE_FAKE_GPUS", "0", 1);
    int n = -1;
    void *p;
    ck_assert_int_eq(cudaGetDeviceCount(&n), cudaErrorNoDevice);
    ck_assert_int_eq(n, 0);
    ck_assert_int_eq(cudaMalloc(&p, 1), cudaErrorNoDevice);
    ck_assert_int_eq(DRV(cuInit)(0), CUDA_ERROR_NO_DEVICE);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Driver API                                                                 */
/* ------------------------------------------------------------------------ */

static long long probe_free(void)
{
    char out[512];
    probe_run(NULL, (const char *[]){"meminfo", NULL}, out, sizeof out);
    ck_assert_int_eq(field(out, "mem_rc"), 0);
    return field(out, "mem_free");
}

START_TEST(test_driver_contexts)
{
    const long long total = 16 * GiB, ctx = 512 * MiB;
    CUdeviceptr d;
    CUcontext c, c2, cur;
    CUdevice dev;
    ck_assert_int_eq(DRV(cuMemAlloc_v2)(&d, 1), CUDA_ERROR_NOT_INITIALIZED);
    ck_assert_int_eq(DRV(cuInit)(1), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(DRV(cuInit)(0), CUDA_SUCCESS);
    ck_assert_int_eq(DRV(cuMemAlloc_v2)(&d, 1), CUDA_ERROR_INVALID_CONTEXT);
    ck_assert_int_eq(DRV(cuCtxGetDevice)(&dev), CUDA_ERROR_INVALID_CONTEXT);
    ck_assert_int_eq(DRV(cuCtxGetCurrent)(&cur), CUDA_SUCCESS);
    ck_assert_ptr_null(cur);
    ck_assert_int_eq(probe_free(), total - ctx);

    /* Primary context: charged on the first retain, released on the last. */
    ck_assert_int_eq(DRV(cuDevicePrimaryCtxRetain)(&c, 0), CUDA_SUCCESS);
    ck_assert_int_eq(DRV(cuDevicePrimaryCtxRetain)(&c2, 0), CUDA_SUCCESS);
    ck_assert_ptr_eq(c, c2);
    ck_assert_int_eq(probe_free(), total - 2 * ctx);
    ck_assert_int_eq(DRV(cuCtxSetCurrent)(c), CUDA_SUCCESS);
    ck_assert_int_eq(DRV(cuCtxGetDevice)(&dev), CUDA_SUCCESS);
    ck_assert_int_eq(dev, 0);
    ck_assert_int_eq(DRV(cuMemAlloc_v2)(&d, 10 * MiB), CUDA_SUCCESS);
    size_t f, t;
    ck_assert_int_eq(DRV(cuMemGetInfo_v2)(&f, &t), CUDA_SUCCESS);
    ck_assert_uint_eq(f, total - ctx - 10 * MiB);
    ck_assert_int_eq(DRV(cuDevicePrimaryCtxRelease_v2)(0), CUDA_SUCCESS);
    ck_assert_int_eq(DRV(cuMemGetInfo_v2)(&f, &t), CUDA_SUCCESS);
    ck_assert_uint_eq(f, total - ctx - 10 * MiB);

    /* A created context is charged separately and pushed. */
    ck_assert_int_eq(DRV(cuCtxCreate_v4)(&c2, NULL, 0, 0), CUDA_SUCCESS);
    ck_assert_int_eq(DRV(cuCtxGetCurrent)(&cur), CUDA_SUCCESS);
    ck_assert_ptr_eq(cur, c2);
    ck_assert_int_eq(DRV(cuMemGetInfo_v2)(&f, &t), CUDA_SUCCESS);
    ck_assert_uint_eq(f, total - 2 * ctx - 10 * MiB);
    ck_assert_int_eq(DRV(cuCtxPopCurrent_v2)(&cur), CUDA_SUCCESS);
    ck_assert_ptr_eq(cur, c2);
    ck_assert_int_eq(DRV(cuCtxGetCurrent)(&cur), CUDA_SUCCESS);
    ck_assert_ptr_eq(cur, c);
    ck_assert_int_eq(DRV(cuCtxPushCurrent_v2)(c2), CUDA_SUCCESS);
    ck_assert_int_eq(DRV(cuMemAlloc_v2)(&d, 1), CUDA_SUCCESS); /* owned by c2 */
    ck_assert_int_eq(DRV(cuCtxDestroy_v2)(c2), CUDA_SUCCESS);
    ck_assert_int_eq(DRV(cuCtxGetCurrent)(&cur), CUDA_SUCCESS);
    ck_assert_ptr_eq(cur, c);
    ck_assert_int_eq(DRV(cuCtxDestroy_v2)(c2), CUDA_ERROR_INVALID_CONTEXT);
    ck_assert_int_eq(DRV(cuCtxDestroy_v2)(c), CUDA_ERROR_INVALID_CONTEXT); /* primary */
    ck_assert_int_eq(DRV(cuMemGetInfo_v2)(&f, &t), CUDA_SUCCESS);
    ck_assert_uint_eq(f, total - ctx - 10 * MiB);

    /* Reset frees everything now; a still-retained primary comes back on use. */
    ck_assert_int_eq(DRV(cuDevicePrimaryCtxReset_v2)(0), CUDA_SUCCESS);
    ck_assert_int_eq(probe_free(), total - ctx);
    ck_assert_int_eq(DRV(cuMemGetInfo_v2)(&f, &t), CUDA_SUCCESS);
    ck_assert_uint_eq(f, total - ctx);
    ck_assert_int_eq(DRV(cuDevicePrimaryCtxRelease_v2)(0), CUDA_SUCCESS);
    ck_assert_int_eq(DRV(cuDevicePrimaryCtxRelease_v2)(0), CUDA_ERROR_INVALID_CONTEXT);
    ck_assert_int_eq(DRV(cuMemGetInfo_v2)(&f, &t), CUDA_ERROR_INVALID_CONTEXT);
    ck_assert_int_eq(probe_free(), total - ctx);

    /* Devices and errors. */
    int v;
    char name[64];
    ck_assert_int_eq(DRV(cuDeviceGetAttribute)(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0),
                     CUDA_SUCCESS);
    ck_assert_int_eq(v, 9);
    ck_assert_int_eq(DRV(cuDeviceGetAttribute)(&v, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 0),
                     CUDA_SUCCESS);
    ck_assert_int_eq(v, 1);
    ck_assert_int_eq(
        DRV(cuDeviceGetAttribute)(&v, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0),
        CUDA_SUCCESS);
    ck_assert_int_eq(v, 1);
    ck_assert_int_eq(DRV(cuDeviceGetAttribute)(&v, CU_DEVICE_ATTRIBUTE_MAX_PITCH, 0),
                     CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(DRV(cuDeviceGetAttribute)(&v, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 1),
                     CUDA_ERROR_INVALID_DEVICE);
    ck_assert_int_eq(DRV(cuDeviceGetName)(name, sizeof name, 0), CUDA_SUCCESS);
    ck_assert_str_eq(name, "NVIDIA H200 (cutrace fake)");
    ck_assert_int_eq(DRV(cuDriverGetVersion)(&v), CUDA_SUCCESS);
    ck_assert_int_eq(v, 13000);
    const char *s;
    ck_assert_int_eq(DRV(cuGetErrorName)(CUDA_ERROR_OUT_OF_MEMORY, &s), CUDA_SUCCESS);
    ck_assert_str_eq(s, "CUDA_ERROR_OUT_OF_MEMORY");
    ck_assert_int_eq(DRV(cuGetErrorString)((CUresult)123456, &s), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Structure of the libraries                                                 */
/* ------------------------------------------------------------------------ */

/* Reads the dynamic section: DT_NEEDED names, DT_SONAME, and versioning tags. */
struct dyninfo {
    char needed[16][128];
    int nneeded;
    char soname[128];
    int has_verdef, has_versym;
};

static void read_dynamic(const char *path, struct dyninfo *out)
{
    memset(out, 0, sizeof *out);
    int fd = open(path, O_RDONLY);
    ck_assert_int_ge(fd, 0);
    struct stat st;
    ck_assert_int_eq(fstat(fd, &st), 0);
    const unsigned char *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    ck_assert(m != MAP_FAILED);
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)m;
    ck_assert(memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 && eh->e_ident[EI_CLASS] == ELFCLASS64);
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(m + eh->e_shoff);
    for (int i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_type == SHT_GNU_verdef)
            out->has_verdef = 1;
        if (sh[i].sh_type == SHT_GNU_versym)
            out->has_versym = 1;
        if (sh[i].sh_type != SHT_DYNAMIC)
            continue;
        const Elf64_Dyn *dyn = (const Elf64_Dyn *)(m + sh[i].sh_offset);
        const char *strtab = (const char *)(m + sh[sh[i].sh_link].sh_offset);
        for (size_t j = 0; j < sh[i].sh_size / sizeof *dyn && dyn[j].d_tag != DT_NULL; j++) {
            if (dyn[j].d_tag == DT_NEEDED && out->nneeded < 16)
                snprintf(out->needed[out->nneeded++], 128, "%s", strtab + dyn[j].d_un.d_val);
            if (dyn[j].d_tag == DT_SONAME)
                snprintf(out->soname, sizeof out->soname, "%s", strtab + dyn[j].d_un.d_val);
        }
    }
    munmap((void *)m, (size_t)st.st_size);
    close(fd);
}

START_TEST(test_library_structure)
{
    char path[PATH_MAX + 32];
    struct dyninfo di;
    snprintf(path, sizeof path, "%s/libcudart.so.12", g_dir);
    read_dynamic(path, &di);
    ck_assert_str_eq(di.soname, "libcudart.so.12");
    ck_assert(di.has_verdef);
    for (int i = 0; i < di.nneeded; i++)
        ck_assert_msg(strncmp(di.needed[i], "libcuda.so", 10) != 0, "runtime links %s",
                      di.needed[i]);
    snprintf(path, sizeof path, "%s/libcuda.so.1", g_dir);
    read_dynamic(path, &di);
    ck_assert_str_eq(di.soname, "libcuda.so.1");
    ck_assert_msg(!di.has_verdef, "the driver must not define symbol versions");

    /* objdump -T: every exported cuda* function carries libcudart.so.12. */
    char cmd[PATH_MAX + 64], line[512];
    snprintf(cmd, sizeof cmd, "objdump -T %s/libcudart.so.12 2>/dev/null", g_dir);
    FILE *f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    int exported = 0, malloc_seen = 0;
    while (fgets(line, sizeof line, f)) {
        if (!strstr(line, ".text") || !strstr(line, " cuda"))
            continue;
        exported++;
        ck_assert_msg(strstr(line, "libcudart.so.12") != NULL, "unversioned: %s", line);
        if (strstr(line, " cudaMalloc\n"))
            malloc_seen = 1;
    }
    int st = pclose(f);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 127) {
        fprintf(stderr, "test_library_structure: objdump not found, skipping that check\n");
    } else {
        ck_assert_int_gt(exported, 50);
        ck_assert(malloc_seen);
    }
}
END_TEST

/*
 * LD_DEBUG=symbols logs every symbol the dynamic linker looks up, dlsym()
 * included: the only driver symbol the runtime may look up is
 * cuGetProcAddress_v2; everything else comes through that function.
 */
START_TEST(test_runtime_uses_get_proc_address_only)
{
    char dbg[PATH_MAX + 64], env1[PATH_MAX + 80], out[256];
    snprintf(dbg, sizeof dbg, "%s/ld", g_tmp);
    snprintf(env1, sizeof env1, "LD_DEBUG_OUTPUT=%s", dbg);
    probe_run((const char *[]){"LD_DEBUG=symbols", env1, NULL}, (const char *[]){"exercise", NULL},
              out, sizeof out);
    ck_assert_int_eq(field(out, "exercise_ok"), 1);
    DIR *d = opendir(g_tmp);
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    int files = 0, gpa = 0, others = 0;
    char other[256] = "";
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "ld.", 3) != 0)
            continue;
        files++;
        char p[PATH_MAX + 300], line[1024];
        snprintf(p, sizeof p, "%s/%s", g_tmp, e->d_name);
        FILE *f = fopen(p, "r");
        ck_assert_ptr_nonnull(f);
        while (fgets(line, sizeof line, f)) {
            const char *s = strstr(line, "symbol=");
            if (!s)
                continue;
            s += 7;
            /* Driver API names: "cu" and an upper-case letter (cudaX is the runtime). */
            if (!(s[0] == 'c' && s[1] == 'u' && s[2] >= 'A' && s[2] <= 'Z'))
                continue;
            size_t n = strcspn(s, ";");
            if (n == strlen("cuGetProcAddress_v2") && strncmp(s, "cuGetProcAddress_v2", n) == 0) {
                gpa++;
            } else {
                others++;
                snprintf(other, sizeof other, "%.*s", (int)n, s);
            }
        }
        fclose(f);
    }
    closedir(d);
    ck_assert_int_gt(files, 0);
    ck_assert_int_gt(gpa, 0);
    ck_assert_msg(others == 0, "the runtime looked up %s by name", other);
}
END_TEST

START_TEST(test_missing_driver)
{
    char lib[PATH_MAX + 64], target[PATH_MAX + 64], env[PATH_MAX + 32], out[1024];
    snprintf(lib, sizeof lib, "%s/libcudart.so.12", g_tmp);
    snprintf(target, sizeof target, "%s/libcudart.so.12", g_dir);
    ck_assert_int_eq(symlink(target, lib), 0);
    snprintf(env, sizeof env, "LD_LIBRARY_PATH=%s", g_tmp);
    probe_run((const char *[]){env, NULL}, (const char *[]){"nodriver", NULL}, out, sizeof out);
    if (strstr(out, "driver_found=1")) {
        fprintf(stderr, "test_missing_driver: a system libcuda.so.1 exists, skipping\n");
        return;
    }
    ck_assert_int_eq(field(out, "count_rc"), cudaErrorInsufficientDriver);
    ck_assert_int_eq(field(out, "count"), 0);
    ck_assert_int_eq(field(out, "malloc_rc"), cudaErrorInsufficientDriver);
    ck_assert_int_eq(field(out, "meminfo_rc"), cudaErrorInsufficientDriver);
    ck_assert_int_eq(field(out, "setdevice_rc"), cudaErrorInsufficientDriver);
    ck_assert_int_eq(field(out, "last_rc"), cudaErrorInsufficientDriver);
    ck_assert_int_eq(field(out, "drv_rc"), cudaSuccess);
    ck_assert_int_eq(field(out, "drv"), 0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* cuGetProcAddress                                                           */
/* ------------------------------------------------------------------------ */

static void expect_proc(const char *name, int version, cuuint64_t flags, const char *want)
{
    __typeof__(&cuGetProcAddress_v2) gpa = DRV(cuGetProcAddress_v2);
    void *p = (void *)1;
    CUdriverProcAddressQueryResult st = 99;
    CUresult r = gpa(name, &p, version, flags, &st);
    ck_assert_msg(r == CUDA_SUCCESS && st == CU_GET_PROC_ADDRESS_SUCCESS, "%s@%d: %d/%d", name,
                  version, (int)r, (int)st);
    ck_assert_msg(p == sym(want), "%s@%d flags %d is not %s", name, version, (int)flags, want);
}

static void expect_no_proc(const char *name, int version, CUdriverProcAddressQueryResult want)
{
    __typeof__(&cuGetProcAddress_v2) gpa = DRV(cuGetProcAddress_v2);
    void *p = (void *)1;
    CUdriverProcAddressQueryResult st = 99;
    ck_assert_int_eq(gpa(name, &p, version, 0, &st), CUDA_ERROR_NOT_FOUND);
    ck_assert_int_eq(st, want);
    ck_assert_ptr_null(p);
}

START_TEST(test_get_proc_address)
{
    const cuuint64_t L = CU_GET_PROC_ADDRESS_LEGACY_STREAM,
                     T = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    expect_proc("cuMemAlloc", 12080, 0, "cuMemAlloc_v2");
    expect_proc("cuMemAlloc", 12080, T, "cuMemAlloc_v2"); /* no per-thread variant */
    expect_proc("cuMemGetInfo", 3020, 0, "cuMemGetInfo_v2");
    expect_proc("cuGetProcAddress", 12000, 0, "cuGetProcAddress_v2");
    expect_proc("cuGetProcAddress", 11030, 0, "cuGetProcAddress");
    expect_proc("cuDeviceGetUuid", 11040, 0, "cuDeviceGetUuid_v2");
    expect_proc("cuDeviceGetUuid", 11030, 0, "cuDeviceGetUuid");
    expect_proc("cuIpcOpenMemHandle", 11000, 0, "cuIpcOpenMemHandle_v2");
    expect_proc("cuIpcOpenMemHandle", 10020, 0, "cuIpcOpenMemHandle");
    expect_proc("cuDevicePrimaryCtxRelease", 12080, 0, "cuDevicePrimaryCtxRelease_v2");
    expect_proc("cuCtxCreate", 12080, 0, "cuCtxCreate_v4");
    expect_proc("cuCtxCreate", 12000, 0, "cuCtxCreate_v3");
    expect_proc("cuGraphInstantiate", 12080, 0, "cuGraphInstantiateWithFlags");
    expect_proc("cuStreamBeginCapture", 12080, L, "cuStreamBeginCapture_v2");
    expect_proc("cuStreamBeginCapture", 12080, T, "cuStreamBeginCapture_v2_ptsz");
    expect_proc("cuStreamBeginCapture", 10000, T, "cuStreamBeginCapture_ptsz");
    expect_proc("cuStreamEndCapture", 12080, T, "cuStreamEndCapture_ptsz");
    expect_proc("cuStreamIsCapturing", 12080, T, "cuStreamIsCapturing_ptsz");
    expect_proc("cuMemAllocAsync", 12080, 0, "cuMemAllocAsync");
    expect_proc("cuMemAllocAsync", 12080, T, "cuMemAllocAsync_ptsz");
    expect_proc("cuMemFreeAsync", 12080, T, "cuMemFreeAsync_ptsz");
    expect_proc("cuMemAllocFromPoolAsync", 12080, T, "cuMemAllocFromPoolAsync_ptsz");
    expect_proc("cuGraphLaunch", 12080, T, "cuGraphLaunch_ptsz");
    expect_proc("cuStreamSynchronize", 6050, T, "cuStreamSynchronize");
    expect_proc("cuStreamSynchronize", 7000, T, "cuStreamSynchronize_ptsz");
    expect_no_proc("cuNoSuchThing", 12080, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    expect_no_proc("cuMemAlloc_v2", 12080, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    expect_no_proc("cuMemAllocAsync", 11000, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    expect_no_proc("cuGetProcAddress", 11000, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);

    /* The v1 entry point takes four arguments and answers the same way. */
    CUresult (*gpa1)(const char *, void **, int, cuuint64_t) = sym("cuGetProcAddress");
    void *p = NULL;
    ck_assert_int_eq(gpa1("cuStreamIsCapturing", &p, 12080, T), CUDA_SUCCESS);
    ck_assert_ptr_eq(p, sym("cuStreamIsCapturing_ptsz"));

    /* The runtime forwards, with its own version and the stream flags. */
    enum cudaDriverEntryPointQueryResult st;
    ck_assert_int_eq(
        cudaGetDriverEntryPoint("cuStreamBeginCapture", &p, cudaEnablePerThreadDefaultStream, &st),
        cudaSuccess);
    ck_assert_int_eq(st, cudaDriverEntryPointSuccess);
    ck_assert_ptr_eq(p, sym("cuStreamBeginCapture_v2_ptsz"));
    ck_assert_int_eq(cudaGetDriverEntryPoint("cuStreamBeginCapture", &p, cudaEnableDefault, &st),
                     cudaSuccess);
    ck_assert_ptr_eq(p, sym("cuStreamBeginCapture_v2"));
    ck_assert_int_eq(cudaGetDriverEntryPoint("cuNoSuchThing", &p, cudaEnableDefault, &st),
                     cudaSuccess);
    ck_assert_ptr_null(p);
    ck_assert_int_eq(st, cudaDriverEntryPointSymbolNotFound);
    ck_assert_int_eq(
        cudaGetDriverEntryPointByVersion("cuMemAlloc", &p, 12000, cudaEnableDefault, &st),
        cudaSuccess);
    ck_assert_ptr_eq(p, sym("cuMemAlloc_v2"));
    ck_assert_int_eq(
        cudaGetDriverEntryPointByVersion("cuMemAllocAsync", &p, 11000, cudaEnableDefault, &st),
        cudaSuccess);
    ck_assert_ptr_null(p);
    ck_assert_int_eq(st, cudaDriverEntryPointVersionNotSufficent);
    ck_assert_int_eq(
        cudaGetDriverEntryPointByVersion("cuMemAlloc", &p, 99000, cudaEnableDefault, &st),
        cudaErrorInvalidValue);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Virtual memory management                                                  */
/* ------------------------------------------------------------------------ */

START_TEST(test_vmm)
{
    ck_assert_int_eq(cudaSetDevice(0), cudaSuccess);
    __typeof__(&cuMemGetAllocationGranularity) gran = entry("cuMemGetAllocationGranularity");
    __typeof__(&cuMemCreate) create = entry("cuMemCreate");
    __typeof__(&cuMemRelease) release = entry("cuMemRelease");
    __typeof__(&cuMemAddressReserve) reserve = entry("cuMemAddressReserve");
    __typeof__(&cuMemAddressFree) addr_free = entry("cuMemAddressFree");
    __typeof__(&cuMemMap) map = entry("cuMemMap");
    __typeof__(&cuMemUnmap) unmap = entry("cuMemUnmap");
    __typeof__(&cuMemSetAccess) access = entry("cuMemSetAccess");
    __typeof__(&cuMemExportToShareableHandle) export = entry("cuMemExportToShareableHandle");
    __typeof__(&cuMemImportFromShareableHandle) import = entry("cuMemImportFromShareableHandle");
    __typeof__(&cuMemGetAddressRange_v2) range = entry("cuMemGetAddressRange");

    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    size_t g;
    ck_assert_int_eq(gran(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED), CUDA_SUCCESS);
    ck_assert_uint_eq(g, 2 * MiB);

    size_t f0 = free_mem();
    CUmemGenericAllocationHandle h, h2;
    ck_assert_int_eq(create(&h, 3 * MiB, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(create(&h, 6 * MiB, &prop, 0), CUDA_SUCCESS);
    ck_assert_uint_eq(free_mem(), f0 - 6 * MiB);

    CUdeviceptr va, base;
    size_t size;
    ck_assert_int_eq(reserve(&va, 8 * MiB, 0, 0, 0), CUDA_SUCCESS);
    ck_assert_uint_eq(va % (2 * MiB), 0);
    ck_assert_int_eq(range(&base, &size, va), CUDA_ERROR_NOT_FOUND); /* reserved, not mapped */
    ck_assert_int_eq(map(va, 6 * MiB, 0, h, 0), CUDA_SUCCESS);
    ck_assert_int_eq(map(va, 2 * MiB, 0, h, 0), CUDA_ERROR_ALREADY_MAPPED);
    CUmemAccessDesc ad = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    ck_assert_int_eq(access(va, 6 * MiB, &ad, 1), CUDA_SUCCESS);
    ck_assert_int_eq(access(va, 8 * MiB, &ad, 1), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(range(&base, &size, va + 4096), CUDA_SUCCESS);
    ck_assert_uint_eq(base, va);
    ck_assert_uint_eq(size, 6 * MiB);
    ck_assert_uint_eq(free_mem(), f0 - 6 * MiB); /* mapping costs nothing more */

    /* Released while mapped: the memory stays until the last unmap. */
    ck_assert_int_eq(release(h), CUDA_SUCCESS);
    ck_assert_uint_eq(free_mem(), f0 - 6 * MiB);
    ck_assert_int_eq(addr_free(va, 8 * MiB), CUDA_ERROR_INVALID_VALUE); /* still mapped */
    ck_assert_int_eq(unmap(va, 2 * MiB), CUDA_ERROR_INVALID_VALUE);     /* part of a mapping */
    ck_assert_int_eq(unmap(va, 6 * MiB), CUDA_SUCCESS);
    ck_assert_uint_eq(free_mem(), f0);

    /* Unmapped first: the memory stays until released. */
    ck_assert_int_eq(create(&h, 4 * MiB, &prop, 0), CUDA_SUCCESS);
    ck_assert_int_eq(map(va + 2 * MiB, 4 * MiB, 0, h, 0), CUDA_SUCCESS);
    ck_assert_int_eq(unmap(va + 2 * MiB, 4 * MiB), CUDA_SUCCESS);
    ck_assert_uint_eq(free_mem(), f0 - 4 * MiB);

    /* Shareable handle: a real fd; importing here returns the same allocation. */
    int fd = -1;
    ck_assert_int_eq(export(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0), CUDA_SUCCESS);
    ck_assert_int_ge(fcntl(fd, F_GETFD), 0);
    ck_assert_int_eq(import(&h2, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
                     CUDA_SUCCESS);
    ck_assert_uint_eq(h2, h);
    char fdarg[16], out[1024];
    snprintf(fdarg, sizeof fdarg, "%d", fd);
    struct probe p = probe_start(NULL, (const char *[]){"vmm-import", fdarg, NULL}, fd);
    probe_finish(&p, out, sizeof out);
    ck_assert_int_eq(field(out, "import_rc"), 0);
    ck_assert_int_eq(field(out, "before_free"), field(out, "after_free")); /* peer's memory */
    ck_assert_int_eq(field(out, "release_rc"), 0);
    close(fd);
    ck_assert_int_eq(release(h), CUDA_SUCCESS);
    ck_assert_uint_eq(free_mem(), f0 - 4 * MiB);
    ck_assert_int_eq(release(h2), CUDA_SUCCESS);
    ck_assert_uint_eq(free_mem(), f0);
    ck_assert_int_eq(release(h), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(addr_free(va, 8 * MiB), CUDA_SUCCESS);

    /* Host and host-NUMA physical memory is charged to no device. */
    prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
    prop.location.id = 0;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
    ck_assert_int_eq(create(&h, 4 * MiB, &prop, 0), CUDA_SUCCESS);
    ck_assert_uint_eq(free_mem(), f0);
    ck_assert_int_eq(export(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
                     CUDA_ERROR_INVALID_VALUE); /* not requested at creation */
    ck_assert_int_eq(release(h), CUDA_SUCCESS);
    prop.location.type = CU_MEM_LOCATION_TYPE_HOST;
    ck_assert_int_eq(create(&h, 2 * MiB, &prop, 0), CUDA_SUCCESS);
    ck_assert_uint_eq(free_mem(), f0);
    ck_assert_int_eq(release(h), CUDA_SUCCESS);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Streams, capture and graphs                                                */
/* ------------------------------------------------------------------------ */

START_TEST(test_capture_and_graphs)
{
    cudaStream_t s;
    cudaGraph_t g;
    cudaGraphExec_t x;
    enum cudaStreamCaptureStatus cs;
    void *p;
    ck_assert_int_eq(cudaStreamBeginCapture(0, cudaStreamCaptureModeGlobal),
                     cudaErrorStreamCaptureUnsupported);
    ck_assert_int_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    ck_assert_int_eq(cudaStreamIsCapturing(s, &cs), cudaSuccess);
    ck_assert_int_eq(cs, cudaStreamCaptureStatusNone);
    ck_assert_int_eq(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    ck_assert_int_eq(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaErrorIllegalState);
    ck_assert_int_eq(cudaStreamIsCapturing(s, &cs), cudaSuccess);
    ck_assert_int_eq(cs, cudaStreamCaptureStatusActive);
    ck_assert_int_eq(cudaMallocAsync(&p, MiB, s), cudaSuccess);
    ck_assert_int_eq(cudaFreeAsync(p, s), cudaSuccess);
    ck_assert_int_eq(cudaStreamEndCapture(s, &g), cudaSuccess);
    ck_assert_ptr_nonnull(g);
    ck_assert_int_eq(cudaStreamIsCapturing(s, &cs), cudaSuccess);
    ck_assert_int_eq(cs, cudaStreamCaptureStatusNone);
    ck_assert_int_eq(cudaGraphInstantiate(&x, g, 0), cudaSuccess);
    ck_assert_int_eq(cudaGraphLaunch(x, s), cudaSuccess);
    ck_assert_int_eq(cudaGraphLaunch_ptsz(x, 0), cudaSuccess);
    ck_assert_int_eq(cudaStreamSynchronize(s), cudaSuccess);
    ck_assert_int_eq(cudaGraphExecDestroy(x), cudaSuccess);
    ck_assert_int_eq(cudaGraphInstantiateWithFlags(&x, g, cudaGraphInstantiateFlagAutoFreeOnLaunch),
                     cudaSuccess);
    ck_assert_int_eq(cudaGraphExecDestroy(x), cudaSuccess);
    ck_assert_int_eq(cudaGraphDestroy(g), cudaSuccess);
    ck_assert_int_eq(cudaGraphDestroy(g), cudaErrorInvalidValue);

    /* Synchronizing a capturing stream is illegal and spoils the capture. */
    ck_assert_int_eq(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed), cudaSuccess);
    ck_assert_int_eq(cudaStreamSynchronize(s), cudaErrorStreamCaptureUnsupported);
    ck_assert_int_eq(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
    ck_assert_ptr_null(g);
    ck_assert_int_eq(cudaStreamDestroy(s), cudaSuccess);
    ck_assert_int_eq(cudaStreamDestroy(s), cudaErrorInvalidResourceHandle);

    /* Per-thread default stream (the _ptsz entry points' NULL stream) can capture. */
    ck_assert_int_eq(cudaStreamBeginCapture_ptsz(0, cudaStreamCaptureModeGlobal), cudaSuccess);
    ck_assert_int_eq(cudaStreamIsCapturing_ptsz(0, &cs), cudaSuccess);
    ck_assert_int_eq(cs, cudaStreamCaptureStatusActive);
    ck_assert_int_eq(cudaStreamIsCapturing(0, &cs), cudaSuccess); /* the legacy stream is not */
    ck_assert_int_eq(cs, cudaStreamCaptureStatusNone);
    ck_assert_int_eq(cudaMallocAsync_ptsz(&p, MiB, 0), cudaSuccess);
    ck_assert_int_eq(cudaFreeAsync_ptsz(p, 0), cudaSuccess);
    ck_assert_int_eq(cudaStreamEndCapture_ptsz(0, &g), cudaSuccess);
    ck_assert_int_eq(cudaGraphDestroy(g), cudaSuccess);

    /* Pools. */
    cudaMemPool_t pool, dflt;
    struct cudaMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    size_t f0 = free_mem();
    ck_assert_int_eq(cudaMemPoolCreate(&pool, &props), cudaSuccess);
    ck_assert_int_eq(cudaDeviceGetDefaultMemPool(&dflt, 0), cudaSuccess);
    ck_assert_ptr_ne(pool, dflt);
    ck_assert_int_eq(cudaMallocFromPoolAsync(&p, 3 * MiB, pool, 0), cudaSuccess);
    ck_assert_uint_eq(free_mem(), f0 - 3 * MiB);
    ck_assert_int_eq(cudaFreeAsync(p, 0), cudaSuccess);
    ck_assert_int_eq(cudaMallocFromPoolAsync_ptsz(&p, MiB, dflt, 0), cudaSuccess);
    ck_assert_int_eq(cudaFree(p), cudaSuccess);
    ck_assert_uint_eq(free_mem(), f0);
    ck_assert_int_eq(cudaMemPoolDestroy(dflt), cudaErrorInvalidValue);
    ck_assert_int_eq(cudaMemPoolDestroy(pool), cudaSuccess);
    ck_assert_int_eq(cudaDeviceGetDefaultMemPool(&dflt, 1), cudaErrorInvalidDevice);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Runtime odds and ends                                                      */
/* ------------------------------------------------------------------------ */

START_TEST(test_runtime_misc)
{
    int v = -1;
    ck_assert_int_eq(cudaGetDevice(&v), cudaSuccess);
    ck_assert_int_eq(v, 0);
    ck_assert_int_eq(cudaGetDeviceCount(&v), cudaSuccess);
    ck_assert_int_eq(v, 1);
    ck_assert_int_eq(cudaSetDevice(1), cudaErrorInvalidDevice);
    ck_assert_int_eq(cudaSetDevice(-1), cudaErrorInvalidDevice);
    ck_assert_int_eq(cudaGetLastError(), cudaErrorInvalidDevice);
    ck_assert_int_eq(cudaRuntimeGetVersion(&v), cudaSuccess);
    ck_assert_int_eq(v, 12080);
    ck_assert_int_eq(cudaDriverGetVersion(&v), cudaSuccess);
    ck_assert_int_eq(v, 13000);
    ck_assert_str_eq(cudaGetErrorName(cudaErrorMemoryAllocation), "cudaErrorMemoryAllocation");
    ck_assert_str_eq(cudaGetErrorName(cudaErrorInsufficientDriver), "cudaErrorInsufficientDriver");
    ck_assert_str_eq(cudaGetErrorString(cudaSuccess), "no error");

    /* Copies: host memory really moves, device memory is checked only. */
    char src[64], dst[64];
    void *d, *m, *h;
    memset(src, 7, sizeof src);
    memset(dst, 0, sizeof dst);
    ck_assert_int_eq(cudaMemcpy(dst, src, sizeof src, cudaMemcpyHostToHost), cudaSuccess);
    ck_assert_mem_eq(dst, src, sizeof src);
    ck_assert_int_eq(cudaMalloc(&d, 4096), cudaSuccess);
    ck_assert_int_eq(cudaMemcpy(d, src, sizeof src, cudaMemcpyHostToDevice), cudaSuccess);
    ck_assert_int_eq(cudaMemcpy(dst, d, sizeof dst, cudaMemcpyDeviceToHost), cudaSuccess);
    ck_assert_int_eq(cudaMemcpy(dst, (char *)d + 4090, 64, cudaMemcpyDeviceToHost),
                     cudaErrorInvalidValue);
    ck_assert_int_eq(cudaMemcpy(dst, src, 1, (enum cudaMemcpyKind)9),
                     cudaErrorInvalidMemcpyDirection);
    ck_assert_int_eq(cudaMallocManaged(&m, 4096, cudaMemAttachGlobal), cudaSuccess);
    ck_assert_int_eq(cudaMallocHost(&h, 4096), cudaSuccess);
    ck_assert_int_eq(cudaMemset(m, 0x42, 4096), cudaSuccess);
    ck_assert_int_eq(((unsigned char *)m)[4095], 0x42);
    ck_assert_int_eq(cudaMemcpy(h, m, 4096, cudaMemcpyDefault), cudaSuccess);
    ck_assert_int_eq(((unsigned char *)h)[100], 0x42);
    ck_assert_int_eq(cudaMemset(d, 0, 4096), cudaSuccess);
    ck_assert_int_eq(cudaMemset(d, 0, 4097), cudaErrorInvalidValue);
    ck_assert_int_eq(cudaMemset(src, 0, sizeof src), cudaErrorInvalidValue); /* pageable */
    ck_assert_int_eq(cudaFree(d), cudaSuccess);
    ck_assert_int_eq(cudaMemcpy(dst, d, 1, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
    ck_assert_int_eq(cudaFree(m), cudaSuccess);
    ck_assert_int_eq(cudaFreeHost(h), cudaSuccess);
    ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
}
END_TEST

struct worker {
    int dev;
    int ok;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    int d = -1;
    w->ok = cudaGetDevice(&d) == cudaSuccess && d == 0; /* per thread, default 0 */
    if (w->dev >= 0) {
        w->ok &= cudaSetDevice(w->dev) == cudaSuccess;
        w->ok &= cudaGetDevice(&d) == cudaSuccess && d == w->dev;
    }
    unsigned seed = (unsigned)(uintptr_t)w;
    for (int i = 0; i < 300 && w->ok; i++) {
        void *p[4];
        for (int j = 0; j < 4; j++)
            w->ok &= cudaMalloc(&p[j], 1 + rand_r(&seed) % (4 * MiB)) == cudaSuccess;
        for (int j = 0; j < 4; j++)
            w->ok &= cudaFree(p[j]) == cudaSuccess;
    }
    return NULL;
}

START_TEST(test_threads)
{
    setenv("CUTRACE_FAKE_GPUS", "2", 1);
    size_t f0 = free_mem();
    ck_assert_int_eq(cudaSetDevice(1), cudaSuccess);
    size_t f1 = free_mem();
    pthread_t t[8];
    struct worker w[8];
    for (int i = 0; i < 8; i++) {
        w[i] = (struct worker){i % 2 ? 1 : -1, 0};
        ck_assert_int_eq(pthread_create(&t[i], NULL, worker_main, &w[i]), 0);
    }
    for (int i = 0; i < 8; i++) {
        ck_assert_int_eq(pthread_join(t[i], NULL), 0);
        ck_assert_msg(w[i].ok, "worker %d failed", i);
    }
    int d;
    ck_assert_int_eq(cudaGetDevice(&d), cudaSuccess);
    ck_assert_int_eq(d, 1); /* other threads did not move this one */
    ck_assert_uint_eq(free_mem(), f1);
    ck_assert_int_eq(cudaSetDevice(0), cudaSuccess);
    ck_assert_uint_eq(free_mem(), f0);
}
END_TEST

static Suite *fake_suite(void)
{
    Suite *s = suite_create("fake_stack");
    TCase *tc = tcase_create("all");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_meminfo_exact);
    tcase_add_test(tc, test_oom);
    tcase_add_test(tc, test_pointer_reuse);
    tcase_add_test(tc, test_cross_process);
    tcase_add_test(tc, test_dead_process_reclaimed);
    tcase_add_test(tc, test_no_overcommit);
    tcase_add_test(tc, test_device_memory_not_host_accessible);
    tcase_add_test(tc, test_fork_child_is_new_process);
    tcase_add_test(tc, test_exec_replaces_image);
    tcase_add_test(tc, test_ipc);
    tcase_add_test(tc, test_visible_devices);
    tcase_add_test(tc, test_zero_devices);
    tcase_add_test(tc, test_driver_contexts);
    tcase_add_test(tc, test_library_structure);
    tcase_add_test(tc, test_runtime_uses_get_proc_address_only);
    tcase_add_test(tc, test_missing_driver);
    tcase_add_test(tc, test_get_proc_address);
    tcase_add_test(tc, test_vmm);
    tcase_add_test(tc, test_capture_and_graphs);
    tcase_add_test(tc, test_runtime_misc);
    tcase_add_test(tc, test_threads);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    find_dir();
    SRunner *sr = srunner_create(fake_suite());
    /* Each test needs a process of its own: the fake configures itself once. */
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
