"""envguard fleet at 1,000 node snapshots of the real H200 lockfile (197 packages each).

    python bench/bench_fleet.py [--nodes 1000] [--runs 3]

Ten nodes are outliers: a cu128 torch, an older driver, a cold Inductor cache.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from envguard import lockfile  # noqa: E402

EXAMPLE = ROOT / "lockfiles" / "example-h200.envguard.toml"


def write_fleet(folder: Path, nodes: int) -> Path:
    lock = lockfile.read(EXAMPLE)
    for i in range(nodes):
        snap = dataclasses.replace(
            lock, host=dataclasses.replace(lock.host, hostname=f"gpu-{i:04d}")
        )
        if i % 100 == 7 and snap.torch:
            snap = dataclasses.replace(
                snap, torch=dataclasses.replace(snap.torch, version="2.11.0+cu128", cuda="12.8")
            )
        elif i % 100 == 42:
            snap = dataclasses.replace(snap, gpu=dataclasses.replace(snap.gpu, driver="570.86.15"))
        elif i % 100 == 77:
            snap = dataclasses.replace(
                snap,
                caches=tuple(dataclasses.replace(c, exists=False, entries=0) for c in snap.caches),
            )
        lockfile.write(folder / f"gpu-{i:04d}.envguard.toml", snap)
    return EXAMPLE


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    envguard = [sys.executable, "-c", "from envguard.__main__ import main; main()"]
    with tempfile.TemporaryDirectory(prefix="envguard-fleet-") as tmp:
        folder = Path(tmp)
        lock = write_fleet(folder, args.nodes)
        size = sum(p.stat().st_size for p in folder.iterdir())
        walls = []
        for _ in range(args.runs):
            start = time.perf_counter()
            done = subprocess.run(
                [*envguard, "fleet", str(lock), str(folder), "--json"], capture_output=True
            )
            walls.append(time.perf_counter() - start)
            assert done.returncode == 1, done.stderr[-500:]
        start = time.perf_counter()
        for p in sorted(folder.iterdir())[:50]:
            lockfile.read(p)
        full = (time.perf_counter() - start) / 50 * args.nodes
    print("| nodes | data | `envguard fleet --json` median (min) | full-parse estimate |")
    print("|---:|---:|---:|---:|")
    print(
        f"| {args.nodes} | {size / 1e6:.0f} MB | {statistics.median(walls):.2f} s "
        f"({min(walls):.2f} s) | {full:.1f} s |"
    )


if __name__ == "__main__":
    main()
