"""``envguard demo``, as a new user runs it: the real CLI in its own process, at 80 columns."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import envguard


def _demo(*args: str, cwd: Path, path: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "80", "NO_COLOR": "1"}
    env.pop("VIRTUAL_ENV", None)
    if path is not None:
        env["PYTHONPATH"] = str(path)
    return subprocess.run(
        [sys.executable, "-m", "envguard", "demo", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


@pytest.mark.slow
def test_the_demo_shows_the_incident_and_its_cure(tmp_path: Path) -> None:
    # the package alone, copied away from the checkout: no file outside it is needed
    site = tmp_path / "site"
    shutil.copytree(Path(envguard.__file__).parent, site / "envguard")
    done = _demo(cwd=tmp_path, path=site)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    over = [line for line in out.splitlines() if len(line) > 80]
    assert over == []
    # the three screens it promises, in order, with their verdicts
    first = out.index("$ envguard diff")
    restore = out.index("$ envguard restore")
    again = out.index("$ envguard diff", restore)
    assert first < restore < again
    assert re.search(r"critical  torch +2\.11\.0\+cu128 → 2\.11\.0\+cu130", out[first:restore])
    assert "Restored .venv: 8 packages match the lock" in out[restore:again]
    assert "saved your uncommitted work as stash@{0}" in out[restore:again]
    assert out[again:].splitlines()[1].startswith("No drift")
    match = re.search(r"Building a training project in (\S+)/train", out)
    assert match and not Path(match.group(1)).exists()  # cleaned up after itself
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_the_bisect_act_finds_torchs_build_before_the_cure(tmp_path: Path) -> None:
    done = _demo("--bisect", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert [line for line in out.splitlines() if len(line) > 80] == []
    diff, bisect = out.index("$ envguard diff"), out.index("$ envguard bisect")
    restore = out.index("$ envguard restore")
    assert diff < bisect < restore
    screen = out[bisect:restore].splitlines()
    # the command as shown, its continued lines joined, is one a shell runs as given
    typed = []
    for line in screen:
        typed.append(line.removesuffix(" \\").strip())
        if not line.endswith(" \\"):
            break
    words = shlex.split(" ".join(typed))
    assert words[words.index("--metric") + 1] == "throughput: ([0-9.]+)"
    assert words[-3:] == ["--", "python", "bench.py"] and "wheels-after/" in words
    culprit = next(line for line in screen if line.startswith("Culprit"))
    assert culprit.startswith("Culprit: torch 2.11.0+cu128 → +cu130 (6 trials, ")
    assert "culprit   torch 2.11.0+cu128 → +cu130: 21.5 → 4.3 Ktok/s" in screen
    # the cure that follows is the demo's as ever: bisect changed nothing of the project's
    assert "Restored .venv: 8 packages match the lock" in out[restore:]
    assert "saved your uncommitted work as stash@{0}" in out[restore:]
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_keep_leaves_a_project_to_explore(tmp_path: Path) -> None:
    keep = tmp_path / "demo"
    done = _demo("--keep", str(keep), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (keep / "train" / "lockfiles" / "train.envguard.toml").is_file()
    assert f"kept in {keep}" in " ".join(done.stdout.split())
    # and it is a project envguard works on, from its folder
    after = subprocess.run(
        [sys.executable, "-m", "envguard", "diff", "-q"],
        cwd=keep / "train", capture_output=True, text=True, check=False,
        env={**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(keep / "inductor"),
             "TRITON_CACHE_DIR": str(keep / "triton")},
    )  # fmt: skip
    assert after.returncode == 0, after.stdout + after.stderr


def test_keep_never_builds_over_existing_files(tmp_path: Path) -> None:
    (tmp_path / "mine.txt").write_text("my work\n")
    done = _demo("--keep", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"error: --keep {tmp_path}: must be a new or empty folder"
    ]
    assert sorted(os.listdir(tmp_path)) == ["mine.txt"]


@pytest.mark.slow
def test_a_failed_act_ends_the_demo_with_its_error(tmp_path: Path) -> None:
    # uv that builds venvs and installs but cannot sync: the cure fails
    from tests.conftest import uv_bin

    fake = tmp_path / "uv"
    fake.write_text(
        "#!/bin/sh\n"
        'for a in "$@"; do [ "$a" = sync ] && { echo "error: no space left" >&2; exit 2; }; done\n'
        f'exec {uv_bin()} "$@"\n'
    )
    fake.chmod(0o755)
    env = {**os.environ, "COLUMNS": "80", "NO_COLOR": "1", "ENVGUARD_UV": str(fake)}
    done = subprocess.run(
        [sys.executable, "-m", "envguard", "demo"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "That was the incident" not in done.stdout
    assert "$ envguard diff" not in done.stdout.split("$ envguard restore")[1]  # it stopped
    last = done.stderr.strip().splitlines()[-1]
    # the venv could not be built; the code was put back all the same (3: partly restored)
    assert last.startswith("error: the demo stopped: `envguard restore` exited 3, not 0")
    assert "no space left" in last and "Traceback" not in done.stderr


def test_a_long_command_is_continued_between_its_words_at_any_width() -> None:
    """A quoted word (bisect's --metric) is never cut by a `` \\`` continuation:
    ``'throughput:`` and ``([0-9.]+)'`` fell on two lines at 80 columns, which a shell reads
    otherwise."""
    from envguard.demo.acts import _continued

    argv = ["envguard", "bisect", "--find-links", "wheels-before/", "--offline", "--metric",
            "throughput: ([0-9.]+)", "--higher-is-better", "--", "python", "bench.py"]  # fmt: skip
    command = "$ " + shlex.join(argv)
    for width in range(40, 121):
        lines = _continued(command, width)
        assert all(line.endswith(" \\") for line in lines[:-1])
        # each line whole words (a shell keeps a `` \\`` inside quotes), together the command
        words = [w for line in lines for w in shlex.split(line.removesuffix(" \\"))]
        assert words == ["$", *argv], (width, lines)
        assert all(len(line) <= width for line in lines), (width, lines)
