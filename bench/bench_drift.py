"""How much explaining a big install costs: ``envguard diff`` after N packages arrived.

    python bench/bench_drift.py [--added 200 1000 5000] [--runs 7] [--json FILE]

The venv holds the H200 training venv's 197 distributions (bench/build_venv.py). A lock is
taken; then N packages are installed as one install (dist-infos written within a second, a
root requiring a few and each requiring the next, as resolvers leave them), with torch's
version.py moved to another build so that the diff has torch, attribution and a group of N
to explain. In the same run, interleaved round by round:

- ``diff (drift)``: the lock from before against the venv now (N added + torch changed);
- ``diff (clean)``: a lock taken now against the same venv (nothing to explain);
- ``uv pip freeze`` and ``pip freeze`` of the same venv, for scale.

The goal is drift / clean ≤ 1.5 at every N.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_venv import DEFAULT_FIXTURES, build

from bench import envguard_install, interleaved


def add_packages(site: Path, n: int) -> None:
    """N dist-infos of one install: a root that requires ten, each requiring the next."""
    names = [f"added-pkg-{i:05d}" for i in range(n)]
    for i, name in enumerate(names):
        info = site / f"{name.replace('-', '_')}-1.{i % 7}.0.dist-info"
        info.mkdir()
        requires = [f"Requires-Dist: {names[i + 1]}>=1.0"] if i + 1 < n and i % 3 else []
        if i == 0:
            requires += [f"Requires-Dist: {m}" for m in names[1:11]]
            requires.append("Requires-Dist: torch==2.11.0")
        meta = [f"Metadata-Version: 2.4\nName: {name}\nVersion: 1.{i % 7}.0", *requires]
        (info / "METADATA").write_text("\n".join(meta) + "\n\n" + "Text. " * 200 + "\n")
        (info / "INSTALLER").write_text("uv\n")
        (info / "REQUESTED").write_text("")


def scenario(work: Path, n: int, fixtures: Path, eg: list[str]) -> tuple[Path, Path, Path]:
    venv = build(work / f"venv-{n}", fixtures)
    before = work / f"before-{n}.envguard.toml"
    subprocess.run([*eg, "snapshot", "--venv", str(venv), "-q", "-o", str(before),
                    "--no-default-caches"], check=True, capture_output=True)  # fmt: skip
    site = next(venv.glob("lib/python*/site-packages"))
    add_packages(site, n)
    version = site / "torch" / "version.py"
    version.write_text(version.read_text().replace("+cu130", "+cu128").replace("13.0", "12.8"))
    after = work / f"after-{n}.envguard.toml"
    subprocess.run([*eg, "snapshot", "--venv", str(venv), "-q", "-o", str(after),
                    "--no-default-caches"], check=True, capture_output=True)  # fmt: skip
    return venv, before, after


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--added", type=int, nargs="+", default=[200, 1000, 5000])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--fixtures", type=Path, default=DEFAULT_FIXTURES)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--envguard", help="an installed envguard to time (default: built)")
    args = parser.parse_args()
    from uv import find_uv_bin

    uv = find_uv_bin()
    rows = {}
    work = Path(tempfile.mkdtemp(prefix="envguard-drift-bench-"))
    try:
        eg = [str(envguard_install(work, args.envguard))]
        for n in args.added:
            venv, before, after = scenario(work, n, args.fixtures, eg)
            python = str(venv / "bin" / "python")
            diff = [*eg, "diff", "--venv", str(venv), "--json"]
            commands = {
                "diff (drift)": [*diff, str(before)],
                "diff (clean)": [*diff, str(after)],
                "uv pip freeze": [uv, "pip", "freeze", "--python", python],
                "pip freeze": [sys.executable, "-m", "pip", "--python", python, "freeze"],
            }
            rows[n] = interleaved(commands, args.runs, work, ok=(0, 1))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("| added packages | diff (drift) ms | diff (clean) ms | drift ÷ clean | "
          "uv pip freeze ms | pip freeze ms |")  # fmt: skip
    print("|---:|---:|---:|---:|---:|---:|")
    for n, r in rows.items():
        drift, clean = r["diff (drift)"]["median_ms"], r["diff (clean)"]["median_ms"]
        print(
            f"| {n} | {drift:.0f} | {clean:.0f} | {drift / clean:.2f}× | "
            f"{r['uv pip freeze']['median_ms']:.0f} | {r['pip freeze']['median_ms']:.0f} |"
        )
    if args.json:
        args.json.write_text(json.dumps({str(k): v for k, v in rows.items()}, indent=2))


if __name__ == "__main__":
    main()
