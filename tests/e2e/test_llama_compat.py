"""tests/llama_compat.py: the real-model test's llama.cpp libraries load on Debian 12's glibc 2.36."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.llama_compat import NEW_VERSION, compat_package, glibc_version, installed_package, patch

pytestmark = pytest.mark.skipif(installed_package() is None, reason="llama-cpp-py-sync is not installed (make setup)")


def _loads(lib: Path) -> subprocess.CompletedProcess[str]:
    """dlopen in a child: what the model server does first (and a failed load must not stay in this process)."""
    return subprocess.run([sys.executable, "-c", f"import ctypes; ctypes.CDLL({str(lib)!r})"],
                          capture_output=True, text=True, timeout=60)


def test_the_patched_copy_loads_and_asks_nothing_of_glibc_2_38(tmp_path: Path) -> None:
    src = installed_package()
    assert src is not None
    copy = tmp_path / "libs"
    shutil.copytree(src, copy, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    changed = {lib.name: patch(lib) for lib in sorted(copy.glob("*.so*"))}
    if glibc_version() < (2, 38):
        assert "GLIBC_2.38" in _loads(src / "libllama.so").stderr  # what the wheel does here as shipped
        assert changed["libllama.so"] > 0
    for lib in copy.glob("*.so*"):
        assert NEW_VERSION.encode() not in _imports(lib), lib.name
        assert patch(lib) == 0  # a second pass finds nothing to do
    done = _loads(copy / "libllama.so")
    assert done.returncode == 0, done.stderr


def test_the_copy_is_made_once_and_only_where_glibc_is_older(tmp_path: Path) -> None:
    first = compat_package(tmp_path)
    if glibc_version() >= (2, 38):
        assert first is None and not any(tmp_path.iterdir())
        return
    assert first == tmp_path
    lib = tmp_path / "llama_cpp_py_sync" / "libllama.so"
    made = lib.stat().st_mtime_ns
    assert compat_package(tmp_path) == tmp_path
    assert lib.stat().st_mtime_ns == made


def _imports(lib: Path) -> bytes:
    """The undefined symbols of ``lib`` with the versions they ask for (``objdump -T``; binutils comes with gcc)."""
    objdump = shutil.which("objdump")
    if objdump is None:
        pytest.skip("no objdump (binutils) here")
    out = subprocess.run([objdump, "-T", str(lib)], capture_output=True, timeout=60, check=True).stdout
    return b"\n".join(line for line in out.splitlines() if b"*UND*" in line)
