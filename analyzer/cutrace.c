/*
 * cutrace.c - the `cutrace` command: git-style dispatch to subcommands.
 *
 *   cutrace <command> [options] [args]     run a subcommand
 *   cutrace help [command]                 list commands, or one's help
 *   cutrace <command> --help               the same
 *   cutrace --version
 *
 * To add a subcommand: write analyzer/cmd/NAME.c defining
 * `int cmd_NAME(int argc, char **argv)` (argv[0] is "NAME"; parse options
 * with cli_getopt and support --json on reports), declare it in cli.h, and
 * add one line to the table below. analyzer.mk picks up new files itself.
 */
#include "cli.h"

#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

static const struct cli_command commands[] = {
    {"ls", cmd_ls, "one line per traced process: host, pid, rank, GPUs, how it ended, peak"},
    {"summary", cmd_summary, "calls, memory, peaks and failures per process and GPU"},
    {"collectives", cmd_collectives, "NCCL communicators and calls joined across ranks"},
    {"timeline", cmd_timeline, "per GPU, every process's milestones with live memory by category"},
    {"budget", cmd_budget, "replay the server's KV-cache budget and say what pushed it under"},
    {"diff", cmd_diff, "compare two runs by milestone: memory, allocations, NCCL, budget"},
    {"sites", cmd_sites, "live GPU memory by the call site that allocated it, or as a flame graph"},
    {"report", cmd_report, "one self-contained HTML page: memory charts, budget, call sites"},
    {"export", cmd_export,
     "the run as a Perfetto trace (or Chrome JSON): calls, memory, collectives"},
    {"pack", cmd_pack, "one file holding every process of a run, to share it or query it"},
    {"run", cmd_run, "run a command with the tracer preloaded"},
    {"recover", cmd_recover, "fold the crash buffers of killed processes into their traces"},
};

#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

const struct cli_command *cli_find_command(const char *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

static void print_help(FILE *out)
{
    fputs("usage: cutrace <command> [options] [args]\n"
          "\n"
          "cutrace records every CUDA memory and NCCL call of a process (through\n"
          "libcutrace.so) and reports on the traces offline.\n"
          "\n"
          "commands:\n",
          out);
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(out, "  %-12s %s\n", commands[i].name, commands[i].summary);
    fputs("\n"
          "  cutrace help <command>   options of one command (or: cutrace <command> --help)\n"
          "  cutrace --version        print the version\n"
          "\n"
          "example:\n"
          "  cutrace run -o trace -- python3 -m sglang.launch_server --model-path ...\n"
          "  cutrace summary trace\n",
          out);
}

/* Runs a command's own --help, so help text lives in one place per command. */
static int command_help(const struct cli_command *command)
{
    char name[64], flag[] = "--help";
    snprintf(name, sizeof(name), "%s", command->name);
    char *argv[] = {name, flag, NULL};
    return command->run(2, argv);
}

int main(int argc, char **argv)
{
    /* The CLI is one thread: SQLite's mutexes and memory statistics would
     * otherwise cost a lock per column read and per allocation (4% of the
     * instructions of `timeline` on a bench/genrun run, by callgrind). */
    sqlite3_config(SQLITE_CONFIG_SINGLETHREAD);
    sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
    if (argc < 2) {
        print_help(stderr);
        return CLI_EXIT_USAGE;
    }
    const char *first = argv[1];
    if (strcmp(first, "--version") == 0 || strcmp(first, "-V") == 0 ||
        strcmp(first, "version") == 0) {
        printf("cutrace %s\n", CUTRACE_VERSION);
        return CLI_EXIT_OK;
    }
    if (strcmp(first, "--help") == 0 || strcmp(first, "-h") == 0 || strcmp(first, "help") == 0) {
        if (argc > 2 && strcmp(first, "help") == 0) {
            const struct cli_command *command = cli_find_command(argv[2]);
            if (!command) {
                cli_error(NULL, "'%s' is not a cutrace command (see 'cutrace help')", argv[2]);
                return CLI_EXIT_USAGE;
            }
            return command_help(command);
        }
        print_help(stdout);
        return CLI_EXIT_OK;
    }
    if (first[0] == '-') {
        cli_error(NULL, "unknown option '%s' (see 'cutrace help')", first);
        return CLI_EXIT_USAGE;
    }
    const struct cli_command *command = cli_find_command(first);
    if (!command) {
        cli_error(NULL, "'%s' is not a cutrace command (see 'cutrace help')", first);
        return CLI_EXIT_USAGE;
    }
    return command->run(argc - 1, argv + 1);
}
