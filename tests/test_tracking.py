"""guard(track=True) with the real trackers: mlflow-skinny on a local file store, wandb in
offline mode; and a run's lock fetched back by its ``runs:/`` URI for diff. Fetching a W&B
artifact reference needs the W&B server, which no test here can reach."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import envguard
from tests.project import Project, invoke


def test_mlflow_records_the_lock_and_diff_reads_it_back(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mlflow = pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # skinny has no SQL store
    uri = (tmp_path / "mlruns").as_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    mlflow.set_tracking_uri(uri)
    project.snapshot()
    with mlflow.start_run() as run:
        envguard.guard(project.lock, venv=project.venv, track=True)
    stored = mlflow.get_run(run.info.run_id)
    assert stored.data.tags["envguard.torch"] == "2.11.0+cu128"
    assert stored.data.tags["envguard.cuda"] == "12.8"
    assert stored.data.tags["envguard.verdict"] == "clean"
    names = {a.path for a in mlflow.MlflowClient().list_artifacts(run.info.run_id, "envguard")}
    assert names == {"envguard/train.envguard.toml", "envguard/drift.json"}
    # "the environment of the run that made 21.5 Ktok/s", in one command
    lock_uri = f"runs:/{run.info.run_id}/envguard/train.envguard.toml"
    code, out, err = invoke("diff", lock_uri, "--json", env=project.activated())
    assert code == 0, err
    doc = json.loads(out)["result"]
    assert Path(doc["venv"]) == project.venv
    assert Path(doc["lockfile"]).read_bytes() == project.lock.read_bytes()


def test_wandb_offline_run_gets_the_environment(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wandb = pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    project.snapshot()
    run = wandb.init(project="envguard-test", dir=str(tmp_path))
    try:
        envguard.guard(project.lock, venv=project.venv, track=True)
        assert run.config["envguard.torch"] == "2.11.0+cu128"
        assert run.config["envguard.verdict"] == "clean"
    finally:
        wandb.finish()
    staged = list(tmp_path.rglob("*.envguard.toml"))
    assert staged, "the lock was not handed to W&B"


def test_track_imports_no_tracker(project: Project) -> None:
    """A script that uses neither tracker gets neither imported, and nothing recorded."""
    project.snapshot()
    program = (
        "import sys, envguard; "
        f"envguard.guard({str(project.lock)!r}, venv={str(project.venv)!r}, track=True); "
        "print('mlflow' in sys.modules, 'wandb' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          cwd=project.root, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False"]
