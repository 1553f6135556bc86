"""restore --code in the layout most projects use: ``.venv/`` in ``.gitignore``, the venv and
``lockfiles/`` inside the repository, work in progress in train.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from envguard import _git
from envguard.errors import RepoError
from tests.conftest import git
from tests.project import Project, invoke


def _restore(project: Project, *args: str) -> tuple[int, str, str]:
    return invoke(
        "restore", str(project.lock), "--offline", "--yes", *args, env=project.activated()
    )  # fmt: skip


def _ignoring_the_venv(project: Project) -> Project:
    """The snapshot's patch in model.py, the lock committed, new work in train.py."""
    project.write(".gitignore", ".venv/\n")
    project.commit("ignore the venv", ".gitignore")
    project.write("model.py", "def forward(x):\n    return x + 1\n")
    project.snapshot()
    project.commit("lock", "lockfiles")
    git(project.root, "checkout", "-q", "--", "model.py")
    project.write("train.py", "my work\n")
    return project


def test_code_restores_when_the_venv_is_in_gitignore(project: Project) -> None:
    _ignoring_the_venv(project)
    code, out, err = _restore(project, "--code")
    assert code == 0, err
    assert "saved your uncommitted work as stash@{0}" in out
    assert (project.root / "model.py").read_text() == "def forward(x):\n    return x + 1\n"
    assert git(project.root, "diff", "--cached", "--name-only") == ""
    stashed = git(project.root, "stash", "show", "--include-untracked", "--name-only", "stash@{0}")
    assert stashed.split() == ["train.py"]


# ---------------------------------------------------------------------------------------------
# A failing git command says git's reason, not its last line


def _fails(root: Path, *args: str) -> str:
    with pytest.raises(RepoError) as caught:
        _git.run(_git.open_repo(root, required=True), *args)
    return str(caught.value)


def test_an_advice_is_not_the_reason(project: Project) -> None:
    project.write(".gitignore", ".venv/\n")
    said = _fails(project.root, "add", "--", ".venv")
    assert said.endswith("The following paths are ignored by one of your .gitignore files: .venv")
    assert "hint:" not in said and "advice.addIgnoredFile" not in said


def test_the_error_line_is_the_reason_not_aborting(project: Project) -> None:
    git(project.root, "checkout", "-q", "-b", "other")
    project.write("train.py", "committed on other\n")
    project.commit("other", "train.py")
    git(project.root, "checkout", "-q", "main")
    project.write("train.py", "my work\n")
    said = _fails(project.root, "checkout", "other")
    assert (
        "Your local changes to the following files would be overwritten by checkout: train.py"
        in said
    )
    assert "Aborting" not in said and "error:" not in said


def test_a_fatal_line_is_the_reason(project: Project) -> None:
    said = _fails(project.root, "rev-parse", "--verify", "no-such-branch")
    assert said.endswith("failed in " + str(project.root) + ": Needed a single revision")
