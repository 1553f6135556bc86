"""A cache archive and lockfile written by an adversary, run as the user would run them:
``envguard restore --cache`` (in-process) into a fake home that holds a ``.ssh``.

After each refused attack nothing was written anywhere: the fake home, the project and the
caches are listed before and after.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import tarfile
from pathlib import Path

import pytest

from envguard import lockfile
from envguard.errors import NotRestored
from envguard.restore import cache_archive
from tests.project import Project, invoke

Member = tuple[tarfile.TarInfo, bytes]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home among others' (``users/me``), with ssh settings but no authorized_keys yet."""
    me = tmp_path / "users" / "me"
    (me / ".ssh").mkdir(parents=True)
    (me / ".ssh" / "known_hosts").write_text("github.com ssh-ed25519 AAAA\n")
    (me / ".cache").mkdir()
    (me / ".bashrc").write_text("# mine\n")
    (tmp_path / "users" / "bob").mkdir()
    monkeypatch.setenv("HOME", str(me))
    return me


def _listing(root: Path) -> dict[str, str]:
    out = {}
    for folder, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            path = Path(folder, name)
            rel = str(path.relative_to(root))
            if path.is_symlink():
                out[rel] = "-> " + os.readlink(path)
            elif path.is_dir():
                out[rel] = "dir"
            else:
                with path.open("rb") as fh:
                    out[rel] = hashlib.file_digest(fh, "sha256").hexdigest()
    return out


def _world(project: Project) -> dict[str, str]:
    """Everything a restore could touch: the tests' tmp folder (home, project, venv) and the
    folder the caches are in (Inductor's and Triton's), envguard's own stat cache aside."""
    caches = project.cache.parent
    outside = {f"caches/{k}": v for k, v in _listing(caches).items()}
    return {
        **_listing(project.root.parent),
        **{k: v for k, v in outside.items() if not k.startswith("caches/envguard-cache")},
    }


def _file(name: str, data: bytes = b"x") -> Member:
    return tarfile.TarInfo(name), data


def _entry(project: Project, *, folder: str = "0-x", kind: str = "inductor",
           path: str | None = None) -> dict[str, object]:  # fmt: skip
    cache = next(c for c in lockfile.read(project.lock).caches if c.kind == "inductor")
    entry: dict[str, object] = {"folder": folder, **cache.to_dict(), "kind": kind}
    if path is not None:
        entry["path"] = path
    return entry


def _archive(project: Project, members: list[Member], manifest: list[dict[str, object]]) -> None:
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


def _record_custom(project: Project, path: str) -> None:
    """The lock edit of the attack: a custom cache recorded at ``path``."""
    locked = lockfile.read(project.lock)
    evil = dataclasses.replace(locked.caches[0], kind="custom", path=path)
    lockfile.write(project.lock, dataclasses.replace(locked, caches=(*locked.caches, evil)))


def _custom_attack(project: Project, path: str, members: list[Member] | None = None) -> None:
    _record_custom(project, path)
    payload = members or [_file("0-x/authorized_keys", b"ssh-ed25519 AAAA evil")]
    _archive(project, payload, [_entry(project, kind="custom", path=path)])


def _restore(project: Project, *args: str) -> tuple[int, str, str]:
    return invoke("restore", str(project.lock), "--cache", *args, env=project.activated())


def _refused(project: Project, message: str, *args: str) -> str:
    """A real restore refuses with ``message`` in one line, and writes nothing anywhere."""
    before = _world(project)
    code, out, err = _restore(project, *args)
    assert code == 1 and message in err, out + err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert _world(project) == before
    return err


# ---------------------------------------------------------------------------------------------
# Where a cache goes: normalised, and only a folder this environment or the user names


@pytest.mark.parametrize(
    "path",
    ["{home}/.cache/../.ssh", "/{home}/.ssh", "{tmp}/train/../users/me/.ssh",
     "{tmp}/users/me/.cache/./../.ssh"],
    ids=["dotdot-in-cache", "double-slash", "dotdot-from-project", "dot-and-dotdot"],
)  # fmt: skip
def test_a_cache_path_cannot_climb_into_ssh(
    project: Project, home: Path, tmp_path: Path, path: str
) -> None:
    project.snapshot()
    _custom_attack(project, path.format(home=home, tmp=tmp_path))
    _refused(project, "not a cache folder")
    assert not (home / ".ssh" / "authorized_keys").exists()


def test_a_relative_cache_path_is_refused(project: Project, home: Path) -> None:
    project.snapshot()
    _custom_attack(project, "../users/me/.ssh")  # from the project's root
    _refused(project, "not an absolute path")


def test_a_custom_cache_the_user_did_not_allow_is_refused_with_how(
    project: Project, home: Path, tmp_path: Path
) -> None:
    project.snapshot()
    aot = tmp_path / "aot-cache"
    _custom_attack(project, str(aot), [_file("0-x/entry", b"kernel")])
    err = _refused(project, f"--cache-dir {aot}")
    assert "cache-dirs" in err and "[tool.envguard]" in err
    assert not aot.exists()


@pytest.mark.parametrize("how", ["flag", "config"])
def test_a_custom_cache_the_user_allows_is_restored(
    project: Project, home: Path, tmp_path: Path, how: str
) -> None:
    project.snapshot()
    aot = tmp_path / "aot-cache"
    _custom_attack(project, str(aot), [_file("0-x/entry", b"kernel")])
    args: tuple[str, ...] = ()
    if how == "flag":
        args = ("--cache-dir", str(aot))
    else:
        project.write("pyproject.toml", f'[tool.envguard]\ncache-dirs = ["{aot}"]\n')
    code, out, err = _restore(project, *args)
    assert code == 0 and "Restored cache: custom, 1 file" in out, out + err
    assert (aot / "entry").read_bytes() == b"kernel"


@pytest.mark.parametrize(
    "path",
    ["/etc/cron.d", "/etc/profile.d", "/usr/local/bin", "//etc", "/tmp/../etc", "/", "/root",
     "{home}", "{home}/.ssh", "{home}/.config/autostart", "{home}/../bob/.cache/torch",
     "relative/cache"],
)  # fmt: skip
def test_never_a_cache_folder_even_when_allowed(home: Path, path: str) -> None:
    with pytest.raises(NotRestored, match=r"not a cache folder|not an absolute path"):
        cache_archive._plausible_cache(Path(path.format(home=home)))


@pytest.mark.parametrize(
    "path", ["{home}/.cache/torch-aot", "{home}/.triton/cache", "/scratch/aot", "{tmp}/aot"]
)
def test_plausible_cache_folders(home: Path, tmp_path: Path, path: str) -> None:
    cache_archive._plausible_cache(Path(path.format(home=home, tmp=tmp_path)))
