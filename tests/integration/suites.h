/*
 * suites.h - the integration suites: runtime (what is recorded, the program
 * unchanged) and reliability (crashes, signals, threads, fork, hostile files).
 */
#ifndef CUTRACE_INTEGRATION_SUITES_H
#define CUTRACE_INTEGRATION_SUITES_H

#include <check.h>

Suite *runtime_suite(void);
Suite *reliability_suite(void);

#endif
