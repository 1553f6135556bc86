"""A benchmark measures the venv it is given (#48 items 1 and 2): the lock's command written
as users write it, by the interpreter's path (``.venv/bin/python bench.py``, its absolute
path, through a linked venv folder), runs each copy's interpreter in bisect's trials and in
preflight's and run's pricing copies, never the live venv's.

One project per spelling, laid out as users lay it out: a git repository whose benchmark
prints its throughput (21.5 Ktok/s with speedlib 1.0, 4.3 with 2.0), a uv venv, the lock
committed under ``lockfiles/`` with its ``[bench]``. The live venv's ``sitecustomize``
writes a line into a marker file each time its interpreter starts the benchmark: after
``snapshot --bench`` (which runs in the live venv by design) no run may add one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from envguard.bisect import command as commands
from envguard.demo.repo import committed
from envguard.demo.wheels import build_wheel
from envguard.probes.venv import locate
from tests.conftest import git, make_venv, uv_install
from tests.project import invoke
from tests.test_bisect_bench import METRIC

BENCH = """\
import speedlib
print("throughput:", {"1.0": 21.5, "2.0": 4.3}[speedlib.__version__])
"""
MARKER = """\
import os, sys
if sys.argv and sys.argv[0].endswith("bench.py") and os.environ.get("LIVE_MARKER"):
    with open(os.environ["LIVE_MARKER"], "a") as f:
        f.write(sys.prefix + "\\n")
"""


@dataclass
class Project:
    root: Path
    venv: Path
    house: Path
    marker: Path
    env: dict[str, str | None]
    command: tuple[str, ...]

    def live_runs(self) -> int:
        return len(self.marker.read_text().splitlines()) if self.marker.exists() else 0

    def install(self, version: str) -> None:
        uv_install(self.venv, self.house, f"speedlib=={version}")

    def price(self, *args: str) -> tuple[int, str, str]:
        return invoke(*args, "--", "uv", "pip", "install", "--offline", "--find-links",
                      str(self.house), "speedlib==2.0", env=self.env)  # fmt: skip


def _spelled(root: Path, how: str) -> tuple[str, ...]:
    if how == "absolute":
        return (str(root / ".venv" / "bin" / "python"), "bench.py")
    return (".venv/bin/python", "bench.py")  # relative; "linked": .venv is a link


@pytest.fixture(scope="module")
def house(tmp_path_factory: pytest.TempPathFactory) -> Path:
    house = tmp_path_factory.mktemp("bench-venv-house")
    for version in ("1.0", "2.0"):
        build_wheel(house, "speedlib", version,
                    files={"speedlib/__init__.py": f'__version__ = "{version}"\n'})  # fmt: skip
    return house


def _project(base: Path, house: Path, how: str, bench: str = "bench.py") -> Project:
    # a CI script of the team's, the venv named whole
    files = {
        "bench.py": BENCH,
        "bench.sh": f"#!/bin/sh\nexec {base}/train/.venv/bin/python bench.py\n",
    }
    root = committed(base / "train", files)
    (root / "bench.sh").chmod(0o755)
    if how == "linked":  # the venv lives elsewhere; the project's .venv links to it
        venv = make_venv(base / "venvs" / "train")
        (root / ".venv").symlink_to(venv)
    else:
        venv = make_venv(root / ".venv")
    uv_install(venv, house, "speedlib==1.0")
    (locate(venv).site_packages / "sitecustomize.py").write_text(MARKER)
    marker = base / "live-runs"
    env: dict[str, str | None] = {
        "VIRTUAL_ENV": str(root / ".venv"), "LIVE_MARKER": str(marker),
        # the live venv activated, as the user's shell has it
        "PATH": f"{root / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "TORCHINDUCTOR_CACHE_DIR": str(base / "inductor"), "TRITON_CACHE_DIR": str(base / "t"),
        "ENVGUARD_CACHE_DIR": str(base / "eg"), "NO_COLOR": "1", "COLUMNS": "80",
    }  # fmt: skip
    command = ("./bench.sh",) if bench == "bench.sh" else _spelled(root, how)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        code, _, err = invoke("snapshot", "-q", "--bench", *METRIC, "--runs", "3", "--",
                              *command, env=env)  # fmt: skip
        assert code == 0, err
    git(root, "add", "lockfiles")
    git(root, "commit", "-q", "-m", "lock, with its benchmark")
    return Project(root=root, venv=venv, house=house, marker=marker, env=env, command=command)


@pytest.fixture(scope="module", params=["relative", "absolute", "linked"])
def spelled(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, house: Path
) -> Iterator[Project]:
    base = tmp_path_factory.mktemp(f"bench-venv-{request.param}")
    yield _project(base, house, request.param)


@pytest.fixture
def here(spelled: Project, monkeypatch: pytest.MonkeyPatch) -> Project:
    monkeypatch.chdir(spelled.root)
    return spelled


def _lock(p: Project) -> dict:  # type: ignore[type-arg]
    import tomllib

    with open(p.root / "lockfiles" / "train.envguard.toml", "rb") as f:
        return tomllib.load(f)


@pytest.mark.slow
def test_snapshot_keeps_the_words_and_pricing_and_bisect_run_each_copy(here: Project) -> None:
    lock = _lock(here)
    assert tuple(lock["bench"]["command"]) == here.command  # as the user wrote it
    assert lock["bench"]["values"] == [21.5, 21.5, 21.5]
    assert here.live_runs() == 3  # snapshot measures the live venv, by design
    # preflight prices the costly install at its cost, never running the live venv
    code, out, err = here.price("preflight", "--bench", "--json", "--find-links",
                                str(here.house), "--offline")  # fmt: skip
    assert code == 1, (out, err)
    price = json.loads(out)["result"]["price"]
    assert price["verdict"] == "cost", price
    assert price["before"][0] == 21.5 and price["after"][0] == 4.3
    assert price["notes"] == []
    # run --max-cost decides through the same copies: refused above the limit
    code, out, err = here.price("run", "--max-cost", "5", "--find-links", str(here.house),
                                "--offline")  # fmt: skip
    assert code == 1, (out, err)
    assert "Costs: this install would cost 21.5 → 4.3 Ktok/s (-80%)" in " ".join(
        (out + err).split()
    )
    assert here.live_runs() == 3
    # the install lands; plain bisect (the lock's own benchmark) names it
    here.install("2.0")
    try:
        code, out, err = invoke("bisect", "--json", "--find-links", str(here.house),
                                "--offline", env=here.env)  # fmt: skip
    finally:
        here.install("1.0")
    result = json.loads(out)["result"]
    assert code == 0, result
    assert [c["subject"] for c in result["culprits"]] == ["speedlib"], result
    assert result["good"] == 21.5 and result["bad"] == 4.3
    assert here.live_runs() == 3  # no run of the benchmark started the live interpreter


@pytest.fixture(scope="module")
def wrapped(tmp_path_factory: pytest.TempPathFactory, house: Path) -> Project:
    return _project(tmp_path_factory.mktemp("bench-venv-wrapped"), house, "relative", "bench.sh")


@pytest.mark.slow
def test_a_wrapper_that_reaches_the_live_venv_is_named_as_the_cause(
    wrapped: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(wrapped.root)
    wrapped.install("2.0")
    try:
        code, out, err = invoke("bisect", "--find-links", str(wrapped.house), "--offline",
                                env=wrapped.env)  # fmt: skip
    finally:
        wrapped.install("1.0")
    assert code == 1, (out, err)
    text = " ".join(out.split())
    # the wrapper runs as it is, and the screen says so before any trial
    assert "`./bench.sh` runs as it is: envguard cannot read into it" in text
    # GOOD, rebuilt, measures BAD's 4.3: the cause envguard can check comes first
    assert "GOOD measures 4.3 Ktok/s over" in text
    assert "every trial may measure the live venv, not its own: ./bench.sh names " in text
    assert f"{wrapped.root}/.venv/bin/python, in the live venv" in text.replace("/ ", "/")
    assert "another process on the cores" not in text
    assert all(len(line) <= 80 for line in out.splitlines() if "/.venv/" not in line), out
    # given on the command line, GOOD is held to no record: alike as BAD, and said why
    wrapped.install("2.0")
    try:
        code, out, err = invoke("bisect", "--find-links", str(wrapped.house), "--offline",
                                *METRIC, "--", "./bench.sh", env=wrapped.env)  # fmt: skip
    finally:
        wrapped.install("1.0")
    text = " ".join(out.split())
    assert "every trial may measure the live venv, not its own: ./bench.sh names " in text, out


# -- the words themselves ------------------------------------------------------------------


@pytest.fixture
def live(tmp_path: Path) -> commands.Live:
    venv = make_venv(tmp_path / "venvs" / "train")
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / ".venv").symlink_to(venv)
    return commands.Live.of([venv], tmp_path / "repo")


def test_each_spelling_of_the_live_interpreter_is_the_copys(
    live: commands.Live, tmp_path: Path
) -> None:
    copy = tmp_path / "copy"
    venv = live.venvs[0]
    for word in (".venv/bin/python", "./.venv/bin/python3", str(venv / "bin" / "python"),
                 str(tmp_path / "repo" / ".venv" / "bin" / "torchrun"),
                 "../repo/.venv/bin/accelerate"):  # fmt: skip
        got = commands.in_copy((word, "bench.py"), live, copy)
        assert got == (str(copy / "bin" / Path(word).name), "bench.py"), word
    flagged = commands.in_copy(("x", f"--python={venv}/bin/python"), live, copy)
    assert flagged == ("x", f"--python={copy}/bin/python")
    # a word elsewhere, or in the venv but not its bin, is left as it is
    kept = (("python", "bench.py"), ("/usr/bin/python3", "b.py"),
            (".venv/lib/python3.11/site-packages/x.py",), ("bench.py", ".venv/bin"))  # fmt: skip
    for argv in kept:
        assert commands.in_copy(argv, live, copy) == argv


def test_uv_run_runs_the_copy_as_it_is(live: commands.Live, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    assert commands.in_copy(("uv", "run", "python", "b.py"), live, copy) == (
        "uv", "run", "--active", "--no-sync", "python", "b.py",
    )  # fmt: skip
    assert commands.in_copy(("/opt/uv", "run", "--no-sync", "t.py"), live, copy) == (
        "/opt/uv", "run", "--active", "--no-sync", "t.py",
    )  # fmt: skip
    assert commands.in_copy(("python", "run"), live, copy) == ("python", "run")


def test_a_wrapper_is_one_envguard_cannot_read_into(live: commands.Live) -> None:
    assert commands.opaque(("./bench.sh",), live) == "./bench.sh"
    assert commands.opaque(("make", "bench"), live) == "make"
    assert commands.opaque(("bash", "-c", "python b.py"), live) == "bash"
    readable = (("python", "b.py"), ("env", "A=1", "python3", "b.py"), ("uv", "run", "b.py"),
                (".venv/bin/python", "b.py"), ("taskset", "-c", "0", "python", "b.py"))  # fmt: skip
    for argv in readable:
        assert commands.opaque(argv, live) == "", argv


def test_what_reaches_the_live_venv_is_named(live: commands.Live) -> None:
    venv = live.venvs[0]
    site = f"{venv}/lib/python3.11/site-packages"
    said = commands.reaching(("bash", "-c", f"{venv}/bin/python b.py"), [{}], live)
    assert said == [f"the command names {venv}/bin/python, in the live venv"]
    said = commands.reaching(("python", "b.py"), [{"PYTHONPATH": f"/src:{site}"},
                             {"LD_LIBRARY_PATH": f"{site}/nvidia/lib"}], live)  # fmt: skip
    assert said == [f"PYTHONPATH has {site}, in the live venv",
                    f"LD_LIBRARY_PATH has {site}/nvidia/lib, in the live venv"]  # fmt: skip
    # a word rebased into the copy reaches nothing
    assert commands.reaching((".venv/bin/python", "b.py"), [{"PYTHONPATH": "/src"}], live) == []


def test_path_loses_the_live_venvs_bin(live: commands.Live) -> None:
    venv = live.venvs[0]
    value = os.pathsep.join([f"{venv}/bin", "/usr/bin", ".venv/bin", "/opt/x/bin"])
    assert commands.off_path(value, live) == os.pathsep.join(["/usr/bin", "/opt/x/bin"])
