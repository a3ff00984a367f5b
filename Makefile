# kctl: `make run` and `make test` do all the set-up they need on a fresh machine.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# The demo uses its own store under .state/ unless KCTL_STORE says otherwise.
export KCTL_STORE ?= $(CURDIR)/.state/kctl.db

.PHONY: run test unit bench schemas clean help system stop

help:
	@echo "make run    - install what is missing, apply examples/ to the embedded store, show it"
	@echo "make test   - install what is missing, run the whole test suite"
	@echo "make bench  - run the benchmarks (figures go to docs/benchmarks.md)"

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]' --config-settings editable_mode=compat
	$(BIN)/python -m compileall -q kctl $(VENV)/lib >/dev/null || true
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/kctl apply -f examples/web/
	sed "s|@HOOKS_DIR@|$(CURDIR)/examples/hooks|" examples/hooks/hooks.yaml | $(BIN)/kctl apply -f -
	$(BIN)/kctl get namespaces
	$(BIN)/kctl get all -n demo -o wide
	$(BIN)/kctl get configmaps,services -n demo
	$(BIN)/kctl get mutatingadmissionhooks,validatingadmissionhooks

system:
	tools/install-system-deps.sh

test: system $(STAMP)
	$(BIN)/python -m pytest tests/

unit: $(STAMP)
	$(BIN)/python -m pytest tests/unit

bench: $(STAMP)
	$(BIN)/python benchmarks/run.py

schemas: $(STAMP)
	$(BIN)/pip install --quiet kubernetes-validate
	$(BIN)/python tools/gen_schemas.py

clean:
	rm -rf $(VENV) .state
