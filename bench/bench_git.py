"""What a snapshot pays for the code's git state, against what git itself takes to tell it.

    python bench/bench_git.py [--runs 41] [--envguard PATH ...] [--venv PATH] [--clone REPO]
                              [--json FILE]

The repository is a clone of this checkout (its history, ~200 tracked files) with an
``origin`` URL, as a training project's clone has, and one tracked file edited. In one run,
interleaved round by round (``bench.interleaved``):

- ``envguard snapshot -q`` of the venv, run inside the repository, and the same snapshot run
  in a folder outside any repository, for each envguard given (``--envguard`` repeats: time
  the commit before a change beside the one after, under the same load);
- ``git status --porcelain=v2 --branch`` and ``git diff HEAD`` in the repository.

The figure is (inside − outside) ÷ (status + diff), each a median; the goal is ≤ 3 (#22).
The venv is the H200 training venv's 197 distributions (``bench/build_venv.py``) unless
``--venv`` names one; envguard is installed from this checkout as ``bench/bench.py`` does.
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

from bench import ROOT, Table, envguard_install, interleaved

EDITED = "envguard/cli.py"


def make_repo(work: Path, source: Path) -> Path:
    """A clone of ``source`` (this checkout) with a remote URL and one dirty file."""
    repo = work / "repo"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(source), str(repo)], check=True)
    url = "https://github.com/example/train.git"
    subprocess.run(["git", "-C", str(repo), "remote", "set-url", "origin", url], check=True)
    with (repo / EDITED).open("a") as fh:
        fh.write("# an uncommitted experiment\n")
    return repo


def commands(
    installs: list[Path], venv: Path, work: Path, repo: Path
) -> tuple[dict[str, list[str]], dict[str, Path]]:
    """Each envguard's snapshot inside and outside the repo, and git's two commands."""
    outside = work / "outside"
    outside.mkdir()
    argv: dict[str, list[str]] = {}
    cwd: dict[str, Path] = {}
    for i, eg in enumerate(installs):
        for where, folder in (("in repo", repo), ("outside", outside)):
            name = f"[{i}] snapshot -q {where}"
            out = work / f"snap-{i}-{where.replace(' ', '-')}.envguard.toml"
            argv[name] = [str(eg), "snapshot", "-q", "--venv", str(venv), "-o", str(out),
                          "--no-default-caches"]  # fmt: skip
            cwd[name] = folder
    argv["git status --porcelain=v2 --branch"] = ["git", "status", "--porcelain=v2", "--branch"]
    argv["git diff HEAD"] = ["git", "diff", "HEAD"]
    cwd["git status --porcelain=v2 --branch"] = cwd["git diff HEAD"] = repo
    return argv, cwd


def check_dirty(install: Path, venv: Path, work: Path, repo: Path) -> None:
    """The snapshot inside does read the repository: one dirty file, recorded."""
    out = work / "check.envguard.toml"
    snap = [str(install), "snapshot", "-q", "--venv", str(venv), "-o", str(out)]
    subprocess.run([*snap, "--no-default-caches"], check=True, cwd=repo, capture_output=True)
    text = out.read_text()
    if "dirty = true" not in text or EDITED not in text:
        raise SystemExit(f"{install}: the snapshot in {repo} did not record {EDITED} as dirty")


def report(table: Table, installs: list[Path]) -> str:
    git = table["git status --porcelain=v2 --branch"]["median_ms"]
    git += table["git diff HEAD"]["median_ms"]
    lines = [
        "| envguard | in repo ms (min) | outside ms (min) | git's share ms | ÷ git status + diff |",
        "|---|---:|---:|---:|---:|",
    ]
    for i, eg in enumerate(installs):
        inside, outside = table[f"[{i}] snapshot -q in repo"], table[f"[{i}] snapshot -q outside"]
        extra = inside["median_ms"] - outside["median_ms"]
        lines.append(
            f"| [{i}] `{eg}` | {inside['median_ms']:.1f} ({inside['min_ms']:.1f}) | "
            f"{outside['median_ms']:.1f} ({outside['min_ms']:.1f}) | {extra:+.1f} | "
            f"{extra / git:.1f}× |"
        )
    for name in ("git status --porcelain=v2 --branch", "git diff HEAD"):
        m = table[name]
        lines.append(f"| `{name}` | {m['median_ms']:.1f} ({m['min_ms']:.1f}) | | | |")
    return "\n".join([*lines, "", f"git status + git diff HEAD: {git:.1f} ms"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=41)
    parser.add_argument("--envguard", action="append", help="an installed envguard (repeats)")
    parser.add_argument("--venv", type=Path, help="snapshot this venv (default: the H200 set)")
    parser.add_argument("--fixtures", type=Path, default=DEFAULT_FIXTURES)
    parser.add_argument("--clone", type=Path, default=ROOT, help="the repository to clone")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="envguard-git-bench-"))
    try:
        installs = [Path(p) for p in args.envguard or []] or [envguard_install(work, None)]
        venv = args.venv.absolute() if args.venv else build(work / "venv", args.fixtures)
        repo = make_repo(work, args.clone)
        for eg in installs:
            check_dirty(eg, venv, work, repo)
        argv, cwd = commands(installs, venv, work, repo)
        table = interleaved(argv, args.runs, cwd)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(report(table, installs))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        doc = {"installs": [str(p) for p in installs], "table": table}
        args.json.write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    main()
