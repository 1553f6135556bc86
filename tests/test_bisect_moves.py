"""The drift cut into moves (#21): from two snapshots in memory, as diff names them."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from envguard.bisect.moves import HEAD, PATCH, Move, cache_namers, derive, fix, trial_packages
from envguard.model import ChangedFile, CodeState, CompileCache, UntrackedFile
from tests.factories import base, dist, inductor, torch_build

LATER = "2026-11-30T19:46:15Z"  # one install, a second apart
LATER2 = "2026-11-30T19:46:16Z"


def _incident() -> tuple[object, object]:
    """GOOD: cu128 torch, transformers 5.6.0. BAD: cu130 torch with its cu13 wheels,
    transformers 5.8.1, sglang with the packages it brought, a package installed on its own."""
    good = base(
        packages=(
            dist("torch", "2.11.0+cu128", requires=("nvidia-cudnn-cu12==9.10.2.21",)),
            dist("nvidia-cudnn-cu12", "9.10.2.21"),
            dist("transformers", "5.6.0", requires=("tokenizers>=0.22", "hf-old")),
            dist("hf-old", "1.0"),
            dist("tokenizers", "0.22.1"),
            dist("numpy", "2.3.0"),
        )
    )
    bad = base(
        torch=torch_build("2.11.0+cu130", cuda="13.0"),
        packages=(
            dist("torch", "2.11.0+cu130", LATER, requires=("nvidia-cudnn-cu13==9.19.0.56",
                                                            "sympy>=1")),
            dist("nvidia-cudnn-cu13", "9.19.0.56", LATER),
            dist("sympy", "1.14", LATER),
            dist("transformers", "5.8.1", LATER, requires=("tokenizers>=0.22",)),
            dist("tokenizers", "0.22.1"),
            dist("numpy", "2.3.0"),
            dist("sglang", "0.5.23", LATER2, requires=("torch==2.11.0", "transformers==5.8.1",
                                                        "sgl-dep", "shared")),
            dist("sgl-dep", "1.0", LATER2, requires=("sgl-deeper",)),
            dist("sgl-deeper", "1.0", LATER2),
            dist("shared", "2.0", LATER2),
            dist("loner", "3.0", "2026-12-02T08:00:00Z"),
        ),
    )  # fmt: skip
    return good, bad


def test_the_torch_family_is_one_move_with_what_it_brought() -> None:
    good, bad = _incident()
    moves = derive(good, bad).moves  # type: ignore[arg-type]
    (torch,) = [m for m in moves if m.kind == "torch"]
    assert torch.subject == "torch" and (torch.old, torch.new) == ("2.11.0+cu128", "2.11.0+cu130")
    assert set(torch.members) == {"torch", "nvidia-cudnn-cu12", "nvidia-cudnn-cu13", "sympy"}


def test_each_other_package_moves_with_the_one_that_brought_it() -> None:
    good, bad = _incident()
    by_subject = {m.subject: m for m in derive(good, bad).moves}  # type: ignore[arg-type]
    # key libraries by name, each with what came with it and is required by it
    assert by_subject["transformers"].kind == "libraries"
    assert set(by_subject["transformers"].members) == {"transformers", "hf-old"}  # it went
    assert by_subject["sglang"].members == ("sglang", "sgl-deeper", "sgl-dep", "shared")
    # sglang requires torch and transformers: they stay moves of their own
    assert "torch" not in by_subject["sglang"].members
    assert by_subject["loner"] == Move(
        kind="packages", subject="loner", old="absent", new="3.0", members=("loner",)
    )
    assert set(by_subject) == {"torch", "transformers", "sglang", "loner"}


def test_a_trial_lock_takes_each_applied_moves_packages_from_bad() -> None:
    good, bad = _incident()
    moves = {m.subject: m for m in derive(good, bad).moves}  # type: ignore[arg-type]
    trial = trial_packages(good, bad, [moves["sglang"]])  # type: ignore[arg-type]
    versions = trial.versions()
    assert versions["torch"] == "2.11.0+cu128" and trial.torch == good.torch  # type: ignore[attr-defined]
    assert versions["sglang"] == "0.5.23" and versions["transformers"] == "5.6.0"
    assert "loner" not in versions
    with_torch = trial_packages(good, bad, [moves["torch"]])  # type: ignore[arg-type]
    assert with_torch.torch == bad.torch  # type: ignore[attr-defined]
    assert "nvidia-cudnn-cu12" not in with_torch.versions()


def test_code_caches_and_environment_as_diff_names_them() -> None:
    changed = ChangedFile(path="model.py", added=1, removed=0, sha256="s", blob="b1")
    good = base(environ={"NCCL_DEBUG": "WARN", "UV_INDEX_URL": "x", "HF_TOKEN": "<redacted>"})
    bad = base(
        code=CodeState(root="/src/train", head="b" * 40, branch="main", dirty=True,
                       changed=(changed,),
                       untracked=(UntrackedFile(path="lockfiles/x.envguard.toml", size=1),)),
        caches=(inductor(entries=0, size=0),),
        environ={"NCCL_DEBUG": "INFO", "CUDA_LAUNCH_BLOCKING": "1", "UV_INDEX_URL": "y",
                 "TORCHINDUCTOR_CACHE_DIR": "/elsewhere", "HF_TOKEN": "<redacted>2"},
    )  # fmt: skip
    derived = derive(good, bad, warm={"inductor"})
    shown = [(m.kind, m.subject, m.old, m.new) for m in derived.moves]
    assert shown == [
        ("code", HEAD, "a" * 12, "b" * 12),
        ("code", PATCH, "clean", "+1 −0 in model.py"),  # envguard's own files are not code
        ("caches", "Inductor cache", "285 entries / 353 MB", "gone"),
        ("env", "CUDA_LAUNCH_BLOCKING", "unset", "1"),
        ("env", "NCCL_DEBUG", "WARN", "INFO"),
    ]
    assert any("HF_TOKEN" in n and "redacted" in n for n in derived.notes)


def test_a_cache_the_lock_did_not_save_is_no_move_and_is_said() -> None:
    derived = derive(base(), base(caches=(inductor(entries=0, size=0),)))
    assert derived.moves == ()
    assert any("--save-cache" in n for n in derived.notes)


EXT = "/scratch/ext"  # torch's JIT-built extensions, a custom cache of the user's


def _ext(files: int) -> CompileCache:
    """Its files are none of Inductor's kinds of entry: it holds ``files``."""
    return CompileCache(kind="custom", path=EXT, exists=files > 0, files=files,
                        bytes=files * 1000, fingerprint=f"x{files}")  # fmt: skip


def test_a_custom_cache_a_variable_names_is_a_move() -> None:
    """TORCH_EXTENSIONS_DIR names the folder (so the lock recorded it so too): a trial points
    it at its own copy, so the cache is a move like Inductor's, put back by restore --cache
    with the folder allowed."""
    good = base(caches=(_ext(3),), environ={"TORCH_EXTENSIONS_DIR": EXT})
    bad = base(caches=(_ext(0),), environ={"TORCH_EXTENSIONS_DIR": EXT})
    live = {"TORCH_EXTENSIONS_DIR": EXT + "/", "PWD": EXT, "HOME": "/home/u"}
    derived = derive(good, bad, warm={f"custom:{EXT}"}, environ=live)
    (move,) = derived.moves
    assert (move.kind, move.subject, move.new) == ("caches", f"cache {EXT}", "gone")
    assert derived.notes == ()
    assert cache_namers(good, live) == {f"custom:{EXT}": ("TORCH_EXTENSIONS_DIR",)}
    lock, venv = Path("/p/lockfiles/train.envguard.toml"), Path("/p/.venv")
    assert fix(move, good, lock, venv) == (
        ("envguard", "restore", str(lock), "--cache", "--cache-dir", EXT),
    )


@pytest.mark.parametrize(
    ("recorded", "live", "why"),
    [
        ({}, {}, "no variable names that folder"),  # the code names it
        ({"TORCH_EXTENSIONS_DIR": "/old"}, {"TORCH_EXTENSIONS_DIR": EXT},  # a move of its own
         "no variable names that folder"),
        ({}, {"TORCH_EXTENSIONS_DIR": EXT}, "the lock saved no copy"),  # named, not saved
    ],
)  # fmt: skip
def test_a_custom_cache_no_trial_can_have_is_said_not_moved(
    recorded: dict[str, str], live: dict[str, str], why: str
) -> None:
    good = base(caches=(_ext(3),), environ=recorded)
    bad = base(caches=(_ext(0),), environ=recorded)
    warm = set() if "saved" in why else {f"custom:{EXT}"}
    derived = derive(good, bad, warm=warm, environ=live)
    assert [m for m in derived.moves if m.kind == "caches"] == []
    (note,) = [n for n in derived.notes if n.startswith(f"cache {EXT}")]
    assert why in note


def test_a_lock_naming_a_home_dot_folder_as_its_cache_names_no_variable(tmp_path: Path) -> None:
    """A lock is anyone's: its custom cache at ~/.ssh, named by a variable of the user's, is
    still never copied for a trial."""
    ssh = str(Path.home() / ".ssh")
    good = base(caches=(dataclasses.replace(_ext(3), path=ssh),))
    assert cache_namers(good, {"KEYS": ssh}) == {}
    bad = base(caches=(dataclasses.replace(_ext(0), path=ssh),))
    derived = derive(good, bad, warm={f"custom:{ssh}"}, environ={"KEYS": ssh})
    assert derived.moves == ()
    (note,) = derived.notes
    assert "no cache may be in that folder" in note and "every trial reads it as it is" in note


def test_each_move_says_what_puts_just_it_back() -> None:
    good, bad = _incident()
    lock, venv = Path("/p/lockfiles/train.envguard.toml"), Path("/p/.venv")
    by_subject = {m.subject: m for m in derive(good, bad).moves}  # type: ignore[arg-type]
    assert fix(by_subject["torch"], good, lock, venv) == (("envguard", "restore", str(lock)),)  # type: ignore[arg-type]
    assert fix(by_subject["transformers"], good, lock, venv) == (  # type: ignore[arg-type]
        ("uv", "pip", "install", "--python", "/p/.venv", "transformers==5.6.0", "hf-old==1.0"),
    )
    assert fix(by_subject["sglang"], good, lock, venv) == (  # type: ignore[arg-type]
        ("uv", "pip", "uninstall", "--python", "/p/.venv", "sglang", "sgl-deeper", "sgl-dep",
         "shared"),
    )  # fmt: skip
    env = Move(kind="env", subject="NCCL_DEBUG", old="WARN", new="INFO")
    assert fix(env, base(), lock, venv) == (("export", "NCCL_DEBUG=WARN"),)
    blocking = Move(kind="env", subject="CUDA_LAUNCH_BLOCKING", old="unset", new="1")
    assert fix(blocking, base(), lock, venv) == (("unset", "CUDA_LAUNCH_BLOCKING"),)
    patch = Move(kind="code", subject=PATCH, old="clean", new="+1 −0 in model.py")
    assert fix(patch, base(), lock, venv) == (("git", "stash", "push", "--include-untracked"),)
    cache = Move(kind="caches", subject="Inductor cache", old="x", new="gone")
    assert fix(cache, base(), lock, venv) == (("envguard", "restore", str(lock), "--cache"),)


def test_no_drift_no_moves() -> None:
    snap = base()
    assert derive(snap, dataclasses.replace(snap, taken_at=LATER)).moves == ()
