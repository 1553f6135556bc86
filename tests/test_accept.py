"""Every drift screen ends with the way to accept the drift when it was meant: the snapshot
that records it into that very lock, and the commit of the lockfile. The line is run as
written, and the diff after it is clean. Two lockfiles compared have nothing to accept."""

from __future__ import annotations

import dataclasses
import shlex
from pathlib import Path

import pytest

from envguard import lockfile
from tests.conftest import git, make_venv
from tests.factories import base, torch_build
from tests.project import Project, invoke

_MEANT = "meant it? "


def _accept(out: str) -> str:
    """The screen's last line, wrapped lines joined: the accept line."""
    text = " ".join(line.strip() for line in out.rstrip("\n").split("\n"))
    assert _MEANT in text, out
    return text[text.rindex(_MEANT) + len(_MEANT) :]


def _run_as_written(line: str, env: dict[str, str | None]) -> None:
    """The line's commands, each as a shell would split it; envguard's in-process."""
    line = line.removeprefix("on a drifted node: ").replace("`", "")
    for command in line.replace(", then ", " && ").split(" && "):
        argv = shlex.split(command)
        if argv[0] == "envguard":
            code, _, err = invoke(*argv[1:], env=env)
            assert code == 0, err
        elif argv[:2] == ["git", "commit"]:
            git(Path.cwd(), "commit", "-q", "-m", "accept the drift")  # no editor in a test
        else:
            git(Path.cwd(), *argv[1:])


@pytest.mark.slow
def test_diff_with_drift_ends_with_the_snapshot_and_the_commit(project: Project) -> None:
    project.snapshot()
    project.commit("lock", "lockfiles")
    project.install("plainpkg==2.4")
    env = project.activated()
    for width in (80, 160):
        code, out, _ = invoke("diff", env={**env, "COLUMNS": str(width)})
        assert code == 1 and all(len(line) <= width for line in out.splitlines())
        assert out.rstrip("\n").split("\n")[-1].strip().endswith("git commit`"), out
        line = _accept(out)
        assert line == (
            "`envguard snapshot`, then `git add lockfiles/train.envguard.toml && git commit`"
        )
    _run_as_written(line, env)
    assert project.verdict().exit_code == 0
    assert git(project.root, "status", "--porcelain", "lockfiles") == ""


def test_no_drift_and_quiet_have_no_such_line(project: Project) -> None:
    project.snapshot()
    project.commit("lock", "lockfiles")
    code, out, _ = invoke("diff", env=project.activated())
    assert code == 0 and _MEANT not in out
    project.install("plainpkg==2.4")
    code, out, _ = invoke("diff", "-q", env=project.activated())
    assert code == 1 and _MEANT not in out


def test_two_lockfiles_have_nothing_to_accept(project: Project, tmp_path: Path) -> None:
    project.snapshot()
    before = tmp_path / "before.envguard.toml"
    before.write_bytes(project.lock.read_bytes())
    project.install("plainpkg==2.4")
    project.snapshot()
    code, out, _ = invoke("diff", str(before), str(project.lock))
    assert code == 1 and _MEANT not in out


@pytest.mark.slow
def test_a_tools_lock_is_accepted_with_its_venv_and_its_file(
    project: Project, tmp_path: Path
) -> None:
    """A lock a bare snapshot would not write, of a venv it would not take: the line names
    both, and run as written it records that venv into that file."""
    project.snapshot()
    tool = make_venv(tmp_path / "datagen")
    lock = project.root / "lockfiles" / "tools" / "datagen.envguard.toml"
    assert invoke("snapshot", "-q", "--venv", str(tool), "-o", str(lock))[0] == 0
    project.commit("lock", "lockfiles")
    project.install("plainpkg==2.4")  # into the training venv: not the tool's drift
    incident_env = project.activated()
    from tests.conftest import uv_install

    uv_install(tool, project.house, "plainpkg==2.4")
    code, out, _ = invoke("diff", str(lock), env=incident_env)
    assert code == 1, out
    line = _accept(out)
    assert line == (
        f"`envguard snapshot --venv {tool} -o lockfiles/tools/datagen.envguard.toml`, then "
        "`git add lockfiles/tools/datagen.envguard.toml && git commit`"
    )
    _run_as_written(line, incident_env)
    assert invoke("diff", str(lock), env=incident_env)[0] == 0


def test_a_lock_outside_the_repository_is_not_committed(project: Project, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.envguard.toml"
    assert invoke("snapshot", "-q", "-o", str(elsewhere), env=project.activated())[0] == 0
    project.install("plainpkg==2.4")
    code, out, _ = invoke("diff", str(elsewhere), env=project.activated())
    assert code == 1 and _accept(out) == f"`envguard snapshot -o {elsewhere}`"


def test_fleet_with_drift_ends_with_the_snapshot_on_a_node(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    lock = tmp_path / "train.envguard.toml"
    lockfile.write(lock, base())
    node = tmp_path / "n" / "gpu-06.envguard.toml"
    drifted = base(torch=torch_build("2.11.0+cu130", "13.0"))
    lockfile.write(
        node,
        dataclasses.replace(drifted, host=dataclasses.replace(drifted.host, hostname="gpu-06")),
    )
    code, out, _ = invoke("fleet", str(lock), "n", env={"COLUMNS": "80"})
    assert code == 1 and all(len(line) <= 80 for line in out.splitlines())
    assert _accept(out) == (
        "on a drifted node: `envguard snapshot --venv /data/venv --name train -o "
        "train.envguard.toml`"
    )
    lockfile.write(node, base())
    code, out, _ = invoke("fleet", str(lock), "n")
    assert code == 0 and _MEANT not in out
