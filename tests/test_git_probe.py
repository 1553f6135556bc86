"""The code probe reads git as git reads itself (#22): one ``git status --porcelain=v2`` for
HEAD, the branch, what changed and what is untracked, one ``git diff`` when something did, no
GitPython on the snapshot or diff path, and no setting of the machine's git config that can
change what is recorded.

Each layout is checked against git's own plumbing (``rev-parse``, ``symbolic-ref``, ``diff
--numstat``, ``ls-files --others``): the commands the probe ran before it read ``status``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from envguard import _git
from envguard.errors import RepoError
from envguard.model import CodeState
from envguard.probes import code
from tests.conftest import git, make_venv

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
FILE_PROTOCOL = ("-c", "protocol.file.allow=always")


def _commit(root: Path, message: str = "c") -> None:
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", message)


def _probe(path: Path) -> CodeState:
    state, _ = code.probe(path, required=True)
    assert state is not None
    return state


# --- what git's plumbing says, to hold the probe to ------------------------------------------


def _out(root: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True).stdout


def _plumbing(root: Path) -> dict[str, object]:
    def run(*args: str) -> bytes:
        return _out(root, *args)

    head = run("rev-parse", "-q", "--verify", "HEAD").decode().strip()
    branch = run("symbolic-ref", "-q", "--short", "HEAD").decode().strip() or None
    stats = run(*_git.PATCH_CONFIG, "diff", head or EMPTY_TREE, "--numstat", "-z", "--no-renames",
                "--ignore-submodules=none", "--no-textconv")  # fmt: skip
    rows = code._parse_numstat_z(stats.decode("utf-8", "surrogateescape"))
    others = run("ls-files", "-z", "--others", "--exclude-standard")
    names = [n for n in others.decode("utf-8", "surrogateescape").split("\0") if n]
    return {
        "head": head,
        "branch": branch,
        "changed": {code._shown(p): (a, r) for p, a, r in rows},
        "untracked": sorted(code._shown(n) for n in names),
    }


def _as_probed(state: CodeState) -> dict[str, object]:
    return {
        "head": state.head,
        "branch": state.branch,
        "changed": {f.path: (f.added, f.removed) for f in state.changed},
        "untracked": sorted(u.path for u in state.untracked),
    }


def _blobs_are_gits(root: Path, state: CodeState) -> None:
    """Each dirty regular file's blob is what ``git hash-object`` says of it now."""
    for f in state.changed:
        path = root / f.path
        if f.blob and path.is_file() and not path.is_symlink() and "-dirty" not in f.blob:
            assert f.blob == git(root, "hash-object", "--", f.path).strip(), f.path
    for u in state.untracked:
        if u.blob and (root / u.path).is_file():
            assert u.blob == git(root, "hash-object", "--", u.path).strip(), u.path


# --- layouts ----------------------------------------------------------------------------------


def _no_commits(root: Path) -> Path:
    (root / "train.py").write_text("x = 1\n")
    git(root, "add", "train.py")
    (root / "notes.txt").write_text("scratch\n")
    return root


def _detached(root: Path) -> Path:
    _commit(root)
    git(root, "checkout", "-q", "--detach")
    (root / "model.py").write_text("y = 2\n")
    return root


def _renamed_and_copied(root: Path) -> Path:
    (root / "big.py").write_text("".join(f"line {i}\n" for i in range(40)))
    _commit(root)
    git(root, "mv", "model.py", "net.py")
    shutil.copy(root / "big.py", root / "big_copy.py")
    git(root, "add", "big_copy.py")
    git(root, "config", "status.renames", "copies")  # what makes status write `2` records
    return root


def _unmerged(root: Path) -> Path:
    _commit(root)
    git(root, "checkout", "-q", "-b", "other")
    (root / "model.py").write_text("theirs = 1\n")
    _commit(root)
    git(root, "checkout", "-q", "main")
    (root / "model.py").write_text("ours = 1\n")
    _commit(root)
    subprocess.run(["git", "-C", str(root), "merge", "-q", "other"], capture_output=True)
    return root


def _submodules(root: Path) -> Path:
    lib = root.parent / "lib"
    lib.mkdir()
    git(lib, "init", "-q", "-b", "main")
    (lib / "kernel.py").write_text("k = 1\n")
    _commit(lib)
    git(root, *FILE_PROTOCOL, "submodule", "add", "-q", str(lib), "lib")
    git(root, *FILE_PROTOCOL, "submodule", "add", "-q", str(lib), "lib2")
    _commit(root)
    (root / "lib" / "kernel.py").write_text("k = 2\n")  # dirty inside
    (root / "lib2" / "scratch.py").write_text("s = 1\n")  # untracked inside
    return root


def _odd_names(root: Path) -> Path:
    names = ["with space.py", "tab\there.py", 'quote"d.py', "back\\slash.py", "ünï.py",
             "new\nline.py", "ünï\nboth.py"]  # fmt: skip
    for name in names:
        (root / name).write_text("a = 1\n")
    (root / os.fsdecode(b"caf\xe9.py")).write_text("b = 1\n")
    _commit(root)
    for name in names:
        (root / name).write_text("a = 2\n")
    (root / os.fsdecode(b"caf\xe9.py")).write_text("b = 2\n")
    (root / "untracked dir").mkdir()
    (root / "untracked dir" / "new\nfile.txt").write_text("n\n")
    (root / os.fsdecode(b"raw\xff.txt")).write_text("r\n")
    return root


def _ignored(root: Path) -> Path:
    (root / ".gitignore").write_text("*.ckpt\nwandb/\n")
    _commit(root)
    (root / "step100.ckpt").write_bytes(b"\0" * 64)
    (root / "wandb").mkdir()
    (root / "wandb" / "run.log").write_text("loss 1\n")
    (root / "kept.py").write_text("k = 1\n")
    return root


def _nested_repo(root: Path) -> Path:
    """A repository of its own inside the project's (not a submodule): the outer one lists
    it as one untracked folder."""
    _commit(root)
    inner = root / "vendor" / "inner"
    inner.mkdir(parents=True)
    git(inner, "init", "-q", "-b", "dev")
    (inner / "x.py").write_text("x = 1\n")
    _commit(inner)
    (inner / "x.py").write_text("x = 2\n")
    return root


def _file_kinds(root: Path) -> Path:
    """A type change, mode-only changes (text and binary), an empty file, a binary, CRLF."""
    (root / "link_me.py").write_text("a\nb\n")
    (root / "run.sh").write_text("echo hi\n")
    (root / "w.bin").write_bytes(bytes(range(256)))
    (root / "crlf.txt").write_bytes(b"a\r\nb\r\n")
    _commit(root)
    (root / "link_me.py").unlink()
    (root / "link_me.py").symlink_to("model.py")
    (root / "run.sh").chmod(0o755)
    (root / "w.bin").chmod(0o755)
    (root / "__init__.py").write_text("")
    git(root, "add", "__init__.py")
    (root / "weights.bin").write_bytes(bytes(range(256)) * 3)
    git(root, "add", "weights.bin")
    (root / "crlf.txt").write_bytes(b"a\r\nc\r\n")
    return root


LAYOUTS: dict[str, Callable[[Path], Path]] = {
    "no commits": _no_commits,
    "detached": _detached,
    "renamed and copied": _renamed_and_copied,
    "unmerged": _unmerged,
    "submodules": _submodules,
    "odd names": _odd_names,
    "ignored": _ignored,
    "nested repo": _nested_repo,
    "file kinds": _file_kinds,
}


def _bare_project(tmp_path: Path) -> Path:
    root = tmp_path / "train"
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    (root / "model.py").write_text("def forward(x):\n    return x\n")
    return root


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_each_layout_reads_as_gits_plumbing_says(tmp_path: Path, layout: str) -> None:
    root = LAYOUTS[layout](_bare_project(tmp_path))
    state = _probe(root)
    assert state.root == str(root)
    assert _as_probed(state) == _plumbing(root)
    _blobs_are_gits(root, state)
    assert state.dirty == bool(state.changed)


@pytest.mark.slow
def test_the_layouts_have_what_they_are_named_for(tmp_path: Path) -> None:
    """The layouts above do reach the records they are there for."""
    status = {}
    for name, make in LAYOUTS.items():
        root = make(_bare_project(tmp_path / name.replace(" ", "-")))
        raw = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain=v2", "--branch", "-z", "-uall"],
            capture_output=True, check=True,
        ).stdout  # fmt: skip
        status[name] = raw.decode("utf-8", "surrogateescape").split("\0")
    assert "# branch.oid (initial)" in status["no commits"]
    assert "# branch.head (detached)" in status["detached"]
    assert any(r.startswith("2 ") for r in status["renamed and copied"])
    assert any(r.startswith("u ") for r in status["unmerged"])
    assert any(r.startswith("1 .M S") for r in status["submodules"])
    assert "? vendor/inner/" in status["nested repo"]
    assert not any("ckpt" in r or "wandb" in r for r in status["ignored"])


def test_a_snapshot_from_a_subfolder_or_a_worktree_reads_the_whole_repository(
    tmp_path: Path,
) -> None:
    root = _odd_names(_bare_project(tmp_path))
    (root / "src" / "pkg").mkdir(parents=True)
    assert _probe(root / "src" / "pkg") == _probe(root)
    inner = _nested_repo(_bare_project(tmp_path / "outer")) / "vendor" / "inner"
    state = _probe(inner)
    assert state.root == str(inner) and state.branch == "dev"
    assert [f.path for f in state.changed] == ["x.py"]
    tree = tmp_path / "tree"
    git(root, "worktree", "add", "-q", str(tree))
    (tree / "model.py").write_text("w = 1\n")
    state = _probe(tree)
    assert state.root == str(tree) and _as_probed(state) == _plumbing(tree)


def test_counts_come_from_the_patch_as_numstat_gives_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a mode-only change, an empty file or a type change, the line counts are read
    off the patch: status and diff in turn (the remote's git config runs beside status)."""
    root = _bare_project(tmp_path)
    (root / "w.bin").write_bytes(bytes(range(256)))
    _commit(root)
    (root / "model.py").write_text("def forward(x):\n    return x * 2\n# no newline")
    (root / "w.bin").write_bytes(bytes(range(255, -1, -1)))
    (root / "notes.txt").write_text("n\n")
    calls = _count_runs(monkeypatch)
    state = _probe(root)
    assert [args[0] for args in calls] == ["status", "diff"], calls
    assert _as_probed(state) == _plumbing(root)
    assert {f.path: f.added for f in state.changed} == {"model.py": 2, "w.bin": -1}


def _count_runs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    """The git commands the probe runs one after another, their ``-c`` settings left out."""
    calls: list[tuple[str, ...]] = []
    real = _git.output

    def spy(repo: object, *args: str, check: bool = True) -> bytes:
        words = list(args)
        while words and words[0] == "-c":
            words = words[2:]
        calls.append(tuple(words))
        return real(repo, *args, check=check)

    monkeypatch.setattr(_git, "output", spy)
    return calls


def test_a_clean_repository_is_one_status(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _bare_project(tmp_path)
    _commit(root)
    (root / "notes.txt").write_text("untracked only: nothing for git diff to say\n")
    calls = _count_runs(monkeypatch)
    state = _probe(root)
    assert [args[0] for args in calls] == ["status"], calls
    assert not state.dirty and [u.path for u in state.untracked] == ["notes.txt"]


# --- the status parser ------------------------------------------------------------------------


def test_status_records_are_read_whole() -> None:
    """``2`` records carry the original path after a NUL; paths keep spaces and newlines."""
    oid = "a" * 40
    raw = b"\0".join([
        b"# branch.oid " + oid.encode(),
        b"# branch.head feature/x y",
        b"# branch.ab +? -?",
        b"1 .M N... 100644 100644 100644 " + b"b" * 40 + b" " + b"b" * 40 + b" with space.py",
        b"2 R. N... 100644 100644 100644 " + b"c" * 40 + b" " + b"c" * 40 + b" R100 new\nname.py",
        b"old name.py",
        b"u UU N... 100644 100644 100644 100644 " + b"d" * 120 + b" conflict.py",
        b"? caf\xe9.txt",
        b"! ignored.log",
        b"",
    ])  # fmt: skip
    status = _git.parse_status(raw)
    assert status.head == oid and status.branch == "feature/x y"
    assert status.changed == ("with space.py", "new\nname.py", "old name.py", "conflict.py")
    assert status.untracked == (os.fsdecode(b"caf\xe9.txt"),)


def test_status_of_an_unborn_or_detached_head() -> None:
    unborn = _git.parse_status(b"# branch.oid (initial)\0# branch.head main\0")
    assert (unborn.head, unborn.branch, unborn.changed) == ("", "main", ())
    detached = _git.parse_status(b"# branch.oid " + b"e" * 40 + b"\0# branch.head (detached)\0")
    assert (detached.head, detached.branch) == ("e" * 40, None)


# --- no GitPython on the snapshot or diff path ------------------------------------------------

_LOADED = """
import atexit, sys
out, sys.argv = sys.argv[1], ["envguard", *sys.argv[2:]]
atexit.register(lambda: open(out, "w").write("\\n".join(sys.modules)))
from envguard.__main__ import main
main()
"""


def _modules(cwd: Path, out: Path, *args: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", _LOADED, str(out), *args], cwd=cwd, capture_output=True, text=True
    )
    assert done.returncode in (0, 1), done.stderr
    return set(out.read_text().split())


@pytest.mark.slow
def test_a_snapshot_and_a_diff_in_a_repository_leave_gitpython_unimported(
    tmp_path: Path,
) -> None:
    venv = make_venv(tmp_path / "venv")
    root = _bare_project(tmp_path)
    _commit(root)
    (root / "model.py").write_text("def forward(x):\n    return x * 3\n")
    (root / "notes.txt").write_text("n\n")
    lock = tmp_path / "train.envguard.toml"
    snap = ["snapshot", "--venv", str(venv), "--no-default-caches", "-q", "-o", str(lock)]
    loaded = _modules(root, tmp_path / "snapshot.txt", *snap)
    assert "envguard.probes.code" in loaded and "dirty = true" in lock.read_text()
    assert "git" not in loaded
    # from a second clone the lock's repository is another: diff looks for the lock's commit
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(root), str(clone))
    diff = ["diff", str(lock), "--venv", str(venv), "-q"]
    for where in (root, clone):
        loaded = _modules(where, tmp_path / "diff.txt", *diff)
        assert "envguard.drift" in loaded and "git" not in loaded, where


# --- the machine's git config changes nothing recorded ----------------------------------------

HOSTILE = {
    "status.showUntrackedFiles": "no",
    "core.quotepath": "true",
    "color.ui": "always",
    "color.status": "always",
    "color.diff": "always",
    "diff.noprefix": "true",
    "diff.mnemonicPrefix": "true",
    "diff.external": "EXTERNAL",
    "core.pager": "sed s/^/PAGED/",
    "pager.diff": "sed s/^/PAGED/",
    "pager.status": "sed s/^/PAGED/",
    "diff.context": "9",
    "diff.interHunkContext": "9",
    "diff.algorithm": "patience",
    "diff.indentHeuristic": "false",
    "diff.suppressBlankEmpty": "true",
    "diff.orderFile": "ORDER",
    "diff.renames": "copies",
    "status.renames": "copies",
    "status.showStash": "true",
    "status.branch": "true",
    "status.short": "true",
    "status.submoduleSummary": "true",
    "diff.ignoreSubmodules": "all",
    "core.autocrlf": "true",
    "core.abbrev": "7",
}
_MANY_HUNKS = "".join(f"def f{i}():\n    return {i}\n\n" for i in range(30))
# The example patience diff was made for: myers pairs the braces of two functions.
_FROB = """#include <stdio.h>

// Frobs foo heartily
int frobnitz(int foo)
{
    int i;
    for(i = 0; i < 10; i++)
    {
        printf("Your answer is: ");
        printf("%d\\n", foo);
    }
}

int fact(int n)
{
    if(n > 1)
    {
        return fact(n-1) * n;
    }
    return 1;
}

int main(int argc, char **argv)
{
    frobnitz(fact(10));
}
"""
_FIB = """int fib(int n)
{
    if(n > 2)
    {
        return fib(n-1) + fib(n-2);
    }
    return 1;
}

"""
_BLOCKS = "{\n    a;\n}\n\n{\n    b;\n}\n"  # a block added between: where it slides


def _hostile_project(tmp_path: Path) -> Path:
    """Changes each setting above would show differently: hunks a few lines apart, blank
    context lines, functions patience aligns otherwise than myers, a block the indent
    heuristic slides, files to order, a staged rename, a non-ASCII name, an untracked file,
    dirty submodules."""
    root = _submodules(_bare_project(tmp_path))
    (root / "many.py").write_text(_MANY_HUNKS)
    (root / "frob.c").write_text(_FROB)
    (root / "blocks.c").write_text(_BLOCKS)
    (root / "ünï.py").write_text("u = 1\n")
    (root / "a.py").write_text("a = 1\n")
    _commit(root)
    edited = _MANY_HUNKS.replace("return 3\n", "return -3\n").replace("return 9\n", "return -9\n")
    edited = edited.replace("def f20():\n    return 20\n\n", "")
    (root / "many.py").write_text(edited + "def f20():\n    return 20\n")
    frob = _FROB.replace('        printf("Your answer is: ");\n', "").replace("fact(10)", "fib(10)")
    cut = frob.index("int fact")
    frob = frob[:cut] + frob[frob.index("int main") :]
    (root / "frob.c").write_text(frob.replace("// Frobs", _FIB + "// Frobs"))
    (root / "blocks.c").write_text(_BLOCKS.replace("{\n    b", "{\n    c;\n}\n\n{\n    b"))
    (root / "ünï.py").write_text("u = 2\n")
    (root / "a.py").write_text("a = 2\n")
    git(root, "mv", "model.py", "net.py")
    (root / "notes.txt").write_text("n\n")
    return root


@pytest.fixture(scope="module")
def hostile_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``_hostile_project`` made once for the module: 27 tests read it, each in a copy of its
    own (it was twenty git commands a test, 0.2 s each of 27)."""
    return _hostile_project(tmp_path_factory.mktemp("hostile"))


def _hostile_copy(template: Path, tmp_path: Path) -> Path:
    """The template copied to ``tmp_path``: the submodules' gitfiles and worktree settings are
    relative, so the copy is a repository of its own, the same bytes in the same states."""
    root = tmp_path / template.name
    shutil.copytree(template, root, symlinks=True)
    return root


def _git_config(path: Path, settings: dict[str, str], project: Path) -> Path:
    order = project.parent / "order.txt"
    order.write_text("ünï.py\nmany.py\na.py\n")
    external = project.parent / "external.sh"
    external.write_text("#!/bin/sh\necho EXTERNAL DIFF\n")
    external.chmod(0o755)
    values = {"EXTERNAL": str(external), "ORDER": str(order)}
    lines = []
    for key, value in settings.items():
        section, name = key.split(".", 1)
        lines.append(f"[{section}]\n\t{name} = {values.get(value, value)}\n")
    path.write_text("".join(lines))
    return path


@pytest.mark.slow
@pytest.mark.parametrize("key", list(HOSTILE))
def test_a_git_setting_of_the_machine_changes_nothing_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hostile_template: Path, key: str
) -> None:
    root = _hostile_copy(hostile_template, tmp_path)
    plain = _probe(root)
    config = _git_config(tmp_path / "gitconfig", {key: HOSTILE[key]}, root)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    assert _probe(root).to_dict() == plain.to_dict()


def test_all_those_settings_at_once_change_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hostile_template: Path
) -> None:
    root = _hostile_copy(hostile_template, tmp_path)
    plain = _probe(root)
    assert plain.dirty and "notes.txt" in {u.path for u in plain.untracked}
    assert "diff --git a/many.py b/many.py" in plain.patch
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(_git_config(tmp_path / "cfg", HOSTILE, root)))
    assert _probe(root).to_dict() == plain.to_dict()


def test_reading_the_state_leaves_the_index_as_it_was(tmp_path: Path) -> None:
    """``GIT_OPTIONAL_LOCKS=0``: status refreshes the index in memory only, so a snapshot
    never writes into the repository it records (nor fights a running git for its lock)."""
    root = _bare_project(tmp_path)
    _commit(root)
    index = root / ".git" / "index"
    old = index.stat().st_mtime_ns - 10**9  # stale stat data: status would rewrite it
    os.utime(root / "model.py", ns=(old, old))
    before = index.read_bytes(), index.stat().st_mtime_ns
    _probe(root)
    assert (index.read_bytes(), index.stat().st_mtime_ns) == before


# --- a repository git refuses -----------------------------------------------------------------


def test_a_repository_owned_by_another_user_is_one_line_saying_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _bare_project(tmp_path)
    _commit(root)
    monkeypatch.setenv("GIT_TEST_ASSUME_DIFFERENT_OWNER", "1")  # git's own test knob
    for required in (True, False):
        with pytest.raises(RepoError) as caught:
            code.probe(root, required=required)
        said = str(caught.value)
        assert "\n" not in said and str(root) in said and "another user" in said, said
        assert f"git config --global --add safe.directory {root}" in said, said


# --- the remote, as GitPython's ``git remote get-url`` gave it -------------------------------

REMOTES: dict[str, tuple[list[tuple[str, ...]], str | None]] = {
    "credentials stripped": (
        [("remote", "add", "origin", "https://bob:tok@github.com/a/b.git")],
        "https://github.com/a/b.git",
    ),
    "no origin: the first in the config": (
        [("remote", "add", "zeta", "https://z/z.git"), ("remote", "add", "alpha", "https://a/a")],
        "https://z/z.git",
    ),
    "insteadOf, the longest prefix": (
        [
            ("remote", "add", "origin", "gh:team/x.git"),
            ("config", "url.https://github.com/.insteadOf", "gh:"),
            ("config", "url.https://github.com/team/.insteadOf", "gh:team/"),
        ],
        "https://github.com/team/x.git",
    ),
    "two URLs: the first": (
        [
            ("remote", "add", "origin", "https://one/x.git"),
            ("remote", "set-url", "--add", "origin", "https://two/x.git"),
        ],
        "https://one/x.git",
    ),
    "a dotted name": ([("remote", "add", "my.fork", "https://f/x.git")], "https://f/x.git"),
    "origin without a URL: its name": (
        [
            ("config", "remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*"),
            ("remote", "add", "up", "https://u/x.git"),
        ],
        "origin",
    ),
    "none": ([("config", "remote.pushDefault", "origin")], None),
}


@pytest.mark.parametrize("case", list(REMOTES))
def test_the_remote_is_read_as_git_remote_get_url_gives_it(tmp_path: Path, case: str) -> None:
    root = _bare_project(tmp_path)
    _commit(root)
    commands, want = REMOTES[case]
    for args in commands:
        git(root, *args)
    assert _probe(root).remote == want


def test_a_remote_in_the_users_config_only_is_not_the_repositorys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _bare_project(tmp_path)
    _commit(root)
    config = tmp_path / "gitconfig"
    config.write_text('[remote "origin"]\n\turl = https://global/x.git\n')
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    assert _probe(root).remote is None
