"""envguard._confine.Root: data from elsewhere lands inside its folder, and nowhere else (#33)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envguard._confine import Root
from envguard.errors import ConfinementError


@pytest.fixture
def world(tmp_path: Path) -> tuple[Root, Path]:
    """A root, and a folder beside it that nothing may ever change."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "authorized_keys").write_text("victim\n")
    return Root(tmp_path / "root", what="the lock's file"), outside


def _snapshot(folder: Path) -> dict[str, bytes | str]:
    out: dict[str, bytes | str] = {}
    for path in sorted(folder.rglob("*")):
        rel = str(path.relative_to(folder))
        out[rel] = ("-> " + os.readlink(path)) if path.is_symlink() else (
            path.read_bytes() if path.is_file() else "dir")  # fmt: skip
    return out


def test_a_file_lands_whole_in_its_folders(world: tuple[Root, Path]) -> None:
    root, _ = world
    made: list[Path] = []
    with root.writer("a/b/c.txt", made=made) as fh:
        fh.write(b"data")
    assert (root.path / "a" / "b" / "c.txt").read_bytes() == b"data"
    assert made == [root.path / "a", root.path / "a" / "b"]
    assert sorted(p.name for p in (root.path / "a" / "b").iterdir()) == ["c.txt"]  # no temp


def test_a_failed_write_leaves_nothing(world: tuple[Root, Path]) -> None:
    root, _ = world
    with pytest.raises(RuntimeError), root.writer("x.txt") as fh:
        fh.write(b"half")
        raise RuntimeError
    assert list(root.path.iterdir()) == []


@pytest.mark.parametrize("name", ["/etc/passwd", "../x", "a/../../x", "a\0b", "a\\b", "", "."])
def test_a_name_not_strictly_inside_is_refused(world: tuple[Root, Path], name: str) -> None:
    root, outside = world
    before = _snapshot(outside.parent)
    with pytest.raises(ConfinementError, match="refusing the lock's file"):
        root.write(name, b"x")
    assert _snapshot(outside.parent) == before


def test_a_link_on_the_way_refuses(world: tuple[Root, Path]) -> None:
    root, outside = world
    (root.path / "lnk").symlink_to(outside)
    for write in (lambda: root.write("lnk/authorized_keys", b"mallory"),
                  lambda: root.folder("lnk/sub"),
                  lambda: root.copy("lnk/k", outside / "authorized_keys")):  # fmt: skip
        with pytest.raises(ConfinementError):
            write()
    assert _snapshot(outside) == {"authorized_keys": b"victim\n"}


def test_a_link_at_the_name_refuses_and_is_left(world: tuple[Root, Path]) -> None:
    root, outside = world
    (root.path / "keys").symlink_to(outside / "authorized_keys")
    staged = root.path.parent / "staged"
    staged.write_bytes(b"mallory")
    for write in (lambda: root.write("keys", b"mallory"), lambda: root.move_in("keys", staged)):
        with pytest.raises(ConfinementError):
            write()
    assert (outside / "authorized_keys").read_text() == "victim\n"
    assert os.readlink(root.path / "keys") == str(outside / "authorized_keys")


def test_a_tree_copy_keeps_inner_links_and_leaves_outer_ones(world: tuple[Root, Path]) -> None:
    root, outside = world
    source = root.path.parent / "cache"
    (source / "k").mkdir(parents=True)
    (source / "k" / "kernel.py").write_text("kernel")
    (source / "inner").symlink_to(source / "k" / "kernel.py")  # absolute, but inside
    (source / "outer").symlink_to(outside / "authorized_keys")
    (source / "outdir").symlink_to(outside)
    copied, left = root.copy_tree("copy", source)
    assert (copied, left) == (2, 2)
    dest = root.path / "copy"
    assert os.readlink(dest / "inner") == "k/kernel.py"  # relative: it leads into the copy
    assert (dest / "inner").read_text() == "kernel"
    assert not (dest / "outer").exists() and not (dest / "outdir").exists()


def test_the_root_may_itself_be_a_link(tmp_path: Path) -> None:
    """The root is the caller's choice (a cache folder the user symlinked elsewhere)."""
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "alias").symlink_to(real)
    Root(tmp_path / "alias").write("a/f", b"x")
    assert (real / "a" / "f").read_bytes() == b"x"


_PART = st.sampled_from(["a", "b", "..", ".", "", "lnk", "c\0", "d\\e", "/", "ü"])


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(_PART, min_size=0, max_size=6).map("/".join))
def test_any_name_lands_inside_or_is_refused(world: tuple[Root, Path], name: str) -> None:
    root, outside = world
    if not (root.path / "lnk").is_symlink():
        (root.path / "lnk").symlink_to(outside)
    before = _snapshot(outside)
    try:
        where = root.write(name, b"x")
    except (ConfinementError, IsADirectoryError, NotADirectoryError, FileExistsError):
        pass
    else:
        real = Path(os.path.realpath(where))
        assert real.is_relative_to(Path(os.path.realpath(root.path))) and real.read_bytes() == b"x"
    assert _snapshot(outside) == before
