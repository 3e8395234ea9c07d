/*
 * unit_main.c - runs every unit-test suite of the preload core.
 */
#include <stdlib.h>

#include "suites.h"

int main(void)
{
    SRunner *sr = srunner_create(ring_suite());
    srunner_add_suite(sr, store_suite());
    srunner_add_suite(sr, writer_suite());
    srunner_add_suite(sr, envcap_suite());
    srunner_add_suite(sr, procinfo_suite());
    srunner_add_suite(sr, ancestry_suite());
    srunner_add_suite(sr, tracefile_suite());
    srunner_add_suite(sr, modmap_suite());
    srunner_add_suite(sr, stacks_suite());
    srunner_add_suite(sr, pylines_suite());
    srunner_add_suite(sr, redact_suite());
    srunner_add_suite(sr, unwpipe_suite());
    srunner_add_suite(sr, resolve_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
