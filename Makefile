# Two entry points, both self-sufficient on a fresh machine with Python 3.11 and make:
#   make run   -> the manager against an embedded local cluster (demo)
#   make test  -> ruff, mypy, import-linter contracts and pytest; with KUBEBUILDER_ASSETS set (a folder
#                 holding kube-apiserver and etcd, envtest's convention) the [real] tests run on a real
#                 control plane too: export KUBEBUILDER_ASSETS=$$(../shared/realk8s/assets.sh)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint typecheck contracts pytest venv clean bench

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

venv: $(STAMP)

run: $(STAMP)
	$(BIN)/aiokcm run --embedded $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

contracts: $(STAMP)
	$(BIN)/lint-imports

# Most of the suite waits on servers and timers, not the CPU, so it runs on xdist workers; tests that
# share one control plane across a module carry an xdist_group and stay on one worker. The fault
# tests compare recovery times with the real KCM's, a restarted aiokcm against a restarted KCM: run
# beside the other workers, aiokcm's Python start lost seconds that KCM's did not (5.1 s against
# 2.4 s at best in one run), so they run first, alone on the machine.
PYTEST_WORKERS ?= 4
FAULT_TESTS := tests/real/test_faults.py

PYTEST_FAULTS = $(BIN)/python -m pytest $(FAULT_TESTS) $(PYTEST_ARGS)
PYTEST_REST = $(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadgroup --durations=25 --ignore=$(FAULT_TESTS) $(PYTEST_ARGS)

pytest: $(STAMP)
	$(PYTEST_FAULTS)
	$(PYTEST_REST)

# ruff first (seconds), then the fault tests alone. mypy and the import contracts (which have no
# cache in a fresh clone) run beside the rest of pytest, not beside the fault tests' timings;
# their output comes after pytest's, and any of them failing fails `make test`.
CHECKS_LOG := $(VENV)/checks.log

test: lint $(STAMP)
	$(PYTEST_FAULTS)
	@echo "$(PYTEST_REST)   (beside it: make typecheck contracts > $(CHECKS_LOG))"
	@$(MAKE) --no-print-directory -f $(firstword $(MAKEFILE_LIST)) typecheck contracts >$(CHECKS_LOG) 2>&1 & checks=$$!; \
	$(PYTEST_REST); tests=$$?; \
	wait $$checks; checked=$$?; \
	echo "== make typecheck contracts, run beside pytest (exit $$checked):"; cat $(CHECKS_LOG); \
	[ $$tests -eq 0 ] && [ $$checked -eq 0 ]

# Every benchmark at its default size, one after another, each printing a table and one JSON line
# (`make bench BENCHES="drain manager"` picks some, BENCH_ARGS passes flags). bench.faults and
# bench.memory run on a real control plane: export KUBEBUILDER_ASSETS first.
BENCHES ?= workqueue worker informer apiserver cluster replicaset tainteviction drain drain_statefulset manager chaos failover

bench: $(STAMP)
	@set -e; for b in $(BENCHES); do echo "== python -m bench.$$b $(BENCH_ARGS)"; $(BIN)/python -m bench.$$b $(BENCH_ARGS); done

clean:
	rm -rf $(VENV) build *.egg-info
