"""TOML tables into frozen dataclasses, key by key, for :mod:`memoryd.indexer.config`.

Generic on purpose (it knows dataclasses and type hints, not memoryd's settings), so the
config module holds only what the settings are and which values they accept. Every error
names the source (file or flag) and the dotted key at fault.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, get_args, get_origin, get_type_hints

from memoryd.indexer.errors import ConfigError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

_T = TypeVar("_T", bound="DataclassInstance")


def absolute(p: Path) -> Path:
    """``~`` expanded and made absolute, so a path means the same whatever the daemon's cwd."""
    return Path(os.path.abspath(os.path.expanduser(p)))


def build_dataclass(cls: type[_T], raw: dict[str, Any], prefix: str, source: str,
                    tables_only: bool = False) -> _T:
    """``cls`` from the table ``raw``; nested dataclass fields from sub-tables.

    ``tables_only``: accept only the fields that are themselves dataclasses (the top level,
    whose other fields are filled from the environment, not from the file)."""
    hints = get_type_hints(cls)
    forms = {f.name: f.metadata.get("form") for f in dataclasses.fields(cls)}
    names = set(forms)
    known = {n for n in names if dataclasses.is_dataclass(hints[n])} if tables_only else names
    kwargs: dict[str, Any] = {}
    for key, value in raw.items():
        name = f"{prefix}{key}"
        if key not in known:
            raise ConfigError(f"{source}: unknown config key '{name}'")
        typ = hints[key]
        if isinstance(typ, type) and dataclasses.is_dataclass(typ):
            if not isinstance(value, dict):
                raise ConfigError(f"{source}: '{name}' must be a table ([{name}])")
            kwargs[key] = build_dataclass(typ, value, prefix=f"{name}.", source=source)
        else:
            kwargs[key] = _coerce_field(value, typ, name, source, forms[key])
    return cls(**kwargs)


def _coerce_field(value: Any, typ: Any, name: str, source: str, form: str | None) -> Any:
    """:func:`coerce`; a field whose metadata names its ``form`` says it in the error (how to write it)."""
    try:
        return coerce(value, typ, name, source)
    except ConfigError:
        if form is None:
            raise
        raise ConfigError(f"{source}: '{name}' must be {form}; got {value!r}") from None


def coerce(value: Any, typ: Any, name: str, source: str) -> Any:
    """``value`` as TOML gave it, checked against the declared type ``typ`` (Optional, Literal, tuple, Path)."""
    args = get_args(typ)
    if get_origin(typ) is not None and type(None) in args:  # Optional[X]
        if value == "" or value is None:
            return None
        typ = next(a for a in args if a is not type(None))
    if get_origin(typ) is Literal:  # a choice of strings: the type here, the choice in validate()
        typ = str
    if get_origin(typ) in (dict, Mapping):
        return _table(value, typ, name, source)
    if get_origin(typ) is tuple:
        if not isinstance(value, list):
            raise ConfigError(f"{source}: '{name}' must be a list, got {value!r}")
        return tuple(coerce(v, get_args(typ)[0], name, source) for v in value)
    if typ is Path:
        if not isinstance(value, str):
            raise ConfigError(f"{source}: '{name}' must be a path string, got {value!r}")
        return absolute(Path(value))
    if typ is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if typ in (int, float, str, bool) and (type(value) is not typ):
        raise ConfigError(f"{source}: '{name}' must be {typ.__name__}, got {value!r}")
    return value


def _table(value: Any, typ: Any, name: str, source: str) -> dict[Any, Any]:
    """A TOML table as a dict; its keys are strings, checked as the declared key type."""
    if value == []:  # an empty list holds nothing either: a config written when the key was a list still loads
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{source}: '{name}' must be a table, got {value!r}")
    key_t, val_t = get_args(typ)
    return {_key(k, key_t, name, source): coerce(v, val_t, f"{name}.{k}", source) for k, v in value.items()}


def _key(key: str, typ: Any, name: str, source: str) -> Any:
    """A table key as ``typ``: TOML keys are strings, so an ``int`` key is a decimal number."""
    if typ is int:
        if not key.isascii() or not key.isdecimal():
            raise ConfigError(f"{source}: '{name}' keys must be numbers, got {key!r}")
        return int(key)
    return key
