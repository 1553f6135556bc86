"""``envguard backups`` sizes a backup by what removing it frees, as ``du`` would find it:
files uv hard-linked from its cache stay on disk after the backup goes, so they count nothing;
a file linked twice inside the backup counts once."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.conftest import make_venv
from tests.project import invoke

_STAMP = ".envguard-backup-20260101-120000-abcdef"


def _blocks(path: Path) -> int:
    return os.stat(path).st_blocks * 512


def _backup_beside(train: Path, cache: Path) -> tuple[Path, int]:
    """A backup of ``train`` holding a file of uv's cache (linked), a file of its own and
    one of its own linked twice; the bytes removing it frees."""
    backup = train.parent / (train.name + _STAMP)
    (backup / "lib").mkdir(parents=True)
    cache.mkdir()
    (cache / "torch.so").write_bytes(os.urandom(1 << 20))
    os.link(cache / "torch.so", backup / "lib" / "torch.so")
    (backup / "lib" / "own.py").write_bytes(os.urandom(40_000))
    (backup / "lib" / "twin.py").write_bytes(os.urandom(20_000))
    os.link(backup / "lib" / "twin.py", backup / "twin-again.py")
    folders = _blocks(backup) + _blocks(backup / "lib")  # removed with it, as du counts them
    return backup, folders + _blocks(backup / "lib" / "own.py") + _blocks(
        backup / "lib" / "twin.py"
    )


def test_a_backup_is_what_removing_it_frees(tmp_path: Path) -> None:
    train = make_venv(tmp_path / "train")
    backup, freed = _backup_beside(train, tmp_path / "uv-cache")
    code, out, err = invoke("backups", "--json", "--venv", str(train))
    assert code == 0, err
    (listed,) = json.loads(out)["result"]["backups"]
    assert (listed["path"], listed["bytes"]) == (str(backup), freed)


def test_prune_reports_what_it_freed(tmp_path: Path) -> None:
    train = make_venv(tmp_path / "train")
    backup, freed = _backup_beside(train, tmp_path / "uv-cache")
    code, out, err = invoke("backups", "--prune", "--keep", "0", "--json", "--venv", str(train))
    assert code == 0, err
    (removed,) = json.loads(out)["result"]["removed"]
    assert removed["bytes"] == freed and not backup.exists()
    assert (tmp_path / "uv-cache" / "torch.so").stat().st_nlink == 1  # uv's copy stays


def test_the_screen_says_it_is_what_removing_frees(tmp_path: Path) -> None:
    train = make_venv(tmp_path / "train")
    _backup_beside(train, tmp_path / "uv-cache")
    code, out, err = invoke("backups", "--venv", str(train))
    assert code == 0 and " frees " in out and "set aside 2026-01-01 12:00:00" in out, err
    code, out, err = invoke("backups", "--prune", "--keep", "0", "--venv", str(train))
    assert code == 0 and out.startswith("removed ") and "(freed " in out, err
