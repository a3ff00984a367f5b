# kctl: `make run` and `make test` do all the set-up they need on a fresh machine.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# The demo uses its own store under .state/ unless KCTL_STORE says otherwise.
export KCTL_STORE ?= $(CURDIR)/.state/kctl.db

.PHONY: run test unit bench bench-agent schemas clean help system stop

help:
	@echo "make run    - install what is missing, start kctl daemon, apply examples/, show the web pod"
	@echo "make stop   - delete the demo's objects and stop the daemon make run started"
	@echo "make test   - install what is missing, run the whole test suite"
	@echo "make bench  - run the benchmarks (figures go to docs/benchmarks.md)"

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]' --config-settings editable_mode=compat
	$(BIN)/python -m compileall -q kctl $(VENV)/lib >/dev/null || true
	touch $(STAMP)

run: system $(STAMP)
	tools/demo.sh up

stop: $(STAMP)
	tools/demo.sh down

system:
	tools/install-system-deps.sh

test: system $(STAMP)
	$(BIN)/python -m pytest tests/

unit: $(STAMP)
	$(BIN)/python -m pytest tests/unit

bench: $(STAMP)
	$(BIN)/python benchmarks/run.py

bench-agent: system $(STAMP)
	$(BIN)/python benchmarks/agent.py

schemas: $(STAMP)
	$(BIN)/pip install --quiet kubernetes-validate
	$(BIN)/python tools/gen_schemas.py

clean: stop
	rm -rf $(VENV) .state
