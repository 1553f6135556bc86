"""What keeping the Requires-Dist lines in effect costs a snapshot, against its peer.

    python bench/bench_requires.py [--runs 9] [--sizes 197,5000]

On the H200 training venv's 197 distributions (then padded to 5,000), interleaved round by
round: the distributions scan itself (what a snapshot pays already), envguard's
``requirements.in_effect`` over its lines, and the plain way, packaging's ``Requirement``
parsed and its marker evaluated for every line and every extra asked (what pip's and uv's
resolvers do per candidate). Each with cold caches, as one snapshot process has them.
Prints the medians in ms and the ratios to the scan.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_venv import DEFAULT_FIXTURES, build


def _plain(requires: dict[str, tuple[str, ...]], env: dict[str, str]) -> None:
    """The fixed point of :func:`in_effect`, each line through packaging, no shortcut."""
    from packaging.requirements import InvalidRequirement, Requirement

    wanted: dict[str, set[str]] = {n: {""} for n in requires}
    todo = [(n, "") for n in requires]
    while todo:
        name, extra = todo.pop()
        for line in requires[name]:
            try:
                req = Requirement(line)
            except InvalidRequirement:
                continue
            if req.marker is not None and not req.marker.evaluate({**env, "extra": extra}):
                continue
            dep = req.name.lower().replace("_", "-")
            for e in req.extras - wanted.get(dep, req.extras):
                wanted[dep].add(e)
                todo.append((dep, e))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--sizes", default="197,5000")
    args = parser.parse_args()
    from envguard import requirements
    from envguard.probes import distributions, venv

    print("| distributions | lines | scan ms | in_effect ms | plain ms | in_effect/scan "
          "| plain/in_effect |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for size in map(int, args.sizes.split(",")):
        folder = Path(tempfile.mkdtemp(prefix="eg-bench-")) / "venv"
        site = venv.locate(build(folder, DEFAULT_FIXTURES, size))
        times: dict[str, list[float]] = {"scan": [], "in_effect": [], "plain": []}
        lines = 0
        for _ in range(args.runs):
            start = time.perf_counter()
            dists, _ = distributions.scan(site.site_packages)
            times["scan"].append(time.perf_counter() - start)
            requires = {d.name: d.requires for d in dists}
            lines = sum(map(len, requires.values()))
            env = requirements.marker_environment(site.python.version, site.python.implementation)
            requirements._evaluate.cache_clear()
            requirements._parsed.cache_clear()
            start = time.perf_counter()
            requirements.in_effect(requires, env)
            times["in_effect"].append(time.perf_counter() - start)
            start = time.perf_counter()
            _plain(requires, env)
            times["plain"].append(time.perf_counter() - start)
        med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
        print(f"| {size} | {lines} | {med['scan']:.1f} | {med['in_effect']:.1f} | "
              f"{med['plain']:.1f} | {med['in_effect'] / med['scan']:.2f} | "
              f"{med['plain'] / med['in_effect']:.1f} |")  # fmt: skip


if __name__ == "__main__":
    main()
