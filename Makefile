# recallwatch: `make demo` runs the pipeline on a generated demo world; `make test` runs the
# whole suite. Both create the virtualenv (.venv) and install what they need.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: venv demo test test-fast bench lint browser strace clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

demo: venv
	$(BIN)/recallwatch demo

# Headless Chromium renders the report in the browser tests; install it where we may.
browser:
	@if [ ! -x /usr/bin/chromium ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing chromium for the report's browser tests"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	      || echo "could not install chromium: the browser tests will be skipped"; \
	  else \
	    echo "chromium is not installed (apt-get install chromium): the browser tests will be skipped"; \
	  fi; \
	fi

# strace stops a process at a chosen write (DuckDB's headers, an export, a report's rename) in
# tests/test_crash.py and tests/test_cli.py; install it where we may.
strace:
	@if ! command -v strace >/dev/null; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing strace for the tests that stop a process mid-write"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq strace >/dev/null) \
	      || echo "could not install strace: the tests that stop a process mid-write will be skipped"; \
	  else \
	    echo "strace is not installed (apt-get install strace): the tests that stop a process mid-write will be skipped"; \
	  fi; \
	fi

test: venv browser strace
	$(BIN)/python -m pytest

test-fast: venv
	$(BIN)/python -m pytest -m "not slow and not browser"

bench: venv
	$(BIN)/python bench/ingest.py
	$(BIN)/python bench/score_floor.py
	$(BIN)/python bench/ingest.py --requests 10000000 --repeat 1 --out bench/out/ingest-10m
	$(BIN)/python bench/run_memory.py --requests 10000000 --out bench/out/ingest-10m
	$(BIN)/python bench/score_ids.py
	$(BIN)/python bench/drift_sim.py
	$(BIN)/python bench/drift_slices.py

lint: venv
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) warehouse demo-world reports bench/out .pytest_cache .ruff_cache .hypothesis

# The Airflow deployment of docker-compose.yml without Docker: api-server, scheduler,
# dag-processor and triggerer from .venv with deploy/airflow.env, on this machine's PostgreSQL
# (database recallwatch_airflow, created if missing), AIRFLOW_HOME in .airflow/.
.PHONY: airflow airflow-stop airflow-status
AIRFLOW_DB   ?= postgresql+psycopg2://postgres@127.0.0.1:5432/recallwatch_airflow
AIRFLOW_PORT ?= 8080

airflow: venv
	$(BIN)/python deploy/standalone.py start --home .airflow --database $(AIRFLOW_DB) --port $(AIRFLOW_PORT)

airflow-status:
	$(BIN)/python deploy/standalone.py status --home .airflow

airflow-stop:
	$(BIN)/python deploy/standalone.py stop --home .airflow
