"""Put a repository back at a snapshot's code: its HEAD, with its uncommitted patch applied.

What the user has is never lost and never hidden:

- their uncommitted work goes into a stash, untracked files included, and is said as soon
  as the stash exists; envguard's own files (the lockfile, its journal, cache archives,
  envguard.toml) and venvs never go into it;
- envguard's own files are moved aside into ``.git/`` for the checkout (a journal there
  lets the next run put them back after a kill) and put back where they were;
- a checkout that would overwrite or delete an ignored file (a checkpoint, a local config)
  is refused before anything changes;
- on any failure (a stash git stored and then failed to finish, a full disk, a ^C, a tree
  that does not match after the patch) the repository goes back to where it was and the
  stash is popped, staged changes staged again, envguard's own files as they were.

Every git call goes through :mod:`envguard._git`: a held ``index.lock`` is one line.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envguard import _git, catalog
from envguard._confine import Root
from envguard.errors import NotRestored, RepoError, RestoreError
from envguard.model import CodeState
from envguard.probes import code as code_probe

HELD = "envguard-held"  # under .git/: envguard's own files while the checkout runs


@dataclass(frozen=True, kw_only=True)
class CodeOutcome:
    root: str
    head: str
    branch: str | None
    saved: str | None  # "stash@{0} 1a2b3c4d5e6f (envguard restore …)" when work was kept
    patched_files: int
    kept: tuple[str, ...] = ()  # envguard's own files left in place across the checkout
    back: str = ""  # how to go back to where the user was
    recovered: tuple[str, ...] = ()  # what a killed restore had left, put right


def restore_code(
    state: CodeState,
    repo_path: Path,
    on_work: Callable[[str | None], None] | None = None,
    own: Iterable[Path] = (),
    venvs: Iterable[Path] = (),
) -> CodeOutcome:
    """``on_work`` hears where the user's work is as soon as that changes (the stash, or
    None once a rollback put it back); ``own``: more of envguard's files (the lockfile
    restored from, its archive); ``venvs``: venv folders inside the repo, never stashed."""
    tell = on_work or (lambda where: None)
    repo = _open(repo_path)
    root = Path(repo.working_tree_dir)
    notes = _recover_held(repo)
    _require_commit(repo, state.head)
    if state.redacted:
        raise NotRestored(
            "the snapshot's patch had secret values redacted, so it cannot be "
            "applied byte-exact; nothing was changed"
        )
    origin = _where(repo)
    mine = _own_files(repo, root, own)
    keep_out = _excluded(root, mine, venvs)
    _refuse_ignored_clashes(repo, state.head, keep_out)
    before = _git.text(repo, "rev-parse", "HEAD")
    saved, failed = _stash(repo, _stashable(repo, keep_out))
    try:  # from here on, any failure puts the repository back
        if saved:
            tell(saved)
        if failed is not None:
            raise failed
        branch = _move(repo, state, root, mine)
        head = _git.text(repo, "rev-parse", "HEAD")  # read here: a failure reading rolls back
        moved = head != before
        back = _way_back(repo, origin, saved, mine if moved else set(), moved)
    except BaseException:
        _back(repo, origin, saved, keep_out, mine)
        if saved:
            tell(None)
        raise
    return CodeOutcome(
        root=str(root),
        head=head,
        branch=branch,
        saved=saved,
        patched_files=len(state.changed),
        kept=tuple(sorted(mine)) if moved else (),
        back=back,
        recovered=tuple(notes),
    )


def _move(repo: Any, state: CodeState, root: Path, mine: set[str]) -> str | None:
    """The snapshot's commit and patch, envguard's own files kept in place; the branch."""
    held = _hold(repo, root, mine)
    branch = _checkout(repo, state, root)
    if state.patch:
        _apply(repo, state.patch_bytes())
        _intend_to_add(repo, state)
    _put_back(repo, held)
    now, _ = code_probe.probe(root, required=True)
    if now is None or not _same_code(now, state):
        raise NotRestored("after applying, the working tree does not match the snapshot")
    return branch


def _open(path: Path) -> Any:
    repo = _git.open_repo(path, required=True)
    assert repo is not None
    return repo


def _same_code(now: CodeState, state: CodeState) -> bool:
    """The working tree is the snapshot's: the same dirty files with the same blobs
    (envguard's own files aside, which are kept as they were)."""

    def files(s: CodeState) -> set[tuple[str, str]]:
        return {(f.path, f.blob or f.sha256) for f in s.changed if not catalog.is_own_file(f.path)}

    if all(f.blob for f in state.changed):
        return files(now) == files(state)
    return now.patch_sha256 == state.patch_sha256


def _require_commit(repo: Any, head: str) -> None:
    if not head:
        raise RestoreError("the snapshot's repository had no commits: nothing to check out")
    if not _git.commit_exists(repo, head):
        raise NotRestored(
            f"commit {head[:12]} is not in {repo.working_tree_dir}; fetch it (git fetch --all) "
            "and run restore again. Nothing was changed"
        )


def _where(repo: Any) -> str:
    try:
        return str(repo.active_branch.name)
    except TypeError:
        return str(repo.head.commit.hexsha)


def _own_files(repo: Any, root: Path, extra: Iterable[Path]) -> set[str]:
    """envguard's own files in the working tree, tracked or not (relative paths), and an
    untracked .gitignore that only keeps its cache archives out of git."""
    from envguard.probes.code import is_envguard_gitignore

    listed = _git.output(repo, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    names = listed.decode("utf-8", "surrogateescape").split("\0")
    out = {n for n in names if n and catalog.is_envguard_file(n) and (root / n).is_file()}
    others = _git.output(repo, "ls-files", "-z", "--others", "--exclude-standard")
    for name in others.decode("utf-8", "surrogateescape").split("\0"):
        if name and is_envguard_gitignore(root, name):
            out.add(name)
    for path in extra:
        with contextlib.suppress(ValueError, OSError):
            rel = path.resolve().relative_to(root.resolve()).as_posix()
            if (root / rel).is_file():
                out.add(rel)
    return out


def _excluded(root: Path, own: set[str], venvs: Iterable[Path]) -> list[str]:
    """Pathspecs that keep envguard's files, restore's venv backups and venvs inside the
    repository out of the stash and out of a rollback's clean."""
    specs = [f":(exclude,literal){rel}" for rel in sorted(own)]
    specs += [f":(exclude,glob)**/*{m}*/**" for m in catalog.OWN_DIR_MARKERS]
    for venv in venvs:
        with contextlib.suppress(ValueError, OSError):
            rel = venv.resolve().relative_to(root.resolve()).as_posix()
            if rel != ".":
                specs.append(f":(exclude,literal){rel}")
    for cfg in root.glob("*/pyvenv.cfg"):  # an unignored venv at the top of the repo
        specs.append(f":(exclude,literal){cfg.parent.name}")
    return specs


def _stashable(repo: Any, keep_out: list[str]) -> list[str]:
    """The exclusions less those naming a path git ignores (a venv under ``.venv/`` in
    .gitignore, an ignored lockfiles/). ``git stash push`` runs ``git add`` on its pathspec,
    and git (2.39) takes an exclusion of an ignored path for a request to add it: it refuses,
    half-way through the stash. An ignored path is never stashed, so it needs no exclusion."""
    literal = ":(exclude,literal)"
    named = [spec.removeprefix(literal) for spec in keep_out if spec.startswith(literal)]
    if not named:
        return keep_out
    # check-ignore reads each name as a path, not a pattern; -z needs --stdin, and with
    # quotepath off only a name holding a quote or a control character comes back quoted
    # (its exclusion is then kept)
    said = _git.text(repo, "-c", "core.quotepath=off", "check-ignore", "--", *named, check=False)
    ignored = {f"{literal}{path}" for path in said.splitlines()}
    return [spec for spec in keep_out if spec not in ignored]


def _refuse_ignored_clashes(repo: Any, head: str, keep_out: list[str]) -> None:
    """Ignored files are not stashed and git's checkout treats them as disposable: refuse a
    checkout that would overwrite or delete one, before anything changes."""
    tree = _git.output(repo, "ls-tree", "-r", "--name-only", "-z", head)
    wanted = {p for p in tree.decode("utf-8", "surrogateescape").split("\0") if p}
    folders = {p.rsplit("/", i)[0] for p in wanted for i in range(1, p.count("/") + 1)}
    ignored = _git.output(
        repo, "ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory",
        "--", ".", *keep_out,
    )  # fmt: skip
    clashes = []
    for entry in ignored.decode("utf-8", "surrogateescape").split("\0"):
        if not entry:
            continue
        path = entry.rstrip("/")
        if path in wanted or (not entry.endswith("/") and path in folders):
            clashes.append(path)
        elif entry.endswith("/") and path in folders:
            inside = _git.output(
                repo, "ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--",
                f":(literal){path}",
            )  # fmt: skip
            names = inside.decode("utf-8", "surrogateescape").split("\0")
            clashes += [f for f in names if f in wanted]
    if clashes:
        shown = ", ".join(sorted(clashes)[:5]) + (" …" if len(clashes) > 5 else "")
        raise NotRestored(
            f"the snapshot's commit would overwrite ignored files git does not stash ({shown}): "
            "move them away first. Nothing was changed"
        )


def _stash(repo: Any, specs: list[str]) -> tuple[str | None, BaseException | None]:
    """Stash the user's uncommitted work, untracked files included, and name the stash only
    if this push made one (``stash@{0}`` may be the user's own older stash). git stores the
    stash before it cleans the tree: a push that fails after that is returned with its error,
    for the rollback to pop; one that fails before has changed nothing and raises."""
    status = _git.text(repo, "status", "--porcelain", "-uall", "--", ".", *specs)
    if not status:
        return None, None
    before = _stash_top(repo)
    message = f"envguard restore {time.strftime('%Y-%m-%d %H:%M:%S')}"
    failed: BaseException | None = None
    try:
        _git.output(repo, "stash", "push", "--include-untracked", "-m", message, "--", ".", *specs)
    except BaseException as exc:  # a ^C too: git may have stored the stash already
        failed = exc
    try:
        after = _stash_top(repo)
    except RepoError as exc:  # cannot tell whether the push made a stash: never guess
        raise RepoError(
            f"{exc}; your uncommitted work may be in the newest stash (git stash list): "
            "`git stash pop --index` brings it back"
        ) from failed
    if not after or after == before:
        if failed is not None:
            raise failed
        return None, None  # nothing git would stash (a dirty submodule): nothing was taken
    saved = f"stash@{{0}} {after[:12]} ({message}); `git stash pop --index` brings it back"
    return saved, failed


def _stash_top(repo: Any) -> str:
    """The newest stash's commit, or "" when there is none (a failure to read it raises,
    rather than reading as no stash)."""
    return _git.text(repo, "for-each-ref", "--format=%(objectname)", "refs/stash")


def _hold_dir(repo: Any) -> Path:
    return Path(repo.git_dir) / HELD


def _hold(repo: Any, root: Path, own: set[str]) -> dict[str, str]:
    """Move envguard's own files into .git/ (tracked ones are copied, then reset to HEAD so
    the checkout can move them), with a journal: a kill leaves them where the next run
    finds them."""
    if not own:
        return {}
    listed = _git.output(repo, "ls-files", "-z", "--", *(f":(literal){rel}" for rel in own))
    tracked = {t for t in listed.decode("utf-8", "surrogateescape").split("\0") if t}
    held = _set_aside(repo, root, own, {})
    if tracked:
        _git.output(repo, "checkout", "HEAD", "--", *(f":(literal){t}" for t in tracked))
    for rel in own - tracked:
        (root / rel).unlink(missing_ok=True)
    return held


def _set_aside(repo: Any, root: Path, own: set[str], held: dict[str, str]) -> dict[str, str]:
    """Copy into .git/ those of envguard's own files that ``held`` has no copy of, and journal
    them all. Names are unique, so a copy is never written over another."""
    copied = {rel for rel, keep in held.items() if Path(keep).is_file()}
    todo = [rel for rel in sorted(own - copied) if (root / rel).is_file()]
    if not todo:
        return held
    folder = _hold_dir(repo)
    folder.mkdir(exist_ok=True)
    held = dict(held)
    for rel in todo:
        fd, keep = tempfile.mkstemp(dir=folder, prefix="held-")
        os.close(fd)
        shutil.copy2(root / rel, keep)
        held[rel] = keep
    (folder / "held.json").write_text(json.dumps({"root": str(root), "files": held}))
    return held


def _put_back(repo: Any, held: dict[str, str]) -> None:
    if not held:
        return  # nothing of this run's in .git/: a journal a kill left there stays
    room = Root(Path(repo.working_tree_dir), what="envguard's own file")
    for rel, keep in held.items():  # never through a link the checked-out commit holds
        with contextlib.suppress(FileNotFoundError):
            room.move_in(rel, Path(keep))
    shutil.rmtree(_hold_dir(repo), ignore_errors=True)


def _journal(repo: Any) -> dict[str, str]:
    """What the journal says is held in .git/ (nothing when it is missing or unreadable)."""
    try:
        files = json.loads((_hold_dir(repo) / "held.json").read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    return {str(k): str(v) for k, v in files.items()} if isinstance(files, dict) else {}


def _recover_held(repo: Any) -> list[str]:
    """Own files a killed restore left in .git/: back where they were, unless something is
    there now (then they stay in .git/, named)."""
    files = _journal(repo)
    if not files:
        return []
    room = Root(Path(repo.working_tree_dir), what="envguard's own file")
    hold = _hold_dir(repo)
    notes = []
    for rel, keep in files.items():
        target = room.path / rel
        kept = Path(keep)
        if kept.parent == hold and kept.is_file() and not (target.exists() or target.is_symlink()):
            room.move_in(rel, kept)
            notes.append(f"put back {rel}, which a killed restore had moved aside")
    if not any(Path(k).exists() for k in files.values()):
        shutil.rmtree(_hold_dir(repo), ignore_errors=True)
    return notes


def stays(repo: Any, state: CodeState, root: Path) -> bool:
    """Whether HEAD, though not the snapshot's commit, holds the snapshot's code: what changed
    between them is only envguard's own files (the lockfile committed since)."""
    head = _git.text(repo, "rev-parse", "HEAD")
    if head == state.head:
        return False
    moved = code_probe.since(root, state.head, head)
    return bool(moved is not None and moved.found and all(m.own for m in moved.files))


def _checkout(repo: Any, state: CodeState, root: Path) -> str | None:
    """The snapshot's commit; or none at all when HEAD differs from it only in envguard's
    own files (the lockfile committed since): that is the snapshot's code already, and the
    user stays on their branch."""
    if stays(repo, state, root):
        try:
            return str(repo.active_branch.name)
        except TypeError:
            return None
    heads = {h.name: h for h in repo.heads}
    branch = state.branch
    if branch is not None and branch in heads and heads[branch].commit.hexsha == state.head:
        _git.output(repo, "checkout", "--quiet", branch)
        return branch
    _git.output(repo, "checkout", "--quiet", "--detach", state.head)
    return None


def _apply(repo: Any, patch: bytes) -> None:
    with tempfile.NamedTemporaryFile(suffix=".patch") as fh:
        fh.write(patch)
        fh.flush()
        try:
            own = [f"--exclude={p}" for p in catalog.ENVGUARD_FILE_PATTERNS]
            _git.output(repo, "apply", "--binary", "--whitespace=nowarn", *own, fh.name)
        except RepoError as exc:
            raise NotRestored(f"the snapshot's patch does not apply: {exc}") from exc


def _intend_to_add(repo: Any, state: CodeState) -> None:
    """The files the patch adds, marked to be added (``git add -N``), as they were staged
    when the snapshot was taken: ``git diff HEAD`` then shows them, and the tree compares
    equal. (``git apply -N`` would do it, but git before 2.42 empties the rest of the index.)"""
    new = [p for p in state.new_files() if not catalog.is_own_file(p)]  # never applied
    if new:
        _git.output(repo, "add", "--intent-to-add", "--", *(f":(literal){p}" for p in new))


def _back(repo: Any, origin: str, saved: str | None, keep_out: list[str], own: set[str]) -> None:
    """Undo a failed restore: the tree as it was, the stash popped with what was staged
    staged again, envguard's own files where they were. The hard reset would take the user's
    edits to a committed lockfile, so every own file has a copy in .git/ first: the hold's,
    or one made now (the failure came before the hold, or after its put-back)."""
    held = _set_aside(repo, Path(repo.working_tree_dir), own, _journal(repo))
    try:
        _git.output(repo, "reset", "--quiet", "--hard", check=False)
        _git.output(repo, "clean", "-fdq", "--", ".", *keep_out, check=False)
        _git.output(repo, "checkout", "--quiet", origin, check=False)
        if saved:
            _git.output(repo, "stash", "pop", "--quiet", "--index")
    finally:
        _put_back(repo, held)


def _way_back(repo: Any, origin: str, saved: str | None, own: set[str], moved: bool) -> str:
    """The commands that return the user to where they were."""
    steps = [f"git checkout {origin}"] if moved else []
    in_the_way = [rel for rel in sorted(own) if _tracked_at(repo, origin, rel)]
    if in_the_way:
        steps.insert(0, f"move {', '.join(in_the_way)} aside ({origin} has it committed)")
    if saved:
        steps.append(("git reset --hard, then " if not moved else "") + "git stash pop --index")
    return ", then ".join(steps)


def _tracked_at(repo: Any, commit: str, rel: str) -> bool:
    listed = _git.output(
        repo, "ls-tree", "--name-only", commit, "--", f":(literal){rel}", check=False
    )
    return bool(listed)
