"""Replay the incident in a temp dir and show envguard's answer, as a user would see it.

    python bench/demo_incident.py [--keep DIR]

Builds the known-good cu128 venv with uv from local wheels, snapshots it (with the real H200
Inductor cache and a git repo), installs "sglang" (torch's cu130 build from PyPI, transformers
5.8.1, 46 dependencies), deletes the cache, leaves a patch uncommitted, then runs
``envguard diff``. No network.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.build_venv import DEFAULT_FIXTURES  # noqa: E402
from envguard.demo.incident import known_good, sglang_install  # noqa: E402


def sh(*argv: str, cwd: Path | None = None, check: bool = True) -> int:
    print(f"$ {' '.join(argv)}", flush=True)
    return subprocess.run(argv, cwd=cwd, check=check).returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="build here and keep it")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="envguard-incident-"))
    from uv import find_uv_bin

    uv, envguard = find_uv_bin(), str(Path(sys.executable).parent / "envguard")
    os.environ.update(
        UV_OFFLINE="1",
        UV_PYTHON_DOWNLOADS="never",
        ENVGUARD_CACHE_DIR=str(work / "envguard-cache"),
        TORCHINDUCTOR_CACHE_DIR=str(work / "inductor" / "probe_inductor"),
        TRITON_CACHE_DIR=str(work / "triton"),
    )
    with tarfile.open(DEFAULT_FIXTURES / "inductor_cache.tgz") as tar:
        tar.extractall(work / "inductor", filter="data")
    repo = work / "train"
    repo.mkdir()
    (repo / "dflash_model.py").write_text("def forward(x):\n    return x\n")
    for cmd in (
        ["init", "-q", "-b", "main"],
        ["add", "."],
        [
            "-c",
            "user.name=demo",
            "-c",
            "user.email=demo@example.invalid",
            "commit",
            "-q",
            "-m",
            "known good",
        ],
    ):
        subprocess.run(["git", "-C", str(repo), *cmd], check=True)
    venv = work / "venv"
    sh(uv, "venv", "-q", "--python", sys.executable, str(venv))
    reqs = known_good(work / "wheels-before")
    py = str(venv / "bin" / "python")
    find = ["--offline", "--no-index", "--find-links"]
    sh(uv, "pip", "install", "-q", "--python", py, *find, str(work / "wheels-before"), *reqs)
    sh(envguard, "snapshot", "--venv", str(venv), "--name", "train", cwd=repo)

    after = sglang_install(work / "wheels-after")
    sh(
        uv,
        "pip",
        "install",
        "-q",
        "--python",
        py,
        *find,
        str(work / "wheels-after"),
        "--reinstall-package",
        "torch",
        "torch==2.11.0",
        "transformers==5.8.1",
        *after,
    )
    shutil.rmtree(work / "inductor" / "probe_inductor")
    (repo / "dflash_model.py").write_text(
        "def forward(x):\n    return x\n" + "".join(f"# experiment {i}\n" for i in range(12))
    )
    code = sh(envguard, "diff", "--venv", str(venv), cwd=repo, check=False)
    print(f"(exit {code}; built in {work})")


if __name__ == "__main__":
    main()
