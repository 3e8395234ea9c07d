# tests/fake/fake.mk - the fake GPU stack: libcuda.so.1, libcudart.so.12,
# libnccl.so.2, the two "road" libraries libfake_static_user.so and
# libfake_expandable.so, and their own tests (see docs/fakes.md).
#
#   make fake-tests   build and run test_fake_stack, test_fake_nccl and
#                     test_fake_roads, plain and under ASan+UBSan
#
# Two variants are built from the same sources: $(BUILD)/fake/ (what other
# tests and the demo run against) and $(BUILD)/asan/fake/ (for sanitizer runs).
# In each, the libraries, fake_probe and the test programs share one directory,
# which is how the tests find the probe and the libraries they point children at.
#
# Link choices, and why:
#   libcuda.so.1    soname only, no symbol versions (like the real driver);
#                   -Bsymbolic so that cuGetProcAddress returns this library's
#                   functions even when a preloaded tracer defines the same names.
#   libcudart.so.12 version script: every cuda* symbol carries libcudart.so.12;
#                   no DT_NEEDED on libcuda (it is dlopen()ed); -z defs so an
#                   accidental direct cu* reference fails to link.
#   libnccl.so.2    version script: exports nccl* (weak aliases) and pnccl*,
#                   without symbol versions, like the real one; no DT_NEEDED on
#                   libcudart or libcuda (the real NCCL links the runtime
#                   statically and dlopen()s the driver); -z defs so that a
#                   stray cuda* or cu* reference fails to link.
#   libfake_static_user.so  like libnccl: no DT_NEEDED on libcudart or libcuda,
#                   -z defs, only fsu_* exported (a statically linked runtime).
#   libfake_expandable.so   -lcudart (like PyTorch), never libcuda; -z defs, so
#                   its driver functions can only come from
#                   cudaGetDriverEntryPointByVersion; only fex_* exported.
#   test_fake_roads exports its own cudaGetDriverEntryPointByVersion, which
#                   interposes the runtime's for libfake_expandable.

FAKE_DIR      := tests/fake
FAKE_OUT      := $(BUILD)/fake
FAKE_ASAN_OUT := $(BUILD)/asan/fake

FAKE_DRIVER_SRCS  := $(FAKE_DIR)/fake_driver.c $(FAKE_DIR)/fake_state.c \
                     $(filter-out $(FAKE_DIR)/fake_driver.c,$(wildcard $(FAKE_DIR)/fake_driver_*.c))
FAKE_RUNTIME_SRCS := $(FAKE_DIR)/fake_runtime.c
FAKE_NCCL_SRCS    := $(FAKE_DIR)/fake_nccl.c
FAKE_STATIC_USER_SRCS := $(FAKE_DIR)/fake_static_user.c
FAKE_EXPANDABLE_SRCS  := $(FAKE_DIR)/fake_expandable.c

FAKE_CFLAGS        = $(ALL_CFLAGS) -fPIC -isystem $(CUDA_INC) -MMD -MP
FAKE_CHECK_CFLAGS := $(shell pkg-config --cflags check 2>/dev/null)
FAKE_CHECK_LIBS   := $(shell pkg-config --libs check 2>/dev/null || echo -lcheck)

# What other parts of the tree link or run against.
FAKE_LIBS  := $(FAKE_OUT)/libcuda.so.1 $(FAKE_OUT)/libcudart.so.12 \
              $(FAKE_OUT)/libcuda.so $(FAKE_OUT)/libcudart.so \
              $(FAKE_OUT)/libnccl.so.2 $(FAKE_OUT)/libnccl.so \
              $(FAKE_OUT)/libfake_static_user.so $(FAKE_OUT)/libfake_expandable.so
FAKE_PROBE := $(FAKE_OUT)/fake_probe
FAKE_ASAN_LIBS := $(patsubst $(FAKE_OUT)/%,$(FAKE_ASAN_OUT)/%,$(FAKE_LIBS))

all: $(FAKE_LIBS)

# $(1): output directory, $(2): extra compile and link flags (sanitizers).
define FAKE_VARIANT
$(1)/obj:
	@mkdir -p $$@

$(1)/obj/%.o: $(FAKE_DIR)/%.c | $(1)/obj
	$$(CC) $$(FAKE_CFLAGS) $(2) $$(FAKE_EXTRA_CFLAGS) -c $$< -o $$@

$(1)/obj/test_fake_stack.o: FAKE_EXTRA_CFLAGS = $$(FAKE_CHECK_CFLAGS)
$(1)/obj/test_fake_nccl.o: FAKE_EXTRA_CFLAGS = $$(FAKE_CHECK_CFLAGS)
$(1)/obj/test_fake_roads.o: FAKE_EXTRA_CFLAGS = $$(FAKE_CHECK_CFLAGS)

# Each library also (re)creates its link-time symlink, so a rule that only names
# libcudart.so.12 as a prerequisite can still link with -lcudart.
$(1)/libcuda.so.1: $(patsubst $(FAKE_DIR)/%.c,$(1)/obj/%.o,$(FAKE_DRIVER_SRCS))
	$$(CC) $(2) -shared -Wl,-soname,libcuda.so.1 -Wl,-Bsymbolic -Wl,-z,defs -o $$@ $$^ -lpthread
	ln -sf libcuda.so.1 $(1)/libcuda.so

$(1)/libcudart.so.12: $(patsubst $(FAKE_DIR)/%.c,$(1)/obj/%.o,$(FAKE_RUNTIME_SRCS)) \
                      $(FAKE_DIR)/libcudart.map
	$$(CC) $(2) -shared -Wl,-soname,libcudart.so.12 -Wl,--version-script=$(FAKE_DIR)/libcudart.map \
	    -Wl,-Bsymbolic-functions -Wl,-z,defs -o $$@ $$(filter %.o,$$^) -ldl -lpthread
	ln -sf libcudart.so.12 $(1)/libcudart.so

$(1)/libnccl.so.2: $(patsubst $(FAKE_DIR)/%.c,$(1)/obj/%.o,$(FAKE_NCCL_SRCS)) \
                   $(FAKE_DIR)/libnccl.map
	$$(CC) $(2) -shared -Wl,-soname,libnccl.so.2 -Wl,--version-script=$(FAKE_DIR)/libnccl.map \
	    -Wl,-z,defs -o $$@ $$(filter %.o,$$^) -ldl -lpthread
	ln -sf libnccl.so.2 $(1)/libnccl.so

$(1)/libfake_static_user.so: $(patsubst $(FAKE_DIR)/%.c,$(1)/obj/%.o,$(FAKE_STATIC_USER_SRCS)) \
                             $(FAKE_DIR)/libfake_static_user.map
	$$(CC) $(2) -shared -Wl,-soname,libfake_static_user.so \
	    -Wl,--version-script=$(FAKE_DIR)/libfake_static_user.map -Wl,-z,defs \
	    -o $$@ $$(filter %.o,$$^) -ldl -lpthread

$(1)/libfake_expandable.so: $(patsubst $(FAKE_DIR)/%.c,$(1)/obj/%.o,$(FAKE_EXPANDABLE_SRCS)) \
                            $(FAKE_DIR)/libfake_expandable.map $(1)/libcudart.so
	$$(CC) $(2) -shared -Wl,-soname,libfake_expandable.so \
	    -Wl,--version-script=$(FAKE_DIR)/libfake_expandable.map -Wl,-z,defs \
	    -o $$@ $$(filter %.o,$$^) -L$(1) -lcudart -lpthread

$(1)/libnccl.so: $(1)/libnccl.so.2
	ln -sf libnccl.so.2 $$@

$(1)/libcuda.so: $(1)/libcuda.so.1
	ln -sf libcuda.so.1 $$@

$(1)/libcudart.so: $(1)/libcudart.so.12
	ln -sf libcudart.so.12 $$@

$(1)/fake_probe: $(1)/obj/fake_probe.o $(1)/libcudart.so
	$$(CC) $(2) -o $$@ $$< -L$(1) -lcudart -ldl

$(1)/test_fake_stack: $(1)/obj/test_fake_stack.o $(1)/libcudart.so
	$$(CC) $(2) -o $$@ $$< -L$(1) -lcudart $$(FAKE_CHECK_LIBS) -ldl -lpthread

$(1)/test_fake_nccl: $(1)/obj/test_fake_nccl.o $(1)/libnccl.so $(1)/libcudart.so $(1)/libcuda.so.1
	$$(CC) $(2) -o $$@ $$< -L$(1) -lnccl -lcudart $$(FAKE_CHECK_LIBS) -ldl -lpthread

$(1)/test_fake_roads: $(1)/obj/test_fake_roads.o $(1)/libfake_static_user.so \
                      $(1)/libfake_expandable.so $(1)/libcudart.so $(1)/libcuda.so.1
	$$(CC) $(2) -Wl,--export-dynamic-symbol=cudaGetDriverEntryPointByVersion -o $$@ $$< -L$(1) \
	    -lfake_static_user -lfake_expandable -lcudart $$(FAKE_CHECK_LIBS) -ldl -lpthread
endef

$(eval $(call FAKE_VARIANT,$(FAKE_OUT),))
$(eval $(call FAKE_VARIANT,$(FAKE_ASAN_OUT),$(ASAN_FLAGS)))

.PHONY: fake-tests fake-tests-plain fake-tests-asan

fake-tests: fake-tests-plain fake-tests-asan

FAKE_ASAN_ENV := ASAN_OPTIONS=abort_on_error=0:detect_leaks=1 \
                 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

fake-tests-plain: $(FAKE_LIBS) $(FAKE_PROBE) $(FAKE_OUT)/test_fake_stack $(FAKE_OUT)/test_fake_nccl \
                  $(FAKE_OUT)/test_fake_roads
	LD_LIBRARY_PATH=$(FAKE_OUT) $(FAKE_OUT)/test_fake_stack
	LD_LIBRARY_PATH=$(FAKE_OUT) $(FAKE_OUT)/test_fake_nccl
	LD_LIBRARY_PATH=$(FAKE_OUT) $(FAKE_OUT)/test_fake_roads

fake-tests-asan: $(FAKE_ASAN_LIBS) $(FAKE_ASAN_OUT)/fake_probe $(FAKE_ASAN_OUT)/test_fake_stack \
                 $(FAKE_ASAN_OUT)/test_fake_nccl $(FAKE_ASAN_OUT)/test_fake_roads
	LD_LIBRARY_PATH=$(FAKE_ASAN_OUT) $(FAKE_ASAN_ENV) $(FAKE_ASAN_OUT)/test_fake_stack
	LD_LIBRARY_PATH=$(FAKE_ASAN_OUT) $(FAKE_ASAN_ENV) $(FAKE_ASAN_OUT)/test_fake_nccl
	LD_LIBRARY_PATH=$(FAKE_ASAN_OUT) $(FAKE_ASAN_ENV) $(FAKE_ASAN_OUT)/test_fake_roads

-include $(wildcard $(FAKE_OUT)/obj/*.d $(FAKE_ASAN_OUT)/obj/*.d)
