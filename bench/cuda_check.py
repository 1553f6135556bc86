"""Check envguard against torch's own answers on a real CUDA machine, and against collect_env.

    python bench/cuda_check.py --venv /opt/torch/.venv --out DIR

Runs with any Python that can import envguard; torch is only ever imported by the venv's own
interpreter, in subprocesses (bench/gpu/*.py). Steps:

1. ``envguard snapshot`` of the venv, and torch's own answers in the same run; every CUDA fact
   side by side, and the driver against nvidia-smi.
2. A real compile cache: flex_attention fwd+bwd compiled into a fresh TORCHINDUCTOR_CACHE_DIR,
   snapshot, then the cache deleted and the variable changed: ``envguard diff`` must say so, and
   the cache's compatibility facts must match the running torch and GPU.
3. ``python -m torch.utils.collect_env`` on the same machine: each fact both tools report, who is
   right (torch decides), and the wall time of each.
4. The venv's lockfile, with host-private facts replaced, as ``example-h200.envguard.toml``.

Exits 1 on any mismatch. Results land in DIR as JSON and markdown.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from envguard import drift, lockfile  # noqa: E402
from envguard.model import Snapshot  # noqa: E402


def timed(argv: list[str], env: dict[str, str] | None = None) -> tuple[str, float]:
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"{argv} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return done.stdout, wall


def envguard(*args: str, env: dict[str, str] | None = None) -> tuple[str, float]:
    return timed([sys.executable, "-m", "envguard", *args], env=env)


def snapshot(venv: Path, out: Path, env: dict[str, str]) -> tuple[Snapshot, float]:
    _, wall = envguard("snapshot", "--venv", str(venv), "-o", str(out), "--quiet", env=env)
    return lockfile.read(out), wall


def smi_driver() -> str | None:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return None
    out = subprocess.run(
        [smi, "--query-gpu=driver_version", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    return out.strip().splitlines()[0] if out.strip() else None


def compare_cuda(snap: Snapshot, torch: dict[str, Any], driver: str | None) -> list[dict[str, Any]]:
    gpu = snap.gpu.gpus[0] if snap.gpu.gpus else None
    rows = [
        ("torch.__version__", torch["torch"], snap.torch.version if snap.torch else None),
        ("torch.version.cuda", torch["cuda"], snap.torch.cuda if snap.torch else None),
        (
            "torch.version.git_version",
            torch["git_version"],
            snap.torch.git_version if snap.torch else None,
        ),
        (
            "CUDA runtime major.minor (torch.version.cuda)",
            torch["cuda"],
            snap.cuda.runtime.version if snap.cuda.runtime else None,
        ),
        (
            "torch.backends.cudnn.version()",
            torch["cudnn"],
            snap.cuda.cudnn.version if snap.cuda.cudnn else None,
        ),
        (
            "torch.cuda.nccl.version()",
            torch["nccl"],
            snap.cuda.nccl.version if snap.cuda.nccl else None,
        ),
        ("GPU name", torch["gpu_name"], gpu.name if gpu else None),
        (
            "GPU compute capability",
            torch["compute_capability"],
            gpu.compute_capability if gpu else None,
        ),
        ("GPU count", torch["gpu_count"], len(snap.gpu.gpus)),
        ("driver (nvidia-smi)", driver, snap.gpu.driver),
    ]
    return [{"fact": f, "truth": t, "envguard": e, "ok": str(t) == str(e)} for f, t, e in rows]


def cache_check(venv: Path, work: Path, torch: dict[str, Any]) -> dict[str, Any]:
    py = str(venv / "bin" / "python")
    cache_dir = work / "inductor"
    env = {
        **os.environ,
        "TORCHINDUCTOR_CACHE_DIR": str(cache_dir),
        "TRITON_CACHE_DIR": str(work / "triton"),
    }
    compiled, compile_s = timed([py, str(HERE / "gpu" / "flex_probe.py")], env=env)
    warm, _ = snapshot(venv, work / "warm.envguard.toml", env)
    cache = next(c for c in warm.caches if c.kind == "inductor")
    compat = cache.compat
    # With TRITON_CACHE_DIR set, Inductor's compiled kernels land there, not under its own dir.
    archs = sorted({a for c in warm.caches for a in c.compat.archs})
    sm = "sm" + torch["compute_capability"].replace(".", "")
    checks = {
        "cache has entries": cache.entries > 0,
        "compat.torch == torch.__version__": compat.torch == torch["torch"],
        "compat.torch_git == git_version": compat.torch_git == torch["git_version"],
        "compat.cuda == torch.version.cuda": compat.cuda == torch["cuda"],
        "compat.gpus has the GPU": torch["gpu_name"] in compat.gpus,
        f"kernel archs (Inductor + Triton caches) == [{sm}]": archs == [sm],
    }
    shutil.rmtree(cache_dir)
    gone, _ = snapshot(venv, work / "gone.envguard.toml", env)
    report = drift.compare(warm, gone)
    cold = [c for c in report.changes if c.subject == "Inductor cache"]
    checks["diff says the deleted cache is cold"] = bool(cold) and "cold" in cold[0].why
    moved_env = {**env, "TORCHINDUCTOR_CACHE_DIR": str(work / "elsewhere")}
    moved, _ = snapshot(venv, work / "moved.envguard.toml", moved_env)
    moved_report = drift.compare(warm, moved)
    subjects = {c.subject for c in moved_report.changes}
    checks["diff names the changed TORCHINDUCTOR_CACHE_DIR"] = "TORCHINDUCTOR_CACHE_DIR" in subjects
    checks["diff says the cache moved"] = any("moved" in c.why for c in moved_report.changes)
    return {
        "warm_snapshot": warm,
        "compile": compiled.strip(),
        "compile_s": compile_s,
        "cache": cache.to_dict(),
        "caches": [c.to_dict() for c in warm.caches],
        "checks": checks,
        "cold_change": cold[0].to_dict() if cold else None,
        "moved_changes": [c.to_dict() for c in moved_report.changes],
    }


_COLLECT = {
    "PyTorch version": r"^PyTorch version: (.+)$",
    "CUDA used to build PyTorch": r"^CUDA used to build PyTorch: (.+)$",
    "CUDA runtime version": r"^CUDA runtime version: (.+)$",
    "GPU": r"^GPU models and configuration: (?:GPU 0: )?(.+)$",
    "driver": r"^Nvidia driver version: (.+)$",
    "cuDNN": r"^cuDNN version: (.+)$",
}


def collect_env_check(
    venv: Path, snap: Snapshot, torch: dict[str, Any], driver: str | None, envguard_s: float
) -> dict[str, Any]:
    text, wall = timed([str(venv / "bin" / "python"), "-m", "torch.utils.collect_env"])
    got = {
        k: (m.group(1).strip() if (m := re.search(p, text, re.M)) else None)
        for k, p in _COLLECT.items()
    }
    cudnn_line = got["cuDNN"] or ""
    if cudnn_line.startswith("Probably one of the following"):
        libs = re.findall(r"libcudnn\.so\.(\d+\.\d+\.\d+)", text)
        cudnn_line = f"{libs[0]} (system /usr/lib, 'probably')" if libs else cudnn_line
    gpu = snap.gpu.gpus[0] if snap.gpu.gpus else None
    rows = [
        (
            "torch version",
            torch["torch"],
            snap.torch.version if snap.torch else None,
            got["PyTorch version"],
        ),
        (
            "CUDA build",
            torch["cuda"],
            snap.torch.cuda if snap.torch else None,
            got["CUDA used to build PyTorch"],
        ),
        (
            "CUDA runtime",
            torch["cuda"],
            snap.cuda.runtime.version if snap.cuda.runtime else None,
            got["CUDA runtime version"],
        ),
        (
            "cuDNN torch loads",
            torch["cudnn"],
            snap.cuda.cudnn.version if snap.cuda.cudnn else None,
            cudnn_line,
        ),
        ("NCCL", torch["nccl"], snap.cuda.nccl.version if snap.cuda.nccl else None, None),
        ("GPU", torch["gpu_name"], gpu.name if gpu else None, got["GPU"]),
        ("driver", driver, snap.gpu.driver, got["driver"]),
        ("git_version", torch["git_version"], snap.torch.git_version if snap.torch else None, None),
    ]
    table = []
    for fact, truth, ours, theirs in rows:
        table.append(
            {
                "fact": fact,
                "torch": truth,
                "envguard": ours,
                "collect_env": theirs,
                "envguard_right": _same(truth, ours),
                "collect_env_right": None if theirs is None else _same(truth, theirs),
            }
        )
    return {
        "rows": table,
        "collect_env_s": wall,
        "envguard_s": envguard_s,
        "torch_import_s": torch["import_s"],
    }


def _same(truth: Any, value: Any) -> bool:
    """13.0 and 13.0.88 are one CUDA release: compare on the truth's precision."""
    t, v = str(truth), str(value)
    return v == t or v.startswith(t + ".") or v.split(" ")[0] == t


def example_lockfile(snap: Snapshot, dest: Path) -> None:
    """The committed example: host-private facts (hostname, GPU UUIDs, env) replaced."""
    gpus = tuple(dataclasses.replace(g, uuid=f"GPU-example-{g.index}") for g in snap.gpu.gpus)
    clean = dataclasses.replace(
        snap,
        name="example-h200",
        host=dataclasses.replace(snap.host, hostname="h200-example"),
        gpu=dataclasses.replace(snap.gpu, gpus=gpus),
        environ={},
        code=None,
        caches=tuple(c for c in snap.caches if c.kind != "custom"),
    )
    lockfile.write(dest, clean)


def table(rows: list[dict[str, Any]], cols: list[str]) -> str:
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(r.get(c, "")) for c in cols) + " |" for r in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", type=Path, default=Path(sys.prefix))
    parser.add_argument("--out", type=Path, default=Path("cuda-check"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="envguard-cuda-"))
    env = {**os.environ, "ENVGUARD_CACHE_DIR": str(work / "eg-cache")}
    os.environ["ENVGUARD_CACHE_DIR"] = env["ENVGUARD_CACHE_DIR"]

    lock = args.out / "h200.envguard.toml"
    snap, envguard_s = snapshot(args.venv, lock, env)
    answers, _ = timed([str(args.venv / "bin" / "python"), str(HERE / "gpu" / "torch_answers.py")])
    torch = json.loads(answers)
    driver = smi_driver()
    cuda_rows = compare_cuda(snap, torch, driver)
    cache = cache_check(args.venv, work, torch)
    collect = collect_env_check(args.venv, snap, torch, driver, envguard_s)
    # The example shows a warm cache: the venv's snapshot with the flex_attention cache.
    example_lockfile(cache.pop("warm_snapshot"), args.out / "example-h200.envguard.toml")

    ok = all(r["ok"] for r in cuda_rows) and all(cache["checks"].values())
    ok = ok and all(r["envguard_right"] for r in collect["rows"])
    result = {
        "ok": ok,
        "torch": torch,
        "cuda": cuda_rows,
        "cache": cache,
        "collect_env": collect,
        "warnings": list(snap.warnings),
    }
    (args.out / "cuda_check.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    md = [
        "## envguard vs torch",
        table(cuda_rows, ["fact", "truth", "envguard", "ok"]),
        "",
        "## compile cache",
        cache["compile"],
        table([{"check": k, "ok": v} for k, v in cache["checks"].items()], ["check", "ok"]),
        "",
        f"## vs collect_env (collect_env {collect['collect_env_s']:.2f} s, envguard "
        f"snapshot {collect['envguard_s']:.2f} s, import torch {collect['torch_import_s']:.2f} s)",
        table(
            collect["rows"],
            ["fact", "torch", "envguard", "collect_env", "envguard_right", "collect_env_right"],
        ),
        "",
        "## snapshot warnings",
        *[f"- {w}" for w in snap.warnings],
    ]
    (args.out / "cuda_check.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    print("\nALL MATCH" if ok else "\nMISMATCH")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
