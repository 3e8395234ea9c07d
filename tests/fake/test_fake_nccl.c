/*
 * test_fake_nccl.c - tests of the fake libnccl.so.2 that cutrace's NCCL
 * tracing is tested against.
 *
 * Each test runs in its own forked process (Check's fork mode, forced below)
 * with a fresh CUTRACE_FAKE_STATE file and CUTRACE_FAKE_NCCL_DIR in a mkdtemp
 * directory, because the fakes read their configuration once per process.
 * Ranks in other processes are forked "kids" that serve commands read from a
 * pipe ("init 4 2 1", "split 0 5", "destroy", "quit") and answer one line
 * each; forked from a test that has not configured NCCL yet, a kid reads the
 * environment itself. Checks that need a fresh exec (LD_DEBUG, a missing
 * driver) re-run this binary with --child.
 *
 * Run with LD_LIBRARY_PATH pointing at the directory of the fake libraries
 * (make fake-tests does); this binary lives there too.
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <check.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MiB (1ull << 20)
/* What one peer costs: 9 MiB, rounded up to the fake driver's 2 MiB granularity on the cuMem path.
 */
#define PEER_CUMEM  (10 * MiB)
#define PEER_LEGACY (9 * MiB)

static char g_dir[PATH_MAX];        /* this binary and the libraries */
static char g_self[PATH_MAX];       /* this binary */
static char g_tmp[PATH_MAX];        /* per-test scratch directory */
static char g_ncdir[PATH_MAX + 16]; /* per-test CUTRACE_FAKE_NCCL_DIR */
static ncclUniqueId g_id;           /* the id kids rendezvous on */

/* ------------------------------------------------------------------------ */
/* Helpers                                                                    */
/* ------------------------------------------------------------------------ */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void setup(void)
{
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(g_tmp, sizeof g_tmp, "%s/fake-nccl-XXXXXX", base);
    ck_assert_ptr_nonnull(mkdtemp(g_tmp));
    char state[PATH_MAX + 16];
    snprintf(state, sizeof state, "%s/state", g_tmp);
    snprintf(g_ncdir, sizeof g_ncdir, "%s/nccl", g_tmp);
    setenv("CUTRACE_FAKE_STATE", state, 1);
    setenv("CUTRACE_FAKE_NCCL_DIR", g_ncdir, 1);
    setenv("CUTRACE_FAKE_NCCL_TIMEOUT", "20", 1);
    setenv("CUTRACE_FAKE_UUID_SEED", "nccl-test", 1);
    setenv("CUTRACE_FAKE_GPUS", "4", 1);
    setenv("CUTRACE_FAKE_GPU_MEM", "16G", 1);
    setenv("CUTRACE_FAKE_CTX_MEM", "0", 1); /* so used memory is NCCL's alone */
    const char *unset[] = {"CUDA_VISIBLE_DEVICES",
                           "NCCL_CUMEM_ENABLE",
                           "NCCL_CUMEM_HOST_ENABLE",
                           "NCCL_DEBUG",
                           "NCCL_DEBUG_FILE",
                           "NCCL_COMM_BLOCKING",
                           "NCCL_COMM_SPLIT_SHARE_RESOURCES"};
    for (size_t i = 0; i < sizeof unset / sizeof unset[0]; i++)
        unsetenv(unset[i]);
    setenv("LD_LIBRARY_PATH", g_dir, 1);
    signal(SIGPIPE, SIG_IGN);
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

/* Entries of dir whose names start with prefix (0 when dir does not exist). */
static int count_entries(const char *dir, const char *prefix, char *first, size_t len)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
            continue;
        if (n++ == 0 && first)
            snprintf(first, len, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    return n;
}

/* The rendezvous directory of the test (exactly one nccl-* in the NCCL dir). */
static void id_dir(char *out, size_t len)
{
    ck_assert_int_eq(count_entries(g_ncdir, "nccl-", out, len), 1);
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static void wait_for(const char *path)
{
    for (int i = 0; i < 2000 && !exists(path); i++)
        usleep(1000);
    ck_assert_msg(exists(path), "%s never appeared", path);
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

/* Device memory in use on device d by every process sharing the state file. */
static size_t used(int d)
{
    size_t f = 0, t = 0;
    ck_assert_int_eq(cudaSetDevice(d), cudaSuccess);
    ck_assert_int_eq(cudaMemGetInfo(&f, &t), cudaSuccess);
    return t - f;
}

static void *driver_sym(const char *name)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(h != NULL, "%s", dlerror());
    void *p = dlsym(h, name);
    ck_assert_msg(p != NULL, "no %s in libcuda.so.1", name);
    return p;
}

static int file_contains(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[1024];
    int found = 0;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

/* ------------------------------------------------------------------------ */
/* Kids: ranks in other processes                                             */
/* ------------------------------------------------------------------------ */

struct kid {
    pid_t pid;
    int to;
    FILE *from;
};

static int g_kid_fds[64];
static int g_nkid_fds;

typedef void (*kid_fn)(FILE *in, FILE *out, const char *const *env);

/*
 * Forks a kid running fn with its commands on in and answers on out. env:
 * "NAME=value" to set, "NAME" to unset, before the kid does anything.
 */
static struct kid kid_start(kid_fn fn, const char *const *env)
{
    int to[2], from[2];
    ck_assert_int_eq(pipe(to), 0);
    ck_assert_int_eq(pipe(from), 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        /* Earlier kids' pipes too, or they would never see end of file. */
        for (int i = 0; i < g_nkid_fds; i++)
            close(g_kid_fds[i]);
        close(to[1]);
        close(from[0]);
        for (size_t i = 0; env && env[i]; i++) {
            const char *eq = strchr(env[i], '=');
            if (eq) {
                char name[128];
                snprintf(name, sizeof name, "%.*s", (int)(eq - env[i]), env[i]);
                setenv(name, eq + 1, 1);
            } else {
                unsetenv(env[i]);
            }
        }
        FILE *in = fdopen(to[0], "r"), *out = fdopen(from[1], "w");
        if (!in || !out)
            _exit(2);
        setvbuf(out, NULL, _IOLBF, 0);
        fn(in, out, env);
        fflush(out);
        _exit(0); /* not exit(): Check's handlers belong to the test process */
    }
    close(to[0]);
    close(from[1]);
    struct kid k = {pid, to[1], fdopen(from[0], "r")};
    ck_assert_ptr_nonnull(k.from);
    g_kid_fds[g_nkid_fds++] = to[1];
    g_kid_fds[g_nkid_fds++] = from[0];
    return k;
}

__attribute__((format(printf, 2, 3))) static void kid_say(struct kid *k, const char *fmt, ...)
{
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    ck_assert_int_eq(write(k->to, line, (size_t)n), n);
}

static char *kid_hear(struct kid *k, char *buf, size_t len)
{
    char *r = fgets(buf, (int)len, k->from);
    ck_assert_msg(r != NULL, "kid %d ended early", (int)k->pid);
    return r;
}

/* "quit" may find the kid gone already (SIGPIPE is ignored by setup). */
static int kid_end(struct kid *k)
{
    ssize_t w = write(k->to, "quit\n", 5);
    (void)w;
    close(k->to);
    fclose(k->from);
    int status;
    ck_assert_int_eq(waitpid(k->pid, &status, 0), k->pid);
    return status;
}

static void report(FILE *out, const char *what, ncclResult_t r, ncclComm_t c)
{
    int rank = -1, count = -1, dev = -1;
    if (r == ncclSuccess && c) {
        ncclCommUserRank(c, &rank);
        ncclCommCount(c, &count);
        ncclCommCuDevice(c, &dev);
    }
    fprintf(out, "%s rc=%d null=%d rank=%d count=%d dev=%d\n", what, (int)r, c == NULL, rank, count,
            dev);
}

/*
 * A rank: "init nranks rank dev" (dev -1: no CUDA call before, so NCCL finds
 * no current context), "split color key", "destroy" (everything it holds),
 * "memalloc bytes", "quit".
 */
static void rank_server(FILE *in, FILE *out, const char *const *env)
{
    (void)env;
    ncclComm_t comm = NULL, subs[16];
    int nsubs = 0;
    char line[256];
    while (fgets(line, sizeof line, in)) {
        int a, b, c;
        if (sscanf(line, "init %d %d %d", &a, &b, &c) == 3) {
            if (c >= 0)
                cudaSetDevice(c);
            comm = (ncclComm_t)line; /* must be overwritten */
            ncclResult_t r = ncclCommInitRank(&comm, a, g_id, b);
            report(out, "init", r, comm);
        } else if (sscanf(line, "split %d %d", &a, &b) == 2) {
            ncclComm_t nc = (ncclComm_t)line;
            ncclResult_t r = ncclCommSplit(comm, a, b, &nc, NULL);
            if (nc && nsubs < 16)
                subs[nsubs++] = nc;
            report(out, "split", r, nc);
        } else if (strncmp(line, "destroy", 7) == 0) {
            ncclResult_t r = ncclSuccess;
            while (nsubs > 0) {
                ncclResult_t x = ncclCommDestroy(subs[--nsubs]);
                if (x != ncclSuccess)
                    r = x;
            }
            if (comm) {
                ncclResult_t x = ncclCommDestroy(comm);
                if (x != ncclSuccess)
                    r = x;
            }
            comm = NULL;
            fprintf(out, "destroy rc=%d\n", (int)r);
        } else if (strncmp(line, "quit", 4) == 0) {
            break;
        } else {
            fprintf(out, "unknown command: %s", line);
        }
    }
}

static void kids_say(struct kid *k, int n, const char *cmd)
{
    for (int i = 0; i < n; i++)
        kid_say(&k[i], "%s\n", cmd);
}

/* ------------------------------------------------------------------------ */
/* Version, errors, ids                                                       */
/* ------------------------------------------------------------------------ */

START_TEST(test_version_and_ids)
{
    int v = 0;
    ck_assert_int_eq(ncclGetVersion(&v), ncclSuccess);
    ck_assert_int_eq(v, NCCL_VERSION_CODE);
    ck_assert_int_eq(v, 22809);
    ck_assert_int_eq(ncclGetVersion(NULL), ncclInvalidArgument);
    for (int r = ncclSuccess; r <= ncclNumResults; r++) {
        const char *s = ncclGetErrorString((ncclResult_t)r);
        ck_assert_ptr_nonnull(s);
        ck_assert_int_gt((int)strlen(s), 0);
    }
    ck_assert_str_ne(ncclGetErrorString(ncclInvalidArgument), ncclGetErrorString(ncclInvalidUsage));
    ck_assert_ptr_nonnull(ncclGetLastError(NULL));

    ncclUniqueId a, b;
    ck_assert_int_eq(ncclGetUniqueId(&a), ncclSuccess);
    ck_assert_int_eq(ncclGetUniqueId(&b), ncclSuccess);
    ck_assert_int_eq(sizeof a.internal, 128);
    ck_assert_int_eq(memcmp(a.internal, b.internal, 8), 0); /* the same magic */
    ck_assert_int_ne(memcmp(a.internal, b.internal, sizeof a.internal), 0);
    ck_assert_int_eq(ncclGetUniqueId(NULL), ncclInvalidArgument);
    ck_assert_ptr_nonnull(strstr(ncclGetLastError(NULL), "uniqueId"));
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Rendezvous                                                                 */
/* ------------------------------------------------------------------------ */

/*
 * Four processes meet; ranks 0..2 chose devices 0..2 with cudaSetDevice, rank
 * 3 made no CUDA call and lands on device 0 (its primary context). Each has
 * three peers' worth of buffers on its device until it destroys the
 * communicator.
 */
START_TEST(test_four_processes)
{
    ck_assert_int_eq(ncclGetUniqueId(&g_id), ncclSuccess);
    struct kid k[4];
    for (int i = 0; i < 4; i++)
        k[i] = kid_start(rank_server, NULL);
    for (int i = 0; i < 4; i++)
        kid_say(&k[i], "init 4 %d %d\n", i, i < 3 ? i : -1);
    char line[256];
    for (int i = 0; i < 4; i++) {
        kid_hear(&k[i], line, sizeof line);
        ck_assert_msg(field(line, "rc") == ncclSuccess, "rank %d: %s", i, line);
        ck_assert_int_eq(field(line, "rank"), i);
        ck_assert_int_eq(field(line, "count"), 4);
        ck_assert_int_eq(field(line, "dev"), i < 3 ? i : 0);
    }
    char dir[PATH_MAX], rank_file[PATH_MAX + 16];
    id_dir(dir, sizeof dir);
    for (int i = 0; i < 4; i++) {
        snprintf(rank_file, sizeof rank_file, "%s/rank-%d", dir, i);
        ck_assert_msg(exists(rank_file), "%s", rank_file);
    }
    ck_assert_uint_eq(used(0), 2 * 3 * PEER_CUMEM);
    ck_assert_uint_eq(used(1), 3 * PEER_CUMEM);
    ck_assert_uint_eq(used(2), 3 * PEER_CUMEM);
    ck_assert_uint_eq(used(3), 0);
    kids_say(k, 4, "destroy");
    for (int i = 0; i < 4; i++) {
        kid_hear(&k[i], line, sizeof line);
        ck_assert_int_eq(field(line, "rc"), ncclSuccess);
    }
    for (int d = 0; d < 4; d++)
        ck_assert_uint_eq(used(d), 0);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(kid_end(&k[i]), 0);
}
END_TEST

START_TEST(test_bad_rank_creates_nothing)
{
    ncclUniqueId id;
    ck_assert_int_eq(ncclGetUniqueId(&id), ncclSuccess);
    const int cases[][2] = {{4, 4}, {4, -1}, {0, 0}, {-3, 0}, {2, 7}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ncclComm_t c = (ncclComm_t)&id;
        ck_assert_int_eq(ncclCommInitRank(&c, cases[i][0], id, cases[i][1]), ncclInvalidArgument);
        ck_assert_ptr_null(c);
    }
    ck_assert_ptr_nonnull(strstr(ncclGetLastError(NULL), "rank"));
    ck_assert_int_eq(ncclCommInitRank(NULL, 1, id, 0), ncclInvalidArgument);
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    ncclComm_t c = NULL;
    ck_assert_int_eq(ncclCommInitRankConfig(&c, 2, id, 2, &cfg), ncclInvalidArgument);
    ck_assert_int_eq(ncclCommInitRankScalable(&c, 2, -1, 1, &id, NULL), ncclInvalidArgument);
    ncclUniqueId zero;
    memset(&zero, 0, sizeof zero);
    ck_assert_int_eq(ncclCommInitRank(&c, 1, zero, 0), ncclInvalidArgument);
    ck_assert_ptr_null(c);

    /* Nothing at all: no rendezvous files, no context, no memory. */
    ck_assert(!exists(g_ncdir));
    __typeof__(&cuInit) init = (__typeof__(&cuInit))driver_sym("cuInit");
    __typeof__(&cuDevicePrimaryCtxGetState) state =
        (__typeof__(&cuDevicePrimaryCtxGetState))driver_sym("cuDevicePrimaryCtxGetState");
    ck_assert_int_eq(init(0), CUDA_SUCCESS);
    unsigned flags;
    int active = 1;
    ck_assert_int_eq(state(0, &flags, &active), CUDA_SUCCESS);
    ck_assert_int_eq(active, 0);
    for (int d = 0; d < 4; d++)
        ck_assert_uint_eq(used(d), 0);
}
END_TEST

/* A second claim of a rank held by a live process fails at once; the holder is unharmed. */
START_TEST(test_rank_taken_twice)
{
    ck_assert_int_eq(ncclGetUniqueId(&g_id), ncclSuccess);
    struct kid a = kid_start(rank_server, NULL);
    kid_say(&a, "init 2 0 0\n");
    char dir[PATH_MAX], file[PATH_MAX + 16], line[256];
    for (int i = 0; i < 2000 && count_entries(g_ncdir, "nccl-", NULL, 0) == 0; i++)
        usleep(1000);
    id_dir(dir, sizeof dir);
    snprintf(file, sizeof file, "%s/rank-0", dir);
    wait_for(file);

    ncclComm_t c = (ncclComm_t)&a;
    double t0 = now_s();
    ck_assert_int_eq(ncclCommInitRank(&c, 2, g_id, 0), ncclInvalidUsage);
    ck_assert_double_lt(now_s() - t0, 5.0);
    ck_assert_ptr_null(c);
    ck_assert_ptr_nonnull(strstr(ncclGetLastError(NULL), "already taken"));
    ck_assert_uint_eq(used(0), 0);

    /* Another process might take the free rank, and both finish. */
    struct kid b = kid_start(rank_server, NULL);
    kid_say(&b, "init 2 1 1\n");
    kid_hear(&a, line, sizeof line);
    ck_assert_msg(field(line, "rc") == ncclSuccess, "%s", line);
    ck_assert_int_eq(field(line, "rank"), 0);
    kid_hear(&b, line, sizeof line);
    ck_assert_msg(field(line, "rc") == ncclSuccess, "%s", line);
    ck_assert_int_eq(field(line, "rank"), 1);
    ck_assert_uint_eq(used(0), PEER_CUMEM);
    ck_assert_uint_eq(used(1), PEER_CUMEM);
    ck_assert_int_eq(kid_end(&a), 0);
    ck_assert_int_eq(kid_end(&b), 0);
}
END_TEST

/* A claim whose process was killed is taken over. */
START_TEST(test_dead_claim_replaced)
{
    ck_assert_int_eq(ncclGetUniqueId(&g_id), ncclSuccess);
    struct kid a = kid_start(rank_server, NULL);
    kid_say(&a, "init 2 0 0\n");
    char dir[PATH_MAX], file[PATH_MAX + 16], line[256];
    for (int i = 0; i < 2000 && count_entries(g_ncdir, "nccl-", NULL, 0) == 0; i++)
        usleep(1000);
    id_dir(dir, sizeof dir);
    snprintf(file, sizeof file, "%s/rank-0", dir);
    wait_for(file);
    kill(a.pid, SIGKILL);
    int status;
    ck_assert_int_eq(waitpid(a.pid, &status, 0), a.pid);
    close(a.to);
    fclose(a.from);

    struct kid b = kid_start(rank_server, NULL), c = kid_start(rank_server, NULL);
    kid_say(&b, "init 2 0 0\n");
    kid_say(&c, "init 2 1 0\n");
    kid_hear(&b, line, sizeof line);
    ck_assert_msg(field(line, "rc") == ncclSuccess, "%s", line);
    kid_hear(&c, line, sizeof line);
    ck_assert_msg(field(line, "rc") == ncclSuccess, "%s", line);
    ck_assert_int_eq(kid_end(&b), 0);
    ck_assert_int_eq(kid_end(&c), 0);
}
END_TEST

START_TEST(test_timeout)
{
    setenv("CUTRACE_FAKE_NCCL_TIMEOUT", "0.3", 1);
    ncclUniqueId id;
    ck_assert_int_eq(ncclGetUniqueId(&id), ncclSuccess);
    ncclComm_t c = (ncclComm_t)&id;
    double t0 = now_s();
    ck_assert_int_eq(ncclCommInitRank(&c, 2, id, 1), ncclSystemError);
    double dt = now_s() - t0;
    ck_assert_ptr_null(c);
    ck_assert_double_ge(dt, 0.29);
    ck_assert_double_lt(dt, 5.0);
    ck_assert_ptr_nonnull(strstr(ncclGetLastError(NULL), "timed out"));
    /* The claim is withdrawn and nothing was allocated. */
    char dir[PATH_MAX], file[PATH_MAX + 16];
    id_dir(dir, sizeof dir);
    snprintf(file, sizeof file, "%s/rank-1", dir);
    ck_assert(!exists(file));
    ck_assert_uint_eq(used(0), 0);
    /* So the rank can be claimed again. */
    ck_assert_int_eq(ncclCommInitRank(&c, 2, id, 1), ncclSystemError);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Split                                                                      */
/* ------------------------------------------------------------------------ */

/*
 * Colors rank % 2 with keys 10 - rank: group {0, 2} orders rank 2 first, group
 * {1, 3} rank 3 first. Then a split where rank 3 has no color.
 */
START_TEST(test_split_processes)
{
    ck_assert_int_eq(ncclGetUniqueId(&g_id), ncclSuccess);
    struct kid k[4];
    char line[256];
    for (int i = 0; i < 4; i++)
        k[i] = kid_start(rank_server, NULL);
    for (int i = 0; i < 4; i++)
        kid_say(&k[i], "init 4 %d %d\n", i, i);
    for (int i = 0; i < 4; i++) {
        kid_hear(&k[i], line, sizeof line);
        ck_assert_msg(field(line, "rc") == ncclSuccess, "%s", line);
    }
    for (int i = 0; i < 4; i++)
        kid_say(&k[i], "split %d %d\n", i % 2, 10 - i);
    const int want_rank[4] = {1, 1, 0, 0};
    for (int i = 0; i < 4; i++) {
        kid_hear(&k[i], line, sizeof line);
        ck_assert_msg(field(line, "rc") == ncclSuccess, "rank %d: %s", i, line);
        ck_assert_int_eq(field(line, "null"), 0);
        ck_assert_int_eq(field(line, "rank"), want_rank[i]);
        ck_assert_int_eq(field(line, "count"), 2);
        ck_assert_int_eq(field(line, "dev"), i);
    }
    /* A split communicator allocates its own buffers: one peer more on every device. */
    for (int d = 0; d < 4; d++)
        ck_assert_uint_eq(used(d), 4 * PEER_CUMEM);

    for (int i = 0; i < 4; i++)
        kid_say(&k[i], "split %d 0\n", i == 3 ? NCCL_SPLIT_NOCOLOR : 5);
    for (int i = 0; i < 4; i++) {
        kid_hear(&k[i], line, sizeof line);
        ck_assert_msg(field(line, "rc") == ncclSuccess, "rank %d: %s", i, line);
        ck_assert_int_eq(field(line, "null"), i == 3);
        if (i < 3) {
            ck_assert_int_eq(field(line, "rank"), i);
            ck_assert_int_eq(field(line, "count"), 3);
        }
    }
    char dir[PATH_MAX], sub[PATH_MAX + 32];
    id_dir(dir, sizeof dir);
    for (int s = 0; s < 2; s++) {
        snprintf(sub, sizeof sub, "%s/split-%d", dir, s);
        ck_assert_int_eq(count_entries(sub, "rank-", NULL, 0), 4);
    }
    ck_assert_uint_eq(used(3), 4 * PEER_CUMEM);
    ck_assert_uint_eq(used(0), 4 * PEER_CUMEM + 2 * PEER_CUMEM);
    kids_say(k, 4, "destroy");
    for (int i = 0; i < 4; i++) {
        kid_hear(&k[i], line, sizeof line);
        ck_assert_int_eq(field(line, "rc"), ncclSuccess);
    }
    for (int d = 0; d < 4; d++)
        ck_assert_uint_eq(used(d), 0);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(kid_end(&k[i]), 0);
}
END_TEST

/* One thread splits all the communicators of ncclCommInitAll inside a group. */
START_TEST(test_split_in_group)
{
    ncclComm_t comms[4], sub[4];
    ck_assert_int_eq(ncclCommInitAll(comms, 4, NULL), ncclSuccess);
    ck_assert_int_eq(count_entries(g_ncdir, "nccl-", NULL, 0), 0); /* InitAll: no files */
    for (int d = 0; d < 4; d++)
        ck_assert_uint_eq(used(d), 3 * PEER_CUMEM);
    ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
    for (int i = 0; i < 4; i++) {
        sub[i] = NULL;
        ck_assert_int_eq(ncclCommSplit(comms[i], i < 2 ? 0 : 1, -i, &sub[i], NULL), ncclSuccess);
        ck_assert_ptr_nonnull(sub[i]);
    }
    int n = 0;
    ck_assert_int_eq(ncclCommCount(sub[0], &n), ncclInProgress); /* not before the group ends */
    ck_assert_int_eq(ncclGroupEnd(), ncclSuccess);
    const int want[4] = {1, 0, 1, 0};
    for (int i = 0; i < 4; i++) {
        int r = -1, dev = -1;
        ck_assert_int_eq(ncclCommUserRank(sub[i], &r), ncclSuccess);
        ck_assert_int_eq(ncclCommCount(sub[i], &n), ncclSuccess);
        ck_assert_int_eq(ncclCommCuDevice(sub[i], &dev), ncclSuccess);
        ck_assert_int_eq(r, want[i]);
        ck_assert_int_eq(n, 2);
        ck_assert_int_eq(dev, i);
        ck_assert_uint_eq(used(i), 4 * PEER_CUMEM);
    }
    /* splitShare: the new communicators use their parents' buffers. */
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.splitShare = 1;
    ncclComm_t shared[4];
    ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(ncclCommSplit(comms[i], 0, i, &shared[i], &cfg), ncclSuccess);
    ck_assert_int_eq(ncclGroupEnd(), ncclSuccess);
    for (int i = 0; i < 4; i++) {
        int r = -1;
        ck_assert_int_eq(ncclCommUserRank(shared[i], &r), ncclSuccess);
        ck_assert_int_eq(r, i);
        ck_assert_uint_eq(used(i), 4 * PEER_CUMEM);
    }
    ck_assert_int_eq(count_entries(g_ncdir, "nccl-", NULL, 0), 1);
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(ncclCommDestroy(shared[i]), ncclSuccess);
        ck_assert_int_eq(ncclCommDestroy(sub[i]), ncclSuccess);
        ck_assert_int_eq(ncclCommDestroy(comms[i]), ncclSuccess);
    }
    for (int d = 0; d < 4; d++)
        ck_assert_uint_eq(used(d), 0);
    /* A bad color creates nothing. */
    ck_assert_int_eq(ncclCommInitAll(comms, 1, NULL), ncclSuccess);
    ncclComm_t bad = comms[0];
    ck_assert_int_eq(ncclCommSplit(comms[0], -5, 0, &bad, NULL), ncclInvalidArgument);
    ck_assert_ptr_null(bad);
    ck_assert_int_eq(ncclCommSplit(comms[0], 0, 0, NULL, NULL), ncclInvalidArgument);
    ck_assert_int_eq(ncclCommSplit(NULL, 0, 0, &bad, NULL), ncclInvalidArgument);
    ck_assert_int_eq(ncclCommDestroy(comms[0]), ncclSuccess);
}
END_TEST

START_TEST(test_shrink)
{
    ncclComm_t comms[4], sub[4] = {NULL, NULL, NULL, NULL};
    ck_assert_int_eq(ncclCommInitAll(comms, 4, NULL), ncclSuccess);
    int excl = 2;
    ck_assert_int_eq(ncclCommShrink(comms[2], &excl, 1, &sub[2], NULL, NCCL_SHRINK_DEFAULT),
                     ncclInvalidArgument); /* a rank cannot exclude itself */
    ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
    for (int i = 0; i < 4; i++)
        if (i != excl)
            ck_assert_int_eq(ncclCommShrink(comms[i], &excl, 1, &sub[i], NULL, NCCL_SHRINK_ABORT),
                             ncclSuccess);
    ck_assert_int_eq(ncclGroupEnd(), ncclSuccess);
    for (int i = 0; i < 4; i++) {
        if (i == excl)
            continue;
        int r = -1, n = -1;
        ck_assert_int_eq(ncclCommUserRank(sub[i], &r), ncclSuccess);
        ck_assert_int_eq(ncclCommCount(sub[i], &n), ncclSuccess);
        ck_assert_int_eq(r, i < excl ? i : i - 1);
        ck_assert_int_eq(n, 3);
        ck_assert_uint_eq(used(i), (3 + 2) * PEER_CUMEM);
        ck_assert_int_eq(ncclCommDestroy(sub[i]), ncclSuccess);
    }
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(ncclCommDestroy(comms[i]), ncclSuccess);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Internal buffers and NCCL's own allocations                                */
/* ------------------------------------------------------------------------ */

START_TEST(test_buffers_cumem)
{
    ncclComm_t comms[3];
    const int devs[3] = {3, 1, 0};
    ck_assert_int_eq(ncclCommInitAll(comms, 3, devs), ncclSuccess);
    for (int i = 0; i < 3; i++) {
        int dev = -1, r = -1;
        ck_assert_int_eq(ncclCommCuDevice(comms[i], &dev), ncclSuccess);
        ck_assert_int_eq(ncclCommUserRank(comms[i], &r), ncclSuccess);
        ck_assert_int_eq(dev, devs[i]);
        ck_assert_int_eq(r, i);
    }
    ck_assert_uint_eq(used(0), 2 * PEER_CUMEM);
    ck_assert_uint_eq(used(1), 2 * PEER_CUMEM);
    ck_assert_uint_eq(used(2), 0);
    ck_assert_uint_eq(used(3), 2 * PEER_CUMEM);
    ck_assert_int_eq(ncclCommDestroy(comms[1]), ncclSuccess);
    ck_assert_uint_eq(used(1), 0);
    ck_assert_int_eq(ncclCommAbort(comms[0]), ncclSuccess);
    ck_assert_int_eq(ncclCommFinalize(comms[2]), ncclSuccess);
    ck_assert_uint_eq(used(0), 2 * PEER_CUMEM); /* finalize does not free */
    ck_assert_int_eq(ncclCommDestroy(comms[2]), ncclSuccess);
    for (int d = 0; d < 4; d++)
        ck_assert_uint_eq(used(d), 0);

    /* One rank alone has no peers. */
    ncclUniqueId id;
    ncclComm_t c;
    ck_assert_int_eq(ncclGetUniqueId(&id), ncclSuccess);
    ck_assert_int_eq(ncclCommInitRank(&c, 1, id, 0), ncclSuccess);
    ck_assert_uint_eq(used(0), 0);
    ck_assert_int_eq(ncclCommDestroy(c), ncclSuccess);

    /* Bad device lists create nothing. */
    ncclComm_t two[2] = {(ncclComm_t)&id, (ncclComm_t)&id};
    const int dup[2] = {1, 1}, out_of_range[2] = {0, 4};
    ck_assert_int_eq(ncclCommInitAll(two, 2, dup), ncclInvalidUsage);
    ck_assert_ptr_null(two[0]);
    ck_assert_int_eq(ncclCommInitAll(two, 2, out_of_range), ncclInvalidArgument);
    ck_assert_int_eq(ncclCommInitAll(two, 0, NULL), ncclInvalidArgument);
    ck_assert_int_eq(ncclCommInitAll(NULL, 2, NULL), ncclInvalidArgument);
    for (int d = 0; d < 4; d++)
        ck_assert_uint_eq(used(d), 0);
}
END_TEST

/* A buffer that does not fit fails the init with ncclUnhandledCudaError and leaves nothing. */
START_TEST(test_out_of_memory)
{
    setenv("CUTRACE_FAKE_GPU_MEM", "14M", 1); /* one peer buffer fits, the second does not */
    ncclComm_t comms[3] = {NULL, NULL, NULL};
    ck_assert_int_eq(ncclCommInitAll(comms, 3, NULL), ncclUnhandledCudaError);
    for (int i = 0; i < 3; i++)
        ck_assert_ptr_null(comms[i]);
    ck_assert_ptr_nonnull(strstr(ncclGetLastError(NULL), "cuMemCreate"));
    for (int d = 0; d < 3; d++)
        ck_assert_uint_eq(used(d), 0);

    ncclUniqueId id;
    ck_assert_int_eq(ncclGetUniqueId(&id), ncclSuccess);
    ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(ncclCommInitRank(&comms[i], 3, id, i), ncclSuccess);
    /* Every rank fails at once: one failing rank does not leave the others waiting for it. */
    double t0 = now_s();
    ck_assert_int_eq(ncclGroupEnd(), ncclUnhandledCudaError);
    ck_assert_double_lt(now_s() - t0, 5.0);
    ncclResult_t async = ncclSuccess;
    ck_assert_int_eq(ncclCommGetAsyncError(comms[0], &async), ncclSuccess);
    ck_assert_int_eq(async, ncclUnhandledCudaError);
    ck_assert_int_eq(ncclAllReduce((void *)1, (void *)1, 1, ncclFloat, ncclSum, comms[0], NULL),
                     ncclUnhandledCudaError);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(ncclCommAbort(comms[i]), ncclSuccess);
    ck_assert_uint_eq(used(0), 0);
}
END_TEST

/* NCCL_CUMEM_ENABLE=0: cuMemAlloc of exactly 9 MiB per peer, and for ncclMemAlloc. */
START_TEST(test_buffers_legacy)
{
    setenv("NCCL_CUMEM_ENABLE", "0", 1);
    setenv("NCCL_DEBUG", "INFO", 1);
    char log[PATH_MAX + 16];
    snprintf(log, sizeof log, "%s/log", g_tmp);
    setenv("NCCL_DEBUG_FILE", log, 1);
    ncclComm_t comms[3];
    ck_assert_int_eq(ncclCommInitAll(comms, 3, NULL), ncclSuccess);
    for (int d = 0; d < 3; d++)
        ck_assert_uint_eq(used(d), 2 * PEER_LEGACY);
    ck_assert(file_contains(log, "(cuMemAlloc)"));
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(ncclCommDestroy(comms[i]), ncclSuccess);
    for (int d = 0; d < 3; d++)
        ck_assert_uint_eq(used(d), 0);

    ck_assert_int_eq(cudaSetDevice(2), cudaSuccess);
    void *p = NULL;
    ck_assert_int_eq(ncclMemAlloc(&p, 3 * MiB + 5), ncclSuccess);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(used(2), 3 * MiB + 5);
    ck_assert_int_eq(ncclMemFree(p), ncclSuccess);
    ck_assert_uint_eq(used(2), 0);
}
END_TEST

/* ncclMemAlloc: device memory through cuMemCreate, granularity-rounded, freed only by ncclMemFree.
 */
START_TEST(test_memalloc)
{
    ck_assert_int_eq(cudaSetDevice(1), cudaSuccess);
    void *p = NULL, *q = NULL;
    ck_assert_int_eq(ncclMemAlloc(&p, 3 * MiB), ncclSuccess);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(used(1), 4 * MiB);
    ck_assert_int_eq(ncclMemAlloc(&q, 2 * MiB), ncclSuccess);
    ck_assert_uint_eq(used(1), 6 * MiB);
    ck_assert_uint_eq(used(0), 0);
    ck_assert_int_ne(cudaFree(p), cudaSuccess); /* not cudaMalloc memory */
    ck_assert_uint_eq(used(1), 6 * MiB);
    ck_assert_int_eq(ncclMemFree(p), ncclSuccess);
    ck_assert_uint_eq(used(1), 2 * MiB);
    ck_assert_int_eq(ncclMemFree(p), ncclInvalidArgument);
    ck_assert_int_eq(ncclMemFree(q), ncclSuccess);
    ck_assert_uint_eq(used(1), 0);
    ck_assert_int_eq(ncclMemFree(NULL), ncclSuccess);
    ck_assert_int_eq(ncclMemAlloc(NULL, 16), ncclInvalidArgument);
    p = (void *)&q;
    ck_assert_int_eq(ncclMemAlloc(&p, 0), ncclSuccess);
    ck_assert_ptr_null(p);
    void *d = NULL;
    ck_assert_int_eq(cudaMalloc(&d, MiB), cudaSuccess);
    ck_assert_int_eq(ncclMemFree(d), ncclInvalidArgument);
    ck_assert_int_eq(cudaFree(d), cudaSuccess);
    ck_assert_uint_eq(used(1), 0);
}
END_TEST

/*
 * The first init probes a host-NUMA cuMemCreate (NCCL_DEBUG=INFO tells) and
 * device memory does not move; NCCL_CUMEM_HOST_ENABLE=0 turns the probe off.
 */
static void probe_kid(FILE *in, FILE *out, const char *const *env)
{
    (void)in;
    (void)env;
    ncclUniqueId id;
    ncclComm_t c = NULL;
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r == ncclSuccess)
        r = ncclCommInitRank(&c, 1, id, 0);
    if (r == ncclSuccess)
        r = ncclCommDestroy(c);
    fprintf(out, "rc=%d\n", (int)r);
}

START_TEST(test_host_numa_probe)
{
    char log[PATH_MAX + 16], env_log[PATH_MAX + 64], line[256];
    snprintf(log, sizeof log, "%s/log-nohost", g_tmp);
    snprintf(env_log, sizeof env_log, "NCCL_DEBUG_FILE=%s", log);
    const char *env[] = {"NCCL_CUMEM_HOST_ENABLE=0", "NCCL_DEBUG=INFO", env_log, NULL};
    struct kid k = kid_start(probe_kid, env);
    kid_hear(&k, line, sizeof line);
    ck_assert_int_eq(field(line, "rc"), ncclSuccess);
    ck_assert_int_eq(kid_end(&k), 0);
    ck_assert(file_contains(log, "Init COMPLETE"));
    ck_assert(!file_contains(log, "host NUMA"));

    /* Now in this process, which has not used NCCL yet. */
    snprintf(log, sizeof log, "%s/log.%%p", g_tmp);
    setenv("NCCL_DEBUG", "INFO", 1);
    setenv("NCCL_DEBUG_FILE", log, 1);
    size_t before = used(0);
    ncclUniqueId id;
    ncclComm_t c;
    ck_assert_int_eq(ncclGetUniqueId(&id), ncclSuccess);
    ck_assert_int_eq(ncclCommInitRank(&c, 1, id, 0), ncclSuccess);
    ck_assert_uint_eq(used(0), before);
    snprintf(log, sizeof log, "%s/log.%d", g_tmp, (int)getpid());
    ck_assert(file_contains(log, "probe of 2097152 bytes on host NUMA node 0: enabled"));
    ck_assert(file_contains(log, "NCCL INFO"));
    ck_assert_int_eq(ncclCommDestroy(c), ncclSuccess);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Groups, configs, non-blocking communicators                                */
/* ------------------------------------------------------------------------ */

/* One thread, two ranks: only possible because the group defers the rendezvous. */
START_TEST(test_group_init_one_thread)
{
    ncclUniqueId id;
    ck_assert_int_eq(ncclGetUniqueId(&id), ncclSuccess);
    ncclComm_t c[2];
    ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
    ck_assert_int_eq(ncclGroupStart(), ncclSuccess); /* nesting */
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(cudaSetDevice(i), cudaSuccess);
        ck_assert_int_eq(ncclCommInitRank(&c[i], 2, id, i), ncclSuccess);
        ck_assert_ptr_nonnull(c[i]);
    }
    ck_assert_int_eq(ncclGroupEnd(), ncclSuccess); /* inner: nothing happens yet */
    int n = 0;
    ncclResult_t async = ncclSuccess;
    ck_assert_int_eq(ncclCommCount(c[0], &n), ncclInProgress);
    ck_assert_int_eq(ncclCommGetAsyncError(c[0], &async), ncclSuccess);
    ck_assert_int_eq(async, ncclInProgress);
    /* Operations may be queued on it inside the group. */
    ck_assert_int_eq(ncclAllReduce((void *)1, (void *)1, 4, ncclFloat, ncclSum, c[0], NULL),
                     ncclSuccess);
    ck_assert_int_eq(ncclGroupEnd(), ncclSuccess);
    for (int i = 0; i < 2; i++) {
        int r = -1, dev = -1;
        ck_assert_int_eq(ncclCommCount(c[i], &n), ncclSuccess);
        ck_assert_int_eq(ncclCommUserRank(c[i], &r), ncclSuccess);
        ck_assert_int_eq(ncclCommCuDevice(c[i], &dev), ncclSuccess);
        ck_assert_int_eq(n, 2);
        ck_assert_int_eq(r, i);
        ck_assert_int_eq(dev, i);
        ck_assert_int_eq(ncclCommGetAsyncError(c[i], &async), ncclSuccess);
        ck_assert_int_eq(async, ncclSuccess);
        ck_assert_uint_eq(used(i), PEER_CUMEM);
    }
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(ncclCommDestroy(c[i]), ncclSuccess);
}
END_TEST

static void *end_group(void *arg)
{
    *(ncclResult_t *)arg = ncclGroupEnd();
    return NULL;
}

START_TEST(test_group_errors)
{
    ck_assert_int_eq(ncclGroupEnd(), ncclInvalidUsage);
    ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
    /* Groups are per thread: another thread is not in this one. */
    pthread_t t;
    ncclResult_t other = ncclSuccess;
    ck_assert_int_eq(pthread_create(&t, NULL, end_group, &other), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(other, ncclInvalidUsage);
    ck_assert_int_eq(ncclGroupEnd(), ncclSuccess);
    ck_assert_int_eq(ncclGroupEnd(), ncclInvalidUsage);

    /* An error inside a group is returned at once and again by the end. */
    ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
    ck_assert_int_eq(ncclAllReduce((void *)1, (void *)1, 1, ncclFloat, ncclSum, NULL, NULL),
                     ncclInvalidArgument);
    ck_assert_int_eq(ncclGroupEnd(), ncclInvalidArgument);
    ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
    ck_assert_int_eq(ncclGroupEnd(), ncclSuccess);

    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
    ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
    ck_assert_int_eq(ncclGroupSimulateEnd(&sim), ncclSuccess);
    ck_assert(sim.estimatedTime == 0.0f);
    ck_assert_int_eq(ncclGroupSimulateEnd(&sim), ncclInvalidUsage);
    ck_assert_int_eq(ncclGroupSimulateEnd(NULL), ncclInvalidArgument);
}
END_TEST

START_TEST(test_configs_and_nonblocking)
{
    ncclUniqueId id, ids[2];
    ncclComm_t c;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    ck_assert_int_eq(ncclGetUniqueId(&id), ncclSuccess);
    ck_assert_int_eq(ncclCommInitRankConfig(&c, 1, id, 0, NULL), ncclSuccess);
    ck_assert_int_eq(ncclCommDestroy(c), ncclSuccess);
    ck_assert_int_eq(ncclGetUniqueId(&id), ncclSuccess);
    ck_assert_int_eq(ncclCommInitRankConfig(&c, 1, id, 0, &cfg), ncclSuccess);
    ck_assert_int_eq(ncclCommDestroy(c), ncclSuccess);
    ncclConfig_t bad = cfg;
    bad.magic = 0;
    ck_assert_int_eq(ncclCommInitRankConfig(&c, 1, id, 0, &bad), ncclInvalidArgument);
    bad = cfg;
    bad.blocking = 7;
    ck_assert_int_eq(ncclCommInitRankConfig(&c, 1, id, 0, &bad), ncclInvalidArgument);
    ck_assert_int_eq(ncclGetUniqueId(&ids[0]), ncclSuccess);
    ck_assert_int_eq(ncclGetUniqueId(&ids[1]), ncclSuccess);
    ck_assert_int_eq(ncclCommInitRankScalable(&c, 1, 0, 0, ids, NULL), ncclInvalidArgument);
    ck_assert_int_eq(ncclCommInitRankScalable(&c, 1, 0, 2, ids, &cfg), ncclSuccess);
    ck_assert_int_eq(ncclCommDestroy(c), ncclSuccess);

    /* Non-blocking: one thread starts both ranks, then polls them to completion. */
    ncclComm_t nb[2];
    cfg.blocking = 0;
    ck_assert_int_eq(ncclGetUniqueId(&id), ncclSuccess);
    ck_assert_int_eq(ncclCommInitRankConfig(&nb[0], 2, id, 0, &cfg), ncclInProgress);
    ncclResult_t r1 = ncclCommInitRankConfig(&nb[1], 2, id, 1, &cfg);
    ck_assert(r1 == ncclInProgress || r1 == ncclSuccess);
    for (int i = 0; i < 2; i++) {
        ncclResult_t async = ncclInProgress;
        for (int spin = 0; spin < 5000 && async == ncclInProgress; spin++) {
            ck_assert_int_eq(ncclCommGetAsyncError(nb[i], &async), ncclSuccess);
            if (async == ncclInProgress)
                usleep(1000);
        }
        ck_assert_int_eq(async, ncclSuccess);
        int r = -1;
        ck_assert_int_eq(ncclCommUserRank(nb[i], &r), ncclSuccess);
        ck_assert_int_eq(r, i);
    }
    ck_assert_uint_eq(used(0), 2 * PEER_CUMEM);
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(ncclCommDestroy(nb[i]), ncclSuccess);

    /* A non-blocking rank nobody joins stays in progress; destroying it withdraws the claim. */
    ck_assert_int_eq(ncclGetUniqueId(&id), ncclSuccess);
    ck_assert_int_eq(ncclCommInitRankConfig(&nb[0], 3, id, 2, &cfg), ncclInProgress);
    ncclResult_t async = ncclSuccess;
    ck_assert_int_eq(ncclCommGetAsyncError(nb[0], &async), ncclSuccess);
    ck_assert_int_eq(async, ncclInProgress);
    ck_assert_int_eq(ncclCommDestroy(nb[0]), ncclSuccess);
    ck_assert_int_eq(ncclCommGetAsyncError(nb[0], &async), ncclInvalidArgument);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Argument checks                                                            */
/* ------------------------------------------------------------------------ */

START_TEST(test_collective_arguments)
{
    ncclComm_t comms[2], gone;
    ck_assert_int_eq(ncclCommInitAll(comms, 2, NULL), ncclSuccess);
    ck_assert_int_eq(ncclCommInitAll(&gone, 1, NULL), ncclSuccess);
    ck_assert_int_eq(ncclCommDestroy(gone), ncclSuccess);
    ncclComm_t c = comms[1];                       /* rank 1 of 2 */
    void *s = (void *)0x1000, *r = (void *)0x2000; /* never touched: no data moves */
    const ncclResult_t OK = ncclSuccess, ARG = ncclInvalidArgument;

    ck_assert_int_eq(ncclAllReduce(s, r, 8, ncclFloat, ncclSum, c, NULL), OK);
    ck_assert_int_eq(ncclAllReduce(s, r, 8, ncclFloat, ncclSum, NULL, NULL), ARG);
    ck_assert_int_eq(ncclAllReduce(s, r, 8, ncclFloat, ncclSum, gone, NULL), ARG);
    ck_assert_int_eq(ncclAllReduce(s, r, 8, ncclNumTypes, ncclSum, c, NULL), ARG);
    ck_assert_int_eq(ncclAllReduce(s, r, 8, (ncclDataType_t)-1, ncclSum, c, NULL), ARG);
    ck_assert_int_eq(ncclAllReduce(s, r, 8, ncclFloat, ncclNumOps, c, NULL), ARG);
    ck_assert_int_eq(ncclAllReduce(NULL, r, 8, ncclFloat, ncclSum, c, NULL), ARG);
    ck_assert_int_eq(ncclAllReduce(s, NULL, 8, ncclFloat, ncclSum, c, NULL), ARG);
    ck_assert_int_eq(ncclAllReduce(NULL, NULL, 0, ncclFloat, ncclSum, c, NULL), OK);
    ck_assert_int_eq(ncclAllReduce(s, r, 8, ncclBfloat16, ncclAvg, c, NULL), OK);

    ck_assert_int_eq(ncclBroadcast(s, r, 8, ncclInt8, 0, c, NULL), OK);
    ck_assert_int_eq(ncclBroadcast(NULL, r, 8, ncclInt8, 0, c, NULL), OK); /* not the root */
    ck_assert_int_eq(ncclBroadcast(NULL, r, 8, ncclInt8, 1, c, NULL), ARG);
    ck_assert_int_eq(ncclBroadcast(s, NULL, 8, ncclInt8, 0, c, NULL), ARG);
    ck_assert_int_eq(ncclBroadcast(s, r, 8, ncclInt8, 2, c, NULL), ARG);
    ck_assert_int_eq(ncclBroadcast(s, r, 8, ncclInt8, -1, c, NULL), ARG);
    ck_assert_int_eq(ncclBcast(r, 8, ncclUint64, 1, c, NULL), OK);
    ck_assert_int_eq(ncclBcast(NULL, 8, ncclUint64, 1, c, NULL), ARG);
    ck_assert_int_eq(ncclBcast(r, 8, ncclUint64, 5, c, NULL), ARG);

    ck_assert_int_eq(ncclReduce(s, NULL, 8, ncclDouble, ncclMax, 0, c, NULL), OK);
    ck_assert_int_eq(ncclReduce(s, NULL, 8, ncclDouble, ncclMax, 1, c, NULL), ARG);
    ck_assert_int_eq(ncclReduce(s, r, 8, ncclDouble, (ncclRedOp_t)99, 1, c, NULL), ARG);
    ck_assert_int_eq(ncclReduce(s, r, 8, ncclDouble, ncclMin, 2, c, NULL), ARG);

    ck_assert_int_eq(ncclAllGather(s, r, 8, ncclHalf, c, NULL), OK);
    ck_assert_int_eq(ncclAllGather(s, NULL, 8, ncclHalf, c, NULL), ARG);
    ck_assert_int_eq(ncclReduceScatter(s, r, 8, ncclInt32, ncclProd, c, NULL), OK);
    ck_assert_int_eq(ncclReduceScatter(s, r, 8, ncclInt32, (ncclRedOp_t)-1, c, NULL), ARG);
    ck_assert_int_eq(ncclAlltoAll(s, r, 8, ncclFloat8e4m3, c, NULL), OK);
    ck_assert_int_eq(ncclAlltoAll(NULL, r, 8, ncclFloat8e4m3, c, NULL), ARG);
    ck_assert_int_eq(ncclGather(s, NULL, 8, ncclInt64, 0, c, NULL), OK);
    ck_assert_int_eq(ncclGather(s, NULL, 8, ncclInt64, 1, c, NULL), ARG);
    ck_assert_int_eq(ncclGather(s, r, 8, ncclInt64, 9, c, NULL), ARG);
    ck_assert_int_eq(ncclScatter(NULL, r, 8, ncclUint32, 0, c, NULL), OK);
    ck_assert_int_eq(ncclScatter(NULL, r, 8, ncclUint32, 1, c, NULL), ARG);
    ck_assert_int_eq(ncclScatter(s, NULL, 8, ncclUint32, 0, c, NULL), ARG);

    ck_assert_int_eq(ncclGroupStart(), OK);
    ck_assert_int_eq(ncclSend(s, 8, ncclFloat, 0, c, NULL), OK);
    ck_assert_int_eq(ncclRecv(r, 8, ncclFloat, 0, c, NULL), OK);
    ck_assert_int_eq(ncclGroupEnd(), OK);
    ck_assert_int_eq(ncclSend(s, 8, ncclFloat, 2, c, NULL), ARG);
    ck_assert_int_eq(ncclRecv(r, 8, ncclFloat, -1, c, NULL), ARG);
    ck_assert_int_eq(ncclSend(NULL, 8, ncclFloat, 0, c, NULL), ARG);
    ck_assert_int_eq(ncclRecv(NULL, 8, ncclFloat, 0, c, NULL), ARG);
    ck_assert_int_eq(ncclSend(NULL, 0, ncclFloat, 0, c, NULL), OK);
    ck_assert_int_eq(ncclSend(s, 8, ncclFloat, 0, gone, NULL), ARG);

    /* Custom operators: ids from ncclNumOps, per communicator. */
    ncclRedOp_t op1, op2;
    float scalar = 0.5f;
    ck_assert_int_eq(ncclRedOpCreatePreMulSum(&op1, &scalar, ncclFloat, ncclScalarHostImmediate, c),
                     OK);
    ck_assert_int_eq(op1, ncclNumOps);
    ck_assert_int_eq(ncclRedOpCreatePreMulSum(&op2, &scalar, ncclFloat, ncclScalarDevice, c), OK);
    ck_assert_int_eq(op2, ncclNumOps + 1);
    ck_assert_int_eq(ncclAllReduce(s, r, 8, ncclFloat, op1, c, NULL), OK);
    ck_assert_int_eq(ncclAllReduce(s, r, 8, ncclFloat, op1, comms[0], NULL), ARG);
    ck_assert_int_eq(ncclRedOpDestroy(op1, c), OK);
    ck_assert_int_eq(ncclAllReduce(s, r, 8, ncclFloat, op1, c, NULL), ARG);
    ck_assert_int_eq(ncclRedOpDestroy(op1, c), ARG);
    ck_assert_int_eq(ncclRedOpDestroy(ncclSum, c), ARG);
    ck_assert_int_eq(ncclRedOpCreatePreMulSum(&op1, &scalar, ncclNumTypes, ncclScalarDevice, c),
                     ARG);
    ck_assert_int_eq(ncclRedOpCreatePreMulSum(&op1, &scalar, ncclFloat, ncclScalarDevice, NULL),
                     ARG);
    ck_assert_int_eq(ncclRedOpCreatePreMulSum(&op1, &scalar, ncclFloat, ncclScalarDevice, c), OK);
    ck_assert_int_eq(op1, ncclNumOps); /* the lowest free id again */

    /* Registrations and windows are the communicator's. */
    void *h = NULL, *h0 = NULL;
    ck_assert_int_eq(ncclCommRegister(c, s, 4096, &h), OK);
    ck_assert_int_eq(ncclCommRegister(comms[0], s, 4096, &h0), OK);
    ck_assert_ptr_nonnull(h);
    ck_assert_int_eq(ncclCommRegister(c, NULL, 4096, &h), ARG);
    ck_assert_int_eq(ncclCommRegister(c, s, 0, &h), ARG);
    ck_assert_int_eq(ncclCommRegister(c, s, 16, NULL), ARG);
    ck_assert_int_eq(ncclCommDeregister(comms[0], h), ARG);
    ck_assert_int_eq(ncclCommDeregister(c, h), OK);
    ck_assert_int_eq(ncclCommDeregister(c, h), ARG);
    ncclWindow_t w = NULL, w2 = NULL;
    ck_assert_int_eq(ncclCommWindowRegister(c, s, 1 << 20, &w, NCCL_WIN_COLL_SYMMETRIC), OK);
    ck_assert_int_eq(ncclCommWindowRegister(c, s, 1 << 20, &w2, NCCL_WIN_DEFAULT), OK);
    ck_assert_int_eq(ncclCommWindowRegister(c, s, 1 << 20, &w, 0x80), ARG);
    ck_assert_int_eq(ncclCommWindowRegister(c, NULL, 1 << 20, &w, 0), ARG);
    ck_assert_int_eq(ncclCommWindowDeregister(comms[0], w), ARG);
    ck_assert_int_eq(ncclCommWindowDeregister(c, w), OK);
    ck_assert_int_eq(ncclCommWindowDeregister(c, w), ARG);

    /* Finalized, revoked and destroyed communicators. */
    ck_assert_int_eq(ncclCommFinalize(c), OK);
    ck_assert_int_eq(ncclCommFinalize(c), ncclInvalidUsage);
    ck_assert_int_eq(ncclAllReduce(s, r, 8, ncclFloat, ncclSum, c, NULL), ncclInvalidUsage);
    int n = 0;
    ck_assert_int_eq(ncclCommCount(c, &n), OK);
    ck_assert_int_eq(ncclCommCount(c, NULL), ARG);
    ck_assert_int_eq(ncclCommRevoke(comms[0], 1), ARG);
    ck_assert_int_eq(ncclCommRevoke(comms[0], NCCL_REVOKE_DEFAULT), OK);
    ck_assert_int_eq(ncclBcast(r, 8, ncclFloat, 0, comms[0], NULL), ncclInvalidUsage);
    ck_assert_int_eq(ncclCommDestroy(c), OK); /* with a window, a registration, an op left */
    ck_assert_int_eq(ncclCommDestroy(c), ARG);
    ck_assert_int_eq(ncclCommCount(c, &n), ARG);
    ck_assert_int_eq(ncclCommAbort(comms[0]), OK);
    ck_assert_int_eq(ncclCommAbort(comms[0]), ARG);
    ck_assert_int_eq(ncclCommDestroy(NULL), OK);
    ck_assert_int_eq(ncclCommAbort(NULL), OK);
    ncclResult_t async;
    ck_assert_int_eq(ncclCommGetAsyncError(NULL, &async), ARG);
    ck_assert_int_eq(ncclCommGetAsyncError(c, &async), ARG);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Processes and threads                                                      */
/* ------------------------------------------------------------------------ */

static ncclComm_t g_parent_comm;
static void *g_parent_mem;

static void fork_kid(FILE *in, FILE *out, const char *const *env)
{
    (void)in;
    (void)env;
    int n = 0;
    ncclResult_t coll =
        ncclAllReduce((void *)1, (void *)1, 1, ncclFloat, ncclSum, g_parent_comm, NULL);
    ncclResult_t count = ncclCommCount(g_parent_comm, &n);
    ncclResult_t memfree = ncclMemFree(g_parent_mem);
    ncclResult_t destroy = ncclCommDestroy(g_parent_comm);
    ncclUniqueId id;
    ncclComm_t mine = NULL;
    ncclResult_t init = ncclGetUniqueId(&id);
    if (init == ncclSuccess)
        init = ncclCommInitRank(&mine, 1, id, 0);
    if (init == ncclSuccess)
        init = ncclCommDestroy(mine);
    fprintf(out, "coll=%d count=%d memfree=%d destroy=%d init=%d\n", (int)coll, (int)count,
            (int)memfree, (int)destroy, (int)init);
}

/* A forked child cannot use or harm its parent's communicators and memory. */
START_TEST(test_fork_child)
{
    ncclComm_t comms[2];
    ck_assert_int_eq(ncclCommInitAll(comms, 2, NULL), ncclSuccess);
    ck_assert_int_eq(cudaSetDevice(0), cudaSuccess);
    ck_assert_int_eq(ncclMemAlloc(&g_parent_mem, 2 * MiB), ncclSuccess);
    g_parent_comm = comms[0];
    size_t before = used(0);
    char line[256];
    struct kid k = kid_start(fork_kid, NULL);
    kid_hear(&k, line, sizeof line);
    ck_assert_int_eq(kid_end(&k), 0);
    ck_assert_int_eq(field(line, "coll"), ncclInvalidUsage);
    ck_assert_int_eq(field(line, "count"), ncclInvalidUsage);
    ck_assert_int_eq(field(line, "memfree"), ncclInvalidArgument);
    ck_assert_int_eq(field(line, "destroy"), ncclSuccess);
    ck_assert_int_eq(field(line, "init"), ncclSuccess);
    ck_assert_uint_eq(used(0), before);
    int n = 0;
    ck_assert_int_eq(ncclCommCount(comms[0], &n), ncclSuccess);
    ck_assert_int_eq(n, 2);
    ck_assert_int_eq(ncclAllReduce((void *)1, (void *)1, 1, ncclFloat, ncclSum, comms[0], NULL),
                     ncclSuccess);
    ck_assert_int_eq(ncclMemFree(g_parent_mem), ncclSuccess);
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(ncclCommDestroy(comms[i]), ncclSuccess);
    ck_assert_uint_eq(used(0), 0);
}
END_TEST

struct worker {
    int rank;
    ncclComm_t comm;
    ncclResult_t init, destroy;
    int got_rank, got_dev;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    if (cudaSetDevice(w->rank) != cudaSuccess)
        return NULL;
    w->init = ncclCommInitRank(&w->comm, 4, g_id, w->rank);
    if (w->init == ncclSuccess) {
        ncclCommUserRank(w->comm, &w->got_rank);
        ncclCommCuDevice(w->comm, &w->got_dev);
        w->destroy = ncclCommDestroy(w->comm);
    }
    return NULL;
}

/* One rank per thread, all blocking in the rendezvous at once. */
START_TEST(test_threads)
{
    ck_assert_int_eq(ncclGetUniqueId(&g_id), ncclSuccess);
    pthread_t t[4];
    struct worker w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (struct worker){.rank = i, .init = ncclInternalError, .got_rank = -1};
        ck_assert_int_eq(pthread_create(&t[i], NULL, worker_main, &w[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(pthread_join(t[i], NULL), 0);
        ck_assert_int_eq(w[i].init, ncclSuccess);
        ck_assert_int_eq(w[i].destroy, ncclSuccess);
        ck_assert_int_eq(w[i].got_rank, i);
        ck_assert_int_eq(w[i].got_dev, i);
    }
    for (int d = 0; d < 4; d++)
        ck_assert_uint_eq(used(d), 0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Directories                                                                */
/* ------------------------------------------------------------------------ */

/* Without CUTRACE_FAKE_NCCL_DIR the rendezvous lives next to the driver's state file. */
START_TEST(test_default_dir)
{
    unsetenv("CUTRACE_FAKE_NCCL_DIR");
    ncclUniqueId id;
    ncclComm_t c;
    ck_assert_int_eq(ncclGetUniqueId(&id), ncclSuccess);
    ck_assert_int_eq(ncclCommInitRank(&c, 1, id, 0), ncclSuccess);
    ck_assert_int_eq(count_entries(g_tmp, "nccl-", NULL, 0), 1);
    ck_assert(!exists(g_ncdir));
    ck_assert_int_eq(ncclCommDestroy(c), ncclSuccess);
}
END_TEST

static unsigned long long start_time(int pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')') + 2;
    for (int field_no = 3; field_no < 22; field_no++)
        p = strchr(p, ' ') + 1;
    return strtoull(p, NULL, 10);
}

static void plant(const char *name, int pid, unsigned long long start)
{
    char dir[PATH_MAX + 64], file[PATH_MAX + 80];
    snprintf(dir, sizeof dir, "%s/%s", g_ncdir, name);
    mkdir(g_ncdir, 0700);
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    snprintf(file, sizeof file, "%s/rank-0", dir);
    FILE *f = fopen(file, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "cutrace-nccl 1 pid=%d start=%llu nonce=1 nranks=2 dev=0 color=0 key=0\n", pid,
            start);
    fclose(f);
}

/* The first ncclGetUniqueId of a process removes rendezvous directories nobody alive uses. */
START_TEST(test_stale_directories_collected)
{
    pid_t dead = fork();
    ck_assert_int_ge(dead, 0);
    if (dead == 0)
        _exit(0);
    ck_assert_int_eq(waitpid(dead, NULL, 0), dead);
    plant("nccl-dead", (int)dead, 1);
    plant("nccl-live", (int)getpid(), start_time((int)getpid()));
    plant("nccl-reused", (int)getpid(), 1); /* our pid, another start time: a former process */
    ncclUniqueId id;
    ck_assert_int_eq(ncclGetUniqueId(&id), ncclSuccess);
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/nccl-dead", g_ncdir);
    ck_assert(!exists(path));
    snprintf(path, sizeof path, "%s/nccl-reused", g_ncdir);
    ck_assert(!exists(path));
    snprintf(path, sizeof path, "%s/nccl-live", g_ncdir);
    ck_assert(exists(path));
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Library structure                                                          */
/* ------------------------------------------------------------------------ */

/* The whole API: each must exist as weak ncclX and strong pncclX at one address. */
static const char *const g_api[] = {
    "GetVersion",
    "GetErrorString",
    "GetLastError",
    "GetUniqueId",
    "CommInitRank",
    "CommInitRankConfig",
    "CommInitRankScalable",
    "CommInitAll",
    "CommSplit",
    "CommShrink",
    "CommFinalize",
    "CommDestroy",
    "CommAbort",
    "CommRevoke",
    "CommGetAsyncError",
    "CommCount",
    "CommCuDevice",
    "CommUserRank",
    "CommRegister",
    "CommDeregister",
    "CommWindowRegister",
    "CommWindowDeregister",
    "RedOpCreatePreMulSum",
    "RedOpDestroy",
    "AllReduce",
    "Broadcast",
    "Bcast",
    "Reduce",
    "AllGather",
    "ReduceScatter",
    "AlltoAll",
    "Gather",
    "Scatter",
    "Send",
    "Recv",
    "GroupStart",
    "GroupEnd",
    "GroupSimulateEnd",
    "MemAlloc",
    "MemFree",
    "ResetDebugInit",
};

START_TEST(test_library_structure)
{
    char cmd[PATH_MAX + 64], line[512];
    snprintf(cmd, sizeof cmd, "readelf -d %s/libnccl.so.2 2>/dev/null", g_dir);
    FILE *f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    int soname = 0, lines = 0;
    while (fgets(line, sizeof line, f)) {
        lines++;
        if (strstr(line, "(NEEDED)"))
            ck_assert_msg(!strstr(line, "libcuda"), "libnccl links %s", line);
        if (strstr(line, "(SONAME)") && strstr(line, "[libnccl.so.2]"))
            soname = 1;
    }
    int st = pclose(f);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 127) {
        fprintf(stderr, "test_library_structure: binutils not found, skipping\n");
        return;
    }
    ck_assert_int_gt(lines, 0);
    ck_assert(soname);

    /* nm -D: defined symbols are nccl* (W) and pnccl* (T) only, pairwise at one address. */
    struct sym {
        char name[64];
        char type;
        unsigned long long addr;
    } syms[256];
    int nsyms = 0;
    snprintf(cmd, sizeof cmd, "nm -D --defined-only %s/libnccl.so.2", g_dir);
    f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    while (fgets(line, sizeof line, f) && nsyms < 256) {
        struct sym *s = &syms[nsyms];
        if (sscanf(line, "%llx %c %63s", &s->addr, &s->type, s->name) != 3)
            continue;
        ck_assert_msg(strncmp(s->name, "nccl", 4) == 0 || strncmp(s->name, "pnccl", 5) == 0,
                      "exports %s", s->name);
        ck_assert_msg(s->name[0] == 'p' ? s->type == 'T' : s->type == 'W', "%s is %c", s->name,
                      s->type);
        nsyms++;
    }
    pclose(f);
    ck_assert_int_eq(nsyms, 2 * (int)(sizeof g_api / sizeof g_api[0]));
    for (size_t i = 0; i < sizeof g_api / sizeof g_api[0]; i++) {
        char weak[64], strong[64];
        snprintf(weak, sizeof weak, "nccl%s", g_api[i]);
        snprintf(strong, sizeof strong, "pnccl%s", g_api[i]);
        const struct sym *w = NULL, *s = NULL;
        for (int k = 0; k < nsyms; k++) {
            if (strcmp(syms[k].name, weak) == 0)
                w = &syms[k];
            if (strcmp(syms[k].name, strong) == 0)
                s = &syms[k];
        }
        ck_assert_msg(w && s, "missing %s or %s", weak, strong);
        ck_assert_msg(w->addr == s->addr, "%s is not an alias of %s", weak, strong);
    }

    /* No reference to the CUDA runtime or driver API by name. */
    snprintf(cmd, sizeof cmd, "nm -D --undefined-only %s/libnccl.so.2", g_dir);
    f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    while (fgets(line, sizeof line, f)) {
        char type, name[128];
        if (sscanf(line, " %c %127s", &type, name) == 2)
            ck_assert_msg(strncmp(name, "cu", 2) != 0, "libnccl references %s", name);
    }
    pclose(f);

    /* No symbol versions (objdump -T shows Base), like the real one. */
    snprintf(cmd, sizeof cmd, "objdump -T %s/libnccl.so.2", g_dir);
    f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    int seen = 0;
    while (fgets(line, sizeof line, f)) {
        if (!strstr(line, "ncclAllReduce"))
            continue;
        seen++;
        ck_assert_msg(strstr(line, "Base") != NULL, "versioned: %s", line);
    }
    pclose(f);
    ck_assert_int_eq(seen, 2);
}
END_TEST

/* Runs this binary again with --child mode, extra environment, and returns its output. */
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

/*
 * LD_DEBUG=symbols logs every lookup, dlsym's included: the only driver symbol
 * NCCL looks up by name is cuGetProcAddress_v2; the rest comes through it.
 */
START_TEST(test_driver_through_get_proc_address)
{
    char dbg[PATH_MAX + 64], out[256];
    snprintf(dbg, sizeof dbg, "LD_DEBUG_OUTPUT=%s/ld", g_tmp);
    rerun("nccl-only", (const char *[]){"LD_DEBUG=symbols", dbg, NULL}, out, sizeof out);
    ck_assert_int_eq(field(out, "ok"), 1);
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
    ck_assert_msg(others == 0, "NCCL looked up %s by name", other);
}
END_TEST

/* Without a driver: the version and ids work, an init is ncclUnhandledCudaError, as the real one.
 */
START_TEST(test_missing_driver)
{
    char lib[PATH_MAX + 64], target[PATH_MAX + 64], env[PATH_MAX + 32], out[1024];
    const char *libs[] = {"libnccl.so.2", "libcudart.so.12"};
    for (int i = 0; i < 2; i++) {
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
    ck_assert_int_eq(field(out, "version"), NCCL_VERSION_CODE);
    ck_assert_int_eq(field(out, "uid"), ncclSuccess);
    ck_assert_int_eq(field(out, "init"), ncclUnhandledCudaError);
    ck_assert_int_eq(field(out, "null"), 1);
    ck_assert_int_eq(field(out, "memalloc"), ncclUnhandledCudaError);
    ck_assert_int_eq(field(out, "initall"), ncclUnhandledCudaError);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Child modes and main                                                       */
/* ------------------------------------------------------------------------ */

static int child_main(const char *mode)
{
    if (strcmp(mode, "nccl-only") == 0) {
        ncclUniqueId id;
        ncclComm_t c = NULL;
        void *p = NULL;
        int ok = ncclGetUniqueId(&id) == ncclSuccess &&
                 ncclCommInitRank(&c, 1, id, 0) == ncclSuccess &&
                 ncclMemAlloc(&p, MiB) == ncclSuccess && ncclMemFree(p) == ncclSuccess &&
                 ncclCommDestroy(c) == ncclSuccess;
        printf("ok=%d\n", ok);
        return 0;
    }
    if (strcmp(mode, "nodriver") == 0) {
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        int v = 0;
        ncclGetVersion(&v);
        ncclUniqueId id;
        ncclComm_t c = (ncclComm_t)&id, all[2];
        void *p = NULL;
        int uid = ncclGetUniqueId(&id);
        int init = ncclCommInitRank(&c, 1, id, 0);
        int mem = ncclMemAlloc(&p, 16);
        int initall = ncclCommInitAll(all, 2, NULL);
        printf("driver_found=%d version=%d uid=%d init=%d null=%d memalloc=%d initall=%d\n",
               h != NULL, v, uid, init, c == NULL, mem, initall);
        return 0;
    }
    return 2;
}

static Suite *nccl_suite(void)
{
    Suite *s = suite_create("fake_nccl");
    TCase *tc = tcase_create("all");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_version_and_ids);
    tcase_add_test(tc, test_four_processes);
    tcase_add_test(tc, test_bad_rank_creates_nothing);
    tcase_add_test(tc, test_rank_taken_twice);
    tcase_add_test(tc, test_dead_claim_replaced);
    tcase_add_test(tc, test_timeout);
    tcase_add_test(tc, test_split_processes);
    tcase_add_test(tc, test_split_in_group);
    tcase_add_test(tc, test_shrink);
    tcase_add_test(tc, test_buffers_cumem);
    tcase_add_test(tc, test_out_of_memory);
    tcase_add_test(tc, test_buffers_legacy);
    tcase_add_test(tc, test_memalloc);
    tcase_add_test(tc, test_host_numa_probe);
    tcase_add_test(tc, test_group_init_one_thread);
    tcase_add_test(tc, test_group_errors);
    tcase_add_test(tc, test_configs_and_nonblocking);
    tcase_add_test(tc, test_collective_arguments);
    tcase_add_test(tc, test_fork_child);
    tcase_add_test(tc, test_threads);
    tcase_add_test(tc, test_default_dir);
    tcase_add_test(tc, test_stale_directories_collected);
    tcase_add_test(tc, test_library_structure);
    tcase_add_test(tc, test_driver_through_get_proc_address);
    tcase_add_test(tc, test_missing_driver);
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
    SRunner *sr = srunner_create(nccl_suite());
    /* Each test needs a process of its own: the fakes configure themselves once. */
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
