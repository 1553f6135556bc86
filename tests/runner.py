"""A CI runner as the recipes in docs/ci/ meet one, offline.

- ``build_wheel``: envguard's wheel, built from this checkout with ``pip wheel`` as the
  recipes say to build it until it is on the package index (``envguard_ml-VERSION-…whl``);
- ``runner_python``: the runner's own Python (``actions/setup-python``, an image's
  python3): a venv with ensurepip's pip, envguard's dependencies already there (a ``.pth`` to
  this environment's site-packages, envguard left out), so that ``pip install`` of the wheel
  needs no index, as a runner with a wheel mirror would have it; and ``bin/uv``, where pip
  puts the ``uv`` dependency's binary.

pip is kept off the network by its own settings (``PIP_NO_INDEX``, no config file), as uv is
by ``UV_OFFLINE``: the command lines run as written.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from envguard import __version__
from tests.conftest import PipVenv, uv_bin

ROOT = Path(__file__).resolve().parents[1]
WHEEL = f"envguard_ml-{__version__}-py3-none-any.whl"  # the distribution envguard-ml
PIP_OFFLINE = {
    "PIP_NO_INDEX": "1",
    "PIP_CONFIG_FILE": os.devnull,  # none of the machine's pip.conf (its index, its mirror)
    "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    "PIP_NO_INPUT": "1",
}


def pip_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    return {**env, **PIP_OFFLINE}


def build_wheel(out: Path) -> Path:
    """``pip wheel`` of a copy of this checkout (its working tree: what is under test)."""
    src = out.parent / f"{out.name}-src"
    shutil.copytree(
        ROOT / "envguard", src / "envguard", ignore=shutil.ignore_patterns("__pycache__")
    )
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, src / name)
    argv = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
    subprocess.run([*argv, "-w", str(out), str(src)], env=pip_env(), check=True,
                   capture_output=True, timeout=300)  # fmt: skip
    return out / WHEEL


def runner_python(at: Path, pip_venv_at: PipVenv) -> Path:
    """A runner's Python at ``at``, its bin folder returned: ``pip_venv_at`` is conftest's
    (``python -m venv``, copied)."""
    pip_venv_at(at)
    view = at / "preinstalled"
    view.mkdir()
    site = Path(sysconfig.get_paths()["purelib"])
    skip = ("envguard", "__editable__", "_distutils_hack", "_virtualenv")
    for entry in site.iterdir():
        if not entry.name.startswith(skip) and entry.suffix != ".pth":
            (view / entry.name).symlink_to(entry)
    own = next((at / "lib").glob("python*/site-packages"))
    (own / "preinstalled.pth").write_text(f"{view}\n")
    (at / "bin" / "uv").symlink_to(uv_bin())
    return at / "bin"
