"""Tool venvs beside the training venv: built, run, listed, removed, split out; the training
venv never touched. Offline, from the session's wheelhouses, in a project laid out as users
lay it out (tests.project)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from envguard.demo import incident
from tests.conftest import git, uv_bin
from tests.project import Project, invoke


def _offline(house: Path) -> list[str]:
    return ["--offline", "--no-index", "--find-links", str(house)]


def _lock_text(project: Project) -> str:
    """The lock but for its time, and its seal, which hashes the time too."""
    text = re.sub(r'(?m)^taken_at = ".*"$', "", project.lock.read_text())
    return re.sub(r"(?m)^# envguard seal: sha256=[0-9a-f]{64}$", "", text)


def _add(project: Project, house: Path, name: str, *reqs: str) -> tuple[int, str, str]:
    return invoke("tool", "add", name, *reqs, *_offline(house), env=project.activated())


@pytest.mark.slow
def test_a_tool_gets_its_own_torch_and_the_training_venv_is_untouched(
    project: Project, sglang_house: Path
) -> None:
    project.snapshot()
    before = _lock_text(project)
    code, out, err = _add(project, sglang_house, "datagen", "sglang==0.5.23")
    assert code == 0, err
    assert "Built tool datagen at .venv.tools/datagen" in " ".join(out.split())
    project.snapshot()  # the training venv, recorded again: byte-identical but for the time
    assert _lock_text(project) == before
    assert project.verdict().found("info") == set()  # no untracked files, no drift at all
    assert git(project.root, "status", "--porcelain", "--", ".venv.tools").strip() == ""
    code, out, _ = invoke("tool", "list", "--json", env=project.activated())
    (tool,) = json.loads(out)["result"]["tools"]
    assert tool["name"] == "datagen" and tool["torch"] == "2.11.0+cu130"
    assert tool["requirements"] == ["sglang==0.5.23"] and tool["matches"] is True
    assert Path(tool["lock"]) == project.root / "lockfiles" / "tools" / "datagen.envguard.toml"


@pytest.mark.slow
def test_tool_run_and_path(project: Project, sglang_house: Path) -> None:
    project.snapshot()
    assert _add(project, sglang_house, "datagen", "sglang==0.5.23")[0] == 0
    code, out, _ = invoke("tool", "path", "datagen", env=project.activated())
    where = Path(out.strip())
    assert code == 0 and where == project.root / ".venv.tools" / "datagen"
    program = "import sys, torch.version as v; print(sys.prefix, v.__version__); sys.exit(3)"
    done = subprocess.run(
        [sys.executable, "-m", "envguard", "tool", "run", "datagen", "--", "python", "-c", program],
        cwd=project.root, capture_output=True, text=True, check=False,
        env={**{k: v for k, v in project.activated().items() if v}, "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert done.returncode == 3, done.stderr  # the command's own exit code
    assert done.stdout.split() == [str(where), "2.11.0+cu130"]


@pytest.mark.slow
def test_a_changed_tool_no_longer_matches_its_lock(project: Project, house: Path) -> None:
    project.snapshot()
    assert _add(project, house, "plain", "plainpkg==2.4")[0] == 0
    tool = project.root / ".venv.tools" / "plain"
    incident.install(tool, house, "plainpkg==2.5")
    _code, out, _ = invoke("tool", "list", "--json", env=project.activated())
    assert json.loads(out)["result"]["tools"][0]["matches"] is False
    _, human, _ = invoke("tool", "list", env=project.activated())
    assert "differs from its lock" in human


@pytest.mark.slow
def test_remove_takes_the_venv_and_its_lock(project: Project, house: Path) -> None:
    project.snapshot()
    assert _add(project, house, "plain", "plainpkg==2.4")[0] == 0
    tool = project.root / ".venv.tools" / "plain"
    user = subprocess.Popen([str(tool / "bin" / "python"), "-c", "import time; time.sleep(60)"])
    try:
        code, _, err = invoke("tool", "remove", "plain", env=project.activated())
        assert code == 2 and "in use by pid" in err and tool.is_dir()
    finally:
        user.kill()
        user.wait()
    code, _out, err = invoke("tool", "remove", "plain", env=project.activated())
    assert code == 0, err
    assert not tool.exists()
    assert not (project.root / "lockfiles" / "tools" / "plain.envguard.toml").exists()
    assert sorted(p.name for p in (project.root / ".venv.tools").iterdir()) == [".gitignore"]


@pytest.mark.parametrize(
    ("name", "reqs", "message"),
    [
        ("../escape", ["plainpkg==2.4"], "not a tool name"),
        ("plain", ["not a requirement!"], "is not a requirement"),
        ("plain", ["plainpkg==9.9"], "uv could not install plainpkg==9.9"),
    ],
)
def test_refusals_leave_nothing_behind(
    project: Project, house: Path, name: str, reqs: list[str], message: str
) -> None:
    project.snapshot()
    code, out, err = _add(project, house, name, *reqs)
    assert code == 2 and out == "" and message in err and len(err.splitlines()) == 1
    tools = project.root / ".venv.tools"
    assert not tools.exists() or [p.name for p in tools.iterdir()] == [".gitignore"]


def test_a_folder_where_the_tool_lock_goes_is_refused_before_building(
    project: Project, house: Path
) -> None:
    project.snapshot()
    (project.root / "lockfiles" / "tools" / "plain.envguard.toml").mkdir(parents=True)
    code, out, err = _add(project, house, "plain", "plainpkg==2.4")
    assert code == 2 and out == "" and "in the way of tool plain's lockfile" in err
    tools = project.root / ".venv.tools"
    assert not tools.exists() or [p.name for p in tools.iterdir()] == [".gitignore"]


@pytest.mark.slow
def test_a_taken_name_is_refused(project: Project, house: Path) -> None:
    project.snapshot()
    assert _add(project, house, "plain", "plainpkg==2.4")[0] == 0
    code, _, err = _add(project, house, "plain", "plainpkg==2.5")
    assert code == 2 and "tool plain exists" in err


def test_a_tools_folder_linked_into_the_training_venv_is_refused(
    project: Project, house: Path
) -> None:
    project.snapshot()
    (project.root / ".venv.tools").symlink_to(project.venv / "lib")
    code, _, err = _add(project, house, "plain", "plainpkg==2.4")
    assert code == 2 and "inside the training venv" in err


@pytest.mark.slow
def test_split_after_the_incident(project: Project, sglang_house: Path, house: Path) -> None:
    """The polluted venv becomes the tool (its scripts still work from the new place); the
    training venv is rebuilt from the lock."""
    project.snapshot()
    incident.swap_in_sglang(project.venv, sglang_house)
    script = project.venv / "bin" / "gen-data"  # a console script as pip writes it
    script.write_text(f"#!{project.venv}/bin/python\nimport sys\nprint(sys.prefix)\n")
    script.chmod(0o755)
    polluted = {d["name"]: d["version"] for d in _packages(project)}
    code, out, err = invoke(
        "restore", "--split", "datagen", "--yes", *_offline(house), env=project.activated()
    )
    assert code == 0, err
    assert "the old venv is now tool datagen at .venv.tools/datagen" in " ".join(out.split())
    assert not [p for p in project.root.iterdir() if "envguard-backup" in p.name]
    verdict = project.verdict()
    assert verdict.exit_code == 0 and verdict.found() == set()  # the training venv: the lock
    tool = project.root / ".venv.tools" / "datagen"
    moved = {d["name"]: d["version"] for d in _packages(project, tool)}
    assert moved == polluted  # exactly the polluted set
    ran = subprocess.run([str(tool / "bin" / "gen-data")], capture_output=True, text=True)
    assert ran.stdout.strip() == str(tool)  # the script runs the tool's python, not training's
    assert str(project.venv) + "/" not in (tool / "bin" / "activate").read_text()


@pytest.mark.slow
def test_split_refuses_a_taken_name_before_touching_anything(
    project: Project, sglang_house: Path, house: Path
) -> None:
    project.snapshot()
    assert _add(project, house, "datagen", "plainpkg==2.4")[0] == 0
    incident.swap_in_sglang(project.venv, sglang_house)
    code, _, err = invoke(
        "restore", "--split", "datagen", "--yes", *_offline(house), env=project.activated()
    )
    assert code == 2 and "tool datagen exists" in err
    assert project.verdict().exit_code == 1  # still polluted: nothing was done


@pytest.mark.slow
def test_preflight_and_run_point_to_a_tool_venv(project: Project, sglang_house: Path) -> None:
    project.snapshot()
    install = [uv_bin(), "pip", "install", *_offline(sglang_house),
               *incident.SGLANG_INSTALL, "sglang==0.5.23"]  # fmt: skip
    code, out, _ = invoke("preflight", "--json", "--", *install, env=project.activated())
    assert code == 1
    hint = json.loads(out)["result"]["hint"]
    assert hint.startswith("envguard tool add sglang ") and "sglang==0.5.23" in hint
    code, out, _ = invoke("run", "--json", "--", *install, env=project.activated())
    assert code == 0
    assert json.loads(out)["result"]["hint"] == "envguard restore --split sglang"


def _packages(project: Project, venv: Path | None = None) -> list[dict[str, str]]:
    code, out, err = invoke("snapshot", "--json", "--venv", str(venv or project.venv),
                            "-o", str(project.root.parent / "x.envguard.toml"))  # fmt: skip
    assert code == 0, err
    return list(json.loads(out)["result"]["packages"])


@pytest.mark.slow
def test_a_tool_size_is_what_removing_it_frees(project: Project, sglang_house: Path) -> None:
    from collections import Counter

    code, _, err = _add(project, sglang_house, "datagen", "sglang==0.5.23")
    assert code == 0, err
    code, out, _ = invoke("tool", "list", "--json", env=project.activated())
    (tool,) = json.loads(out)["result"]["tools"]
    venv = Path(tool["path"])
    files = {(st.st_dev, st.st_ino): st for p in venv.rglob("*")
             if p.is_file() and not p.is_symlink() for st in [p.lstat()]}  # fmt: skip
    inside = Counter((st.st_dev, st.st_ino) for p in venv.rglob("*")
                     if p.is_file() and not p.is_symlink() for st in [p.lstat()])  # fmt: skip
    elsewhere = sum(st.st_blocks * 512 for k, st in files.items() if st.st_nlink > inside[k])
    assert elsewhere > 0, "uv linked nothing from its cache: the test proves nothing"
    every_file = sum(st.st_blocks * 512 for st in files.values())
    folders = sum(p.lstat().st_blocks * 512 for p in [venv, *venv.rglob("*")] if p.is_dir())
    # the files uv's cache keeps a link to are not the tool's to free
    assert tool["bytes"] == every_file - elsewhere + folders


@pytest.mark.slow
def test_tool_run_pip_installs_into_the_tool_or_refuses(
    project: Project, sglang_house: Path, tmp_path: Path
) -> None:
    """A uv-made tool has no pip: the next pip on PATH (envguard's own venv's) must not run."""
    assert _add(project, sglang_house, "datagen", "sglang==0.5.23")[0] == 0
    bins = tmp_path / "bins"
    bins.mkdir()
    marker = tmp_path / "outside-pip-ran"
    (bins / "pip").write_text(f"#!/bin/sh\ntouch {marker}\n")
    (bins / "pip").chmod(0o755)
    env = {**{k: v for k, v in project.activated().items() if v}, "PATH": f"{bins}:/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-m", "envguard", "tool", "run", "datagen", "--", "pip", "install", "x"],
        cwd=project.root, capture_output=True, text=True, check=False, env=env,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert not marker.exists()
    assert "has no pip" in done.stderr and "uv pip install" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_break_system_packages_is_harmless_inside_a_venv(project: Project) -> None:
    from envguard.install_target import in_target

    argv = in_target(["uv", "pip", "install", "--break-system-packages", "x"], project.venv)
    assert "--break-system-packages" in argv and str(project.venv.absolute()) in " ".join(argv)
