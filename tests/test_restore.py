"""restore with the real uv binary and local wheelhouses: the replay, faults, refusals."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from envguard import drift, lockfile, snapshot
from envguard.demo.incident import known_good, swap_in_sglang
from envguard.restore.plan import Overrides, Skipped, plan
from tests.conftest import make_venv, siblings, uv_bin, uv_install
from tests.test_cli import cli


@pytest.fixture
def good(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(venv, lockfile, wheelhouse) of the known-good training venv."""
    venv = make_venv(tmp_path / "train-venv")
    house = tmp_path / "before"
    uv_install(venv, house, *known_good(house))
    lock = tmp_path / "lockfiles" / "train.envguard.toml"
    lockfile.write(lock, snapshot.take(venv, name="train", with_code=False))
    return venv, lock, house


def _restore(lock: Path, house: Path, *extra: str, env: dict[str, str] | None = None):
    return cli(
        "restore", str(lock), "--find-links", str(house), "--offline", "--yes", *extra, env=env
    )


def _importable(venv: Path) -> str:
    code = "import torch, torch.version; print(torch.version.__version__)"
    return subprocess.run(
        [str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.mark.slow
def test_replay_round_trips(tmp_path: Path, good) -> None:
    venv, lock, house = good
    swap_in_sglang(venv, tmp_path / "after")
    assert _importable(venv) == "2.11.0+cu130"
    done = _restore(lock, house, "--verify-import")
    assert done.returncode == 0, done.stderr
    assert "goes away sglang 0.5.23 and" in done.stdout
    changes = [ln.split() for ln in done.stdout.splitlines() if ln.startswith("changes")]
    assert ["changes", "torch", "2.11.0+cu130", "→", "2.11.0+cu128"] in changes
    assert _importable(venv) == "2.11.0+cu128"
    backups = [p for p in venv.parent.iterdir() if ".envguard-backup-" in p.name]
    assert len(backups) == 1 and str(backups[0]) in done.stdout
    assert _importable(backups[0]) == "2.11.0+cu130"  # the old venv still works where it is
    report = drift.compare(lockfile.read(lock), snapshot.take(venv, with_code=False))
    # nothing a venv determines has drifted from the lock (the registry says which areas)
    assert [c for c in report.only(drift.VENV_AREAS).changes if c.severity != "info"] == []
    # console scripts and the interpreter still work after the rename (relocatable venv)
    assert (venv / "bin" / "python").exists()


@pytest.mark.slow
def test_dry_run_writes_nothing(tmp_path: Path, good) -> None:
    venv, lock, _ = good
    swap_in_sglang(venv, tmp_path / "after")
    before = (siblings(venv), sorted(os.listdir(venv / "lib")), _importable(venv))
    done = cli("restore", str(lock), "--dry-run", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    pins = {p["name"]: p for p in doc["result"]["plan"]["pins"]}
    assert pins["torch"]["requirement"] == "torch==2.11.0+cu128"
    assert pins["torch"]["source"] == "https://download.pytorch.org/whl/cu128"
    assert pins["numpy"]["source"] == "the default index"
    assert (
        "torch-family from https://download.pytorch.org/whl/cu128"
        in doc["result"]["plan"]["indexes"]
    )
    assert (siblings(venv), sorted(os.listdir(venv / "lib")), _importable(venv)) == before


def _fake_uv(tmp_path: Path, on_sync: str) -> dict[str, str]:
    """A uv that behaves as the real one except for `pip sync`, where it runs ``on_sync``."""
    script = tmp_path / "fake-uv"
    script.write_text(f"""#!/bin/sh
if [ "$1" = pip ] && [ "$2" = sync ]; then
{on_sync}
fi
exec {uv_bin()} "$@"
""")
    script.chmod(0o755)
    return {"ENVGUARD_UV": str(script)}


@pytest.mark.parametrize(
    ("on_sync", "message"),
    [
        ("echo 'error: network is down' >&2; exit 2", "uv pip sync failed"),
        ("kill -9 $$", "uv pip sync failed"),
    ],
)
@pytest.mark.slow
def test_uv_failure_keeps_the_old_venv(tmp_path: Path, good, on_sync: str, message: str) -> None:
    venv, lock, house = good
    swap_in_sglang(venv, tmp_path / "after")
    before = siblings(venv)
    done = _restore(lock, house, env=_fake_uv(tmp_path, on_sync))
    assert done.returncode == 1 and message in done.stderr and "Traceback" not in done.stderr
    assert _importable(venv) == "2.11.0+cu130"
    assert siblings(venv) == before  # no half-built venv, no journal left behind


@pytest.mark.slow
def test_verify_mismatch_keeps_the_old_venv(tmp_path: Path, good) -> None:
    venv, lock, house = good
    swap_in_sglang(venv, tmp_path / "after")
    extra = tmp_path / "extra"
    from envguard.demo.wheels import build_wheel

    build_wheel(extra, "surprise", "1.0")
    # uv syncs, then something slips one more package in: verification must catch it
    env = _fake_uv(
        tmp_path,
        f'{uv_bin()} "$@" || exit $?; PY=$4; {uv_bin()} pip install -q '
        f'--python "$PY" --offline --no-index --find-links {extra} surprise;'
        " exit $?",
    )
    done = _restore(lock, house, env=env)
    assert done.returncode == 1 and "does not match the lock" in done.stderr
    assert "surprise" in done.stderr
    assert _importable(venv) == "2.11.0+cu130"


@pytest.mark.slow
def test_missing_interpreter_changes_nothing(tmp_path: Path, good) -> None:
    import dataclasses

    venv, lock, house = good
    snap = lockfile.read(lock)
    odd = dataclasses.replace(snap, python=dataclasses.replace(snap.python, version="3.99.1"))
    lockfile.write(lock, odd)
    before = siblings(venv)
    done = _restore(lock, house)
    assert done.returncode == 2 and "no Python 3.99.1 interpreter found" in done.stderr
    assert siblings(venv) == before and _importable(venv) == "2.11.0+cu128"


@pytest.mark.slow
def test_pins_uv_cannot_find_are_named(tmp_path: Path, good) -> None:
    venv, lock, _ = good
    partial = tmp_path / "partial-house"
    partial.mkdir()
    for wheel in (tmp_path / "before").glob("*.whl"):
        if not wheel.name.startswith(("numpy", "tokenizers")):
            (partial / wheel.name).write_bytes(wheel.read_bytes())
    done = _restore(lock, partial, "--rebuild")
    assert done.returncode == 1
    assert "uv could not find" in done.stderr and str(partial) in done.stderr
    assert "numpy" in done.stderr and "tokenizers" in done.stderr
    assert _importable(venv) == "2.11.0+cu128"


def test_concurrent_restore_refuses(tmp_path: Path, good) -> None:
    venv, lock, house = good
    lock_file = venv.parent / f".{venv.name}.envguard-restore.lock"
    with open(lock_file, "w") as fh:
        fh.write("4242")
        fh.flush()
        fcntl.flock(fh, fcntl.LOCK_EX)
        done = _restore(lock, house, "--rebuild")
    assert done.returncode == 1 and "another envguard restore" in done.stderr
    assert "pid 4242" in done.stderr


@pytest.mark.slow
def test_refuses_while_in_use(tmp_path: Path, good) -> None:
    venv, lock, house = good
    user = subprocess.Popen([str(venv / "bin" / "python"), "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(0.3)
        done = _restore(lock, house, "--rebuild")
        assert done.returncode == 1 and f"pid {user.pid}" in done.stderr
        forced = _restore(lock, house, "--rebuild", "--force")
        assert forced.returncode == 0, forced.stderr
    finally:
        user.kill()


@pytest.mark.slow
def test_kill_9_during_install_then_next_restore_cleans_up(tmp_path: Path, good) -> None:
    venv, lock, house = good
    swap_in_sglang(venv, tmp_path / "after")
    env = {
        **os.environ,
        "NO_COLOR": "1",
        **_fake_uv(tmp_path, f"touch {tmp_path}/syncing; sleep 60"),
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "envguard",
            "restore",
            str(lock),
            "--find-links",
            str(house),
            "--offline",
            "--yes",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    for _ in range(200):
        if (tmp_path / "syncing").exists():
            break
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    leftovers = [n for n in siblings(venv) if "envguard-new" in n or "restore.json" in n]
    assert len(leftovers) == 2  # the half-built venv and the journal
    assert _importable(venv) == "2.11.0+cu130"
    done = _restore(lock, house)
    assert done.returncode == 0, done.stderr
    assert "recovered an earlier restore" in done.stdout and "unfinished venv" in done.stdout
    assert not [n for n in siblings(venv) if "envguard-new" in n or "restore.json" in n]
    assert _importable(venv) == "2.11.0+cu128"


def test_plan_is_pure_and_reports_direct_urls(tmp_path: Path, good) -> None:
    import dataclasses

    _, lock, _ = good
    snap = lockfile.read(lock)
    gone = dataclasses.replace(
        snap.packages[0], direct_url="file:///nonexistent/pkg", editable=True
    )
    vcs = dataclasses.replace(snap.packages[1], direct_url="git+https://example.com/x.git@abc")
    odd = dataclasses.replace(snap, packages=(gone, vcs, *snap.packages[2:]))
    the_plan = plan(odd, tmp_path / "v", None, Overrides())
    assert the_plan.skipped == (
        Skipped(
            name=gone.name,
            version=gone.version,
            reason="installed from file:///nonexistent/pkg, which no longer exists",
        ),
    )
    assert the_plan.pins[0].requirement == f"{vcs.name} @ git+https://example.com/x.git@abc"
    assert the_plan == plan(odd, tmp_path / "v", None, Overrides())


@pytest.mark.slow
def test_all_restores_venv_then_code_and_cache(tmp_path: Path, repo: Path, monkeypatch) -> None:
    from envguard.demo.cache import make

    inductor_cache = make(tmp_path / "inductor")  # built by the known-good cu128 torch
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(inductor_cache))
    venv = make_venv(tmp_path / "train-venv")
    house = tmp_path / "before"
    uv_install(venv, house, *known_good(house))
    (repo / "dflash_model.py").write_text("def forward(x):\n    return x + 1\n")
    lock = tmp_path / "lockfiles" / "train.envguard.toml"
    saved = cli(
        "snapshot", "--venv", str(venv), "--repo", str(repo), "-o", str(lock), "--save-cache", "-q"
    )
    assert saved.returncode == 0, saved.stderr
    assert (lock.parent / "train.envguard-caches.tar.gz").is_file()
    # the incident: venv drifted, cache gone, the patch committed away and new work started
    swap_in_sglang(venv, tmp_path / "after")
    import shutil

    shutil.rmtree(inductor_cache)
    subprocess.run(["git", "-C", str(repo), "commit", "-qam", "wip"], check=True)
    (repo / "train.py").write_text("new work\n")

    # a dry run checks the caches against the venv --all will have restored (torch cu128),
    # not the drifted one: alone, --cache would refuse them here, dry or not
    dry = _restore(lock, house, "--all", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    result = json.loads(dry.stdout)["result"]
    assert result["code"]["files"] == 1 and result["caches"]["files"] == [36]
    cache_only = cli("restore", str(lock), "--code", "--cache", "--dry-run")
    assert cache_only.returncode == 3 and "torch 2.11.0+cu128 (cache) vs" in cache_only.stderr
    done = _restore(lock, house, "--all")
    assert done.returncode == 0, done.stderr
    assert "saved your uncommitted work as stash@{0}" in done.stdout
    assert "Restored cache: inductor, 36 files" in done.stdout
    assert _importable(venv) == "2.11.0+cu128"
    assert (repo / "dflash_model.py").read_text() == "def forward(x):\n    return x + 1\n"
    after = cli("diff", str(lock), "--venv", str(venv), "--repo", str(repo), "--json")
    changes = json.loads(after.stdout)["result"]["changes"]
    assert [c for c in changes if c["severity"] != "info"] == [], changes


def test_restore_never_replaces_a_non_venv(tmp_path: Path, good) -> None:
    import dataclasses

    from envguard.errors import EnvguardError

    _, lock, _ = good
    snap = lockfile.read(lock)
    prefix = dataclasses.replace(snap, venv=dataclasses.replace(snap.venv, kind="prefix"))
    with pytest.raises(EnvguardError, match="is a prefix, not a venv"):
        plan(snap, tmp_path / "usr-local", prefix, Overrides())


@pytest.mark.slow
def test_index_credentials_never_reach_the_plan_or_errors(tmp_path: Path, good) -> None:
    _, lock, _ = good
    secret = "s3cr3t-pa55word"
    url = f"https://bob:{secret}@127.0.0.1:9/simple"
    plan = cli("restore", str(lock), "--dry-run", "--json", "--index-url", url)
    assert plan.returncode == 0 and secret not in plan.stdout + plan.stderr
    assert "https://127.0.0.1:9/simple" in plan.stdout
    failed = cli("restore", str(lock), "--yes", "--rebuild", "--offline", "--index-url", url)
    assert failed.returncode == 1 and secret not in failed.stdout + failed.stderr


def test_pins_under_no_index_come_from_the_wheelhouse_not_the_default_index() -> None:
    from envguard.restore.plan import Overrides, default_source

    assert default_source(Overrides()) == "the default index"
    assert default_source(Overrides(no_index=True, find_links=("/wheels",))) == "find-links /wheels"
    assert default_source(Overrides(no_index=True)) == "no index (--no-index)"
    assert (
        default_source(Overrides(index_url="https://u:p@mirror/simple")) == "https://mirror/simple"
    )


def test_a_plans_changes_are_records(tmp_path: Path) -> None:
    """What restore moves is the package, the venv's version and the lock's, in --json as
    such (the screen's words are tested above) (#22)."""
    from envguard.restore.plan import Overrides, VersionChange, plan
    from tests.factories import base, dist

    venv = base(packages=(dist("torch", "2.11.0+cu128"), dist("transformers", "5.8.1")))
    the_plan = plan(base(), tmp_path / "venv", venv, Overrides())
    assert the_plan.changes == (VersionChange(name="transformers", old="5.8.1", new="5.6.0"),)
    assert the_plan.to_dict()["changes"] == [
        {"name": "transformers", "old": "5.8.1", "new": "5.6.0"}
    ]


def test_what_a_plan_cannot_pin_and_removes_are_records(tmp_path: Path) -> None:
    """A reason is the reason, ': ' and all, worded as before by the line the screen and the
    refusals share; verify leaves the package out by its name, not by the words' first one;
    what goes away is each package's record, its venv version and absent from the lock
    (#22)."""
    import dataclasses

    from envguard.drift import Member
    from envguard.output.human import Human, skipped_line
    from envguard.restore import build
    from tests.factories import base, dist

    odd = dataclasses.replace(dist("odd-pkg", "1.0"), problem="METADATA: no Version: field")
    lock = base(packages=(*base().packages, odd))
    venv = base(packages=(*base().packages, dist("rich", "15.0.0"), dist("six", "1.17.0")))
    the_plan = plan(lock, tmp_path / "venv", venv, Overrides())
    (skipped,) = the_plan.skipped
    assert skipped == Skipped(
        name="odd-pkg", version="1.0", reason="recorded incompletely (METADATA: no Version: field)"
    )
    said = "odd-pkg 1.0: recorded incompletely (METADATA: no Version: field)"
    assert skipped_line(skipped) == said
    assert the_plan.to_dict()["skipped"] == [
        {"name": "odd-pkg", "version": "1.0",
         "reason": "recorded incompletely (METADATA: no Version: field)"}
    ]  # fmt: skip
    screen = "\n".join(Human(width=200)._plan(the_plan, full=False, unchanged=False))
    assert f"cannot pin {said}" in screen.splitlines()
    # verify: the skipped package's row is no mismatch, whatever its version there
    row = drift.Change(severity="warning", area="packages", subject="odd-pkg", old="1.0",
                       new="absent", why="w")  # fmt: skip
    assert build._skipped(row, the_plan)
    assert not build._skipped(dataclasses.replace(row, subject="odd-pkg 1.0"), the_plan)

    members = [m for r in the_plan.removals for m in r.members]
    assert sorted(members, key=lambda m: m.name) == [
        Member(name="rich", old="15.0.0", new="absent"),
        Member(name="six", old="1.17.0", new="absent"),
    ]
    assert {"name": "rich", "old": "15.0.0", "new": "absent", "cause": ""} in [
        m for r in the_plan.to_dict()["removals"] for m in r["members"]
    ]
