# Set-up and everyday tasks. Only Python 3.10+ is needed: everything else goes into .venv.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Two stamps: spanfix and what it needs to run (all that the demo installs), then the test tools too.
RUNTIME := $(VENV)/.runtime
STAMP := $(VENV)/.installed

.PHONY: demo test bench fuzz lint fixtures clean

# --no-compile: Python compiles what is imported when it is first imported; compiling every module of
# every package at install time (most never imported) took a good part of the install.
PIP := $(BIN)/python -m pip install --quiet --disable-pip-version-check --no-compile
# uv resolves and installs the same packages as pip in about a quarter of the time (a fresh clone's test
# install: 34 s with pip, 9 s with uv, docs/testing.md). It comes from PyPI into .venv itself; where it
# cannot be had (no network to PyPI, only the machine's own pip index), pip installs as before.
WITH_TESTS := '.[test,test-remote]'
INSTALL = { $(PIP) uv >/dev/null 2>&1 && $(BIN)/uv pip install --quiet --python $(BIN)/python $(1); } || $(PIP) $(1)

# The bytecode of spanfix and the packages it runs on, written once: where PYTHONDONTWRITEBYTECODE is
# set, no import writes it and every command compiled them again (spanfix/runtime/bytecode.py says why).
COMPILE = $(BIN)/python -m spanfix.runtime.bytecode

$(RUNTIME): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(call INSTALL,-e .)
	$(COMPILE)
	touch $(RUNTIME)

# The test tools, and the extras the URL and --scheduler tests need (moto's S3 server, fsspec, Dask):
# with them every test runs, but those that need Chromium or ../shared/traces (each skip says why).
# One pip run for spanfix and all of these (it installs what $(RUNTIME) has, so it stamps that too):
# on a fresh clone, a second run's resolving and building cost as much again.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(call INSTALL,-e $(WITH_TESTS))
	$(COMPILE)
	touch $(RUNTIME) $(STAMP)

## Relabel a bundled speculative-decoding fixture and print the summary (installs spanfix alone).
demo: $(RUNTIME)
	mkdir -p build
	$(BIN)/spanfix relabel fixtures/eagle-stock.trace.json.gz -o build/eagle-stock.trace.relabeled.json.gz
	$(BIN)/spanfix stats fixtures/eagle-stock.trace.json.gz
	@echo
	@echo "spanfix is installed in $(VENV): run it as $(BIN)/spanfix, or first: source $(BIN)/activate"
	@echo "Next: spanfix stats YOUR-TRACE.json.gz, spanfix relabel YOUR-TRACE.json.gz (README.md: Quick start)"

## Install the test dependencies and run the whole suite (-rs: why a test was skipped, e.g. no Chromium)
## on every core and one more (JOBS=0: all in this one process; JOBS=2: two workers). docs/testing.md says what it costs.
# One worker more than the cores: a third of the suite's time is spent waiting (on servers, the processes
# it starts, capture's looks at a folder), and the extra worker runs tests meanwhile: on 2 cores, a fresh
# clone's make test took 190 s with two workers, 165 s with three.
JOBS ?= $(shell $(PYTHON) -c "import os; print(len(getattr(os, 'sched_getaffinity', lambda _: range(os.cpu_count() or 1))(0)) + 1)")
# PYTHONDONTWRITEBYTECODE (set on this machine, and installs here use --no-compile) made every one of the
# ~600 spanfix processes the tests start compile spanfix, click and rich again: 0.35 s of its 0.65 s. Unset
# for the tests, the first import of each module writes its bytecode and every later process reads it.
test: $(STAMP)
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -q -rs -n $(JOBS) --dist loadgroup

## Speed and memory side by side with the naive scripts (docs/performance.md).
bench: $(STAMP)
	$(BIN)/python bench/run.py

## Bounded fuzz run of the reader over mutated real traces.
fuzz: $(STAMP)
	$(BIN)/python tests/fuzz_reader.py

lint: $(STAMP)
	$(BIN)/python -m pip install --quiet ruff
	$(BIN)/ruff check spanfix tests bench fixtures

## Regenerate the bundled fixtures and their golden outputs.
fixtures: $(STAMP)
	$(BIN)/python fixtures/generate.py

clean:
	rm -rf $(VENV) build .pytest_cache
