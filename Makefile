# Two entry points, both self-sufficient on a fresh machine with Python 3.11 and make:
#   make run   -> the manager against an embedded local cluster (demo)
#   make test  -> ruff, mypy, import-linter contracts and pytest; with KUBEBUILDER_ASSETS set (a folder
#                 holding kube-apiserver and etcd, envtest's convention) the [real] tests run on a real
#                 control plane too: export KUBEBUILDER_ASSETS=$$(../shared/realk8s/assets.sh)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint typecheck contracts bytecode pytest venv clean bench

# Bytecode caches on, whatever the machine says (some set PYTHONDONTWRITEBYTECODE): the suite starts
# many Python processes (each xdist worker imports every test module, each story its own manager),
# and without the caches each one compiles the project again and pytest rewrites every test
# module's asserts again. They go to __pycache__, which git ignores.
export PYTHONDONTWRITEBYTECODE :=

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

# Fills the bytecode caches for the whole suite in one process, so that the xdist workers that
# start together afterwards each load them instead of all compiling the same modules at once.
bytecode: $(STAMP)
	$(BIN)/python -m pytest --collect-only -qq -p no:cacheprovider

# Most of the suite waits on servers and timers, not the CPU, so it runs on xdist workers; tests that
# share one control plane across a module carry an xdist_group and stay on one worker. The fault
# tests compare recovery times with the real KCM's, a restarted aiokcm against a restarted KCM: run
# beside the other workers, aiokcm's Python start lost seconds that KCM's did not (5.1 s against
# 2.4 s at best in one run), so they run first, alone on the machine (but for `nice -n 19` work: see `test`).
PYTEST_WORKERS ?= 4
FAULT_TESTS := tests/real/test_faults.py

PYTEST_FAULTS = $(BIN)/python -m pytest $(FAULT_TESTS) $(PYTEST_ARGS)
PYTEST_REST = $(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadgroup --durations=25 --ignore=$(FAULT_TESTS) $(PYTEST_ARGS)

pytest: $(STAMP)
	$(PYTEST_FAULTS)
	$(PYTEST_REST)

# ruff first (seconds), then the fault tests, alone but for `nice -n 19` work that takes only the
# CPU they leave idle (they wait on restarts more than they compute): mypy and the import
# contracts (no cache in a fresh clone) and the suite's bytecode. Their output comes after
# pytest's, and any of them failing fails `make test`; the fault tests failing skips the rest.
CHECKS_LOG := $(VENV)/checks.log
BESIDE_FAULTS := typecheck contracts bytecode

test: lint $(STAMP)
	@echo "$(PYTEST_FAULTS)   (beside it: nice -n 19 make $(BESIDE_FAULTS) > $(CHECKS_LOG))"
	@nice -n 19 $(MAKE) --no-print-directory -f $(firstword $(MAKEFILE_LIST)) $(BESIDE_FAULTS) >$(CHECKS_LOG) 2>&1 & checks=$$!; \
	$(PYTEST_FAULTS); tests=$$?; \
	if [ $$tests -eq 0 ]; then echo "$(PYTEST_REST)"; $(PYTEST_REST); tests=$$?; fi; \
	wait $$checks; checked=$$?; \
	echo "== nice -n 19 make $(BESIDE_FAULTS), run beside the fault tests (exit $$checked):"; cat $(CHECKS_LOG); \
	[ $$tests -eq 0 ] && [ $$checked -eq 0 ]

# Every benchmark at its default size, one after another, each printing a table and one JSON line
# (`make bench BENCHES="drain manager"` picks some, BENCH_ARGS passes flags). bench.faults and
# bench.memory run on a real control plane: export KUBEBUILDER_ASSETS first.
BENCHES ?= workqueue worker clients informer apiserver cluster replicaset tainteviction drain drain_statefulset manager chaos failover

bench: $(STAMP)
	@set -e; for b in $(BENCHES); do echo "== python -m bench.$$b $(BENCH_ARGS)"; $(BIN)/python -m bench.$$b $(BENCH_ARGS); done

clean:
	rm -rf $(VENV) build *.egg-info
