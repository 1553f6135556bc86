"""envguard restore against a raw ``uv venv && uv pip install`` of the same pins, same run.

    python bench/bench_restore.py [--runs 5] [--json bench/results/restore.json]

A local wheelhouse holds one wheel for each of the H200 venv's 197 distributions (torch as
PyPI ships it: METADATA 2.11.0, version.py 2.11.0+cu130). Both sides install offline from it
with uv's cache warm. envguard is timed restoring into a new path (the same work as the raw
commands plus its plan, verify and swap) and replacing an existing venv (plus a snapshot of
the current venv, the in-use check, and the atomic swap with a backup).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.build_venv import DEFAULT_FIXTURES  # noqa: E402
from envguard.demo.wheels import build_wheel  # noqa: E402


def wheelhouse(house: Path, fixtures: Path) -> list[str]:
    installed = json.loads((fixtures / "installed.json").read_text())["installed"]
    version_py = (fixtures / "torch_version.py").read_text()
    pins = []
    for dist in installed:
        files = {"torch/version.py": version_py} if dist["name"] == "torch" else None
        build_wheel(house, dist["name"], dist["version"], files=files)
        pins.append(f"{dist['name']}=={dist['version']}")
    return pins


def timed(argv: list[str], env: dict[str, str] | None = None) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True, env=env)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--fixtures", type=Path, default=DEFAULT_FIXTURES)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    from uv import find_uv_bin

    uv = find_uv_bin()
    envguard = [sys.executable, "-c", "from envguard.__main__ import main; main()"]
    with tempfile.TemporaryDirectory(prefix="envguard-bench-restore-") as tmp:
        work = Path(tmp)
        house = work / "house"
        pins = wheelhouse(house, args.fixtures)
        reqs = work / "requirements.txt"
        reqs.write_text("\n".join(pins) + "\n")
        offline = ["--offline", "--no-index", "--find-links", str(house)]
        py = sys.executable
        source = work / "source"
        subprocess.run([uv, "venv", "-q", "--python", py, str(source)], check=True)
        subprocess.run(
            [
                uv,
                "pip",
                "install",
                "-q",
                "--python",
                str(source / "bin" / "python"),
                *offline,
                "-r",
                str(reqs),
            ],
            check=True,
        )  # also warms uv's cache
        lock = work / "train.envguard.toml"
        subprocess.run(
            [
                *envguard,
                "snapshot",
                "--venv",
                str(source),
                "-o",
                str(lock),
                "-q",
                "--no-default-caches",
            ],
            check=True,
            capture_output=True,
        )
        raw, fresh, replace = [], [], []
        for i in range(args.runs):
            target = work / f"raw{i}"
            raw.append(
                timed(
                    [
                        "sh",
                        "-c",
                        f"{uv} venv -q --python {py} {target} && {uv} pip "
                        f"install -q --python {target}/bin/python {' '.join(offline)} "
                        f"-r {reqs}",
                    ]
                )
            )
            restore = [
                *envguard,
                "restore",
                str(lock),
                "--find-links",
                str(house),
                "--offline",
                "--yes",
            ]
            fresh.append(timed([*restore, "--venv", str(work / f"fresh{i}")]))
            replace.append(timed([*restore, "--venv", str(source)]))
            for p in work.glob("source.envguard-backup-*"):
                shutil.rmtree(p)
    result = {
        name: statistics.median(v) * 1000
        for name, v in (
            ("raw uv venv && uv pip install", raw),
            ("envguard restore (new path)", fresh),
            ("envguard restore (replace existing)", replace),
        )
    }
    base = result["raw uv venv && uv pip install"]
    lines = [
        "| command (197 pins, warm uv cache, offline) | median ms | × raw uv |",
        "|---|---:|---:|",
    ]
    lines += [f"| {k} | {v:.0f} | {v / base:.2f}× |" for k, v in result.items()]
    print("\n".join(lines))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
