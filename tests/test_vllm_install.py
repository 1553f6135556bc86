"""A real ``uv pip install vllm`` (and a pip one) into a training venv, without the journal:
the story diff tells from what the venv holds alone (#32, item 1).

The packages are the package index's own resolution of vllm 0.33.0 into a training venv
(``tests/data/vllm``: 85 distributions before, 210 after; torch 2.11.0 → 2.14.0,
transformers 5.6.0 → 5.20.2, 125 added), each built as a wheel with its real METADATA headers
(Requires-Dist with their markers and extras, Provides-Extra) and installed for real, by uv
and by pip, from a local wheelhouse: the resolver, not the test, decides what comes in.
"""

from __future__ import annotations

import json
import re
import subprocess
from email.parser import HeaderParser
from pathlib import Path

import pytest

from tests.conftest import git, make_venv, uv_bin
from tests.project import Project, invoke

DATA = json.loads((Path(__file__).parent / "data" / "vllm" / "install.json").read_text())
VLLM = "vllm==" + DATA["after"]["vllm"]
ADDED = sorted(set(DATA["after"]) - set(DATA["before"]))
CHANGED = sorted(n for n in DATA["after"] if n in DATA["before"]
                 and DATA["after"][n] != DATA["before"][n])  # fmt: skip


def _wheel(house: Path, headers: str) -> None:
    from envguard.demo.wheels import build_wheel, torch_version_py

    meta = HeaderParser().parsestr(headers, headersonly=True)
    name, version = meta["Name"], meta["Version"]
    files: dict[str, bytes | str] = {}
    if name == "torch":  # PyPI's torch: METADATA says 2.14.0, version.py the CUDA build
        files["torch/version.py"] = torch_version_py(f"{version}+cu130", "13.0", "0" * 40)
        files["torch/__init__.py"] = ""
    build_wheel(
        house, name, version, files=files or None,
        requires=meta.get_all("Requires-Dist") or (), extras=meta.get_all("Provides-Extra") or (),
    )  # fmt: skip


@pytest.fixture(scope="module")
def vllm_house(tmp_path_factory: pytest.TempPathFactory) -> Path:
    house = tmp_path_factory.mktemp("vllm-house")
    for headers in DATA["metadata"].values():
        _wheel(house, headers)
    return house


def _pins(side: str) -> list[str]:
    return [f"{n}=={v}" for n, v in sorted(DATA[side].items())]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory, vllm_house: Path) -> Path:
    """The training project at its known-good state: the venv, the code, no lock yet."""
    root = tmp_path_factory.mktemp("vllm-project") / "train"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "train.py").write_text("import torch\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "known good")
    venv = make_venv(root / ".venv")
    _uv(venv, vllm_house, *_pins("before"))
    return root


def _uv(venv: Path, house: Path, *reqs: str) -> None:
    subprocess.run(
        [uv_bin(), "pip", "install", "--quiet", "--offline", "--no-index", "--find-links",
         str(house), "--python", str(venv / "bin" / "python"), *reqs],
        check=True,
    )  # fmt: skip


def _installed(root: Path, trained: Path, install: object) -> Project:
    """A copy of the trained project, its lock taken and committed as the README says, then
    vllm installed into its venv by ``install(venv)``."""
    import os

    from tests.project import copy_tree

    copy_tree(trained, root)
    caches = {"TORCHINDUCTOR_CACHE_DIR": str(root.parent / "inductor"),
              "TRITON_CACHE_DIR": str(root.parent / "triton")}  # fmt: skip
    project = Project(root=root, venv=root / ".venv", house=root, cache=root.parent / "inductor",
                      env=dict(caches))  # fmt: skip
    here = Path.cwd()
    os.chdir(root)
    try:
        project.snapshot()
    finally:
        os.chdir(here)
    project.commit("lock", "lockfiles")
    install(project.venv)  # type: ignore[operator]
    return project


@pytest.fixture(scope="module")
def by_uv(tmp_path_factory: pytest.TempPathFactory, trained: Path, vllm_house: Path) -> Project:
    root = tmp_path_factory.mktemp("by-uv") / "train"
    return _installed(root, trained, lambda venv: _uv(venv, vllm_house, VLLM))


def _pip(venv: Path, house: Path, *reqs: str) -> None:
    """pip itself (this interpreter's, installing into the venv through ``--python``), as
    people install where uv is not: its dist-info says INSTALLER pip, REQUESTED for vllm."""
    import sys

    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
         "--quiet", "--no-index", "--no-cache-dir", "--find-links", str(house),
         "--disable-pip-version-check", *reqs],
        check=True, env={**__import__("os").environ, "PIP_CONFIG_FILE": "/dev/null"},
    )  # fmt: skip


@pytest.fixture(scope="module")
def by_pip(tmp_path_factory: pytest.TempPathFactory, trained: Path, vllm_house: Path) -> Project:
    root = tmp_path_factory.mktemp("by-pip") / "train"
    return _installed(root, trained, lambda venv: _pip(venv, vllm_house, VLLM))


@pytest.fixture(params=["uv", "pip"])
def installed(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Project:
    project: Project = request.getfixturevalue(f"by_{request.param}")
    monkeypatch.chdir(project.root)
    return project


# the rows the story needs, and no other: torch and its family, the libraries a training step
# depends on (each with its own reason), vllm itself, and the one install they came with
OWN_ROWS = {
    ("critical", "torch", "torch"),
    *{("warning", "libraries", n) for n in ("torchaudio", "torchvision", "triton", "numpy",
                                            "flashinfer-python", "tokenizers", "transformers",
                                            "vllm")},
    ("warning", "packages", "135 packages"),
}  # fmt: skip
MOVED = sorted({*ADDED, *CHANGED})


def _canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_the_install_is_one_group_named_for_vllm(installed: Project) -> None:
    verdict = installed.verdict()  # diff --json, the human diff and guard(), agreeing
    assert verdict.exit_code == 1 and verdict.guard_stopped
    assert verdict.found() == OWN_ROWS
    (group,) = [c for c in verdict.changes if c["area"] == "packages"]
    assert group["why"].startswith(
        f"vllm {DATA['after']['vllm']} and the {len(MOVED) - 1} packages it brought "
        f"({len(ADDED) - 1} added, {len(CHANGED)} changed) at "
    )
    members = group["members"]  # type: ignore[index]
    assert sorted(m["name"] for m in members) == sorted(map(_canon, MOVED))
    # what must not be said: a package of the install on its own row, with no cause
    assert not [c for c in verdict.changes if c["why"] == "new package on the import path"]


def test_each_cause_names_vllm_and_a_requirement_its_metadata_has(installed: Project) -> None:
    verdict = installed.verdict()
    requires = {
        _canon(meta.split("Name: ", 1)[1].split("\n", 1)[0]): meta
        for key, meta in DATA["metadata"].items()
        if key.split("==")[1] == DATA["after"].get(key.split("==")[0])
    }
    rows = [
        c for c in verdict.changes if c["area"] in ("torch", "libraries") and c["subject"] != "vllm"
    ]
    for row in rows:
        found = re.fullmatch(r"installed with (vllm \S+) \((\S+) requires (.+)\)", row["cause"])
        assert found, row
        assert found.group(1) == f"vllm {DATA['after']['vllm']}"
        requirer, requirement = found.group(2), found.group(3)
        lines = [ln.split(";")[0].replace(" ", "") for ln in requires[requirer].splitlines()
                 if ln.startswith("Requires-Dist:")]  # fmt: skip
        assert any(requirement.replace(" ", "") in ln for ln in lines), (row, requirer)
    (group,) = [c for c in verdict.changes if c["area"] == "packages"]
    for member in group["members"]:  # type: ignore[union-attr]
        if member["name"] != "vllm":
            assert re.fullmatch(r"\S+ requires \S.*", member["cause"]), member


def test_the_screen_fits_80_columns_and_expand_lists_every_package(installed: Project) -> None:
    env = {**installed.activated(), "COLUMNS": "80"}
    code, out, _ = invoke("diff", env=env)
    assert code == 1
    lines = out.splitlines()
    assert max(map(len, lines)) <= 80
    assert sum(ln.startswith("warning ") for ln in lines) <= 12
    assert sum(ln.startswith("critical ") for ln in lines) == 1
    code, expanded, _ = invoke("diff", "--expand", env=env)
    assert code == 1 and max(len(ln) for ln in expanded.splitlines()) <= 80
    listed = set(re.findall(r"^\s+[+~-] ([A-Za-z0-9._-]+) ", expanded, re.M))
    assert listed == set(map(_canon, MOVED))


def test_pip_records_who_asked_for_what(by_pip: Project, by_uv: Project) -> None:
    """The two installers leave different traces (INSTALLER; pip writes REQUESTED for what
    it was asked for only, uv for every package): the story is the same."""
    from envguard import snapshot

    pip_side = snapshot.take(by_pip.venv, with_code=False, default_caches=False)
    uv_side = snapshot.take(by_uv.venv, with_code=False, default_caches=False)
    assert {d.installer for d in pip_side.packages if d.name == "vllm"} == {"pip"}
    assert {d.installer for d in uv_side.packages if d.name == "vllm"} == {"uv"}
    assert [d.name for d in pip_side.packages if d.requested and d.installer == "pip"] == ["vllm"]
    assert pip_side.versions() == uv_side.versions()
