"""fleet: node snapshots against the lock and each other; bad files reported by name."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path

import pytest

from envguard import fleet, lockfile
from envguard.config import Config
from tests.factories import base, dist, inductor, torch_build
from tests.project import invoke


def envguard(*args: str) -> subprocess.CompletedProcess[str]:
    """``envguard ARGS`` in-process (no process boundary is under test here), as a finished
    process."""
    code, out, err = invoke(*args)
    return subprocess.CompletedProcess(["envguard", *args], code, out, err)


def _node(host: str, **changes) -> object:
    snap = base(**changes)
    return dataclasses.replace(snap, host=dataclasses.replace(snap.host, hostname=host))


def _write_fleet(tmp_path: Path) -> tuple[Path, Path]:
    lock = tmp_path / "train.envguard.toml"
    lockfile.write(lock, base())
    nodes = tmp_path / "nodes"
    for i in range(6):
        lockfile.write(nodes / f"gpu-{i:02d}.envguard.toml", _node(f"gpu-{i:02d}"))
    lockfile.write(
        nodes / "gpu-06.envguard.toml", _node("gpu-06", torch=torch_build("2.11.0+cu130", "13.0"))
    )
    lockfile.write(
        nodes / "gpu-07.envguard.toml", _node("gpu-07", caches=(inductor(entries=0, size=0),))
    )
    return lock, nodes


def test_outliers_first_with_how_they_differ(tmp_path: Path) -> None:
    lock, nodes = _write_fleet(tmp_path)
    report = fleet.compare(lockfile.read(lock), fleet.expand([nodes]))
    assert report.drifted() and len(report.nodes) == 8
    assert [n.host for n in report.nodes[:2]] == ["gpu-06", "gpu-07"]
    assert report.nodes[0].differs == (
        fleet.FactChange(name="torch", old="2.11.0+cu128", new="2.11.0+cu130"),
    )
    assert report.nodes[1].differs[0].name == "cache"
    # gpu-07's cold cache is drift but not another build: it groups with the majority
    assert [len(g.hosts) for g in report.groups] == [1, 7]
    assert not report.groups[0].matches_lock and report.groups[1].matches_lock
    # --json has the records, not the screen's words (#22)
    torch = {"name": "torch", "old": "2.11.0+cu128", "new": "2.11.0+cu130"}
    doc = report.to_dict()
    assert doc["nodes"][0]["differs"] == doc["groups"][0]["differs"] == [torch]


def test_cli_matrix_and_bad_files(tmp_path: Path) -> None:
    lock, nodes = _write_fleet(tmp_path)
    (nodes / "broken.envguard.toml").write_text("schema = 1\n[host\n")
    (nodes / "future.envguard.toml").write_text("schema = 9\n")
    lockfile.write(nodes / "dup.envguard.toml", _node("gpu-01"))
    done = envguard("fleet", str(lock), str(nodes))
    assert done.returncode == 1, done.stderr
    first = done.stdout.splitlines()[0]
    assert first.startswith("2 of 9 nodes drift from the lock")
    assert "gpu-06" in done.stdout and "torch: 2.11.0+cu128 → 2.11.0+cu130" in done.stdout
    assert "broken.envguard.toml: not valid TOML" in done.stdout
    assert "schema 9" in done.stdout and "host gpu-01 also in" in done.stdout
    doc = json.loads(envguard("fleet", str(lock), str(nodes), "--json").stdout)
    assert doc["kind"] == "fleet" and doc["exit_code"] == 1 and len(doc["result"]["problems"]) == 2
    (note,) = doc["result"]["notes"]
    assert "dup.envguard.toml" in note and "gpu-01.envguard.toml" in note
    assert "host gpu-01 also in" in note


def test_one_host_twice_is_a_note_not_an_unusable_file(tmp_path: Path) -> None:
    """Two ranks of one node, or a node snapshotted twice: both files are usable, and a fleet
    that matches the lock passes (exit 0, not 2)."""
    lock = tmp_path / "train.envguard.toml"
    lockfile.write(lock, base())
    lockfile.write(tmp_path / "n" / "a.envguard.toml", _node("h0"))
    lockfile.write(tmp_path / "n" / "b.envguard.toml", _node("h0"))
    done = envguard("fleet", str(lock), str(tmp_path / "n"))
    assert done.returncode == 0, done.stdout
    assert "unusable" not in done.stdout
    notes = [line for line in done.stdout.splitlines() if line.startswith("note")]
    assert len(notes) == 1 and "host h0 also in" in notes[0]


def test_all_match(tmp_path: Path) -> None:
    lock = tmp_path / "train.envguard.toml"
    lockfile.write(lock, base())
    for i in range(3):
        lockfile.write(tmp_path / "n" / f"{i}.envguard.toml", _node(f"h{i}"))
    done = envguard("fleet", str(lock), str(tmp_path / "n"))
    assert done.returncode == 0 and done.stdout.startswith("All 3 nodes match the lock")


def test_a_node_verdict_is_the_diff_verdict(tmp_path: Path) -> None:
    """A package the matrix has no column for still makes the node drift, as diff says."""
    lock = tmp_path / "train.envguard.toml"
    lockfile.write(lock, base())
    packages = tuple(d if d.name != "numpy" else dataclasses.replace(d, version="2.4.0")
                     for d in base().packages)  # fmt: skip
    node = tmp_path / "n" / "h1.envguard.toml"
    lockfile.write(node, _node("h1", packages=packages))
    report = fleet.compare(lockfile.read(lock), [node])
    assert report.drifted() and report.nodes[0].differs == ()
    # every change is carried (the host's name, info, too); numpy alone counts
    ((numpy),) = [c for c in report.nodes[0].changes if c.severity != "info"]
    assert (numpy.severity, numpy.subject, numpy.old, numpy.new) == (
        "warning", "numpy", "2.3.0", "2.4.0",
    )  # fmt: skip
    strict = Config(root=tmp_path, fail_on="critical")
    assert not fleet.compare(lockfile.read(lock), [node], strict).drifted()
    diffed = envguard("diff", str(lock), str(node), "--json")
    assert diffed.returncode == 1


def test_output_placeholders_give_one_file_per_node(tmp_path: Path, monkeypatch) -> None:
    from tests.conftest import make_venv

    venv = make_venv(tmp_path / "venv")
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    done = envguard(
        "snapshot",
        "--venv",
        str(venv),
        "-q",
        "--no-default-caches",
        "-o",
        str(tmp_path / "fleet" / "%j" / "%h.envguard.toml"),
    )
    assert done.returncode == 0, done.stderr
    written = list((tmp_path / "fleet" / "4242").glob("*.envguard.toml"))
    assert (
        len(written) == 1
        and written[0].name == f"{lockfile.read(written[0]).host.hostname}.envguard.toml"
    )


def test_node_snapshots_are_not_remembered(tmp_path: Path) -> None:
    """A fleet's node files are read once each: remembering their parse would only push the
    project's own locks out of the cache folder."""
    import dataclasses
    import os

    from envguard.model import Distribution

    many = tuple(Distribution(name=f"p-{i:04d}", version="1.0") for i in range(600))
    lock = tmp_path / "train.envguard.toml"
    lockfile.write(lock, dataclasses.replace(base(), packages=many))
    for i in range(3):
        node = dataclasses.replace(_node(f"h{i}"), packages=many)
        lockfile.write(tmp_path / "n" / f"{i}.envguard.toml", node)
    assert (tmp_path / "n" / "0.envguard.toml").stat().st_size >= lockfile._REMEMBER_FROM
    assert envguard("fleet", str(lock), str(tmp_path / "n")).returncode == 0
    parsed = Path(os.environ["ENVGUARD_CACHE_DIR"]) / "parsed"
    assert len(list(parsed.glob("*.json"))) <= 1  # the lock's, not the nodes'


def test_no_node_files_is_an_error_and_a_file_named_twice_counts_once(tmp_path: Path) -> None:
    lock = tmp_path / "train.envguard.toml"
    lockfile.write(lock, base())
    (tmp_path / "empty").mkdir()
    done = envguard("fleet", str(lock), str(tmp_path / "empty"))
    assert done.returncode == 2 and "no node snapshots" in done.stderr  # a wrong folder fails CI
    node = tmp_path / "n" / "0.envguard.toml"
    lockfile.write(node, _node("h0"))
    doc = json.loads(envguard("fleet", str(lock), str(node), str(tmp_path / "n"), "--json").stdout)
    result = doc["result"]
    assert len(result["nodes"]) == 1 and result["notes"] == [] and result["problems"] == []
    assert result["lockfile"] == str(lock) and result["nodes"][0]["file"] == str(node)
    assert envguard("fleet", str(lock), str(node)).stdout.startswith("The node matches the lock")


# --- every change a node has: on screen eight, the rest said; in JSON all, structured (#20) ---


def _drifted_node(tmp_path: Path, host: str = "h1", name: str = "h1") -> tuple[Path, Path]:
    """A node with 12 new packages installed one by one (12 changes), and one install that
    brought 7 packages and upgraded numpy together (a group of 8, which has no old and new
    values of its own)."""
    lock = tmp_path / "train.envguard.toml"
    lockfile.write(lock, base())
    alone = tuple(
        dist(f"tool{i:02d}", "1.0", at=f"2026-11-{i + 2:02d}T09:00:00Z") for i in range(12)
    )
    at = "2026-11-20T09:00:00Z"
    brought = tuple(dist(f"dep{i}", "1.0", at=at) for i in range(6))
    root = dist("server", "0.5", at=at, requires=(*(f"dep{i}>=1" for i in range(6)), "numpy>=2.4"))
    packages = tuple(
        dataclasses.replace(d, version="2.4.0", installed_at=at) if d.name == "numpy" else d
        for d in base().packages
    )
    node = tmp_path / "n" / f"{name}.envguard.toml"
    lockfile.write(node, _node(host, packages=(*packages, *alone, *brought, root)))
    return lock, node


def _fleet(*args: str, width: int = 80) -> tuple[int, str]:
    code, out, err = invoke("fleet", *args, env={"COLUMNS": str(width)})
    assert code in (0, 1), err
    return code, out


def test_json_carries_every_change_with_its_members_structured(tmp_path: Path) -> None:
    lock, node = _drifted_node(tmp_path)
    code, out, _ = invoke("fleet", str(lock), str(node), "--json")
    (n,) = json.loads(out)["result"]["nodes"]
    assert code == 1 and len(n["changes"]) == 14  # and the node's own hostname, info
    assert [c["subject"] for c in n["changes"] if c["severity"] == "info"] == ["hostname"]
    assert set(n["changes"][0]) >= {"severity", "area", "subject", "old", "new", "why", "members"}
    (group,) = [c for c in n["changes"] if c["members"]]
    assert group["subject"] == "8 packages"
    by_name = {m.pop("name"): m for m in group["members"]}
    # each as diff has it: the requirement that brought it too
    assert by_name["numpy"] == {
        "old": "2.3.0",
        "new": "2.4.0",
        "cause": "server requires numpy>=2.4",
    }
    assert (by_name["dep0"]["old"], by_name["dep0"]["new"]) == ("absent", "1.0")
    single = next(c for c in n["changes"] if c["subject"] == "tool00")
    assert (single["old"], single["new"], single["members"]) == ("absent", "1.0", [])


def test_the_screen_shows_eight_changes_and_says_what_it_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the screen's paths relative, as people run it
    lock, node = _drifted_node(tmp_path)
    for width in (80, 160):
        code, out = _fleet(str(lock), str(node), width=width)
        assert code == 1 and all(len(line) <= width for line in out.splitlines()), out
        rows = [line for line in out.splitlines() if line.lstrip().startswith("warning ")]
        assert len(rows) == 8, out
        said = " ".join(out.split())  # wrapped at 80
        assert (
            "and 5 more, 1 below warning: envguard fleet --json lists all (-v shows them)" in said
        )
        assert " →" not in "".join(r for r in rows if "packages" in r)  # no empty values
    code, out = _fleet(str(lock), str(node), "-v")
    assert len([line for line in out.splitlines() if "warning " in line]) == 13
    assert "info hostname: gpu-01 → h1" in out and "more" not in out
    group = next(line for line in out.splitlines() if "8 packages" in line)
    assert "→" not in group and "packages it brought" in group, group


def test_one_host_in_two_files_is_named_by_each_file(tmp_path: Path) -> None:
    """Two ranks of one node, or a node snapshotted twice: ``drift vm`` and ``ok vm`` alone
    would not say which file is which."""
    lock, _ = _drifted_node(tmp_path, host="vm", name="rank0")
    cuda = _node("vm", torch=torch_build("2.11.0+cu130", "13.0"), packages=base().packages)
    lockfile.write(tmp_path / "n" / "rank1.envguard.toml", cuda)
    lockfile.write(tmp_path / "n" / "rank2.envguard.toml", _node("vm"))
    _, out = _fleet(str(lock), str(tmp_path / "n"), "--all", width=160)
    heads = [line.split()[:3] for line in out.splitlines() if line.startswith(("drift", "ok"))]
    assert sorted(heads) == [
        ["drift", "vm", "(rank0)"], ["drift", "vm", "(rank1)"], ["ok", "vm", "(rank2)"],
    ], out  # fmt: skip


def test_json_lists_every_change_whatever_the_threshold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fail-on critical (a job's own threshold): the node does not drift, its 12 packages
    installed one by one and the install of 8 are still in its JSON, and the screen says
    what it left out below the threshold (#32)."""
    monkeypatch.chdir(tmp_path)
    lock, node = _drifted_node(tmp_path)
    env = {"ENVGUARD_FAIL_ON": "critical", "COLUMNS": "80"}
    code, out, err = invoke("fleet", str(lock), str(node), "--json", "--all", env=env)
    assert code == 0, err
    (n,) = json.loads(out)["result"]["nodes"]
    assert not n["fails"] and len(n["changes"]) == 14  # with the hostname, info
    assert {c["subject"] for c in n["changes"]} >= {f"tool{i:02d}" for i in range(12)}
    code, out, err = invoke("fleet", str(lock), str(node), "--all", env=env)
    assert code == 0 and "warning " not in out, out
    assert "and 14 below critical: envguard fleet --json lists all (-v shows them)" in out
