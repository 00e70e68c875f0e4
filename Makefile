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

# `--no-compile`: pip would compile every module of every dependency (10 s of the 34 s an install
# takes); the first import compiles only the modules in use, and `make test` imports the suite's
# once (`bytecode`) before its workers start.
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --no-compile -e '.[dev]'
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
# beside the other workers at the same priority, aiokcm's Python start lost seconds that KCM's did
# not (5.1 s against 2.4 s at best in one run). So `test` runs them at the normal priority and the
# rest beside them under `nice -n $(REST_NICE)`: the fault tests get the CPU whenever they want it,
# and the rest takes what they leave. Six workers, not four: most tests wait on timers and servers,
# and the 2 cores were a third idle under four. Fresh clones, one afternoon: the fault tests 108 s
# then the rest 448 s on four workers; at once, the rest under `nice -n 10`, 112 s beside 406 s on
# four, 125-148 s beside 369-373 s on six (one scenario needed its third try); under `nice -n 19`,
# 109 s beside 406 s on six.
PYTEST_WORKERS ?= 6
REST_NICE ?= 19
FAULT_TESTS := tests/real/test_faults.py

PYTEST_FAULTS = $(BIN)/python -m pytest $(FAULT_TESTS) $(PYTEST_ARGS)
PYTEST_REST = $(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadgroup --durations=25 --ignore=$(FAULT_TESTS) $(PYTEST_ARGS)

pytest: $(STAMP)
	$(PYTEST_FAULTS)
	$(PYTEST_REST)

# ruff first (seconds); then the fault tests, started at once with their output kept for the end,
# and mypy and the import contracts under `nice -n 19` (no cache in a fresh clone); the suite's
# bytecode (10 s), so that the xdist workers load it instead of each compiling every module; then
# the rest (see above). Any of them failing fails `make test`.
FAULTS_LOG := $(VENV)/faults.log
CHECKS_LOG := $(VENV)/checks.log
# When make began, before the venv is made: the time `test` prints at its end counts the set-up too.
STARTED := $(shell date +%s)
CHECKS := typecheck contracts

test: lint $(STAMP)
	@echo "$(PYTEST_FAULTS) > $(FAULTS_LOG)   (beside it: nice -n 19 make $(CHECKS) > $(CHECKS_LOG))"
	@$(PYTEST_FAULTS) >$(FAULTS_LOG) 2>&1 & faults=$$!; \
	nice -n 19 $(MAKE) --no-print-directory -f $(firstword $(MAKEFILE_LIST)) $(CHECKS) >$(CHECKS_LOG) 2>&1 & checks=$$!; \
	$(MAKE) --no-print-directory -f $(firstword $(MAKEFILE_LIST)) bytecode >/dev/null; \
	echo "nice -n $(REST_NICE) $(PYTEST_REST)"; nice -n $(REST_NICE) $(PYTEST_REST); tests=$$?; \
	wait $$faults; faulted=$$?; \
	echo "== $(PYTEST_FAULTS), run beside the rest (exit $$faulted):"; cat $(FAULTS_LOG); \
	wait $$checks; checked=$$?; \
	echo "== nice -n 19 make $(CHECKS) (exit $$checked):"; cat $(CHECKS_LOG); \
	took=$$(( $$(date +%s) - $(STARTED) )); echo "== make test took $$((took / 60))m$$((took % 60))s, set-up included"; \
	[ $$tests -eq 0 ] && [ $$faulted -eq 0 ] && [ $$checked -eq 0 ]

# Every benchmark at its default size, one after another, each printing a table and one JSON line
# (`make bench BENCHES="drain manager"` picks some, BENCH_ARGS passes flags). bench.faults and
# bench.memory run on a real control plane: export KUBEBUILDER_ASSETS first.
BENCHES ?= workqueue worker clients informer apiserver cluster replicaset tainteviction drain drain_statefulset manager chaos failover

bench: $(STAMP)
	@set -e; for b in $(BENCHES); do echo "== python -m bench.$$b $(BENCH_ARGS)"; $(BIN)/python -m bench.$$b $(BENCH_ARGS); done

clean:
	rm -rf $(VENV) build *.egg-info
