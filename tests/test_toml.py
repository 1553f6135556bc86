"""envguard._toml against tomli-w, whose output the lockfile keeps byte for byte."""

from __future__ import annotations

from typing import Any

import pytest
import tomli_w
from hypothesis import given
from hypothesis import strategies as st

from envguard import _toml

_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_KEYS = st.one_of(st.sampled_from(["name", "version", "a-b_c", "requires", ""]), _TEXT)
_SCALARS = st.one_of(_TEXT, st.booleans(), st.integers(-(2**40), 2**40))
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(_KEYS, inner, max_size=4),
        st.lists(st.dictionaries(_KEYS, inner, max_size=4), min_size=1, max_size=3),
    ),
    max_leaves=20,
)


@pytest.mark.slow
@given(st.dictionaries(_KEYS, _VALUES, max_size=6), st.booleans())
def test_renders_what_tomli_w_renders(doc: dict[str, Any], multiline: bool) -> None:
    assert _toml.dumps(doc, multiline_strings=multiline) == tomli_w.dumps(
        doc, multiline_strings=multiline
    )


def test_a_lockfile_shaped_document_and_what_it_hands_to_tomli_w() -> None:
    packages = [
        {"name": "torch", "version": "2.11.0", "requires": ["filelock", "sympy>=1.13.3"]},
        {"name": "tiny", "version": "1"},  # short enough to inline on its own, not with torch
    ]
    doc = {
        "schema": 2,
        "taken_at": "2026-11-30T21:00:00Z",
        "code": {"patch": 'diff --git a/x b/x\n+print("hi")\t\\\n', "dirty": True},
        "packages": packages,
        "inline": [{"a": 1}, {"b": "x"}],  # every one fits: an inline array of tables
        "weird key": {"é": 0.5},  # a float: the whole document goes to tomli-w
    }
    for multiline in (True, False):
        assert _toml.dumps(doc, multiline_strings=multiline) == tomli_w.dumps(
            doc, multiline_strings=multiline
        )
    del doc["weird key"]
    assert "[[packages]]" in _toml.dumps(doc) and "inline = [\n    { a = 1 }," in _toml.dumps(doc)


def test_str_subclasses_are_their_characters() -> None:
    import enum

    class Kind(str, enum.Enum):
        A = "a b"

    class Loud(str):
        def __str__(self) -> str:
            return "LOUD"

    doc = {"k": Kind.A, "l": [Kind.A, Loud("x")], Kind.A: 1, Loud("key"): Loud("v")}
    assert _toml.dumps(doc) == tomli_w.dumps(doc)
