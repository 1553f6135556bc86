"""restore --code: the snapshot's HEAD and patch, and the current work always kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from envguard.errors import NotRestored
from envguard.probes import code
from envguard.restore import checkout
from tests.conftest import git


def _snapshot_code(repo: Path):
    state, _ = code.probe(repo, required=True)
    assert state is not None
    return state


@pytest.mark.slow
def test_restores_head_and_patch_and_keeps_current_work(repo: Path) -> None:
    (repo / "dflash_model.py").write_text("def forward(x):\n    return x * 2  # experiment\n")
    snap = _snapshot_code(repo)
    git(repo, "checkout", "-q", "--", ".")
    (repo / "new.py").write_text("print('later work')\n")
    git(repo, "add", "new.py")
    git(repo, "commit", "-q", "-m", "later")
    (repo / "train.py").write_text("import dflash_model\n# today's uncommitted work\n")
    (repo / "scratch.txt").write_text("untracked notes\n")

    done = checkout.restore_code(snap, repo)
    assert done.head == snap.head and done.branch is None  # main moved on: detached
    assert (repo / "dflash_model.py").read_text().endswith("# experiment\n")
    assert not (repo / "new.py").exists() and not (repo / "scratch.txt").exists()
    assert _snapshot_code(repo).patch_sha256 == snap.patch_sha256
    assert done.saved and "stash@{0}" in done.saved
    # the work is in the stash, untracked file included
    git(repo, "checkout", "-q", "--", ".")
    git(repo, "checkout", "-q", "main")
    git(repo, "stash", "pop", "-q")
    assert "today's uncommitted work" in (repo / "train.py").read_text()
    assert (repo / "scratch.txt").read_text() == "untracked notes\n"


def test_branch_at_the_same_commit_is_checked_out(repo: Path) -> None:
    snap = _snapshot_code(repo)
    git(repo, "checkout", "-q", "-b", "other")
    done = checkout.restore_code(snap, repo)
    assert done.branch == "main" and done.saved is None


def test_missing_commit_changes_nothing(repo: Path, tmp_path: Path) -> None:
    import dataclasses

    snap = dataclasses.replace(_snapshot_code(repo), head="f" * 40)
    (repo / "train.py").write_text("work in progress\n")
    with pytest.raises(NotRestored, match=r"is not in .* Nothing was changed"):
        checkout.restore_code(snap, repo)
    assert (repo / "train.py").read_text() == "work in progress\n"
    assert git(repo, "stash", "list") == ""


def test_patch_that_does_not_apply_rolls_back(repo: Path) -> None:
    import dataclasses

    snap = _snapshot_code(repo)
    bad = dataclasses.replace(
        snap,
        patch="diff --git a/nope b/nope\n--- a/nope\n+++ b/nope\n@@ -1 +1 @@\n-x\n+y\n",
        patch_sha256="x",
    )
    (repo / "train.py").write_text("mine\n")
    with pytest.raises(NotRestored, match="does not apply"):
        checkout.restore_code(bad, repo)
    assert (repo / "train.py").read_text() == "mine\n"
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip() == "main"
