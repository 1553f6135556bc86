"""``envguard snapshot`` and ``diff`` without click (:mod:`envguard._fastpath`) against the same
commands parsed by click: the same keywords, the same output, files and exit code, or a hand-over
to click. And what the hot path must not import, which is where its speed comes from."""

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
    "--venv=v", "--json=1", "--nope", "-x", "extra", "--fail-on", "--fail-on=any", "critical",
    "--only", "--ignore", "--expand", "--show-patch", "--", "-",
]  # fmt: skip
_VALUES = st.one_of(
    st.sampled_from(["v", "a b", "-x", "", "--venv", "p=q", "%h.toml", "-", "é"]),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")),
)


def _click_params(argv: list[str]) -> dict[str, Any] | None:
    """What click makes of ``envguard ARGV``'s options, or None if it refuses."""
    try:
        ctx = cli.commands[argv[0]].make_context(argv[0], argv[1:])
    except (click.ClickException, click.exceptions.Exit):
        return None
    return dict(ctx.params)


@given(
    st.sampled_from(["snapshot", "diff"]),
    st.lists(st.one_of(st.sampled_from(_TOKENS), _VALUES), max_size=8),
)
def test_the_hot_path_parses_as_click_does_or_hands_over(command: str, tokens: list[str]) -> None:
    argv = [command, *tokens]
    parsed = _fastpath.parse(argv)
    if parsed is None:
        return  # click parses it, and says what is wrong with it
    assert parsed[0] == command
    fast = parsed[1]
    slow = _click_params(argv)
    assert slow is not None, f"the hot path accepted what click refuses: {argv}"
    assert slow.pop("verbose") == 0 and slow.pop("color") is None
    assert slow == {key: fast.get(key, default) for key, default in slow.items()}, argv


def test_what_takes_the_hot_path() -> None:
    assert _fastpath.parse(["restore", "--json"]) is None
    assert _fastpath.parse([]) is None
    assert _fastpath.parse(["snapshot", "--help"]) is None
    assert _fastpath.parse(["snapshot", "-o"]) is None  # click says the value is missing
    assert _fastpath.parse(["snapshot", "lock.toml"]) is None  # snapshot takes no argument
    assert _fastpath.parse(["diff", "a", "b", "c"]) is None  # cli.py says: at most two
    assert _fastpath.parse(["diff", "--fail-on", "severe"]) is None  # not a choice
    assert _fastpath.parse(["snapshot", "--venv", "v", "-q", "-q"]) == (
        "snapshot", {"venv": Path("v"), "quiet": 2, "cache_dirs": ()},
    )  # fmt: skip
    assert _fastpath.parse(["diff", "a", "--fail-on=any", "b"]) == (
        "diff", {"fail_on": "any", "quiet": 0, "locks": (Path("a"), Path("b"))},
    )  # fmt: skip


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
    """Without the times of day: the two runs are a second apart, or not."""
    return re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", "<time>", text)


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
        ["-o", "{tmp}/newdir/"],
    ],
    ids=["human", "quiet", "json", "name", "error", "error-json", "cache-dir", "into-folder"],
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
    error = "missing" in " ".join(extra)
    written = _assert_same_runs(args, tmp_path, error, "--json" in extra)[3]
    assert bool(written) is not error  # a lockfile, or none at all
    if extra and extra[-1].endswith("/"):  # "DIR/": a folder made, the lock named inside it
        assert list(written) == ["train.envguard.toml"]
        assert (tmp_path / "newdir").is_dir()


def _assert_same_runs(
    args: list[str], tmp_path: Path, error: bool, as_json: bool
) -> tuple[int, str, str, dict[str, str]]:
    runs = {}
    before = set(tmp_path.rglob("*.toml"))
    for entry in ("hot", "click"):
        done = _envguard(entry, args, tmp_path)
        written = [p for p in tmp_path.rglob("*.toml") if p not in before]
        runs[entry] = (
            done.returncode,
            _same(done.stdout),
            done.stderr,
            {p.name: _same(p.read_text()) for p in written},
        )
        for p in written:
            p.unlink()
    assert runs["hot"] == runs["click"]
    code, stdout, stderr, _ = runs["hot"]
    if error:
        assert code == 2 and stderr.startswith("error: ")
        if as_json:
            assert json.loads(stdout)["error"]
    else:
        assert code in (0, 1) and stderr == "" and stdout
    return runs["hot"]


@pytest.mark.parametrize(
    "extra",
    [
        [],
        ["-q"],
        ["--json"],
        ["--fail-on", "any"],
        ["--only=python,packages", "--expand"],
        ["--ignore", "packages", "-q"],
        ["{tmp}/b.envguard.toml"],
        ["{tmp}/missing.envguard.toml"],
        ["--json", "{tmp}/missing.envguard.toml"],
    ],
    ids=["human", "quiet", "json", "fail-on", "only", "ignore", "two-locks", "error", "error-json"],
)
def test_the_hot_diff_prints_and_exits_as_click_does(
    extra: list[str], small_venv: Path, tmp_path: Path
) -> None:
    a, b = tmp_path / "a.envguard.toml", tmp_path / "b.envguard.toml"
    snap = ["snapshot", "--venv", str(small_venv), "--no-default-caches", "-q"]
    assert _envguard("hot", [*snap, "-o", str(a)], tmp_path).returncode == 0
    extra_pkg = next(small_venv.glob("lib/python*/site-packages")) / "late-2.0.dist-info"
    extra_pkg.mkdir()
    (extra_pkg / "METADATA").write_text("Metadata-Version: 2.1\nName: late\nVersion: 2.0\n")
    try:
        assert _envguard("hot", [*snap, "-o", str(b)], tmp_path).returncode == 0
        args = ["diff", str(a), "--venv", str(small_venv)]
        args += [x.replace("{tmp}", str(tmp_path)) for x in extra]
        if any(x.endswith(".toml") for x in extra):
            args.remove("--venv")
            args.remove(str(small_venv))
        assert _fastpath.parse(args) is not None
        code = _assert_same_runs(args, tmp_path, "missing" in " ".join(extra), "--json" in extra)[0]
        if "missing" not in " ".join(extra):
            assert code == (0 if "--ignore" in extra else 1)  # `late` was added since a
    finally:
        for p in extra_pkg.iterdir():
            p.unlink()
        extra_pkg.rmdir()


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


def test_shell_completion_is_clicks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("_ENVGUARD_COMPLETE", "bash_complete")
    assert _fastpath.parse(["snapshot", "-q"]) is None


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("entry", ["hot", "click"])
@pytest.mark.parametrize("as_json", [False, True])
def test_a_stdout_that_cannot_be_written_is_one_line(
    entry: str, as_json: bool, small_venv: Path, tmp_path: Path
) -> None:
    code = {
        "hot": "from envguard.__main__ import main; main()",
        "click": "from envguard.cli import main; main()",
    }[entry]
    args = ["snapshot", "--venv", str(small_venv), "--no-default-caches", "-o", "x.toml"]
    with Path("/dev/full").open("w") as full:
        done = subprocess.run(
            [sys.executable, "-c", code, *args, *(["--json"] if as_json else [])],
            cwd=tmp_path, stdout=full, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "NO_COLOR": "1"},
        )  # fmt: skip
    assert (done.returncode, done.stderr) == (2, "error: No space left on device\n")
