/*
 * measure.c - time and peak memory of one command, for bench/analyzer.sh
 * (GNU time is not always installed).
 *
 *   measure [-t SECONDS] OUTFILE COMMAND [ARGS...]
 *
 * Runs COMMAND, waits for it with wait4(2) and writes one line to OUTFILE:
 * "<wall seconds> <CPU seconds> <max RSS in KiB> <status>" (CPU: user +
 * system, what a shared machine's other processes do not inflate), status
 * being the command's
 * exit status, 128 + N when signal N ended it, or "timeout" when it ran past
 * -t SECONDS (it is then killed). Exits 0 when the line was written.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t timed_out;

static void on_alarm(int sig)
{
    (void)sig;
    timed_out = 1;
}

int main(int argc, char **argv)
{
    unsigned limit = 0;
    int c;
    while ((c = getopt(argc, argv, "+t:")) != -1) {
        if (c != 't') {
            fputs("usage: measure [-t SECONDS] OUTFILE COMMAND [ARGS...]\n", stderr);
            return 2;
        }
        limit = (unsigned)strtoul(optarg, NULL, 10);
    }
    if (argc - optind < 2) {
        fputs("usage: measure [-t SECONDS] OUTFILE COMMAND [ARGS...]\n", stderr);
        return 2;
    }
    const char *out = argv[optind];
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid_t pid = fork();
    if (pid < 0) {
        perror("measure: fork");
        return 1;
    }
    if (pid == 0) {
        execvp(argv[optind + 1], argv + optind + 1);
        fprintf(stderr, "measure: %s: %s\n", argv[optind + 1], strerror(errno));
        _exit(127);
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm; /* no SA_RESTART: the alarm interrupts wait4 */
    sigaction(SIGALRM, &sa, NULL);
    if (limit)
        alarm(limit);
    int status;
    struct rusage ru;
    while (wait4(pid, &status, 0, &ru) < 0) {
        if (errno != EINTR) {
            perror("measure: wait4");
            return 1;
        }
        if (timed_out)
            kill(pid, SIGKILL);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    FILE *f = fopen(out, "w");
    if (!f) {
        fprintf(stderr, "measure: %s: %s\n", out, strerror(errno));
        return 1;
    }
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    double cpu = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                 (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
    if (timed_out)
        fprintf(f, "%.3f %.3f %ld timeout\n", secs, cpu, ru.ru_maxrss);
    else
        fprintf(f, "%.3f %.3f %ld %d\n", secs, cpu, ru.ru_maxrss,
                WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    return fclose(f) == 0 ? 0 : 1;
}
