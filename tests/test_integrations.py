"""envguard where users already work, tested against the real tools.

pre-commit: the repository is a hook repository (``.pre-commit-hooks.yaml``); the real
``pre-commit try-repo`` installs the hook from this checkout into pre-commit's own virtualenv
(which sets ``VIRTUAL_ENV`` to itself) and runs it in a project laid out as users lay it out.
That install needs envguard's dependencies from the package index, as it does for users.
The checkout is committed once per session (``hook_repo``), at the README's ``rev``. try-repo
builds the hook's environment anew each run (in a store of its own); ``pre-commit run`` with a
config naming that repository and rev uses the one built once in the session's
``PRE_COMMIT_HOME``, as for a user whose config does not change (``pre-commit install-hooks``
builds it, while the first try-repo builds its own).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from envguard.demo import incident
from tests.conftest import git
from tests.project import Project

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Home:
    """A ``PRE_COMMIT_HOME`` whose hook environment ``pre-commit install-hooks`` is building."""

    path: Path
    building: subprocess.Popen[str]

    def built(self) -> Path:
        """The home, once the build is over (whatever its outcome: a ``pre-commit run`` after a
        failed one builds the environment itself)."""
        self.building.communicate(timeout=600)
        return self.path


@pytest.fixture(scope="session")
def pre_commit_home(tmp_path_factory: pytest.TempPathFactory, hook_repo: Path) -> Iterator[Home]:
    """One hook environment for the session, never the developer's ~/.cache/pre-commit: the
    one a config naming ``hook_repo`` at the README's rev has, built in the background (5 s of
    pip, from the index) while the first test's try-repo builds its own."""
    home = tmp_path_factory.mktemp("pre-commit-home")
    config = tmp_path_factory.mktemp("pre-commit-config")
    git(config, "init", "-q", "-b", "main")
    (config / ".pre-commit-config.yaml").write_text(_config(hook_repo))
    building = subprocess.Popen(
        [sys.executable, "-m", "pre_commit", "install-hooks"], cwd=config, env=_env(home),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    yield Home(home, building)
    if building.poll() is None:  # no test waited for it
        building.kill()
        building.communicate()


def _config(hook_repo: Path) -> str:
    return (
        f"repos:\n  - repo: {hook_repo}\n    rev: {_readme_rev()}\n"
        "    hooks:\n      - id: envguard-diff\n"
    )


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env.update(PRE_COMMIT_HOME=str(home), NO_COLOR="1", COLUMNS="80")
    env.pop("UV_OFFLINE", None)  # the hook's own install reaches the index, as for users
    return env


@pytest.fixture(scope="session")
def hook_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This checkout as it is (its working tree: what is under test, new files included),
    committed in a repository of its own and tagged with the README snippet's ``rev`` (no
    older commit's tag of that name: the hook is this checkout's): the hook repository of every
    pre-commit run in the session, at one rev."""
    repo = tmp_path_factory.mktemp("hook-repo") / "envguard"
    listed = git(ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():  # a file deleted in the working tree stays out
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, repo / name)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-m",
        "the checkout under test")  # fmt: skip
    git(repo, "tag", _readme_rev())
    return repo


def _pre_commit(project: Project, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", *args, "--all-files", "--verbose"],
        cwd=project.root, env=_env(home), capture_output=True, text=True, timeout=600,
        check=False,
    )  # fmt: skip


@pytest.mark.slow
def test_the_pre_commit_hook_gates_on_the_training_venv(
    project: Project, sglang_house: Path, pre_commit_home: Home, hook_repo: Path
) -> None:
    pytest.importorskip("pre_commit")
    project.snapshot()
    project.commit("lock the known-good environment", "lockfiles")
    try_repo = ("try-repo", str(hook_repo), "envguard-diff", "--ref", _readme_rev())
    clean = _pre_commit(project, pre_commit_home.path, *try_repo)
    said = clean.stdout + clean.stderr
    if "An unexpected error has occurred" in said and "pip" in said and "install" in said:
        # no package index reachable: the hook's own environment cannot be built here
        pytest.skip(f"pre-commit could not install the hook's environment: {said[-300:]}")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "envguard diff" in clean.stdout and "Passed" in clean.stdout
    # the config try-repo ran, in the project: pre-commit run keeps its hook environment
    (project.root / ".pre-commit-config.yaml").write_text(_config(hook_repo))
    project.commit("the hook", ".pre-commit-config.yaml")
    # a commit that edits training code: the environment is unchanged, the hook passes
    project.write("model.py", "def forward(x):\n    return 2 * x\n")
    edited = _pre_commit(project, pre_commit_home.built(), "run")
    assert edited.returncode == 0, edited.stdout + edited.stderr
    incident.swap_in_sglang(project.venv, sglang_house)
    drifted = _pre_commit(project, pre_commit_home.path, "run")
    assert drifted.returncode == 1, drifted.stdout + drifted.stderr
    assert "Failed" in drifted.stdout
    assert "2.11.0+cu128 → 2.11.0+cu130" in drifted.stdout  # the change itself is shown


def _readme_snippet() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("### pre-commit") :]
    return section[section.index("```yaml\n") + 8 : section.index("```\n", 20)]


def _readme_rev() -> str:
    return _readme_snippet().split("rev:")[1].split()[0]


@pytest.mark.slow
def test_the_readme_pre_commit_snippet_as_written(
    project: Project, sglang_house: Path, pre_commit_home: Home, hook_repo: Path
) -> None:
    """The snippet with its ``rev``, from this checkout at that tag (a checkout without tags:
    the release the README names)."""
    pytest.importorskip("pre_commit")
    snippet = _readme_snippet()
    assert _readme_rev() in git(hook_repo, "tag", "--list").split()
    repo_line = next(ln for ln in snippet.splitlines() if "repo:" in ln)
    (project.root / ".pre-commit-config.yaml").write_text(
        snippet.replace(repo_line, f"  - repo: {hook_repo}")
    )
    project.snapshot()
    project.commit("lock and hook", "lockfiles", ".pre-commit-config.yaml")
    project.write("model.py", "def forward(x):\n    return 2 * x\n")
    env = _env(pre_commit_home.built())
    run = [sys.executable, "-m", "pre_commit", "run", "--all-files", "--verbose"]
    done = subprocess.run(run, cwd=project.root, env=env, capture_output=True, text=True,
                          timeout=600, check=False)  # fmt: skip
    said = done.stdout + done.stderr
    if "An unexpected error has occurred" in said and "install" in said:
        pytest.skip(f"pre-commit could not install the hook's environment: {said[-300:]}")
    assert done.returncode == 0, said
    incident.swap_in_sglang(project.venv, sglang_house)
    done = subprocess.run(run, cwd=project.root, env=env, capture_output=True, text=True,
                          timeout=600, check=False)  # fmt: skip
    assert done.returncode == 1 and "2.11.0+cu128 → 2.11.0+cu130" in done.stdout, done.stdout


@pytest.mark.parametrize("headers", [True, False])
def test_a_debian_style_container_prefix(tmp_path: Path, house: Path, headers: bool) -> None:
    """``snapshot --venv /usr`` in a Debian/Ubuntu image: the distro's packages sit in a
    versionless ``lib/python3/dist-packages``; the version comes from ``patchlevel.h`` when
    the headers are installed, else from the standard library's folder. Snapshot at image
    build, check at start: clean, then drift when a package moves."""
    from tests.conftest import uv_bin
    from tests.project import invoke

    usr = tmp_path / "usr"
    site = usr / "lib" / "python3" / "dist-packages"
    (usr / "lib" / "python3.11").mkdir(parents=True)
    (usr / "lib" / "python3.11" / "os.py").write_text("")
    if headers:
        (usr / "include" / "python3.11").mkdir(parents=True)
        (usr / "include" / "python3.11" / "patchlevel.h").write_text(
            '#define PY_VERSION              "3.11.2"\n'
        )
    target = [uv_bin(), "pip", "install", "--offline", "--no-index", "--find-links", str(house),
              "--python", sys.executable, "--target", str(site)]  # fmt: skip
    subprocess.run([*target, "plainpkg==2.4"], check=True, capture_output=True)
    lock = tmp_path / "image.envguard.toml"
    code, out, err = invoke("snapshot", "--json", "--venv", str(usr), "-o", str(lock),
                            "--no-default-caches")  # fmt: skip
    assert code == 0, err
    snap = json.loads(out)["result"]
    assert snap["venv"]["kind"] == "prefix"
    assert snap["python"]["version"] == ("3.11.2" if headers else "3.11")
    assert {p["name"]: p["version"] for p in snap["packages"]} == {"plainpkg": "2.4"}
    assert invoke("diff", str(lock), "--venv", str(usr), "--fail-on", "critical")[0] == 0
    subprocess.run([*target, "--upgrade", "plainpkg==2.5"], check=True, capture_output=True)
    code, out, _ = invoke("diff", str(lock), "--venv", str(usr), "--json")
    assert code == 1
    assert any(c["subject"] == "plainpkg" for c in json.loads(out)["result"]["changes"])
