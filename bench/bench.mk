# bench.mk - `make bench`: the cost of tracing, as ratios against an
# untraced run in the same invocation (bench/run.sh); then the analyzer's
# speed and peak memory on synthetic 8-rank runs of 10^5, 10^6 and 10^7
# events, every report against a plain SQLite scan of the same run
# (bench/analyzer.sh). `make bench-check` runs the analyzer part on 10^4
# events: the bench still works (part of `make test`).

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

$(BUILD)/bench/measure: bench/measure.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $< -o $@

BENCH_ANALYZER_TOOLS := $(BUILD)/cutrace $(BUILD)/bench/genrun $(BUILD)/bench/scan $(BUILD)/bench/measure
BENCH_REPORTS := summary collectives timeline budget diff sites

bench: deps
	@$(MAKE) --no-print-directory all $(BUILD)/bench/hotpath $(BENCH_ANALYZER_TOOLS)
	@bench/run.sh $(BUILD)
	@echo
	@bench/analyzer.sh $(BUILD)

bench-check: $(BENCH_ANALYZER_TOOLS)
	@echo "== analyzer bench on 10^4 events"
	@BENCH_REPEAT=1 bench/analyzer.sh $(BUILD) 10000 > $(BUILD)/bench/check.out || \
		{ cat $(BUILD)/bench/check.out; exit 1; }
	@for r in scan $(BENCH_REPORTS); do \
		grep -q "^$$r  *[0-9]" $(BUILD)/bench/check.out || \
			{ cat $(BUILD)/bench/check.out; echo "bench-check: the table has no row for $$r"; exit 1; }; \
	done
	@! grep -q "FAILED" $(BUILD)/bench/check.out || { cat $(BUILD)/bench/check.out; exit 1; }
	@echo "bench-check: every report ran and has its row"

.PHONY: bench bench-check
