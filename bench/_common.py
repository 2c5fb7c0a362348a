"""Shared helpers of the daemon benchmarks: a throw-away ``memoryd run`` subprocess and small stats.

Each benchmark runs the real daemon as a subprocess, exactly as a user would,
so what it measures includes the socket, JSON and thread hand-offs. The
subprocess gets a private environment: ``XDG_CONFIG_HOME`` points at an empty
directory (a personal ``memoryd.toml`` must not change the numbers) and the
systemd variables are removed unless a benchmark sets ``NOTIFY_SOCKET`` on
purpose. Every wait is bounded; :meth:`Daemon.stop` is terminate → wait →
kill, and runs on every exit path (``with Daemon(...)``).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, get_args, get_origin, get_type_hints

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from memoryd.daemon.client.rpc_client import Client  # noqa: E402  (needs the repository on sys.path)
from memoryd.indexer.config import Config, SearchConfig, with_overrides  # noqa: E402
from memoryd.indexer.errors import ConfigError, DaemonError  # noqa: E402

_SYSTEMD_VARS = ("NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "WATCHDOG_USEC", "WATCHDOG_PID")

EVAL_DIR_HELP = ("a folder of eval folders, each with memory/*.md and queries.jsonl "
                 "(the project's dev data lives outside this repository; pass its path)")


def bench_tmp(prefix: str) -> Path:
    """A fresh directory under /tmp (short: socket paths must stay under ~100 bytes)."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))


def remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def write_config(path: Path, sections: dict[str, dict[str, Any]]) -> Path:
    """Write a TOML config (str, int, float and bool values only: all these benchmarks need)."""
    lines: list[str] = []
    for name, values in sections.items():
        lines.append(f"[{name}]")
        for key, value in values.items():
            lines.append(f"{key} = {json.dumps(value)}")
        lines.append("")
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def search_overrides(cfg: Config, pairs: Sequence[str]) -> Config:
    """Apply ``--search KEY=VALUE`` flags, each parsed by its field's declared type.

    The text is read by the type [search] declares, not by the type of the current value:
    a key whose default is None (``synonyms_path``) has no value type to copy, and
    ``bool("false")`` is True. A bad flag exits naming it.
    """
    hints = get_type_hints(SearchConfig)
    raw: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep:
            raise SystemExit(f"--search {pair!r}: expected KEY=VALUE")
        raw[key] = _toml_value(text, hints.get(key, str))
    try:
        return with_overrides(cfg, search=raw)
    except ConfigError as exc:
        raise SystemExit(str(exc)) from None


def _toml_value(text: str, typ: Any) -> Any:
    """What a TOML file would hold for ``text`` in a field of type ``typ`` (the config checks it)."""
    args = get_args(typ)
    if type(None) in args:
        if text == "":
            return None
        typ = next(a for a in args if a is not type(None))
    if get_origin(typ) is tuple:
        return [_toml_value(part.strip(), get_args(typ)[0]) for part in text.split(",") if part.strip()]
    if typ is bool:
        return {"true": True, "1": True, "false": False, "0": False}.get(text.lower(), text)
    if typ in (int, float):
        try:
            return int(text) if typ is int else float(text)
        except ValueError:
            return text  # the config names the key and the value it rejects
    return text


def daemon_env(tmp: Path, notify_socket: Path | None = None) -> dict[str, str]:
    """The daemon's environment: no personal config, no systemd variables (unless ``notify_socket``)."""
    env = {k: v for k, v in os.environ.items() if k not in _SYSTEMD_VARS}
    xdg = tmp / "xdg-config"
    xdg.mkdir(exist_ok=True)
    env["XDG_CONFIG_HOME"] = str(xdg)
    env["PYTHONUNBUFFERED"] = "1"
    if notify_socket is not None:
        env["NOTIFY_SOCKET"] = str(notify_socket)
    return env


def memoryd_argv(command: str, roots: Sequence[Path], data_dir: Path, config: Path | None = None,
                 socket: Path | None = None) -> list[str]:
    """``python -m memoryd.daemon.cli COMMAND --root ... --data-dir ... [--config] [--socket]``."""
    argv = [sys.executable, "-m", "memoryd.daemon.cli", command, "--data-dir", str(data_dir)]
    for root in roots:
        argv += ["--root", str(root)]
    if config is not None:
        argv += ["--config", str(config)]
    if socket is not None:
        argv += ["--socket", str(socket)]
    return argv


def wait_until(predicate: Callable[[], bool], timeout: float, what: str, interval: float = 0.02) -> float:
    """Poll ``predicate`` until true; returns the seconds waited. Raises TimeoutError naming ``what``."""
    t0 = time.perf_counter()
    while not predicate():
        if time.perf_counter() - t0 > timeout:
            raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)
    return time.perf_counter() - t0


def wait_ping(d: Daemon, timeout: float = 60.0) -> None:
    """Until this instance answers ``ping`` (a stale socket file from a killed one may still exist)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        d.check_alive()
        try:
            with Client(d.socket, timeout=5) as c:
                c.call("ping")
            return
        except (DaemonError, OSError):
            time.sleep(0.05)
    raise TimeoutError(f"memoryd did not answer ping within {timeout:g} s")


def is_idle(status: dict[str, Any]) -> bool:
    """Nothing queued, no sweep, and no chunk still waiting for its vector (keyword-first indexing)."""
    return status.get("pending") == 0 and not status.get("reconciling") and \
        not status.get("vectors", {}).get("pending")


class Daemon:
    """One ``memoryd run`` subprocess; its stderr (JSON log lines) goes to ``log_path``."""

    def __init__(self, tmp: Path, roots: Sequence[Path], data_dir: Path, config: Path | None = None,
                 name: str = "d", notify_socket: Path | None = None, extra_env: dict[str, str] | None = None) -> None:
        self.socket = tmp / f"{name}.sock"
        self.log_path = tmp / f"{name}.log"
        self.argv = memoryd_argv("run", roots, data_dir, config, self.socket)
        self.env = {**daemon_env(tmp, notify_socket), **(extra_env or {})}
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_at = 0.0

    def start(self) -> Daemon:
        with open(self.log_path, "ab") as log:
            self.started_at = time.perf_counter()
            self.proc = subprocess.Popen(self.argv, cwd=REPO, env=self.env, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=log)
        return self

    def __enter__(self) -> Daemon:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def check_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            tail = self.log_path.read_text(encoding="utf-8", errors="replace")[-2000:]
            raise RuntimeError(f"memoryd exited with status {self.proc.returncode}; log tail:\n{tail}")

    def client(self, timeout: float = 60.0) -> Client:
        return Client(self.socket, timeout=timeout)

    def wait_socket(self, timeout: float = 120.0) -> float:
        def up() -> bool:
            self.check_alive()
            return self.socket.exists()

        return wait_until(up, timeout, f"the socket {self.socket}")

    def wait_idle(self, timeout: float = 600.0, interval: float = 0.05, lines: bool = False) -> dict[str, Any]:
        """Block until ``status`` says pending=0 and reconciling=false (``lines``: and every chunk's line
        vectors are in, as the default ranking of a daemon idle a while has them); returns that status."""
        self.wait_socket(timeout)
        deadline = time.perf_counter() + timeout
        with self.client() as c:
            while True:
                self.check_alive()
                try:
                    st = c.call("status")
                except DaemonError:
                    st = {}
                if is_idle(st) and not (lines and (st.get("line_vectors") or {}).get("pending")):
                    return st
                if time.perf_counter() > deadline:
                    raise TimeoutError(f"memoryd not idle after {timeout:g} s: {st}")
                time.sleep(interval)

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM, wait up to ``timeout``, then SIGKILL; returns the exit status."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return self.proc.returncode

    def events(self, name: str) -> list[dict[str, Any]]:
        """The daemon's JSON log records whose ``event`` is ``name``, in order."""
        return log_events(self.log_path, name)


def log_events(path: Path, name: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if not line.startswith("{"):
            continue  # the human "listening on" lines
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("event") == name:
            out.append(rec)
    return out


def run_oneshot(argv: Sequence[str], tmp: Path, timeout: float) -> tuple[float, str]:
    """Run a ``memoryd`` one-shot command (e.g. ``index``); returns (wall seconds, stdout). Raises on failure."""
    t0 = time.perf_counter()
    res = subprocess.run(argv, cwd=REPO, env=daemon_env(tmp), stdin=subprocess.DEVNULL,
                         capture_output=True, timeout=timeout, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({res.returncode}): {res.stderr.decode()[-2000:]}")
    return time.perf_counter() - t0, res.stdout.decode("utf-8", errors="replace")


# -- statistics and output -------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100), linear interpolation between order statistics; nan if empty."""
    if not values:
        return math.nan
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def summary(values: Sequence[float], scale: float = 1.0, digits: int = 3) -> dict[str, float | None]:
    """p50/p95/p99/mean/max of ``values`` × ``scale``, rounded (None for an empty sample)."""
    def r(x: float) -> float | None:
        return None if math.isnan(x) else round(x * scale, digits)

    mean = sum(values) / len(values) if values else math.nan
    return {"p50": r(percentile(values, 50)), "p95": r(percentile(values, 95)), "p99": r(percentile(values, 99)),
            "mean": r(mean), "max": r(max(values) if values else math.nan), "n": len(values)}


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def print_report(res: dict[str, Any]) -> None:
    """A bench's key/value results, one per line, then the same as the final JSON line."""
    for key, value in res.items():
        print(f"{key:28} {round(value, 3) if isinstance(value, float) else value}")
    print(json.dumps(res))


def print_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    rows = [[str(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))


def fmt(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


# -- a synthetic memory folder ---------------------------------------------------

_PEOPLE = ["Ana", "Bo", "Chen", "Dara", "Eli", "Femi", "Gus", "Hana", "Ivo", "Jun", "Kemal", "Lea"]
_THINGS = ["the deploy script", "the cache layer", "the billing export", "the search index", "the CI pipeline",
           "the onboarding doc", "the backup job", "the API gateway", "the metrics dashboard", "the mobile app",
           "the staging database", "the release notes", "the auth service", "the nightly report"]
_VERBS = ["rewrite", "pin", "split", "retire", "benchmark", "document", "migrate", "review", "simplify", "monitor"]
_REASONS = ["because it timed out twice last week", "so that on-call gets fewer pages",
            "since the vendor changed its pricing", "to unblock the Q3 roadmap", "after the postmortem",
            "because nobody remembers how it works", "to cut the build time in half", "as the customer asked"]
_FACTS = ["needs Python 3.11 or newer", "keeps its state in Postgres", "runs every night at 02:00 UTC",
          "breaks when the disk is more than 90 % full", "is owned by the platform team",
          "reads its settings from /etc/app/config.toml", "retries three times with backoff",
          "was last upgraded in March", "logs to journald", "has a 30 second timeout"]
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "the end of the sprint", "the next release"]


def note_line(rnd: Any) -> str:
    """One realistic line of an agent's or a person's memory note."""
    c = rnd.choice
    kind = rnd.randrange(5)
    if kind == 0:
        return f"- Decided to {c(_VERBS)} {c(_THINGS)} {c(_REASONS)}."
    if kind == 1:
        return f"- {c(_PEOPLE)} asked about {c(_THINGS)}; told them it {c(_FACTS)}."
    if kind == 2:
        return f"- TODO: {c(_VERBS)} {c(_THINGS)} before {c(_DAYS)} ({c(_PEOPLE)} owns it)."
    if kind == 3:
        return f"- Learned: {c(_THINGS)} {c(_FACTS)}."
    return f"- Met {c(_PEOPLE)} and {c(_PEOPLE)} to {c(_VERBS)} {c(_THINGS)}; follow-up on {c(_DAYS)}."


def generate_notes(root: Path, n_files: int, seed: int, lines: tuple[int, int] = (3, 8)) -> list[Path]:
    """``n_files`` Markdown notes under ``root`` (daily files plus topic notes), deterministic by ``seed``.

    Each file gets a heading and ``lines`` (min, max) note lines; returns the paths in creation order.
    """
    import datetime
    import random

    rnd = random.Random(seed)
    start = datetime.date(2019, 1, 1)
    paths: list[Path] = []
    (root / "memory").mkdir(parents=True, exist_ok=True)
    (root / "notes").mkdir(parents=True, exist_ok=True)
    (root / "MEMORY.md").write_text("# Memory\n\nLong-lived facts about the team and its systems.\n")
    for i in range(n_files):
        if i % 4 == 3:
            path, title = root / "notes" / f"topic-{i:05d}.md", f"# Notes on {rnd.choice(_THINGS)}"
        else:
            day = start + datetime.timedelta(days=i)
            path, title = root / "memory" / f"{day.isoformat()}.md", f"# {day.isoformat()}"
        body: list[str] = [title, ""]
        for n in range(rnd.randint(*lines)):
            if n and n % 20 == 0:
                body += ["", f"## Part {n // 20 + 1}", ""]
            body.append(note_line(rnd))
        path.write_text("\n".join(body) + "\n", encoding="utf-8")
        paths.append(path)
    return paths
