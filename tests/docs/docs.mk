# docs.mk - make test's checks of what the user reads besides --help:
#
#   docs-tests   man/cutrace.1 against the code (check_man.py), the bash
#                completion (check_completion.py), docs/sql.md's queries on a
#                real packed run (check_sql.py), and make install / uninstall
#                into a scratch DESTDIR (check_install.sh)

.PHONY: docs-tests

docs-tests: $(BUILD)/cutrace $(BUILD)/libcutrace.so $(FAKE_LIBS) $(BUILD)/examples/tp_server_sim \
            $(BUILD)/progs/tp_collectives $(BUILD)/progs/rt_sequence
	@echo "== docs: man page, bash completion, docs/sql.md, install and uninstall"
	@python3 tests/docs/check_man.py $(CC)
	@python3 tests/docs/check_completion.py $(BUILD) $(CC)
	@python3 tests/docs/check_sql.py $(BUILD)
	@tests/docs/check_install.sh "$(MAKE)"
