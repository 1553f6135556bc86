"""Sizes for people: decimal units, as du --si and the issue reports use them."""

from __future__ import annotations


def shown(value: str, unit: str) -> str:
    """A change's value as a screen shows it: a count of bytes in units (JSON keeps it)."""
    return human_bytes(int(value)) if unit == "bytes" and value.isdigit() else value


def human_bytes(n: int) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}".replace(".0 ", " ")
    return f"{n} B"
