"""A trial's copy standing in a custom cache folder of the user's (``bisect --cache-dir``):
the folder set aside and put back whatever ends the run, and by the next bisect when this
one was killed; a journal is read as untrusted."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from envguard.bisect import standin
from envguard.bisect.standin import Place, StandIns


def _tree(root: Path) -> dict[str, bytes]:
    files = (p for p in sorted(root.rglob("*")) if p.is_file())
    return {str(p.relative_to(root)): p.read_bytes() for p in files}


def _users(tmp_path: Path) -> Path:
    folder = tmp_path / "scratch" / "aot"
    (folder / "k").mkdir(parents=True)
    (folder / "k" / "kernel.so").write_bytes(b"the user's")
    return folder


def _good(tmp_path: Path) -> Path:
    good = tmp_path / "warm" / "custom-0"
    (good / "k").mkdir(parents=True)
    (good / "k" / "kernel.so").write_bytes(b"GOOD's")
    return good


def _stand_ins(tmp_path: Path, owner: str = "1 0") -> StandIns:
    (tmp_path / "journals").mkdir(exist_ok=True)
    return StandIns(tmp_path / "journals" / "aside-1.json", owner, "1")


def test_the_copy_stands_in_while_the_run_lasts_and_the_folder_comes_back(
    tmp_path: Path,
) -> None:
    folder, good = _users(tmp_path), _good(tmp_path)
    before = _tree(folder)
    stand_ins = _stand_ins(tmp_path)
    with pytest.raises(KeyboardInterrupt), stand_ins.standing([Place(folder=folder, source=good)]):
        assert _tree(folder) == {"k/kernel.so": b"GOOD's"}
        assert json.loads(stand_ins.journal.read_text())["places"][0]["had"] is True
        (folder / "k" / "tuned.json").write_text("what the run wrote")
        raise KeyboardInterrupt  # ^C mid-run
    assert _tree(folder) == before
    assert sorted(p.name for p in folder.parent.iterdir()) == ["aot"]
    assert not stand_ins.journal.exists()


def test_the_users_own_copy_is_copied_from_where_it_was_set_aside(tmp_path: Path) -> None:
    folder = _users(tmp_path)
    before = _tree(folder)
    with _stand_ins(tmp_path).standing([Place(folder=folder, source=folder)]):
        assert _tree(folder) == before  # a copy, not the folder: its inode is another
        (folder / "k" / "kernel.so").write_bytes(b"rebuilt")
    assert _tree(folder) == before


def test_a_folder_that_was_not_there_is_not_there_after(tmp_path: Path) -> None:
    folder, good = tmp_path / "gone" / "deeper" / "aot", _good(tmp_path)
    with _stand_ins(tmp_path).standing([Place(folder=folder, source=good)]):
        assert _tree(folder) == {"k/kernel.so": b"GOOD's"}
    assert not (tmp_path / "gone").exists()  # and the folders made for it


def _killed(tmp_path: Path, folder: Path, *, set_aside: bool = True) -> Path:
    """What a bisect killed mid-run leaves: its journal, the user's folder aside and the
    trial's copy in its place (or, killed before it set the folder aside, the folder)."""
    aside = folder.with_name(f".{folder.name}.envguard-aside-424242")
    if set_aside:
        folder.rename(aside)
        (folder / "k").mkdir(parents=True)
        (folder / "k" / "kernel.so").write_bytes(b"GOOD's")
    journal = tmp_path / "journals" / "aside-424242.json"
    journal.parent.mkdir(exist_ok=True)
    journal.write_text(json.dumps({"owner": "424242 17", "places": [
        {"folder": str(folder), "aside": str(aside), "had": True, "made": []}]}))  # fmt: skip
    return journal


@pytest.mark.parametrize("set_aside", [True, False])
def test_a_killed_bisects_folders_are_put_back_by_the_next(tmp_path: Path, set_aside: bool) -> None:
    folder = _users(tmp_path)
    before = _tree(folder)
    journal = _killed(tmp_path, folder, set_aside=set_aside)
    standin.collect(journal.parent, alive=lambda owner: False)
    assert _tree(folder) == before
    assert sorted(p.name for p in folder.parent.iterdir()) == ["aot"]
    assert not journal.exists()


def test_a_running_bisects_journal_is_left_alone(tmp_path: Path) -> None:
    folder = _users(tmp_path)
    journal = _killed(tmp_path, folder)
    standin.collect(journal.parent, alive=lambda owner: owner == "424242 17")
    assert journal.exists() and _tree(folder) == {"k/kernel.so": b"GOOD's"}


@pytest.mark.parametrize(
    "entry",
    [
        # a folder no cache may be in: the home's .ssh, with a "copy" that is a key
        {"folder": "{home}/.ssh", "aside": "{home}/..ssh.envguard-aside-1", "had": True},
        # an aside that is not the one a stand-in makes beside its folder
        {"folder": "{tmp}/scratch/aot", "aside": "{tmp}/elsewhere", "had": True},
        {"folder": "{tmp}/scratch/aot", "aside": "{tmp}/scratch/.aot.envguard-aside-1",
         "had": "yes"},
        # folders "made" that are not above it: rmdir'd as the folder's parents
        {"folder": "{tmp}/scratch/aot", "aside": "{tmp}/scratch/.aot.envguard-aside-1",
         "had": False, "made": ["{tmp}/keep"]},
    ],
)  # fmt: skip
def test_a_journal_from_elsewhere_moves_nothing_it_does_not_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entry: dict[str, object]
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("marker: the user's key")
    (tmp_path / "keep").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "x").write_text("marker")
    folder = _users(tmp_path)
    fill = {"{home}": str(home), "{tmp}": str(tmp_path)}

    def filled(v: object) -> object:
        if isinstance(v, list):
            return [filled(x) for x in v]
        if isinstance(v, str):
            for k, w in fill.items():
                v = v.replace(k, w)
        return v

    place = {k: filled(v) for k, v in entry.items()}
    aside = Path(str(place["aside"]))  # what the journal would put in the folder's place
    aside.mkdir(exist_ok=True)
    (aside / "id_ed25519").write_text("marker: not the user's")
    journals = tmp_path / "journals"
    journals.mkdir()
    before = _tree(tmp_path)
    (journals / "aside-9.json").write_text(json.dumps({"owner": "9 9", "places": [place]}))
    standin.collect(journals, alive=lambda owner: False)
    assert _tree(tmp_path) == before and folder.is_dir()
    assert (tmp_path / "keep").is_dir()


def test_the_journal_names_this_process(tmp_path: Path) -> None:
    assert standin.journal_for(tmp_path) == tmp_path / f"aside-{os.getpid()}.json"
