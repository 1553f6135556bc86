"""How warm a copied compile cache is, against the same cache in place (#40).

    python bench/cache_warmth.py --python VENV/bin/python [--device cpu|cuda] [--runs 5]
                                 [--json FILE]

bisect gives every trial its own copy of a compile cache (``TORCHINDUCTOR_CACHE_DIR``, with
Triton's inside it), never the user's folder. This measures what that copy is worth. A
``torch.compile`` training step (a small MLP, forward, backward, AdamW) is compiled once into
a cache folder (cold), then, interleaved round by round, run with that folder in place and
with a fresh copy of it elsewhere (bisect's way: a copy per run), and with a copy of a copy
once the original is gone (a lock's saved cache, unpacked). Each run prints its first step's
seconds and torch's own counters: FX graph cache and AOTAutograd cache hits and misses. The
original folder is listed before and after the copied runs: a file new or changed there was
written by a run that was told to use its copy.

The python given must have torch; nothing is installed. Figures go to stdout as a table
(medians) and, with ``--json``, to a file.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

STEP = """\
import sys, time, torch
from torch._dynamo.utils import counters
device = sys.argv[1]
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.LayerNorm(512),
                        torch.nn.Linear(512, 256)).to(device)
opt = torch.optim.AdamW(m.parameters())
x = torch.randn(64, 256, device=device)
step = torch.compile(lambda x: m(x).square().mean())
start = time.perf_counter()
step(x).backward()
opt.step()
if device == "cuda":
    torch.cuda.synchronize()
seconds = time.perf_counter() - start
ind, aot = counters["inductor"], counters["aot_autograd"]
print(f"first step {seconds:.3f} s")
print("counters", ind["fxgraph_cache_hit"], ind["fxgraph_cache_miss"],
      aot["autograd_cache_hit"], aot["autograd_cache_miss"])
"""


def run(python: str, script: Path, device: str, cache: Path, home: Path) -> dict[str, float]:
    """One run of the step with ``cache`` as its Inductor cache: its seconds and counters."""
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache), "HOME": str(home)}
    env.pop("TRITON_CACHE_DIR", None)  # Triton's cache inside Inductor's, as torch puts it
    out = subprocess.run([python, str(script), device], env=env, capture_output=True,
                         text=True, check=True).stdout  # fmt: skip
    first = next(line for line in out.splitlines() if line.startswith("first step"))
    counts = next(line for line in out.splitlines() if line.startswith("counters")).split()[1:]
    keys = ("fx_hit", "fx_miss", "aot_hit", "aot_miss")
    return {"seconds": float(first.split()[2]), **dict(zip(keys, map(float, counts), strict=True))}


def listing(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``folder``: its size and modification time."""
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in folder.rglob("*") if p.is_file()}  # fmt: skip


def measure(python: str, device: str, rounds: int, work: Path) -> dict[str, object]:
    script, home = work / "step.py", work / "home"
    script.write_text(STEP)
    home.mkdir()
    original = work / "cache"
    cold = run(python, script, device, original, home)
    before = listing(original)
    runs: dict[str, list[dict[str, float]]] = {"in place": [], "copied": []}
    for i in range(rounds):
        runs["in place"].append(run(python, script, device, original, home))
        copy = work / f"copy-{i}"
        shutil.copytree(original, copy, symlinks=True)
        runs["copied"].append(run(python, script, device, copy, home))
        shutil.rmtree(copy)
    written = sorted(k for k, v in listing(original).items() if before.get(k) != v)
    saved = work / "saved"
    shutil.copytree(original, saved, symlinks=True)
    shutil.rmtree(original)  # the original gone: a lock's saved cache, unpacked
    unpacked = work / "unpacked"
    shutil.copytree(saved, unpacked, symlinks=True)
    runs["copy, original gone"] = [run(python, script, device, unpacked, home)]
    recreated = original.exists()
    return {"device": device, "rounds": rounds, "cold": cold, "runs": runs,
            "written_into_original": written, "original_recreated": recreated}  # fmt: skip


def table(result: dict[str, object]) -> str:
    runs: dict[str, list[dict[str, float]]] = result["runs"]  # type: ignore[assignment]
    cold: dict[str, float] = result["cold"]  # type: ignore[assignment]
    rows = [("cold (filling it)", [cold]), *runs.items()]
    place = statistics.median(r["seconds"] for r in runs["in place"])
    lines = [f"{'cache':<22} {'runs':>4} {'first step s':>12} {'÷ in place':>10} "
             f"{'FX hit/miss':>11} {'AOT hit/miss':>12}"]  # fmt: skip
    for name, rs in rows:
        med = statistics.median(r["seconds"] for r in rs)
        fx = f"{int(sum(r['fx_hit'] for r in rs))}/{int(sum(r['fx_miss'] for r in rs))}"
        aot = f"{int(sum(r['aot_hit'] for r in rs))}/{int(sum(r['aot_miss'] for r in rs))}"
        lines.append(f"{name:<22} {len(rs):>4} {med:>12.3f} {med / place:>10.2f} "
                     f"{fx:>11} {aot:>12}")  # fmt: skip
    written = result["written_into_original"]
    lines.append(f"files the copied runs wrote into the original: {len(written)}")  # type: ignore[arg-type]
    again = result["original_recreated"]
    lines.append(f"original recreated by the run on an unpacked copy: {again}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", required=True, help="a venv's python that has torch")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--runs", type=int, default=5, help="rounds of in place, then copied")
    ap.add_argument("--json", type=Path, help="write the figures here too")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="eg-warmth-") as tmp:
        result = measure(args.python, args.device, args.runs, Path(tmp))
    print(table(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    sys.exit(main())
