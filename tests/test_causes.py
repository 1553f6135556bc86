"""Causes need evidence (#20): a journal record whose versions are the ones compared, or a
requirement from the package named. Install times only rule a cause out, never in.

Each scenario installs real wheels with real Requires-Dist by uv, in separate commands (through
``envguard run`` when the journal is to know them), and reads the verdict through ``diff
--json``, the human ``diff`` and ``envguard.guard()`` (``tests/project.py``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from envguard import drift
from envguard.demo.wheels import build_wheel
from envguard.drift import Member
from tests.conftest import uv_bin
from tests.factories import base, dist
from tests.project import Project, invoke, run


@pytest.fixture(scope="module")
def extra(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """rich with its real requirements, two six and two safetensors, and two transformers."""
    house = tmp_path_factory.mktemp("causes-house")
    build_wheel(house, "rich", "15.0.0", requires=["markdown-it-py>=2.2.0", "pygments<3,>=2.13"])
    build_wheel(house, "markdown-it-py", "3.0.0", requires=["mdurl~=0.1"])
    build_wheel(house, "mdurl", "0.1.2")
    build_wheel(house, "pygments", "2.19.1")
    for version in ("1.16.0", "1.17.0"):
        build_wheel(house, "six", version)
    for version in ("0.8.0", "0.4.5"):
        build_wheel(house, "safetensors", version)
    for version in ("4.44.2", "4.46.3"):
        build_wheel(house, "transformers", version, requires=["numpy>=1.17", "safetensors>=0.4.1"])
    return house


def _install(project: Project, house: Path, *words: str) -> list[str]:
    return [uv_bin(), "pip", *words, "--offline", "--no-index",
            "--find-links", str(project.house), "--find-links", str(house)]  # fmt: skip


def _by_hand(project: Project, house: Path, *reqs: str) -> None:
    """An install the journal never hears of."""
    python = str(project.venv / "bin" / "python")
    run([*_install(project, house, "install", "--quiet", "--python", python), *reqs])


def _journaled(project: Project, house: Path, verb: str, *reqs: str) -> None:
    command = [*_install(project, house, verb), *reqs]
    if verb == "uninstall":
        command = [uv_bin(), "pip", "uninstall", *reqs]
    code, _, err = invoke("run", "--", *command, env=project.activated())
    assert code == 0, err


def _cause(project: Project, subject: str, *locks: Path) -> str:
    v = project.verdict(*map(str, locks), guard=not locks)
    cause = v.one(subject)["cause"]
    assert not cause or cause in " ".join(v.human.split()), v.human
    return cause


# --- item 3: a journal record is the cause of what it left, before the state compared ------


@pytest.mark.slow
def test_a_record_made_after_the_second_lock_is_not_its_cause(
    project: Project, extra: Path
) -> None:
    project.snapshot()
    _journaled(project, extra, "install", "six==1.16.0")  # journal #1
    b = project.root / "lockfiles" / "b.envguard.toml"
    project.snapshot("-o", str(b))
    time.sleep(1.1)  # records and snapshots count whole seconds: #3 is after B
    _journaled(project, extra, "install", "six==1.17.0")  # #2: not B's version
    _journaled(project, extra, "install", "six==1.16.0")  # #3: B's version, but after B
    assert _cause(project, "six", project.lock, b) == "by `uv pip install six==1.16.0` (journal #1)"
    assert _cause(project, "six") == "by `uv pip install six==1.16.0` (journal #3)"


def test_a_record_is_not_the_cause_of_what_a_later_manual_install_left(
    project: Project, extra: Path
) -> None:
    project.snapshot()
    _journaled(project, extra, "install", "six==1.16.0")
    _by_hand(project, extra, "six==1.17.0")
    assert _cause(project, "six") == ""


def test_a_record_that_removed_a_package_is_not_the_cause_of_it_being_back(
    project: Project, extra: Path
) -> None:
    _by_hand(project, extra, "six==1.16.0")
    project.snapshot()
    _journaled(project, extra, "uninstall", "six")
    _by_hand(project, extra, "six==1.17.0")
    assert _cause(project, "six") == ""


# --- item 4: without a journal, a cause is a requirement or nothing ------------------------


@pytest.mark.slow
def test_two_packages_of_one_command_are_not_each_others_cause(
    project: Project, extra: Path
) -> None:
    _by_hand(project, extra, "transformers==4.44.2", "safetensors==0.8.0")
    project.snapshot()
    _by_hand(project, extra, "transformers==4.46.3", "rich==15.0.0")
    # seconds later, another command; transformers' safetensors>=0.4.1 admitted 0.8.0
    _by_hand(project, extra, "safetensors==0.4.5")
    v = project.verdict()
    assert v.found() == {
        ("warning", "libraries", "transformers"),
        ("warning", "libraries", "safetensors"),
        ("warning", "packages", "4 packages"),
    }
    assert v.one("transformers")["cause"] == ""
    assert v.one("safetensors")["cause"] == ""
    group = v.one("4 packages")
    assert group["why"].startswith("rich 15.0.0 and the 3 packages it brought (3 added) at ")
    assert group["members"] == [
        {"name": name, "old": "absent", "new": version, "cause": cause}
        for name, version, cause in (
            ("markdown-it-py", "3.0.0", "rich requires markdown-it-py>=2.2.0"),
            ("mdurl", "0.1.2", "markdown-it-py requires mdurl~=0.1"),
            ("pygments", "2.19.1", "rich requires pygments<3,>=2.13"),
            ("rich", "15.0.0", ""),
        )
    ]


@pytest.mark.slow
@pytest.mark.parametrize("journaled", [True, False])
def test_what_goes_away_is_grouped_by_requirement(
    project: Project, extra: Path, journaled: bool
) -> None:
    project.snapshot()
    if journaled:
        _journaled(project, extra, "install", "rich==15.0.0")
        _journaled(project, extra, "install", "six==1.17.0")
    else:
        _by_hand(project, extra, "rich==15.0.0")
        _by_hand(project, extra, "six==1.17.0")
    args = ("restore", str(project.lock), "--dry-run")
    code, out, err = invoke(*args, "--json", env=project.activated())
    assert code == 0, err
    removals = json.loads(out)["result"]["plan"]["removals"]
    assert [r["summary"] for r in removals] == [
        "rich 15.0.0 and 3 packages installed with it",
        "six 1.17.0",
    ]
    code, out, err = invoke(*args, env=project.activated())
    assert "goes away rich 15.0.0 and 3 packages installed with it" in out
    assert "goes away six 1.17.0" in out


# --- the rules, on snapshots built in memory -------------------------------------------------

T = "2026-11-28T14:02:{:02d}Z"


def _compare(*packages: object, old: tuple[object, ...] = ()) -> drift.DriftReport:
    before = base(packages=(*base().packages, *old))
    return drift.compare(before, base(packages=(*base().packages, *packages)))


def test_a_range_that_admitted_the_old_version_did_not_force_the_new() -> None:
    old = (dist("safetensors", "0.8.0"),)
    report = _compare(
        dist("accelerate", "1.0", at=T.format(1), requires=("safetensors>=0.4",)),
        dist("safetensors", "0.4.5", at=T.format(2)),
        old=old,
    )
    assert {c.subject: c.cause for c in report.changes} == {"accelerate": "", "safetensors": ""}


def test_a_requirement_that_ruled_the_old_version_out_or_pins_the_new_is_evidence() -> None:
    old = (dist("safetensors", "0.8.0"), dist("tokenizers", "0.20.0"))
    report = _compare(
        dist("accelerate", "1.0", at=T.format(1), requires=("safetensors<0.5", "tokenizers")),
        dist("safetensors", "0.4.5", at=T.format(2)),
        dist("tokenizers", "0.22.1", at=T.format(2)),
        dist("peft", "1.0", at=T.format(3), requires=("accelerate==1.0", "tokenizers==0.22.1")),
        old=old,
    )
    group = next(c for c in report.changes if c.members)
    assert group.members == (
        Member(name="accelerate", old="absent", new="1.0", cause="peft requires accelerate==1.0"),
        Member(name="peft", old="absent", new="1.0"),
        Member(name="safetensors", old="0.8.0", new="0.4.5",
               cause="accelerate requires safetensors<0.5"),
        Member(name="tokenizers", old="0.20.0", new="0.22.1",
               cause="peft requires tokenizers==0.22.1"),
    )  # fmt: skip
    assert group.why.startswith("peft 1.0 and the 3 packages it brought (1 added, 2 changed) at ")


def test_a_package_there_hours_before_its_requirer_came_on_its_own() -> None:
    report = _compare(
        dist("pygments", "2.19.1", at="2026-11-28T09:00:00Z"),
        dist("rich", "15.0.0", at=T.format(1), requires=("pygments",)),
    )
    assert {c.subject: c.cause for c in report.changes} == {"pygments": "", "rich": ""}


def test_two_roots_sharing_a_requirement_are_both_named() -> None:
    report = _compare(
        dist("pygments", "2.19.1", at=T.format(1)),
        dist("rich", "15.0.0", at=T.format(1), requires=("pygments",)),
        dist("ipython", "9.0", at=T.format(2), requires=("pygments>=2.4",)),
    )
    group = next(c for c in report.changes if c.members)
    assert group.why == (
        "ipython 9.0 and rich 15.0.0 and the package they brought (1 added) at 2026-11-28 14:02:01"
    )
    # either root could have brought it: both are said, never one of them picked
    assert group.members[1] == Member(
        name="pygments", old="absent", new="2.19.1", cause="ipython requires pygments>=2.4"
    )


@pytest.mark.slow
def test_what_goes_away_follows_the_journal_where_it_knows_the_command(
    project: Project, extra: Path
) -> None:
    """One journaled command brought rich and six: the plan says them as that command's, as
    diff does, not as two requirement groups."""
    project.snapshot()
    _journaled(project, extra, "install", "rich==15.0.0", "six==1.17.0")
    args = ("restore", str(project.lock), "--dry-run", "--json")
    code, out, err = invoke(*args, env=project.activated())
    assert code == 0, err
    removals = json.loads(out)["result"]["plan"]["removals"]
    assert [r["summary"] for r in removals] == [
        "rich 15.0.0, six 1.17.0 and 3 packages they require"
    ]
