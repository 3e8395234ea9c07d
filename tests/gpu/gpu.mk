# gpu.mk - the real-GPU test and what of it runs without a GPU.
#
#   gpu-test          tests/gpu/run.sh: cutrace on this machine's NVIDIA GPU
#                     (prints "skipped: no GPU" without one); not in `make
#                     test`. GPU_TEST_OUT=DIR keeps its logs there.
#   gpu-script-check  part of `make test`: the GPU test's scripts parse and
#                     skip without a GPU, and the CUDA program compiles and
#                     behaves alike traced and untraced without a driver
#                     (tests/gpu/script_check.sh)

GPU_TEST_OUT ?=

gpu-test:
	@BUILD=$(abspath $(BUILD)) bash tests/gpu/run.sh $(GPU_TEST_OUT)

gpu-script-check: $(BUILD)/libcutrace.so $(BUILD)/cutrace
	@echo "== GPU test scripts (without a GPU)"
	@bash tests/gpu/script_check.sh $(abspath $(BUILD))

.PHONY: gpu-test gpu-script-check
include tests/gpu/faketorch/faketorch.mk
