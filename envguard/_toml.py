"""The lockfile's TOML, written by tomli-w's rules but faster.

A lockfile holds thousands of plain strings, and tomli-w escapes each one character by character
in Python (with 5,000 distributions, 85 ms of a 420 ms snapshot). This renders the same
document the same way, byte for byte: the structure as tomli-w lays it out (literals first, then
tables; arrays of tables inline when every one fits a 100-column line), strings without
anything to escape as they are, and every other string, and any type outside the lockfile's
own (floats, dates, str subclasses), by tomli-w itself. ``tests/test_toml.py`` holds it to
tomli-w's output.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

_PLAIN = re.compile(r'[^\x00-\x08\x0a-\x1f\x7f"\\]*')  # nothing tomli-w would escape
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_INDENT = "    "
_MAX_LINE = 100


class _Unsupported(Exception):
    """A value outside the lockfile's types: the whole document goes to tomli-w."""


def dumps(doc: Mapping[str, Any], *, multiline_strings: bool = False) -> str:
    try:
        return "".join(_Writer(multiline_strings).table(doc, name=""))
    except _Unsupported:
        import tomli_w

        return tomli_w.dumps(doc, multiline_strings=multiline_strings)


class _Writer:
    def __init__(self, multiline: bool) -> None:
        self.multiline = multiline
        self.keys: dict[str, str] = {}  # a lockfile repeats a few dozen keys thousands of times

    def table(self, table: Mapping[str, Any], *, name: str, aot: bool = False) -> Iterator[str]:
        yielded = False
        literals: list[tuple[str, Any]] = []
        tables: list[tuple[str, Any, bool]] = []
        for k, v in table.items():
            kind = type(v)
            if kind in _SCALARS:  # most values: no ABC checks for them
                literals.append((k, v))
            elif _is_table(v):
                tables.append((k, v, False))
            elif _is_aot(v) and not all(self._fits_inline(t) for t in v):
                tables.extend((k, t, True) for t in v)
            else:
                literals.append((k, v))
        if aot or (name and (literals or not tables)):
            yielded = True
            yield f"[[{name}]]\n" if aot else f"[{name}]\n"
        if literals:
            yielded = True
            for k, v in literals:
                yield f"{self.key(k)} = {self.literal(v)}\n"
        for k, v, in_aot in tables:
            if yielded:
                yield "\n"
            else:
                yielded = True
            part = self.key(k)
            yield from self.table(v, name=f"{name}.{part}" if name else part, aot=in_aot)

    def literal(self, obj: object, nest: int = 0) -> str:
        if type(obj) is str:  # by far the most common: first
            return f'"{obj}"' if _PLAIN.fullmatch(obj) else self.string(obj, self.multiline)
        if isinstance(obj, bool):
            return "true" if obj else "false"
        if isinstance(obj, int):
            return str(obj)
        if isinstance(obj, str):  # a str subclass (an Enum member): tomli-w's own business
            raise _Unsupported(type(obj).__name__)
        if isinstance(obj, (list, tuple)):
            if not obj:
                return "[]"
            inner = _INDENT * (1 + nest)
            items = ",\n".join(inner + self.literal(item, nest + 1) for item in obj)
            return f"[\n{items},\n{_INDENT * nest}]"
        if _is_table(obj):
            return self.inline_table(obj)  # type: ignore[arg-type]
        raise _Unsupported(type(obj).__name__)  # floats, dates: tomli-w's business

    def inline_table(self, obj: Mapping[str, Any]) -> str:
        if not obj:
            return "{}"
        return "{ " + ", ".join(f"{self.key(k)} = {self.literal(v)}" for k, v in obj.items()) + " }"

    def key(self, part: str) -> str:
        if type(part) is not str:  # a str subclass formats as tomli-w decides
            raise _Unsupported(type(part).__name__)
        known = self.keys.get(part)
        if known is None:
            known = self.keys[part] = (
                part if _BARE_KEY.fullmatch(part) else self.string(part, False)
            )
        return known

    def string(self, s: str, multiline: bool) -> str:
        if _PLAIN.fullmatch(s):
            return f'"{s}"'
        import tomli_w

        # tomli-w's own escaping for the rare string that needs any
        return tomli_w.dumps({"k": s}, multiline_strings=multiline)[4:-1]

    def _fits_inline(self, obj: Mapping[str, Any]) -> bool:
        rendered = f"{_INDENT}{self.inline_table(obj)},"
        return len(rendered) <= _MAX_LINE and "\n" not in rendered


_SCALARS = frozenset({str, bool, int})


def _is_table(obj: object) -> bool:
    return type(obj) is dict or isinstance(obj, Mapping)


def _is_aot(obj: object) -> bool:
    """A non-empty list of tables (tomli-w's ``is_aot``)."""
    return bool(isinstance(obj, (list, tuple)) and obj and all(_is_table(v) for v in obj))
