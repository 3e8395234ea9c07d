# analyzer.mk - the offline CLI, build/cutrace, and its unit tests.
#
#   make build/cutrace     the CLI (static SQLite; no other dependency)
#   make analyzer-tests    Check tests, plain and under ASan+UBSan
#
# Every .c under analyzer/ is part of the CLI, so a new subcommand, model or
# replay needs no change here; analyzer/cutrace.c holds main() and is left out of the test binary.
# Crash recovery (analyzer/recover/recover.c) reads rings and writes traces with the
# tracer's own code, compiled here with the analyzer's flags: the ring
# protocol and the SQL of a trace then exist once. `cutrace run` redacts the
# run manifest with the tracer's redaction and environment rules, linked the same way.

ANALYZER_CORE_SRCS := preload/core/ring.c preload/core/store.c preload/core/pylines.c \
                      preload/core/redact.c preload/core/envcap.c
ANALYZER_SRCS      := $(sort $(wildcard analyzer/*.c analyzer/*/*.c)) $(ANALYZER_CORE_SRCS)
ANALYZER_LIB_SRCS  := $(filter-out analyzer/cutrace.c,$(ANALYZER_SRCS))
ANALYZER_TEST_SRCS := $(sort $(wildcard tests/analyzer/*.c))
ANALYZER_TEST_SRCS := $(filter-out tests/analyzer/dummy_libcutrace.c,$(ANALYZER_TEST_SRCS))

ANALYZER_OBJ       := $(BUILD)/analyzer/obj
ANALYZER_ASAN_OBJ  := $(BUILD)/asan/analyzer/obj
ANALYZER_LIBS       = $(SQLITE_A) -lm -ldl -lpthread
ANALYZER_CHECK_CFLAGS = $(shell pkg-config --cflags check 2>/dev/null)
ANALYZER_CHECK_LIBS   = $(shell pkg-config --libs check 2>/dev/null || echo -lcheck)
ANALYZER_INCLUDES  := -Ianalyzer -Itests/analyzer

ANALYZER_TEST_BIN      := $(BUILD)/analyzer/analyzer_tests
ANALYZER_ASAN_BIN      := $(BUILD)/asan/analyzer/cutrace
ANALYZER_ASAN_TEST_BIN := $(BUILD)/asan/analyzer/analyzer_tests
ANALYZER_DUMMY_LIB     := $(BUILD)/analyzer/dummy/libcutrace.so

analyzer_objs = $(patsubst %.c,$(1)/%.o,$(2))

all: $(BUILD)/cutrace

.PHONY: analyzer-tests analyzer-sqlite-check

analyzer-sqlite-check:
	@test -n "$(SQLITE_A)" || { echo "analyzer: libsqlite3.a not found; run 'make deps'" >&2; exit 1; }

# Only the tests include <check.h>.
$(call analyzer_objs,$(ANALYZER_OBJ),$(ANALYZER_TEST_SRCS)): ANALYZER_EXTRA_CFLAGS = $(ANALYZER_CHECK_CFLAGS)
$(call analyzer_objs,$(ANALYZER_ASAN_OBJ),$(ANALYZER_TEST_SRCS)): ANALYZER_EXTRA_CFLAGS = $(ANALYZER_CHECK_CFLAGS)

# Plain objects (the CLI and the plain test binary share them).
$(ANALYZER_OBJ)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(ANALYZER_INCLUDES) $(ANALYZER_EXTRA_CFLAGS) -MMD -MP -c $< -o $@

# Sanitizer objects: the same sources rebuilt with ASAN_FLAGS.
$(ANALYZER_ASAN_OBJ)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(ASAN_FLAGS) $(ANALYZER_INCLUDES) $(ANALYZER_EXTRA_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/cutrace: $(call analyzer_objs,$(ANALYZER_OBJ),$(ANALYZER_SRCS)) | analyzer-sqlite-check
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(ANALYZER_LIBS)

$(ANALYZER_ASAN_BIN): $(call analyzer_objs,$(ANALYZER_ASAN_OBJ),$(ANALYZER_SRCS)) | analyzer-sqlite-check
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(ASAN_FLAGS) -o $@ $^ $(ANALYZER_LIBS)

$(ANALYZER_TEST_BIN): $(call analyzer_objs,$(ANALYZER_OBJ),$(ANALYZER_LIB_SRCS) $(ANALYZER_TEST_SRCS)) | analyzer-sqlite-check
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(ANALYZER_CHECK_LIBS) $(ANALYZER_LIBS)

$(ANALYZER_ASAN_TEST_BIN): $(call analyzer_objs,$(ANALYZER_ASAN_OBJ),$(ANALYZER_LIB_SRCS) $(ANALYZER_TEST_SRCS)) | analyzer-sqlite-check
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(ASAN_FLAGS) -o $@ $^ $(ANALYZER_CHECK_LIBS) $(ANALYZER_LIBS)

# A stand-in for the tracer: `cutrace run` tests preload it through CUTRACE_LIB.
$(ANALYZER_DUMMY_LIB): tests/analyzer/dummy_libcutrace.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -fPIC -shared -o $@ $<

# The test binaries run `cutrace` as a subprocess: the plain tests the plain
# binary, the sanitizer tests the sanitizer build. verify_asan_link_order=0
# because some tests run cutrace with an LD_PRELOAD of their own.
analyzer-tests: $(BUILD)/cutrace $(ANALYZER_TEST_BIN) $(ANALYZER_ASAN_BIN) $(ANALYZER_ASAN_TEST_BIN) $(ANALYZER_DUMMY_LIB)
	CUTRACE_BIN=$(BUILD)/cutrace CUTRACE_TEST_LIB=$(ANALYZER_DUMMY_LIB) $(ANALYZER_TEST_BIN)
	CUTRACE_BIN=$(ANALYZER_ASAN_BIN) CUTRACE_TEST_LIB=$(ANALYZER_DUMMY_LIB) \
	ASAN_OPTIONS=detect_leaks=1:exitcode=99:verify_asan_link_order=0 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:exitcode=99 \
	$(ANALYZER_ASAN_TEST_BIN)

-include $(patsubst %.o,%.d,$(call analyzer_objs,$(ANALYZER_OBJ),$(ANALYZER_SRCS) $(ANALYZER_TEST_SRCS)))
-include $(patsubst %.o,%.d,$(call analyzer_objs,$(ANALYZER_ASAN_OBJ),$(ANALYZER_SRCS) $(ANALYZER_TEST_SRCS)))
