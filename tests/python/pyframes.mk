# pyframes.mk - what the `pyframes` integration suite
# (tests/integration/test_pyframes.c) needs besides the usual build:
#
#   $(BUILD)/python/3.X/cutrace_nogil<EXT_SUFFIX>
#                 tests/python/ext/cutrace_nogil.c, a C extension that calls
#                 the fake runtime with the GIL released, built per installed
#                 interpreter (tests/python/pythons.sh) against that
#                 interpreter's own headers; its stamp cutrace_nogil.built is
#                 the make target (the file name comes from the interpreter)
#   $(BUILD)/asan/libcutrace.so
#                 the preload built from preload/preload.mk's sources with
#                 $(ASAN_FLAGS), for the suite's stress test
#   python-pyframes-prep
#                 all of the above; the integration tests depend on it
#
# Python headers are used only here, at test time: the product has no
# Python build dependency. An interpreter pythons.sh does not find gets no
# extension; the suite says so when it runs ("skipped: ...").

PYF_DIR := $(BUILD)/python

# "3.10@/path/to/python3.10 3.11@..." (pythons.sh prints "VERSION PATH").
PYF_PYTHONS  := $(shell sh tests/python/pythons.sh 2>/dev/null | tr ' ' '@')
PYF_VERSIONS := $(foreach p,$(PYF_PYTHONS),$(firstword $(subst @, ,$(p))))
pyf_python    = $(word 2,$(subst @, ,$(filter $(1)@%,$(PYF_PYTHONS))))
PYF_EXT_STAMPS := $(PYF_VERSIONS:%=$(PYF_DIR)/%/cutrace_nogil.built)

# The interpreter's include directories (pyconfig.h may sit in platinclude)
# and the file name it imports extensions by.
PYF_EXT_INFO_PY := import sysconfig; p = sysconfig.get_paths(); \
	print("-isystem", p["include"], "-isystem", p["platinclude"]); \
	print(sysconfig.get_config_var("EXT_SUFFIX"))

# -isystem keeps CPython's and CUDA's headers out of our warnings; the
# extension itself builds under the project's. Not linked with libpython:
# the interpreter that imports it provides the symbols.
PYF_EXT_CFLAGS = $(CSTD) $(WARN) -g -O2 -D_GNU_SOURCE -fPIC -shared -isystem $(CUDA_INC)

$(PYF_DIR)/%/cutrace_nogil.built: tests/python/ext/cutrace_nogil.c $(FAKE_LIBS)
	@mkdir -p $(@D)
	@py='$(call pyf_python,$*)'; \
	if [ -z "$$py" ]; then echo "pyframes.mk: no CPython $* (tests/python/pythons.sh)"; exit 1; fi; \
	info=$$("$$py" -c '$(PYF_EXT_INFO_PY)' </dev/null) || \
	    { echo "pyframes.mk: $$py does not tell its include directory"; exit 1; }; \
	inc=$$(echo "$$info" | sed -n 1p); suffix=$$(echo "$$info" | sed -n 2p); \
	echo "$(CC) ... $< -> $(@D)/cutrace_nogil$$suffix ($$py)"; \
	$(CC) $(PYF_EXT_CFLAGS) $$inc $< -o $(@D)/cutrace_nogil$$suffix \
	    -L$(FAKE_OUT) -lcudart -lpthread && \
	echo "$$py $(@D)/cutrace_nogil$$suffix" >$@

# The ASan+UBSan preload: the same sources and link line as
# $(BUILD)/libcutrace.so, objects of its own. One exception: the preload
# overrides dlsym, and ASan's own start-up looks its interceptors up with
# dlsym(RTLD_NEXT, ...) before its shadow memory exists, which runs
# ct_dlsym_init (resolve.c) then: an address-instrumented load there
# faults, in every process. So resolve.c has UBSan only.
PYF_ASAN_OBJ_DIR := $(BUILD)/asan/preload-obj
PYF_ASAN_OBJ := $(PRELOAD_SRC:%.c=$(PYF_ASAN_OBJ_DIR)/%.o) \
                $(PRELOAD_ASM:%.S=$(PYF_ASAN_OBJ_DIR)/%.o) $(SCHEMA_IMAGE_OBJ)
PYF_ASAN_EXCEPT :=
$(PYF_ASAN_OBJ_DIR)/preload/core/resolve.o: PYF_ASAN_EXCEPT := -fno-sanitize=address

$(PYF_ASAN_OBJ_DIR)/preload/%.o: preload/%.c
	@mkdir -p $(@D)
	$(CC) $(PRELOAD_CFLAGS) $(ASAN_FLAGS) $(PYF_ASAN_EXCEPT) -MMD -MP -c $< -o $@

$(PYF_ASAN_OBJ_DIR)/preload/%.o: preload/%.S
	@mkdir -p $(@D)
	$(CC) -fPIC -c $< -o $@

$(BUILD)/asan/libcutrace.so: $(PYF_ASAN_OBJ)
	$(CC) $(ASAN_FLAGS) -shared -o $@ $^ -Wl,-z,defs -Wl,--exclude-libs,ALL \
		-Wl,-Bsymbolic-functions -Wl,-soname,libcutrace.so $(PRELOAD_LDLIBS)

-include $(PYF_ASAN_OBJ:.o=.d)

.PHONY: python-pyframes-prep
python-pyframes-prep: $(PYF_EXT_STAMPS) $(BUILD)/asan/libcutrace.so
