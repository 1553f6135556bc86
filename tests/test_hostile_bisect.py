"""A teammate's lockfile cannot make bisect write outside its work folder (#33).

The victim runs ``envguard bisect LOCK`` on a lock a teammate committed, in the incident of
:mod:`tests.test_bisect`, with a home of the test's own holding ``~/.ssh`` and ``~/.triton``.
Each attack is a lock a real ``envguard snapshot`` wrote (in a clone of the victim's
repository, as the teammate's), then edited where an attacker would; after bisect, the
home is byte-identical and nothing is left outside the work folder.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from envguard import variables
from tests.conftest import git
from tests.project import invoke
from tests.test_bisect import METRIC, Incident, _tree, _work
from tests.test_bisect import here as here  # the incident, built once more for this module
from tests.test_bisect import incident as incident

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - 3.10 only
    import tomli as tomllib

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAttackerKeyAttackerKeyAttackerKey mallory\n"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """The victim's home: a key, a Triton cache with a kernel, nothing else."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "authorized_keys").write_text("ssh-ed25519 AAAA...victim victim@box\n")
    (home / ".ssh").chmod(0o700)
    (home / ".triton" / "cache" / "f00d").mkdir(parents=True)
    (home / ".triton" / "cache" / "f00d" / "kernel.json").write_text('{"name": "mine"}')
    return home


def _env(here: Incident, home: Path, **more: str | None) -> dict[str, str | None]:
    return {**here.env, "HOME": str(home), "XDG_CACHE_HOME": None, "XDG_CONFIG_HOME": None,
            "TRITON_CACHE_DIR": None, "BENCH_SLOW_WHEN": "env", **more}  # fmt: skip


def _teammate(
    here: Incident,
    tmp_path: Path,
    home: Path,
    setup: Callable[[Path], None],
    *,
    env: dict[str, str | None] | None = None,
    save_cache: bool = False,
) -> Path:
    """A lock snapshotted in a clone of the victim's repository, as the teammate had it
    (``setup`` makes their working tree); the lock is written outside both trees."""
    clone = tmp_path / "teammate"
    git(tmp_path, "clone", "-q", str(here.root), str(clone))
    setup(clone)
    lock = tmp_path / "lock" / "train.envguard.toml"
    cwd = Path.cwd()
    os.chdir(clone)
    try:
        full = {**_env(here, home), "CUDA_LAUNCH_BLOCKING": None, **(env or {})}
        args = ("snapshot", "-q", "-o", str(lock), *(["--save-cache"] if save_cache else []))
        code, _, err = invoke(*args, env=full)
    finally:
        os.chdir(cwd)
    assert code == 0, err
    return lock


def _edit(lock: Path, change: Callable[[dict[str, Any]], None]) -> None:
    doc = tomllib.loads(lock.read_text())
    change(doc)
    lock.write_text(tomli_w.dumps(doc))


def _everything(home: Path, here: Incident) -> dict[str, object]:
    """What bisect must not change: the home, the repository's tree, the lock's folder."""
    return {"home": _tree(home), "repo": _tree(here.root),
            "status": git(here.root, "status", "--porcelain", "-uall")}  # fmt: skip


def _one_line_refusal(code: int, out: str, err: str, *words: str) -> None:
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err and all(w in err for w in words), err


# --- attack A: a link in the patch, a file "under" it --------------------------------------


def _staged_link(home: Path) -> Callable[[Path], None]:
    def setup(clone: Path) -> None:
        (clone / "lnk").symlink_to(home / ".ssh")
        (clone / "notes.md").write_text("a new file, staged beside it\n")
        git(clone, "add", "lnk", "notes.md")

    return setup


def _untracked_under_link(doc: dict[str, Any]) -> None:
    blob = hashlib.sha1(f"blob {len(KEY)}\0{KEY}".encode()).hexdigest()  # git's blob id
    doc["code"]["untracked"] = [{"path": "lnk/authorized_keys", "size": len(KEY), "blob": blob}]


def _with_content(doc: dict[str, Any]) -> None:
    """The attack as first found: the untracked file's content in the lock, to be written."""
    _untracked_under_link(doc)
    doc["code"]["untracked"][0]["content"] = KEY


@pytest.mark.slow
@pytest.mark.parametrize("command", ["bisect", "restore", "diff"])
def test_a_lock_carrying_an_untracked_files_content_is_refused_where_read(
    here: Incident, tmp_path: Path, home: Path, command: str
) -> None:
    lock = _teammate(here, tmp_path, home, _staged_link(home))
    _edit(lock, _with_content)
    before = _everything(home, here)
    args = {"bisect": (*here.indexes(), *METRIC, "--", "python", "bench.py"),
            "restore": ("--code", "--repo", str(here.root), "--yes"),
            "diff": ()}[command]  # fmt: skip
    code, out, err = invoke(command, str(lock), *args, env=_env(here, home))
    _one_line_refusal(code, out, err, "code.untracked[0].content", "never records")
    assert _everything(home, here) == before
    assert (home / ".ssh" / "authorized_keys").read_text().startswith("ssh-ed25519 AAAA...victim")


@pytest.mark.slow
def test_a_file_under_a_link_of_the_patch_is_refused_and_home_untouched(
    here: Incident, tmp_path: Path, home: Path
) -> None:
    lock = _teammate(here, tmp_path, home, _staged_link(home))
    _edit(lock, _untracked_under_link)
    before = _everything(home, here)
    code, out, err = invoke("bisect", str(lock), *here.indexes(), *METRIC, "--", "python",
                            "bench.py", env=_env(here, home, CUDA_LAUNCH_BLOCKING="1"))  # fmt: skip
    _one_line_refusal(code, out, err, "lnk/authorized_keys", "lnk")
    assert _everything(home, here) == before
    assert (home / ".ssh" / "authorized_keys").read_text().startswith("ssh-ed25519 AAAA...victim")
    assert _work(here) == []


@pytest.mark.slow
def test_a_link_alone_is_a_link_in_the_trial_and_bisect_goes_on(
    here: Incident, tmp_path: Path, home: Path
) -> None:
    """The link itself is the teammate's work, applied as git applies it: a link, named."""
    lock = _teammate(here, tmp_path, home, _staged_link(home))
    keep = tmp_path / "kept"
    before = _everything(home, here)
    code, out, err = invoke("bisect", str(lock), *here.indexes(), *METRIC, "--keep", str(keep),
                            "--", "python", "bench.py",
                            env=_env(here, home, CUDA_LAUNCH_BLOCKING="1"))  # fmt: skip
    assert code == 0, err
    assert "CUDA_LAUNCH_BLOCKING" in out.split("\n")[0]
    said = " ".join(out.split())
    assert f"makes lnk a symbolic link to {home / '.ssh'}: trials apply it as a link" in said
    assert _everything(home, here) == before
    trial = keep / "trial-01"
    links = [p for p in trial.rglob("lnk") if p.is_symlink()]
    assert links and all(os.readlink(p) == str(home / ".ssh") for p in links)


def test_restore_code_applies_the_link_as_a_link_and_says_so(
    here: Incident, tmp_path: Path, home: Path
) -> None:
    lock = _teammate(here, tmp_path, home, _staged_link(home))
    victim = tmp_path / "victim"
    git(tmp_path, "clone", "-q", str(here.root), str(victim))
    before = _tree(home)
    code, out, err = invoke("restore", str(lock), "--code", "--repo", str(victim), "--yes",
                            env=_env(here, home))  # fmt: skip
    assert code == 0, (out, err)
    said = " ".join((out + err).split())
    assert f"lnk -> {home / '.ssh'}" in said and "as links only" in said
    assert (victim / "lnk").is_symlink() and os.readlink(victim / "lnk") == str(home / ".ssh")
    assert (victim / "notes.md").read_text() == "a new file, staged beside it\n"
    assert _tree(home) == before


# --- attack B: a Triton cache nested in the Inductor cache ---------------------------------


def _warm_caches(cache: Path) -> Callable[[Path], None]:
    def setup(clone: Path) -> None:
        triton = cache / "triton" / "abc123"
        triton.mkdir(parents=True)
        (triton / "kernel.json").write_text('{"name": "attacker"}')
        (triton / "authorized_keys").write_text(KEY)

    return setup


@pytest.mark.slow
@pytest.mark.parametrize("nested", ["inside", "dotdot"])
def test_a_locks_triton_cache_never_reaches_the_users(
    here: Incident, tmp_path: Path, home: Path, nested: str
) -> None:
    """Nested in the Inductor cache (``$TORCHINDUCTOR_CACHE_DIR/triton``), or named through
    ``..`` to the victim's own ``~/.triton/cache``: the trials' Triton cache is their own."""
    cache = tmp_path / "team-inductor"
    from envguard.demo.cache import make

    make(cache)
    nested_dir = cache / "triton"
    lock = _teammate(here, tmp_path, home, _warm_caches(cache), save_cache=True,
                     env={"TORCHINDUCTOR_CACHE_DIR": str(cache),
                          "TRITON_CACHE_DIR": str(nested_dir)})  # fmt: skip
    if nested == "dotdot":
        far = f"{cache}/../{os.path.relpath(home / '.triton' / 'cache', cache.parent)}"

        def aim(doc: dict[str, Any]) -> None:
            doc["environ"]["TRITON_CACHE_DIR"] = far

        _edit(lock, aim)
    before = _everything(home, here)
    code, _, err = invoke("bisect", str(lock), *here.indexes(), *METRIC, "--", "python",
                          "bench.py", env=_env(here, home, CUDA_LAUNCH_BLOCKING="1"))  # fmt: skip
    assert code in (0, 1), err
    assert "Traceback" not in err
    assert _everything(home, here) == before
    assert not (home / ".triton" / "cache" / "abc123").exists()
    assert _work(here) == []


# --- a lock's variables ----------------------------------------------------------------------

PRINTS = """\
import os, sys
for name in ("NCCL_DEBUG_FILE", "LD_PRELOAD", "PYTHONPATH", "HOME"):
    print(name, "=", os.environ.get(name, "<unset>"))
print("throughput:", 4.3 if os.environ.get("CUDA_LAUNCH_BLOCKING") == "1" else 21.5)
"""


def _variables(home: Path, tmp_path: Path) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        doc.setdefault("environ", {}).update({
            "NCCL_DEBUG_FILE": str(home / ".ssh" / "authorized_keys"),
            "LD_PRELOAD": str(tmp_path / "evil.so"),
            "PYTHONPATH": str(tmp_path / "evil"),
        })  # fmt: skip

    return change


def _printing(here: Incident, tmp_path: Path) -> Path:
    script = tmp_path / "prints.py"
    script.write_text(PRINTS)
    return script


@pytest.mark.slow
@pytest.mark.parametrize("trust", [False, True])
def test_a_locks_location_is_rebased_and_loaders_need_trust(
    here: Incident, tmp_path: Path, home: Path, trust: bool
) -> None:
    lock = _teammate(here, tmp_path, home, lambda clone: None)
    _edit(lock, _variables(home, tmp_path))
    (tmp_path / "evil").mkdir()
    script = _printing(here, tmp_path)
    keep = tmp_path / "kept"
    flags = ("--trust-lock-env",) if trust else ()
    before = _everything(home, here)
    code, out, err = invoke("bisect", str(lock), *here.indexes(), *METRIC, "--keep", str(keep),
                            *flags, "--", sys.executable, str(script),
                            env=_env(here, home, CUDA_LAUNCH_BLOCKING="1"))  # fmt: skip
    assert code == 0, err
    assert _everything(home, here) == before
    good = (keep / "trial-01" / "run-1" / "output.stdout").read_text()
    seen = dict(line.split(" = ", 1) for line in good.splitlines() if " = " in line)
    assert seen["NCCL_DEBUG_FILE"].startswith(str(keep / "trial-01"))
    assert seen["NCCL_DEBUG_FILE"].endswith("/authorized_keys")
    assert seen["HOME"] == str(home)  # the lock named no home: the user's own, untouched
    said = " ".join(out.split())
    assert "NCCL_DEBUG_FILE" in said and "a folder of its own in its work folder" in said
    if trust:
        assert seen["LD_PRELOAD"] == str(tmp_path / "evil.so")
        assert seen["PYTHONPATH"] == str(tmp_path / "evil")
    else:
        assert seen["LD_PRELOAD"] == "<unset>" and seen["PYTHONPATH"] == "<unset>"
        assert "LD_PRELOAD" in said and "--trust-lock-env" in said


@pytest.mark.parametrize(
    ("name", "value", "role"),
    [
        ("LD_PRELOAD", "/x/evil.so", "loader"),
        ("PYTHONPATH", "src", "loader"),
        ("CUDA_INJECTION64_PATH", "/x/inject.so", "loader"),
        ("TRITON_CACHE_DIR", "/x/triton", "folder"),
        ("XDG_CACHE_HOME", "/x/cache", "folder"),
        ("HOME", "/home/mallory", "folder"),
        ("NCCL_DEBUG_FILE", "/x/nccl.%h.%p", "file"),
        ("CUDA_VISIBLE_DEVICES", "0,1", "value"),
        ("OMP_NUM_THREADS", "8", "value"),
        ("TORCH_LOGS", "+dynamo", "value"),
        ("MY_HOOK", "/usr/bin/evil --now", "loader"),
    ],
)
def test_each_variable_has_one_role(name: str, value: str, role: str) -> None:
    assert variables.role(name, value) == role


# --- secrets: bisect's screen, --json and kept trials ----------------------------------------

SECRETS_PRINTED = """\
import os, sys
print("settings:", os.environ.get("TORCH_SETTINGS", "<unset>"))
print("argv:", " ".join(sys.argv[1:]))
print("throughput:", 4.3 if os.environ.get("CUDA_LAUNCH_BLOCKING") == "1" else 21.5)
"""


def _kept_text(keep: Path) -> dict[str, str]:
    """What envguard wrote into the kept trials (requirements, patches, runs' output, its
    records), not the trials' copies of the user's own code and venvs, left as they ran."""
    out = {}
    for path in keep.rglob("*"):
        parts = set(path.relative_to(keep).parts)
        if path.is_file() and not path.is_symlink() and not parts & {"venv", "tree", ".venv"}:
            out[str(path.relative_to(keep))] = path.read_text(errors="replace")
    return out


@pytest.mark.slow
def test_no_gitleaks_shape_reaches_bisects_screen_json_or_kept_trials(
    here: Incident, tmp_path: Path, home: Path
) -> None:
    """Every token gitleaks knows alone, in a variable the trials set (and the benchmark
    prints) and in the benchmark's argv: none on the screen, in --json or in a kept file."""
    from tests import secrets_corpus as corpus
    from tests.test_secret_places import _leaks

    shapes = [s for s in corpus.shapes("bisect") if not (s.line or s.ident)]
    lock = _teammate(here, tmp_path, home, lambda clone: None)
    script = tmp_path / "prints.py"
    script.write_text(SECRETS_PRINTED)
    argv = [w for i, s in enumerate(shapes) for w in ([s.secret], ["--token", s.secret])[i % 2]]
    env = _env(here, home, CUDA_LAUNCH_BLOCKING="1",
               TORCH_SETTINGS=" ".join(s.secret for s in shapes))  # fmt: skip
    outputs = {}
    for json_flag in ((), ("--json",)):
        keep = tmp_path / f"kept{len(json_flag)}"
        code, out, err = invoke("bisect", str(lock), *here.indexes(), *METRIC, *json_flag,
                                "--keep", str(keep), "--", sys.executable, str(script), *argv,
                                env=env)  # fmt: skip
        assert code == 0, err
        outputs.update({f"screen{json_flag}": out + err, **_kept_text(keep)})
    # the runs' output was kept, and held what the benchmark printed: Workspace.scrub's work
    assert any(n.endswith("output.stdout") for n in outputs)
    leaked = {s.rule: where for s in shapes if (where := _leaks(s.secret, outputs))}
    print(f"bisect: {len(leaked)} of {len(shapes)} gitleaks shapes leaked")
    assert not leaked, leaked
