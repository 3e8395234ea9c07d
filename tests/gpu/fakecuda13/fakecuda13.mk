# tests/gpu/fakecuda13/fakecuda13.mk - a fake libcudart.so.13, so that the
# nvcc 13-built examples/real_gpu/real_gpu_check (linked to libcudart.so.13)
# runs on the fake stack in the GPU test's dry run.
#
#   $(FAKECUDA13_LIB)   $(BUILD)/gpu/fake13/libcudart.so.13: tests/fake/fake_runtime.c
#                       (built again with FAKE_RUNTIME_VERSION=13000) and
#                       nvcc_shim.c (the registration and launch glue nvcc's
#                       host code calls); every symbol under the version node
#                       libcudart.so.13 (libcudart13.map)
#
# Run the program with LD_LIBRARY_PATH=$(BUILD)/gpu/fake13:$(BUILD)/fake: its
# rpath is DT_RUNPATH, which LD_LIBRARY_PATH beats, so these fakes win over the
# toolkit's real libraries; libnccl.so.2 and libcuda.so.1 come from
# $(BUILD)/fake. Same link choices as the fake libcudart.so.12 (fake.mk): no
# DT_NEEDED on libcuda (dlopen()ed), -Bsymbolic-functions, -z defs.

FAKECUDA13_DIR := tests/gpu/fakecuda13
FAKECUDA13_OUT := $(BUILD)/gpu/fake13
FAKECUDA13_LIB := $(FAKECUDA13_OUT)/libcudart.so.13

FAKECUDA13_OBJS := $(FAKECUDA13_OUT)/obj/fake_runtime.o $(FAKECUDA13_OUT)/obj/nvcc_shim.o

$(FAKECUDA13_OUT)/obj:
	@mkdir -p $@

$(FAKECUDA13_OUT)/obj/fake_runtime.o: $(FAKE_DIR)/fake_runtime.c | $(FAKECUDA13_OUT)/obj
	$(CC) $(FAKE_CFLAGS) -DFAKE_RUNTIME_VERSION=13000 -c $< -o $@

$(FAKECUDA13_OUT)/obj/nvcc_shim.o: $(FAKECUDA13_DIR)/nvcc_shim.c | $(FAKECUDA13_OUT)/obj
	$(CC) $(FAKE_CFLAGS) -c $< -o $@

$(FAKECUDA13_LIB): $(FAKECUDA13_OBJS) $(FAKECUDA13_DIR)/libcudart13.map
	$(CC) -shared -Wl,-soname,libcudart.so.13 \
	    -Wl,--version-script=$(FAKECUDA13_DIR)/libcudart13.map \
	    -Wl,-Bsymbolic-functions -Wl,-z,defs -o $@ $(FAKECUDA13_OBJS) -ldl -lpthread

fakecuda13: $(FAKECUDA13_LIB)

.PHONY: fakecuda13

-include $(wildcard $(FAKECUDA13_OUT)/obj/*.d)
