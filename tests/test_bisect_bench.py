"""bisect with the lock's own benchmark (#40 part 2): the command ``snapshot --bench``
recorded runs when bisect is given none, and GOOD, rebuilt in a trial, is held to what it
measured when the lock was taken.

One project for the module, laid out as users lay it out: a git repository whose benchmark
prints its throughput, a uv venv, the lock committed under ``lockfiles/`` with its
``[bench]`` (21.5 Ktok/s, 3 runs). The drift: speedlib 1.0 → 2.0 (slow: 4.3) and
``CUDA_LAUNCH_BLOCKING=1`` (harmless here). ``BENCH_EVERY_RUN`` is a variable envguard does
not record, so it passes through to every trial as a busy machine would: ``slow`` makes every
run 4.3, ``fast`` every run not slowed by speedlib 30.0.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from envguard import lockfile
from envguard.demo.repo import committed
from envguard.demo.wheels import build_wheel
from tests.conftest import git, make_venv, uv_install
from tests.project import invoke
from tests.test_bisect import _json as _result

BENCH = """\
import os, pathlib, speedlib
every = os.environ.get("BENCH_EVERY_RUN", "")
value = 4.3 if speedlib.__version__ == "2.0" or every == "slow" else 30.0 if every else 21.5
marker = os.environ.get("BENCH_MARKER")
if marker:
    with open(marker, "a") as f:
        f.write(os.getcwd() + "\\n")
print("throughput:", value)
"""
METRIC = ("--metric", r"throughput: ([0-9.]+)", "--higher-is-better", "--unit", "Ktok/s")


@dataclass
class Drifted:
    root: Path
    house: Path
    lock: Path
    env: dict[str, str | None]

    def bisect(self, *args: str, every: str = "", command: tuple[str, ...] = ()) -> tuple[
        int, str, str
    ]:  # fmt: skip
        env = {**self.env, "BENCH_EVERY_RUN": every}
        after = ("--", *command) if command else ()
        return invoke("bisect", "--find-links", str(self.house), "--offline", *args, *after,
                      env=env)  # fmt: skip


def locked_with_bench(root: Path, env: dict[str, str | None]) -> None:
    """The lock taken in ``root`` with its benchmark (``python bench.py``, 3 runs), and
    committed, as the README advises."""
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        code, _, err = invoke("snapshot", "-q", "--bench", *METRIC, "--runs", "3",
                              "--", "python", "bench.py", env=env)  # fmt: skip
        assert code == 0, err
    git(root, "add", "lockfiles")
    git(root, "commit", "-q", "-m", "lock, with its benchmark")


@pytest.fixture(scope="module")
def drifted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Drifted]:
    base = tmp_path_factory.mktemp("bisect-bench")
    house = base / "house"
    for version in ("1.0", "2.0"):
        build_wheel(house, "speedlib", version,
                    files={"speedlib/__init__.py": f'__version__ = "{version}"\n'})  # fmt: skip
    root = committed(base / "train", {"bench.py": BENCH, "src/run.py": "# the trainer\n"})
    venv = make_venv(root / ".venv")
    uv_install(venv, house, "speedlib==1.0")
    env: dict[str, str | None] = {
        "VIRTUAL_ENV": str(venv), "TORCHINDUCTOR_CACHE_DIR": str(base / "inductor"),
        "TRITON_CACHE_DIR": str(base / "triton"), "ENVGUARD_CACHE_DIR": str(base / "eg"),
        "CUDA_LAUNCH_BLOCKING": None, "NO_COLOR": "1", "COLUMNS": "80",
    }  # fmt: skip
    locked_with_bench(root, env)
    uv_install(venv, house, "speedlib==2.0")
    env["CUDA_LAUNCH_BLOCKING"] = "1"
    lock = root / "lockfiles" / "train.envguard.toml"
    yield Drifted(root=root, house=house, lock=lock, env=env)


@pytest.fixture
def here(drifted: Drifted, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Drifted:
    monkeypatch.chdir(drifted.root)
    drifted.env["ENVGUARD_CACHE_DIR"] = str(tmp_path / "envguard-cache")
    return drifted


def test_without_a_command_the_locks_benchmark_runs_and_names_the_culprit(
    here: Drifted, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(here.root / "src")  # anywhere in the repository: it runs where recorded
    marker = tmp_path / "ran"
    here.env["BENCH_MARKER"] = str(marker)
    try:
        code, out, err = here.bisect()
    finally:
        here.env.pop("BENCH_MARKER")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("Culprit: speedlib 1.0 → 2.0 ("), out
    assert lines[1].startswith("GOOD      21.5 Ktok/s (3 runs)")  # the lock's path, below
    at = lines.index("          the lock recorded 21.5 Ktok/s (3 runs)")
    assert lines[at + 1].startswith("BAD        4.3 Ktok/s (3 runs)")
    joined = " ".join(out.split())
    assert "`python bench.py`: --metric 'throughput: ([0-9.]+)', higher is better" in joined
    # every run in the trials' copy of the folder the benchmark was recorded in, the root
    # (from src/, `python bench.py` finds no bench.py), never in the user's own
    ran = marker.read_text().splitlines()
    assert ran and not any(line.endswith("/src") for line in ran), ran
    assert str(here.root) not in ran


def test_json_says_what_good_was_held_to(here: Drifted) -> None:
    code, out, err = here.bisect("--json")
    assert code == 0, err
    result = _result(out)
    assert [c["subject"] for c in result["culprits"]] == ["speedlib"]
    assert result["command"] == ["python", "bench.py"] and result["unit"] == "Ktok/s"
    assert result["recorded"] == {"runs": 3, "min": 21.5, "max": 21.5, "median": 21.5,
                                  "spread": 0.0, "within": None}  # fmt: skip


def test_a_good_that_cannot_be_reproduced_stops_with_the_figures(here: Drifted) -> None:
    """Every run slowed by what the lock never recorded: GOOD measures 4.3, as BAD does.
    Without the record that read "no regression" (exit 2); with it, GOOD is not the
    known-good state, and nothing is named."""
    code, out, err = here.bisect("--json", every="slow")
    assert code == 1, err
    result = _result(out)
    assert result["culprits"] == [] and result["found"] is False
    assert result["stop"] == "unlike-lock"
    assert result["why"].startswith("cannot tell: GOOD, rebuilt from the lock, measures worse")
    assert (result["good"], result["bad"]) == (4.3, 4.3)
    note = next(n for n in result["notes"] if n.startswith("GOOD measures"))
    assert note.startswith("GOOD measures 4.3 Ktok/s over 3 runs, outside the noise of the "
                           "21.5 Ktok/s the lock recorded (3 runs); ")  # fmt: skip
    # the same machine: nothing of it to blame
    assert "nothing envguard records of the machine differs" in note
    assert [t["index"] for t in result["trials"]] == [1, 2]


def test_the_screen_of_a_good_unlike_the_lock(here: Drifted) -> None:
    code, out, err = here.bisect(every="slow")
    assert code == 1, err
    lines = out.splitlines()
    assert all(len(line) <= 80 for line in lines), out
    assert lines[0] == "No culprit after 2 trials, " + lines[0].split(", ", 1)[1]
    assert "measures worse than the lock recorded" in " ".join(out.split())
    assert "          the lock recorded 21.5 Ktok/s (3 runs)" in lines


def test_a_band_the_user_gives_holds_good_instead(here: Drifted) -> None:
    """--good-within 90: 4.3 is within 90% of 21.5, so GOOD stands; and BAD measures as it
    does: no regression, the refusal of before."""
    code, out, err = here.bisect("--good-within", "90", every="slow")
    assert code == 2, (out, err)
    assert err.startswith("error: no regression to bisect: GOOD 4.3 and BAD 4.3 Ktok/s")
    code, out, err = here.bisect("--good-within", "10", "--json", every="slow")
    assert code == 1, err
    result = _result(out)
    assert result["recorded"]["within"] == 0.1
    assert any("more than 10% from the 21.5 Ktok/s" in n for n in result["notes"])


def test_a_good_better_than_the_record_is_the_machine_and_goes_on(here: Drifted) -> None:
    code, out, err = here.bisect("--json", every="fast")
    assert code == 0, err
    result = _result(out)
    assert (result["good"], result["bad"]) == (30.0, 4.3)
    assert [c["subject"] for c in result["culprits"]] == ["speedlib"]


def test_another_command_is_held_to_no_record(here: Drifted) -> None:
    code, out, err = here.bisect(*METRIC, "--json", every="slow",
                                 command=("python", "./bench.py"))  # fmt: skip
    assert code == 2, (out, err)  # no record to hold GOOD to: GOOD and BAD alike
    assert "no regression to bisect" in err
    assert "the lock recorded the speed of `python bench.py`" in err
    assert "not of this command: GOOD is held to no record" in err


def test_no_command_and_no_record_is_one_line(here: Drifted, tmp_path: Path) -> None:
    plain = tmp_path / "plain.envguard.toml"
    code, _, err = invoke("snapshot", "-q", "-o", str(plain), env=here.env)
    assert code == 0, err
    code, out, err = here.bisect(str(plain))
    assert code == 2 and out == ""
    assert err.startswith("error: nothing to run: envguard bisect [LOCK] -- COMMAND..., or ")
    assert "envguard snapshot --bench -- COMMAND" in err and len(err.splitlines()) == 1


def test_nothing_but_bisect_runs_the_locks_command(here: Drifted, tmp_path: Path) -> None:
    """A teammate's lock names a command: diff, restore's plan and export read it, and
    never run it."""
    marker = tmp_path / "ran"
    env = {**here.env, "BENCH_MARKER": str(marker)}
    pylock = str(tmp_path / "pylock.toml")
    for args in (("diff",), ("diff", "--json"), ("restore", "--dry-run"),
                 ("export", "--find-links", str(here.house), "-o", pylock)):  # fmt: skip
        code, _, err = invoke(*args, env=env)
        assert code in (0, 1), (args, err)
    assert not marker.exists()
    assert lockfile.read(here.lock).bench is not None


def test_what_a_benchmark_does_with_git_stays_in_its_trial(here: Drifted) -> None:
    """A benchmark that tags, branches, stashes, commits and sets config (a training script
    that tags its run, a tool that stashes): a trial's code is a clone of its own, so the
    user's repository keeps its refs, stash, config and worktrees as they were."""

    def state() -> tuple[str, ...]:
        return tuple(git(here.root, *args) for args in (
            ("for-each-ref",), ("stash", "list"), ("worktree", "list", "--porcelain"),
            ("config", "--local", "--list"), ("rev-parse", "HEAD"),
        ))  # fmt: skip

    before = state()
    script = ("git tag -f trial-tag && git branch -f trial-branch && echo '# x' >> bench.py && "
              "git stash -q && git -c user.name=t -c user.email=t@t commit -q --allow-empty "
              "-m trial && git config --local trial.was here && python bench.py")  # fmt: skip
    code, out, err = here.bisect(*METRIC, "--json", command=("sh", "-c", script))
    assert code == 0, err
    assert [c["subject"] for c in _result(out)["culprits"]] == ["speedlib"]
    assert state() == before


@pytest.mark.parametrize(("direction", "said"), [("higher", "worse than"), ("", "other than")])
def test_a_good_unlike_the_lock_is_worse_only_where_a_direction_says(
    direction: str, said: str
) -> None:
    """Without a direction, a GOOD faster than the record is as unlike it as a slower one."""
    from envguard.results.bisect import BisectDone

    done = BisectDone(lock="l", venv="v", repo="", command=("python", "b.py"), metric="x (\\d)",
                      direction=direction, unit="", runs=1, tolerance=0.25, good=30.0, bad=4.3,
                      moves=(), trials=(), stop="unlike-lock")  # fmt: skip
    assert f"measures {said} the lock recorded" in done.why()
    assert done.to_dict()["why"] == done.why()
