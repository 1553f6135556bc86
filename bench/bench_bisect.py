"""envguard bisect: the README's incident bisected, and what a trial costs beyond uv's work.

    python bench/bench_bisect.py [--rounds 3] [--json bench/results/bisect.json] [--md FILE]

1. The incident (``envguard.demo.incident``'s wheels, as the README tells it): a training
   venv with torch 2.11.0+cu128 and transformers 5.6.0, its lock committed with the Inductor
   cache saved; then sglang's install swaps torch for the cu130 build and transformers for
   5.8.1 and brings 46 packages, the cache is cleaned up and model.py edited. The benchmark
   prints 21.5 Ktok/s on a CUDA 12.8 torch and 4.3 on another. ``envguard bisect`` runs on
   it as a user runs it (its own process, offline from the wheelhouse); its trial count,
   time and screen are reported.
2. Trial overhead: a venv of the H200 training venv's 197 distributions (one small wheel
   each, from ``installed.json``), four of them upgraded since the lock, one of which the
   benchmark (``python -c``: a no-op but for its exit status) fails on. Each trial's venv
   and code (``build_seconds``: uv venv, uv pip sync, the clone of the code) and the whole trial
   (with its cache copies and the command's run) against a raw ``uv venv && uv pip sync`` of
   the same 197 pins, with the same interpreter, flags and warm uv cache, rounds
   interleaved so that load drift moves both alike.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.bench_restore import wheelhouse  # noqa: E402
from bench.build_venv import DEFAULT_FIXTURES  # noqa: E402
from envguard.demo import incident  # noqa: E402
from envguard.demo.cache import make  # noqa: E402
from envguard.demo.repo import committed  # noqa: E402
from envguard.demo.wheels import build_wheel  # noqa: E402

ENVGUARD = [sys.executable, "-c", "from envguard.__main__ import main; main()"]
BENCH = incident.BENCH
METRIC = list(incident.METRIC)
UPGRADED = 4  # packages of the 197 upgraded since the lock: four moves, one culprit


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def uv() -> str:
    from uv import find_uv_bin

    return str(find_uv_bin())


def environ(work: Path) -> dict[str, str]:
    """A world of the bench's own: its uv cache (warmed by the installs), no uv config, its
    caches and envguard's folder; git's identity for the commits."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_", "VIRTUAL_"))}
    return {
        **env, "UV_CACHE_DIR": str(work / "uv-cache"), "UV_NO_CONFIG": "1",
        "UV_PYTHON_DOWNLOADS": "never", "ENVGUARD_CACHE_DIR": str(work / "envguard-cache"),
        "TORCHINDUCTOR_CACHE_DIR": str(work / "inductor"),
        "TRITON_CACHE_DIR": str(work / "triton"), "GIT_AUTHOR_NAME": "bench",
        "GIT_AUTHOR_EMAIL": "bench@example.invalid", "GIT_COMMITTER_NAME": "bench",
        "GIT_COMMITTER_EMAIL": "bench@example.invalid", "NO_COLOR": "1", "COLUMNS": "80",
    }  # fmt: skip


def project(work: Path, env: dict[str, str]) -> Path:
    """A repository with its venv and bench.py, ready for a lock."""
    root = committed(
        work / "train", {"bench.py": BENCH, "model.py": "def forward(x):\n    return x\n"}, env
    )
    subprocess.run([uv(), "venv", "-q", "--python", sys.executable, str(root / ".venv")],
                   check=True, env=env)  # fmt: skip
    return root


def lock(root: Path, env: dict[str, str], *flags: str) -> None:
    subprocess.run([*ENVGUARD, "snapshot", "-q", *flags], cwd=root, env=env, check=True,
                   capture_output=True)  # fmt: skip
    git(root, "add", "lockfiles")
    git(root, "commit", "-q", "-m", "lock")


def the_incident(work: Path) -> dict[str, object]:
    env = environ(work)
    # two wheelhouses, as the PyTorch index and PyPI are two: `torch==2.11.0` admits the
    # +cu128 build, which uv prefers when one folder holds both
    before, after = work / "before", work / "after"
    incident.known_good(before)
    root = project(work, env)
    venv = root / ".venv"
    incident.install(venv, before, "torch==2.11.0+cu128", "transformers==5.6.0", env=env)
    make(work / "inductor")
    lock(root, {**env, "VIRTUAL_ENV": str(venv)}, "--save-cache")
    incident.install(venv, after, *incident.SGLANG_INSTALL, *incident.sglang_install(after),
                     env=env)  # fmt: skip
    shutil.rmtree(work / "inductor")
    (root / "model.py").write_text("def forward(x):\n    return x * 2\n")
    houses = ["--find-links", str(before), "--find-links", str(after)]
    argv = [*ENVGUARD, "bisect", *houses, "--offline", *METRIC]
    started = time.perf_counter()
    done = subprocess.run([*argv, "--json", "--", "python", "bench.py"], cwd=root, env=env,
                          capture_output=True, text=True)  # fmt: skip
    wall = time.perf_counter() - started
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)["result"]
    screen = subprocess.run([*argv, "--", "python", "bench.py"], cwd=root, env=env,
                            capture_output=True, text=True).stdout  # fmt: skip
    return {
        "moves": [m["subject"] for m in result["moves"]],
        "culprits": [c["subject"] for c in result["culprits"]],
        "trials": len(result["trials"]),
        "seconds": wall,
        "trial_seconds": [t["seconds"] for t in result["trials"]],
        "screen": screen,
    }


def overhead(work: Path, fixtures: Path, rounds: int) -> dict[str, object]:
    env = environ(work)
    house = work / "house"
    pins = wheelhouse(house, fixtures)
    upgraded = [p.split("==")[0] for p in pins if not p.startswith(("torch", "nvidia"))][-UPGRADED:]
    for name in upgraded:
        build_wheel(house, name, next(p for p in pins if p.startswith(f"{name}=="))
                    .split("==")[1] + ".post1")  # fmt: skip
    root = project(work, env)
    venv = root / ".venv"
    offline = ["--offline", "--no-index", "--find-links", str(house)]
    reqs = work / "requirements.txt"
    reqs.write_text("\n".join(pins) + "\n")
    install = [uv(), "pip", "install", "-q", "--python", str(venv / "bin" / "python"), *offline]
    subprocess.run([*install, "-r", str(reqs)], check=True, env=env)
    lock(root, {**env, "VIRTUAL_ENV": str(venv)}, "--no-default-caches")
    bumped = [f"{n}=={next(p for p in pins if p.startswith(f'{n}==')).split('==')[1]}.post1"
              for n in upgraded]  # fmt: skip
    subprocess.run([*install, *bumped], check=True, env=env)
    culprit = upgraded[1]
    check = (f"import importlib.metadata as m, sys; "
             f"sys.exit(m.version({culprit!r}).endswith('.post1'))")  # fmt: skip
    python = subprocess.run([uv(), "python", "find", "--system", "--no-project",
                             f"=={sys.version.split()[0]}"], capture_output=True, text=True,
                            env=env, check=True).stdout.strip()  # fmt: skip
    raw, builds, envguards, counts = [], [], [], []
    for i in range(rounds):
        raw.append(_raw(work / f"raw-{i}-a", python, offline, reqs, env))
        done = subprocess.run(
            [*ENVGUARD, "bisect", "--json", "--find-links", str(house), "--offline",
             "--python", python, "--", "python", "-c", check],
            cwd=root, env=env, capture_output=True, text=True,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)["result"]
        assert [c["subject"] for c in result["culprits"]] == [culprit], result["culprits"]
        builds += [t["build_seconds"] for t in result["trials"]]
        envguards += [t["seconds"] - t["run_seconds"] for t in result["trials"]]
        counts.append(len(result["trials"]))
        raw.append(_raw(work / f"raw-{i}-b", python, offline, reqs, env))
    base = statistics.median(raw)
    return {
        "pins": len(pins), "moves": UPGRADED, "trials per bisect": counts,
        "raw uv venv && uv pip sync (ms)": base * 1000,
        "trial venv and code (ms)": statistics.median(builds) * 1000,
        "trial but the command (ms)": statistics.median(envguards) * 1000,
        "venv and code ÷ raw": statistics.median(builds) / base,
        "trial but the command ÷ raw": statistics.median(envguards) / base,
    }  # fmt: skip


def _raw(target: Path, python: str, offline: list[str], reqs: Path, env: dict[str, str]) -> float:
    """One raw ``uv venv && uv pip sync`` of the pins, as a trial asks uv for them."""
    started = time.perf_counter()
    subprocess.run([uv(), "venv", "-q", "--relocatable", "--python", python, str(target)],
                   check=True, env=env)  # fmt: skip
    subprocess.run([uv(), "pip", "sync", "-q", "--python", str(target / "bin" / "python"),
                    *offline, str(reqs)], check=True, env=env)  # fmt: skip
    took = time.perf_counter() - started
    shutil.rmtree(target)
    return took


def report(inc: dict[str, object], over: dict[str, object]) -> str:
    base = over["raw uv venv && uv pip sync (ms)"]
    lines = [
        "## The incident, bisected", "",
        f"moves: {', '.join(map(str, inc['moves']))}; culprits: "
        f"{', '.join(map(str, inc['culprits']))}; {inc['trials']} trials; "
        f"{inc['seconds']:.1f} s wall (envguard's start, the live snapshot, every trial)", "",
        "```console", f"$ envguard bisect --find-links before --find-links after --offline "
        f"{shlex.join(METRIC)} -- python bench.py", str(inc["screen"]).rstrip(), "```", "",
        f"## A trial against raw uv ({over['pins']} pins, {over['moves']} moves, "
        f"trials per bisect {over['trials per bisect']})", "",
        "| | median ms | × raw |", "|---|---:|---:|",
        f"| raw `uv venv && uv pip sync` | {base:.0f} | 1.00× |",
        f"| a trial's venv and code (uv venv, uv pip sync, the check, the clone of the code) | "
        f"{over['trial venv and code (ms)']:.0f} | {over['venv and code ÷ raw']:.2f}× |",
        f"| a whole trial but the command's own run (caches, cleanup too) | "
        f"{over['trial but the command (ms)']:.0f} | "
        f"{over['trial but the command ÷ raw']:.2f}× |",
    ]  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--fixtures", type=Path, default=DEFAULT_FIXTURES)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--md", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="envguard-bench-bisect-") as tmp:
        (Path(tmp) / "incident").mkdir()
        (Path(tmp) / "overhead").mkdir()
        inc = the_incident(Path(tmp) / "incident")
        over = overhead(Path(tmp) / "overhead", args.fixtures, args.rounds)
    text = report(inc, over)
    print(text)
    if args.md:
        args.md.write_text(text)
    if args.json:
        args.json.write_text(json.dumps({"incident": inc, "overhead": over}, indent=2) + "\n")


if __name__ == "__main__":
    main()
