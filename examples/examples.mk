# examples.mk - example programs and `make demo`.

$(BUILD)/examples/%: examples/%.c $(BUILD)/fake/libcudart.so.12
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -isystem $(CUDA_INC) $< -o $@ -L$(BUILD)/fake -lcudart

all: $(BUILD)/examples/mini_server

DEMO_DIR := $(BUILD)/demo-trace

# The fake GPU stack stands in for the driver: two simulated 96 GiB GPUs.
demo: deps
	@$(MAKE) --no-print-directory all
	@rm -rf $(DEMO_DIR) $(BUILD)/demo-gpu-state
	@echo "== A two-rank server startup on two simulated 96 GiB GPUs, traced by cutrace:"
	@LD_LIBRARY_PATH=$(abspath $(BUILD)/fake) CUTRACE_FAKE_GPUS=2 CUTRACE_FAKE_GPU_MEM=96G \
		CUTRACE_FAKE_STATE=$(abspath $(BUILD)/demo-gpu-state) \
		$(BUILD)/cutrace run -o $(DEMO_DIR) -- $(BUILD)/examples/mini_server || true
	@echo
	@echo "== What the trace says (cutrace summary $(DEMO_DIR)):"
	@$(BUILD)/cutrace summary $(DEMO_DIR)

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
