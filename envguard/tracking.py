"""MLflow and W&B: the environment a run trained in, recorded in the run; and a run's lock
fetched back by its URI.

``record`` writes into the active run of whichever tracker the training script already
imported: it looks in ``sys.modules`` and never imports a tracker itself, so envguard adds no
dependency and no import time to a script that uses neither. Recorded: the lockfile and the
drift report (JSON) as artifacts under ``envguard/``, and a few searchable tags (torch build,
CUDA, the verdict).

``fetch`` turns a run's lock URI into a local file: MLflow's
``runs:/<run_id>/envguard/<name>.envguard.toml`` (through ``mlflow.artifacts``), or a W&B
artifact reference ``wandb-artifact://<entity>/<project>/<name>:<version>`` (through the W&B
API, which needs its server). Both trackers are optional extras: ``envguard[mlflow]``,
``envguard[wandb]``.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from envguard.errors import EnvguardError
from envguard.model import Snapshot

WANDB_SCHEME = "wandb-artifact:"  # wandb-artifact://entity/project/name:v3


def tags(locked: Snapshot, verdict: str) -> dict[str, str]:
    torch = locked.torch
    runtime = locked.cuda.runtime
    return {
        "envguard.lock": locked.name,
        "envguard.torch": torch.version if torch else "none",
        "envguard.cuda": runtime.version if runtime else "none",
        "envguard.verdict": verdict,
    }


def record(lock_path: Path | None, locked: Snapshot, report: Any, verdict: str) -> list[str]:
    """Record in every active run of an imported tracker; the trackers written to."""
    written = []
    with tempfile.TemporaryDirectory(prefix="envguard-track-") as tmp:
        files = _files(Path(tmp), lock_path, locked, report)
        mlflow = sys.modules.get("mlflow")
        if mlflow is not None and mlflow.active_run() is not None:
            for f in files:
                mlflow.log_artifact(str(f), artifact_path="envguard")
            mlflow.set_tags(tags(locked, verdict))
            written.append("mlflow")
        wandb = sys.modules.get("wandb")
        if wandb is not None and getattr(wandb, "run", None) is not None:
            artifact = wandb.Artifact(f"envguard-{_safe(locked.name)}", type="environment")
            for f in files:
                artifact.add_file(str(f), name=f"envguard/{f.name}")
            wandb.run.log_artifact(artifact)
            wandb.run.config.update(tags(locked, verdict), allow_val_change=True)
            written.append("wandb")
    return written


def is_uri(text: str) -> bool:
    return text.startswith(("runs:/", "mlflow-artifacts:/", WANDB_SCHEME))


def fetch(uri: str, dest: Path) -> Path:
    """The lockfile a run recorded, downloaded into ``dest``."""
    if uri.startswith(WANDB_SCHEME):
        # a path on the command line may have lost one of the two slashes
        return _fetch_wandb(uri[len(WANDB_SCHEME) :].lstrip("/"), dest)
    try:
        import mlflow.artifacts  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        raise EnvguardError(
            f"{uri}: an MLflow URI needs `pip install 'envguard[mlflow]'`"
        ) from None
    try:
        path = Path(mlflow.artifacts.download_artifacts(artifact_uri=uri, dst_path=str(dest)))
    except Exception as exc:  # mlflow raises its own and requests' errors; one line for them
        raise EnvguardError(f"{uri}: MLflow could not download it ({exc})") from exc
    return _the_lock(path, uri)


def _fetch_wandb(ref: str, dest: Path) -> Path:
    try:
        import wandb  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        raise EnvguardError(
            f"{ref}: a W&B reference needs `pip install 'envguard[wandb]'`"
        ) from None
    try:
        folder = Path(wandb.Api().artifact(ref).download(root=str(dest)))
    except Exception as exc:  # the W&B client raises many kinds; one line for them
        raise EnvguardError(f"{ref}: W&B could not download it ({exc})") from exc
    return _the_lock(folder, ref)


def _the_lock(path: Path, uri: str) -> Path:
    from envguard import lockfile

    if path.is_file():
        return path
    found = sorted(path.rglob(f"*{lockfile.SUFFIX}"))
    if len(found) != 1:
        raise EnvguardError(f"{uri}: expected one {lockfile.SUFFIX} there, found {len(found)}")
    return found[0]


def _files(tmp: Path, lock_path: Path | None, locked: Snapshot, report: Any) -> list[Path]:
    from envguard import lockfile

    lock_copy = tmp / (lock_path.name if lock_path else f"{_safe(locked.name)}{lockfile.SUFFIX}")
    lock_copy.write_bytes(lock_path.read_bytes() if lock_path else lockfile.dumps(locked))
    drift_json = tmp / "drift.json"
    drift_json.write_text(json.dumps(report.to_dict(), indent=2, ensure_ascii=False) + "\n")
    return [lock_copy, drift_json]


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in name) or "lock"
