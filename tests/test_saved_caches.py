"""The compile-cache archive kept out of git: the .gitignore line snapshot writes, the lock's
record of the archive (hash, size) that restore holds it to, and a .gitignore that is
envguard's own never read as a change of the code (#32, item 4)."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from envguard import gitignore, lockfile
from tests.conftest import git
from tests.project import Project, invoke

ARCHIVE = "train.envguard-caches.tar.gz"


def _repo(root: Path) -> Path:
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    return root


def _ignored(root: Path, rel: str) -> bool:
    # git's own answer, with no user's excludes file: the line alone must do it
    done = subprocess.run(
        ["git", "-c", "core.excludesFile=/dev/null", "-C", str(root), "check-ignore", "-q", rel],
        check=False,
    )
    return done.returncode == 0


def test_outside_a_work_tree_nothing_is_written(tmp_path: Path) -> None:
    assert gitignore.keep_out(tmp_path / "lockfiles" / ARCHIVE) is None
    assert not (tmp_path / "lockfiles").exists()


def test_the_line_extends_the_project_s_gitignore_and_git_honours_it(tmp_path: Path) -> None:
    root = _repo(tmp_path / "r")
    (root / ".gitignore").write_bytes(b"data/\n*.ckpt")  # no newline at its end
    name = "we[ir]d *x.envguard-caches.tar.gz"
    kept = gitignore.keep_out(root / name)
    assert kept is not None and kept.added and not kept.tracked
    text = (root / ".gitignore").read_text()
    assert text.startswith("data/\n*.ckpt\n" + gitignore.MARK + "\n")
    (root / name).write_bytes(b"x")
    (root / "wexd ax.envguard-caches.tar.gz").write_bytes(b"x")  # what an unescaped [ir] * hit
    assert _ignored(root, name)
    assert not _ignored(root, "wexd ax.envguard-caches.tar.gz")
    again = gitignore.keep_out(root / name)
    assert again is not None and not again.added
    assert (root / ".gitignore").read_text() == text
    assert gitignore.theirs(text.encode()) == b"data/\n*.ckpt"


def test_an_archive_git_already_tracks_is_said(tmp_path: Path) -> None:
    root = _repo(tmp_path / "r")
    (root / "lockfiles").mkdir()
    (root / "lockfiles" / ARCHIVE).write_bytes(b"old")
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "archive")
    kept = gitignore.keep_out(root / "lockfiles" / ARCHIVE)
    assert kept is not None and kept.added and kept.tracked


_LINE = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"),
                max_size=30)  # fmt: skip


@given(st.lists(_LINE, max_size=6), st.integers(0, 6))
def test_envguard_s_lines_are_all_it_takes_away(lines: list[str], at: int) -> None:
    """theirs() removes envguard's lines wherever they are, and nothing of the project's."""
    mine = [ln for ln in lines if not gitignore.is_ours(ln)]
    ours = [gitignore.MARK, "/" + ARCHIVE]
    mixed = mine[:at] + ours + mine[at:]
    assert gitignore.theirs("\n".join(mixed).encode()) == "\n".join(mine).encode().rstrip(b"\n")


# --- through the commands, in a project laid out as users do ----------------------------------


def _saved(project: Project) -> Path:
    project.snapshot("--save-cache")
    return project.lock.with_name(ARCHIVE)


def test_save_cache_then_commit_commits_no_archive(project: Project) -> None:
    code, out, err = invoke("snapshot", "--save-cache", env=project.activated())
    assert code == 0, err
    assert "added to lockfiles/.gitignore, so git leaves it out: commit that file too" in out
    archive = project.lock.with_name(ARCHIVE)
    data = archive.read_bytes()
    saved = lockfile.read(project.lock).saved_caches
    assert saved is not None
    assert (saved.sha256, saved.bytes) == (hashlib.sha256(data).hexdigest(), len(data))
    # the README's commit line
    git(project.root, "add", "lockfiles")
    git(project.root, "commit", "-q", "-m", "lock the known-good environment")
    committed = git(project.root, "ls-files", "lockfiles").split()
    assert committed == ["lockfiles/.gitignore", f"lockfiles/{project.lock.name}"]
    # and no drift for it, before the commit or after
    verdict = project.verdict()
    assert verdict.exit_code == 0 and verdict.found("info") <= {("info", "code", "git HEAD")}, (
        verdict.changes
    )


def test_restore_finds_the_archive_it_recorded_and_refuses_another(project: Project) -> None:
    archive = _saved(project)
    data = archive.read_bytes()
    shutil.rmtree(project.cache)
    code, out, err = invoke("restore", "--cache", env=project.activated())
    assert code == 0, err
    assert "Restored cache: inductor" in out and any(project.cache.rglob("*"))
    # another archive under this lock's name: longer, or as long with one byte changed
    shutil.rmtree(project.cache)
    middle = len(data) // 2
    for other in (data + b"\0", data[:middle] + bytes([data[middle] ^ 1]) + data[middle + 1 :]):
        archive.write_bytes(other)
        code, out, err = invoke("restore", "--cache", env=project.activated())
        assert code == 2 and "not the " in err and "archive this lock saved" in err, (out, err)
        assert len(err.strip().splitlines()) == 1 and not project.cache.exists()


def test_a_project_s_own_edit_of_that_gitignore_is_still_seen(project: Project) -> None:
    _saved(project)
    project.commit("lock", "lockfiles")
    assert project.verdict().found("info") <= {("info", "code", "git HEAD")}
    gi = project.root / "lockfiles" / ".gitignore"
    gi.write_text(gi.read_text() + "scratch/\n")
    found = project.verdict().found("info")
    assert ("info", "code", "lockfiles/.gitignore") in found, found


@pytest.mark.parametrize("content", ["", "scratch/\n"])
def test_an_untracked_gitignore_of_the_project_s_is_code(project: Project, content: str) -> None:
    """Only a .gitignore with envguard's lines and nothing else is envguard's."""
    project.snapshot()
    project.write("lockfiles/.gitignore", content)
    found = project.verdict().found("info")
    assert ("info", "code", "lockfiles/.gitignore") in found, found


@pytest.mark.parametrize(
    ("table", "said"),
    [
        ('sha256 = "abc"\nbytes = 10', "saved_caches.sha256: 'abc' is not a SHA-256"),
        (f'sha256 = "{"a" * 64}"\nbytes = 0', "saved_caches.bytes: 0 is not the size"),
        (f'sha256 = "{"a" * 64}"\nbytes = {1 << 40}', "is not the size of an archive"),
    ],
)
def test_a_lock_s_archive_record_is_checked_where_it_is_read(
    project: Project, table: str, said: str
) -> None:
    _saved(project)
    text = project.lock.read_text()
    start = text.index("[saved_caches]")
    end = text.index("\n[", start + 1)
    edited = text[:start] + "[saved_caches]\n" + table + text[end:]
    project.lock.write_bytes(lockfile.seal(edited.encode()))
    code, _, err = invoke("restore", "--cache", "--dry-run", env=project.activated())
    assert code == 2 and said in err and len(err.strip().splitlines()) == 1, err


def test_an_older_schema_cannot_carry_the_record(project: Project) -> None:
    _saved(project)
    text = project.lock.read_text()
    assert "\nschema = 4\n" in text
    project.lock.write_bytes(
        lockfile.seal(text.replace("\nschema = 4\n", "\nschema = 3\n").encode())
    )
    code, _, err = invoke("diff", env=project.activated())
    assert code == 2 and "a [saved_caches] table in a schema 3 lock" in err, err


# --- a cache store: a folder the team shares ---------------------------------------------------


def _store(project: Project, tmp_path: Path) -> Path:
    store = tmp_path / "shared" / "envguard-caches"
    store.mkdir(parents=True)
    project.write("envguard.toml", f'cache-store = "{store}"\n')
    return store


def test_a_cache_store_holds_the_archive_by_its_hash(project: Project, tmp_path: Path) -> None:
    store = _store(project, tmp_path)
    code, out, err = invoke("snapshot", "--save-cache", env=project.activated())
    assert code == 0, err
    assert "in the project's cache-store, under its hash" in " ".join(out.split())
    saved = lockfile.read(project.lock).saved_caches
    assert saved is not None
    (archive,) = store.iterdir()
    assert archive.name == f"{saved.sha256}.envguard-caches.tar.gz"
    assert hashlib.sha256(archive.read_bytes()).hexdigest() == saved.sha256
    assert sorted(p.name for p in project.lock.parent.iterdir()) == [project.lock.name]
    # restore finds it there; a second snapshot of the same caches, seconds later, makes
    # the same bytes (no time in the archive's header): the one file
    shutil.rmtree(project.cache)
    code, out, err = invoke("restore", "--cache", env=project.activated())
    assert code == 0 and "Restored cache: inductor" in out, err
    time.sleep(1.1)
    project.snapshot("--save-cache")
    assert [p.name for p in store.iterdir()] == [archive.name]


def test_a_teammate_without_the_store_is_told_where_to_look(
    project: Project, tmp_path: Path
) -> None:
    _store(project, tmp_path)
    project.snapshot("--save-cache")
    (project.root / "envguard.toml").unlink()
    code, _, err = invoke("restore", "--cache", "--dry-run", env=project.activated())
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "no cache-store is set" in err and "sha256 " in err
    # ENVGUARD_CACHE_STORE names it as the config would
    store = tmp_path / "shared" / "envguard-caches"
    env = {**project.activated(), "ENVGUARD_CACHE_STORE": f"file://{store}"}
    code, out, err = invoke("restore", "--cache", "--dry-run", env=env)
    assert code == 0 and "inductor" in out, err


def test_a_store_that_is_not_mounted_writes_nothing(project: Project, tmp_path: Path) -> None:
    project.write("envguard.toml", f'cache-store = "{tmp_path / "not-mounted"}"\n')
    code, _, err = invoke("snapshot", "--save-cache", env=project.activated())
    assert code == 2 and "no such folder (is the shared filesystem mounted?)" in err, err
    assert not (tmp_path / "not-mounted").exists()


def test_an_object_store_url_is_refused_by_name(project: Project) -> None:
    project.write("envguard.toml", 'cache-store = "s3://team-bucket/caches"\n')
    code, _, err = invoke("snapshot", "--save-cache", env=project.activated())
    assert code == 2 and "only a folder (a shared filesystem) or a file:// URL" in err, err
