# cutrace - top-level build.
#
#   make            build/libcutrace.so, build/cutrace, the fake GPU stack
#   make deps       install missing Debian packages (root) or say how
#   make test       unit tests (plain, ASan+UBSan, TSan) and integration tests
#   make demo       trace the example program on the simulated GPUs
#   make bench      hot-path cost as ratios against an untraced run; the analyzer's
#                   speed and memory on synthetic 8-rank runs against a plain scan
#   make fuzz       libFuzzer on the trace loader and recovery (FUZZ_SECONDS each; not in CI)
#   make gpu-test   cutrace on a real NVIDIA GPU (tests/gpu/README.md; GPU=required fails without one)
#   make install PREFIX=/usr/local     the tracer, the CLI, man page, bash completion, docs
#   make uninstall PREFIX=/usr/local   removes exactly what install installed
#
# Each part of the tree owns a fragment (preload/preload.mk, analyzer/analyzer.mk,
# tests/fake/fake.mk, tests/tests.mk, examples/examples.mk); this file only holds
# what they share.

CC        ?= gcc
CUDA_HOME ?= /usr/local/cuda
CUDA_INC  := $(CUDA_HOME)/include
PREFIX    ?= /usr/local
BUILD     := build
VERSION   := 0.1.0

# Warnings are errors everywhere; -fno-strict-aliasing because the hooks pass
# CUDA handles through uint64_t record fields.
CSTD      := -std=gnu11
WARN      := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wvla
BASE_CFLAGS := $(CSTD) $(WARN) -g -O2 -fno-strict-aliasing -D_GNU_SOURCE -Iinclude \
               -DCUTRACE_VERSION='"$(VERSION)"'
CFLAGS    ?=
ALL_CFLAGS = $(BASE_CFLAGS) $(CFLAGS)

# Sanitizer variants of the unit tests are built from the same sources.
ASAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
TSAN_FLAGS := -fsanitize=thread -fno-omit-frame-pointer

SQLITE_A  := $(firstword $(wildcard /usr/lib/x86_64-linux-gnu/libsqlite3.a /usr/lib/libsqlite3.a \
                                    /usr/lib64/libsqlite3.a))

.PHONY: all deps test demo bench install uninstall clean format check-format unit-tests integration-tests
all:

include preload/preload.mk
include analyzer/analyzer.mk
include tests/fake/fake.mk
include tests/tests.mk
include examples/examples.mk
include bench/bench.mk
include fuzz/fuzz.mk
include tests/gpu/gpu.mk
include tests/docs/docs.mk
# Checks run once per installed CPython (tests/python/pythons.sh says which).
include $(sort $(wildcard tests/python/*.mk))

deps:
	@scripts/deps.sh

$(BUILD):
	@mkdir -p $@

# What install puts under $(DESTDIR)$(PREFIX), and so exactly what uninstall
# removes (tests/docs/check_install.sh checks both): the tracer, the CLI, its
# man page, its bash completion (where bash-completion looks for it on demand)
# and the documentation. Only share/doc/cutrace is cutrace's own directory.
INSTALL_DOCS    := README.md $(sort $(wildcard docs/*.md))
INSTALL_DOC_DIR  = $(DESTDIR)$(PREFIX)/share/doc/cutrace
INSTALL_MAN      = $(DESTDIR)$(PREFIX)/share/man/man1/cutrace.1
INSTALL_BASH     = $(DESTDIR)$(PREFIX)/share/bash-completion/completions/cutrace

install: all
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/bin $(INSTALL_DOC_DIR) \
		$(dir $(INSTALL_MAN)) $(dir $(INSTALL_BASH))
	install -m 0755 $(BUILD)/libcutrace.so $(DESTDIR)$(PREFIX)/lib/libcutrace.so
	install -m 0755 $(BUILD)/cutrace $(DESTDIR)$(PREFIX)/bin/cutrace
	install -m 0644 man/cutrace.1 $(INSTALL_MAN)
	install -m 0644 completions/cutrace.bash $(INSTALL_BASH)
	install -m 0644 $(INSTALL_DOCS) $(INSTALL_DOC_DIR)/

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/lib/libcutrace.so $(DESTDIR)$(PREFIX)/bin/cutrace $(INSTALL_MAN) \
		$(INSTALL_BASH) $(addprefix $(INSTALL_DOC_DIR)/,$(notdir $(INSTALL_DOCS)))
	[ ! -d $(INSTALL_DOC_DIR) ] || rmdir --ignore-fail-on-non-empty $(INSTALL_DOC_DIR)

clean:
	rm -rf $(BUILD)

FORMAT_SOURCES = $(shell git ls-files '*.c' '*.h' 2>/dev/null)
format:
	clang-format -i $(FORMAT_SOURCES)
check-format:
	clang-format --dry-run --Werror $(FORMAT_SOURCES)
