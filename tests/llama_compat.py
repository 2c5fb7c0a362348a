"""Load PyPI's ``llama-cpp-py-sync`` libraries on a glibc older than the one they were linked on.

The wheel (tagged manylinux2014) is built on a glibc 2.38+ runner, so its libraries ask for
``__isoc23_strtol``, ``__isoc23_strtoul``, ``__isoc23_strtoull`` and ``__isoc23_sscanf`` at version
``GLIBC_2.38``; Debian 12, which the project's machines and CI run, has glibc 2.36, where ``dlopen``
refuses them ("version `GLIBC_2.38' not found"). Those four are the only 2.38 symbols they use,
and each is its older namesake with C23's ``0b`` prefix added (llama.cpp parses no binary
literals). So :func:`compat_package` copies the package aside and rewrites each reference in the
copy's dynamic symbol table to the namesake at glibc's base version — the name is a suffix of the
old one in the string table (``__isoc23_strtol`` -> ``strtol``), so only two integers per symbol
change — and marks the now-unused ``GLIBC_2.38`` requirement weak. The installed package is never
touched; on a glibc that has 2.38 nothing is copied.

Test tooling only (tests/llama_chat_server.py): memoryd itself never loads a model.
"""

from __future__ import annotations

import os
import shutil
import struct
from collections.abc import Callable
from importlib.util import find_spec
from pathlib import Path

PACKAGE = "llama_cpp_py_sync"
PREFIX = "__isoc23_"
NEW_VERSION, BASE_VERSION = "GLIBC_2.38", "GLIBC_2.2.5"
_SHT_DYNSYM, _SHT_VERNEED, _SHT_VERSYM = 11, 0x6FFFFFFE, 0x6FFFFFFF
_VER_FLG_WEAK = 0x2
_SYM_SIZE = 24
_Section = tuple[int, int, int, int, int]


class CompatError(Exception):
    """A library that cannot be rewritten as described above (its path and why)."""


def glibc_version() -> tuple[int, int]:
    """This process's glibc, e.g. (2, 36); (99, 0) where it is not glibc (nothing to do there)."""
    try:
        text = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError):
        return (99, 0)
    name, _, version = text.partition(" ")
    if name != "glibc":
        return (99, 0)
    major, _, minor = version.partition(".")
    return (int(major), int(minor.split(".")[0] or 0))


def installed_package() -> Path | None:
    """The installed package's folder, found without importing it (importing loads the libraries)."""
    spec = find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def compat_package(dest: Path) -> Path | None:
    """A folder to put first on ``sys.path`` (or PYTHONPATH) so the libraries load here; None when
    the installed ones load as they are (or the package is not installed).

    ``dest/llama_cpp_py_sync`` is the patched copy, made once and reused while the installed
    package's version is the one it was copied from."""
    src = installed_package()
    if src is None or glibc_version() >= (2, 38):
        return None
    stamp = dest / PACKAGE / ".compat-of"
    origin = f"{src}:{(src / '_version.py').stat().st_mtime_ns}"
    if stamp.is_file() and stamp.read_text() == origin:
        return dest
    shutil.rmtree(dest / PACKAGE, ignore_errors=True)
    shutil.copytree(src, dest / PACKAGE, ignore=shutil.ignore_patterns("__pycache__"))
    for lib in sorted((dest / PACKAGE).glob("*.so*")):
        if lib.is_file() and not lib.is_symlink():
            patch(lib)
    stamp.write_text(origin)
    return dest


def patch(path: Path) -> int:
    """Rewrite ``path``'s ``GLIBC_2.38`` references as described above; how many symbols changed."""
    data = bytearray(path.read_bytes())
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise CompatError(f"{path}: not a 64-bit little-endian ELF file")
    headers = _section_headers(data)
    by_type: dict[int, _Section] = {}
    for sec in headers:
        by_type.setdefault(sec[0], sec)
    try:
        dynsym, versym, verneed = by_type[_SHT_DYNSYM], by_type[_SHT_VERSYM], by_type[_SHT_VERNEED]
    except KeyError:
        return 0  # no versioned imports: nothing asks for 2.38
    strtab = headers[dynsym[3]][1]

    def name(offset: int) -> str:
        start = strtab + offset
        return data[start:data.index(0, start)].decode("ascii", "replace")

    libc = _libc_versions(data, verneed, name)
    if NEW_VERSION not in libc:
        return 0
    if BASE_VERSION not in libc:
        raise CompatError(f"{path}: needs {NEW_VERSION} from libc.so.6 but not {BASE_VERSION}")
    new_index, new_aux = libc[NEW_VERSION]
    base_index = libc[BASE_VERSION][0]
    changed = 0
    for i in range(dynsym[2] // _SYM_SIZE):
        sym_at, ver_at = dynsym[1] + i * _SYM_SIZE, versym[1] + 2 * i
        if struct.unpack_from("<H", data, ver_at)[0] & 0x7FFF != new_index:
            continue
        st_name = struct.unpack_from("<I", data, sym_at)[0]
        symbol = name(st_name)
        if not symbol.startswith(PREFIX):
            raise CompatError(f"{path}: {symbol} needs {NEW_VERSION} and has no older namesake")
        struct.pack_into("<I", data, sym_at, st_name + len(PREFIX))
        struct.pack_into("<H", data, ver_at, base_index)
        changed += 1
    flags = struct.unpack_from("<H", data, new_aux + 4)[0]
    struct.pack_into("<H", data, new_aux + 4, flags | _VER_FLG_WEAK)
    path.write_bytes(data)
    return changed


def _section_headers(data: bytearray) -> list[_Section]:
    """Every section header as (type, offset, size, link, info)."""
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    out = []
    for i in range(shnum):
        _, typ, _, _, offset, size, link, info = struct.unpack_from("<IIQQQQII", data, shoff + i * shentsize)
        out.append((typ, offset, size, link, info))
    return out


def _libc_versions(data: bytearray, verneed: _Section, name: Callable[[int], str]) -> dict[str, tuple[int, int]]:
    """libc.so.6's needed versions: name -> (version index, offset of its Vernaux entry)."""
    out: dict[str, tuple[int, int]] = {}
    at, count = verneed[1], verneed[4]
    for _ in range(count):
        _, aux_count, file_name, aux, following = struct.unpack_from("<HHIII", data, at)
        entry = at + aux
        for _ in range(aux_count):
            _, _, index, version_name, next_aux = struct.unpack_from("<IHHII", data, entry)
            if name(file_name) == "libc.so.6":
                out[name(version_name)] = (index, entry)
            if not next_aux:
                break
            entry += next_aux
        if not following:
            break
        at += following
    return out
