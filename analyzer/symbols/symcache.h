/*
 * symcache.h - the names the analyzer gave a trace's native frames, kept
 * beside the trace and never in it (reports do not write into the traces
 * they read): DIR/<base>.db's cache is DIR/<base>.symbols, a small SQLite
 * file with the trace's own symbols(ip, symbol) table and a meta(key,
 * value) table whose 'key' says what the names are valid for (docs/stacks.md).
 *
 * A cache is read only when it is a regular file owned by this user and its
 * key matches the one the reader computes (stacks.c: this cutrace's
 * version, the trace's file name, its modules' paths and build ids); any
 * other cache is ignored, and replaced at the next write. Writing is best
 * effort and atomic: a temporary file renamed over the cache, skipped
 * silently when the directory is not writable.
 */
#ifndef CUTRACE_ANALYZER_SYMCACHE_H
#define CUTRACE_ANALYZER_SYMCACHE_H

#include <stddef.h>
#include <stdint.h>

struct symcache_entry {
    uint64_t ip;
    char *symbol;
};

struct symcache {
    struct symcache_entry *entries; /* by ip */
    size_t n;
};

/* DIR/<base>.symbols for DIR/<base>.db (malloc'd). */
char *symcache_path(const char *trace_path);

/* Loads the cache of trace_path when it is valid for key; empty otherwise. */
void symcache_load(struct symcache *c, const char *trace_path, const char *key);
/* The name of ip, or NULL. */
const char *symcache_lookup(const struct symcache *c, uint64_t ip);
void symcache_free(struct symcache *c);

/* Replaces the cache of trace_path with these names (any order, ips may
 * repeat: the first is kept), valid for key. */
void symcache_write(const char *trace_path, const char *key, const struct symcache_entry *entries,
                    size_t n);

#endif
