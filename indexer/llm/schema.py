"""A small JSON-schema checker for what a model answers.

A model's answer is hostile input: it may be any JSON at all, nested deep, with keys we did not
ask for. The subset checked here is what memoryd's own schemas use — ``type`` (one or a list),
``properties``, ``required``, ``additionalProperties`` (false only), ``items``, ``enum``,
``minimum``/``maximum``, ``minLength``/``maxLength``, ``minItems``/``maxItems`` — and a depth
bound, so the checker never recurses past :data:`MAX_DEPTH`. No dependency: ``jsonschema`` is not
installed on every machine memoryd runs on, and a schema using more than this is refused when it
is checked (an unknown keyword raises), not silently half-applied.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MAX_DEPTH = 16
_KNOWN = frozenset({"type", "properties", "required", "additionalProperties", "items", "enum", "minimum",
                    "maximum", "minLength", "maxLength", "minItems", "maxItems", "description", "title"})
_TYPES: dict[str, tuple[type, ...]] = {"object": (dict,), "array": (list,), "string": (str,), "boolean": (bool,),
                                       "integer": (int,), "number": (int, float), "null": (type(None),)}


class SchemaViolation(ValueError):
    """The value does not fit; the message names the JSON path (``$.memories[2].importance``)."""


def check(value: Any, schema: Mapping[str, Any], path: str = "$", depth: int = 0) -> None:
    """Raise :class:`SchemaViolation` where ``value`` does not fit ``schema``."""
    if depth > MAX_DEPTH:
        raise SchemaViolation(f"{path}: nested deeper than {MAX_DEPTH} levels")
    unknown = set(schema) - _KNOWN
    if unknown:
        raise ValueError(f"schema keyword(s) {sorted(unknown)} at {path} are not supported by memoryd's checker")
    _check_type(value, schema.get("type"), path)
    if "enum" in schema and value not in schema["enum"]:
        raise SchemaViolation(f"{path}: {_short(value)} is not one of {schema['enum']}")
    if isinstance(value, str):
        _bounds(len(value), schema, "minLength", "maxLength", path, "characters")
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        _bounds(value, schema, "minimum", "maximum", path, "")
    elif isinstance(value, list):
        _bounds(len(value), schema, "minItems", "maxItems", path, "items")
        if "items" in schema:
            for i, item in enumerate(value):
                check(item, schema["items"], f"{path}[{i}]", depth + 1)
    elif isinstance(value, dict):
        _object(value, schema, path, depth)


def _check_type(value: Any, typ: str | list[str] | None, path: str) -> None:
    if typ is None:
        return
    names = [typ] if isinstance(typ, str) else list(typ)
    for name in names:
        ok = isinstance(value, _TYPES[name])
        if name in ("integer", "number") and isinstance(value, bool):
            ok = False  # JSON true is not a number, although Python's bool is an int
        if ok:
            return
    raise SchemaViolation(f"{path}: must be {' or '.join(names)}, got {type(value).__name__} {_short(value)}")


def _bounds(n: float, schema: Mapping[str, Any], low: str, high: str, path: str, unit: str) -> None:
    if low in schema and n < schema[low]:
        raise SchemaViolation(f"{path}: {n} {unit} is below {low} {schema[low]}".replace("  ", " "))
    if high in schema and n > schema[high]:
        raise SchemaViolation(f"{path}: {n} {unit} is above {high} {schema[high]}".replace("  ", " "))


def _object(value: dict[str, Any], schema: Mapping[str, Any], path: str, depth: int) -> None:
    props: Mapping[str, Any] = schema.get("properties", {})
    for key in schema.get("required", ()):
        if key not in value:
            raise SchemaViolation(f"{path}: missing required key {key!r}")
    if schema.get("additionalProperties", True) is False:
        extra = sorted(set(value) - set(props))
        if extra:
            raise SchemaViolation(f"{path}: unexpected key(s) {', '.join(_short(k) for k in extra[:5])}")
    for key, sub in props.items():
        if key in value:
            check(value[key], sub, f"{path}.{key}", depth + 1)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
