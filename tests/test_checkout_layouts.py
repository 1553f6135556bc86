"""restore --code in the layout most projects use: ``.venv/`` in ``.gitignore``, the venv and
``lockfiles/`` inside the repository, work in progress in train.py."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from envguard import _git
from envguard.errors import RepoError
from envguard.restore import checkout
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
        _git.output(_git.open_repo(root, required=True), *args)
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


# ---------------------------------------------------------------------------------------------
# Any failure puts the repository back: every git call of a restore fails in turn

WORK = ("train.py", "model.py", "data.py", "notes/scratch.txt", "lockfiles/train.envguard.toml")


def _in_progress(project: Project, *, moves: bool) -> Project:
    """Work under way: train.py changed, an untracked note, the committed lock edited since.
    ``moves``: a commit after the snapshot's, so the restore checks out another HEAD."""
    _ignoring_the_venv(project)
    if moves:
        project.write("data.py", "def batches():\n    return [1]\n")
        project.commit("later", "data.py")
    project.write("notes/scratch.txt", "mine\n")
    with project.lock.open("a") as fh:
        fh.write("# my note on this lock\n")
    return project


def _where_things_are(project: Project) -> dict[str, Any]:
    root = project.root
    return {
        "head": git(root, "rev-parse", "HEAD"),
        "branch": git(root, "branch", "--show-current"),
        "stashes": git(root, "stash", "list"),
        "staged": git(root, "diff", "--cached", "--binary"),
        "status": git(root, "status", "--porcelain", "-uall"),
        "files": {
            rel: (root / rel).read_bytes() if (root / rel).exists() else None for rel in WORK
        },
        "held": (root / ".git" / checkout.HELD).exists(),
    }


class FailAt:
    """``_git.output`` whose call number ``n`` fails: before git runs or, with ``after``, once git
    has done its work (a command that fails half-way). A call that tolerates failure
    (``check=False``) then sees no output, as from a git that failed."""

    def __init__(self, n: int, *, after: bool) -> None:
        self.n, self.after, self.seen = n, after, 0
        self.failed: str | None = None
        self.real = _git.output

    def __call__(self, repo: object, *args: str, check: bool = True) -> bytes:
        self.seen += 1
        if self.seen - 1 != self.n:
            return self.real(repo, *args, check=check)
        self.failed = " ".join(args)
        if not check:
            return b""
        if self.after:
            self.real(repo, *args, check=check)
        raise RepoError(f"git {args[0]} failed: injected at call {self.n}")


def _undo(project: Project, before: dict[str, Any]) -> None:
    """Back from a restore that went through (a tolerated failure): as the user would."""
    root = project.root
    git(root, "reset", "-q", "--hard")
    project.lock.unlink()  # in the way of the checkout when the snapshot's commit lacks it
    git(root, "checkout", "-q", str(before["branch"]).strip())
    git(root, "stash", "pop", "-q", "--index")
    project.lock.write_bytes(before["files"][WORK[-1]])


@pytest.mark.slow
@pytest.mark.parametrize("moves", [True, False], ids=["checkout", "stays"])
@pytest.mark.parametrize("after", [False, True], ids=["refused", "half-done"])
def test_every_failure_point_puts_the_repository_back(
    project: Project, monkeypatch: pytest.MonkeyPatch, moves: bool, after: bool
) -> None:
    _in_progress(project, moves=moves)
    before = _where_things_are(project)
    assert before["staged"] == "" and before["stashes"] == ""
    for n in range(100):
        inject = FailAt(n, after=after)
        monkeypatch.setattr(_git, "output", inject)
        code, out, err = _restore(project, "--code")
        monkeypatch.setattr(_git, "output", inject.real)
        where = f"call {n}: git {inject.failed}\n{out}{err}"
        if code == 0:  # past the last call, or a failure the restore may tolerate
            assert "saved your uncommitted work as stash@{0}" in out, where
            assert len(git(project.root, "stash", "list").splitlines()) == 1, where
            assert (project.root / "model.py").read_text().endswith("x + 1\n"), where
            assert (project.root / WORK[-1]).read_bytes() == before["files"][WORK[-1]], where
            if inject.failed is None:
                return
            _undo(project, before)
        else:
            assert "Traceback" not in err and err.startswith("error: "), where
            if "may be in the newest stash" in err:  # whether the push made one is unknowable
                assert len(git(project.root, "stash", "list").splitlines()) == 1, where
                git(project.root, "stash", "pop", "-q", "--index")  # as the error says
        assert _where_things_are(project) == before, where
    raise AssertionError("the restore never got through")


# ---------------------------------------------------------------------------------------------
# The failure points one by one: real failures, and those that are not git's


def _fails_and_puts_back(project: Project, *, said: str = "") -> None:
    before = _where_things_are(project)
    code, out, err = _restore(project, "--code")
    assert code != 0 and "Traceback" not in err and said in err, out + err
    assert git(project.root, "diff", "--cached") == ""
    assert _where_things_are(project) == before
    if "saved your uncommitted work" in out:
        assert "your uncommitted work is back in place" in out


def test_a_locked_index_changes_nothing(project: Project) -> None:
    _in_progress(project, moves=True)
    (project.root / ".git" / "index.lock").write_text("")  # another git holds the index
    _fails_and_puts_back(project, said="index.lock exists")


def test_a_patch_that_does_not_apply_puts_everything_back(project: Project) -> None:
    _in_progress(project, moves=True)
    snapshot_head = git(project.root, "rev-parse", "HEAD~2").strip()  # before lock and later
    hook = project.root / ".git" / "hooks" / "post-checkout"  # edits model.py on the checkout
    hook.write_text(
        f'#!/bin/sh\n[ "$2" = {snapshot_head} ] && [ "$3" = 1 ] && echo clash > model.py\nexit 0\n'
    )
    hook.chmod(0o755)
    _fails_and_puts_back(project, said="the snapshot's patch does not apply")


@pytest.mark.slow
def test_a_half_done_stash_is_popped_and_a_retry_adds_no_stash(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the .gitignore bug did: git stored the stash, then refused to clean the tree. Made
    real again by hiding from restore which paths git ignores."""
    _in_progress(project, moves=True)
    real = _git.output

    def no_check_ignore(repo: object, *args: str, check: bool = True) -> bytes:
        return b"" if "check-ignore" in args else real(repo, *args, check=check)

    monkeypatch.setattr(_git, "output", no_check_ignore)
    for _ in range(3):  # each retry as the first: no stash left, nothing staged
        _fails_and_puts_back(project, said="The following paths are ignored")
    monkeypatch.setattr(_git, "output", real)
    code, _, err = _restore(project, "--code")
    assert code == 0, err
    assert len(git(project.root, "stash", "list").splitlines()) == 1


SAID = {
    "copy into .git": "No space left on device",
    "put back": "No space left on device",
    "tree not the snapshot's": "not restored: after applying, the working tree does not match "
    "the snapshot",
    "^C once the patch is in": "interrupted",
}


def _not_the_snapshot(*args: object) -> bool:
    return False


@pytest.mark.slow
@pytest.mark.parametrize("moves", [True, False], ids=["checkout", "stays"])
@pytest.mark.parametrize("where", list(SAID))
def test_failures_that_are_not_gits_put_everything_back(
    project: Project, monkeypatch: pytest.MonkeyPatch, where: str, moves: bool
) -> None:
    _in_progress(project, moves=moves)
    if where == "copy into .git":
        monkeypatch.setattr("shutil.copy2", _once(shutil.copy2))
    elif where == "put back":
        monkeypatch.setattr("os.rename", _once(os.rename))  # _confine.Root.move_in
    elif where == "tree not the snapshot's":  # after the put-back: the lock edits are in place
        monkeypatch.setattr(checkout, "_same_code", _not_the_snapshot)
    else:
        real = _git.output

        def interrupted(repo: object, *args: str, check: bool = True) -> bytes:
            out = real(repo, *args, check=check)
            if args[:1] == ("apply",):
                raise KeyboardInterrupt
            return out

        monkeypatch.setattr(_git, "output", interrupted)
    before = _where_things_are(project)
    code, out, err = _restore(project, "--code")
    assert code != 0 and err == f"error: {SAID[where]}\n", out + err
    assert git(project.root, "diff", "--cached") == ""
    assert _where_things_are(project) == before


def _once(real: Callable[..., object]) -> Callable[..., object]:
    """``real`` that fails, as on a full disk, the first time it copies or moves a file into
    or out of the .git/ folder where envguard's own files are held."""
    failed: list[tuple[object, ...]] = []

    def call(*args: object, **kwargs: object) -> object:
        if not failed and any(checkout.HELD in str(a) for a in args):
            failed.append(args)
            raise OSError(28, "No space left on device")
        return real(*args, **kwargs)

    return call


@pytest.mark.slow
def test_all_restores_when_the_venv_is_in_gitignore(project: Project, sglang_house: Path) -> None:
    from envguard.demo import incident

    _in_progress(project, moves=True)
    incident.swap_in_sglang(project.venv, sglang_house)  # the venv drifted too
    lock = (project.root / WORK[-1]).read_bytes()
    code, out, err = invoke(
        "restore", str(project.lock), "--find-links", str(project.house), "--offline", "--yes",
        "--all", env=project.activated(),
    )  # fmt: skip
    assert code == 0, err
    assert "saved your uncommitted work as stash@{0}" in out
    stashed = git(project.root, "stash", "show", "--include-untracked", "--name-only", "stash@{0}")
    assert sorted(stashed.split()) == ["notes/scratch.txt", "train.py"]
    assert git(project.root, "diff", "--cached") == ""
    assert (project.root / WORK[-1]).read_bytes() == lock
    assert project.verdict().found() == set()
