"""Records: frozen, keyword-only dataclasses that serialise themselves, driven by their type
hints.

``to_dict`` gives plain TOML/JSON-able data (``None`` fields are left out, since TOML has no
null); ``from_dict`` rebuilds and validates it, and every error names the field's path, e.g.
``packages[3].version: expected a string, got 12``. The lockfile's records are in
:mod:`envguard.model`; a command's, a journal's and a plan's are beside their code.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, ClassVar, TypeVar, Union

from envguard.errors import LockfileError

R = TypeVar("R", bound="Record")


class Record:
    """Mixin: dict round-trip for frozen dataclasses, driven by their type hints."""

    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]
    # Fields an older envguard wrote and a lock must no longer carry, each with why: refused
    # by name where the lock is read, rather than as an unknown field.
    REFUSED: ClassVar[dict[str, str]] = {}

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, has_default in _layout(type(self)):
            value = encode(getattr(self, name))
            # TOML has no null, and an empty table or list with a default says nothing.
            if value is None or (has_default and value in ([], {})):
                continue
            out[name] = value
        return out

    @classmethod
    def from_dict(cls: type[R], data: Any, path: str = "") -> R:
        return typing.cast(R, _decode(cls, data, path or cls.__name__))

    def validate(self, path: str) -> None:
        """Checks beyond types; subclasses override and raise LockfileError."""


_LAYOUTS: dict[type, tuple[tuple[str, bool], ...]] = {}


def _layout(cls: type) -> tuple[tuple[str, bool], ...]:
    """Per class, once: each field's name and whether it has a default (a lockfile writes
    hundreds of records of a handful of classes)."""
    layout = _LAYOUTS.get(cls)
    if layout is None:
        layout = _LAYOUTS[cls] = tuple(
            (
                f.name,
                f.default is not dataclasses.MISSING
                or f.default_factory is not dataclasses.MISSING,
            )
            for f in dataclasses.fields(cls)
        )
    return layout


def encode(value: Any) -> Any:
    if isinstance(value, Record):
        return value.to_dict()
    if isinstance(value, tuple):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        return {k: encode(v) for k, v in value.items()}
    return value


def _fail(path: str, expected: str, got: Any) -> LockfileError:
    shown = repr(got) if len(repr(got)) <= 40 else type(got).__name__
    return LockfileError(f"{path}: expected {expected}, got {shown}")


_SCALARS: dict[type, str] = {str: "a string", bool: "true or false", int: "an integer"}


def _decode(tp: Any, data: Any, path: str) -> Any:
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return None if data is None else _decode(args[0], data, path)
    if origin is tuple:
        if not isinstance(data, list):
            raise _fail(path, "a list", data)
        (item,) = typing.get_args(tp)[:1]
        return tuple(_decode(item, v, f"{path}[{i}]") for i, v in enumerate(data))
    if origin is dict:
        if not isinstance(data, dict):
            raise _fail(path, "a table", data)
        _, vt = typing.get_args(tp)
        return {str(k): _decode(vt, v, f"{path}.{k}") for k, v in data.items()}
    if isinstance(tp, type) and issubclass(tp, Record):
        return _decode_record(tp, data, path)
    if tp is float:
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            raise _fail(path, "a number", data)
        return float(data)
    if tp in _SCALARS:
        # bool is an int in Python; a lockfile saying `files = true` is still wrong.
        if not isinstance(data, tp) or (tp is int and isinstance(data, bool)):
            raise _fail(path, _SCALARS[tp], data)
        return data
    raise TypeError(f"model type {tp!r} at {path} is not supported")  # a bug, not bad input


_SCHEMAS: dict[type, tuple[dict[str, Any], dict[str, bool]]] = {}


def _schema(cls: type[Record]) -> tuple[dict[str, Any], dict[str, bool]]:
    """Per class, once: each field's type, and whether the field is required."""
    if cls in _SCHEMAS:
        return _SCHEMAS[cls]
    hints = typing.get_type_hints(cls)  # each class's own module globals, MRO included
    required = {
        f.name: f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        for f in dataclasses.fields(cls)  # type: ignore[arg-type,unused-ignore]
    }
    _SCHEMAS[cls] = (hints, required)
    return hints, required


def _decode_record(cls: type[Record], data: Any, path: str) -> Record:
    if not isinstance(data, dict):
        raise _fail(path, "a table", data)
    hints, required = _schema(cls)
    refused = sorted(set(data) & set(cls.REFUSED))
    if refused:
        raise LockfileError(f"{path}.{refused[0]}: {cls.REFUSED[refused[0]]}")
    unknown = sorted(set(data) - set(required))
    if unknown:
        raise LockfileError(f"{path}.{unknown[0]}: unknown field")
    kwargs: dict[str, Any] = {}
    for name, needed in required.items():
        if name in data:
            kwargs[name] = _decode(hints[name], data[name], f"{path}.{name}")
        elif needed:
            raise LockfileError(f"{path}.{name}: missing")
    record = cls(**kwargs)
    record.validate(path)
    return record
