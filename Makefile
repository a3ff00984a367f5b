# kctl: `make run` and `make test` do all the set-up they need on a fresh machine.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# The demo uses its own store under .state/ unless KCTL_STORE says otherwise.
export KCTL_STORE ?= $(CURDIR)/.state/kctl.db

.PHONY: run test lint test-faults unit bench bench-agent schemas clean help system stop testbed-up testbed-down

help:
	@echo "make run    - install what is missing, start kctl daemon, apply examples/, show the web pod"
	@echo "make stop   - delete the demo's objects and stop the daemon make run started"
	@echo "make test   - install what is missing, run ruff (make lint) and the whole test suite"
	@echo "make lint   - ruff check (pyflakes, pycodestyle; [tool.ruff] in pyproject.toml)"
	@echo "make test-faults - the fault suite on the test bed (cuts, a partition, a re-keyed host; root)"
	@echo "make bench  - run the benchmarks (figures go to docs/benchmarks.md)"
	@echo "make testbed-up   - start 3 Podman hosts reached over SSH on this machine (network namespaces; root)"
	@echo "                    CONTROL=3: also 3 control hosts running a 3-member etcd cluster (docs/ha.md)"
	@echo "make testbed-down - remove the test bed (its hosts, containers, links and folder)"

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

# ruff first: a lint error stops `make test` before the suite's minutes. Then two pytest runs, both always:
# tests/unit and tests/cli in TEST_WORKERS processes (pytest-xdist; each test has its own temporary store),
# then the rest (real Podman, sshd, the test bed: shared services) in one process. Fails if either failed.
TEST_WORKERS ?= 3
test: system $(STAMP) lint
	parallel=0; serial=0; \
	$(BIN)/python -m pytest -n $(TEST_WORKERS) tests/unit tests/cli || parallel=$$?; \
	$(BIN)/python -m pytest tests/ --ignore=tests/unit --ignore=tests/cli || serial=$$?; \
	echo "make test: tests/unit + tests/cli exit $$parallel; the rest of tests/ exit $$serial"; \
	[ $$parallel -eq 0 ] && [ $$serial -eq 0 ]

lint: $(STAMP)
	$(BIN)/ruff check kctl tests benchmarks tools

unit: $(STAMP)
	$(BIN)/python -m pytest tests/unit

# The fault suite on the test bed (root): short cuts, a 40 s partition, a changed host key.
test-faults: system $(STAMP)
	$(BIN)/python -m pytest -m faults tests/e2e

bench: $(STAMP)
	$(BIN)/python benchmarks/run.py

bench-agent: system $(STAMP)
	$(BIN)/python benchmarks/agent.py

# Several hosts on this machine for trying kctl's multi-host side (kctl/testing/testbed.py);
# it prints the `kctl node add` lines. Its folder: .state/testbed. CONTROL=3 adds control hosts
# c1-c3 with a 3-member TLS etcd cluster and prints the --store etcd://... and daemon lines.
CONTROL ?= 0
testbed-up: system $(STAMP)
	$(BIN)/python -m kctl.testing.testbed up -n 3 --control $(CONTROL)

testbed-down: $(STAMP)
	$(BIN)/python -m kctl.testing.testbed down

schemas: $(STAMP)
	$(BIN)/pip install --quiet kubernetes-validate
	$(BIN)/python tools/gen_schemas.py

clean: stop testbed-down
	rm -rf $(VENV) .state
