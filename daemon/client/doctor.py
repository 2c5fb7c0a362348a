"""``memoryd doctor``: check a set-up end to end, one line per check, each with what to do.

The checks, in order: the config loads; the daemon answers on its socket; the
``memoryd`` command on ``PATH`` (what agent hosts and a project's shared files
run); each root is a readable folder, writable (``memory_remember`` writes into it), and,
when the systemd user unit is installed, inside its ``ReadWritePaths=``
(``ProtectSystem=strict`` + ``ProtectHome=read-only`` leave every other path
read-only to the service, and a ``remember`` then fails with EROFS); the
inotify watch limit against the folders to watch (inotify watches folders, one
watch each, shared by every program of the user); the model cache; and the
embedding provider, loaded and asked for one vector.

When the daemon answers, its answer is the truth: the roots checked are the
ones it watches (``status``), not what the config file says now (it may have
changed since the daemon started, or the daemon runs with ``--root``), and the
provider is the model it has loaded, so doctor loads no model of its own (the
check takes well under a second instead of a model load). The config's roots
and a model load are the fallback for a daemon that is not running.

A check is ``ok``, ``warn`` (works, but worth knowing) or ``FAIL`` (something
will not work); the exit status is 1 when any check fails. Every input is a
parameter (:class:`Inputs`): the environment, the unit folder, the ``/proc``
file and the daemon call, so tests check each verdict without the real machine.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memoryd.indexer.errors import ConfigError, MemorydError, NotRunningError

if TYPE_CHECKING:
    from memoryd.indexer.config import Config

OK, WARN, FAIL = "ok", "warn", "FAIL"
WATCHES_FILE = Path("/proc/sys/fs/inotify/max_user_watches")
WALK_CAP = 1_000_000  # folders counted at most (a root at / must not take minutes)
INOTIFY_FIX = ("raise it: echo fs.inotify.max_user_watches=524288 | sudo tee /etc/sysctl.d/90-inotify.conf "
               "&& sudo sysctl --system (memoryd falls back to polling the root meanwhile)")
START_FIX = "start it: memoryd run (foreground), or memoryd service install --enable (systemd user service)"


@dataclass(frozen=True)
class Check:
    name: str
    level: str  # ok | warn | FAIL
    message: str
    fix: str = ""

    def line(self) -> str:
        return f"{self.level:<4}  {self.name}: {self.message}" + (f" -> {self.fix}" if self.fix else "")


@dataclass(frozen=True)
class Inputs:
    """What the checks read: all injectable."""

    env: Mapping[str, str]
    config: Path | None = None
    socket: Path | None = None
    unit_dir: Path | None = None  # the systemd user unit folder (None: not looked at)
    watches_file: Path = WATCHES_FILE
    status: Callable[[Path], dict[str, Any]] | None = None  # the daemon's status over its socket
    load_model: bool = True  # only when no daemon answers: a running daemon's model is reported as it is
    which: Callable[[str], str | None] = shutil.which
    access: Callable[[Path, int], bool] = os.access  # a test cannot chmod its way out of running as root


def run_checks(inp: Inputs) -> list[Check]:
    """Every check, in order; later checks that need the config are skipped when it does not load."""
    from memoryd.indexer import config as configmod

    try:
        cfg = configmod.with_overrides(configmod.load(inp.config, inp.env), socket=inp.socket)
    except ConfigError as exc:
        return [Check("config", FAIL, str(exc), "fix the file (memoryd config prints every key with its default)")]
    where = inp.config or _default_config(inp.env)
    checks = [Check("config", OK, f"{where}" if where.exists() else f"no file at {where}: built-in defaults "
                    "(memoryd init writes one)")]
    status = _daemon(cfg, inp, checks)
    checks.append(_command(inp))
    roots = _daemon_roots(status) or cfg.effective_roots
    for root in roots:
        checks += list(_root(root, cfg, inp, status))
    checks.append(_inotify(roots, inp))
    checks += _model(cfg, inp, status)
    from memoryd.daemon.client.doctor_llm import llm_check  # [llm]: indexer/llm/

    checks.append(Check("llm", *llm_check(cfg)))
    return checks


def _daemon_roots(status: dict[str, Any] | None) -> tuple[Path, ...]:
    """The roots the running daemon watches (empty: no daemon, or one that does not say)."""
    return tuple(Path(str(r["path"])) for r in (status or {}).get("roots", []) if r.get("path"))


def _command(inp: Inputs) -> Check:
    """A bare ``memoryd``: what a project's shared agent files run (``agents install --project``)."""
    found = inp.which("memoryd")
    if found is None:
        return Check("command", WARN, "no memoryd on PATH: a project's .mcp.json and hook (agents install "
                     "--project) run a bare memoryd and cannot start it",
                     "pipx install <memoryd checkout> (or uv tool install), or link this memoryd into ~/.local/bin")
    return Check("command", OK, f"memoryd on PATH is {found}")


def _default_config(env: Mapping[str, str]) -> Path:
    from memoryd.indexer.paths import default_config_path

    return default_config_path(env)


def _daemon(cfg: Config, inp: Inputs, checks: list[Check]) -> dict[str, Any] | None:
    sock = cfg.socket_path
    if inp.status is None:
        return None
    try:
        st = inp.status(sock)
    except NotRunningError:
        checks.append(Check("daemon", FAIL, f"nothing answers on {sock}", START_FIX))
        return None
    except MemorydError as exc:
        checks.append(Check("daemon", FAIL, f"{sock}: {exc}", "see its log: journalctl --user -u memoryd"))
        return None
    fresh = "up to date" if st.get("fresh", not st.get("pending")) else f"{st.get('pending', 0)} files pending"
    checks.append(Check("daemon", OK, f"answering on {sock}: memoryd {st.get('version', '?')}, "
                        f"{st.get('files', '?')} files, {fresh}"))
    return st


def _root(root: Path, cfg: Config, inp: Inputs, status: dict[str, Any] | None) -> Iterator[Check]:
    name = f"root {root}"
    if not root.is_dir():
        if root == cfg.default_root and not cfg.watch.roots:
            yield Check(name, WARN, "does not exist yet", "the daemon creates it (with an example note) on start")
        else:
            yield Check(name, FAIL, "missing or not a folder", f"create it (mkdir -p {root}) or fix [watch] roots")
        return
    if not inp.access(root, os.R_OK | os.X_OK):
        yield Check(name, FAIL, "not readable by this user", f"chmod u+rx {root}")
        return
    writable = inp.access(root, os.W_OK)
    watched = _watched(root, status)
    yield Check(name, OK if writable else WARN, "readable and writable" if writable else "read-only to this user: "
                "search works, memory_remember cannot write here" + watched, "" if writable else f"chmod u+w {root}")
    if inp.unit_dir is not None and (inp.unit_dir / "memoryd.service").is_file():
        yield _service_paths(root, inp)


def _watched(root: Path, status: dict[str, Any] | None) -> str:
    for r in (status or {}).get("roots", []):
        if r.get("path") == str(root) and not r.get("alive", True):
            return f" (the daemon is NOT watching it: {r.get('error') or 'no watch'})"
    return ""


def service_writable(unit_dir: Path, env: Mapping[str, str]) -> list[Path]:
    """The ``ReadWritePaths=`` of the installed unit and its drop-ins, ``%h``/``%t`` expanded."""
    from memoryd.indexer.paths import home, runtime_dir

    files = [unit_dir / "memoryd.service", *sorted((unit_dir / "memoryd.service.d").glob("*.conf"))]
    out: list[Path] = []
    specifiers = {"%h": str(home(env)), "%t": str(runtime_dir(env) or f"/run/user/{os.getuid()}")}
    for f in files:
        try:
            lines = f.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        for line in lines:
            if not line.startswith("ReadWritePaths="):
                continue
            for word in _unit_words(line.split("=", 1)[1]):
                for spec, value in specifiers.items():
                    word = word.replace(spec, value)
                out.append(Path(word.replace("%%", "%").lstrip("-+")))
    return out


def _unit_words(value: str) -> list[str]:
    import shlex

    try:
        return shlex.split(value)
    except ValueError:
        return value.split()


def _service_paths(root: Path, inp: Inputs) -> Check:
    assert inp.unit_dir is not None
    name = f"root {root}"
    for path in service_writable(inp.unit_dir, inp.env):
        if root == path or path in root.parents:
            return Check(name, OK, f"writable to the systemd service (ReadWritePaths {path})")
    return Check(name, FAIL, f"read-only to the systemd service in {inp.unit_dir} (not in its ReadWritePaths=): "
                 "every remember into it fails", f"memoryd service install --flags '--root {root}' (or "
                 "systemctl --user edit memoryd.service: ReadWritePaths=-" + str(root) + ")")


def count_tree(roots: tuple[Path, ...], cap: int = WALK_CAP) -> tuple[int, int]:
    """(folders, files) under ``roots``, hidden folders skipped as the watcher skips them; stops at ``cap``."""
    folders = files = 0
    for root in roots:
        for _dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            folders += 1
            files += len(filenames)
            if folders >= cap:
                return folders, files
    return folders, files


def _inotify(roots: tuple[Path, ...], inp: Inputs) -> Check:
    try:
        limit = int(inp.watches_file.read_text().strip())
    except (OSError, ValueError):
        return Check("inotify", WARN, f"cannot read {inp.watches_file}", "not Linux? memoryd then polls the roots")
    folders, files = count_tree(roots)
    what = f"{folders} folders to watch ({files} files) against max_user_watches {limit}"
    if folders >= limit:
        return Check("inotify", FAIL, what + ": not enough", INOTIFY_FIX)
    if folders * 2 > limit:
        return Check("inotify", WARN, what + ": over half, shared with every other program (editors, IDEs)",
                     INOTIFY_FIX)
    return Check("inotify", OK, what)


def _model(cfg: Config, inp: Inputs, status: dict[str, Any] | None) -> list[Check]:
    model = (status or {}).get("model")
    build = (status or {}).get("model_build")
    if isinstance(build, dict):  # a first start: the daemon builds the model while it serves keywords
        failed = build.get("state") == "failed"
        return [Check("provider", FAIL if failed else WARN, f"in the daemon, {build.get('detail')}; search ranks "
                      "from keywords only meanwhile", "restart memoryd to build it again; the log has "
                      "model.build_failed" if failed else "nothing to do: vectors fill once it is ready")]
    if isinstance(model, dict) and model.get("id"):  # the daemon has it loaded: nothing to load here
        server = model.get("server") or {}
        if server and not server.get("reachable"):
            return [Check("provider", FAIL, f"the daemon's embedding server {server.get('url')} does not answer: "
                          f"{server.get('last_error') or 'no answer'}", "check the server; memoryd status shows it")]
        return [Check("provider", OK, f"{model['id']}: loaded in the daemon, {model.get('dim')}-d vectors")]
    provider = cfg.embedding.provider
    out: list[Check] = []
    if provider == "e5-small":
        cache = cfg.model_cache_dir
        built = sorted(p.name for p in cache.glob("*.onnx")) if cache.is_dir() else []
        if built:
            out.append(Check("model cache", OK, f"{cache}: {', '.join(built)}"))
        else:
            out.append(Check("model cache", WARN, f"{cache}: not built yet", "the first 'memoryd run' or 'memoryd "
                             "index' builds it (once); run one now to have it ready"))
            return [*out, Check("provider", WARN, f"{provider}: not loaded (no model built yet)")]
    if not inp.load_model:
        return [*out, Check("provider", OK, f"{provider}: not loaded (--no-model)")]
    from memoryd.indexer.embedding import load_embedder
    from memoryd.indexer.errors import ModelError

    t0 = time.perf_counter()
    try:
        embedder = load_embedder(cfg.embedding, cfg.model_cache_dir, cfg.embedding_api_key)
        dim = len(embedder.embed_query("memoryd doctor"))
    except (ModelError, ConfigError, OSError) as exc:
        return [*out, Check("provider", FAIL, f"{provider}: {exc}",
                            "reinstall memoryd, or set embedding.provider (memoryd config lists them)")]
    took = time.perf_counter() - t0
    return [*out, Check("provider", OK, f"{provider}: {embedder.model_id} loaded, {dim}-d vectors ({took:.1f} s)")]


def as_json(checks: list[Check]) -> dict[str, Any]:
    return {"ok": not any(c.level == FAIL for c in checks), "checks": [asdict(c) for c in checks]}
