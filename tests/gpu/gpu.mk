# gpu.mk - the real-GPU test, and its dry run on the fake stack.
#
#   gpu-build         libcutrace.so, cutrace and source-hash (what a GPU machine
#                     that cannot build is given: make BUILD=build-device gpu-build)
#   gpu-test          tests/gpu/run.sh on this machine's NVIDIA GPU; not in `make
#                     test`. GPU=required fails without a GPU, driver, torch or
#                     nvcc (default auto: prints "skipped: no GPU" without one);
#                     GPU_TEST_OUT=DIR keeps its files there, GPU_TEST_BUDGET=S
#                     stops it cleanly after S seconds
#   gpu-script-check  part of `make test`: the whole of run.sh on the fake stack
#                     (the fake runtime for nvcc-built code, the fake torch), and
#                     the checks' own tests (tests/gpu/script_check.sh)

# The dry run's fakes first: the rules below name their outputs.
include tests/gpu/fakecuda13/fakecuda13.mk
include tests/gpu/faketorch/faketorch.mk

GPU_TEST_OUT    ?=
GPU_TEST_BUDGET ?= 420
GPU             ?= auto

# The hash of the sources the binaries were built from; run.sh compares it
# with the tree it runs in, so a stale carried build cannot pass as current.
# Always recomputed (cheap): a change that rebuilds nothing still changes it.
$(BUILD)/source-hash: $(BUILD)/libcutrace.so $(BUILD)/cutrace FORCE
	@bash tests/gpu/source_hash.sh --write $@

gpu-build: $(BUILD)/libcutrace.so $(BUILD)/cutrace $(BUILD)/source-hash

gpu-test:
	@BUILD=$(abspath $(BUILD)) bash tests/gpu/run.sh --gpu $(GPU) --budget $(GPU_TEST_BUDGET) \
		$(GPU_TEST_OUT)

gpu-script-check: gpu-build $(FAKE_LIBS) $(FAKECUDA13_LIB) $(FAKETORCH_LIBS)
	@echo "== the fake torch of the dry run (tests/gpu/faketorch/selftest.py)"
	@$(MAKE) --no-print-directory faketorch-check
	@echo "== GPU test scripts (dry run on the fake stack)"
	@bash tests/gpu/script_check.sh $(abspath $(BUILD))

FORCE:

.PHONY: gpu-build gpu-test gpu-script-check FORCE

