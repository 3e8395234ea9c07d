/*
 * schema_image.h - the bytes of a new, empty trace file, made at build time.
 *
 * Creating the schema is most of a process's first CUDA call: SQLite
 * compiles every CREATE statement, then parses each one again as it reads
 * the schema back (about 10M instructions of the 11M the first call took).
 * preload/tools/make_schema_image.c runs the store's own creation
 * (ct_store_create_private) once, at build time, with the SQLite that is
 * linked into libcutrace.so, and emits the file it wrote; the first call
 * writes these bytes into the hidden trace file and opens it, so that
 * SQLite only reads the schema. The tables, views, api rows and first meta
 * rows are those the store would write (unit test `store`:
 * test_schema_image_is_what_the_store_creates).
 */
#ifndef CUTRACE_SCHEMA_IMAGE_H
#define CUTRACE_SCHEMA_IMAGE_H

#include <stddef.h>

extern const unsigned char ct_schema_image[];
extern const size_t ct_schema_image_size;

#endif
