/*
 * test_unwpipe.c - libunwind's validation pipe as cutrace hands it out
 * (preload/core/unwpipe.h): high, close-on-exec, non-blocking, taken back
 * from libunwind when the program closes one of its numbers, checked before
 * each hand-out, remade when the program closed it, and never on a number
 * the program holds. A static array of this test plays libunwind's;
 * Check forks for every test, so each adopts it afresh.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../preload/core/unwpipe.h"
#include "suites.h"

static int lib_pipe[2] = {-1, -1}; /* "libunwind's" array */
static int other[2] = {-1, -1};

static void set_nofile(rlim_t soft)
{
    struct rlimit rl;
    ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    ck_assert_uint_ge(rl.rlim_max, soft);
    rl.rlim_cur = soft;
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
}

/* The set-up of "libunwind": its first pipe2 into its own data, watched. */
static void adopt(void)
{
    Dl_info info;
    ck_assert(dladdr(lib_pipe, &info) && info.dli_fbase);
    ck_assert(!ct_unwpipe_claims(lib_pipe)); /* nothing before the watch */
    ct_unwpipe_watch(info.dli_fbase);
    ck_assert(ct_unwpipe_claims(lib_pipe));
    ck_assert(!ct_unwpipe_claims(NULL));
    ck_assert_int_eq(ct_unwpipe_give(lib_pipe), 0);
    ck_assert(ct_unwpipe_unwatch());
    ck_assert(ct_unwpipe_ready());
}

static ino_t inode(int fd)
{
    struct stat st;
    ck_assert_int_eq(fstat(fd, &st), 0);
    return st.st_ino;
}

static int lowest_free(void)
{
    int fd = open("/dev/null", O_RDONLY);
    ck_assert_int_ge(fd, 0);
    close(fd);
    return fd;
}

START_TEST(test_the_pipe_is_high_cloexec_and_checked_before_use)
{
    set_nofile(1024);
    int low = lowest_free();
    errno = EBADF; /* what libunwind's failed read left: a hand-out keeps it */
    adopt();
    ck_assert_int_eq(errno, EBADF);
    ck_assert_int_eq(lib_pipe[0], 1022);
    ck_assert_int_eq(lib_pipe[1], 1023);
    ck_assert_int_eq(lowest_free(), low); /* no low number kept */
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(fcntl(lib_pipe[i], F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
        ck_assert_int_eq(fcntl(lib_pipe[i], F_GETFL) & O_NONBLOCK, O_NONBLOCK);
    }
    ck_assert_uint_eq(inode(lib_pipe[0]), inode(lib_pipe[1]));
    /* It works as libunwind uses it: a byte in, a byte out, never blocking. */
    char byte = 7;
    ck_assert_int_eq(write(lib_pipe[1], &byte, 1), 1);
    ck_assert_int_eq(read(lib_pipe[0], &byte, 1), 1);
    ck_assert_int_eq(read(lib_pipe[0], &byte, 1), -1);
    ck_assert_int_eq(errno, EAGAIN);

    /* Closing other numbers leaves it; a range over one of its numbers
     * clears it (the program may be about to take that number). */
    ino_t ino = inode(lib_pipe[0]);
    ct_unwpipe_closing(3, 1021);
    ct_unwpipe_closing(1024, 1024);
    ck_assert_int_eq(lib_pipe[0], 1022);
    ck_assert_int_eq(lib_pipe[1], 1023);
    ct_unwpipe_closing(1023, 1023);
    ck_assert_int_eq(lib_pipe[0], -1);
    ck_assert_int_eq(lib_pipe[1], -1);
    /* Not closed after all: checked, and the same pipe again at the next ask. */
    ck_assert(ct_unwpipe_claims(lib_pipe));
    ck_assert(!ct_unwpipe_claims(other));
    ck_assert_int_eq(ct_unwpipe_give(lib_pipe), 0);
    ck_assert_int_eq(lib_pipe[0], 1022);
    ck_assert_uint_eq(inode(lib_pipe[0]), ino);
}
END_TEST

/* The program closed ours and opened its own files on those numbers. */
START_TEST(test_a_number_the_program_took_is_left_alone)
{
    set_nofile(1024);
    adopt();
    ct_unwpipe_closing(1022, 1023);
    close(1022);
    close(1023);
    int file = open("/dev/null", O_WRONLY);
    ck_assert_int_ge(file, 0);
    ck_assert_int_eq(dup2(file, 1022), 1022);
    ck_assert_int_eq(dup2(file, 1023), 1023);
    ino_t ino = inode(file);
    /* No room above the program's: no pipe, and its files untouched. */
    errno = 0;
    ck_assert_int_eq(ct_unwpipe_give(lib_pipe), -1);
    ck_assert_int_eq(errno, EMFILE);
    ck_assert_int_eq(lib_pipe[0], -1);
    ck_assert_int_eq(lib_pipe[1], -1);
    ck_assert_uint_eq(inode(1022), ino);
    ck_assert_uint_eq(inode(1023), ino);
    ck_assert(!ct_unwpipe_ready());
    /* Once the program lets them go, a new pipe there. */
    close(1022);
    close(1023);
    ck_assert_int_eq(ct_unwpipe_give(lib_pipe), 0);
    ck_assert(ct_unwpipe_ready());
    ck_assert_int_eq(lib_pipe[0], 1022);
    ck_assert_uint_ne(inode(lib_pipe[0]), ino);
    close(file);
}
END_TEST

/* One end closed by the program: the rest of ours is closed, a new one made. */
START_TEST(test_half_a_pipe_is_replaced_whole)
{
    set_nofile(1024);
    adopt();
    ino_t ino = inode(1022);
    ct_unwpipe_closing(1023, 1023);
    close(1023);
    ck_assert_int_eq(ct_unwpipe_give(lib_pipe), 0);
    ck_assert_int_eq(lib_pipe[0], 1022);
    ck_assert_int_eq(lib_pipe[1], 1023);
    ck_assert_uint_ne(inode(lib_pipe[0]), ino);
    ck_assert_uint_eq(inode(lib_pipe[0]), inode(lib_pipe[1]));
}
END_TEST

START_TEST(test_a_tiny_limit_gets_no_pipe_and_opens_nothing)
{
    set_nofile(16);
    int low = lowest_free();
    Dl_info info;
    ck_assert(dladdr(lib_pipe, &info));
    ct_unwpipe_watch(info.dli_fbase);
    ck_assert_int_eq(ct_unwpipe_give(lib_pipe), -1);
    ck_assert(ct_unwpipe_unwatch()); /* adopted all the same: asks go on coming here */
    ck_assert(!ct_unwpipe_ready());  /* ...but libunwind is not to be used */
    ck_assert_int_eq(lib_pipe[0], -1);
    ck_assert_int_eq(lowest_free(), low);
    ck_assert(ct_unwpipe_claims(lib_pipe));
}
END_TEST

Suite *unwpipe_suite(void)
{
    Suite *s = suite_create("unwpipe");
    TCase *tc = tcase_create("unwpipe");
    tcase_add_test(tc, test_the_pipe_is_high_cloexec_and_checked_before_use);
    tcase_add_test(tc, test_a_number_the_program_took_is_left_alone);
    tcase_add_test(tc, test_half_a_pipe_is_replaced_whole);
    tcase_add_test(tc, test_a_tiny_limit_gets_no_pipe_and_opens_nothing);
    suite_add_tcase(s, tc);
    return s;
}
