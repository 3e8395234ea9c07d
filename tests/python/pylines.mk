# pylines.mk - preload/core/pylines.c against the real interpreters.
#
#   python-pylines-check  for every CPython that tests/python/pythons.sh finds
#                         (3.10 to 3.14), pylines_dump.py prints what
#                         PyCode_Addr2Line() says for every instruction offset
#                         of thousands of code objects and pylines_check
#                         decodes the same tables, whole and cut; fails on any
#                         difference, and says which versions were skipped.
#                         About 5 s a version.

PYLINES_CHECK := $(BUILD)/tests/python/pylines_check

$(PYLINES_CHECK): tests/python/pylines_check.c preload/core/pylines.c include/cutrace/pylines.h \
                  include/cutrace/format.h
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ tests/python/pylines_check.c preload/core/pylines.c

# The dumps stay in $(BUILD)/tests/python (pylines-3.X.txt) for a look at a
# failure; pythons.sh's "skipped: ..." lines are repeated at the end so that
# they are not lost above the counts.
python-pylines-check: $(PYLINES_CHECK)
	@echo "== Python line tables against CPython's own PyCode_Addr2Line()"
	@set -e; dir=$(BUILD)/tests/python; found=0; \
	sh tests/python/pythons.sh > $$dir/pythons.txt 2> $$dir/pythons-skipped.txt; \
	while read -r ver py; do \
		found=1; \
		"$$py" -I tests/python/pylines_dump.py > $$dir/pylines-$$ver.txt; \
		$(PYLINES_CHECK) $$dir/pylines-$$ver.txt; \
	done < $$dir/pythons.txt; \
	cat $$dir/pythons-skipped.txt; \
	if [ $$found = 0 ]; then echo "skipped: no CPython 3.10-3.14 found, line tables not checked"; fi

.PHONY: python-pylines-check
