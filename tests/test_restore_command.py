"""``envguard restore`` as every command is: a core in :mod:`envguard.commands` (its plan,
then the run) that a library calls without click, and a CLI that shows, asks and renders."""

from __future__ import annotations

import json
from pathlib import Path

import click.testing
import pytest
from click.testing import CliRunner

from envguard import config
from envguard.cli import cli
from envguard.commands import restore as command
from envguard.output.human import Human
from envguard.restore.build import Outcome
from envguard.restore.plan import Overrides
from envguard.restore.steps import Step
from tests.project import Project, invoke


def _offline(project: Project) -> tuple[str, ...]:
    return ("--offline", "--find-links", str(project.house))


def test_restore_is_a_command_a_library_calls(project: Project) -> None:
    project.snapshot()
    project.install("plainpkg==2.4")
    cfg, offline = config.load(), _overrides(project)
    planned = command.prepare(cfg, project.lock, venv=project.venv, overrides=offline, dry_run=True)
    assert planned.plan is not None and planned.replaces is None  # a dry run replaces nothing
    assert "goes away plainpkg 2.4" in Human().restore_plan(planned)
    told: list[object] = []
    done = command.restore(planned, on_step=told.append)
    assert (done.exit_code, done.failure, told) == (0, None, [])
    assert done.to_dict()["plan"]["replaces_existing"] is True

    real = command.prepare(cfg, project.lock, venv=project.venv, overrides=offline, rebuild=True)
    assert real.replaces == str(project.venv)  # the CLI asks before run() replaces it
    assert Human(verbosity=-1).restore_plan(real) == ""  # -q: the outcome only


@pytest.mark.slow
def test_the_steps_are_told_as_they_are_done(project: Project) -> None:
    project.snapshot()
    project.install("plainpkg==2.4")
    planned = command.prepare(
        config.load(), project.lock, venv=project.venv,
        overrides=_overrides(project), everything=True,
    )  # fmt: skip
    told: list[Step] = []
    done = command.restore(planned, on_step=told.append)
    assert done.exit_code == 0, done.failure
    assert [type(step).__name__ for step in told] == ["Outcome", "CacheStep", "CodeStep"]
    assert told[0] == done.result.venv and isinstance(told[0], Outcome)  # the venv first
    shown = [Human().restore_step(step) for step in told]
    assert shown[0].startswith("Restored .venv: ") and shown[2].startswith("Restored code")


def _overrides(project: Project) -> Overrides:
    return Overrides(find_links=(str(project.house),), offline=True)


@pytest.fixture
def a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """stdin is a terminal, so that restore asks (click's runner gives it a pipe)."""
    monkeypatch.setattr(click.testing._NamedTextIOWrapper, "isatty", lambda self: True)


@pytest.mark.parametrize(
    ("answer", "code", "restored"), [("n\n", 1, False), ("\n", 1, False), ("y\n", 0, True)]
)
@pytest.mark.slow
@pytest.mark.usefixtures("a_terminal")
def test_replacing_the_venv_is_asked_first(
    project: Project, answer: str, code: int, restored: bool
) -> None:
    project.snapshot()
    project.install("plainpkg==2.4")
    done = CliRunner().invoke(
        cli, ["restore", str(project.lock), *_offline(project)], input=answer,
        env={**project.activated(), "NO_COLOR": "1"},
    )  # fmt: skip
    assert done.exit_code == code, done.stderr
    assert f"Replace {project.venv} (the old venv is kept)? [y/N]" in done.stdout
    assert done.stdout.index("Restore plan") < done.stdout.index("Replace ")  # shown first
    assert ("Restored .venv" in done.stdout) is restored
    # said yes, a terminal's stderr draws the progress bars; said no, only the one line
    assert (done.stderr == "error: aborted\n") if not restored else ("error" not in done.stderr)
    kept = (project.venv / "lib").glob("python*/site-packages/plainpkg")
    assert bool(list(kept)) is not restored  # said no: the venv is untouched


def test_a_part_left_undone_is_its_screen_then_one_error_line(
    project: Project, tmp_path: Path
) -> None:
    """--all with the code unrestorable: the venv and caches are restored and said, the code
    is said not to be, then one error line, exit 3; --json holds each part."""
    project.snapshot("--save-cache")
    project.commit("lock", "lockfiles")
    args = ("restore", str(project.lock), "--all", "--yes", "--repo", str(tmp_path))
    code, out, err = invoke(*args, *_offline(project), env=project.activated())
    assert code == 3
    assert "Already matches the lock" in out and "Code not restored:" in out
    assert err == (
        "error: partly restored: venv and caches restored; code not restored: "
        f"{tmp_path}: not inside a git repository\n"
    )
    code, out, err = invoke(*args, "--json", *_offline(project), env=project.activated())
    doc = json.loads(out)
    assert (code, doc["exit_code"], doc["kind"]) == (3, 3, "restore")
    assert [f["part"] for f in doc["result"]["failed"]] == ["code"]
    assert err.startswith("error: partly restored: ")
