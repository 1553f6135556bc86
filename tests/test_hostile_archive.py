"""A cache archive and lockfile written by an adversary, run as the user would run them:
``envguard restore --cache`` (in-process) into a fake home that holds a ``.ssh``.

After each refused attack nothing was written anywhere: the fake home, the project and the
caches are listed before and after. A dry run says what the real run does, word for word.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import io
import json
import os
import shutil
import tarfile
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from envguard import lockfile
from envguard.demo.cache import BuiltBy, make
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


# ---------------------------------------------------------------------------------------------
# All or none: every member checked against its final place before anything is written


def test_a_link_inside_the_cache_leading_out_writes_nothing(project: Project, home: Path) -> None:
    project.snapshot()
    outside = home / "outside"
    outside.mkdir()
    (project.cache / "victim").symlink_to(outside)
    members = [_file("0-x/fxgraph/aaa-new", b"good"), _file("0-x/victim/new/entry", b"evil")]
    _archive(project, members, [_entry(project)])
    _refused(project, "leads elsewhere")
    assert list(outside.iterdir()) == []
    assert not (project.cache / "fxgraph" / "aaa-new").exists()


def test_a_file_in_the_way_in_the_second_cache_leaves_the_first_untouched(
    project: Project, home: Path
) -> None:
    project.snapshot()
    triton = Path(os.environ["TRITON_CACHE_DIR"])
    triton.mkdir()
    (triton / "k").write_text("a file where the archive has a folder")
    _archive(
        project,
        [_file("0-x/fxgraph/aaa-new", b"good"), _file("1-y/k/x", b"kernel")],
        [_entry(project), _entry(project, folder="1-y", kind="triton")],
    )
    _refused(project, "refusing")


def test_a_failure_while_moving_into_place_puts_every_file_back(
    project: Project, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.snapshot()
    triton = project.cache.parent / "not-yet" / "triton"  # its folders are made, then taken back
    monkeypatch.setenv("TRITON_CACHE_DIR", str(triton))
    _archive(
        project,
        [_file("0-x/fxgraph/aaa-new", b"good"), _file("0-x/fxgraph/bbb-new", b"good"),
         _file("1-y/k/x", b"kernel"), _file("1-y/k/y", b"kernel")],
        [_entry(project), _entry(project, folder="1-y", kind="triton")],
    )  # fmt: skip
    real = os.rename

    def full_disk(src: str | Path, dst: str | Path, **fds: int) -> None:
        # placing renames into a folder opened without following links: dst is a bare name
        if str(src).endswith("/k/y") and str(dst) == "y":
            raise OSError(28, "No space left on device")
        real(src, dst, **fds)

    monkeypatch.setattr(os, "rename", full_disk)
    before = _world(project)
    code, _, err = _restore(project)
    assert code != 0 and "No space left" in err and "Traceback" not in err, err
    assert _world(project) == before


def test_two_caches_into_one_folder_are_refused(project: Project, home: Path) -> None:
    project.snapshot()
    _archive(
        project,
        [_file("0-x/fxgraph/a", b"first"), _file("1-y/fxgraph/a", b"second")],
        [_entry(project), _entry(project, folder="1-y")],
    )
    _refused(project, "both go into")


def test_a_name_deeper_than_any_path_is_refused(project: Project, home: Path) -> None:
    project.snapshot()
    _archive(project, [_file("0-x/" + "a/" * 100_000 + "f")], [_entry(project)])
    started = time.perf_counter()
    _refused(project, "a name of over 4096 characters")
    assert time.perf_counter() - started < 10  # each folder of it is looked at once


def test_a_genuine_archive_into_an_existing_cache_fills_it(project: Project, home: Path) -> None:
    project.snapshot("--save-cache")
    kept = next(project.cache.rglob("*.best_config"))
    kept.write_text("mine")
    gone = next(p for p in project.cache.rglob("*") if p.is_file() and p != kept)
    gone.unlink()
    code, out, err = _restore(project)
    assert code == 0 and "Restored cache: inductor, 1 file into" in out, out + err
    assert gone.is_file() and kept.read_text() == "mine"
    assert not list(project.cache.parent.glob(".*envguard-unpack*"))


# ---------------------------------------------------------------------------------------------
# Reading the archive stops at the limits


def _many(path: Path, count: int, manifest: bytes, *, size: int = 0) -> None:
    """``count`` members of ``size`` bytes, streamed, then the manifest (last, as save puts it)."""
    info = tarfile.TarInfo()
    info.size = size
    data = b"k" * size + b"\0" * (-size % tarfile.BLOCKSIZE)
    with gzip.open(path, "wb", compresslevel=1) as gz:
        for i in range(count):
            info.name = f"0-x/fxgraph/{i:07d}"
            gz.write(info.tobuf(format=tarfile.GNU_FORMAT) + data)
        last = tarfile.TarInfo(cache_archive.MANIFEST)
        last.size = len(manifest)
        gz.write(last.tobuf(format=tarfile.GNU_FORMAT))
        gz.write(manifest + b"\0" * (-len(manifest) % tarfile.BLOCKSIZE) + b"\0" * 1024)


@pytest.fixture
def peak(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The most memory the archive's restore allocated at once (the CLI around it aside)."""
    peaks: list[int] = []
    real = cache_archive.restore

    def measured(*args: Any, **kwargs: Any) -> list[cache_archive.Unpacked]:
        tracemalloc.start()
        try:
            return real(*args, **kwargs)
        finally:
            peaks.append(tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()

    monkeypatch.setattr(cache_archive, "restore", measured)
    yield peaks


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """How many headers tarfile read."""
    calls = [0]
    real = tarfile.TarFile.next

    def next_(self: tarfile.TarFile) -> tarfile.TarInfo | None:
        calls[0] += 1
        return real(self)

    monkeypatch.setattr(tarfile.TarFile, "next", next_)
    yield calls


def _manifest_bytes(project: Project) -> bytes:
    return json.dumps({"schema": 1, "caches": [_entry(project)]}).encode()


@pytest.mark.slow
def test_reading_stops_at_the_member_limit(
    project: Project,
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
    counted: list[int],
    peak: list[int],
) -> None:
    project.snapshot()
    monkeypatch.setattr(cache_archive, "_MEMBER_LIMIT", 1000)
    _many(cache_archive.archive_path(project.lock), 50_000, _manifest_bytes(project))
    started = time.perf_counter()
    _refused(project, "more than 1,000 members")
    assert time.perf_counter() - started < 10
    assert counted[0] <= 1002  # not the 50,001 headers
    assert peak[0] < 8 << 20  # 50,000 headers held are ~25 MB


@pytest.mark.slow
def test_a_huge_header_is_refused_without_reading_it_into_memory(
    project: Project, home: Path, peak: list[int]
) -> None:
    project.snapshot()
    name = tarfile.TarInfo("././@LongLink")
    name.type, name.size = tarfile.GNUTYPE_LONGNAME, 64 << 20  # 64 MB of name in ~64 kB
    with gzip.open(cache_archive.archive_path(project.lock), "wb") as gz:
        gz.write(name.tobuf(format=tarfile.USTAR_FORMAT))
        for _ in range(64):
            gz.write(b"a" * (1 << 20))
        gz.write(tarfile.TarInfo("0-x/f").tobuf(format=tarfile.GNU_FORMAT) + b"\0" * 1024)
    _refused(project, "refusing")
    assert peak[0] < 40 << 20  # tarfile alone holds the 64 MB name twice


def test_reading_stops_at_the_size_ceiling(
    project: Project, home: Path, monkeypatch: pytest.MonkeyPatch, counted: list[int]
) -> None:
    project.snapshot()
    monkeypatch.setattr(cache_archive, "_SIZE_LIMIT", 10_000)
    _many(cache_archive.archive_path(project.lock), 100, _manifest_bytes(project), size=4096)
    _refused(project, "more than 10 kB")
    assert counted[0] <= 4  # the third 4 kB member is over; the rest are not read


# ---------------------------------------------------------------------------------------------
# A dry run checks what the real run checks, and says it in the same words


def _traversal(project: Project, home: Path, tmp_path: Path) -> None:
    _archive(project, [_file("0-x/fxgraph/ok", b"ok"), _file("0-x/../../escaped")],
             [_entry(project)])  # fmt: skip


def _climb(project: Project, home: Path, tmp_path: Path) -> None:
    _custom_attack(project, f"{home}/.cache/../.ssh")


def _unallowed(project: Project, home: Path, tmp_path: Path) -> None:
    _custom_attack(project, str(tmp_path / "aot-cache"))


def _other_torch(project: Project, home: Path, tmp_path: Path) -> None:
    shutil.rmtree(project.cache)
    make(project.cache, BuiltBy(torch="2.11.0+cu130", cuda="13.0"))
    project.snapshot("--save-cache")


def _link_out(project: Project, home: Path, tmp_path: Path) -> None:
    (home / "outside").mkdir()
    (project.cache / "victim").symlink_to(home / "outside")
    _archive(project, [_file("0-x/victim/new/entry", b"evil")], [_entry(project)])


def _no_manifest(project: Project, home: Path, tmp_path: Path) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("0-x/a")
        tar.addfile(info, io.BytesIO(b""))
    cache_archive.archive_path(project.lock).write_bytes(buf.getvalue())


@pytest.mark.parametrize(
    "attack", [_traversal, _climb, _unallowed, _other_torch, _link_out, _no_manifest],
    ids=["traversal", "dotdot-path", "unallowed-custom", "other-torch", "link-out",
         "no-manifest"],
)  # fmt: skip
def test_a_dry_run_refuses_what_the_real_run_refuses(
    project: Project, home: Path, tmp_path: Path, attack
) -> None:
    project.snapshot()
    attack(project, home, tmp_path)
    before = _world(project)
    dry = _restore(project, "--dry-run")
    assert _world(project) == before
    real = _restore(project)
    assert _world(project) == before
    assert dry[0] == real[0] != 0 and dry[2] == real[2], (dry, real)
    assert "would unpack" not in dry[1].lower()


def test_a_dry_run_says_what_the_real_run_does(project: Project, home: Path) -> None:
    project.snapshot("--save-cache")
    shutil.rmtree(project.cache)
    before = _world(project)
    code, out, err = _restore(project, "--dry-run")
    assert code == 0, err
    assert _world(project) == before
    said = " ".join(out.split())
    files = len([m for m in _members(project) if m.isfile()])
    assert f"would unpack cache: inductor, {files} files into {project.cache}" in said, said
    code, out, err = _restore(project)
    assert code == 0 and f"Restored cache: inductor, {files} files into" in " ".join(out.split())


def _members(project: Project) -> list[tarfile.TarInfo]:
    with tarfile.open(cache_archive.archive_path(project.lock)) as tar:
        return [m for m in tar.getmembers() if m.name != cache_archive.MANIFEST]
