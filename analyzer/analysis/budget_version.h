/*
 * budget_version.h - a server's release number as --server-version takes
 * it, for the replays that differ by release (budget_detect.c for SGLang's
 * code path and F rule, budget_vllm.c for vLLM's): one parser, so that
 * "0.5.16" means the same to every one of them.
 */
#ifndef CUTRACE_ANALYZER_BUDGET_VERSION_H
#define CUTRACE_ANALYZER_BUDGET_VERSION_H

#include <stdbool.h>

/* A version as --server-version takes it: "0.5.16", "v0.5.16", "0.5.16rc1",
 * "0.5.16.post2" (numbers separated by dots, up to 4, a suffix ignored). */
bool budget_parse_server_version(const char *text, int parts[4]);
/* <0, 0, >0 as a is older than, the same as, newer than b. */
int budget_version_compare(const int a[4], const int b[4]);
/* Whether text is a version at or after major.minor (false when not one). */
bool budget_version_at_least(const char *text, int major, int minor);

#endif
