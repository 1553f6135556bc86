"""Every result has a screen in each format, and every restore step its lines.

The formats dispatch by explicit tables (``Human.renderers``, ``Human.step_renderers``), not
by a method name made from the kind: a result or step added without its renderer fails here,
not on a user's screen.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import pkgutil
import types
import typing
from pathlib import Path

import pytest

import envguard.results
from envguard.output.human import Human
from envguard.record import Record
from envguard.results import Result


def _result_classes() -> list[type[Result]]:
    """Every class in :mod:`envguard.results` and its modules that has a ``kind``."""
    for info in pkgutil.iter_modules(envguard.results.__path__):
        importlib.import_module(f"envguard.results.{info.name}")
    found: list[type[Result]] = []
    todo = list(Result.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.__module__.startswith("envguard.results") and "kind" in vars(cls):
            found.append(cls)
    return sorted(found, key=lambda cls: cls.kind)


RESULTS = _result_classes()


def test_the_results_are_found() -> None:
    kinds = {cls.kind for cls in RESULTS}
    assert {"diff", "snapshot", "restore", "error", "tool add"} <= kinds
    assert len(kinds) == len(RESULTS), "two results share a kind"


@pytest.mark.parametrize("cls", RESULTS, ids=lambda cls: cls.kind)
def test_every_result_kind_has_a_human_screen(cls: type[Result]) -> None:
    assert cls.kind in Human().renderers(), f"{cls.__name__}: no screen in Human.renderers"


def _jsonable(tp: object) -> bool:
    """A type whose values the result's default ``to_dict`` puts into JSON as they are."""
    if tp in (str, int, float, bool, type(None)):
        return True
    if isinstance(tp, type) and issubclass(tp, Record):
        return True
    args = typing.get_args(tp)
    return typing.get_origin(tp) in (tuple, types.UnionType, typing.Union) and all(
        a is Ellipsis or _jsonable(a) for a in args
    )


@pytest.mark.parametrize("cls", RESULTS, ids=lambda cls: cls.kind)
def test_every_result_kind_has_a_json_document(cls: type[Result]) -> None:
    """--json renders a result by its own ``to_dict``, or by the base's when the document
    is the result's fields: then each field must be data JSON holds as it is."""
    if cls.to_dict is not Result.to_dict:
        return
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        assert _jsonable(hints[f.name]), f"{cls.__name__}.{f.name}: not JSON as it is"


def test_a_results_default_document_is_its_fields() -> None:
    from envguard.results.export import ExportDone
    from envguard.results.protect import UnprotectDone

    done = ExportDone(output="pylock.toml", format="pylock", packages=3)
    assert done.to_dict() == {"output": "pylock.toml", "format": "pylock", "packages": 3}
    assert UnprotectDone(venv="/v", lifted=False).to_dict() == {"venv": "/v", "lifted": False}


def test_no_screen_is_left_without_a_result_kind() -> None:
    assert set(Human().renderers()) == {cls.kind for cls in RESULTS}


def test_every_restore_step_has_its_lines() -> None:
    from envguard.restore.steps import Step

    steps = set(typing.get_args(Step))
    assert len(steps) >= 5
    assert set(Human().step_renderers()) == steps


def test_the_json_page_names_every_commands_kind() -> None:
    """docs/json.md's list of ``kind`` values is every command's result (the error's kind is
    the command that failed); bisect and the tool commands were missing from it."""
    from pathlib import Path

    page = (Path(__file__).resolve().parents[1] / "docs" / "json.md").read_text()
    listed = page.split("`kind` is the command (", 1)[1].split(").", 1)[0]
    named = {k.strip().strip("`") for k in " ".join(listed.split()).split(",")}
    # a refusal (``run --max-cost``) has a screen of its own and its command's kind
    assert named == {cls.kind for cls in RESULTS if not cls.kind.endswith(" refused")} - {"error"}


@pytest.mark.parametrize("width", [80, 160])
def test_long_subjects_and_absent_or_unset_keep_the_values_in_one_column(width: int) -> None:
    """#32: "flashinfer-python  absent" and "CUDA_VISIBLE_DEVICES  unset" stood out of the
    values' column. The column fits the longest subject up to its limit; one longer still
    has its values below, in the column."""
    from envguard.drift.areas import named

    rows = [("libraries", "flashinfer-python", "absent", "0.6.2"),
            ("env", "CUDA_VISIBLE_DEVICES", "unset", "0,1"),
            ("libraries", "numpy", "2.3.0", "2.4.0"),
            ("packages", "a-package-with-a-very-long-name", "1.0", "2.0")]  # fmt: skip
    changes = tuple(
        named(area).change(subject=s, old=o, new=n, why="why") for area, s, o, n in rows
    )
    lines = list(Human(width=width).changes(changes))
    starts = {line.index(f"{o} → {n}") for _, _, o, n in rows for line in lines
              if f"{o} → {n}" in line}  # fmt: skip
    assert len(starts) == 1, lines  # every row's values in one column
    long = next(i for i, line in enumerate(lines) if "a-package-with-a-very-long-name" in line)
    assert lines[long].rstrip().endswith("a-package-with-a-very-long-name")  # values below
    assert all(len(line) <= width for line in lines)


def test_host_memory_reads_in_units_on_screen_and_whole_in_json(tmp_path: Path) -> None:
    """#48 item 5: the host rule showed 137438953472 → 68719476736 on the screen."""
    from envguard import lockfile
    from tests.factories import base
    from tests.project import invoke

    old, new = base(), base()
    new = dataclasses.replace(new, host=dataclasses.replace(new.host, memory_bytes=64 << 30))
    a, b = tmp_path / "a.envguard.toml", tmp_path / "b.envguard.toml"
    lockfile.write(a, old)
    lockfile.write(b, new)
    code, out, _ = invoke("diff", str(a), str(b), "--fail-on", "any", env={"COLUMNS": "80"})
    assert code == 1
    row = next(line for line in out.splitlines() if line.startswith("info"))
    assert "137.4 GB → 68.7 GB" in row and "bytes" not in row, out
    code, out, _ = invoke("diff", str(a), str(b), "--json")
    (change,) = [c for c in json.loads(out)["result"]["changes"] if c["area"] == "host"]
    assert change["subject"] == "memory" and change["unit"] == "bytes"
    assert (change["old"], change["new"]) == (str(128 << 30), str(64 << 30))


def test_the_exit_codes_page_and_help_say_the_one_table() -> None:
    """#48 item 5: the group's help said 0/1/2 while restore exits 3 and an interrupt 130."""
    from click.testing import CliRunner

    from envguard import exits
    from envguard.cli import cli

    page = (Path(__file__).resolve().parents[1] / "docs" / "exit-codes.md").read_text()
    assert exits.table() in page
    rows = [line for line in page.splitlines() if line.startswith("| ") and line[2:3].isdigit()]
    assert rows == exits.table().splitlines()[2:]  # no code the table lacks
    shown = " ".join(CliRunner().invoke(cli, ["--help"], env={"COLUMNS": "80"}).output.split())
    assert exits.summary().replace("\n  ", " ") in shown
    for code in exits.CODES:  # every code the commands exit with is the table's
        assert f" {code.code} " in exits.summary()
    from envguard.errors import EnvguardError, NotRestored
    from envguard.restore.steps import PARTLY

    assert {EnvguardError.exit_code, NotRestored.exit_code, PARTLY} <= {c.code for c in exits.CODES}
