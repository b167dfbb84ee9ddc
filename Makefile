# Set-up and everyday tasks. Only Python 3.10+ is needed: everything else goes into .venv.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Two stamps: spanfix and what it needs to run (all that the demo installs), then the test tools too.
RUNTIME := $(VENV)/.runtime
STAMP := $(VENV)/.installed

.PHONY: demo test bench fuzz lint fixtures clean

$(RUNTIME): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e .
	touch $(RUNTIME)

# The test tools, and the extras the URL and --scheduler tests need (moto's S3 server, fsspec, Dask):
# with them every test runs, but those that need Chromium or ../shared/traces (each skip says why).
$(STAMP): $(RUNTIME)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test,test-remote]'
	touch $(STAMP)

## Relabel a bundled speculative-decoding fixture and print the summary (installs spanfix alone).
demo: $(RUNTIME)
	mkdir -p build
	$(BIN)/spanfix relabel fixtures/eagle-stock.trace.json.gz -o build/eagle-stock.trace.relabeled.json.gz
	$(BIN)/spanfix stats fixtures/eagle-stock.trace.json.gz
	@echo
	@echo "spanfix is installed in $(VENV): run it as $(BIN)/spanfix, or first: source $(BIN)/activate"
	@echo "Next: spanfix stats YOUR-TRACE.json.gz, spanfix relabel YOUR-TRACE.json.gz (README.md: Quick start)"

## Install the test dependencies and run the whole suite (-rs: why a test was skipped, e.g. no Chromium).
test: $(STAMP)
	$(BIN)/python -m pytest -q -rs

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
