from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envguard import __version__
from envguard.demo.wheels import build_wheel
from tests.conftest import make_venv, uv_install
from tests.project import invoke


def envguard(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "envguard", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=full_env,
        timeout=120,
    )


def cli(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``envguard ARGS`` in-process (click's runner) from ``cwd``, as a finished process: what
    these tests read is the command's words and exit status, not its process (``envguard``
    above runs it as one: the version, stdin and the shell's stdout below are a process's)."""
    before = Path.cwd()
    os.chdir(cwd or before)
    try:
        code, out, err = invoke(*args, env={"COLUMNS": "200", **(env or {})})
    finally:
        os.chdir(before)
    return subprocess.CompletedProcess(["envguard", *args], code, out, err)


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    env = make_venv(tmp_path / "venv")
    house = tmp_path / "house"
    build_wheel(house, "numpy", "2.3.0")
    build_wheel(house, "numpy", "2.4.0")
    uv_install(env, house, "numpy==2.3.0")
    return env


def test_version() -> None:
    done = envguard("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"envguard, version {__version__}"


def test_snapshot_then_clean_diff_then_drift(tmp_path: Path, venv: Path, repo: Path) -> None:
    done = cli("snapshot", "--venv", str(venv), "--name", "train", cwd=repo)
    assert done.returncode == 0, done.stderr
    lock = repo / "lockfiles" / "train.envguard.toml"
    assert lock.is_file()
    assert done.stdout.startswith(f"Snapshot of {venv}")

    clean = cli("diff", str(lock), "--venv", str(venv), cwd=repo)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert clean.stdout.startswith("No drift")

    uv_install(venv, tmp_path / "house", "numpy==2.4.0")
    drifted = cli("diff", str(lock), "--venv", str(venv), cwd=repo)
    assert drifted.returncode == 1
    first = drifted.stdout.splitlines()[0]
    assert first.startswith("Drift: 1 warning since train")
    assert "numpy" in drifted.stdout and "2.3.0" in drifted.stdout
    assert "\x1b[" not in drifted.stdout  # NO_COLOR
    assert (
        cli("diff", str(lock), "--venv", str(venv), "--fail-on", "critical", cwd=repo).returncode
        == 0
    )


def test_diff_defaults_to_the_venvs_lockfile(venv: Path, repo: Path) -> None:
    assert cli("snapshot", "--venv", str(venv), cwd=repo).returncode == 0
    done = cli("diff", "--venv", str(venv), cwd=repo)
    assert done.returncode == 0, done.stderr


def test_diff_of_two_lockfiles_json_envelope(tmp_path: Path, venv: Path, repo: Path) -> None:
    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    assert cli("snapshot", "--venv", str(venv), "-o", str(a), cwd=repo).returncode == 0
    (repo / "train.py").write_text("import dflash_model\nprint('patched')\n")
    assert cli("snapshot", "--venv", str(venv), "-o", str(b), cwd=repo).returncode == 0
    done = cli("diff", str(a), str(b), "--json")
    assert done.returncode == 1
    doc = json.loads(done.stdout)
    # The envelope is a public contract: these keys and this schema number are pinned.
    assert list(doc) == ["schema", "tool", "version", "kind", "exit_code", "result", "error"]
    assert doc["error"] is None
    assert (doc["schema"], doc["tool"], doc["kind"], doc["exit_code"]) == (3, "envguard", "diff", 1)
    change = next(c for c in doc["result"]["changes"] if c["subject"] == "train.py")
    assert set(change) >= {"severity", "area", "subject", "old", "new", "why"}
    assert change["severity"] == "critical" and "print('patched')" in change["patch"]
    assert (doc["result"]["lockfile"], doc["result"]["other_lockfile"]) == (str(a), str(b))
    shown = cli("diff", str(a), str(b), "--show-patch", cwd=tmp_path)
    assert "+print('patched')" in shown.stdout
    assert "b.toml against a.toml" in shown.stdout  # which file is which, on the screen too
    live = cli("diff", str(a), str(b), "--venv", str(venv))
    assert live.returncode == 2 and "two lockfiles compare no live one" in live.stderr
    one = json.loads(cli("diff", "a.toml", "--venv", str(venv), "--json", cwd=tmp_path).stdout)
    assert one["result"]["lockfile"] == str(a)  # absolute, as given relative


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such lockfile"),
        (b"", "empty file"),
        (b"garbage \x00\x01", "not valid TOML"),
        (b"schema = 7\n", "upgrade envguard"),
    ],
)
def test_bad_lockfile_is_one_line_exit_2(
    tmp_path: Path, venv: Path, content: bytes | None, message: str
) -> None:
    lock = tmp_path / "x.envguard.toml"
    if content is not None:
        lock.write_bytes(content)
    done = cli("diff", str(lock), "--venv", str(venv))
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]


def test_not_a_venv_and_not_a_repo(tmp_path: Path, venv: Path) -> None:
    done = cli("snapshot", "--venv", str(tmp_path))
    assert done.returncode == 2 and "not a venv" in done.stderr and "Traceback" not in done.stderr
    done = cli(
        "snapshot", "--venv", str(venv), "--repo", str(tmp_path), "-o", str(tmp_path / "o.toml")
    )
    assert done.returncode == 2 and "not inside a git repository" in done.stderr
    assert not (tmp_path / "o.toml").exists()  # no half-written lockfile
    no_default = cli("snapshot", cwd=tmp_path, env={"VIRTUAL_ENV": ""})
    assert no_default.returncode == 2 and "--venv" in no_default.stderr


def test_snapshot_json(tmp_path: Path, venv: Path) -> None:
    done = cli(
        "snapshot", "--venv", str(venv), "-o", str(tmp_path / "s.toml"), "--json", cwd=tmp_path
    )
    doc = json.loads(done.stdout)
    assert doc["kind"] == "snapshot" and tmp_path / doc["result"]["lockfile"] == tmp_path / "s.toml"
    assert doc["result"]["packages"][0]["name"] == "numpy"


def test_secret_never_reaches_terminal_or_lockfile(tmp_path: Path, venv: Path) -> None:
    secret = "hf_Zq8p3RtX9vW2yU7iO4aS"
    env = {"HF_TOKEN": secret, "PIP_INDEX_URL": f"https://me:{secret}@pypi.internal/simple"}
    out = tmp_path / "s.toml"
    done = cli("snapshot", "--venv", str(venv), "-o", str(out), cwd=tmp_path, env=env)
    assert done.returncode == 0
    assert secret not in done.stdout + done.stderr + out.read_text()
    shown = cli(
        "diff", str(out), "--venv", str(venv), "--json", cwd=tmp_path, env={"HF_TOKEN": "other"}
    )
    assert secret not in shown.stdout + shown.stderr


def test_diff_finds_a_named_snapshot_of_this_venv(venv: Path, repo: Path, tmp_path: Path) -> None:
    assert cli("snapshot", "--venv", str(venv), "--name", "other", cwd=repo).returncode == 0
    done = cli("diff", "--venv", str(venv), cwd=repo)
    assert done.returncode == 0, done.stderr
    missing = cli("diff", "--venv", str(venv), cwd=tmp_path)
    assert missing.returncode == 2 and "run `envguard snapshot` first" in missing.stderr


def test_diff_lock_uses_the_locks_venv_when_none_is_active(venv: Path, tmp_path: Path) -> None:
    lock = tmp_path / "l.envguard.toml"
    assert cli("snapshot", "--venv", str(venv), "-o", str(lock), "-q").returncode == 0
    done = cli("diff", str(lock), cwd=tmp_path, env={"VIRTUAL_ENV": ""})
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["snapshot", "--bogus"], "No such option '--bogus'"),
        (["restore", "--bogus"], "No such option '--bogus'"),
        (["nosuch"], "No such command 'nosuch'"),
    ],
)
def test_usage_errors_are_one_line(args: list[str], message: str) -> None:
    done = cli(*args)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]


@pytest.mark.slow
def test_restore_without_yes_in_a_script(venv: Path, tmp_path: Path) -> None:
    lock = tmp_path / "l.envguard.toml"
    assert cli("snapshot", "--venv", str(venv), "-o", str(lock), "-q").returncode == 0
    done = subprocess.run(
        [sys.executable, "-m", "envguard", "restore", str(lock), "--rebuild"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert done.returncode == 2 and "pass --yes" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_a_lock_to_stdout_appends_to_what_the_shell_opened(tmp_path: Path, venv: Path) -> None:
    """``-o /dev/stdout >> build.log``: the lockfile is appended to the log (not renamed over
    it), the summary goes to stderr, and --save-cache refuses to put an archive beside a
    stream."""
    log = tmp_path / "build.log"
    log.write_text("earlier line\n")
    inode = log.stat().st_ino
    args = [sys.executable, "-m", "envguard", "snapshot", "--venv", str(venv), "-o", "/dev/stdout"]
    with log.open("a") as out:
        done = subprocess.run(
            [*args, "--no-default-caches"], stdout=out, stderr=subprocess.PIPE, text=True,
            cwd=tmp_path, env={**os.environ, "NO_COLOR": "1"},
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert log.stat().st_ino == inode
    text = log.read_text()
    assert text.startswith("earlier line\n# envguard lockfile: ") and "Snapshot of" not in text
    assert text.splitlines()[2].startswith("schema = ")
    assert "Snapshot of" in done.stderr
    refused = cli("snapshot", "--venv", str(venv), "-o", "/dev/stdout", "--save-cache")
    assert refused.returncode == 2 and "--save-cache puts the archive beside" in refused.stderr


def test_a_lockfile_that_is_a_pipe_is_refused_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "lock.envguard.toml"
    os.mkfifo(fifo)
    done = cli("diff", str(fifo))
    assert (done.returncode, done.stderr) == (
        2,
        f"error: {fifo}: cannot read (not a regular file)\n",
    )
