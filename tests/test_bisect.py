"""envguard bisect end to end (#21): real wheels installed by the real uv, a git repository, a
saved Inductor cache, and a benchmark whose speed depends on one drifted fact (or two).

One incident for the module: GOOD (the committed lock) has speedlib 1.0, a warm cache, a
clean tree and no CUDA_LAUNCH_BLOCKING; BAD has speedlib 2.0 with the fastmath it requires,
helper 1.0 installed on its own, the cache gone, model.py edited and CUDA_LAUNCH_BLOCKING=1.
Five moves, in the order the search takes them: helper, speedlib (+fastmath), the patch, the
cache, the variable. ``BENCH_SLOW_WHEN`` (a variable envguard does not record, so it passes
through to every trial) says which facts the benchmark is slow with.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from envguard.demo.cache import make
from envguard.demo.repo import committed
from envguard.demo.wheels import build_wheel
from tests.conftest import git, make_venv, uv_bin, uv_install
from tests.project import invoke
from tests.test_hostile_lock import in_tree_project

BENCH = """\
import os, pathlib, sys, time
import model, speedlib

facts = {
    "speedlib": speedlib.__version__ == "2.0",
    "cache": not any(pathlib.Path(os.environ["TORCHINDUCTOR_CACHE_DIR"]).glob("fxgraph/*/*")),
    "patch": model.SLOW,
    "env": os.environ.get("CUDA_LAUNCH_BLOCKING") == "1",
}
if os.environ.get("BENCH_BREAK") == "patch" and facts["patch"] and not facts["env"]:
    raise SystemExit("model.SLOW needs CUDA_LAUNCH_BLOCKING")
child = os.environ.get("BENCH_CHILD")
if child:  # a server it leaves running, holding the output it was given
    import subprocess
    with open(child, "a") as f:
        f.write(f"{subprocess.Popen(['sleep', '60']).pid}\\n")
hold = os.environ.get("BENCH_HOLD")
if hold and facts["speedlib"] and not facts["patch"] and not facts["env"]:
    pathlib.Path(hold).touch()  # mid-search: the test interrupts bisect now
    time.sleep(60)
for entry in pathlib.Path(os.environ["TORCHINDUCTOR_CACHE_DIR"]).glob("fxgraph/*/*/*"):
    for line in entry.read_bytes().decode("latin-1").splitlines():  # as torch on a cache hit:
        if line.startswith("# kernel: "):  # the kernel's autotuning result, beside its file
            # named by its own hash, in the kernel's folder (xq/0bb4….best_config, xq/cxq….py)
            best = pathlib.Path(line[len("# kernel: "):]).parent / "0bb4e375.best_config"
            best.parent.mkdir(parents=True, exist_ok=True)
            best.write_text('{"XBLOCK": 512, "num_warps": 8}')
slow = any(all(facts.get(f) for f in either.split("+"))  # "speedlib|env": either alone
           for either in os.environ.get("BENCH_SLOW_WHEN", "speedlib").split("|"))
log = os.environ.get("BENCH_LOG")
if log:  # one line a run, of what it had
    with open(log, "a") as f:
        f.write(" ".join(sorted(k for k, v in facts.items() if v)) + "\\n")
if os.environ.get("BENCH_EXIT"):
    raise SystemExit(1 if slow else 0)
value = 4.3 if slow else 21.5
cold = os.environ.get("BENCH_COLD")  # the first run of all is slow, whatever it has
if cold and not os.path.exists(cold):
    pathlib.Path(cold).touch()
    value = 4.0
noise = os.environ.get("BENCH_NOISE")  # each run's value, in turn, from a file
if noise:
    done = pathlib.Path(noise + ".runs")
    ran = len(done.read_text().splitlines()) if done.exists() else 0
    with open(done, "a") as f:
        f.write("ran\\n")
    value = float(pathlib.Path(noise).read_text().split()[ran])
print("step 1 throughput: 9.9")
print("throughput:", value)
"""
METRIC = ("--metric", r"throughput: ([0-9.]+)", "--higher-is-better", "--unit", "Ktok/s")


@dataclass
class Incident:
    root: Path  # the repository
    venv: Path
    house: Path
    lock: Path
    cache: Path  # where the Inductor cache was (gone now)
    env: dict[str, str | None]  # BAD's environment

    def bisect(
        self, *args: str, slow: str = "speedlib", env: dict[str, str | None] | None = None
    ) -> tuple[int, str, str]:
        full = {**self.env, "BENCH_SLOW_WHEN": slow, **(env or {})}
        return invoke("bisect", *self.indexes(), *args, "--", "python", "bench.py", env=full)

    def indexes(self) -> tuple[str, ...]:
        return ("--find-links", str(self.house), "--offline")


@pytest.fixture(scope="module")
def incident(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Incident]:
    base = tmp_path_factory.mktemp("bisect")
    house = base / "house"
    build_wheel(house, "speedlib", "1.0", files={"speedlib/__init__.py": '__version__ = "1.0"\n'})
    build_wheel(house, "speedlib", "2.0", files={"speedlib/__init__.py": '__version__ = "2.0"\n'},
                requires=["fastmath==1.0"])  # fmt: skip
    build_wheel(house, "fastmath", "1.0")
    build_wheel(house, "helper", "1.0")
    root = committed(base / "train", {"bench.py": BENCH, "model.py": "SLOW = False\n"})
    venv = make_venv(root / ".venv")
    uv_install(venv, house, "speedlib==1.0")
    cache = make(base / "inductor")
    # as in Inductor's compiled code, an entry names its kernel's file by absolute path: torch
    # writes the kernel's autotuning result beside it, wherever the cache has been copied to
    entry, kernel = next(cache.glob("fxgraph/*/*/*")), cache / "k1" / "ck1.py"
    kernel.parent.mkdir()
    kernel.write_text("# the kernel's Triton source\n")
    entry.write_bytes(entry.read_bytes() + f"\n# kernel: {kernel}\n".encode())
    env: dict[str, str | None] = {
        "VIRTUAL_ENV": str(venv), "TORCHINDUCTOR_CACHE_DIR": str(cache),
        "TRITON_CACHE_DIR": str(base / "triton"), "ENVGUARD_CACHE_DIR": str(base / "eg-cache"),
        "CUDA_LAUNCH_BLOCKING": None, "NO_COLOR": "1", "COLUMNS": "80",
    }  # fmt: skip
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        code, _, err = invoke("snapshot", "-q", "--save-cache", env=env)
        assert code == 0, err
    git(root, "add", "lockfiles")
    git(root, "commit", "-q", "-m", "lock")
    # the drift: an upgrade (bringing fastmath), a package on its own, a cleaned cache, an
    # edit, a variable
    uv_install(venv, house, "speedlib==2.0", "helper==1.0")
    shutil.rmtree(cache)
    (root / "model.py").write_text("SLOW = True\n")
    env["CUDA_LAUNCH_BLOCKING"] = "1"
    lock = root / "lockfiles" / "train.envguard.toml"
    yield Incident(root=root, venv=venv, house=house, lock=lock, cache=cache, env=env)


@pytest.fixture
def here(incident: Incident, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Incident:
    """In the repository, with a work folder of this test's own."""
    monkeypatch.chdir(incident.root)
    incident.env["ENVGUARD_CACHE_DIR"] = str(tmp_path / "envguard-cache")
    return incident


def _json(out: str) -> dict:  # type: ignore[type-arg]
    doc = json.loads(out)
    assert doc["kind"] == "bisect"
    return doc["result"]  # type: ignore[no-any-return]


def _applied(trial: dict) -> set[str]:  # type: ignore[type-arg]
    return {m["subject"] for m in trial["applied"]}


@pytest.mark.parametrize(
    ("slow", "culprits", "trials"),
    [
        ("speedlib", {"speedlib"}, 7),
        ("patch", {"uncommitted patch"}, 6),
        ("cache", {"Inductor cache"}, 6),
        ("env", {"CUDA_LAUNCH_BLOCKING"}, 7),
        ("patch+env", {"uncommitted patch", "CUDA_LAUNCH_BLOCKING"}, 11),
    ],
)
@pytest.mark.slow
def test_each_culprit_is_found_exactly(
    here: Incident, slow: str, culprits: set[str], trials: int
) -> None:
    code, out, err = here.bisect(*METRIC, "--json", slow=slow)
    assert code == 0, err
    result = _json(out)
    assert [m["subject"] for m in result["moves"]] == [
        "helper", "speedlib", "uncommitted patch", "Inductor cache", "CUDA_LAUNCH_BLOCKING",
    ]  # fmt: skip
    assert {c["subject"] for c in result["culprits"]} == culprits
    assert len(result["trials"]) == trials  # the last, BAD with the culprits put back: good
    assert result["put_back"] == {"value": 21.5, "verdict": "good", "good_beside": None}
    # and nothing else said: no second cost, no file left in the user's cache, no ignored
    # file (the venv ignores itself, and is no data of the user's)
    (note,) = result["notes"]
    assert "file(s) the trials' command wrote into your cache" in note
    assert "other new file" not in note and "could not be put back" not in note
    assert (result["good"], result["bad"]) == (21.5, 4.3)
    if len(culprits) == 1:
        (culprit,) = result["culprits"]
        assert culprit["effect"] == {"from": 21.5, "to": 4.3}
    else:  # neither alone costs it
        assert {c["effect"]["to"] for c in result["culprits"]} == {21.5}
        assert result["together"] == {"from": 21.5, "to": 4.3}


def _tree(root: Path) -> dict[str, str]:
    """Every file under ``root`` (its .git aside) by content and mode, links by target."""
    out = {}
    for path in sorted(root.rglob("*")) if root.exists() else []:
        rel = str(path.relative_to(root))
        if rel == ".git" or rel.startswith(".git/"):
            continue
        if path.is_symlink():
            out[rel] = "-> " + os.readlink(path)
        elif path.is_file():
            out[rel] = f"{path.stat().st_mode:o} {hashlib.sha256(path.read_bytes()).hexdigest()}"
    return out


def _users(inc: Incident) -> dict[str, object]:
    """What bisect must leave as it found it: the venv, the working tree, the stash and
    worktrees, the caches (gone, and to stay gone), the lock and its archive."""
    python = str(inc.venv / "bin" / "python")
    freeze = subprocess.run(
        [uv_bin(), "pip", "freeze", "--python", python], capture_output=True, text=True, check=True
    ).stdout
    return {
        "freeze": freeze,
        "venv": _tree(inc.venv),
        "tree": _tree(inc.root),
        "status": git(inc.root, "status", "--porcelain", "-uall"),
        "stash": git(inc.root, "stash", "list"),
        "worktrees": git(inc.root, "worktree", "list", "--porcelain"),
        "admin": sorted(p.name for p in (inc.root / ".git").iterdir()),
        "inductor": _tree(inc.cache), "inductor here": inc.cache.exists(),
        "triton": _tree(Path(str(inc.env["TRITON_CACHE_DIR"]))),
    }  # fmt: skip


def _work(inc: Incident) -> list[str]:
    """What is left of envguard's work folders."""
    root = Path(str(inc.env["ENVGUARD_CACHE_DIR"])) / "bisect"
    return sorted(str(p) for p in root.rglob("*")) if root.exists() else []


@pytest.mark.slow
def test_the_screen_at_80_columns_and_nothing_of_the_users_touched(here: Incident) -> None:
    before = _users(here)
    code, out, err = here.bisect(*METRIC)
    assert code == 0, err
    lines = out.splitlines()
    assert all(len(line) <= 80 for line in lines), out
    assert lines[0].startswith("Culprit: speedlib 1.0 → 2.0 (7 trials, ")
    # GOOD and BAD, three runs each (the same number each time: no range to show)
    assert lines[1] == "GOOD      21.5 Ktok/s (3 runs)  lockfiles/train.envguard.toml"
    assert lines[2:4] == [
        "BAD        4.3 Ktok/s (3 runs)  .venv, with the working tree, caches and",
        "          variables here",
    ]
    # a trial runs once, and on where one run cannot decide: the screen says both
    assert (
        " ".join(out.split()).count(
            "higher is better; 1 run a trial, up to 3 where its verdict could turn"
        )
        == 1
    )
    table = lines[lines.index(next(ln for ln in lines if ln.startswith("trial"))) + 1 :][:7]
    assert [ln.split()[0] for ln in table] == ["1", "2", "3", "4", "5", "6", "7"]
    assert "nothing (GOOD)" in table[0] and "all 5 moves (BAD)" in table[1]
    assert table[5].split()[1:5] == ["speedlib", "(+1)", "4.3", "bad"]
    assert "culprit   speedlib 1.0 → 2.0: 21.5 → 4.3 Ktok/s" in lines
    assert "          put it back: `uv pip install --python .venv speedlib==1.0` &&" in lines
    assert _users(here) == before  # the cache stays gone, though the warm trials wrote there
    assert f"your cache {here.cache} were removed" in " ".join(out.split())
    assert _work(here) == []


@pytest.mark.slow
def test_no_regression_is_refused_before_any_search(here: Incident, tmp_path: Path) -> None:
    log = tmp_path / "runs.log"
    code, out, err = here.bisect(*METRIC, "--json", slow="never", env={"BENCH_LOG": str(log)})
    assert code == 2
    assert "no regression to bisect: GOOD 21.5 and BAD 21.5 Ktok/s measure alike" in err
    doc = json.loads(out)
    assert doc["result"] is None and "no regression" in doc["error"]
    # GOOD, BAD, in turn, three times each: the same number each time is enough
    assert log.read_text().splitlines() == ["", "cache env patch speedlib"] * 3
    assert _work(here) == []


@pytest.mark.slow
def test_a_gap_inside_the_noise_is_cannot_tell_with_the_figures(
    here: Incident, tmp_path: Path
) -> None:
    """GOOD and BAD each swing between fast and slow: six runs each, in turn, and the gap
    between their medians stays inside their spread. No culprit, no search: exit 1."""
    noise = tmp_path / "values"
    noise.write_text("21.5 4.3 4.3 21.5 21.5 4.3 4.3 21.5 21.5 4.3 21.5 4.3")  # G B G B ...
    code, out, err = here.bisect(*METRIC, "--json", env={"BENCH_NOISE": str(noise)})
    assert code == 1, err
    doc = _json(out)
    assert doc["found"] is False and doc["culprits"] == []
    assert doc["stop"] == "cannot-tell"  # a code; the screen's words beside it
    assert doc["why"] == "cannot tell GOOD from BAD: their gap is inside their runs' noise"
    assert [t["index"] for t in doc["trials"]] == [1, 2]  # no search on it
    good, bad = doc["trials"]
    assert good["values"] == [21.5, 4.3, 21.5, 4.3, 21.5, 21.5]
    assert bad["values"] == [4.3, 21.5, 4.3, 21.5, 4.3, 4.3]
    assert doc["noise"]["good"] == {"runs": 6, "min": 4.3, "max": 21.5, "spread": 17.2}
    noise.with_suffix(".runs").unlink()  # the same runs again, for the screen
    code, out, _ = here.bisect(*METRIC, env={"BENCH_NOISE": str(noise)})
    said = " ".join(out.split())
    assert code == 1
    assert out.startswith("No culprit after 2 trials, ")
    assert "cannot tell GOOD from BAD: their gap is inside their runs' noise" in said
    assert (
        "GOOD 21.5 and BAD 4.3 Ktok/s differ by 17.2 (80%), within their runs' spread "
        "(17.2 Ktok/s in 6 each)"
    ) in said
    assert "suspects" not in said  # no search began: naming every move says nothing


@pytest.mark.slow
def test_a_cold_first_run_costs_runs_not_the_answer(here: Incident, tmp_path: Path) -> None:
    """GOOD's first run is slow (a cold start): its spread hides the gap until enough runs
    leave the one outlier out. GOOD and BAD run on, in turn, and the culprit is found."""
    code, out, err = here.bisect(*METRIC, "--json", env={"BENCH_COLD": str(tmp_path / "c")})
    assert code == 0, err
    doc = _json(out)
    assert [c["subject"] for c in doc["culprits"]] == ["speedlib"]
    good, bad = doc["trials"][:2]
    assert good["values"] == [4.0, 21.5, 21.5, 21.5, 21.5] and good["value"] == 21.5
    assert bad["values"] == [4.3] * 5
    assert doc["noise"]["good"]["spread"] == 0.0  # the cold run left out


@pytest.mark.slow
def test_a_broken_trial_is_never_counted_bad(here: Incident, tmp_path: Path) -> None:
    """The patch without CUDA_LAUNCH_BLOCKING crashes: that trial says nothing; the cache
    is found all the same. --keep keeps every trial, its code and output."""
    keep = tmp_path / "kept"
    code, out, err = here.bisect(*METRIC, "--json", "--keep", str(keep), slow="cache",
                                 env={"BENCH_BREAK": "patch"})  # fmt: skip
    assert code == 0, err
    result = _json(out)
    assert [c["subject"] for c in result["culprits"]] == ["Inductor cache"]
    verdicts = [(sorted(_applied(t)), t["verdict"]) for t in result["trials"]]
    assert verdicts == [
        ([], "good"),
        (sorted(m["subject"] for m in result["moves"]), "bad"),
        (["helper", "speedlib", "uncommitted patch"], "broken"),
        (["CUDA_LAUNCH_BLOCKING", "Inductor cache"], "bad"),
        (["Inductor cache"], "bad"),
        (["CUDA_LAUNCH_BLOCKING", "helper", "speedlib", "uncommitted patch"], "good"),
    ]
    assert "model.SLOW needs CUDA_LAUNCH_BLOCKING" in result["trials"][2]["failure"]
    assert result["work"] == str(keep)
    assert "model.SLOW needs" in (keep / "trial-03" / "run-1" / "output.stderr").read_text()
    assert (keep / "trial-03" / "code-kept" / "model.py").read_text() == "SLOW = True\n"
    assert (keep / "trial-01" / "venv" / "bin" / "python").exists()
    assert git(here.root, "worktree", "list", "--porcelain").count("worktree ") == 1


@pytest.mark.slow
def test_a_combination_uv_refuses_is_said_and_skipped(here: Incident, tmp_path: Path) -> None:
    """uv refuses helper 1.0 beside speedlib 1.0 (as it refuses a pin its indexes lack):
    that trial cannot be built, and speedlib is found all the same."""
    fake = tmp_path / "uv"
    fake.write_text(f"""#!/bin/sh
if [ "$1" = pip ] && [ "$2" = sync ]; then
  for last; do :; done
  if grep -qx 'helper==1.0' "$last" && grep -qx 'speedlib==1.0' "$last"; then
    echo "error: helper 1.0 cannot be installed beside speedlib 1.0" >&2; exit 1
  fi
fi
exec {uv_bin()} "$@"
""")
    fake.chmod(0o755)
    code, out, err = here.bisect(*METRIC, "--json", env={"ENVGUARD_UV": str(fake)})
    assert code == 0, err
    result = _json(out)
    assert [c["subject"] for c in result["culprits"]] == ["speedlib"]
    assert len(result["trials"]) == 7
    # helper beside speedlib 1.0: alone, and in BAD with speedlib put back (the fix, tried)
    refused, put_back = [t for t in result["trials"] if t["verdict"] == "unbuildable"]
    assert _applied(refused) == {"helper"} and refused["value"] is None
    assert "speedlib" not in _applied(put_back) and "helper" in _applied(put_back)
    assert result["put_back"] == {"value": None, "verdict": "unbuildable", "good_beside": None}
    assert any(n.startswith("BAD with speedlib put back could not be measured (uv refuses")
               for n in result["notes"])  # fmt: skip
    assert "uv refuses these pins" in refused["failure"]
    assert "cannot be installed beside speedlib 1.0" in refused["failure"]


@pytest.mark.slow
def test_without_a_metric_the_exit_status_decides(here: Incident, tmp_path: Path) -> None:
    log = tmp_path / "runs.log"
    code, out, err = here.bisect("--runs", "3", "--json", slow="env",
                                 env={"BENCH_EXIT": "1", "BENCH_LOG": str(log)})  # fmt: skip
    assert code == 0, err
    result = _json(out)
    assert [c["subject"] for c in result["culprits"]] == ["CUDA_LAUNCH_BLOCKING"]
    assert (result["good"], result["bad"]) == (0.0, 1.0)
    assert [t["values"] for t in result["trials"][:2]] == [[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]
    assert len(result["trials"]) == 7 and len(log.read_text().splitlines()) == 21


@pytest.mark.slow
@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_interrupted_mid_search_leaves_nothing_behind(
    here: Incident, tmp_path: Path, how: str
) -> None:
    before = _users(here)
    hold = tmp_path / "holding"
    env = {k: v for k, v in {**os.environ, **here.env}.items() if v is not None}
    env.update(BENCH_SLOW_WHEN="speedlib", BENCH_HOLD=str(hold))
    argv = [sys.executable, "-m", "envguard", "bisect", *here.indexes(), *METRIC,
            "--", "python", "bench.py"]  # fmt: skip
    proc = subprocess.Popen(argv, cwd=here.root, env=env, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    deadline = time.monotonic() + 60
    while not hold.exists():  # trial 4 (speedlib alone): its venv and worktree exist
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    assert len(_work(here)) > 0
    if how == "ctrl-c":  # the terminal's ^C goes to the whole foreground group
        os.killpg(proc.pid, signal.SIGINT)
    else:
        proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.strip().splitlines() == ["error: interrupted"]
    assert _work(here) == []
    assert _users(here) == before


def _kernels(folder: Path, *names: str) -> Path:
    """A cache copy as a trial gets it: kernel files, by relative path."""
    for name in names:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("# a kernel")
    return folder


def test_a_cache_folder_of_the_users_is_swept_back_to_what_it_held(tmp_path: Path) -> None:
    """What a trial's torch writes beside the kernels its copy names goes, folders it made
    too; a file it changed cannot be put back, and is said; a folder that was not there
    stays not there; nothing else is touched."""
    from envguard.bisect.trials import Untouched

    kept, gone = tmp_path / "inductor", tmp_path / "deleted"
    _kernels(kept, "ab/entry", "ab/old.py", "ab/new.py", "cd/ef/k.py")
    (kept / "ab" / "old.best_config").write_text("{}")
    warm = _kernels(tmp_path / "warm", "xy/k.py", "again/k.py")  # GOOD's, unpacked
    guard = Untouched({kept: [kept], gone: [warm], tmp_path / "inductor" / ".." / "inductor":
                       [kept]}, spared=[])  # fmt: skip
    (kept / "ab" / "new.best_config").write_text("{}")
    (kept / "cd" / "ef" / "k.best_config").write_text("{}")
    (kept / "ab" / "old.best_config").write_text('{"XBLOCK": 1024}')
    (gone / "xy").mkdir(parents=True)
    (gone / "xy" / "k.best_config").write_text("{}")
    guard.sweep()
    assert sorted(str(p.relative_to(kept)) for p in kept.rglob("*")) == [
        "ab", "ab/entry", "ab/new.py", "ab/old.best_config", "ab/old.py", "cd", "cd/ef",
        "cd/ef/k.py",
    ]  # fmt: skip
    assert not gone.exists()
    assert (kept / "ab" / "entry").read_text() == "# a kernel"
    (gone / "again").mkdir(parents=True)  # a second run writes again: removed, counted
    (gone / "again" / "k.best_config").write_text("{}")
    guard.sweep()
    assert not gone.exists()
    said = sorted(" ".join(n.split()) for n in guard.notes())
    assert len(said) == 2, said  # one a folder: inductor/../inductor is inductor
    assert said[0].startswith(f"2 file(s) the trials' command wrote into your cache {gone} were")
    assert said[1].startswith(f"2 file(s) the trials' command wrote into your cache {kept} were")
    assert f"1 file(s) it changed in your cache {kept} could not be put back" in said[1]


def test_the_folders_above_a_deleted_cache_go_with_it(tmp_path: Path) -> None:
    """The incident deleted /x/cache, which held the recorded /x/cache/inductor: torch, writing
    back into the recorded folder, makes /x/cache too (seen on the H200). Both go after the run;
    a folder above that holds anything else stays, and so does what it holds."""
    from envguard.bisect.trials import Untouched

    cleaned, shared = tmp_path / "cleaned", tmp_path / "shared"
    warm = _kernels(tmp_path / "warm", "ab/k.py")
    guard = Untouched({cleaned / "inductor": [warm], shared / "inductor": [warm]}, spared=[])
    for root in (cleaned, shared):
        (root / "inductor" / "ab").mkdir(parents=True)
        (root / "inductor" / "ab" / "k.best_config").write_text("{}")
    (shared / "mine.txt").write_text("not a cache's")
    guard.sweep()
    assert not cleaned.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shared", "warm"]
    assert sorted(p.name for p in shared.iterdir()) == ["mine.txt"]


def test_what_another_job_writes_into_a_shared_cache_stays(tmp_path: Path) -> None:
    """/tmp/torchinductor_$USER is every job's of the user's: one compiling while bisect runs
    writes entries there. Only an autotuning result in a folder of the trials' copies' was
    the trials'; the rest stays and is said."""
    from envguard.bisect.trials import Untouched

    shared = _kernels(tmp_path / "torchinductor_me", "ab/k.py")
    guard = Untouched({shared: [shared]}, spared=[])
    (shared / "ab" / "k.best_config").write_text("{}")  # a trial's, beside its kernel
    _kernels(shared, "zz/other_job.py", "zz/other.best_config", "fxgraph/zz/entry")  # another's
    guard.sweep()
    assert sorted(str(p.relative_to(shared)) for p in shared.rglob("*") if p.is_file()) == [
        "ab/k.py", "fxgraph/zz/entry", "zz/other.best_config", "zz/other_job.py",
    ]  # fmt: skip
    (note,) = guard.notes()
    assert "1 file(s) the trials' command wrote into your cache" in " ".join(note.split())
    assert "3 other new file(s) in your cache" in " ".join(note.split())


def test_a_cache_folder_that_holds_the_repository_or_the_work_is_never_swept(
    tmp_path: Path,
) -> None:
    """A lock can name any folder as its cache: one that holds the repository, the trials'
    work folder or the home folder (a cache at XDG_CACHE_HOME, where envguard's work is too)
    is left alone, whatever is new in it."""
    from envguard.bisect.trials import Untouched

    repo, work = tmp_path / "repo", tmp_path / "xdg" / "envguard" / "bisect" / "run-1"
    for folder in (repo, work):
        folder.mkdir(parents=True)
    guard = Untouched({repo: [repo], tmp_path / "xdg": [tmp_path / "xdg"], tmp_path / "other":
                       [repo]}, spared=[repo, work])  # fmt: skip
    (repo / "NOTES.md").write_text("mine")
    (work / "trial-01").mkdir()
    guard.sweep()
    assert (repo / "NOTES.md").read_text() == "mine" and (work / "trial-01").is_dir()
    assert set(guard.before) == {tmp_path / "other"}


@pytest.mark.parametrize("width", [80, 160, 240])
def test_a_wide_screen_keeps_the_metric_beside_what_it_measured(width: int) -> None:
    """The trial table's applied column is an 80-column screen's and grows with the screen
    only as far as its longest row needs: at 160 columns the metric stood 80 columns to the
    right of "helper"."""
    from envguard.bisect.moves import Move
    from envguard.output.human import Human
    from envguard.results.bisect import BisectDone, Culprit, TrialRow

    moves = tuple(Move(kind="packages", subject=f"package-number-{i}", old="1.0", new="2.0")
                  for i in range(6))  # fmt: skip
    rows = [((), 21.5), (moves, 4.3), (moves[:5], 4.3), (moves[:1], 21.5)]
    done = BisectDone(
        lock="train.envguard.toml", venv=".venv", repo=".", command=("python", "bench.py"),
        metric="t: ([0-9.]+)", direction="higher", unit="Ktok/s", runs=1, tolerance=0.25,
        good=21.5, bad=4.3, moves=moves,
        trials=tuple(TrialRow(index=i + 1, applied=a, values=(v,), value=v,
                              verdict="good" if v > 10 else "bad", seconds=0.1, build_seconds=0)
                     for i, (a, v) in enumerate(rows)),
        culprits=(Culprit(move=moves[1], alone=4.3, fix=()),),
    )  # fmt: skip
    lines = Human(width=width).format(done).splitlines()
    assert all(len(ln) <= width for ln in lines)
    at = lines.index(next(ln for ln in lines if ln.startswith("trial")))
    header, five = lines[at], lines[at + 3]
    whole = ", ".join(m.subject for m in moves[:5])  # 94 columns
    if width == 80:  # as every 80-column screen had it
        assert header == "trial  applied" + " " * 40 + "metric  verdict       time"
        assert whole not in five and five.split()[-4:] == ["4.3", "bad", "0.1", "s"]
    else:  # the row whole, its metric right after the column it needs
        assert header.index("metric") == len("    3  ") + len(whole) + 4  # "  " + "{:>8}"
        assert five.startswith(f"    3  {whole}       4.3  bad")


@pytest.mark.slow
def test_a_child_the_command_leaves_running_ends_with_its_run(
    here: Incident, tmp_path: Path
) -> None:
    """The run is over when the command's own process exits: a child it left (a server, a
    compile worker) held the output pipes, so each trial waited for --timeout and was broken
    ("no answer after 20 s"), and the child outlived the trial. It is killed with the run."""
    import psutil

    pids = tmp_path / "children"
    started = time.monotonic()
    code, out, err = here.bisect(*METRIC, "--json", "--timeout", "20",
                                 env={"BENCH_CHILD": str(pids)})  # fmt: skip
    assert code == 0, err
    assert [c["subject"] for c in _json(out)["culprits"]] == ["speedlib"]
    assert time.monotonic() - started < 20
    left = [int(p) for p in pids.read_text().split()]
    # one a run: GOOD's and BAD's three each, two for each of the 3 bad trials (a second
    # run confirms a bad verdict), one for each of the 2 good ones
    assert len(left) == 14
    alive = [p for p in left if psutil.pid_exists(p)
             and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]  # fmt: skip
    assert alive == []


@pytest.mark.slow
def test_a_command_naming_the_script_by_its_absolute_path_runs_the_trials_copy(
    here: Incident,
) -> None:
    """``torchrun $PWD/train.py``: the path inside the repository is the trial's copy's, as a
    PYTHONPATH entry there is, else every trial runs the working tree's script (with BAD's
    patch) and GOOD and BAD measured alike."""
    env = {**here.env, "BENCH_SLOW_WHEN": "patch"}
    script = str(here.root / "bench.py")
    code, out, err = invoke("bisect", *here.indexes(), *METRIC, "--json", "--", "python",
                            script, env=env)  # fmt: skip
    assert code == 0, err
    assert [c["subject"] for c in _json(out)["culprits"]] == ["uncommitted patch"]


@pytest.mark.slow
def test_a_refusal_says_what_bisect_noted(here: Incident) -> None:
    """The lock's saved caches damaged: GOOD cannot have its warm cache, so GOOD and BAD
    measure alike. The refusal is the one line said; it carries why (it said only "measure
    alike", while diff named the cache critical)."""
    archive = here.lock.with_name("train.envguard-caches.tar.gz")
    saved = archive.read_bytes()
    try:
        archive.write_bytes(saved[: len(saved) // 2])
        code, _, err = here.bisect(*METRIC, slow="cache")
    finally:
        archive.write_bytes(saved)
    assert code == 2
    (line,) = err.strip().splitlines()
    assert line.startswith("error: no regression to bisect: GOOD 4.3 and BAD 4.3 Ktok/s")
    assert "the lock's saved caches cannot be unpacked for the trials" in line


def test_exit_statuses_read_as_such_and_one_move_is_named() -> None:
    """Where exit statuses decide, the culprit's effect reads as GOOD and BAD do ("exit 0 →
    fails", not "0 → 1"); BAD of one move is that move, not "all 1 move"."""
    from envguard.bisect.moves import Move
    from envguard.output.human import Human
    from envguard.results.bisect import BisectDone, Culprit, TrialRow

    move = Move(kind="packages", subject="addon", old="absent", new="1.0", members=("addon",))
    done = BisectDone(
        lock="l.toml", venv=".venv", repo=".", command=("./check.sh",), metric="",
        direction="", unit="", runs=1, tolerance=0.25, good=0.0, bad=1.0, moves=(move,),
        trials=(TrialRow(index=1, applied=(), values=(0.0,), value=0.0, verdict="good",
                         seconds=0.1, build_seconds=0),
                TrialRow(index=2, applied=(move,), values=(1.0,), value=1.0, verdict="bad",
                         seconds=0.1, build_seconds=0)),
        culprits=(Culprit(move=move, alone=1.0, fix=()),),
    )  # fmt: skip
    screen = Human().format(done)
    assert "culprit   addon absent → 1.0: exit 0 → fails" in screen
    assert "    2  addon (BAD)" in screen and "all 1 move" not in screen
    # an exit status is what it is: one run decides, and the screen promises no more
    assert "exit status 0 is good; 1 run a trial\n" in screen


@pytest.mark.slow
def test_a_project_installed_editable_is_installed_from_the_trials_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``uv pip install -e .`` of a src layout, the usual ML project: the venv's .pth names
    the working tree's src/, so every trial imported BAD's patched code and GOOD and BAD
    measured alike. A trial installs the project from its own copy."""
    project = in_tree_project("speedy", on_path='os.path.join(here, "src")')
    root = committed(tmp_path / "proj", {
        **project, ".gitignore": ".venv/\n", "src/speedy/__init__.py": "SPEED = 10\n",
        "bench.py": "import speedy\nprint('throughput:', speedy.SPEED)\n",
    })  # fmt: skip
    venv = make_venv(root / ".venv")
    subprocess.run([uv_bin(), "pip", "install", "-q", "--offline", "--no-index", "--python",
                    str(venv / "bin" / "python"), "-e", str(root)], check=True)  # fmt: skip
    env: dict[str, str | None] = {
        "VIRTUAL_ENV": str(venv), "ENVGUARD_CACHE_DIR": str(tmp_path / "eg-cache"),
        "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"), "NO_COLOR": "1",
    }  # fmt: skip
    monkeypatch.chdir(root)
    code, _, err = invoke("snapshot", "-q", env=env)
    assert code == 0, err
    git(root, "add", "lockfiles")
    git(root, "commit", "-q", "-m", "lock")
    (root / "src" / "speedy" / "__init__.py").write_text("SPEED = 4\n")
    code, out, err = invoke("bisect", "--offline", *METRIC, "--json", "--", "python",
                            "bench.py", env=env)  # fmt: skip
    assert code == 0, err
    result = _json(out)
    assert (result["good"], result["bad"]) == (10.0, 4.0)
    assert [c["subject"] for c in result["culprits"]] == ["uncommitted patch"]


@pytest.mark.slow
def test_a_user_git_config_with_autocrlf_changes_nothing(here: Incident, tmp_path: Path) -> None:
    """core.autocrlf=true in the user's global config: a trial's worktree came out CRLF, the
    patch (diffed with autocrlf off) did not apply, and BAD "cannot be built"."""
    config = tmp_path / "gitconfig"
    config.write_text("[core]\n\tautocrlf = true\n")
    code, out, err = here.bisect(*METRIC, "--json", slow="patch",
                                 env={"GIT_CONFIG_GLOBAL": str(config)})  # fmt: skip
    assert code == 0, err
    assert [c["subject"] for c in _json(out)["culprits"]] == ["uncommitted patch"]


@pytest.mark.slow
def test_a_second_fact_that_costs_it_alone_is_said(here: Incident) -> None:
    """speedlib 2.0 and CUDA_LAUNCH_BLOCKING each cost the whole gap: the search names the
    first; BAD with it put back, tried last, is still slow, and the screen says so (putting
    speedlib back alone would not bring the throughput back)."""
    code, out, err = here.bisect(*METRIC, slow="speedlib|env")
    assert code == 0, err
    said = " ".join(out.split())
    assert "culprit speedlib 1.0 → 2.0: 21.5 → 4.3 Ktok/s" in said
    assert ("BAD with speedlib put back still measures 4.3 Ktok/s: another drifted fact costs "
            "it too; put speedlib back and bisect again") in said  # fmt: skip


@pytest.mark.slow
def test_files_git_ignores_are_said_and_found_by_absolute_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """data/ ignored by git is in no trial's copy: by a relative path GOOD breaks, and the
    refusal says why; by its absolute path (which names nothing in the copy) every trial reads
    the one there is, and the patch is found."""
    bench = ("import sys, model\nrate = float(open(sys.argv[1]).read())\n"
             "print('throughput:', rate * (0.2 if model.SLOW else 1))\n")  # fmt: skip
    root = committed(tmp_path / "proj", {".gitignore": "data/\n", "bench.py": bench,
                                         "model.py": "SLOW = False\n"})  # fmt: skip
    (root / "data").mkdir()
    (root / "data" / "shard0").write_text("21.5")
    venv = make_venv(root / ".venv")
    env: dict[str, str | None] = {
        "VIRTUAL_ENV": str(venv), "ENVGUARD_CACHE_DIR": str(tmp_path / "eg-cache"),
        "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"), "NO_COLOR": "1",
    }  # fmt: skip
    monkeypatch.chdir(root)
    assert invoke("snapshot", "-q", env=env)[0] == 0
    git(root, "add", "lockfiles")
    git(root, "commit", "-q", "-m", "lock")
    (root / "model.py").write_text("SLOW = True\n")
    code, _, err = invoke("bisect", "--offline", *METRIC, "--", "python", "bench.py",
                          "data/shard0", env=env)  # fmt: skip
    assert code == 2 and "GOOD breaks the command" in err
    # the venv, ignored by its own .gitignore (uv writes "*" there), is no data of the user's
    assert "error: GOOD breaks the command" in err and ".venv" not in err.split("(", 2)[2]
    assert "data/: ignored by git, so not in the trials' copies of the repository" in err
    code, out, err = invoke("bisect", "--offline", *METRIC, "--json", "--", "python",
                            "bench.py", str(root / "data" / "shard0"), env=env)  # fmt: skip
    assert code == 0, err
    assert [c["subject"] for c in _json(out)["culprits"]] == ["uncommitted patch"]


@pytest.mark.slow
def test_what_a_killed_bisect_left_is_collected_by_the_next(here: Incident) -> None:
    """kill -9 leaves the work folder (and, with an envguard that made worktrees, its
    worktrees registered in the user's repository: ``git worktree list`` shows them): the
    next bisect removes a folder whose owner no longer runs, and git forgets its worktrees;
    one whose owner runs stays."""
    base = Path(str(here.env["ENVGUARD_CACHE_DIR"])) / "bisect"
    dead, alive = base / "run-killed", base / "run-running"
    for folder, owner in ((dead, "999999999 1"), (alive, f"{os.getpid()} 0")):
        folder.mkdir(parents=True)
        (folder / "owner").write_text(owner)
    from envguard.bisect.trials import _started

    (alive / "owner").write_text(f"{os.getpid()} {_started(os.getpid())}\n")
    git(here.root, "worktree", "add", "--detach", "-q", str(dead / "trial-02" / "code"), "HEAD")
    code, _, err = here.bisect(*METRIC)
    assert code == 0, err
    assert not dead.exists() and alive.is_dir()
    assert git(here.root, "worktree", "list", "--porcelain").count("worktree ") == 1


DISCARDS_SEEN = """\
import os, pathlib
aside = pathlib.Path.cwd().parents[1] / ".discarded"  # trial-NN/code -> the work folder
left = sorted(p.name for p in aside.glob("*")) if aside.is_dir() else []
with open(os.environ["BENCH_LOG"], "a") as log:
    log.write(" ".join(left) + "\\n")
print("throughput:", 4.3 if os.environ.get("CUDA_LAUNCH_BLOCKING") == "1" else 21.5)
"""


@pytest.mark.slow
def test_no_trial_folder_is_being_removed_while_a_trial_runs(
    here: Incident, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A finished trial's venv goes on a thread while the next one builds, and is gone
    before that one's command starts: removing thousands of files takes a core from what is
    measured (#40). The removal is made slow here, so that one still under way is seen."""
    from envguard.bisect import trials

    real = shutil.rmtree

    def slow_rmtree(path: object, *args: object, **kwargs: object) -> None:
        if ".discarded" in str(path):  # a trial's folder, as the sweeper removes it
            time.sleep(0.15)
        real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(trials.shutil, "rmtree", slow_rmtree)
    script, log = tmp_path / "sees.py", tmp_path / "seen.log"
    script.write_text(DISCARDS_SEEN)
    env = {**here.env, "BENCH_SLOW_WHEN": "env", "BENCH_LOG": str(log)}
    code, out, err = invoke("bisect", *here.indexes(), *METRIC, "--", sys.executable, str(script),
                            env=env)  # fmt: skip
    assert code == 0, err
    seen = log.read_text().splitlines()
    assert len(seen) >= 3 and all(line == "" for line in seen), seen
    assert "CUDA_LAUNCH_BLOCKING" in out.split("\n")[0]  # and the culprit is still found


EXT_BENCH = """\
import os, pathlib
ext = pathlib.Path(os.environ["TORCH_EXTENSIONS_DIR"])
built = (ext / "fused" / "fused.so").is_file()  # as torch.utils.cpp_extension.load finds it
if not built:  # building it anew, into the folder the variable names
    (ext / "fused").mkdir(parents=True, exist_ok=True)
    (ext / "fused" / "fused.so").write_text("built in a run")
print("throughput:", 21.5 if built else 4.3)
"""


@pytest.mark.slow
def test_a_custom_cache_a_variable_names_is_bisected_in_copies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """torch's JIT-built extensions (``TORCH_EXTENSIONS_DIR``, a custom cache: ``snapshot
    --cache-dir``) cleaned away, beside a harmless variable: bisect names the cache, as
    Inductor's, each trial given its own copy through the variable; the user's folder stays
    gone (every run built into a copy), and the fix allows the folder to restore --cache."""
    house = tmp_path / "house"
    build_wheel(house, "speedlib", "1.0")
    ext = tmp_path / "scratch" / "ext"
    (ext / "fused").mkdir(parents=True)
    (ext / "fused" / "fused.so").write_text("the extension, built")
    (tmp_path / "bench.py").write_text(EXT_BENCH)
    venv = make_venv(tmp_path / ".venv")
    uv_install(venv, house, "speedlib==1.0")
    lock = tmp_path / "train.envguard.toml"
    env: dict[str, str | None] = {
        "VIRTUAL_ENV": str(venv), "TORCH_EXTENSIONS_DIR": str(ext), "NCCL_DEBUG": None,
        "ENVGUARD_CACHE_DIR": str(tmp_path / "eg-cache"), "NO_COLOR": "1",
    }  # fmt: skip
    monkeypatch.chdir(tmp_path)
    code, _, err = invoke("snapshot", "-q", "--cache-dir", str(ext), "--no-default-caches",
                          "--save-cache", "-o", str(lock), env=env)  # fmt: skip
    assert code == 0, err
    shutil.rmtree(ext)  # "cleaned up"
    env["NCCL_DEBUG"] = "INFO"
    code, out, err = invoke("bisect", str(lock), "--find-links", str(house), "--offline",
                            *METRIC, "--json", "--", "python", "bench.py", env=env)  # fmt: skip
    assert code == 0, err
    result = _json(out)
    assert [m["subject"] for m in result["moves"]] == [f"cache {ext}", "NCCL_DEBUG"]
    (culprit,) = result["culprits"]
    assert culprit["subject"] == f"cache {ext}"
    assert culprit["fix"] == f"envguard restore {lock} --cache --cache-dir {ext}"
    assert (result["good"], result["bad"]) == (21.5, 4.3)
    assert not ext.exists()  # no run built into the user's folder, and nothing to sweep
    assert not any("your cache" in n for n in result["notes"])
    code, _, err = invoke("restore", str(lock), "--cache", "--cache-dir", str(ext), env=env)
    assert code == 0, err  # the fix as said puts it back
    assert (ext / "fused" / "fused.so").read_text() == "the extension, built"


FIXED_BENCH = """\
import pathlib
ext = pathlib.Path({folder!r})  # the code names it: no variable does
built = (ext / "fused" / "fused.so").is_file()
(ext / "fused").mkdir(parents=True, exist_ok=True)
(ext / "fused" / "fused.so").write_text("built in a run")  # as a JIT build writes it back
print("throughput:", 21.5 if built else 4.3)
"""


@pytest.mark.slow
def test_a_custom_cache_only_the_code_names_is_stood_in_for_where_allowed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A custom cache whose folder only the code names: without --cache-dir bisect says how
    to let it in, and moves nothing; with it, each run sets the user's folder aside and puts
    the trial's copy in its place, and the cache is named. The user's folder is byte for
    byte as it was, though every run wrote into the folder it read."""
    house = tmp_path / "house"
    build_wheel(house, "speedlib", "1.0")
    ext = tmp_path / "scratch" / "aot"
    (ext / "fused").mkdir(parents=True)
    (ext / "fused" / "fused.so").write_text("the extension, built")
    (tmp_path / "bench.py").write_text(FIXED_BENCH.format(folder=str(ext)))
    venv = make_venv(tmp_path / ".venv")
    uv_install(venv, house, "speedlib==1.0")
    lock = tmp_path / "train.envguard.toml"
    env: dict[str, str | None] = {
        "VIRTUAL_ENV": str(venv), "NCCL_DEBUG": None, "NO_COLOR": "1",
        "ENVGUARD_CACHE_DIR": str(tmp_path / "eg-cache"),
    }  # fmt: skip
    monkeypatch.chdir(tmp_path)
    code, _, err = invoke("snapshot", "-q", "--cache-dir", str(ext), "--no-default-caches",
                          "--save-cache", "-o", str(lock), env=env)  # fmt: skip
    assert code == 0, err
    shutil.rmtree(ext / "fused")  # "cleaned up": the folder stays, with another file
    (ext / "notes.txt").write_text("the user's own")
    before = _tree(ext)
    env["NCCL_DEBUG"] = "INFO"
    args = ("bisect", str(lock), "--find-links", str(house), "--offline", *METRIC, "--json")
    code, out, err = invoke(*args, "--", "python", "bench.py", env=env)
    assert code == 1 or code == 2, (out, err)  # the cache is no move: no culprit
    said = err if code == 2 else " ".join(_json(out)["notes"])
    assert f"envguard bisect --cache-dir {ext}" in said
    shutil.rmtree(ext / "fused")  # what those runs built there, reading it as it is
    assert _tree(ext) == before
    code, out, err = invoke(*args, "--cache-dir", str(ext), "--", "python", "bench.py", env=env)
    assert code == 0, err
    result = _json(out)
    assert [m["subject"] for m in result["moves"]] == [f"cache {ext}", "NCCL_DEBUG"]
    assert [c["subject"] for c in result["culprits"]] == [f"cache {ext}"]
    assert (result["good"], result["bad"]) == (21.5, 4.3)
    assert _tree(ext) == before  # every run's writes went with its copy
    assert sorted(p.name for p in ext.parent.iterdir()) == ["aot"]  # nothing left beside it
    assert not list((tmp_path / "eg-cache" / "bisect").glob("aside-*"))
