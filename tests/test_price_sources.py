"""Pricing takes the install's own sources (#48 item 3): both copies of a priced install look
where the install command looks (its ``--find-links``, ``--no-index``, index URLs, and those
in its ``-r`` files), under envguard's own flags; preflight's own flags reach the installer's
dry run too; and a pin that cannot be found says the option that would find it.

The projects are test_preflight_bench's (speedlib 1.0 → 21.5 Ktok/s, 2.0 → 4.3), one with a
uv venv, one with a pip venv; uv's cache is empty for every priced install, so every wheel a
copy installs comes from where the command says.
"""

from __future__ import annotations

import ensurepip
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from envguard import install_sources
from envguard.demo.repo import committed
from envguard.demo.wheels import build_wheel
from tests.conftest import PipVenv, make_venv, uv_install
from tests.project import invoke
from tests.test_bisect_bench import locked_with_bench
from tests.test_preflight_bench import BENCH


@dataclass
class Project:
    root: Path
    house: Path
    env: dict[str, str | None]


def _house(base: Path, *, pip: bool) -> Path:
    house = base / "house"
    for version in ("1.0", "2.0"):
        build_wheel(house, "speedlib", version,
                    files={"speedlib/__init__.py": f'__version__ = "{version}"\n'})  # fmt: skip
    if pip:  # the pip venv's own pip and setuptools, as ensurepip has them
        for wheel in (Path(ensurepip.__file__).parent / "_bundled").glob("*.whl"):
            shutil.copy(wheel, house)
    return house


def _project(base: Path, make: Callable[[Path], Path], *, pip: bool) -> Project:
    """The repository, its venv made by ``make`` with speedlib 1.0, the lock committed."""
    house = _house(base, pip=pip)
    root = committed(base / "train", {"bench.py": BENCH})
    venv = make(root / ".venv")
    uv_install(venv, house, "speedlib==1.0")
    env: dict[str, str | None] = {
        "VIRTUAL_ENV": str(venv), "TORCHINDUCTOR_CACHE_DIR": str(base / "inductor"),
        "TRITON_CACHE_DIR": str(base / "triton"), "ENVGUARD_CACHE_DIR": str(base / "eg"),
        "BENCH_NOISE": None, "BENCH_COUNT": str(base / "count"), "COLUMNS": "80",
    }  # fmt: skip
    locked_with_bench(root, env)
    return Project(root=root, house=house, env=env)


@pytest.fixture(scope="module")
def uv_project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    return _project(tmp_path_factory.mktemp("price-sources-uv"), make_venv, pip=False)


@pytest.fixture(scope="module")
def pip_project(tmp_path_factory: pytest.TempPathFactory, pip_venv_at: PipVenv) -> Project:
    return _project(tmp_path_factory.mktemp("price-sources-pip"), pip_venv_at, pip=True)


def _priced(p: Project, tmp_path: Path, *argv: str) -> tuple[int, dict, str]:  # type: ignore[type-arg]
    """``argv`` (envguard's flags, then ``--`` and the install) priced with uv's cache empty."""
    empty = tmp_path / "empty-uv-cache"
    empty.mkdir()
    code, out, err = invoke("preflight", "--bench", "--json", *argv,
                            env={**p.env, "UV_CACHE_DIR": str(empty)})  # fmt: skip
    envelope = json.loads(out) if out else {}
    return code, (envelope.get("result") or {}).get("price") or envelope, err


@pytest.mark.slow
def test_uv_no_index_find_links_is_priced_from_its_folder(
    uv_project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(uv_project.root)
    house = str(uv_project.house)
    code, price, err = _priced(uv_project, tmp_path, "--", "uv", "pip", "install",
                               "--no-index", "--find-links", house, "speedlib==2.0")  # fmt: skip
    assert code == 1, (price, err)
    assert price["verdict"] == "cost" and (price["before"][0], price["after"][0]) == (21.5, 4.3)
    assert price["sources"] == {"index_url": None, "extra_index_urls": [], "find_links": [house],
                                "offline": False, "no_index": True}  # fmt: skip


@pytest.mark.slow
def test_pip_find_links_no_index_is_priced_from_its_folder(
    pip_project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(pip_project.root)
    code, price, err = _priced(pip_project, tmp_path, "--", "pip", "install", "-f",
                               "../house", "--no-index", "speedlib==2.0")  # fmt: skip
    assert code == 1, (price, err)
    assert price["verdict"] == "cost" and (price["before"][0], price["after"][0]) == (21.5, 4.3)
    # relative to where the command runs, as pip reads it
    assert price["sources"]["find_links"] == [str(pip_project.root / "../house")]
    assert price["sources"]["no_index"] is True


@pytest.mark.slow
def test_preflights_own_flags_reach_the_dry_run(
    uv_project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No network, an empty cache: the install names no source, preflight's flags do."""
    monkeypatch.chdir(uv_project.root)
    flags = ("--find-links", str(uv_project.house), "--offline")
    code, price, err = _priced(uv_project, tmp_path, *flags, "--", "uv", "pip", "install",
                               "speedlib==2.0")  # fmt: skip
    assert code == 1, (price, err)
    assert price["verdict"] == "cost"


def test_a_pin_the_rebuild_cannot_find_says_the_option_that_would(
    uv_project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(uv_project.root)
    other = tmp_path / "other"
    build_wheel(other, "otherlib", "1.0", files={"otherlib/__init__.py": ""})
    code, _, err = _priced(uv_project, tmp_path, "--", "uv", "pip", "install", "--offline",
                           "--find-links", str(other), "otherlib==1.0")  # fmt: skip
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    said = " ".join(err.split())
    assert "the venv as it is cannot be rebuilt" in said and "speedlib" in said, said
    assert "give the folder that holds it with --find-links DIR" in said, said


# -- the options themselves ----------------------------------------------------------------


def test_an_installs_sources_as_pip_and_uv_read_them(tmp_path: Path) -> None:
    reqs = tmp_path / "reqs"
    (reqs / "wheels").mkdir(parents=True)
    (reqs / "base.txt").write_text(
        "# pinned\n--index-url https://mirror.example/simple  # ours\n"
        "--extra-index-url \\\n  https://extra.example/simple\n"
        "-f wheels\ntorch==2.11.0 --hash=sha256:abc\n-r more.txt\n"
    )
    (reqs / "more.txt").write_text("--find-links=/abs/house\n-r base.txt\n")  # a loop, once
    got = install_sources.of(["-r", str(reqs / "base.txt"), "numpy"], tmp_path)
    assert got.index_url == "https://mirror.example/simple"
    assert got.extra_index_urls == ("https://extra.example/simple",)
    assert got.find_links == (str(reqs / "wheels"), "/abs/house")  # beside the file
    assert not got.no_index and not got.offline
    uv = install_sources.of(["--index", "pytorch=https://download.pytorch.org/whl/cu128",
                             "--default-index=https://m/simple", "-fhouse", "--offline",
                             "--no-index", "-U", "pkg"], tmp_path)  # fmt: skip
    assert uv.index_url == "https://m/simple"
    assert uv.extra_index_urls == ("https://download.pytorch.org/whl/cu128",)
    assert uv.find_links == (str(tmp_path / "house"),)
    assert uv.offline and uv.no_index
    # a requirement named like an option's value, or a missing file, is no source
    assert install_sources.of(["index-url", "-r", "nope.txt"], tmp_path).given() is False
