# examples.mk - example programs and `make demo`.

$(BUILD)/examples/%: examples/%.c $(BUILD)/fake/libcudart.so.12
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -isystem $(CUDA_INC) $< -o $@ -L$(BUILD)/fake -lcudart

all: $(BUILD)/examples/mini_server

# The story cutrace exists for (scripts/demo.sh): an 8-rank SGLang-like
# startup on the fake GPU stack, with and without a custom all-reduce, then
# cutrace budget for both and cutrace diff. The traces stay in $(BUILD)/demo.
demo: deps
	@$(MAKE) --no-print-directory all
	@scripts/demo.sh $(BUILD)

# make test runs the demo too and checks what it says (tests/demo/check.sh).
.PHONY: demo-check
demo-check: $(BUILD)/cutrace $(BUILD)/examples/tp_server_sim
	@tests/demo/check.sh $(BUILD)

# The simulated SGLang/vLLM startup of docs/budget.md (examples/README.md). It
# links NCCL as torch does; its pynccl and custom all-reduce parts reach
# libnccl and libcudart again through dlopen, as the Python servers do.
TP_SERVER_SIM_SRCS := $(wildcard examples/tp_server_sim*.c)
$(BUILD)/examples/tp_server_sim: $(TP_SERVER_SIM_SRCS) $(BUILD)/fake/libcudart.so.12 \
                                 $(BUILD)/fake/libnccl.so.2
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -isystem $(CUDA_INC) $(TP_SERVER_SIM_SRCS) -o $@ -L$(BUILD)/fake \
		-lcudart -lnccl -ldl -lm

all: $(BUILD)/examples/tp_server_sim
