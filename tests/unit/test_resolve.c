/*
 * test_resolve.c - finding a function in an already-loaded library of a
 * family (resolve.c), and doing it while the program loads libraries.
 *
 * The families are told by file name, so copies of the C library's own
 * small libraries under family names stand in for libcuda: a copy is a new
 * file, hence a new object for the loader, loaded and unloaded for real.
 */
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../preload/core/resolve.h"
#include "suites.h"
#include "testutil.h"

/* The file that defines `fn` (a library the unit tests link). */
static const char *file_of(void *fn)
{
    Dl_info info;
    ck_assert(dladdr(fn, &info) && info.dli_fname);
    return info.dli_fname;
}

static char *copy_to(const char *src, const char *dir, const char *name)
{
    char *dst = tu_empty_file(dir, name);
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    ck_assert(in && out);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        ck_assert_uint_eq(fwrite(buf, 1, n, out), n);
    fclose(in);
    ck_assert_int_eq(fclose(out), 0);
    return dst;
}

static void remove_all(char *dir, char **files, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unlink(files[i]);
        free(files[i]);
    }
    rmdir(dir);
    free(dir);
}

static const char *libm_path(void)
{
    double (*volatile fn)(double) = cos; /* the real function, not a builtin */
    return file_of((void *)fn);
}

/* zlib: Debian's "required" priority, so on every machine that builds this. */
static const char *libz_path(void)
{
    void *h = dlopen("libz.so.1", RTLD_NOW);
    ck_assert_msg(h != NULL, "libz.so.1: %s", dlerror());
    return file_of(dlsym(h, "zlibVersion")); /* libz stays loaded: the path stays valid */
}

START_TEST(test_finds_the_function_in_the_familys_loaded_library)
{
    ct_dlsym_init();
    char *dir = tu_tmpdir();
    char *as_cuda = copy_to(libm_path(), dir, "libcuda.so.1");
    ck_assert_ptr_null(ct_resolve_loaded(CT_LIB_CUDA, "cos")); /* not loaded yet: never loads */
    void *h = dlopen(as_cuda, RTLD_NOW | RTLD_LOCAL);
    ck_assert_ptr_nonnull(h);
    void *want = dlsym(h, "cos");
    ck_assert_ptr_nonnull(want);
    ck_assert_ptr_eq(ct_resolve_loaded(CT_LIB_CUDA, "cos"), want);
    double (*volatile programs_cos)(double) = cos;
    ck_assert_ptr_ne(want, (void *)programs_cos); /* the copy's, not the program's libm */
    ck_assert_ptr_null(ct_resolve_loaded(CT_LIB_CUDA, "cutrace_no_such_function"));
    ck_assert_ptr_null(ct_resolve_loaded(CT_LIB_NCCL, "cos")); /* another family */
    dlclose(h);
    ck_assert_ptr_null(ct_resolve_loaded(CT_LIB_CUDA, "cos"));
    remove_all(dir, &as_cuda, 1);
}
END_TEST

START_TEST(test_a_family_object_without_the_function_is_passed_over)
{
    ct_dlsym_init();
    char *dir = tu_tmpdir();
    char *first = copy_to(libz_path(), dir, "libcuda.so.1");
    char *second = copy_to(libm_path(), dir, "libcuda.so.2");
    void *h1 = dlopen(first, RTLD_NOW | RTLD_LOCAL), *h2 = dlopen(second, RTLD_NOW | RTLD_LOCAL);
    ck_assert(h1 && h2);
    ck_assert_ptr_eq(ct_resolve_loaded(CT_LIB_CUDA, "cos"), dlsym(h2, "cos"));
    ck_assert_ptr_eq(ct_resolve_loaded(CT_LIB_CUDA, "zlibVersion"), dlsym(h1, "zlibVersion"));
    dlclose(h2);
    dlclose(h1);
    remove_all(dir, (char *[]){first, second}, 2);
}
END_TEST

struct loader {
    const char *path;
    volatile int stop;
};

static void *load_and_unload(void *arg)
{
    struct loader *l = arg;
    while (!__atomic_load_n(&l->stop, __ATOMIC_ACQUIRE)) {
        void *h = dlopen(l->path, RTLD_NOW | RTLD_LOCAL);
        ck_assert_ptr_nonnull(h);
        dlclose(h);
    }
    return NULL;
}

/*
 * The writer thread resolves driver functions while the program's threads
 * dlopen (a spawned Python importing its extension modules). Calling the
 * loader from inside dl_iterate_phdr's callback inverted glibc's two loader
 * locks against such a dlopen and hung both threads forever; Check's
 * timeout turns a hang into a failure.
 */
START_TEST(test_resolving_while_the_program_loads_libraries_never_hangs)
{
    ct_dlsym_init();
    char *dir = tu_tmpdir();
    char *as_cuda = copy_to(libm_path(), dir, "libcuda.so.1");
    char *other = copy_to(libm_path(), dir, "libother.so");
    void *h = dlopen(as_cuda, RTLD_NOW | RTLD_LOCAL);
    ck_assert_ptr_nonnull(h);
    void *want = dlsym(h, "cos");
    struct loader l = {.path = other};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, load_and_unload, &l), 0);
    for (int i = 0; i < 20000; i++)
        ck_assert_ptr_eq(ct_resolve_loaded(CT_LIB_CUDA, "cos"), want);
    __atomic_store_n(&l.stop, 1, __ATOMIC_RELEASE);
    pthread_join(t, NULL);
    dlclose(h);
    remove_all(dir, (char *[]){as_cuda, other}, 2);
}
END_TEST

Suite *resolve_suite(void)
{
    Suite *s = suite_create("resolve");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 20);
    tcase_add_test(tc, test_finds_the_function_in_the_familys_loaded_library);
    tcase_add_test(tc, test_a_family_object_without_the_function_is_passed_over);
    tcase_add_test(tc, test_resolving_while_the_program_loads_libraries_never_hangs);
    suite_add_tcase(s, tc);
    return s;
}
