/*
 * diff_build.h - inside `cutrace diff`'s analysis: the steps diff_run_all
 * (diff_run.c) takes, one file per idea, and the few helpers they
 * share. Not for reports: they read diff_analysis.h.
 *
 *   diff_milestones.c  each GPU's milestones, the pairing, the alignment, the rows
 *   diff_allocs.c      allocations by phase, the groups that differ
 *   diff_ipc.c         IPC lineage
 *   diff_nccl.c        communicators and collectives
 *   diff_config.c      command lines and environment
 *   diff_filter.c      the pairs the report filters list
 */
#ifndef CUTRACE_ANALYZER_DIFF_BUILD_H
#define CUTRACE_ANALYZER_DIFF_BUILD_H

#include "analysis/diff_analysis.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MIB           (1ll << 20)
#define KIB           (1ll << 10)
#define GIB           (1ll << 30)
#define MAX_WORLD     4096 /* ranks a communicator may claim that are listed as missing */
#define MAX_CMD_WORDS 512

/* ---- shared helpers (diff_run.c) ---- */

void diff_add_note(struct diff *d, char *text);
/* The diff-wide id of a string (NULL as ""), interned. */
uint32_t diff_string_id(struct diff *d, const char *s);
int64_t diff_sat_mul(int64_t a, int64_t b);
int64_t diff_abs64(int64_t v);
int diff_cmp64(int64_t a, int64_t b);
/* Loads the stacks of a side's processes (once); -1 on a bad trace. */
int diff_load_stacks(struct diff *d, int side);

/* Model ids to diff-wide string ids, filled on first use. */
struct diff_id_map {
    uint32_t *apis, *modules;
};

void diff_id_map_init(struct diff_id_map *map, const struct gm_model *m);
uint32_t diff_map_api(struct diff *d, struct diff_id_map *map, const struct gm_model *m,
                      uint32_t api);
uint32_t diff_map_module(struct diff *d, struct diff_id_map *map, const struct gm_model *m,
                         uint32_t module);
void diff_id_map_free(struct diff_id_map *map);

/* A u64 -> u32 map (milestone keys to rows or positions). */
struct diff_keymap {
    uint64_t *keys;
    uint32_t *values; /* value + 1, 0 empty */
    size_t nslots, used;
};
void diff_keymap_put(struct diff_keymap *k, uint64_t key, uint32_t value);
uint32_t diff_keymap_get(const struct diff_keymap *k, uint64_t key); /* GM_NONE: absent */
void diff_keymap_free(struct diff_keymap *k);

/* ---- the steps ---- */

void diff_build_gpus(struct diff *d, struct diff_run *r); /* diff_milestones.c */
void diff_pair_gpus(struct diff *d);
/* Keeps the pairs (and unpaired GPUs) the filters list; CLI_EXIT_USAGE
 * after the one-line usage error when they list nothing. diff_filter.c. */
int diff_filter_pairs(struct diff *d, const struct cli_report_opts *o);
void diff_align_pair(struct diff *d, struct diff_pair *p);
void diff_build_rows(struct diff *d);
void diff_compare_allocations(struct diff *d);           /* diff_allocs.c */
void diff_build_ipc(struct diff *d, struct diff_run *r); /* diff_ipc.c */
bool diff_ipc_equal(const struct diff_ipc *a, const struct diff_ipc *b);
/* "1-3, 5" of the ids (sorted in place); *distinct their count. */
char *diff_ids_text(int64_t *ids, size_t n, size_t *distinct);
int diff_build_comms(struct diff *d, struct diff_run *r); /* diff_nccl.c */
void diff_match_comms(struct diff *d);
void diff_build_cmdlines(struct diff_run *r); /* diff_config.c */
int diff_build_env(struct diff_run *r);
void diff_compare_config(struct diff *d);
void diff_free_words(char **words, size_t n);

#endif
