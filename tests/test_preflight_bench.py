"""``preflight --bench`` (#40 part 4): an install priced on the lock's benchmark before it
lands, in copies of the venv, the training venv untouched.

One project for the module, laid out as users lay it out: a git repository whose benchmark
prints its throughput (21.5 Ktok/s with speedlib 1.0), a uv venv, the lock committed under
``lockfiles/`` with its ``[bench]``. The installs priced, from a wheelhouse: speedlib 2.0
(slow: 4.3), a harmless new package, speedlib 3.0 (the benchmark breaks on it).
``BENCH_NOISE`` is a variable envguard does not record, so it reaches every run: ``wide``
makes the runs of both sides spread wider than the slowdown.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from envguard import lockfile
from envguard.demo.repo import committed
from envguard.demo.wheels import build_wheel
from envguard.journal import path_for
from tests.conftest import make_venv, uv_bin, uv_install
from tests.project import invoke
from tests.test_bisect_bench import locked_with_bench

BENCH = """\
import itertools, os, pathlib, speedlib
value = {"1.0": 21.5, "2.0": 4.3}[speedlib.__version__]
if os.environ.get("BENCH_NOISE") == "wide":  # runs that spread over 18 in turn
    count = pathlib.Path(os.environ["BENCH_COUNT"])
    n = int(count.read_text()) if count.exists() else 0
    count.write_text(str(n + 1))
    value = (12.0, 30.0, 21.0)[n % 3] - (1.0 if speedlib.__version__ == "2.0" else 0.0)
print("throughput:", value)
"""


@dataclass
class Project:
    root: Path
    venv: Path
    house: Path
    env: dict[str, str | None]

    def preflight(self, *args: str, install: tuple[str, ...]) -> tuple[int, str, str]:
        return invoke("preflight", *args, "--", "uv", "pip", "install", "--offline",
                      "--find-links", str(self.house), *install, env=self.env)  # fmt: skip

    def run(self, *args: str, install: tuple[str, ...]) -> tuple[int, str, str]:
        return invoke("run", *args, "--find-links", str(self.house), "--offline", "--", "uv",
                      "pip", "install", "--offline", "--find-links", str(self.house), *install,
                      env=self.env)  # fmt: skip

    def versions(self) -> str:
        python = str(self.venv / "bin" / "python")
        return subprocess.run([uv_bin(), "pip", "freeze", "--python", python],
                              capture_output=True, text=True, check=True).stdout  # fmt: skip

    def priced(self, *install: str) -> tuple[int, str, str]:
        return self.preflight("--bench", "--find-links", str(self.house), "--offline",
                              install=install)  # fmt: skip


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Project]:
    base = tmp_path_factory.mktemp("preflight-bench")
    house = base / "house"
    for version in ("1.0", "2.0", "3.0"):
        body = 'raise ImportError("speedlib 3.0 needs a GPU")\n' if version == "3.0" else ""
        init = f'{body}__version__ = "{version}"\n'
        build_wheel(house, "speedlib", version, files={"speedlib/__init__.py": init})
    for name in ("tqdmlike", "otherlib"):
        build_wheel(house, name, "1.0", files={f"{name}/__init__.py": ""})
    root = committed(base / "train", {"bench.py": BENCH})
    venv = make_venv(root / ".venv")
    uv_install(venv, house, "speedlib==1.0")
    env: dict[str, str | None] = {
        "VIRTUAL_ENV": str(venv), "TORCHINDUCTOR_CACHE_DIR": str(base / "inductor"),
        "TRITON_CACHE_DIR": str(base / "triton"), "ENVGUARD_CACHE_DIR": str(base / "eg"),
        "BENCH_NOISE": None, "BENCH_COUNT": str(base / "count"), "COLUMNS": "80",
    }  # fmt: skip
    locked_with_bench(root, env)
    yield Project(root=root, venv=venv, house=house, env=env)


@pytest.fixture
def here(project: Project, monkeypatch: pytest.MonkeyPatch) -> Project:
    monkeypatch.chdir(project.root)
    return project


def _state(folder: Path) -> dict[str, str]:
    """Every entry under ``folder``: a file by mode, content and mtime, a link by target."""
    out = {}
    for path in sorted(folder.rglob("*")):
        st = path.lstat()
        if path.is_symlink():
            out[str(path)] = "-> " + os.readlink(path)
        elif path.is_file():
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            out[str(path)] = f"{st.st_mode:o} {digest} {st.st_mtime_ns}"
        else:
            out[str(path)] = f"{st.st_mode:o}"
    return out


def _price(out: str) -> dict:  # type: ignore[type-arg]
    price = json.loads(out)["result"]["price"]
    assert isinstance(price, dict)
    return price


@pytest.mark.slow
def test_a_slowing_install_is_priced_and_the_venv_left_byte_for_byte(here: Project) -> None:
    before = _state(here.venv), _state(here.root / ".git")
    code, out, err = here.priced("speedlib==2.0")
    assert code == 1, err
    assert before == (_state(here.venv), _state(here.root / ".git"))  # nothing written
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("Costs: "))
    assert lines[at] == "Costs: this install would cost 21.5 → 4.3 Ktok/s (-80%)"
    assert lines[at + 1] == "  it moves speedlib 1.0 → 2.0"
    how = " ".join(" ".join(lines[at + 2 :]).split())
    assert how.startswith("measured by `python bench.py` in two rebuilds of the venv, with the "
                          "install and without, in turn (3 runs each; ")  # fmt: skip
    assert how.endswith("s); the training venv untouched")
    assert all(len(line) <= 80 for line in lines), out
    # the forecast said it too: the screen above the price is preflight's own
    assert "speedlib" in " ".join(lines[:at])


@pytest.mark.slow
def test_json_carries_the_price_with_every_run(here: Project) -> None:
    code, out, err = here.preflight("--bench", "--json", "--find-links", str(here.house),
                                    "--offline", install=("speedlib==2.0",))  # fmt: skip
    assert code == 1, err
    price = _price(out)
    assert price["verdict"] == "cost"
    assert price["before"] == [21.5, 21.5, 21.5] and price["after"] == [4.3, 4.3, 4.3]
    assert price["moved"] == [{"name": "speedlib", "old": "1.0", "new": "2.0"}]
    assert price["change"] == pytest.approx(4.3 / 21.5 - 1) and price["why"] == ""
    assert price["command"] == ["python", "bench.py"] and price["unit"] == "Ktok/s"
    assert price["install"][:3] == ["uv", "pip", "install"]


@pytest.mark.slow
def test_a_harmless_install_costs_nothing_measured(here: Project) -> None:
    before = _state(here.venv)
    code, out, err = here.priced("tqdmlike==1.0")
    assert code == 0, (out, err)
    assert "No cost measured: 21.5 → 21.5 Ktok/s, within the runs' noise" in out
    assert "it moves tqdmlike 1.0 (new)" in out
    assert "Costs" not in out
    assert _state(here.venv) == before


@pytest.mark.slow
def test_an_install_that_breaks_the_benchmark_says_how(here: Project) -> None:
    code, out, err = here.priced("speedlib==3.0")
    assert code == 1, err
    text = " ".join(out.split())
    assert "Breaks the benchmark: after this install it fails (exited 1:" in text
    assert "ImportError: speedlib 3.0 needs a GPU" in text
    assert "it measured 21.5 Ktok/s before" in text
    assert "(1 run without, the first with broke;" in text


@pytest.mark.slow
def test_a_cost_inside_the_noise_is_cannot_tell(here: Project) -> None:
    here.env["BENCH_NOISE"] = "wide"
    try:
        code, out, err = here.preflight(
            "--bench", "--json", "--find-links", str(here.house), "--offline",
            install=("speedlib==2.0",),
        )  # fmt: skip
    finally:
        here.env["BENCH_NOISE"] = None
    assert code == 1, err
    price = _price(out)
    assert price["verdict"] == "cannot-tell", price
    assert len(price["before"]) == 6 and len(price["after"]) == 6  # on to the most runs


def test_an_install_that_fails_cannot_be_priced(here: Project) -> None:
    code, out, err = here.priced("speedlib==9.9")
    assert code == 2 and out == ""
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1, err


def test_a_lock_without_a_benchmark_is_one_line(here: Project, tmp_path: Path) -> None:
    lock = lockfile.read(here.root / "lockfiles" / "train.envguard.toml")
    bare = tmp_path / "bare.envguard.toml"
    lockfile.write(bare, dataclasses.replace(lock, bench=None))
    code, out, err = here.preflight("--bench", "--lock", str(bare), install=("tqdmlike==1.0",))
    assert code == 2 and out == "", (out, err)
    assert "records no benchmark" in err and "snapshot --bench" in err


def test_pricing_options_without_bench_are_refused(here: Project) -> None:
    code, out, err = here.preflight("--runs", "3", install=("tqdmlike==1.0",))
    assert code == 2 and out == ""
    assert "--runs price an install: they need --bench" in err


@pytest.mark.slow
def test_run_refuses_an_install_that_costs_more_than_max_cost(here: Project) -> None:
    journal = path_for(here.root / "lockfiles" / "train.envguard.toml")
    before, logged = here.versions(), journal.read_text() if journal.exists() else ""
    code, out, err = here.run("--max-cost", "5", install=("speedlib==2.0",))
    assert code == 1, (out, err)
    assert here.versions() == before and "speedlib==1.0" in before  # not installed
    assert (journal.read_text() if journal.exists() else "") == logged  # nothing ran
    text = " ".join((out + err).split())
    assert "Refused: `uv pip install speedlib==2.0` was not run: its price is more than " in text
    assert "--max-cost 5% allows" in text and "anyway: envguard run -- uv pip install" in text
    assert "Costs: this install would cost 21.5 → 4.3 Ktok/s (-80%)" in text
    code, out, err = here.run("--max-cost", "5", "--json", install=("speedlib==2.0",))
    envelope = json.loads(out)
    assert code == 1 and envelope["kind"] == "run" and envelope["exit_code"] == 1
    assert envelope["result"]["refused"] is True and envelope["result"]["max_cost"] == 0.05
    assert envelope["result"]["price"]["verdict"] == "cost" and here.versions() == before


@pytest.mark.slow
def test_run_installs_what_costs_less_and_says_its_price(here: Project) -> None:
    try:
        code, out, err = here.run("--max-cost", "5", "--json", install=("otherlib==1.0",))
        assert code == 0, (out, err)
        assert "otherlib==1.0" in here.versions()
        result = json.loads(out)["result"]
        assert result["price"]["verdict"] == "none" and result["exit_code"] == 0
        assert path_for(here.root / "lockfiles" / "train.envguard.toml").is_file()  # journalled
    finally:
        python = str(here.venv / "bin" / "python")
        subprocess.run([uv_bin(), "pip", "uninstall", "--python", python, "otherlib"],
                       capture_output=True, check=True)  # fmt: skip


def test_run_prices_only_installs(here: Project) -> None:
    code, out, err = invoke("run", "--max-cost", "5", "--", "python", "-c", "pass", env=here.env)
    assert code == 2 and out == ""
    assert "--max-cost prices installs: " in err and len(err.strip().splitlines()) == 1


def test_pricing_options_without_max_cost_are_refused(here: Project) -> None:
    code, out, err = invoke("run", "--runs", "3", "--", "python", "-c", "pass", env=here.env)
    assert code == 2 and out == ""
    assert "--runs price an install: they need --max-cost" in err
