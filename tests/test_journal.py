"""envguard run / log, and journal records winning over inferred causes in diff."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envguard import journal
from envguard.demo.incident import known_good, newer_torch
from envguard.drift import Member
from envguard.errors import JournalError
from tests.conftest import make_venv, offline_install, uv_bin, uv_install
from tests.test_cli import cli, envguard


def _setup(tmp_path: Path) -> tuple[Path, Path, Path]:
    house = tmp_path / "house"
    known_good(house)
    newer_torch(house)
    venv = make_venv(tmp_path / "venv")
    uv_install(venv, house, "torch==2.11.0+cu128")
    assert (
        cli(
            "snapshot",
            "--venv",
            str(venv),
            "--name",
            "train",
            "-q",
            "--no-default-caches",
            cwd=tmp_path,
        ).returncode
        == 0
    )
    return venv, house, tmp_path / "lockfiles" / "train.envguard.toml"


@pytest.mark.slow
def test_run_streams_journals_and_returns_the_exit_code(tmp_path: Path) -> None:
    """run as a process: the command's own output streams through envguard's (a click runner
    in this process would not catch what the child writes)."""
    venv, house, lock = _setup(tmp_path)
    done = envguard(
        "run",
        "--venv",
        str(venv),
        "--",
        *offline_install(house, "needs-new-torch"),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "Installed" in done.stderr  # uv's own output, unchanged
    assert "envguard: `" in done.stderr and "torch" in done.stderr
    entries = journal.read(journal.path_for(lock))
    assert len(entries) == 1
    e = entries[0]
    assert e.exit_code == 0
    assert Member(name="needs-new-torch", old="absent", new="1.0") in e.added
    assert Member(name="torch", old="2.11.0+cu128", new="2.14.1+cu130") in e.changed

    failing = envguard(
        "run", "--venv", str(venv), "--", "sh", "-c", "echo out; exit 3", cwd=tmp_path
    )
    assert failing.returncode == 3 and failing.stdout.startswith("out")
    listed = cli("log", "--venv", str(venv), "--json", cwd=tmp_path)
    doc = json.loads(listed.stdout)
    assert [x["exit_code"] for x in doc["result"]["entries"]] == [0, 3]
    human = cli("log", "--venv", str(venv), cwd=tmp_path)
    assert "needs-new-torch" in human.stdout

    # the journal wins over inference: diff names the command that did it
    diff = cli("diff", str(lock), "--venv", str(venv), "--json", cwd=tmp_path)
    torch = next(c for c in json.loads(diff.stdout)["result"]["changes"] if c["subject"] == "torch")
    assert torch["cause"] == "by `uv pip install needs-new-torch` (journal #1)"
    assert torch["cause_detail"].startswith(f"by `{uv_bin()} pip install --offline")


def test_secrets_in_the_command_stay_out_of_the_journal(tmp_path: Path) -> None:
    venv, _, lock = _setup(tmp_path)
    cli(
        "run",
        "--venv",
        str(venv),
        "--",
        "true",
        "--index-url=https://bob:s3cret-token@pypi.internal/simple",
        "--token=abc123xyz",
        cwd=tmp_path,
    )
    text = journal.path_for(lock).read_text()
    assert "s3cret-token" not in text and "abc123xyz" not in text


def test_corrupt_journal(tmp_path: Path) -> None:
    venv, _, lock = _setup(tmp_path)
    journal.path_for(lock).write_text('{"schema": 1, "command": ["x"]\nnot json\n')
    done = cli("log", "--venv", str(venv), cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1 and ":1: not a journal entry" in done.stderr
    diff = cli("diff", str(lock), "--venv", str(venv), cwd=tmp_path)
    assert diff.returncode == 0 and "causes are inferred instead" in diff.stdout


def test_a_schema_1_journal_reads_its_members_as_records(tmp_path: Path) -> None:
    """Schema 1 wrote a group's members as lines for people; schema 2 reads them as the
    records it writes (#22), and what is none it leaves for the record check to name."""
    group = {"severity": "warning", "area": "packages", "subject": "3 packages", "why": "w",
             "members": ["+ rich 15.0.0", "~ torch 2.11.0+cu128 → 2.11.0+cu130 (by `uv pip "
                         "install torch`)", "- six 1.16.0"]}  # fmt: skip
    entry = {"schema": 1, "command": ["uv"], "user": "u", "host": "h", "cwd": "/",
             "started": "s", "finished": "f", "exit_code": 0, "changes": [group]}  # fmt: skip
    path = tmp_path / "train.envguard-journal.jsonl"
    path.write_text(json.dumps(entry) + "\n" + json.dumps({**entry, "schema": 2}) + "\n")
    # the schema-2 line's members are not records
    with pytest.raises(JournalError, match=r":2\.changes\[0\]\.members\[0\]: expected a table"):
        journal.read(path)
    path.write_text(json.dumps(entry) + "\n")
    (read,) = journal.read(path)
    assert read.changes[0].members == (
        Member(name="rich", old="absent", new="15.0.0"),
        Member(name="torch", old="2.11.0+cu128", new="2.11.0+cu130",
               cause="by `uv pip install torch`"),
        Member(name="six", old="1.16.0", new="absent"),
    )  # fmt: skip


def _old_entry(schema: int, **packages: list[str]) -> dict[str, object]:
    return {"schema": schema, "command": ["uv", "pip", "install", "sglang"], "user": "u",
            "host": "h", "cwd": "/", "started": "2026-11-30T21:54:26Z",
            "finished": "2026-11-30T21:54:30Z", "exit_code": 0, **packages}  # fmt: skip


@pytest.mark.parametrize("schema", [1, 2])
def test_an_old_journal_reads_its_packages_as_records(tmp_path: Path, schema: int) -> None:
    """Schemas 1 and 2 wrote the packages a command added, removed and changed as lines
    ("name 1.0", "name 1.0 → 2.0") that attribution split back; schema 3 reads them as the
    records it writes (#22), and a cause found from them is the one found before."""
    from envguard import attribution
    from tests.factories import base, dist

    old = _old_entry(schema, added=["sglang 0.5.23"], removed=["six 1.16.0"],
                     changed=["rich 14.0.0 → 15.0.0"])  # fmt: skip
    path = tmp_path / "train.envguard-journal.jsonl"
    path.write_text(json.dumps(old) + "\n")
    (read,) = journal.read(path)
    assert read.added == (Member(name="sglang", old="absent", new="0.5.23"),)
    assert read.removed == (Member(name="six", old="1.16.0", new="absent"),)
    assert read.changed == (Member(name="rich", old="14.0.0", new="15.0.0"),)
    assert read.touched() == {"sglang", "six", "rich"}

    before = base(
        taken_at="2026-11-30T21:00:00Z", packages=(dist("rich", "14.0.0"), dist("six", "1.16.0"))
    )
    after = base(taken_at="2026-11-30T22:00:00Z",
                 packages=(dist("rich", "15.0.0"), dist("sglang", "0.5.23")))  # fmt: skip
    (install,) = attribution.installs_since(before, [read])
    assert install.left == {"sglang": "0.5.23", "six": None, "rich": "15.0.0"}
    causes = attribution.causes(before, after, [read])
    assert causes["rich"].short() == "by `uv pip install sglang` (journal #1)"
    assert set(causes) == {"sglang", "six", "rich"}


def test_a_journal_s_packages_are_checked_where_read(tmp_path: Path) -> None:
    """Schema 3's packages are records, and each list's are absent on its own side only:
    a removal recorded as added would tell attribution a version the command never left."""
    path = tmp_path / "train.envguard-journal.jsonl"
    path.write_text(json.dumps(_old_entry(3, added=["sglang 0.5.23"])) + "\n")
    with pytest.raises(JournalError, match=r":1\.added\[0\]: expected a table"):
        journal.read(path)
    wrong = {"name": "six", "old": "1.16.0", "new": "absent", "cause": ""}
    path.write_text(json.dumps(_old_entry(3, added=[wrong])) + "\n")
    with pytest.raises(JournalError, match=r":1\.added\[0\]: '1\.16\.0' → 'absent'"):
        journal.read(path)
    # an old line that is no "name version" is not guessed at: the record check names it
    path.write_text(json.dumps(_old_entry(2, changed=["torch 2.11.0"])) + "\n")
    with pytest.raises(JournalError, match=r":1\.changed\[0\]: expected a table"):
        journal.read(path)
    path.write_text(json.dumps(_old_entry(4)) + "\n")
    with pytest.raises(JournalError, match="journal schema 4 is newer"):
        journal.read(path)


def test_nothing_to_run(tmp_path: Path) -> None:
    done = cli("run", "--venv", str(make_venv(tmp_path / "v")), "--", "no-such-binary-x")
    assert done.returncode == 2 and "no-such-binary-x: not found" in done.stderr
