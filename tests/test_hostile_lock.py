"""A lockfile is untrusted input (#23): each field that reaches uv, a path, git or an
interpreter is refused when the lock is read, as the adversary would use it.

Every attack starts from a real lock (``envguard snapshot`` of a real uv venv), edited as a
teammate's commit could edit it (tomllib/tomli_w), then runs a real ``envguard restore`` or
``export``: refused with exit 2 and one line naming the field, and the attacker's wheelhouse
(a ``numpy`` of the locked version whose ``.pth`` runs at every interpreter start) never
reaches the venv.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from envguard import lockfile
from envguard.demo.wheels import build_wheel
from tests.conftest import git, uv_bin
from tests.project import Project, invoke

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - 3.10 only
    import tomli as tomllib

Doc = dict[str, Any]

# An in-tree PEP 517 backend, so that an editable project builds offline with no build
# dependency: what `uv pip install -e` of a teammate's checkout needs. NAME is the project;
# its editable wheel's .pth puts ON_PATH (an expression of `here`, the project's folder) on
# sys.path.
_BACKEND_TEMPLATE = """
import base64, hashlib, os, zipfile

def _wheel(directory, files):
    info = "NAME-1.0.dist-info"
    files = {**files, info + "/METADATA": "Metadata-Version: 2.1\\nName: NAME\\nVersion: 1.0\\n",
             info + "/WHEEL": "Wheel-Version: 1.0\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"}
    rows = []
    for path, text in files.items():
        digest = hashlib.sha256(text.encode()).digest()
        b64 = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
        rows.append(f"{path},sha256={b64},{len(text.encode())}")
    files[info + "/RECORD"] = "\\n".join([*rows, info + "/RECORD,,"]) + "\\n"
    name = "NAME-1.0-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(directory, name), "w") as zf:
        for path, text in files.items():
            zf.writestr(path, text)
    return name

def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    here = os.path.dirname(os.path.abspath(__file__))
    return _wheel(wheel_directory, {"_NAME.pth": ON_PATH + "\\n"})

def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _wheel(wheel_directory, {"NAME/__init__.py": ""})
"""


def in_tree_project(name: str, on_path: str = "here") -> dict[str, str]:
    """The files of project ``name`` 1.0 built by its own in-tree backend: pyproject.toml and
    backend.py (an editable install puts ``on_path`` on sys.path: ``here``, its folder, or
    ``os.path.join(here, "src")`` for a src layout)."""
    pyproject = (
        '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n\n'
        f'[project]\nname = "{name}"\nversion = "1.0"\n'
    )
    backend = _BACKEND_TEMPLATE.replace("NAME", name).replace("ON_PATH", on_path)
    return {"pyproject.toml": pyproject, "backend.py": backend}


_BACKEND = in_tree_project("legit")["backend.py"]
_PYPROJECT = in_tree_project("legit")["pyproject.toml"]


class Attack:
    """The attacker's wheelhouse beside a real project whose lock is about to be edited."""

    def __init__(self, project: Project, root: Path) -> None:
        self.project = project
        self.root = root
        self.evil = root / "evilwheels"
        self.marker = root / "PWNED"
        pth = f"import pathlib; pathlib.Path({str(self.marker)!r}).touch()\n"
        build_wheel(self.evil, "numpy", "2.3.0", files={"numpy/__init__.py": "", "evil.pth": pth})

    def edit(self, change: Callable[[Doc], None]) -> None:
        """The lock, changed as a text editor (or a pull request) changes it."""
        doc = tomllib.loads(self.project.lock.read_text(encoding="utf-8"))
        change(doc)
        # sealed, as envguard seals a lock: the field's own check is what refuses it
        self.project.lock.write_bytes(lockfile.seal(tomli_w.dumps(doc).encode()))

    def restore(self, *args: str) -> tuple[int, str, str]:
        return invoke(
            "restore", str(self.project.lock), "--find-links", str(self.project.house),
            "--offline", "--yes", "--rebuild", *args, env=self.project.activated(),
        )  # fmt: skip

    def installed(self) -> bool:
        """Whether the evil numpy reached the venv (its .pth is there, or ran once)."""
        site = next((self.project.venv / "lib").glob("python*/site-packages"))
        return (site / "evil.pth").exists() or self.marker.exists()


@pytest.fixture
def attack(project: Project, tmp_path: Path) -> Attack:
    return Attack(project, tmp_path / "attacker")


def _refused(done: tuple[int, str, str], field: str) -> None:
    """Exit 2, one line on stderr naming the field, no traceback, nothing on stdout."""
    code, out, err = done
    assert code == 2 and out == "", (code, out, err)
    assert err.strip().count("\n") == 0 and "Traceback" not in err, err
    assert field in err, err


def _package(doc: Doc, name: str) -> Doc:
    found: Doc = next(p for p in doc["packages"] if p["name"] == name)
    return found


def _editable_legit(attack: Attack) -> Path:
    """A teammate's project installed editable into the venv, then snapshotted."""
    legit = attack.root / "legit"
    legit.mkdir(parents=True)
    (legit / "pyproject.toml").write_text(_PYPROJECT)
    (legit / "backend.py").write_text(_BACKEND)
    python = str(attack.project.venv / "bin" / "python")
    subprocess.run(
        [uv_bin(), "pip", "install", "-q", "--offline", "--no-index", "--python", python,
         "-e", str(legit)], check=True,
    )  # fmt: skip
    attack.project.snapshot()
    return legit


# ---------------------------------------------------------------------------------------------
# Task 1: a percent-encoded newline in an editable file:// URL became a --find-links line


def _smuggling_url(attack: Attack, legit: Path) -> str:
    """``file:///…/legit%0A--find-links=file:/…/evilwheels``: url2pathname decodes it into
    two lines of uv's requirements file. The decoded path exists (a git checkout can hold a
    folder with a newline in its name), so the plan pins it."""
    decoded = f"{legit}\n--find-links=file:{attack.evil}"
    Path(decoded).mkdir(parents=True)
    return f"file://{legit}%0A--find-links=file:{attack.evil}"


def test_an_editable_url_cannot_smuggle_find_links_into_restore(attack: Attack) -> None:
    legit = _editable_legit(attack)
    url = _smuggling_url(attack, legit)
    attack.edit(lambda doc: _package(doc, "legit").update(direct_url=url))
    done = attack.restore()
    assert not attack.installed(), "the attacker's numpy was installed"
    _refused(done, "packages[")
    _refused(done, "].direct_url")


def test_an_editable_url_cannot_smuggle_find_links_into_export(attack: Attack) -> None:
    legit = _editable_legit(attack)
    url = _smuggling_url(attack, legit)
    attack.edit(lambda doc: _package(doc, "legit").update(direct_url=url))
    out = attack.root / "pylock.toml"
    done = invoke(
        "export", str(attack.project.lock), "--find-links", str(attack.project.house),
        "--offline", "-o", str(out),
    )  # fmt: skip
    _refused(done, ".direct_url")
    assert not out.exists()


# The lock, and what to put in: {evil} the option that would smuggle the wheels in, {root}
# the attacker's folder (a hostile venv path must not land outside the test's own).
Change = Callable[[Doc, dict[str, str]], None]


def _set(table: str, key: str, value: str) -> Change:
    return lambda doc, at: doc[table].update({key: value.format(**at)})


def _pkg(key: str, value: str) -> Change:
    return lambda doc, at: _package(doc, "numpy").update({key: value.format(**at)})


# One per field that reaches uv (its argv, or a line of its requirements file), raw and
# percent-encoded: the encoded ones (and a leading '-') were read as valid before #23.
FIELDS: dict[str, tuple[Change, str]] = {
    "name": (_pkg("name", "numpy\n{evil}"), ".name"),
    "version-newline": (_pkg("version", "2.3.0\n{evil}"), ".version"),
    "version-trailing-newline": (_pkg("version", "2.3.0\n"), ".version"),
    "direct-url-encoded": (_pkg("direct_url", "file:///w/numpy.whl%0A{evil}"), ".direct_url"),
    "direct-url-encoded-cr": (_pkg("direct_url", "https://x/n.whl%0D%0A{evil}"), ".direct_url"),
    "direct-url-nel": (_pkg("direct_url", "file:///w/n%C2%85{evil}"), ".direct_url"),
    "direct-url-no-path": (_pkg("direct_url", "file://attacker"), ".direct_url"),
    "torch-name": (_set("torch", "name", "{evil}"), "torch.name"),
    "torch-index-url": (
        _set("torch", "index_url", "https://x/\x1b]0;{evil}\x07"),
        "torch.index_url",
    ),
    "torch-variant": (_set("torch", "variant", "--index-url=http://x"), "torch.variant"),
    "prompt": (_set("venv", "prompt", "--python=/attacker/python3"), "venv.prompt"),
    "venv-path": (_set("venv", "path", "{root}/x\x1b]0;owned\x07"), "venv.path"),
    "python-version": (_set("python", "version", "3.11.7\n{evil}"), "python.version"),
    "python-home": (_set("python", "home", "/x\x1b[2J"), "python.home"),
}


@pytest.mark.parametrize("field", list(FIELDS))
def test_each_field_bound_for_uv_is_refused_when_read(attack: Attack, field: str) -> None:
    change, name = FIELDS[field]
    attack.project.snapshot()
    at = {"evil": f"--find-links=file:{attack.evil}", "root": str(attack.root)}
    attack.edit(lambda doc: change(doc, at))
    done = attack.restore()
    assert not attack.installed(), "the attacker's numpy was installed"
    _refused(done, name)
    _refused(invoke("diff", str(attack.project.lock), str(attack.project.lock)), name)


# ---------------------------------------------------------------------------------------------
# Task 2: python.home chose the executable restore ran


def _evil_home(attack: Attack) -> Path:
    """A folder holding a `python3.X` that writes the marker and then behaves as Python."""
    home = attack.root / "evilhome"
    home.mkdir(parents=True)
    minor = f"python{sys.version_info.major}.{sys.version_info.minor}"
    script = home / minor
    real = os.path.realpath(attack.project.venv / "bin" / "python")
    script.write_text(f'#!/bin/sh\ntouch {attack.marker}\nexec {real} "$@"\n')
    script.chmod(0o755)
    return home


def _locked_home(home: Path) -> Callable[[Doc], None]:
    return lambda doc: doc["python"].update(home=str(home))


@pytest.mark.slow
def test_the_locks_home_is_never_executed(attack: Attack) -> None:
    attack.project.snapshot()
    home = _evil_home(attack)
    attack.edit(_locked_home(home))
    code, out, err = attack.restore()
    assert code == 0, err
    assert not attack.marker.exists(), "restore ran the lock's python.home"
    assert str(home) not in out


@pytest.mark.slow
def test_the_plan_names_the_interpreter_it_will_use(attack: Attack) -> None:
    attack.project.snapshot()
    home = _evil_home(attack)
    attack.edit(_locked_home(home))
    code, out, err = attack.restore("--dry-run")
    assert code == 0, err
    first = out.splitlines()[0]
    version = ".".join(map(str, sys.version_info[:3]))
    assert f"Python {version} (" in first and ", found by uv)" in first, first
    assert str(home) not in out and not attack.marker.exists()
    code, out, err = attack.restore("--dry-run", "--json")
    plan = json.loads(out)["result"]["plan"]
    assert plan["interpreter"] and Path(plan["interpreter"]).is_file()
    assert not plan["interpreter"].startswith(str(home)) and plan["found_by"] == "uv"
    # and what the plan names is what the build uses
    code, out, err = attack.restore("--json")
    assert code == 0, err
    assert json.loads(out)["result"]["venv"]["python"] == plan["interpreter"]


def test_an_explicit_python_is_named_as_such(attack: Attack) -> None:
    attack.project.snapshot()
    real = os.path.realpath(attack.project.venv / "bin" / "python")
    code, out, err = attack.restore("--dry-run", "--python", real)
    assert code == 0 and f"{Path(real).name}, --python), " in out.splitlines()[0], (out, err)
    code, out, err = attack.restore("--dry-run", "--json", "--python", real)
    plan = json.loads(out)["result"]["plan"]
    assert (plan["interpreter"], plan["found_by"]) == (real, "--python")


# ---------------------------------------------------------------------------------------------
# Task 8 and the twins: what reaches git


def _code(key: str, value: str) -> Callable[[Doc], None]:
    return lambda doc: doc["code"].update({key: value})


def _changed_path(value: str) -> Callable[[Doc], None]:
    return lambda doc: doc["code"]["changed"][0].update(path=value)


CODE_FIELDS = {
    "head-nul": (_code("head", "0" * 39 + "\x00"), "code.head"),
    "head-option": (_code("head", "--orphan=evil"), "code.head"),
    "head-short": (_code("head", "abc123"), "code.head"),
    "branch-option": (_code("branch", "--detach"), "code.branch"),
    "branch-newline": (_code("branch", "main\nevil"), "code.branch"),
    "root-relative": (_code("root", "train"), "code.root"),
    "changed-absolute": (_changed_path("/etc/passwd"), "code.changed[0].path"),
    "changed-dotdot": (_changed_path("../outside.py"), "code.changed[0].path"),
    "changed-nul": (_changed_path("model.py\x00"), "code.changed[0].path"),
}


@pytest.mark.parametrize("field", list(CODE_FIELDS))
def test_each_field_bound_for_git_is_refused_when_read(attack: Attack, field: str) -> None:
    change, name = CODE_FIELDS[field]
    attack.project.write("model.py", "def forward(x):\n    return x + 1\n")
    attack.project.snapshot()
    before = git(attack.project.root, "rev-parse", "HEAD")
    attack.edit(change)
    _refused(attack.restore("--code"), name)
    assert git(attack.project.root, "rev-parse", "HEAD") == before


def test_a_64_digit_head_is_a_commit_sha(attack: Attack) -> None:
    """SHA-256 repositories name commits with 64 hex digits: read, not refused."""
    attack.project.snapshot()
    attack.edit(_code("head", "a" * 64))
    code, _, err = invoke("diff", str(attack.project.lock), str(attack.project.lock))
    assert code == 0, err


def test_a_prompt_reaches_uv_as_one_argument(tmp_path: Path) -> None:
    """`--prompt=VALUE`: a prompt uv could read as an option stays a value, whatever
    validation lets through."""
    from envguard import uv

    venv = tmp_path / "v"
    uv.create_venv(venv, sys.executable, "-x")
    cfg = (venv / "pyvenv.cfg").read_text()
    assert "prompt = -x" in cfg
