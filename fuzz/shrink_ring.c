/*
 * shrink_ring.c - makes a small seed for fuzz_ring out of a real ring.
 *
 *   shrink_ring IN.ring OUT.ring SLOTS
 *
 * A ring left by a killed process is megabytes (thousands of slots), which
 * makes every fuzzing run slow and every mutation land in record bytes.
 * This copies its header facts (pid, start times, db_name, boot_id,
 * end_state, writer failure) and its first SLOTS-1 unreleased records into
 * a ring of SLOTS slots, laid out by the tracer's own ring code, so the seed
 * is still a ring as a killed process leaves it, only shorter.
 */
#include "cutrace/ring.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct collected {
    struct ct_record *records;
    size_t count, max;
};

static void collect(const struct ct_record *rec, void *arg)
{
    struct collected *c = arg;
    if (c->count < c->max)
        c->records[c->count++] = *rec;
}

static bool alive(void)
{
    return true;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: shrink_ring IN.ring OUT.ring SLOTS\n");
        return 2;
    }
    uint64_t slots = strtoull(argv[3], NULL, 10);
    if (slots < 2 || (slots & (slots - 1)) != 0) {
        fprintf(stderr, "shrink_ring: SLOTS must be a power of two >= 2\n");
        return 2;
    }
    int fd = open(argv[1], O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_size < CT_RING_HEADER_BYTES) {
        perror(argv[1]);
        return 1;
    }
    void *in = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    struct ct_ring src;
    if (in == MAP_FAILED || !ct_ring_attach(&src, in, (size_t)st.st_size)) {
        fprintf(stderr, "shrink_ring: %s: not a ring this build reads\n", argv[1]);
        return 1;
    }
    const struct ct_ring_header *h = src.hdr;

    struct collected c = {calloc(slots, sizeof(struct ct_record)), 0, slots - 1};
    size_t bytes = ct_ring_bytes(slots);
    void *out = calloc(1, bytes);
    if (!c.records || !out) {
        fprintf(stderr, "shrink_ring: out of memory\n");
        return 1;
    }
    ct_ring_scan(&src, collect, &c);

    char db_name[sizeof(h->db_name)], boot_id[sizeof(h->boot_id)];
    snprintf(db_name, sizeof(db_name), "%.*s", (int)sizeof(h->db_name) - 1, h->db_name);
    snprintf(boot_id, sizeof(boot_id), "%.*s", (int)sizeof(h->boot_id) - 1, h->boot_id);
    struct ct_ring_owner owner = {h->pid, h->start_wall_ns, h->start_mono_ns, db_name, boot_id};
    struct ct_ring dst;
    ct_ring_format(out, slots, &owner);
    if (!ct_ring_attach(&dst, out, bytes))
        return 1;
    for (size_t i = 0; i < c.count; i++)
        ct_ring_push(&dst, &c.records[i], alive);
    char text[sizeof(h->writer_error)];
    snprintf(text, sizeof(h->end_state), "%.*s", (int)sizeof(h->end_state) - 1, h->end_state);
    ct_ring_note_end(&dst, text);
    if (h->writer_error[0]) {
        snprintf(text, sizeof(text), "%.*s", (int)sizeof(text) - 1, h->writer_error);
        ct_ring_note_writer_failure(&dst, h->writer_stopped_after, text);
    }

    FILE *f = fopen(argv[2], "wb");
    if (!f || fwrite(out, 1, bytes, f) != bytes || fclose(f) != 0) {
        perror(argv[2]);
        return 1;
    }
    printf("shrink_ring: %s: %zu records in %llu slots\n", argv[2], c.count,
           (unsigned long long)slots);
    free(out);
    free(c.records);
    munmap(in, (size_t)st.st_size);
    close(fd);
    return 0;
}
