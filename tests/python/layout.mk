# layout.mk - `make python-layout-check`: the CPython layout tables of
# preload/core/pylayout.c against every installed interpreter 3.10-3.14
# (tests/python/pythons.sh; a version it does not find is said "skipped").
#
# Per interpreter, under $(BUILD)/python/3.X/:
#   layout_probe      tests/python/layout_probe.c built with that
#                     interpreter's own headers (-DPy_BUILD_CORE, internal/);
#                     prints every field of struct ct_py_layout
#   probe.txt         its output, which layout_check compares with the table
# and then, inside the interpreter, tests/python/layout_check.py loads
# liblayout_check.so to check the published debug offsets (3.13+) and a
# walk of its own frames. Any difference fails the target.
#
# Only here are Python headers used: the product has no Python build
# dependency, and these are built at test time only.

PYL_DIR   := $(BUILD)/python
PYL_CHECK := $(PYL_DIR)/layout_check
PYL_SO    := $(PYL_DIR)/liblayout_check.so
PYL_SRC   := tests/python/layout_check.c preload/core/pylayout.c
PYL_DEPS  := $(PYL_SRC) preload/core/pylayout.h include/cutrace/format.h

# The interpreter's header directories: its include and platinclude (where
# pyconfig.h is), internal/ for the frame and runtime structures, and the
# directory above include, which Debian's multiarch pyconfig.h wrapper
# includes from (<x86_64-linux-gnu/python3.X/pyconfig.h>).
PYL_INCLUDES_PY := import os, sysconfig; p = sysconfig.get_paths(); \
	i = p["include"]; \
	print(" ".join("-isystem " + d for d in (i, i + "/internal", p["platinclude"], os.path.dirname(i))))

# -isystem keeps CPython's own headers out of our warnings; the probe itself
# builds under the project's.
PYL_PROBE_CFLAGS = $(CSTD) $(WARN) -g -O0 -D_GNU_SOURCE -Iinclude -DPy_BUILD_CORE

$(PYL_CHECK): $(PYL_DEPS)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(PYL_SRC) -o $@

$(PYL_SO): $(PYL_DEPS)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -DLAYOUT_CHECK_SO -fPIC -shared $(PYL_SRC) -o $@

.PHONY: python-layout-check
python-layout-check: $(PYL_CHECK) $(PYL_SO)
	@echo "== CPython layout tables against the installed interpreters"
	@mkdir -p $(PYL_DIR)
	@sh tests/python/pythons.sh >$(PYL_DIR)/pythons.txt
	@status=0; n=0; \
	while read -r ver py; do \
	    n=$$((n + 1)); dir=$(PYL_DIR)/$$ver; mkdir -p $$dir; \
	    inc=$$("$$py" -c '$(PYL_INCLUDES_PY)' </dev/null) || \
	        { echo "FAIL $$ver: $$py does not tell its include directory"; status=1; continue; }; \
	    hdr=$$(echo $$inc | cut -d' ' -f2)/Python.h; \
	    if [ ! -f "$$hdr" ]; then \
	        echo "skipped: CPython $$ver ($$py) has no headers ($$hdr): install its -dev package"; \
	        continue; fi; \
	    $(CC) $(PYL_PROBE_CFLAGS) $$inc tests/python/layout_probe.c -o $$dir/layout_probe </dev/null || \
	        { echo "FAIL $$ver: layout_probe.c does not build against $$py's headers"; status=1; continue; }; \
	    $$dir/layout_probe >$$dir/probe.txt </dev/null || \
	        { echo "FAIL $$ver: layout_probe failed"; status=1; continue; }; \
	    $(PYL_CHECK) $$ver $$dir/probe.txt </dev/null || status=1; \
	    "$$py" tests/python/layout_check.py $(PYL_SO) </dev/null || status=1; \
	done <$(PYL_DIR)/pythons.txt; \
	if [ $$n -eq 0 ]; then echo "skipped: python-layout-check found no CPython 3.10-3.14"; fi; \
	exit $$status
