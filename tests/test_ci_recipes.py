"""The CI recipes in docs/ci/ run as a CI runner meets them: each job in a fresh clone of a
project laid out as users lay it out (``actions/checkout``), with the runner's own Python
(``actions/setup-python``, the image's python3) and not the lock's (``UV_PYTHON``, another
version: GitLab's ``python3.12`` image against a lock of this interpreter), and every shell
step as written, the install line included: envguard-ml's wheel, built from this checkout
and committed to the project's ``wheels/`` as the recipes say until it is on the index.

Offline (tests/runner.py): pip gets ``PIP_NO_INDEX`` and finds envguard's dependencies
already on the runner; uv its own ``UV_OFFLINE`` and ``UV_FIND_LINKS`` (the session's
wheelhouse), as an air-gapped runner with a wheel mirror would set them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from envguard import lockfile
from envguard.demo import incident
from tests.conftest import PipVenv, uv_bin
from tests.project import Project
from tests.runner import WHEEL, build_wheel, pip_env, runner_python

yaml = pytest.importorskip("yaml")  # PyYAML, which pre-commit brings with the test extras
RECIPES = Path(__file__).resolve().parents[1] / "docs" / "ci"
INSTALL = f"pip install wheels/{WHEEL}"  # until envguard-ml is on the index


@dataclass
class Job:
    name: str
    lines: list[str]  # the shell steps, in order
    uses: list[str]  # the actions a GitHub job uses; a GitLab job's image


def _jobs(recipe: str) -> list[Job]:
    doc = yaml.safe_load((RECIPES / recipe).read_text())
    if recipe.startswith("github"):
        return [
            Job(name, [s["run"] for s in job["steps"] if "run" in s],
                [s["uses"].split("@")[0] for s in job["steps"] if "uses" in s])
            for name, job in doc["jobs"].items()
        ]  # fmt: skip
    return [
        Job(name, list(job["script"]), [job.get("image", "")])
        for name, job in doc.items()
        if "script" in job
    ]


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("dist"))


@pytest.fixture
def training(project: Project, wheel: Path) -> Project:
    """The project with envguard's wheel committed to ``wheels/``, then the lock."""
    (project.root / "wheels").mkdir()
    shutil.copy2(wheel, project.root / "wheels")
    project.commit("envguard's wheel, until envguard-ml is on the index", "wheels")
    project.snapshot()
    project.commit("lock the known-good environment", "lockfiles")
    return project


def _other_python() -> str:
    """A Python version that is not this one's, as a runner image's default."""
    return "3.12" if sys.version_info[:2] != (3, 12) else "3.13"


class Runner:
    """One job's machine: a fresh checkout, the runner's Python, uv when the job sets it up."""

    def __init__(self, tmp: Path, project: Project, house: Path, job: Job, venv: PipVenv) -> None:
        self.checkout = tmp / job.name
        subprocess.run(["git", "clone", "-q", str(project.root), str(self.checkout)], check=True)
        self.bin = runner_python(tmp / f"{job.name}-python", venv)
        dirs = [str(self.bin)]
        if any("uv" in used for used in job.uses):  # astral-sh/setup-uv, the uv image
            dirs.append(str(Path(uv_bin()).parent))
        # none of this machine's envguard commands: the job's comes from its install line
        path = [d for d in os.environ["PATH"].split(os.pathsep) if not Path(d, "envguard").exists()]
        self.env = pip_env()
        self.env.update(PATH=os.pathsep.join([*dirs, *path]), UV_OFFLINE="1",
                        UV_FIND_LINKS=str(house), NO_COLOR="1")  # fmt: skip
        self.env["UV_PYTHON"] = _other_python()  # the image's python3, not the lock's

    def run(self, line: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", "-ec", line], cwd=self.checkout, env=self.env,
                              capture_output=True, text=True, timeout=300, check=False)  # fmt: skip

    def run_job(self, job: Job) -> None:
        for line in job.lines:
            done = self.run(line)
            assert done.returncode == 0, (job.name, line, done.stdout, done.stderr)


def _python_of(venv: Path) -> str:
    code = "import platform; print(platform.python_version())"
    return subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True,
                          text=True, check=True).stdout.strip()  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("recipe", ["github-actions.yml", "gitlab-ci.yml"])
def test_the_ci_recipes_run_as_written(
    recipe: str,
    training: Project,
    house: Path,
    sglang_house: Path,
    tmp_path: Path,
    pip_venv_at: PipVenv,
) -> None:
    jobs = _jobs(recipe)
    assert len(jobs) == 2 and all(job.lines[0] == INSTALL for job in jobs)
    gate, build = sorted(jobs, key=lambda job: "gate" not in job.name)
    built = Runner(tmp_path, training, house, build, pip_venv_at)
    built.run_job(build)
    # the lock's Python, not the runner's: its pins are built for it
    assert _python_of(built.checkout / ".venv-ci") == lockfile.read(training.lock).python.version
    assert built.run(build.lines[-1]).stdout.strip() == "2.11.0+cu128"  # the lock's torch
    checker = Runner(tmp_path, training, house, gate, pip_venv_at)
    checker.run_job(gate)
    assert (checker.bin / "envguard").is_file()  # the install line's envguard ran the gate
    # and the gate fails once the training venv drifts
    incident.swap_in_sglang(training.venv, sglang_house)
    done = checker.run(next(line for line in gate.lines if line.startswith("envguard diff")))
    assert done.returncode == 1 and "2.11.0+cu130" in done.stdout, done.stdout + done.stderr


@pytest.mark.slow
def test_the_install_line_installs_envguard_ml_from_the_wheel(
    training: Project, house: Path, tmp_path: Path, pip_venv_at: PipVenv
) -> None:
    """The line the recipes share: the distribution is envguard-ml, the command envguard."""
    runner = Runner(tmp_path, training, house, Job("install", [INSTALL], []), pip_venv_at)
    runner.run_job(Job("install", [INSTALL], []))
    python = runner.bin / "python"
    name = subprocess.run([str(python), "-c", "import importlib.metadata as m; "
                           "print(m.distribution('envguard-ml').metadata['Name'])"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    assert name == "envguard-ml"
    done = runner.run("envguard --version")
    assert done.returncode == 0 and done.stdout.startswith("envguard"), done.stderr
    assert shutil.which("envguard", path=runner.env["PATH"]) == str(runner.bin / "envguard")


@pytest.mark.parametrize("recipe", ["github-actions.yml", "gitlab-ci.yml"])
def test_a_pylock_without_the_locks_python_stops_the_job(recipe: str, tmp_path: Path) -> None:
    """Not a venv of the runner's Python: uv takes ``--python ""`` for no request at all."""
    line = next(ln for job in _jobs(recipe) for ln in job.lines if "uv venv" in ln)
    (tmp_path / "pylock.toml").write_text('lock-version = "1.0"\ncreated-by = "uv"\n')
    env = {**os.environ, "PATH": f"{Path(uv_bin()).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", "-ec", line], cwd=tmp_path, env=env, capture_output=True,
                          text=True, check=False)  # fmt: skip
    assert done.returncode != 0 and "pylock.toml names no Python" in done.stderr
    assert not (tmp_path / ".venv-ci").exists()


@pytest.mark.slow
def test_a_fresh_checkout_without_the_venv_says_what_to_do(
    training: Project, tmp_path: Path
) -> None:
    """A clone of a project whose config names ``.venv``, on a machine without that venv."""
    training.write("envguard.toml", 'venv = ".venv"\n')
    training.commit("the venv's place", "envguard.toml")
    clone = tmp_path / "fresh"
    subprocess.run(["git", "clone", "-q", str(training.root), str(clone)], check=True)
    env = {**pip_env(), "NO_COLOR": "1"}
    done = subprocess.run([sys.executable, "-m", "envguard", "diff"], cwd=clone, env=env,
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 2 and "no such directory" not in done.stderr, done.stderr
    assert "envguard restore" in done.stderr, done.stderr  # build it from the lock
    aside = training.venv.with_name("elsewhere")  # on another machine the lock's venv is not
    training.venv.rename(aside)
    try:
        plan = subprocess.run([sys.executable, "-m", "envguard", "restore", "--dry-run"],
                              cwd=clone, env=env, capture_output=True, text=True,
                              check=False)  # fmt: skip
    finally:
        aside.rename(training.venv)
    assert plan.returncode == 0, plan.stderr
    flat = " ".join(plan.stdout.split())
    # built in the clone, where its config names it, not at the lock's other machine's path
    assert flat.startswith("Restore plan for .venv:"), plan.stdout
    assert ".venv does not exist yet: it will be created" in flat, plan.stdout


def _instructions(dockerfile: Path) -> list[tuple[str, str]]:
    text = re.sub(r"\\\n\s*", " ", dockerfile.read_text())
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    return [(ln.split(" ", 1)[0], ln.split(" ", 1)[1]) for ln in lines]


class Image:
    """An image's filesystem under ``root``: its Python at /usr/local (with torch), /etc,
    /tmp, /opt; each absolute path of a line moved under it."""

    def __init__(self, root: Path, house: Path, venv: PipVenv) -> None:
        self.root = root
        self.bin = runner_python(root / "usr" / "local", venv)
        incident.install(
            root / "usr" / "local", house, "torch==2.11.0+cu128", "transformers==5.6.0"
        )
        path = [d for d in os.environ["PATH"].split(os.pathsep) if not Path(d, "envguard").exists()]
        self.env = {**pip_env(), "PATH": os.pathsep.join([str(self.bin), *path]), "NO_COLOR": "1"}

    def moved(self, line: str) -> str:
        return re.sub(r"(?<![\w.])/(?=(usr/local|etc|tmp|opt)\b)", f"{self.root}/", line)

    def copy(self, context: Path, args: str) -> None:
        src, dst = self.moved(args).split()
        target = Path(dst) / ("" if src == "." else Path(src).name)
        if src == ".":
            shutil.copytree(context, target, dirs_exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(context / src, target)

    def sh(self, line: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["sh", "-c", self.moved(line)], env=self.env, capture_output=True,
                              text=True, timeout=300, check=False)  # fmt: skip


@pytest.mark.slow
def test_the_dockerfile_recipe_runs_as_written(
    training: Project, house: Path, sglang_house: Path, tmp_path: Path, pip_venv_at: PipVenv
) -> None:
    context = tmp_path / "context"  # the build context: the project's checkout
    subprocess.run(["git", "clone", "-q", str(training.root), str(context)], check=True)
    (context / "train.py").write_text("print('training')\n")
    image = Image(tmp_path / "image", house, pip_venv_at)
    entry: list[str] = []
    for op, args in _instructions(RECIPES / "Dockerfile"):
        assert op in ("COPY", "RUN", "ENTRYPOINT"), op
        if op == "COPY":
            image.copy(context, args)
        elif op == "RUN":
            done = image.sh(args)
            assert done.returncode == 0, (args, done.stdout, done.stderr)
        else:
            entry = json.loads(args)
    assert entry[:2] == ["sh", "-c"] and (image.bin / "envguard").is_file()
    started = image.sh(entry[2])
    assert started.returncode == 0 and "training" in started.stdout, started.stderr
    incident.swap_in_sglang(image.root / "usr" / "local", sglang_house)
    started = image.sh(entry[2])
    assert started.returncode == 1 and "training" not in started.stdout, started.stderr
    assert "2.11.0+cu130" in started.stdout
