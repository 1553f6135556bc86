"""``envguard snapshot`` without click (:mod:`envguard._fastpath`) against the same command
parsed by click: the same keywords, the same output, lockfile and exit code, or a hand-over to
click. And what the hot path must not import, which is where its speed comes from."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest
from hypothesis import given
from hypothesis import strategies as st

from envguard import _fastpath
from envguard.cli import cli
from tests.conftest import make_venv

_TOKENS = [
    "--venv", "--repo", "--cache-dir", "-o", "--output", "--name", "--no-default-caches",
    "--save-cache", "--json", "-q", "--quiet", "-qq", "-v", "--color", "-h", "--help",
    "--venv=v", "--json=1", "--nope", "-x", "extra",
]  # fmt: skip
_VALUES = st.one_of(
    st.sampled_from(["v", "a b", "-x", "", "--venv", "p=q", "%h.toml", "-", "é"]),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")),
)


def _click_params(argv: list[str]) -> dict[str, Any] | None:
    """What click makes of ``envguard ARGV``'s snapshot options, or None if it refuses."""
    try:
        ctx = cli.commands["snapshot"].make_context("snapshot", argv[1:])
    except (click.ClickException, click.exceptions.Exit):
        return None
    return dict(ctx.params)


@given(st.lists(st.one_of(st.sampled_from(_TOKENS), _VALUES), max_size=8))
def test_the_hot_path_parses_as_click_does_or_hands_over(tokens: list[str]) -> None:
    argv = ["snapshot", *tokens]
    fast = _fastpath.parse(argv)
    if fast is None:
        return  # click parses it, and says what is wrong with it
    slow = _click_params(argv)
    assert slow is not None, f"the hot path accepted what click refuses: {argv}"
    assert slow.pop("verbose") == 0 and slow.pop("color") is None
    assert slow == {key: fast.get(key, default) for key, default in slow.items()}, argv


def test_only_snapshot_takes_the_hot_path() -> None:
    assert _fastpath.parse(["diff", "--json"]) is None
    assert _fastpath.parse([]) is None
    assert _fastpath.parse(["snapshot", "--help"]) is None
    assert _fastpath.parse(["snapshot", "-o"]) is None  # click says the value is missing
    assert _fastpath.parse(["snapshot", "--venv", "v", "-q", "-q"]) == {
        "venv": Path("v"), "quiet": 2, "cache_dirs": (),
    }  # fmt: skip


def _envguard(entry: str, args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``envguard ARGS`` in a process: through __main__ (the hot path) or straight to click."""
    code = {
        "hot": "from envguard.__main__ import main; main()",
        "click": "from envguard.cli import main; main()",
    }[entry]
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "100"}
    return subprocess.run(
        [sys.executable, "-c", code, *args], cwd=cwd, env=env, capture_output=True, text=True
    )


def _same(text: str) -> str:
    return re.sub(r'"?taken_at"?\s*[=:]\s*"[^"]*"', "taken_at", text)


@pytest.fixture(scope="module")
def small_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = make_venv(tmp_path_factory.mktemp("fast") / "train")
    site = next(venv.glob("lib/python*/site-packages"))
    info = site / "demo_pkg-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: demo_pkg\nVersion: 1.0\n")
    (info / "INSTALLER").write_text("uv\n")
    return venv


@pytest.mark.parametrize(
    "extra",
    [
        [],
        ["-q"],
        ["--json"],
        ["--name", "known-good", "--json", "-q"],
        ["--venv", "{tmp}/missing"],
        ["--venv", "{tmp}/missing", "--json"],
        ["-o", "{tmp}/not-a-dir/x/../y.toml", "--cache-dir", "{tmp}/cache"],
    ],
    ids=["human", "quiet", "json", "name", "error", "error-json", "cache-dir"],
)
def test_the_hot_path_prints_writes_and_exits_as_click_does(
    extra: list[str], small_venv: Path, tmp_path: Path
) -> None:
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "entry.bin").write_bytes(b"x" * 100)
    out = tmp_path / "out.envguard.toml"
    args = ["snapshot", "--venv", str(small_venv), "--no-default-caches", "-o", str(out)]
    args += [a.replace("{tmp}", str(tmp_path)) for a in extra]
    assert _fastpath.parse(args) is not None
    runs = {}
    for entry in ("hot", "click"):
        done = _envguard(entry, args, tmp_path)
        written = [p for p in tmp_path.rglob("*.toml")]
        runs[entry] = (
            done.returncode,
            _same(done.stdout),
            done.stderr,
            {p.name: _same(p.read_text()) for p in written},
        )
        for p in written:
            p.unlink()
    assert runs["hot"] == runs["click"]
    code, stdout, stderr, files = runs["hot"]
    if "missing" in " ".join(extra):
        assert code == 2 and stderr.startswith("error: ") and not files
        if "--json" in extra:
            assert json.loads(stdout)["error"]
    else:
        assert code == 0 and files and stderr == ""


def test_the_hot_path_leaves_click_and_the_engines_unimported(
    small_venv: Path, tmp_path: Path
) -> None:
    """Its speed is what it does not load: no click, no packaging, no GitPython outside a
    repository, none of the drift rules, restore, preflight or fleet."""
    listing = tmp_path / "modules.txt"
    code = (
        "import atexit, sys\n"
        f"atexit.register(lambda: open({str(listing)!r}, 'w').write('\\n'.join(sys.modules)))\n"
        "from envguard.__main__ import main\n"
        "main()\n"
    )
    args = ["snapshot", "--venv", str(small_venv), "--no-default-caches", "-q"]
    done = subprocess.run(
        [sys.executable, "-c", code, *args], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    loaded = set(listing.read_text().split())
    assert "envguard.snapshot" in loaded  # it did run the snapshot
    for heavy in (
        "click", "packaging", "git", "psutil", "envguard.cli", "envguard.drift.packages",
        "envguard.restore", "envguard.preflight", "envguard.fleet", "envguard.results.diff",
    ):  # fmt: skip
        assert heavy not in loaded, heavy
