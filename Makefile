# One Makefile for people and CI. `make run` and `make test` work from a fresh clone.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: setup run index test test-fast lint bench clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	@touch $@

# The daemon in the foreground on the built-in defaults (default memory folder,
# embedded index under ~/.local/state/memoryd).
run: setup
	$(BIN)/memoryd run

lint: setup
	$(BIN)/ruff check .
	$(BIN)/mypy indexer daemon

test: setup lint
	$(BIN)/pytest -q

# Skip the tests that load the real model or spawn the daemon.
test-fast: setup
	$(BIN)/pytest -q -m "not slow"

bench: setup
	$(BIN)/python bench/index_throughput.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info
