"""fleet: node snapshots against the lock and each other; bad files reported by name."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from envguard import fleet, lockfile
from envguard.config import Config
from tests.factories import base, inductor, torch_build
from tests.test_cli import envguard


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
    assert report.nodes[0].differs == ("torch: 2.11.0+cu128 (lock) → 2.11.0+cu130",)
    assert report.nodes[1].differs[0].startswith("cache: ")
    # gpu-07's cold cache is drift but not another build: it groups with the majority
    assert [len(g.hosts) for g in report.groups] == [1, 7]
    assert not report.groups[0].matches_lock and report.groups[1].matches_lock


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
    assert report.nodes[0].changes == ("warning numpy: 2.3.0 → 2.4.0",)
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
