from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from envguard import snapshot
from envguard.demo.wheels import build_wheel
from envguard.errors import VenvError
from envguard.probes import distributions, venv
from tests.conftest import make_venv, uv_install


def test_reads_a_uv_venv(tmp_path: Path) -> None:
    env = make_venv(tmp_path / "venv")
    house = tmp_path / "house"
    build_wheel(house, "Typing_Extensions", "4.12.2")
    build_wheel(house, "needs-it", "1.0", requires=["typing-extensions>=4", "rich; extra == 'x'"])
    uv_install(env, house, "needs-it")
    located = venv.locate(env)
    dists, warnings = distributions.scan(located.site_packages)
    dists, _ = distributions.in_effect(dists, (), located.python)
    by_name = {d.name: d for d in dists}
    assert warnings == ()
    assert by_name["typing-extensions"].version == "4.12.2"  # canonical name
    assert by_name["needs-it"].installer == "uv"
    assert by_name["needs-it"].requires == ("typing-extensions>=4",)  # no one asks for x
    assert by_name["needs-it"].installed_at.endswith("Z")
    assert [d.name for d in dists] == sorted(by_name)


def test_python_facts_from_pyvenv_cfg(tmp_path: Path) -> None:
    import sys

    located = venv.locate(make_venv(tmp_path / "venv"))
    assert located.python.version == ".".join(map(str, sys.version_info[:3]))
    assert located.python.abi == f"cp{sys.version_info[0]}{sys.version_info[1]}"
    assert located.info.creator and located.info.creator.startswith("uv ")


def test_half_installed_dist_is_recorded_with_a_warning(tmp_path: Path) -> None:
    env = make_venv(tmp_path / "venv")
    site = venv.locate(env).site_packages
    (site / "broken_pkg-1.2.3.dist-info").mkdir()
    snap = snapshot.take(env, default_caches=False)
    broken = snap.package("broken-pkg")
    assert broken is not None and broken.version == "1.2.3" and broken.problem
    assert any("broken_pkg-1.2.3.dist-info: no METADATA" in w for w in snap.warnings)


def test_egg_info_and_editable_direct_url(tmp_path: Path) -> None:
    env = make_venv(tmp_path / "venv")
    site = venv.locate(env).site_packages
    egg = site / "legacy_pkg-0.9-py3.11.egg-info"
    egg.mkdir()
    (egg / "PKG-INFO").write_text("Metadata-Version: 1.1\nName: Legacy_Pkg\nVersion: 0.9\n\nx\n")
    info = site / "mytrain-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mytrain\nVersion: 0.1\n")
    (info / "direct_url.json").write_text(
        json.dumps(
            {"url": "https://user:s3cr3t@git.example.com/x.git", "dir_info": {"editable": True}}
        )
    )
    dists, _ = distributions.scan(site)
    by_name = {d.name: d for d in dists}
    assert by_name["legacy-pkg"].format == "egg-info" and by_name["legacy-pkg"].version == "0.9"
    mine = by_name["mytrain"]
    assert mine.editable and mine.direct_url == "https://git.example.com/x.git"


def test_not_a_venv(tmp_path: Path) -> None:
    with pytest.raises(VenvError, match="not a venv"):
        venv.locate(tmp_path)
    with pytest.raises(VenvError, match="no such directory"):
        venv.locate(tmp_path / "nope")
    (tmp_path / "file").write_text("")
    with pytest.raises(VenvError, match="not a directory"):
        venv.locate(tmp_path / "file")


def test_name_of_a_dot_venv_is_its_project(tmp_path: Path) -> None:
    located = venv.locate(make_venv(tmp_path / "proj" / ".venv"))
    # uv writes prompt = the project folder's name
    assert located.name == "proj"


def test_header_parser_skips_continuations_and_body(tmp_path: Path) -> None:
    meta = tmp_path / "METADATA"
    meta.write_bytes(
        b"Metadata-Version: 2.1\r\nName: Foo.Bar\r\nVersion: 1.0\r\nLicense: MIT\r\n"
        b"        Name: not-a-header\r\nRequires-Dist: numpy>=2\r\n"
        b"Requires-Dist: rich ; extra == 'ui'\r\n\r\nName: body-is-not-headers\r\n"
    )
    headers, problem = distributions._headers(meta)
    assert problem is None
    assert headers.name == "Foo.Bar" and headers.version == "1.0"
    assert headers.requires == ["numpy>=2", "rich ; extra == 'ui'"]


def test_torch_family_key_libraries_carry_the_real_build(tmp_path: Path) -> None:
    from envguard.demo.incident import sglang_install

    env = make_venv(tmp_path / "venv")
    sglang_install(tmp_path / "house")
    uv_install(env, tmp_path / "house", "torch==2.11.0")
    snap = snapshot.take(env, default_caches=False)
    assert snap.key_libraries["torch"] == "2.11.0+cu130"
    assert snap.package("torch").version == "2.11.0"  # METADATA, as installed


_HEADER_TEXT = (
    st.text(
        st.characters(exclude_categories=("Cs", "Cc"), exclude_characters=":"),
        min_size=1,
        max_size=20,
    )
    .map(str.strip)
    .filter(bool)
)


@given(
    name=_HEADER_TEXT,
    version=_HEADER_TEXT,
    reqs=st.lists(_HEADER_TEXT, max_size=4),
    noise=st.lists(
        st.tuples(st.sampled_from(["License", "Classifier", "Summary"]), _HEADER_TEXT), max_size=4
    ),
)
def test_header_parser_round_trip(
    name: str, version: str, reqs: list[str], noise: list[tuple[str, str]]
) -> None:
    lines = [
        f"Name: {name}",
        f"Version: {version}",
        *(f"{k}: {v}\n  {v}" for k, v in noise),
        *(f"Requires-Dist: {r}" for r in reqs),
    ]
    headers = distributions._Headers("\n".join(lines).encode())
    assert (headers.name, headers.version) == (name, version)
    assert headers.requires == reqs


def test_a_plain_prefix_and_a_conda_env(tmp_path: Path) -> None:
    """NGC-style containers install into /usr/local/lib/python3.X/dist-packages."""
    prefix = tmp_path / "usr-local"
    site = prefix / "lib" / "python3.12" / "dist-packages"
    (site / "torch-2.11.0.dist-info").mkdir(parents=True)
    (site / "torch-2.11.0.dist-info" / "METADATA").write_text("Name: torch\nVersion: 2.11.0\n")
    (prefix / "include" / "python3.12").mkdir(parents=True)
    (prefix / "include" / "python3.12" / "patchlevel.h").write_text('#define PY_VERSION "3.12.3"\n')
    found = venv.locate(prefix)
    assert (found.info.kind, found.python.version, found.site_packages) == (
        "prefix",
        "3.12.3",
        site,
    )
    conda = tmp_path / "conda"
    (conda / "conda-meta").mkdir(parents=True)
    (conda / "conda-meta" / "python-3.11.9-hab00c5b_0_cpython.json").write_text("{}")
    (conda / "lib" / "python3.11" / "site-packages").mkdir(parents=True)
    found = venv.locate(conda)
    assert (found.info.kind, found.python.version) == ("conda", "3.11.9")
