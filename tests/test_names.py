"""The hot path's own PEP 503 names and PEP 440 local labels, held to packaging's."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from envguard import catalog, versions


@given(st.from_regex(r"[A-Za-z0-9._-]{1,30}", fullmatch=True))
def test_canonical_names_as_packaging_gives_them(name: str) -> None:
    assert catalog.canonical(name) == canonicalize_name(name)


def _local(text: str) -> str | None:
    try:
        return Version(text).local
    except InvalidVersion:
        return None


@given(
    st.one_of(
        st.from_regex(r"[0-9a-zA-Z.+_-]{0,20}", fullmatch=True),
        st.from_regex(
            r"\d{1,3}(\.\d{1,3}){0,3}(\+[A-Za-z0-9]{1,6}([._-][A-Za-z0-9]{1,4})?)?", fullmatch=True
        ),
    )
)
@example("0+00")
@example("1.0+A-01_b")
def test_local_labels_as_packaging_reads_them(text: str) -> None:
    assert versions.local(text) == _local(text)


def test_the_labels_torch_builds_carry() -> None:
    builds = [
        ("2.11.0+cu130", "cu130"), ("2.11.0", None), ("2.4.0+rocm6.1", "rocm6.1"),
        ("2.11.0a0+git70d99e9", "git70d99e9"), ("2.11.0+CU130", "cu130"),
    ]  # fmt: skip
    for text, label in builds:
        assert versions.local(text) == _local(text) == label


def test_local_segments_normalised_as_packaging_does() -> None:
    # each segment: digits lose leading zeros, '-'/'_' become '.', letters lowercase
    cases = [
        ("0+00", "0"), ("1.0+A-01_b", "a.1.b"), ("1+0a", "0a"), ("1+00a.007", "00a.7"),
        ("1+a.0.010", "a.0.10"), ("2.4.0+rocm6.01", "rocm6.1"), ("1+007", "7"),
    ]  # fmt: skip
    for text, label in cases:
        assert versions.local(text) == _local(text) == label
