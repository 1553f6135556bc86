"""``snapshot --bench`` (#40): the known-good state's benchmark, measured where the snapshot
is taken and recorded in the lock's ``[bench]`` table; a teammate's ``[bench]`` is untrusted
input, checked where the lock is read.

The project is laid out as users lay it out: a git repository with its benchmark, a venv made
by uv inside it, the lock under ``lockfiles/``; the benchmark prints its throughput as a
training log does, one value a run from a file the test writes, so the figures are known.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envguard import lockfile
from envguard.demo.repo import committed
from envguard.errors import LockfileError
from envguard.model import Benchmark
from tests.conftest import make_venv
from tests.project import invoke

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

BENCH = """\
import os, pathlib, sys
values = pathlib.Path(os.environ["BENCH_VALUES"])
ran = pathlib.Path(str(values) + ".ran")
n = len(ran.read_text().splitlines()) if ran.exists() else 0
with ran.open("a") as f:
    f.write(f"{sys.prefix} {os.getcwd()}\\n")
print("step 1 throughput: 9.9")
print("throughput:", values.read_text().split()[n])
"""
METRIC = ("--metric", r"throughput: ([0-9.]+)", "--higher-is-better", "--unit", "Ktok/s")


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = committed(tmp_path_factory.mktemp("bench") / "train",
                     {"bench.py": BENCH, "src/run.py": "# the trainer\n"})  # fmt: skip
    make_venv(root / ".venv")
    return root


def _values(tmp_path: Path, *values: float) -> dict[str, str | None]:
    file = tmp_path / "values"
    file.write_text(" ".join(map(str, values)))
    return {"BENCH_VALUES": str(file), "ENVGUARD_CACHE_DIR": str(tmp_path / "eg"),
            "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"), "VIRTUAL_ENV": None,
            "TRITON_CACHE_DIR": str(tmp_path / "triton"), "COLUMNS": "80"}  # fmt: skip


def _snapshot(
    project: Path, tmp_path: Path, *args: str, values: tuple[float, ...] = (21.4, 21.5, 21.7)
) -> tuple[int, str, str, Path]:
    lock = tmp_path / "train.envguard.toml"
    code, out, err = invoke("snapshot", "--venv", str(project / ".venv"), "-o", str(lock),
                            *args, env=_values(tmp_path, *values))  # fmt: skip
    return code, out, err, lock


def test_the_benchmark_is_measured_in_the_venv_and_recorded(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project / "src")  # run from a folder of the repository: recorded
    code, out, err, lock = _snapshot(project, tmp_path, "--bench", *METRIC, "--runs", "3",
                                     "--", "python", "../bench.py")  # fmt: skip
    assert code == 0, err
    bench = lockfile.read(lock).bench
    assert bench == Benchmark(
        command=("python", "../bench.py"), cwd="src", metric=r"throughput: ([0-9.]+)",
        direction="higher", unit="Ktok/s", runs=3, values=(21.4, 21.5, 21.7), median=21.5,
        spread=pytest.approx(0.3),  # type: ignore[arg-type]
    )  # fmt: skip
    # each run the venv's python (as activated), where the user ran it
    ran = (tmp_path / "values.ran").read_text().splitlines()
    assert ran == [f"{(project / '.venv').resolve()} {(project / 'src').resolve()}"] * 3
    assert lock.read_text().splitlines()[1] == "schema = 3"  # under envguard's seal line
    lines = out.splitlines()  # at 80 columns; a long path of this tmp folder is never cut
    at = next(i for i, line in enumerate(lines) if line.startswith("  benchmark"))
    assert lines[at : at + 2] == [
        "  benchmark       21.5 Ktok/s (3 runs, 21.4-21.7), higher is better",
        "                  `python ../bench.py` in src",
    ]


def test_json_carries_the_benchmark(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project)
    values = (3.0, 1.0, 2.0, 9.0, 2.5)
    code, out, err, _ = _snapshot(project, tmp_path, "--json", "--bench", *METRIC,
                                  "--", "python", "bench.py", values=values)  # fmt: skip
    assert code == 0, err
    bench = json.loads(out)["result"]["bench"]
    # five runs: the farthest from the median (9.0) is left out of the spread
    assert (bench["runs"], bench["median"], bench["spread"]) == (5, 2.5, 2.0)
    assert bench["values"] == [3.0, 1.0, 2.0, 9.0, 2.5] and bench["cwd"] == ""


def test_without_bench_the_lock_stays_readable_by_the_last_release(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project)
    code, _, err, lock = _snapshot(project, tmp_path)
    assert code == 0, err
    text = lock.read_text()
    # the seal's lines are comments: an older envguard reads the lock as before
    assert text.splitlines()[1] == "schema = 2" and "[bench]" not in text
    assert all(line.startswith("# envguard ") for line in text.splitlines()[::-1][:1])
    assert lockfile.read(lock).bench is None


def test_a_failing_benchmark_writes_no_lock(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project)
    for args, said in [
        (("--", "python", "-c", "raise SystemExit('no GPU here')"),
         "the benchmark fails here (run 1 exited 1: no GPU here)"),
        ((*METRIC, "--", "python", "-c", "print('loss 2.3')"),
         "the benchmark's run 1 measured nothing: printed no match for --metric"),
        (("--", "no-such-benchmark"), "the benchmark cannot run: no-such-benchmark: not found"),
    ]:  # fmt: skip
        code, out, err, lock = _snapshot(project, tmp_path, "--bench", *args)
        assert code == 2 and out == "", (args, out)
        assert err.startswith(f"error: {said}") and len(err.splitlines()) == 1, err
        assert not lock.exists()


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--runs", "3"), "--runs goes with --bench"),
        (("--metric", "t ([0-9]+)"), "--metric goes with --bench"),
        (("--", "python", "bench.py"), "-- COMMAND goes with --bench"),
        (("--bench",), "--bench needs the benchmark after --"),
        (("--bench", "--higher-is-better", "--", "true"), "need --metric"),
        (("--bench", "--metric", "t [0-9]+", "--", "true"), "has no group for the number"),
    ],
)
def test_bench_options_that_cannot_be_are_one_line(
    project: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    args: tuple[str, ...],
    said: str,
) -> None:
    monkeypatch.chdir(project)
    code, _, err, lock = _snapshot(project, tmp_path, *args)
    assert code == 2 and said in err and "Traceback" not in err, err
    assert not lock.exists()


def test_a_secret_in_the_benchmark_command_never_reaches_the_lock(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project)
    token = "hf_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZ012345"  # a Hugging Face token's shape
    code, out, err, lock = _snapshot(project, tmp_path, "--bench", *METRIC, "--runs", "1",
                                     "--", "python", "bench.py", f"--hf-token={token}")  # fmt: skip
    assert code == 0, err
    assert token not in lock.read_text() and token not in out
    assert "hf-token" in " ".join(lockfile.read(lock).bench.command)  # type: ignore[union-attr]


# --- a teammate's [bench], read -------------------------------------------------------------

GOOD_BENCH = {
    "command": ["python", "bench.py"], "cwd": "", "metric": "throughput: ([0-9.]+)",
    "direction": "higher", "unit": "Ktok/s", "runs": 3, "values": [21.4, 21.5, 21.7],
    "median": 21.5, "spread": 0.3,
}  # fmt: skip


def _lock_with(tmp_path: Path, project: Path, bench: dict[str, object], schema: int = 3) -> Path:
    """The project's own lock, its [bench] replaced by ``bench``."""
    import tomli_w

    lock = tmp_path / "plain.envguard.toml"
    code, _, err = invoke("snapshot", "-q", "--venv", str(project / ".venv"), "-o", str(lock),
                          env=_values(tmp_path))  # fmt: skip
    assert code == 0, err
    doc = tomllib.loads(lock.read_text())
    doc["schema"], doc["bench"] = schema, bench
    lock.write_text(tomli_w.dumps(doc))
    return lock


def test_a_well_formed_bench_reads(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project)
    lock = _lock_with(tmp_path, project, GOOD_BENCH)
    assert lockfile.read(lock).bench == Benchmark.from_dict(GOOD_BENCH)


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("command", [], "bench.command: empty"),
        ("command", ["python", "b.py\n--evil"], "bench.command[1]: "),
        ("command", "python bench.py", "bench.command: expected a list"),
        ("cwd", "../outside", "bench.cwd: "),
        ("cwd", "/etc", "bench.cwd: "),
        ("metric", "throughput: [0-9.]+", "has no group for the number"),
        ("metric", "throughput: ([0-9.]+", "is not a regular expression"),
        ("direction", "sideways", "bench.direction: "),
        ("unit", "Ktok/s\x1b[31m", "bench.unit: "),
        ("runs", 4, "bench.runs: 4 runs with 3 values"),
        ("runs", 0, "bench.runs: "),
        ("values", [21.4, float("nan"), 21.7], "finite numbers"),
        ("values", [21.4, "fast", 21.7], "bench.values[1]: expected a number"),
        ("median", 99.0, "bench.median: 99.0 is outside its own values"),
        ("spread", -1.0, "finite numbers"),
        ("shell", True, "bench.shell: unknown field"),
    ],
)
def test_a_hostile_bench_is_refused_where_the_lock_is_read(
    project: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    field: str,
    value: object,
    said: str,
) -> None:
    monkeypatch.chdir(project)
    lock = _lock_with(tmp_path, project, {**GOOD_BENCH, field: value})
    code, out, err = invoke("diff", str(lock), "--venv", str(project / ".venv"),
                            env=_values(tmp_path))  # fmt: skip
    assert code == 2 and out == "", out
    assert said in err and len(err.splitlines()) == 1 and "Traceback" not in err, err


def test_a_direction_without_a_metric_is_refused(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project)
    lock = _lock_with(tmp_path, project, {**GOOD_BENCH, "metric": ""})
    with pytest.raises(LockfileError, match=r"bench\.direction: .*with a metric"):
        lockfile.read(lock)


def test_a_bench_in_a_schema_2_lock_is_refused(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project)
    lock = _lock_with(tmp_path, project, GOOD_BENCH, schema=2)
    with pytest.raises(LockfileError, match=r"a \[bench\] table in a schema 2 lock"):
        lockfile.read(lock)


_word = st.text(st.characters(blacklist_characters="\n\r\x00", blacklist_categories=("Cs",)),
                min_size=1, max_size=20)  # fmt: skip
_value = st.floats(min_value=-1e9, max_value=1e9, allow_nan=False)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(command=st.lists(_word, min_size=1, max_size=5),
       values=st.lists(_value, min_size=1, max_size=9),
       unit=st.sampled_from(["", "Ktok/s", "s/step", "GFLOP/s"]))  # fmt: skip
def test_a_recorded_benchmark_round_trips(
    command: list[str], values: list[float], unit: str
) -> None:
    from envguard import benchmark

    request = benchmark.Request(command=tuple(command), metric="t ([0-9.]+)", unit=unit,
                                direction="lower", runs=len(values))  # fmt: skip
    bench = benchmark.record(request, tuple(values), cwd="")
    again = Benchmark.from_dict(bench.to_dict())
    assert again == bench and math.isfinite(again.spread)


def test_the_cwd_outside_the_repository_is_not_recorded(tmp_path: Path) -> None:
    from envguard.benchmark import relative_cwd

    root = tmp_path / "repo"
    (root / "a" / "b").mkdir(parents=True)
    assert relative_cwd(root / "a" / "b", str(root)) == "a/b"
    assert relative_cwd(root, str(root)) == ""
    assert relative_cwd(tmp_path, str(root)) == ""
    assert relative_cwd(root, None) == ""
