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
API, which needs its server). Both trackers are optional extras: ``envguard-ml[mlflow]``,
``envguard-ml[wandb]``.

A URI is untrusted input (a teammate's, a CI job's): its artifact path is refused unless it
stays inside the run (#23), and the downloads folder keeps only the newest few.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import unquote, urlsplit

from envguard.errors import TrackingError
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
    try:
        _check(uri)
        return _fetch(uri, dest)
    finally:
        _bounded(dest)


def _fetch(uri: str, dest: Path) -> Path:
    if uri.startswith(WANDB_SCHEME):
        # a path on the command line may have lost one of the two slashes
        return _fetch_wandb(uri[len(WANDB_SCHEME) :].lstrip("/"), dest)
    try:
        import mlflow.artifacts  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        raise TrackingError(
            f"{uri}: an MLflow URI needs `pip install 'envguard-ml[mlflow]'`"
        ) from None
    try:
        path = Path(mlflow.artifacts.download_artifacts(artifact_uri=uri, dst_path=str(dest)))
    except Exception as exc:  # mlflow raises its own and requests' errors; one line for them
        raise TrackingError(f"{uri}: MLflow could not download it ({exc})") from exc
    return _the_lock(path, uri)


_RUN_ID = re.compile(r"^[0-9A-Za-z_-]+$")
# what MLflow reads as something else than a name: a query, a fragment, Windows' separator
_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f?#\\]")


def _check(uri: str) -> None:
    """Refuse an artifact path that could leave the run: MLflow's file store joins it to the
    run's folder as given, after decoding its percent-escapes, so ``runs:/ID/../../x`` (or
    ``%2e%2e``) reads a file of another run, or of the store's machine."""
    path = _artifact_path(uri)
    for _ in range(4):  # MLflow decodes more than once: so does the check
        if _UNSAFE.search(path):  # urlsplit would cut a query or fragment off unseen
            _refuse(uri, "holds a control character, '?', '#' or '\\'")
        decoded = unquote(path)
        if decoded == path:
            break
        path = decoded
    else:
        _refuse(uri, "is percent-encoded over and over")
    parts = path.removesuffix("/").split("/") if path else []
    if path.startswith("/") or "" in parts:
        _refuse(uri, "is absolute or has an empty part ('//')")
    if {".", ".."} & set(parts):
        _refuse(uri, "has a '.' or '..' part: it must stay inside the run")


def _artifact_path(uri: str) -> str:
    if uri.startswith(WANDB_SCHEME):
        return uri[len(WANDB_SCHEME) :].lstrip("/")
    if uri.startswith("runs:/"):
        run_id, _, path = uri[len("runs:/") :].partition("/")
        if not _RUN_ID.match(run_id):
            _refuse(uri, "names no run id")
        return path
    if _UNSAFE.search(uri):
        _refuse(uri, "holds a control character, '?', '#' or '\\'")
    return urlsplit(uri).path.removeprefix("/")  # mlflow-artifacts:/PATH, or ://HOST/PATH


def _refuse(uri: str, why: str) -> NoReturn:
    raise TrackingError(f"{uri}: refused: its artifact path {why}")


_KEPT = 16  # downloads kept: each URI fetched leaves a folder of its own


def _bounded(dest: Path) -> None:
    """Only the newest downloads stay in envguard's cache: every URI ever fetched left its
    folder there. A ``dest`` anywhere else is its caller's, and so are its neighbours."""
    from envguard import _fs

    folder = _fs.user_cache_dir() / "runs"
    if dest.parent != folder:
        return
    with contextlib.suppress(OSError):
        os.utime(dest)  # just read: the newest, whatever its files' dates
    kept = sorted(_downloads(folder), key=lambda pair: pair[0], reverse=True)
    for _, old in kept[_KEPT:]:
        shutil.rmtree(old, ignore_errors=True)


def _downloads(folder: Path) -> list[tuple[float, Path]]:
    found: list[tuple[float, Path]] = []
    if not folder.is_dir():
        return found
    for path in folder.iterdir():
        with contextlib.suppress(OSError):  # removed meanwhile by another envguard
            if path.is_dir() and not path.is_symlink():
                found.append((path.stat().st_mtime, path))
    return found


def _fetch_wandb(ref: str, dest: Path) -> Path:
    try:
        import wandb  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        raise TrackingError(
            f"{ref}: a W&B reference needs `pip install 'envguard-ml[wandb]'`"
        ) from None
    try:
        folder = Path(wandb.Api().artifact(ref).download(root=str(dest)))
    except Exception as exc:  # the W&B client raises many kinds; one line for them
        raise TrackingError(f"{ref}: W&B could not download it ({exc})") from exc
    return _the_lock(folder, ref)


def _the_lock(path: Path, uri: str) -> Path:
    from envguard import lockfile

    if path.is_file():
        return path
    found = sorted(path.rglob(f"*{lockfile.SUFFIX}"))
    if len(found) != 1:
        raise TrackingError(f"{uri}: expected one {lockfile.SUFFIX} there, found {len(found)}")
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
