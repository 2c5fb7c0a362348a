#!/usr/bin/env bash
# mypy over the import name `memoryd`. The source folders (daemon/, indexer/, src/memoryd/) are
# mapped under `memoryd.` by pyproject's package-dir, which mypy cannot follow; a tree of symlinks
# in build/typecheck gives it the installed layout without copying a file.
set -euo pipefail
cd "$(dirname "$0")/.."
MYPY="$(realpath -s "${MYPY:-.venv/bin/mypy}")"
tree=build/typecheck
rm -rf "$tree/memoryd" && mkdir -p "$tree/memoryd"
ln -s ../../../src/memoryd/__init__.py "$tree/memoryd/__init__.py"
ln -s ../../../src/memoryd/__main__.py "$tree/memoryd/__main__.py"
ln -s ../../../daemon "$tree/memoryd/daemon"
ln -s ../../../indexer "$tree/memoryd/indexer"
cd "$tree" && exec "$MYPY" --config-file ../../pyproject.toml "$@" memoryd
