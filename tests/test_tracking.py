"""guard(track=True) with the real trackers: mlflow-skinny on a local file store, wandb in
offline mode; and a run's lock fetched back by its ``runs:/`` URI for diff. Fetching a W&B
artifact reference needs the W&B server, which no test here can reach."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import envguard
from tests.project import Project, invoke


@pytest.mark.slow
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


@pytest.mark.slow
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


# --- a run's URI is untrusted input too (#23) ---------------------------------------------------


def _mlflow_run(project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A real run on a local file store holding the project's lock; its id."""
    mlflow = pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    uri = (tmp_path / "mlruns").as_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    mlflow.set_tracking_uri(uri)
    project.snapshot()
    with mlflow.start_run() as run:
        mlflow.log_artifact(str(project.lock), artifact_path="envguard")
    return str(run.info.run_id)


@pytest.mark.parametrize(
    "path",
    [
        "../../outside.envguard.toml",  # the file store's folder of the experiment
        "envguard/../../../outside.envguard.toml",
        "envguard/./../../../outside.envguard.toml",
        "%2e%2e/%2e%2e/outside.envguard.toml",  # MLflow decodes it: '..' all the same
        "%252e%252e/%252e%252e/outside.envguard.toml",  # and twice
        "envguard/train.envguard.toml\n",
        "envguard\\..\\..\\..\\outside.envguard.toml",
        "envguard/train.envguard.toml?x=../..",
    ],
)
def test_a_run_s_artifact_path_cannot_leave_the_run(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    run_id = _mlflow_run(project, tmp_path, monkeypatch)
    experiment = next((tmp_path / "mlruns").glob(f"*/{run_id}")).parent
    planted = experiment / "outside.envguard.toml"  # beside the run's folder: no artifact of it
    planted.write_bytes(project.lock.read_bytes())
    code, out, err = invoke("diff", f"runs:/{run_id}/{path}", env=project.activated())
    assert code == 2 and out == "", err
    assert len(err.splitlines()) == 1 and "artifact path" in err, err
    downloads = Path(os.environ["ENVGUARD_CACHE_DIR"]) / "runs"
    assert not downloads.exists() or not any(downloads.rglob("*.envguard.toml"))


@pytest.mark.parametrize(
    "uri",
    [
        "runs:/0123abcd//etc/hostname",  # the command line's path type folds '//': a caller's not
        "runs:/0123abcd/envguard//train.envguard.toml",
        "runs://0123abcd/envguard/train.envguard.toml",
        "runs:/../0123abcd/envguard/train.envguard.toml",
        "runs:/0123abcd/envguard/\x1b]0;t\x07.envguard.toml",
        "mlflow-artifacts:/0/0123abcd/artifacts/../../x.envguard.toml",
        "wandb-artifact://entity/../project/name:v3",
    ],
)
def test_fetch_refuses_what_the_command_line_cannot_pass(uri: str, tmp_path: Path) -> None:
    from envguard import tracking
    from envguard.errors import EnvguardError

    with pytest.raises(EnvguardError, match="artifact path"):
        tracking.fetch(uri, tmp_path / "dest")
    assert not (tmp_path / "dest").exists() or not any((tmp_path / "dest").iterdir())


def test_the_run_s_own_lock_still_downloads(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rule leaves a run's own paths alone: a folder, with or without its trailing slash."""
    run_id = _mlflow_run(project, tmp_path, monkeypatch)
    for path in ("envguard/train.envguard.toml", "envguard/", "envguard"):
        code, _, err = invoke("diff", f"runs:/{run_id}/{path}", env=project.activated())
        assert code == 0, (path, err)


@pytest.mark.slow
def test_downloaded_locks_do_not_pile_up(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each URI downloads into a folder of its own under envguard's cache: 40 URIs leave the
    newest few, the one just read among them."""
    mlflow = pytest.importorskip("mlflow")
    run_id = _mlflow_run(project, tmp_path, monkeypatch)
    with mlflow.start_run(run_id=run_id):
        for i in range(40):
            folder = tmp_path / f"lock{i}"
            folder.mkdir()
            copy = folder / "train.envguard.toml"
            copy.write_bytes(project.lock.read_bytes())
            mlflow.log_artifact(str(copy), artifact_path=f"envguard/{i}")
    downloads = Path(os.environ["ENVGUARD_CACHE_DIR"]) / "runs"
    for i in range(40):
        uri = f"runs:/{run_id}/envguard/{i}/train.envguard.toml"
        code, out, err = invoke("diff", uri, "--json", env=project.activated())
        assert code == 0, err
        assert Path(json.loads(out)["result"]["lockfile"]).is_file()  # the one just read stays
    assert 1 <= len(list(downloads.iterdir())) <= 16
