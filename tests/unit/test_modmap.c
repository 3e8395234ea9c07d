/*
 * test_modmap.c - caller addresses to loaded objects: resolution, the known
 * ranges, and what happens when more addresses wait than fit.
 */
#include <gnu/libc-version.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../preload/core/modmap.h"
#include "suites.h"

static void here(void) {}

START_TEST(test_resolves_program_and_library)
{
    static struct ct_modmap map; /* large: not on the stack */
    memset(&map, 0, sizeof map);
    uint64_t in_program = (uint64_t)(uintptr_t)here;
    uint64_t in_libc = (uint64_t)(uintptr_t)gnu_get_libc_version;
    ck_assert(ct_modmap_note(&map, in_program));
    ck_assert(ct_modmap_note(&map, in_program)); /* already pending: no second entry */
    ck_assert(ct_modmap_note(&map, in_libc));
    ck_assert(ct_modmap_note(&map, 0));
    ck_assert_uint_eq(map.n_pending, 2);
    struct ct_module found[CT_MODMAP_FOUND];
    size_t n = ct_modmap_resolve(&map, found, CT_MODMAP_FOUND);
    ck_assert_uint_eq(n, 2);
    ck_assert_uint_eq(map.n_pending, 0);
    ck_assert_ptr_nonnull(strstr(found[0].path, "unit_tests"));
    ck_assert_ptr_nonnull(strstr(found[1].path, "libc"));
    ck_assert(found[0].start <= in_program && in_program < found[0].end);
    for (size_t i = 0; i < n; i++)
        ct_modmap_add(&map, &found[i]);
    /* Known now: another address in the same object needs nothing. */
    ck_assert(ct_modmap_note(&map, in_program + 1));
    ck_assert_uint_eq(map.n_pending, 0);
}
END_TEST

START_TEST(test_full_pending_list_defers_instead_of_dropping)
{
    static struct ct_modmap map;
    memset(&map, 0, sizeof map);
    /* Addresses in no object fill the list (they are resolved as unknown later). */
    for (uint64_t i = 0; i < CT_MODMAP_PENDING; i++)
        ck_assert(ct_modmap_note(&map, 0x10 + i));
    uint64_t in_program = (uint64_t)(uintptr_t)here;
    ck_assert(!ct_modmap_note(&map, in_program));
    struct ct_module found[CT_MODMAP_FOUND];
    ck_assert_uint_eq(ct_modmap_resolve(&map, found, CT_MODMAP_FOUND), 0);
    ck_assert_uint_eq(map.n_pending, 0);
    ck_assert(ct_modmap_note(&map, in_program));
    ck_assert_uint_eq(ct_modmap_resolve(&map, found, CT_MODMAP_FOUND), 1);
}
END_TEST

START_TEST(test_objects_beyond_capacity_stay_pending)
{
    static struct ct_modmap map;
    memset(&map, 0, sizeof map);
    ck_assert(ct_modmap_note(&map, (uint64_t)(uintptr_t)here));
    ck_assert(ct_modmap_note(&map, (uint64_t)(uintptr_t)gnu_get_libc_version));
    struct ct_module found[1];
    ck_assert_uint_eq(ct_modmap_resolve(&map, found, 1), 1);
    ck_assert_uint_eq(map.n_pending, 1);
    ct_modmap_add(&map, &found[0]);
    ck_assert_uint_eq(ct_modmap_resolve(&map, found, 1), 1);
    ck_assert_uint_eq(map.n_pending, 0);
}
END_TEST

Suite *modmap_suite(void)
{
    Suite *s = suite_create("modmap");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_resolves_program_and_library);
    tcase_add_test(tc, test_full_pending_list_defers_instead_of_dropping);
    tcase_add_test(tc, test_objects_beyond_capacity_stay_pending);
    suite_add_tcase(s, tc);
    return s;
}
