#!/usr/bin/env bash
# Build the wheel, install it into a clean venv OUTSIDE the repository, and use it as a
# new user would: print the default config, install the user units, index, search
# (offline and through a running daemon), then check that python-daemon installs
# beside memoryd and still works after memoryd is uninstalled. Prints install time
# and size. Needs PyPI (the wheel's dependencies); CI runs it after `make test`.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
PY="${PYTHON:-python3}"
TMP="$(mktemp -d /tmp/memoryd-smoke.XXXXXX)"
DAEMON_PID=""
cleanup() { [ -n "$DAEMON_PID" ] && kill "$DAEMON_PID" 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT
say() { printf 'smoke: %s\n' "$*"; }

# Build from the tracked and new files only: a stale build/ in the checkout must not reach the wheel.
mkdir -p "$TMP/src"
git -C "$REPO" ls-files -z --cached --others --exclude-standard | (cd "$REPO" && xargs -0 tar -cf - --ignore-failed-read) \
  | tar -xf - -C "$TMP/src"
"$REPO/.venv/bin/pip" wheel --quiet --no-deps --no-build-isolation -w "$TMP/dist" "$TMP/src" >/dev/null
WHEEL="$(ls "$TMP"/dist/memoryd-*.whl)"
say "built $(basename "$WHEEL") ($(du -h "$WHEEL" | cut -f1))"

"$PY" -m venv "$TMP/venv"
t0=$(date +%s)
"$TMP/venv/bin/pip" install --quiet --disable-pip-version-check "$WHEEL"
t1=$(date +%s)
say "installed in $((t1 - t0)) s; venv size $(du -sh "$TMP/venv" | cut -f1)"
M="$TMP/venv/bin/memoryd"

cd "$TMP"   # nothing below may see the checkout
export HOME="$TMP/home" XDG_CONFIG_HOME="$TMP/home/.config" XDG_STATE_HOME="$TMP/home/.local/state" \
       XDG_DATA_HOME="$TMP/home/.local/share" XDG_CACHE_HOME="$TMP/home/.cache" XDG_RUNTIME_DIR="$TMP/run"
mkdir -p "$XDG_CONFIG_HOME/memoryd" "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
"$TMP/venv/bin/python" - <<'PY'
import importlib.util, sys
for name in ("daemon", "indexer"):
    assert importlib.util.find_spec(name) is None, f"the wheel installed a top-level {name!r}"
PY
"$M" config > "$XDG_CONFIG_HOME/memoryd/memoryd.toml"
grep -q '^\[watch\]' "$XDG_CONFIG_HOME/memoryd/memoryd.toml"
"$M" service install --unit-dir "$TMP/units" --flags "--root $TMP/notes"
grep -q "^ExecStart=$M run" "$TMP/units/memoryd.service"
if command -v systemd-analyze >/dev/null; then
  out="$(systemd-analyze --user verify "$TMP/units/memoryd.service" "$TMP/units/memoryd.socket" 2>&1 || true)"
  [ -z "$out" ] || { echo "$out"; say "systemd-analyze verify reported the lines above"; exit 1; }
  say "systemd-analyze --user verify: clean"
fi

mkdir -p "$TMP/notes"
printf '# Deploys\n\nWe ship with blue-green deploys on Fridays, behind the zebrafish flag.\n' > "$TMP/notes/deploy.md"
"$M" index --root "$TMP/notes"
"$M" search --offline --root "$TMP/notes" --json "zebrafish" | grep -q deploy.md
say "index + offline search: ok"

"$M" run --root "$TMP/notes" --socket "$TMP/run/m.sock" > "$TMP/daemon.log" 2>&1 &
DAEMON_PID=$!
for _ in $(seq 1 600); do [ -S "$TMP/run/m.sock" ] && "$M" status --socket "$TMP/run/m.sock" >/dev/null 2>&1 && break; sleep 0.1; done
"$M" search --socket "$TMP/run/m.sock" --json "blue-green Friday" | grep -q deploy.md
kill -TERM "$DAEMON_PID"; wait "$DAEMON_PID" || true; DAEMON_PID=""
say "daemon + socket search: ok"

"$TMP/venv/bin/pip" install --quiet --disable-pip-version-check python-daemon
"$TMP/venv/bin/python" -c "import daemon, memoryd.daemon.cli; assert hasattr(daemon, 'DaemonContext')"
"$TMP/venv/bin/pip" uninstall --quiet -y memoryd
"$TMP/venv/bin/python" -c "import daemon; assert hasattr(daemon, 'DaemonContext')"
say "python-daemon beside memoryd, and after its uninstall: ok"
say "OK"
