"""restore never loses, hides or wedges, and cannot be turned against the user.

Faults (kills at every phase, back-to-back and concurrent restores) and attacks (crafted
archives, hostile lockfiles, secrets in patches) on real projects, venvs and repositories.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from envguard import lockfile, protect
from envguard.demo import incident
from envguard.demo.cache import BuiltBy, make
from envguard.errors import NotRestored
from envguard.restore import cache_archive, transaction
from tests.conftest import git, siblings, uv_bin
from tests.project import Project, invoke

OFFLINE = ("--offline", "--yes")


def _restore(project: Project, *args: str, env: dict[str, str | None] | None = None):
    return invoke(
        "restore", str(project.lock), "--find-links", str(project.house), *OFFLINE, *args,
        env={**project.activated(), **(env or {})},
    )  # fmt: skip


def _torch(venv: Path) -> str:
    code = "import torch.version as v; print(v.__version__)"
    return subprocess.run(
        [str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()


# ---------------------------------------------------------------------------------------------
# It never hides or loses the user's files


@pytest.mark.slow
def test_all_keeps_the_lockfile_and_archive_out_of_the_stash(
    project: Project, sglang_house: Path
) -> None:
    project.write("model.py", "def forward(x):\n    return x + 1\n")
    project.snapshot("--save-cache")
    # the incident: venv drifted, cache gone, the patch committed away and new work started
    incident.swap_in_sglang(project.venv, sglang_house)
    shutil.rmtree(project.cache)
    project.commit("wip", "model.py")
    project.write("train.py", "new work\n")
    project.write("notes/scratch.txt", "mine\n")
    code, out, err = _restore(project, "--all")
    assert code == 0, err
    # caches before code, the stash said, envguard's own files never stashed
    assert out.index("Restored cache") < out.index("Restored code")
    assert "saved your uncommitted work as stash@{0}" in out
    own = sorted(p.name for p in (project.root / "lockfiles").iterdir())
    assert own == [".gitignore", "train.envguard-caches.tar.gz", "train.envguard.toml"]
    stashed = git(project.root, "stash", "show", "--include-untracked", "--name-only", "stash@{0}")
    assert sorted(stashed.split()) == ["notes/scratch.txt", "train.py"]
    assert _torch(project.venv) == "2.11.0+cu128"
    assert (project.root / "model.py").read_text() == "def forward(x):\n    return x + 1\n"
    assert project.verdict().found() == set()


def test_a_committed_lockfile_stays_in_place_across_the_checkout(project: Project) -> None:
    project.write("model.py", "def forward(x):\n    return x + 1\n")
    project.snapshot()
    git(project.root, "checkout", "-q", "--", "model.py")
    project.commit("lock", "lockfiles")  # the lock's commit is after the snapshot's HEAD
    head = git(project.root, "rev-parse", "HEAD").strip()
    before = project.lock.read_bytes()
    code, out, err = _restore(project, "--code", "--dry-run")
    assert code == 0, err
    said = " ".join(out.split())
    assert f"would stay at HEAD {head[:12]}, which has the snapshot's code" in said  # as it will
    code, out, err = _restore(project, "--code")
    assert code == 0, err
    assert f"HEAD at {head[:12]} (main), which has the snapshot's code" in " ".join(out.split())
    assert project.lock.read_bytes() == before
    # HEAD differs from the snapshot's only by envguard's own files: stay on the branch
    assert git(project.root, "rev-parse", "HEAD").strip() == head
    assert git(project.root, "branch", "--show-current").strip() == "main"
    assert "(main)" in out
    assert (project.root / "model.py").read_text() == "def forward(x):\n    return x + 1\n"


def test_a_lockfile_the_snapshot_commit_lacks_stays_across_a_real_checkout(
    project: Project,
) -> None:
    project.snapshot()
    project.commit("lock", "lockfiles")
    project.write("train.py", "print('later work')\n")
    project.commit("later work", "train.py")  # HEAD now differs by code, too
    before = project.lock.read_bytes()
    code, out, err = _restore(project, "--code")
    assert code == 0, err
    assert project.lock.read_bytes() == before  # still there, though that commit has no such file
    assert "envguard's own files kept in place: lockfiles/train.envguard.toml" in out
    assert "print('later work')" not in (project.root / "train.py").read_text()


def test_work_saved_is_said_even_when_the_code_step_fails(project: Project) -> None:
    project.write("model.py", "def forward(x):\n    return x + 1\n")
    project.snapshot()
    git(project.root, "checkout", "-q", "--", "model.py")
    project.write("train.py", "my work\n")
    (project.root / ".git" / "index.lock").write_text("")  # another git holds the index
    code, _out, err = _restore(project, "--code")
    assert code == 2 and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and "git" in err and "index.lock" in err
    (project.root / ".git" / "index.lock").unlink()
    assert (project.root / "train.py").read_text() == "my work\n"  # nothing was lost


@pytest.mark.slow
def test_json_is_one_document_for_all_steps(project: Project) -> None:
    project.snapshot("--save-cache")
    code, out, err = _restore(project, "--all", "--json", "--rebuild")
    assert code == 0, err
    doc = json.loads(out)  # one document, not one per step
    assert set(doc["result"]) >= {"venv", "caches", "code", "plan"}


# ---------------------------------------------------------------------------------------------
# It never wedges


@pytest.mark.slow
def test_twenty_back_to_back_restores(project: Project) -> None:
    project.snapshot()
    for i in range(20):
        code, _, err = _restore(project, "--rebuild")
        assert code == 0, f"restore {i}: {err}"
    backups = transaction.backups(project.venv)
    assert len(backups) == 20 and len({b.name for b in backups}) == 20
    assert not (project.venv.parent / ".venv.envguard-restore.json").exists()
    assert _torch(project.venv) == "2.11.0+cu128"


@pytest.mark.parametrize(
    "phase",
    ["building", "verifying", "swapping-before", "swapping-exchanged", "swapping-between",
     "swapped-unjournaled", "journal-temp-file"],
)  # fmt: skip
@pytest.mark.slow
def test_a_restore_killed_at_every_phase_is_put_right(project: Project, phase: str) -> None:
    """What a kill -9 at each phase leaves behind, made exactly, then the next restore."""
    project.snapshot()
    venv = project.venv
    paths = transaction.Paths.for_venv(venv, transaction.stamp())
    built = venv.parent / "built"
    shutil.copytree(venv, built, symlinks=True)  # a verified new venv
    old_ino = venv.stat().st_ino
    if phase in ("building", "verifying"):
        shutil.copytree(built, paths.new, symlinks=True)
        transaction.record(paths, phase)
    elif phase == "swapping-before":
        shutil.copytree(built, paths.new, symlinks=True)
        transaction.record(paths, "swapping", old_inode=old_ino)
    elif phase == "swapping-exchanged":
        shutil.copytree(built, paths.new, symlinks=True)
        transaction.record(paths, "swapping", old_inode=old_ino)
        venv.rename(paths.backup)
        paths.new.rename(venv)
        paths.backup.rename(paths.new)  # as RENAME_EXCHANGE leaves them
    elif phase == "swapping-between":
        shutil.copytree(built, paths.new, symlinks=True)
        transaction.record(paths, "swapping", old_inode=old_ino)
        venv.rename(paths.backup)  # the first of the fallback's two renames
    elif phase == "swapped-unjournaled":
        transaction.record(paths, "swapping", old_inode=old_ino)
        venv.rename(paths.backup)
        shutil.copytree(built, venv, symlinks=True)
    else:
        (venv.parent / f".{paths.journal.name}.a1b2c3.tmp").write_text("{")
    code, out, err = _restore(project, "--rebuild")
    assert code == 0, err
    assert "\nrecovered " in "\n" + out
    left = [n for n in siblings(venv) if "envguard-new" in n or "restore.json" in n]
    assert left == []
    assert _torch(venv) == "2.11.0+cu128"


@pytest.mark.slow
def test_a_real_kill_9_during_the_install(project: Project, tmp_path: Path) -> None:
    project.snapshot()
    slow = tmp_path / "slow-uv"
    slow.write_text(
        f'#!/bin/sh\nif [ "$1" = pip ] && [ "$2" = sync ]; then touch {tmp_path}/syncing; '
        f'sleep 60; fi\nexec {uv_bin()} "$@"\n'
    )
    slow.chmod(0o755)
    argv = [sys.executable, "-m", "envguard", "restore", str(project.lock), "--rebuild",
            "--find-links", str(project.house), *OFFLINE]  # fmt: skip
    proc = subprocess.Popen(
        argv, env={**os.environ, "ENVGUARD_UV": str(slow)}, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    for _ in range(400):
        if (tmp_path / "syncing").exists():
            break
        time.sleep(0.05)
    os.killpg(proc.pid, 9)
    proc.wait()
    code, out, err = _restore(project, "--rebuild")
    assert code == 0 and "removed its unfinished venv" in out, err
    assert not [n for n in siblings(project.venv) if "envguard-new" in n]
    # the requirements file lived inside the half-built venv: nothing left in /tmp either
    assert _torch(project.venv) == "2.11.0+cu128"


@pytest.mark.slow
def test_a_venv_and_its_symlink_restored_at_once(project: Project, tmp_path: Path) -> None:
    project.snapshot()
    link = tmp_path / "train-venv-link"
    link.symlink_to(project.venv)
    slow = tmp_path / "slow-uv"  # syncs once the second restore has been refused (60 s at most)
    slow.write_text(
        f'#!/bin/sh\nif [ "$1" = pip ] && [ "$2" = sync ]; then touch {tmp_path}/syncing; '
        f"i=0; while [ ! -e {tmp_path}/release ] && [ $i -lt 1200 ]; do sleep 0.05; "
        f'i=$((i+1)); done; fi\nexec {uv_bin()} "$@"\n'
    )
    slow.chmod(0o755)
    argv = [sys.executable, "-m", "envguard", "restore", str(project.lock), "--rebuild",
            "--venv", str(link), "--find-links", str(project.house), *OFFLINE]  # fmt: skip
    first = subprocess.Popen(
        argv, env={**os.environ, "ENVGUARD_UV": str(slow)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    for _ in range(400):
        if (tmp_path / "syncing").exists():
            break
        time.sleep(0.05)
    code, _, err = _restore(project, "--rebuild", "--venv", str(project.venv))
    (tmp_path / "release").touch()  # the first restore goes on
    _out, first_err = first.communicate(timeout=120)
    assert code == 1 and "another envguard restore" in err
    assert first.returncode == 0, first_err
    assert link.is_symlink() and link.resolve() == project.venv.resolve()
    assert _torch(project.venv) == "2.11.0+cu128"


# ---------------------------------------------------------------------------------------------
# It does what it says, and no more


@pytest.mark.slow
def test_a_venv_that_matches_is_left_alone(project: Project) -> None:
    project.snapshot()
    code, out, err = _restore(project)
    assert code == 0 and "Already matches the lock" in out, err
    assert transaction.backups(project.venv) == []
    code, _, err = _restore(project, "--rebuild")
    assert code == 0 and len(transaction.backups(project.venv)) == 1, err


@pytest.mark.slow
def test_backups_are_listed_and_pruned(project: Project) -> None:
    project.snapshot()
    for _ in range(3):
        assert _restore(project, "--rebuild")[0] == 0
    code, out, _ = invoke("backups", "--json", env=project.activated())
    assert code == 0 and len(json.loads(out)["result"]["backups"]) == 3
    code, out, _ = invoke("backups", "--prune", "--keep", "1", env=project.activated())
    assert code == 0 and out.count("removed ") == 2
    assert len(transaction.backups(project.venv)) == 1


@pytest.mark.slow
def test_protection_is_carried_over(project: Project, sglang_house: Path) -> None:
    project.snapshot()
    code, _, err = invoke("protect", str(project.lock), env=project.activated())
    assert code == 0, err
    (project.venv / "pip.conf").write_text(
        (project.venv / "pip.conf").read_text() + "\n[global]\ntimeout = 77\n"
    )
    code, out, err = _restore(project, "--rebuild")
    assert code == 0 and "carried over" in out, err
    pins = (project.venv / protect.CONSTRAINTS).read_text()
    assert "torch==2.11.0+cu128" in pins
    conf = (project.venv / "pip.conf").read_text()
    assert str(project.venv / protect.CONSTRAINTS) in conf and "timeout = 77" in conf
    assert "UV_CONSTRAINT" in (project.venv / "bin" / "activate").read_text()


@pytest.mark.slow
def test_a_symlinked_venv_keeps_its_link(project: Project, tmp_path: Path) -> None:
    project.snapshot()
    link = tmp_path / "current"
    link.symlink_to(project.venv)
    code, _, err = _restore(project, "--rebuild", "--venv", str(link))
    assert code == 0, err
    assert link.is_symlink() and _torch(link) == "2.11.0+cu128"
    assert len(transaction.backups(project.venv)) == 1


@pytest.mark.slow
def test_system_site_packages_survive_a_restore(project: Project) -> None:
    cfg = project.venv / "pyvenv.cfg"
    cfg.write_text(
        cfg.read_text().replace(
            "include-system-site-packages = false", "include-system-site-packages = true"
        )
    )
    project.snapshot()
    code, _, err = _restore(project, "--rebuild")
    assert code == 0, err
    assert "include-system-site-packages = true" in cfg.read_text()
    assert project.verdict().found() == set()


def test_find_links_adds_to_the_indexes_and_messages_say_exactly(project: Project) -> None:
    project.snapshot()
    code, out, _err = invoke(
        "restore", str(project.lock), "--dry-run", "--json", "--find-links", "/wheels"
    )
    plan = json.loads(out)["result"]["plan"]
    assert code == 0 and plan["indexes"].startswith("the default index (PyPI or UV_INDEX_URL)")
    assert "find-links /wheels" in plan["indexes"]
    assert "torch-family from https://download.pytorch.org/whl/cu128" in plan["indexes"]


@pytest.mark.slow
def test_no_network_is_said_plainly(project: Project) -> None:
    project.snapshot()
    env = {"UV_OFFLINE": None, "UV_INDEX_URL": "http://127.0.0.1:9/simple", "UV_HTTP_RETRIES": "0"}
    code, _, err = invoke(
        "restore", str(project.lock), "--yes", "--rebuild", "--venv", str(project.root / "new"),
        env={**project.activated(), **env},
    )  # fmt: skip
    assert code == 1 and "could not reach" in err and "--find-links" in err, err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.slow
def test_missing_pins_are_named_with_their_versions(project: Project, tmp_path: Path) -> None:
    project.snapshot()
    partial = tmp_path / "partial"
    partial.mkdir()
    for wheel in project.house.glob("*.whl"):
        if not wheel.name.startswith(("numpy", "tokenizers")):
            shutil.copy(wheel, partial)
    code, _, err = invoke(
        "restore", str(project.lock), "--rebuild", "--find-links", str(partial), *OFFLINE
    )
    assert code == 1 and "numpy==2.3.0" in err and "tokenizers==0.22.1" in err, err


@pytest.mark.slow
def test_a_deleted_base_interpreter_and_python_flag(project: Project, tmp_path: Path) -> None:
    project.snapshot()
    locked = lockfile.read(project.lock)
    gone = dataclasses.replace(locked.python, home=str(tmp_path / "gone" / "bin"), version="3.8.99")
    lockfile.write(project.lock, dataclasses.replace(locked, python=gone))
    code, _, err = _restore(project, "--rebuild")
    assert code == 2 and "no Python 3.8.99 interpreter found" in err
    assert "uv python find:" in err and "--python PATH" in err
    lockfile.write(project.lock, locked)
    real = os.path.realpath(project.venv / "bin" / "python")
    code, _, err = _restore(project, "--rebuild", "--python", real)
    assert code == 0, err


def test_export_of_a_missing_wheel_is_an_export_error(project: Project, tmp_path: Path) -> None:
    project.snapshot()
    locked = lockfile.read(project.lock)
    odd = dataclasses.replace(
        locked.packages[0], direct_url=f"file://{tmp_path}/gone-1.0-py3-none-any.whl"
    )
    lockfile.write(project.lock, dataclasses.replace(locked, packages=(odd, *locked.packages[1:])))
    code, _, err = invoke("export", str(project.lock), "--find-links", str(project.house))
    assert code == 2 and "cannot export" in err and "not restored" not in err


# ---------------------------------------------------------------------------------------------
# It cannot be turned against the user: crafted archives


def _archive_with(
    project: Project, members: list[tuple[tarfile.TarInfo, bytes]], manifest: list[dict]
) -> None:
    data = json.dumps({"schema": 1, "caches": manifest}).encode()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for info, payload in members:
            info.size = len(payload) if info.isfile() else 0
            tar.addfile(info, io.BytesIO(payload) if info.isfile() else None)
        info = tarfile.TarInfo(cache_archive.MANIFEST)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    cache_archive.archive_path(project.lock).write_bytes(buf.getvalue())


def _manifest(project: Project, kind: str = "inductor", path: str | None = None) -> dict:
    snap = lockfile.read(project.lock)
    cache = next(c for c in snap.caches if c.kind == "inductor")
    entry = {"folder": "0-x", **cache.to_dict(), "kind": kind}
    if path is not None:
        entry["path"] = path
    return entry


def _file(name: str, data: bytes = b"x") -> tuple[tarfile.TarInfo, bytes]:
    return tarfile.TarInfo(name), data


def _link(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info, b""


def _device(name: str) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type = tarfile.CHRTYPE
    return info, b""


@pytest.mark.parametrize(
    "member",
    [
        _file("0-x/../../escaped"),
        _file("0-x//etc/passwd"),
        _file("/abs/evil"),
        _file("0-x/a/../../b"),
        _link("0-x/fxgraph/link", "/etc/passwd"),
        _link("0-x/fxgraph/hard", "/etc/passwd", tarfile.LNKTYPE),
        _device("0-x/dev"),
        _file("elsewhere/file"),
    ],
    ids=["dotdot", "double-slash", "absolute", "inner-dotdot", "symlink", "hardlink", "device",
         "unlisted-folder"],
)  # fmt: skip
def test_crafted_members_are_refused_and_nothing_is_written(
    project: Project, tmp_path: Path, member: tuple[tarfile.TarInfo, bytes]
) -> None:
    project.snapshot()
    _archive_with(project, [_file("0-x/fxgraph/good", b"ok"), member], [_manifest(project)])
    shutil.rmtree(project.cache)
    code, _, err = invoke("restore", str(project.lock), "--cache", env=project.activated())
    assert code == 1 and "refusing" in err, err
    assert not project.cache.exists()  # not even the good member
    assert not (tmp_path / "escaped").exists()


def test_the_destination_never_comes_from_the_archive(project: Project, tmp_path: Path) -> None:
    project.snapshot()
    ssh = tmp_path / "home" / ".ssh"
    entry = _manifest(project, kind="custom", path=str(ssh))
    _archive_with(project, [_file("0-x/authorized_keys", b"ssh-ed25519 AAAA evil")], [entry])
    code, _, err = invoke("restore", str(project.lock), "--cache", env=project.activated())
    assert code == 1 and "the lockfile records no such cache" in err
    assert not ssh.exists()


def test_a_bad_second_folder_leaves_the_first_unpacked_nowhere(project: Project) -> None:
    project.snapshot()
    first, second = _manifest(project), {**_manifest(project), "folder": "1-y", "kind": "triton"}
    _archive_with(
        project,
        [_file("0-x/fxgraph/a", b"a"), _link("1-y/k", "/etc/shadow")],
        [first, second],
    )
    shutil.rmtree(project.cache)
    code, _, _ = invoke("restore", str(project.lock), "--cache", env=project.activated())
    assert code == 1 and not project.cache.exists()


@pytest.mark.slow
def test_a_compression_bomb_is_refused_before_writing(project: Project, monkeypatch) -> None:
    project.snapshot()
    zeros = b"\0" * (64 << 20)  # 64 MB that gzip packs into ~64 kB
    _archive_with(project, [_file("0-x/fxgraph/bomb", zeros)], [_manifest(project)])
    assert cache_archive.archive_path(project.lock).stat().st_size < 1 << 20
    shutil.rmtree(project.cache)
    real = shutil.disk_usage

    def tight(path):  # a disk with 32 MB left
        return real(path)._replace(free=32 << 20)

    monkeypatch.setattr(shutil, "disk_usage", tight)
    locked = lockfile.read(project.lock)
    with pytest.raises(NotRestored, match=r"need 67 MB .* only 34 MB are free"):
        cache_archive.restore(project.lock, locked, locked)
    assert not project.cache.exists()
    assert not list(project.cache.parent.glob(".*envguard-unpack*"))


def test_a_genuine_archive_round_trips(project: Project) -> None:
    project.snapshot("--save-cache")
    before = {p.relative_to(project.cache): p.read_bytes() for p in project.cache.rglob("*")
              if p.is_file()}  # fmt: skip
    shutil.rmtree(project.cache)
    code, out, err = invoke("restore", str(project.lock), "--cache", env=project.activated())
    assert code == 0 and "Restored cache: inductor" in out, err
    after = {p.relative_to(project.cache): p.read_bytes() for p in project.cache.rglob("*")
             if p.is_file()}  # fmt: skip
    assert after == before


def test_an_archive_for_another_torch_is_refused(project: Project) -> None:
    shutil.rmtree(project.cache)
    make(project.cache, BuiltBy(torch="2.11.0+cu130", cuda="13.0"))
    project.snapshot("--save-cache")
    code, _, err = invoke("restore", str(project.lock), "--cache", env=project.activated())
    assert code == 1 and "would not be reused here: torch 2.11.0+cu130 (cache)" in err


# ---------------------------------------------------------------------------------------------
# Secrets by shape never reach the lockfile, the screen or the JSON

SECRETS = {
    "json": ('CONFIG = {"token": "%s"}\n', "a1b2c3d4e5f6a7b8c9d0e1f2"),
    "hf-login": ('login("%s")\n', "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123456"),
    "bearer": ('HEADERS = {"Authorization": "Bearer %s"}\n', "x9Y8z7W6v5U4t3S2r1Q0pOnM"),
    "environ": (
        'os.environ["AWS_SECRET_ACCESS_KEY"] = "%s"\n', "wJalrXUtnFEMI/K7MDENG/bPxRfiCY3XAMPLEKEY"
    ),
    "github": ('gh = "%s"\n', "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"),
    "wandb": ('wandb.login(key="%s")\n', "0123456789abcdef0123456789abcdef01234567"),
    "getenv-default": ('api_key = os.getenv("X", "%s")\n', "sk-proj-" + "Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2"),
    "aws-id": ('AWS_ID = "%s"\n', "AKIAIOSFODNN7EXAMPLE"),
    "jwt": (
        'T = "%s"\n',
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THs",
    ),
    "slack": ('HOOK = "%s"\n', "xoxb-" + "123456789012-abcdefghijkl"),
}  # fmt: skip
PEM = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU\nQyNTUxOQAAACDk\n"
    "-----END OPENSSH PRIVATE KEY-----\n"
)


def test_secret_shapes_in_a_dirty_repo_never_reach_a_lockfile(project: Project) -> None:
    body = "".join(line % value for line, value in SECRETS.values())
    project.write("secrets_in_code.py", "import os\n")
    project.commit("a module")
    project.write("secrets_in_code.py", "import os\n" + body + 'KEY_PEM = """\n' + PEM + '"""\n')
    project.write("notes.txt", body)  # an untracked file holds them too
    project.snapshot()
    text = project.lock.read_text()
    _code, out, err = invoke("diff", "--show-patch", "--json", env=project.activated())
    for name, (_, value) in SECRETS.items():
        assert value not in text, name
        assert value not in out + err, name
    assert "b3BlbnNzaC1rZXktdjEAAAAABG5vbmU" not in text + out
    assert "token_count = 5" not in text  # sanity: the module's ordinary lines stay readable
    assert "import os" in text


def test_ordinary_code_is_not_redacted(project: Project) -> None:
    ordinary = (
        "token_count = 5\npassword = ask()\nsort_key = 'name'\nmonkey = 'banana_split_2024x'\n"
        "author_count = 3\nurl = 'https://pypi.org/simple'\n"
    )
    project.write("model.py", ordinary)
    project.snapshot()
    patch = lockfile.read(project.lock).code.patch
    for line in ordinary.splitlines():
        assert f"+{line}\n" in patch, line


# ---------------------------------------------------------------------------------------------
# Hostile lockfiles


def test_a_version_cannot_inject_an_option_into_uv(project: Project) -> None:
    project.snapshot()
    text = project.lock.read_text().replace(
        'version = "5.6.0"', 'version = "5.6.0\\n--find-links /evil"'
    )
    project.lock.write_bytes(lockfile.seal(text.encode()))  # a teammate's commit, sealed
    code, out, err = invoke("restore", str(project.lock), "--dry-run")
    assert code == 2 and out == "" and ".version:" in err and "PEP 440" in err


@pytest.mark.parametrize(
    ("mutation", "message"),
    [
        (('name = "numpy"', 'name = "numpy --index-url=http://evil"'), "is not a package name"),
        (('version = "2.3.0"', 'version = "2.3.0; rm -rf /"'), "is not a PEP 440 version"),
        (("[python]\n", '[python]\nhome = "/x\\n--python /evil"\n'), "is not one line"),
    ],
)
def test_lock_fields_that_reach_uv_are_validated(project: Project, mutation, message) -> None:
    project.snapshot()
    old, new = mutation
    text = project.lock.read_text()
    if "home" in new:
        text = "\n".join(ln for ln in text.splitlines() if not ln.startswith("home =")) + "\n"
    assert old in text
    project.lock.write_bytes(lockfile.seal(text.replace(old, new, 1).encode()))
    code, _, err = invoke("restore", str(project.lock), "--dry-run")
    assert code == 2 and message in err, err


def test_deep_nesting_and_a_huge_name_are_one_line_errors(tmp_path: Path) -> None:
    deep = tmp_path / "deep.envguard.toml"
    deep.write_text("schema = 2\nx = " + "[" * 500 + "]" * 500 + "\n")
    code, _, err = invoke("diff", str(deep), str(deep))
    assert code == 2 and "nested too deeply" in err and "Traceback" not in err
    start = time.perf_counter()
    from envguard.uv import missing_packages

    assert missing_packages("Because " + "a" * 100_000 + " was not found") == []
    assert missing_packages("Because numpy==2.3.0 was not found") == ["numpy==2.3.0"]
    assert time.perf_counter() - start < 2.0  # linear: a quadratic scan takes ~50 s here


# ---------------------------------------------------------------------------------------------
# Found by an adversarial review of restore: each was wrong once.


@pytest.mark.parametrize("what", ["project folder", "source file"])
def test_restore_never_moves_aside_what_is_not_a_venv(project: Project, what: str) -> None:
    project.snapshot()
    target = project.root if what == "project folder" else project.root / "train.py"
    before = sorted(p.name for p in target.parent.iterdir())
    code, _, err = _restore(project, "--venv", str(target))
    assert code == 2 and "not a venv" in err and "will not move it aside" in err
    assert sorted(p.name for p in target.parent.iterdir()) == before


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("path", "datasets", "is not an absolute path"),
        ("prompt", 'x" $(touch /tmp/PWNED) "', "is not a plain prompt"),
    ],
)
def test_a_lock_cannot_choose_a_relative_venv_or_a_shell_prompt(
    project: Project, field: str, value: str, message: str
) -> None:
    project.snapshot()
    locked = lockfile.read(project.lock)
    venv = dataclasses.replace(locked.venv, **{field: value})
    project.lock.write_bytes(lockfile.dumps(dataclasses.replace(locked, venv=venv)))
    code, _, err = _restore(project, "--rebuild")
    assert code == 2 and message in err


def test_a_relative_interpreter_home_is_refused(project: Project) -> None:
    project.snapshot()
    locked = lockfile.read(project.lock)
    python = dataclasses.replace(locked.python, home="tools/bin")
    project.lock.write_bytes(lockfile.dumps(dataclasses.replace(locked, python=python)))
    code, _, err = _restore(project, "--rebuild")
    assert code == 2 and "home" in err and "is not an absolute path" in err


def test_code_refuses_to_overwrite_ignored_files(project: Project) -> None:
    project.write("checkpoints", "placeholder\n")
    project.commit("a placeholder")
    project.snapshot()
    project.commit("lock", "lockfiles")
    git(project.root, "rm", "-q", "checkpoints")
    project.write(".gitignore", "checkpoints/\n")
    project.commit("checkpoints are local")
    project.write("checkpoints/step-90000.pt", "3 days of GPU\n")
    code, _, err = _restore(project, "--code")
    assert code == 1 and "ignored files" in err and "checkpoints" in err
    assert (project.root / "checkpoints" / "step-90000.pt").read_text() == "3 days of GPU\n"


def test_own_files_a_killed_code_restore_moved_aside_come_back(project: Project) -> None:
    project.snapshot("--save-cache")
    archive = project.root / "lockfiles" / "train.envguard-caches.tar.gz"
    held = project.root / ".git" / "envguard-held"
    held.mkdir()
    os.replace(archive, held / "0")  # what a kill -9 between hold and put-back leaves
    (held / "held.json").write_text(
        json.dumps({"root": str(project.root), "files": {
            "lockfiles/train.envguard-caches.tar.gz": str(held / "0")}})
    )  # fmt: skip
    code, out, err = _restore(project, "--code")
    assert code == 0, err
    assert archive.is_file() and not held.exists()
    assert "put back lockfiles/train.envguard-caches.tar.gz" in out


def test_the_users_own_older_stash_is_never_taken_for_ours(project: Project) -> None:
    project.write("model.py", "def forward(x):\n    return x + 1\n")
    project.snapshot()
    project.commit("lock", "lockfiles")
    git(project.root, "checkout", "-q", "--", "model.py")
    project.write("data.py", "old experiment\n")
    git(project.root, "stash", "push", "-q", "-m", "my old experiment")
    code, out, _ = _restore(project, "--code")
    assert code == 0 and "saved your uncommitted work" not in out
    assert "my old experiment" in git(project.root, "stash", "list")


def test_a_rollback_stages_again_what_was_staged(project: Project) -> None:
    project.snapshot()
    project.commit("lock", "lockfiles")
    project.write("data.py", "lr = 'A staged'\n")
    git(project.root, "add", "data.py")
    project.write("data.py", "lr = 'B worktree'\n")
    hook = project.root / ".git" / "hooks" / "post-checkout"
    hook.write_text("#!/bin/sh\necho 'git-lfs was not found' >&2\nexit 2\n")
    hook.chmod(0o755)
    code, out, _ = _restore(project, "--code")
    hook.unlink()
    assert code != 0 and "your uncommitted work is back in place" in out
    assert "A staged" in git(project.root, "diff", "--cached")
    assert (project.root / "data.py").read_text() == "lr = 'B worktree'\n"
    assert git(project.root, "stash", "list") == ""


def test_a_lock_cannot_point_a_cache_at_a_home_folder(project: Project, tmp_path: Path) -> None:
    project.snapshot()
    home = Path.home()
    entry = {**_manifest(project), "kind": "custom", "path": str(home / ".ssh")}
    _archive_with(project, [_file("0-x/authorized_keys", b"ssh-ed25519 AAAA evil")], [entry])
    locked = lockfile.read(project.lock)
    evil = dataclasses.replace(locked.caches[0], kind="custom", path=str(home / ".ssh"))
    lockfile.write(project.lock, dataclasses.replace(locked, caches=(evil,)))
    code, _, err = invoke("restore", str(project.lock), "--cache", env=project.activated())
    assert code == 1 and "not a cache folder" in err


def test_a_cache_is_filled_never_rewritten(project: Project) -> None:
    project.snapshot("--save-cache")
    victim = next(p for p in project.cache.rglob("*.best_config"))
    victim.write_text("mine")
    code, _, err = invoke("restore", str(project.lock), "--cache", env=project.activated())
    assert code == 0, err
    assert victim.read_text() == "mine"


@pytest.mark.parametrize(
    "members",
    [
        [_file("0-x/fxgraph/a", b"first"), _file("0-x/fxgraph/a", b"second")],
        [_file("0-x/aaa", b"x"), _file("0-x/fxgraph", b"file"), _file("0-x/fxgraph/b", b"y")],
    ],
    ids=["duplicate", "file-in-the-way"],
)
def test_an_archive_saying_two_things_about_a_path(project: Project, members) -> None:
    project.snapshot()
    _archive_with(project, members, [_manifest(project)])
    shutil.rmtree(project.cache)
    code, _, err = invoke("restore", str(project.lock), "--cache", env=project.activated())
    assert code == 1 and "refusing" in err
    assert not project.cache.exists()


@pytest.mark.slow
def test_a_journal_naming_other_folders_is_not_acted_on(project: Project) -> None:
    project.snapshot()
    checkpoints = project.root / "checkpoints"
    checkpoints.mkdir()
    (checkpoints / "s.pt").write_text("w")
    journal = transaction.Paths.for_venv(project.venv, "x").journal
    journal.write_text(json.dumps({"pid": 1, "phase": "building", "new": str(checkpoints),
                                   "backup": str(project.root / "b")}))  # fmt: skip
    code, out, err = _restore(project, "--rebuild")
    assert code == 0, err
    assert (checkpoints / "s.pt").read_text() == "w" and "naming other folders" in out


def test_code_restores_the_repository_the_lock_is_in(project: Project, tmp_path: Path) -> None:
    project.snapshot()
    project.commit("lock", "lockfiles")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(project.root), str(clone))
    project.write("model.py", "alice's work\n")  # in the original checkout
    code, _, err = invoke(
        "restore", str(clone / "lockfiles" / "train.envguard.toml"), "--code",
        env=project.activated(),
    )  # fmt: skip
    assert code == 0, err
    assert (project.root / "model.py").read_text() == "alice's work\n"
    assert git(project.root, "stash", "list") == ""


@pytest.mark.slow
def test_code_leaves_backup_venvs_and_a_custom_lock_alone(project: Project) -> None:
    project.snapshot("-o", "env-node.toml", "--save-cache")
    (project.venv / ".gitignore").unlink()  # a venv git does not ignore
    project.write(".gitignore", "")
    assert _restore_lock(project, "env-node.toml", "--rebuild")[0] == 0
    backup = transaction.backups(project.venv)[0]
    python = backup / "bin" / "python"
    project.write("model.py", "wip\n")
    code, _, err = _restore_lock(project, "env-node.toml", "--code")
    assert code == 0, err
    assert python.is_symlink() and os.access(python, os.X_OK)
    assert (project.root / "env-node.toml").is_file()
    assert cache_archive.archive_path(project.root / "env-node.toml").is_file()


def _restore_lock(project: Project, lock: str, *args: str):
    return invoke(
        "restore", lock, "--find-links", str(project.house), *OFFLINE, *args,
        env=project.activated(),
    )  # fmt: skip


@pytest.mark.slow
def test_a_wheel_from_a_path_with_a_space(project: Project, tmp_path: Path) -> None:
    from envguard.demo.wheels import build_wheel

    wheels = tmp_path / "my wheels"
    build_wheel(wheels, "localpkg", "1.0")
    project.install(str(next(wheels.glob("*.whl"))))
    project.snapshot()
    code, _out, err = _restore(project, "--rebuild")
    assert code == 0, err
    assert "localpkg-1.0.dist-info" in os.listdir(
        next(project.venv.glob("lib/python*/site-packages"))
    )
    shutil.rmtree(wheels)
    code, _, err = _restore(project, "--rebuild")
    assert code == 1 and "cannot be pinned" in err and "--allow-missing" in err
    assert _restore(project, "--rebuild", "--allow-missing")[0] == 0


def test_a_dirty_file_named_in_latin_1(project: Project) -> None:
    name = os.fsdecode(b"caf\xe9.py")
    project.write(name, "a\n")
    project.commit("latin-1")
    project.write(name, "b\n")
    project.snapshot()
    assert "caf\ufffd.py" in project.lock.read_text()


def test_files_are_written_with_the_users_umask(project: Project) -> None:
    old = os.umask(0o022)
    try:
        project.snapshot()
        assert project.lock.stat().st_mode & 0o777 == 0o644
        mode = (project.venv / "bin" / "activate").stat().st_mode & 0o777
        assert invoke("protect", str(project.lock), env=project.activated())[0] == 0
        assert (project.venv / "bin" / "activate").stat().st_mode & 0o777 == mode
    finally:
        os.umask(old)


def test_code_that_says_redacted_is_not_a_redacted_patch(project: Project) -> None:
    project.write("model.py", 'PLACEHOLDER = "<redacted>"\n')
    project.snapshot()
    git(project.root, "checkout", "-q", "--", "model.py")
    code, _, err = _restore(project, "--code")
    assert code == 0, err


@pytest.mark.slow
def test_all_without_saved_caches_still_restores_the_code(project: Project) -> None:
    project.write("model.py", "def forward(x):\n    return 7 * x\n")
    project.snapshot()
    git(project.root, "checkout", "-q", "--", "model.py")
    code, out, err = _restore(project, "--all", "--rebuild")
    assert code == 0, err
    assert "no compile caches were saved" in out and "Restored code" in out


# ---------------------------------------------------------------------------------------------
# --all: each part is done if it can be, and each says what happened


@pytest.mark.slow
def test_all_with_a_cache_for_another_torch_restores_the_rest_and_says_partly(
    project: Project,
) -> None:
    shutil.rmtree(project.cache)
    make(project.cache, BuiltBy(torch="2.11.0+cu130", cuda="13.0"))
    project.snapshot("--save-cache")
    project.install("plainpkg==2.5")
    project.write("model.py", "def forward(x):\n    return 3 * x\n")  # left dirty
    code, out, err = _restore(project, "--all", "--dry-run")
    assert code == 3, out + err  # the dry run says what the real run will do, and nothing more
    assert err.startswith("error: partly restorable: venv and code would be restored; caches")
    assert "model.py" in git(project.root, "status", "--porcelain")
    code, out, err = _restore(project, "--all")
    assert code == 3, out + err
    assert "match the lock" in out  # the venv was restored
    assert "Caches not restored: the saved inductor cache would not be reused" in " ".join(
        out.split()
    )
    assert "Restored code" in out  # the code was put back all the same
    assert git(project.root, "status", "--porcelain", "--untracked-files=no") == ""
    last = err.strip().splitlines()
    assert len(last) == 1 and last[0].startswith("error: partly restored: venv and code restored;")
    assert "caches not restored: the saved inductor cache would not be reused" in last[0]
    code, out, _ = _restore(project, "--all", "--json")
    doc = json.loads(out)
    assert code == 3 and doc["exit_code"] == 3
    assert [f["part"] for f in doc["result"]["failed"]] == ["caches"]


@pytest.mark.slow
def test_quiet_restore_says_the_verdict_not_the_plan(project: Project) -> None:
    project.snapshot()
    project.install("plainpkg==2.5")
    code, out, err = _restore(project, "-q")
    assert code == 0, err
    assert "Restore plan" not in out and "changes" not in out
    assert "Restored " in out


@pytest.mark.slow
def test_a_split_dry_run_says_the_split(project: Project) -> None:
    project.snapshot()
    project.install("plainpkg==2.5")
    code, out, err = _restore(project, "--split", "datagen", "--dry-run")
    assert code == 0, err
    assert "the old venv becomes tool datagen at" in " ".join(out.split())
