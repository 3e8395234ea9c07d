# tests.mk - the test suites run by `make test`.
#
#   unit-tests         preload core (Check), plain, ASan+UBSan, and TSan for
#                      the concurrent suites (ring, writer)
#   integration-tests  the real libcutrace.so in programs on the fake GPU stack
#                      and on the toolkit's real libcudart (no driver)
#   fake-tests         the fake GPU stack itself (tests/fake/fake.mk)
#   analyzer-tests     the cutrace CLI (analyzer/analyzer.mk)
#   python-tests       per installed CPython 3.10-3.14: the frame layout tables
#                      and the line-table decoder (tests/python/*.mk); the
#                      frames themselves are the integration suite `pyframes`
#   layout-check       no include circles in the analyzer or the preload
#                      (tests/layout/check_includes.py)
#   browser-check      the HTML reports rendered by chromium (tests/browser/;
#                      skipped, visibly, where chromium cannot be installed)

CHECK_CFLAGS := $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS   := $(shell pkg-config --libs check 2>/dev/null || echo -lcheck -lsubunit -lm -lrt -lpthread)

UNIT_CORE := ring store writer envcap procinfo ancestry warn thread tracefile tracedir sqlfiles redact modmap \
             objects pylines sigfree unwpipe resolve
# The analyzer's ELF reader and demangler stand alone: their unit tests live here.
UNIT_ANALYZER := elfsyms demangle
UNIT_SRC  := $(wildcard tests/unit/*.c) tests/support/testsql.c $(UNIT_CORE:%=preload/core/%.c) \
             $(UNIT_ANALYZER:%=analyzer/symbols/%.c) $(SCHEMA_IMAGE_C)
UNIT_LIBS := $(SQLITE_A) $(CHECK_LIBS) -ldl -lpthread -lm

define unit_variant
# $(1): build dir, $(2): extra flags
$(1)/unit/%.o: %.c
	@mkdir -p $$(@D)
	$$(CC) $$(ALL_CFLAGS) $(2) $$(CHECK_CFLAGS) -Ianalyzer -MMD -MP -c $$< -o $$@

$(1)/unit/$(SCHEMA_IMAGE_C:.c=.o): ALL_CFLAGS += -Ipreload/core

$(1)/unit_tests: $$(UNIT_SRC:%.c=$(1)/unit/%.o)
	$$(CC) $(2) -o $$@ $$^ $$(UNIT_LIBS)

-include $$(UNIT_SRC:%.c=$(1)/unit/%.d)
endef

$(eval $(call unit_variant,$(BUILD)/tests,))
$(eval $(call unit_variant,$(BUILD)/asan/tests,$(ASAN_FLAGS)))
$(eval $(call unit_variant,$(BUILD)/tsan/tests,$(TSAN_FLAGS)))

# The hook template is not linked anywhere; compiling it keeps it true to the core.
hook-template-check:
	@$(CC) $(PRELOAD_CFLAGS) -fsyntax-only preload/hooks/hook_null.c

unit-tests: hook-template-check $(BUILD)/tests/unit_tests $(BUILD)/asan/tests/unit_tests $(BUILD)/tsan/tests/unit_tests
	@echo "== unit tests"
	@$(BUILD)/tests/unit_tests
	@echo "== unit tests under AddressSanitizer + UndefinedBehaviorSanitizer"
	@ASAN_OPTIONS=detect_leaks=1 $(BUILD)/asan/tests/unit_tests
	@echo "== concurrent unit tests under ThreadSanitizer"
	@CK_RUN_SUITE=ring TSAN_OPTIONS=halt_on_error=1 $(BUILD)/tsan/tests/unit_tests
	@CK_RUN_SUITE=writer TSAN_OPTIONS=halt_on_error=1 $(BUILD)/tsan/tests/unit_tests

layout-check:
	@echo "== include circles"
	@python3 tests/layout/check_includes.py

# The pages are made from the demo's two runs: after demo-check, never beside it.
browser-check: demo-check $(BUILD)/bench/genrun $(BUILD)/progs/nvtx_app
	@echo "== HTML reports in a browser (chromium headless)"
	@tests/browser/check_report.sh $(BUILD)

.PHONY: browser-check layout-check unit-tests integration-tests fake-tests analyzer-tests hook-template-check python-tests

# `cutrace export` on the demo's runs, nvtx_app's NVTX ranges and a 10^6-event
# run, both formats, every packet decoded and checked (tests/export/check.sh).
export-check: $(BUILD)/cutrace $(ANALYZER_ASAN_BIN) $(BUILD)/bench/genrun $(BUILD)/examples/tp_server_sim \
              $(BUILD)/libcutrace.so $(BUILD)/progs/nvtx_app
	@echo "== export check (the demo and 10^6 events, Perfetto and JSON)"
	@tests/export/check.sh $(BUILD)
.PHONY: export-check

python-tests: python-layout-check python-pylines-check

# Test programs: linked against the fake runtime exactly as real programs link
# against libcudart (real_toolkit against the toolkit's own libraries).
TEST_PROGS := rt_sequence rt_ipc rt_fork rt_exit rt_forkstress no_cuda rt_counter rt_signals \
              rt_threads rt_spawn rt_burst rt_pause nccl_missing
# Stack tests (test_stacks.c): programs with named call sites and a dlopen'ed library.
TEST_PROGS += stk_native stk_stress
# Start and end of a process (test_startfinish.c); sf_life links libsf_late.so.
TEST_PROGS += sf_life
# Hot-path tests (test_hotpath.c): signal handlers that call CUDA, raw fork.
TEST_PROGS += rt_sigcalls rt_sigfirst rt_rawfork
# Order of effects (test_order.c): threads reusing addresses, a signal handler allocating.
TEST_PROGS += rt_reuse rt_sigalloc
# Descriptor tests (test_fds.c): a program that owns its descriptor table.
TEST_PROGS += fds_own
TEST_PROG_BINS := $(TEST_PROGS:%=$(BUILD)/progs/%) $(BUILD)/progs/real_toolkit \
                  $(BUILD)/progs/libstk_plugin.so \
                  $(BUILD)/progs/libcuda_helper.so $(BUILD)/progs/tp_collectives \
                  $(BUILD)/progs/hang_ranks \
                  $(BUILD)/progs/roads_static $(BUILD)/progs/libshim_count.so \
                  $(BUILD)/progs/drv_direct $(BUILD)/progs/libsf_late.so \
                  $(BUILD)/progs/libsf_fail.so $(BUILD)/progs/libsigsafe_cuda.so \
                  $(BUILD)/progs/libraise_in_fallocate.so $(BUILD)/progs/libsig_window.so

# NVTX (test_nvtx.c): a program and two shared objects on the toolkit's nvtx3
# headers, each initialising NVTX on its own, and a second injection library.
TEST_PROG_BINS += $(BUILD)/progs/nvtx_app $(BUILD)/progs/libnvtx_chain.so

$(BUILD)/progs/libnvtx_%.so: tests/progs/nvtx_lib.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -fPIC -shared -isystem $(CUDA_INC) -DNVTX_LIB_NAME=nvtx_$* \
		-DNVTX_LIB_ENTRY=nvtx_$*_entry $< -o $@ -ldl

$(BUILD)/progs/nvtx_app: tests/progs/nvtx_app.c $(BUILD)/progs/libnvtx_a.so \
                         $(BUILD)/progs/libnvtx_b.so $(BUILD)/fake/libcudart.so.12
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -isystem $(CUDA_INC) $< -o $@ -L$(BUILD)/progs -L$(BUILD)/fake \
		-lnvtx_a -lnvtx_b -lcudart -ldl -lpthread -Wl,-rpath,'$$ORIGIN'

$(BUILD)/progs/libnvtx_chain.so: tests/progs/nvtx_chain.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -fPIC -shared -isystem $(CUDA_INC) $< -o $@

$(BUILD)/progs/roads_static: tests/progs/roads_static.c $(FAKE_LIBS)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $< -o $@ -L$(BUILD)/fake -lfake_static_user -lfake_expandable -lcudart

$(BUILD)/progs/drv_direct: tests/progs/drv_direct.c $(FAKE_LIBS)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -isystem $(CUDA_INC) $< -o $@ -L$(BUILD)/fake -lcuda

$(BUILD)/progs/libstk_plugin.so: tests/progs/stk_plugin.c $(BUILD)/fake/libcudart.so.12
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -fPIC -shared -isystem $(CUDA_INC) $< -o $@ -L$(BUILD)/fake -lcudart

$(BUILD)/progs/libsf_late.so: tests/progs/sf_late.c $(BUILD)/fake/libcudart.so.12
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -fPIC -shared -isystem $(CUDA_INC) $< -o $@ -L$(BUILD)/fake -lcudart

$(BUILD)/progs/libsf_fail.so: tests/progs/sf_fail.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -fPIC -shared $< -o $@ -ldl

$(BUILD)/progs/sf_life: tests/progs/sf_life.c $(BUILD)/progs/libsf_late.so
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -isystem $(CUDA_INC) $< -o $@ -L$(BUILD)/progs -L$(BUILD)/fake -lsf_late \
		-lcudart -Wl,-rpath,'$$ORIGIN'

$(BUILD)/progs/libshim_count.so: tests/progs/shim_count.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -fPIC -shared -isystem $(CUDA_INC) $< -o $@

$(BUILD)/progs/libsigsafe_cuda.so: tests/progs/sigsafe_cuda.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -fPIC -shared -isystem $(CUDA_INC) $< -o $@

$(BUILD)/progs/libraise_in_fallocate.so: tests/progs/raise_in_fallocate.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -fPIC -shared $< -o $@ -ldl

$(BUILD)/progs/libsig_window.so: tests/progs/sig_window.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -fPIC -shared -isystem $(CUDA_INC) $< -o $@

# Linked against the fake NCCL as a tensor-parallel program links libnccl.so.2.
$(BUILD)/progs/tp_collectives: tests/progs/tp_collectives.c tests/progs/share_id.h \
                               $(BUILD)/fake/libcudart.so.12 $(BUILD)/fake/libnccl.so.2
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -isystem $(CUDA_INC) $< -o $@ -L$(BUILD)/fake -lcudart -lnccl

# Ranks that hang in NCCL calls, killed there (test_entered.c).
$(BUILD)/progs/hang_ranks: tests/progs/hang_ranks.c tests/progs/share_id.h \
                           $(BUILD)/fake/libcudart.so.12 $(BUILD)/fake/libnccl.so.2
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -isystem $(CUDA_INC) $< -o $@ -L$(BUILD)/fake -lcudart -lnccl -lpthread

$(BUILD)/progs/libcuda_helper.so: tests/progs/cuda_helper.c $(BUILD)/fake/libcudart.so.12
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -fPIC -shared -isystem $(CUDA_INC) $< -o $@ -L$(BUILD)/fake -lcudart

$(BUILD)/progs/%: tests/progs/%.c $(BUILD)/fake/libcudart.so.12
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -isystem $(CUDA_INC) $< -o $@ -L$(BUILD)/fake -lcudart -lpthread

$(BUILD)/progs/real_toolkit: tests/progs/real_toolkit.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -isystem $(CUDA_INC) $< -o $@ -L$(CUDA_HOME)/lib64 -lcudart -lnccl \
		-Wl,-rpath,$(CUDA_HOME)/lib64

INTEGRATION_SRC := $(wildcard tests/integration/*.c) tests/support/testsql.c
$(BUILD)/tests/integration/%.o: tests/%.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(CHECK_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/tests/integration_tests: $(INTEGRATION_SRC:tests/%.c=$(BUILD)/tests/integration/%.o)
	$(CC) -o $@ $^ $(UNIT_LIBS)

-include $(INTEGRATION_SRC:tests/%.c=$(BUILD)/tests/integration/%.d)

integration-tests: $(BUILD)/libcutrace.so $(FAKE_LIBS) $(TEST_PROG_BINS) $(BUILD)/tests/integration_tests \
                   $(BUILD)/cutrace $(BUILD)/examples/tp_server_sim python-pyframes-prep
	@echo "== integration tests (libcutrace.so on the fake GPU stack and the real toolkit)"
	@CUTRACE_TEST_BUILD=$(abspath $(BUILD)) CUTRACE_TEST_SRC=$(abspath .) $(BUILD)/tests/integration_tests

test: deps
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory layout-check unit-tests fake-tests analyzer-tests python-tests \
		integration-tests gpu-script-check demo-check browser-check bench-check docs-tests export-check
	@echo "== all tests passed"
