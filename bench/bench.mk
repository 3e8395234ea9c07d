# bench.mk - `make bench`: the cost of tracing in one table, every row
# against its target (bench/bench.py, docs/performance.md): the hot path
# against untraced runs, the writer against plain SQLite inserting the same
# rows, the waits, the first call and a simulated 8-rank startup, ltrace,
# and the analyzer's speed and peak memory at 10^5, 10^6 and 10^7 events
# (bench/analyzer.sh); every figure also in build/bench/results.json.
# `make bench-check` (part of `make test`) runs it all in a tiny
# configuration and checks the table's shape. `make bench-detail`: the
# older, finer breakdown (bench/run.sh: entered marks, stacks by mode).

$(BUILD)/bench/hotpath: bench/hotpath.c $(BUILD)/fake/libcudart.so.12
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -isystem $(CUDA_INC) $< -o $@ -L$(BUILD)/fake -lcudart -lpthread

# The synthetic runs are written by the tracer's own store.
BENCH_GENRUN_SRCS := bench/genrun.c preload/core/store.c preload/core/pylines.c
$(BUILD)/bench/genrun: $(BENCH_GENRUN_SRCS) | analyzer-sqlite-check
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(BENCH_GENRUN_SRCS) -o $@ $(SQLITE_A) -lm -ldl -lpthread

$(BUILD)/bench/scan: bench/scan.c | analyzer-sqlite-check
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $< -o $@ $(SQLITE_A) -lm -ldl -lpthread

$(BUILD)/bench/rawinsert: bench/rawinsert.c | analyzer-sqlite-check
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $< -o $@ $(SQLITE_A) -lm -ldl -lpthread

$(BUILD)/bench/measure: bench/measure.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $< -o $@

BENCH_ANALYZER_TOOLS := $(BUILD)/cutrace $(BUILD)/bench/genrun $(BUILD)/bench/scan $(BUILD)/bench/measure
BENCH_TOOLS := $(BUILD)/libcutrace.so $(BUILD)/bench/hotpath $(BUILD)/bench/rawinsert \
               $(BUILD)/examples/tp_server_sim $(BENCH_ANALYZER_TOOLS)

bench: deps
	@$(MAKE) --no-print-directory all $(BENCH_TOOLS)
	@python3 bench/bench.py $(BUILD)

bench-detail: deps
	@$(MAKE) --no-print-directory all $(BENCH_TOOLS)
	@bench/run.sh $(BUILD)

# The whole bench on a tiny configuration (seconds), then its shape: every
# row of the table and of results.json (bench/check.py).
bench-check: $(BENCH_TOOLS)
	@echo "== bench on a tiny configuration"
	@python3 bench/bench.py $(BUILD) --tiny > $(BUILD)/bench/check.out || \
		{ cat $(BUILD)/bench/check.out; exit 1; }
	@python3 bench/check.py $(BUILD)/bench/check.out $(BUILD)/bench/tiny/results.json || \
		{ cat $(BUILD)/bench/check.out; exit 1; }

.PHONY: bench bench-detail bench-check
