"""Which Requires-Dist lines hold in one venv: markers evaluated for its interpreter, an
extra's lines kept only where a line in effect asks for that extra (#32, item 1). What
grouping reads as "X brought Y", so a line that does not hold must never make an edge."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from envguard.requirements import in_effect, marker_environment

PY311 = marker_environment("3.11.7", "cpython")


def test_an_extra_counts_where_a_line_in_effect_asks_for_it() -> None:
    kept = in_effect(
        {
            "vllm": ("fastapi[Standard]>=0.1", "pandas; extra == 'bench'"),
            "fastapi": ("starlette", 'uvicorn[standard]; extra == "standard"',
                        'orjson; extra == "all"'),
            "uvicorn": ("h11", 'uvloop; extra == "standard" and sys_platform != "win32"'),
            "pandas": (),
        },
        PY311,
    )  # fmt: skip
    assert kept["vllm"] == ("fastapi[Standard]>=0.1",)  # nobody asked vllm for bench
    assert set(kept["fastapi"]) == {"starlette", 'uvicorn[standard]; extra == "standard"'}
    assert set(kept["uvicorn"]) == {
        "h11",
        'uvloop; extra == "standard" and sys_platform != "win32"',
    }


def test_markers_are_the_venv_s_interpreter_s() -> None:
    lines = {"vllm": ('six>=1.16; python_version > "3.11"', "numpy")}
    assert in_effect(lines, PY311)["vllm"] == ("numpy",)
    assert set(in_effect(lines, marker_environment("3.12.1", "cpython"))["vllm"]) == set(
        lines["vllm"]
    )


def test_a_marker_that_does_not_parse_is_no_evidence_against_its_line() -> None:
    lines = {"a": ("b; python_version >>> '3'",)}
    assert in_effect(lines, PY311)["a"] == lines["a"]


def test_an_extra_of_a_package_not_there_asks_nothing() -> None:
    assert in_effect({"a": ("ghost[x]",)}, PY311) == {"a": ("ghost[x]",)}


_NAMES = st.sampled_from(["a", "b", "c", "d"])
_LINE = st.builds(
    lambda name, extra, ask: f"{name}{f'[{ask}]' if ask else ''}"
    + (f"; extra == '{extra}'" if extra else ""),
    _NAMES, st.sampled_from(["", "x", "y"]), st.sampled_from(["", "x", "y", "x,y"]),
)  # fmt: skip


@given(st.dictionaries(_NAMES, st.lists(_LINE, max_size=5).map(tuple), min_size=1))
def test_what_is_kept_is_every_plain_line_and_only_lines_of_asked_extras(
    requires: dict[str, tuple[str, ...]],
) -> None:
    kept = in_effect(requires, PY311)
    asked = {(line.split("[")[0], e) for lines in kept.values() for line in lines if "[" in line
             for e in line.split("[")[1].split("]")[0].split(",")}  # fmt: skip
    for name, lines in requires.items():
        assert set(kept[name]) <= set(lines)
        for line in lines:
            extra = line.split("extra == '")[1][0] if "extra" in line else None
            assert (line in kept[name]) == (extra is None or (name, extra) in asked), line
