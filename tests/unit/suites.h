/*
 * suites.h - the unit-test suites of the preload core, run by unit_main.c.
 *
 * Run one suite with CK_RUN_SUITE=<name> (the ThreadSanitizer build runs
 * only the concurrent ones: ring and writer).
 */
#ifndef CUTRACE_TEST_SUITES_H
#define CUTRACE_TEST_SUITES_H

#include <check.h>

Suite *ring_suite(void);
Suite *store_suite(void);
Suite *writer_suite(void);
Suite *envcap_suite(void);
Suite *procinfo_suite(void);
Suite *ancestry_suite(void);
Suite *tracefile_suite(void);
Suite *modmap_suite(void);
Suite *stacks_suite(void);
Suite *pylines_suite(void);
Suite *redact_suite(void);
Suite *unwpipe_suite(void);
Suite *resolve_suite(void);

#endif
