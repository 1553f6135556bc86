"""The CI recipes in docs/ci/ run as written: every shell step, in a project laid out as
users lay it out, with envguard and uv on PATH. ``pip install envguard`` is the one step not
run (this checkout's envguard is the one under test). The package index is replaced by the
session's wheelhouse through uv's own settings (``UV_OFFLINE``, ``UV_FIND_LINKS``), as an
air-gapped runner with a wheel mirror would set them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from envguard.demo import incident
from tests.conftest import uv_bin
from tests.project import Project

yaml = pytest.importorskip("yaml")  # PyYAML, which pre-commit brings with the test extras
RECIPES = Path(__file__).resolve().parents[1] / "docs" / "ci"


def _steps(recipe: str) -> dict[str, list[str]]:
    doc = yaml.safe_load((RECIPES / recipe).read_text())
    if recipe.startswith("github"):
        return {
            name: [s["run"] for s in job["steps"] if "run" in s]
            for name, job in doc["jobs"].items()
        }
    return {name: list(job["script"]) for name, job in doc.items() if "script" in job}


def _run(project: Project, line: str, house: Path) -> subprocess.CompletedProcess[str]:
    bins = os.pathsep.join((str(Path(sys.executable).parent), str(Path(uv_bin()).parent)))
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env.update(PATH=f"{bins}{os.pathsep}{env['PATH']}", UV_OFFLINE="1",
               UV_FIND_LINKS=str(house), NO_COLOR="1")  # fmt: skip
    return subprocess.run(["bash", "-ec", line], cwd=project.root, env=env,
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip


@pytest.mark.parametrize("recipe", ["github-actions.yml", "gitlab-ci.yml"])
def test_the_ci_recipes_run_as_written(
    recipe: str, project: Project, house: Path, sglang_house: Path
) -> None:
    project.snapshot()
    project.commit("lock the known-good environment", "lockfiles")
    jobs = _steps(recipe)
    assert len(jobs) == 2
    for name, lines in jobs.items():
        for line in lines:
            if line == "pip install envguard":
                continue
            done = _run(project, line, house)
            assert done.returncode == 0, (name, line, done.stdout, done.stderr)
    built = project.root / ".venv-ci" / "bin" / "python"
    version = subprocess.run([str(built), "-c", "import torch.version as v; print(v.__version__)"],
                             capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    assert version == "2.11.0+cu128"  # the lock's build, from the lock
    # and the gate fails once the training venv drifts
    incident.swap_in_sglang(project.venv, sglang_house)
    gate = next(line for line in jobs[next(iter(jobs))] if line.startswith("envguard diff"))
    done = _run(project, gate, house)
    assert done.returncode == 1 and "2.11.0+cu130" in done.stdout
