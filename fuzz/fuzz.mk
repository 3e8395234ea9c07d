# fuzz.mk - `make fuzz`: libFuzzer targets for the analyzer's hostile inputs.
#
#   make fuzz [FUZZ_SECONDS=60]   seed corpora from real traces, then run each
#                                 fuzzer for FUZZ_SECONDS and print how many
#                                 inputs it ran; fails on any crash or leak
#   make fuzz-build               only build $(BUILD)/fuzz/fuzz_{trace,ring}
#
# Not part of `make test`: it takes minutes and needs clang (clang 14 with
# libclang-rt-14-dev: libFuzzer, ASan, UBSan).
#
#   fuzz_trace   a trace file (x.db) through the loader and every report of one
#                trace (summary, collectives, timeline, budget, sites), and
#                `diff` of it against a copy of itself
#   fuzz_ring    a ring file (x.ring) beside a valid trace through `recover`
#                and `summary`
#
# Both link the analyzer's objects without main() (ANALYZER_LIB_SRCS, which
# include preload/core/ring.c and store.c) rebuilt with clang, the sanitizers
# and libFuzzer's coverage; SQLite is the uninstrumented static library.
# Seeds are made by fuzz/seed.sh from traced runs on the fake GPU stack, in
# $(BUILD)/fuzz-corpus/{trace,ring}, which the fuzzers then grow. A crash
# leaves its input as $(BUILD)/fuzz/crash-* (rerun: $(BUILD)/fuzz/fuzz_X FILE).

FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_OUT     := $(BUILD)/fuzz
FUZZ_OBJ     := $(FUZZ_OUT)/obj
FUZZ_CORPUS  := $(BUILD)/fuzz-corpus
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_CFLAGS   = $(ALL_CFLAGS) $(FUZZ_SAN) -fsanitize=fuzzer-no-link $(ANALYZER_INCLUDES) -Ifuzz
FUZZ_TARGETS := fuzz_trace fuzz_ring
FUZZ_BINS    := $(FUZZ_TARGETS:%=$(FUZZ_OUT)/%)
FUZZ_LIB_OBJS = $(patsubst %.c,$(FUZZ_OBJ)/%.o,$(ANALYZER_LIB_SRCS) fuzz/fuzz_support.c)

# -close_fd_mask=3: the reports' stdout and error lines are noise here;
# libFuzzer keeps its own output and sanitizer reports on a copy of stderr.
# Leaks are findings: -detect_leaks=1 (libFuzzer checks each input whose run
# allocated more than it freed) and LeakSanitizer on in ASAN_OPTIONS, after
# whatever the environment says, so neither can be left off by accident.
FUZZ_FLAGS = -max_total_time=$(FUZZ_SECONDS) -timeout=30 -rss_limit_mb=4096 -close_fd_mask=3 \
             -detect_leaks=1 -print_final_stats=1 -artifact_prefix=$(FUZZ_OUT)/
FUZZ_ENV   = ASAN_OPTIONS=$${ASAN_OPTIONS:+$$ASAN_OPTIONS:}detect_leaks=1 TMPDIR=$(FUZZ_TMPDIR)
# A real ring is 528 KiB at the smallest (CUTRACE_BUFFER_MB=1): inputs that
# large make each run slow and most mutations land in record bytes. The
# shrunk seed (8 KiB) carries the structure; the real one is read truncated.
FUZZ_RING_MAX_LEN ?= 65536
# Each run writes, folds and checkpoints SQLite files: tmpfs spares the fsyncs.
FUZZ_TMPDIR ?= $(if $(wildcard /dev/shm/.),/dev/shm,/tmp)

.PHONY: fuzz fuzz-build fuzz-corpus

$(FUZZ_OBJ)/%.o: %.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -MMD -MP -c $< -o $@

$(FUZZ_OUT)/fuzz_trace: $(FUZZ_OBJ)/fuzz/fuzz_trace.o $(FUZZ_LIB_OBJS) | analyzer-sqlite-check
	$(FUZZ_CC) $(ALL_CFLAGS) $(FUZZ_SAN) -fsanitize=fuzzer -o $@ $^ $(ANALYZER_LIBS)

$(FUZZ_OUT)/fuzz_ring: $(FUZZ_OBJ)/fuzz/fuzz_ring.o $(FUZZ_LIB_OBJS) | analyzer-sqlite-check
	$(FUZZ_CC) $(ALL_CFLAGS) $(FUZZ_SAN) -fsanitize=fuzzer -o $@ $^ $(ANALYZER_LIBS)

# Seed tool: plain build, the tracer's ring code.
$(FUZZ_OUT)/shrink_ring: fuzz/shrink_ring.c preload/core/ring.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $^

fuzz-build: $(FUZZ_BINS)

fuzz-corpus: $(BUILD)/cutrace $(BUILD)/libcutrace.so $(FAKE_LIBS) $(BUILD)/progs/rt_sequence \
             $(BUILD)/progs/tp_collectives \
             $(BUILD)/bench/hotpath $(FUZZ_OUT)/shrink_ring
	fuzz/seed.sh $(BUILD) $(FUZZ_CORPUS)

# Each fuzzer's log is kept in $(FUZZ_OUT)/<target>.log; the summary line
# comes from libFuzzer's final stats.
fuzz: fuzz-build fuzz-corpus
	@for t in $(FUZZ_TARGETS); do \
	    kind=$${t#fuzz_}; \
	    echo "== $$t: $(FUZZ_SECONDS) s on $(FUZZ_CORPUS)/$$kind"; \
	    case $$t in fuzz_ring) extra=-max_len=$(FUZZ_RING_MAX_LEN) ;; *) extra= ;; esac; \
	    if ! $(FUZZ_ENV) $(FUZZ_OUT)/$$t $(FUZZ_FLAGS) $$extra $(FUZZ_CORPUS)/$$kind \
	            > $(FUZZ_OUT)/$$t.log 2>&1; then \
	        tail -n 60 $(FUZZ_OUT)/$$t.log; \
	        echo "$$t: FAILED (log: $(FUZZ_OUT)/$$t.log, input: $(FUZZ_OUT)/crash-* or leak-*)"; \
	        exit 1; \
	    fi; \
	    runs=$$(sed -n 's/^stat::number_of_executed_units: *//p' $(FUZZ_OUT)/$$t.log); \
	    cov=$$(grep -o 'cov: [0-9]*' $(FUZZ_OUT)/$$t.log | tail -n 1); \
	    units=$$(ls $(FUZZ_CORPUS)/$$kind | wc -l); \
	    echo "$$t: $$runs executions in $(FUZZ_SECONDS) s, no crash or leak ($$cov, corpus $$units files)"; \
	done

-include $(patsubst %.o,%.d,$(FUZZ_LIB_OBJS) $(FUZZ_TARGETS:%=$(FUZZ_OBJ)/fuzz/%.o))
