"""Where torch came from is a fact only when its install recorded it (#20, item 5): uv and pip
record no index and no --find-links folder, so a wheelhouse's torch has an unknown source,
never a guessed PyPI, and restore still pins it by its label."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envguard import lockfile
from envguard.demo import incident
from tests.project import Project, invoke


@pytest.mark.slow
def test_a_wheelhouse_torch_has_no_source_and_restores_all_the_same(
    project: Project, sglang_house: Path
) -> None:
    code, out, err = invoke("snapshot", env=project.activated())
    assert code == 0, err
    assert "2.11.0+cu128 (read from version.py, git 70d99e9), source unknown" in out
    text = project.lock.read_text()
    assert "pypi.org" not in text and "download.pytorch.org" not in text
    assert project.verdict().found() == set()
    code, out, err = invoke("restore", str(project.lock), "--dry-run", "--json")
    pins = {p["name"]: p for p in json.loads(out)["result"]["plan"]["pins"]}
    assert pins["torch"] == {
        "name": "torch",
        "requirement": "torch==2.11.0+cu128",  # a label: the PyTorch index's build
        "source": "https://download.pytorch.org/whl/cu128",
    }
    # PyPI's cu130 torch says 2.11.0 in METADATA: pinned as PyPI has it, no torch backend
    incident.install(project.venv, sglang_house, "--reinstall-package", "torch", "torch==2.11.0")
    project.snapshot()
    code, out, err = invoke("restore", str(project.lock), "--dry-run", "--json")
    plan = json.loads(out)["result"]["plan"]
    torch = next(p for p in plan["pins"] if p["name"] == "torch")
    assert (torch["requirement"], torch["source"]) == ("torch==2.11.0", "the default index")
    assert "torch-family" not in plan["indexes"]


def test_a_lock_that_guessed_pypi_is_not_another_source(project: Project) -> None:
    """Locks written before sources were told unknown say PyPI (or the PyTorch index) for a
    wheelhouse's torch; against today's unknown, that is no change of index."""
    project.snapshot()
    lines = project.lock.read_text().splitlines()
    at = lines.index("[torch]")
    end = lines.index("", at)
    torch = [ln for ln in lines[at:end] if not ln.startswith("index_url")]
    lines[at:end] = [*torch, 'index_url = "https://pypi.org/simple"']
    project.lock.write_bytes(lockfile.seal(("\n".join(lines) + "\n").encode()))
    assert project.verdict().found("info") == set()
