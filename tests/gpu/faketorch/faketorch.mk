# tests/gpu/faketorch/faketorch.mk - the native half of the fake `torch`
# package (tests/gpu/faketorch/torch), for the real-GPU test's dry run on the
# fake CUDA stack (see tests/gpu/faketorch/README.md).
#
#   make faketorch        builds $(FAKETORCH_LIBS)
#   make faketorch-check  runs tests/gpu/faketorch/selftest.py, plain and traced
#
# libc10_cuda.so   the caching allocators and CUDA IPC; links the fake
#                  libcudart.so.12 (never libcuda: its driver calls come from
#                  cudaGetDriverEntryPointByVersion, as c10's DriverAPI does).
# libtorch_cuda.so streams, copies, graphs and ProcessGroupNCCL's calls; links
#                  the fake libcudart.so.12 and libnccl.so.2.
# Both take -z defs, so a stray reference fails the link; neither has an
# rpath: run with LD_LIBRARY_PATH=$(FAKE_OUT), as the package expects.

FAKETORCH_DIR  := tests/gpu/faketorch
FAKETORCH_OUT  := $(BUILD)/gpu/faketorch
FAKETORCH_LIBS := $(FAKETORCH_OUT)/lib/libc10_cuda.so $(FAKETORCH_OUT)/lib/libtorch_cuda.so

FAKETORCH_CFLAGS = $(ALL_CFLAGS) -fPIC -isystem $(CUDA_INC) -MMD -MP

all: $(FAKETORCH_LIBS)

$(FAKETORCH_OUT)/obj $(FAKETORCH_OUT)/lib:
	@mkdir -p $@

$(FAKETORCH_OUT)/obj/%.o: $(FAKETORCH_DIR)/%.c | $(FAKETORCH_OUT)/obj
	$(CC) $(FAKETORCH_CFLAGS) -c $< -o $@

$(FAKETORCH_OUT)/lib/libc10_cuda.so: $(FAKETORCH_OUT)/obj/c10_cuda.o $(FAKE_OUT)/libcudart.so \
                                     | $(FAKETORCH_OUT)/lib
	$(CC) -shared -Wl,-soname,libc10_cuda.so -Wl,-z,defs -o $@ $< -L$(FAKE_OUT) -lcudart -lpthread

$(FAKETORCH_OUT)/lib/libtorch_cuda.so: $(FAKETORCH_OUT)/obj/torch_cuda.o $(FAKE_OUT)/libcudart.so \
                                       $(FAKE_OUT)/libnccl.so | $(FAKETORCH_OUT)/lib
	$(CC) -shared -Wl,-soname,libtorch_cuda.so -Wl,-z,defs -o $@ $< -L$(FAKE_OUT) -lcudart -lnccl

faketorch: $(FAKETORCH_LIBS)

faketorch-check: $(FAKETORCH_LIBS) $(FAKE_LIBS) $(BUILD)/cutrace $(BUILD)/libcutrace.so
	@BUILD=$(abspath $(BUILD)) python3 $(FAKETORCH_DIR)/selftest.py --build $(abspath $(BUILD))

.PHONY: faketorch faketorch-check

-include $(wildcard $(FAKETORCH_OUT)/obj/*.d)
