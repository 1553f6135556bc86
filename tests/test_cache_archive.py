"""snapshot --save-cache / restore --cache with the real H200 Inductor cache."""

from __future__ import annotations

import dataclasses
import io
import tarfile
from pathlib import Path

import pytest

from envguard import lockfile, snapshot
from envguard.errors import NotRestored
from envguard.model import PackageBuild
from envguard.restore import cache_archive
from tests.conftest import make_venv


@pytest.fixture
def saved(tmp_path: Path, inductor_cache: Path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(inductor_cache))
    venv = make_venv(tmp_path / "venv")
    snap = snapshot.take(venv, with_code=False)
    lock = tmp_path / "lockfiles" / "train.envguard.toml"
    lockfile.write(lock, snap)
    archive, size = cache_archive.save(snap, lock)
    return snap, lock, archive, size, venv


@pytest.mark.slow
def test_round_trip_into_a_fresh_cache_dir(saved, tmp_path: Path, monkeypatch) -> None:
    snap, lock, archive, size, venv = saved
    assert archive.name == "train.envguard-caches.tar.gz" and size == archive.stat().st_size
    target = tmp_path / "fresh-inductor"
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(target))
    unpacked = cache_archive.restore(lock, snap, snapshot.take(venv, with_code=False))
    assert [(u.kind, u.files) for u in unpacked] == [("inductor", 108)]
    again = snapshot.take(venv, with_code=False)
    inductor = next(c for c in again.caches if c.kind == "inductor")
    original = next(c for c in snap.caches if c.kind == "inductor")
    assert inductor.fingerprint == original.fingerprint  # byte-identical cache


@pytest.mark.slow
def test_refuses_for_another_torch(saved) -> None:
    """The H200 cache says torch 2.11.0+cu130 built it; a cu128 venv would not reuse it."""
    snap, lock, _, _, _ = saved
    other = PackageBuild(
        name="torch",
        version="2.11.0+cu128",
        metadata_version="2.11.0+cu128",
        variant="cu128",
        index_url="x",
        source="version.py",
        cuda="12.8",
        git_version="70d99e998b4955e0049d13a98d77ae1b14db1f45",
    )
    with pytest.raises(
        NotRestored,
        match=r"would not be reused here: torch 2.11.0\+cu130 \(cache\) vs "
        r"2.11.0\+cu128 \(here\); CUDA 13.0 \(cache\) vs 12.8 \(here\)\. Nothing",
    ):
        cache_archive.restore(lock, snap, dataclasses.replace(snap, torch=other))
    same = dataclasses.replace(other, version="2.11.0+cu130", cuda="13.0", variant="cu130")
    assert cache_archive.restore(lock, snap, dataclasses.replace(snap, torch=same))


def _evil_archive(lock: Path, member: tarfile.TarInfo, data: bytes = b"x") -> None:
    good = cache_archive.archive_path(lock).read_bytes()
    with tarfile.open(fileobj=io.BytesIO(good)) as src:
        manifest = src.extractfile(cache_archive.MANIFEST).read()  # type: ignore[union-attr]
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo(cache_archive.MANIFEST)
        info.size = len(manifest)
        tar.addfile(info, io.BytesIO(manifest))
        member.size = len(data) if member.isfile() else 0
        tar.addfile(member, io.BytesIO(data) if member.isfile() else None)
    cache_archive.archive_path(lock).write_bytes(buf.getvalue())


@pytest.mark.slow
@pytest.mark.parametrize("name", ["0-inductor/../../escaped", "0-inductor//etc/passwd"])
def test_path_traversal_is_refused(saved, tmp_path: Path, monkeypatch, name: str) -> None:
    snap, lock, _, _, _ = saved
    _evil_archive(lock, tarfile.TarInfo(name))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "t"))
    with pytest.raises(NotRestored, match="outside"):
        cache_archive.restore(lock, snap, snap)
    assert not (tmp_path / "escaped").exists()


@pytest.mark.slow
def test_links_are_refused(saved, tmp_path: Path, monkeypatch) -> None:
    snap, lock, _, _, _ = saved
    link = tarfile.TarInfo("0-inductor/fxgraph/link")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    _evil_archive(lock, link)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "t"))
    with pytest.raises(NotRestored, match="links and devices"):
        cache_archive.restore(lock, snap, snap)
    assert not (tmp_path / "t" / "fxgraph" / "link").exists()
