# bench.mk - `make bench`: the cost of tracing, as ratios against an
# untraced run in the same invocation (bench/run.sh).

$(BUILD)/bench/hotpath: bench/hotpath.c $(BUILD)/fake/libcudart.so.12
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -isystem $(CUDA_INC) $< -o $@ -L$(BUILD)/fake -lcudart -lpthread

bench: deps
	@$(MAKE) --no-print-directory all $(BUILD)/bench/hotpath
	@bench/run.sh $(BUILD)

.PHONY: bench
