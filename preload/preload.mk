# preload.mk - builds build/libcutrace.so, the LD_PRELOAD library.
#
# SQLite is linked in statically with its symbols hidden (--exclude-libs):
# the traced program may use its own, different SQLite (Python's sqlite3),
# and neither must see the other's.

PRELOAD_CORE_SRC  := $(wildcard preload/core/*.c)
PRELOAD_HOOK_SRC  := preload/hooks/hook_runtime.c preload/hooks/hook_driver.c \
                     preload/hooks/hook_nccl.c preload/hooks/hook_lookup.c \
                     preload/hooks/hook_process.c preload/hooks/hook_fds.c \
                     preload/hooks/hook_nvtx.c
PRELOAD_SRC       := $(PRELOAD_CORE_SRC) $(PRELOAD_HOOK_SRC)
PRELOAD_CFLAGS     = $(ALL_CFLAGS) -fPIC -fvisibility=hidden -isystem $(CUDA_INC)
PRELOAD_LDLIBS    := $(SQLITE_A) -ldl -lpthread -lm

PRELOAD_ASM       := preload/hooks/hook_dlsym.S
# The image of a new trace file (preload/core/schema_image.h), made at build
# time by the store's own code and the same SQLite.
SCHEMA_IMAGE_GEN  := $(BUILD)/tools/make_schema_image
SCHEMA_IMAGE_C    := $(BUILD)/gen/schema_image.c
SCHEMA_IMAGE_OBJ  := $(BUILD)/obj/gen/schema_image.o
PRELOAD_OBJ       := $(PRELOAD_SRC:%.c=$(BUILD)/obj/%.o) $(PRELOAD_ASM:%.S=$(BUILD)/obj/%.o) \
                     $(SCHEMA_IMAGE_OBJ)

# Every shared header, named: the image must follow any change of the schema
# (one -MF file cannot hold the dependencies of several sources).
$(SCHEMA_IMAGE_GEN): preload/tools/make_schema_image.c preload/core/store.c preload/core/pylines.c \
                     $(wildcard include/cutrace/*.h)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $(filter %.c,$^) $(SQLITE_A) -ldl -lpthread -lm

$(SCHEMA_IMAGE_C): $(SCHEMA_IMAGE_GEN)
	@mkdir -p $(@D)
	$(SCHEMA_IMAGE_GEN) $@

$(SCHEMA_IMAGE_OBJ): $(SCHEMA_IMAGE_C)
	@mkdir -p $(@D)
	$(CC) $(PRELOAD_CFLAGS) -Ipreload/core -c $< -o $@

$(BUILD)/obj/preload/%.o: preload/%.c
	@mkdir -p $(@D)
	$(CC) $(PRELOAD_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/obj/preload/%.o: preload/%.S
	@mkdir -p $(@D)
	$(CC) -fPIC -c $< -o $@

# -Bsymbolic-functions: the registry must hand out our own hooks, never a
# same-named function of another preloaded shim.
$(BUILD)/libcutrace.so: $(PRELOAD_OBJ)
	$(CC) -shared -o $@ $^ -Wl,-z,defs -Wl,--exclude-libs,ALL -Wl,-Bsymbolic-functions \
		-Wl,-soname,libcutrace.so $(PRELOAD_LDLIBS)

all: $(BUILD)/libcutrace.so

-include $(PRELOAD_OBJ:.o=.d)
