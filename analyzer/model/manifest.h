/*
 * manifest.h - the run manifest: `manifest.json` in the directory of one
 * run of `cutrace run`, beside its *.db traces (docs/cli.md, "The run
 * manifest"). It says what the user launched, which no trace may hold: a
 * launcher that never touches CUDA leaves no trace, yet its flags
 * (--mem-fraction-static, --tp) hold for every process of the run.
 *
 * One JSON object, written by `cutrace run` when the command starts and
 * written again when it ends (each time a temporary file renamed over the
 * old one, mode 0600): a manifest without an end is a run still going, or
 * one killed together with cutrace, and is valid. Keys (unknown keys are
 * ignored, so a format may gain keys; a newer `format` is refused):
 *   format           MANIFEST_FORMAT
 *   cutrace_version  the cutrace that ran it
 *   argv             the launched command, redacted (cutrace/redact.h)
 *   env              the variables a trace records (cutrace/envcap.h), as the
 *                    command got them, redacted
 *   host, pid        where it ran, the launched process's pid
 *   start_wall_ns    when it started (CLOCK_REALTIME, ns)
 *   end_wall_ns      when it ended; with exactly one of
 *   exit_status      its exit status (0-255), or
 *   signal           the signal that killed it
 *
 * Both sides live here, so the format exists once; the parser takes the
 * text, so that a packed run (which keeps the text inside its file) is read
 * the same way as a directory. Parsing uses SQLite's JSON functions on an
 * in-memory connection; anything malformed is one line naming the file.
 */
#ifndef CUTRACE_ANALYZER_MANIFEST_H
#define CUTRACE_ANALYZER_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MANIFEST_NAME   "manifest.json"
#define MANIFEST_FORMAT 1
/* More is not a manifest: a command line and a few hundred variables are kilobytes. */
#define MANIFEST_MAX_BYTES (16u << 20)

struct manifest_env {
    char *name, *value;
};

struct run_manifest {
    int64_t format;
    char *cutrace_version;
    char **argv; /* argc >= 1 */
    size_t argc;
    char *cmdline; /* argv as one shell-quoted line, as process.cmdline is */
    struct manifest_env *env;
    size_t nenv;
    char *host;
    int64_t pid;
    int64_t start_wall_ns;
    bool ended; /* the end was recorded: end_wall_ns and one of the two below */
    int64_t end_wall_ns;
    bool has_exit_status;
    int exit_status;
    bool has_signal;
    int signal;
    char *text; /* the text it was parsed from (NUL-terminated), text_len bytes */
    size_t text_len;
};

/*
 * Parses a manifest's text; `name` (the file, or where the text came from)
 * is what an error names. Returns 0, or -1 after printing
 * "cutrace: NAME: invalid run manifest: <why>" with *out left empty.
 */
int manifest_parse(const char *text, size_t len, const char *name, struct run_manifest *out);
void manifest_free(struct run_manifest *m);

/*
 * The manifest of the run at `path`: DIR/manifest.json for a directory, the
 * one beside a trace file (*.db). Returns 1 with *out filled, 0 when there
 * is none (traces of a bare LD_PRELOAD, any other file), or -1 after the
 * one-line error of a manifest that cannot be read or parsed.
 */
int manifest_find(const char *path, struct run_manifest *out);

/*
 * Writes m (text, cmdline and format ignored) as dir/manifest.json through
 * a temporary file renamed over it, mode 0600. Returns 0, or -1 with errno.
 */
int manifest_write(const char *dir, const struct run_manifest *m);

/* Whether the process host/pid is the command the manifest launched. */
bool manifest_launched(const struct run_manifest *m, const char *host, int64_t pid);

/* How the run ended, in words: "exit 3", "killed by SIGKILL" (signal 9),
 * or "running or killed" without an end. Returns buf. */
char *manifest_ending(const struct run_manifest *m, char *buf, size_t size);

#endif
