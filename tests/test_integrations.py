"""envguard where users already work, tested against the real tools.

pre-commit: the repository is a hook repository (``.pre-commit-hooks.yaml``); the real
``pre-commit try-repo`` installs the hook from this checkout into pre-commit's own virtualenv
(which sets ``VIRTUAL_ENV`` to itself) and runs it in a project laid out as users lay it out.
That install needs envguard's dependencies from the package index, as it does for users.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from envguard.demo import incident
from tests.project import Project

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def pre_commit_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One hook environment for the session, never the developer's ~/.cache/pre-commit."""
    return tmp_path_factory.mktemp("pre-commit-home")


def _try_repo(project: Project, home: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env.update(PRE_COMMIT_HOME=str(home), NO_COLOR="1", COLUMNS="80")
    env.pop("UV_OFFLINE", None)  # the hook's own install reaches the index, as for users
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(ROOT), "envguard-diff",
         "--all-files", "--verbose"],
        cwd=project.root, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip


def test_the_pre_commit_hook_gates_on_the_training_venv(
    project: Project, sglang_house: Path, pre_commit_home: Path
) -> None:
    pytest.importorskip("pre_commit")
    project.snapshot()
    project.commit("lock the known-good environment", "lockfiles")
    clean = _try_repo(project, pre_commit_home)
    said = clean.stdout + clean.stderr
    if "An unexpected error has occurred" in said and "pip" in said and "install" in said:
        # no package index reachable: the hook's own environment cannot be built here
        pytest.skip(f"pre-commit could not install the hook's environment: {said[-300:]}")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "envguard diff" in clean.stdout and "Passed" in clean.stdout
    incident.swap_in_sglang(project.venv, sglang_house)
    drifted = _try_repo(project, pre_commit_home)
    assert drifted.returncode == 1, drifted.stdout + drifted.stderr
    assert "Failed" in drifted.stdout
    assert "2.11.0+cu128 → 2.11.0+cu130" in drifted.stdout  # the change itself is shown
