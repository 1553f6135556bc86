"""A training project laid out as users lay it out, for the scenario corpus.

``train/`` is a git repository with the training code; ``train/.venv`` is its venv (made by
uv, which puts a ``.gitignore`` inside); ``train/lockfiles/`` holds the lock, committed as the
README advises; the Inductor cache is where ``TORCHINDUCTOR_CACHE_DIR`` says. Every verdict is
read three ways: ``envguard diff --json``, the human ``envguard diff`` (both in-process through
click's CliRunner) and ``envguard.guard()``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from click.testing import CliRunner

import envguard
from envguard.cli import cli
from envguard.demo import incident
from envguard.demo.cache import BuiltBy, make
from envguard.runtime_guard import DriftError
from tests.conftest import git, make_venv

Key = tuple[str, str, str]  # (severity, area, subject)


def invoke(*args: str, env: Mapping[str, str | None] | None = None) -> tuple[int, str, str]:
    """``envguard ARGS`` in-process: (exit code, stdout, stderr)."""
    result = CliRunner().invoke(
        cli, list(args), env={"NO_COLOR": "1", "COLUMNS": "250", **(env or {})}
    )
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


@dataclass
class Verdict:
    exit_code: int
    changes: list[dict[str, str]]
    human: str
    guard_changes: list[dict[str, str]] | None = None
    guard_stopped: bool = False

    def found(self, at_least: str = "warning") -> set[Key]:
        rank = ("critical", "warning", "info").index(at_least)
        return {
            (c["severity"], c["area"], c["subject"])
            for c in self.changes
            if ("critical", "warning", "info").index(c["severity"]) <= rank
        }

    def one(self, subject: str) -> dict[str, str]:
        found = [c for c in self.changes if c["subject"] == subject]
        assert len(found) == 1, (subject, self.changes)
        return found[0]


@dataclass
class Project:
    root: Path
    venv: Path
    house: Path
    cache: Path
    lock: Path = field(init=False)
    env: dict[str, str | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.lock = self.root / "lockfiles" / f"{self.root.name}.envguard.toml"

    # --- building ---------------------------------------------------------------------------
    def install(self, *reqs: str) -> None:
        incident.install(self.venv, self.house, *reqs)

    def write(self, rel: str, text: str) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    def commit(self, message: str = "work", *paths: str) -> str:
        git(self.root, "add", *(paths or ("-A",)))
        git(self.root, "commit", "-q", "-m", message)
        return git(self.root, "rev-parse", "HEAD").strip()

    def snapshot(self, *args: str, env: Mapping[str, str | None] | None = None) -> str:
        code, out, err = invoke("snapshot", "-q", *args, env={**self.activated(), **(env or {})})
        assert code == 0, err
        return out.strip()

    def activated(self) -> dict[str, str | None]:
        """What `source .venv/bin/activate` sets."""
        return {
            "VIRTUAL_ENV": str(self.venv),
            "PATH": f"{self.venv}/bin{os.pathsep}{os.environ.get('PATH', '')}",
            **self.env,
        }

    # --- reading ----------------------------------------------------------------------------
    def verdict(
        self,
        *args: str,
        env: Mapping[str, str | None] | None = None,
        fail_on: str = "warning",
        guard: bool = True,
    ) -> Verdict:
        full = {**self.activated(), **(env or {})}
        code, out, err = invoke("diff", "--json", "--fail-on", fail_on, *args, env=full)
        assert code in (0, 1), err
        doc = json.loads(out)
        assert doc["exit_code"] == code
        human_code, human, human_err = invoke("diff", "--fail-on", fail_on, *args, env=full)
        assert human_code == code, (human, human_err)
        verdict = Verdict(exit_code=code, changes=doc["result"]["changes"], human=human)
        for change in verdict.changes:
            if change["severity"] != "info" or len(verdict.changes) < 30:
                assert change["subject"] in human, (change["subject"], human)
        if guard:
            self._guard(verdict, full, fail_on)
        return verdict

    def _guard(self, verdict: Verdict, env: Mapping[str, str | None], fail_on: str) -> None:
        """envguard.guard() in this process, under the same environment as the CLI."""
        saved = dict(os.environ)
        try:
            for k, v in env.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            try:
                report = envguard.guard(self.lock, venv=self.venv, fail_on=fail_on)
                verdict.guard_changes = [c.to_dict() for c in report.changes]
            except DriftError:
                verdict.guard_stopped = True
        finally:
            os.environ.clear()
            os.environ.update(saved)
        # guard lets an edit of the code pass (fail_on_code): it stops for all else diff fails
        from envguard.drift.report import counts_at

        stops = any(c["area"] != "code" and counts_at(c["severity"], fail_on)
                    for c in verdict.changes)  # fmt: skip
        assert verdict.guard_stopped == stops, "guard and diff disagree"
        if verdict.guard_changes is not None:
            assert _keys(verdict.guard_changes) == _keys(verdict.changes)


def _keys(changes: Iterable[Mapping[str, str]]) -> set[Key]:
    return {(c["severity"], c["area"], c["subject"]) for c in changes}


def new_project(
    tmp_path: Path, house: Path, *, name: str = "train", template: Path | None = None
) -> Project:
    """The known-good training project: cu128 torch, transformers 5.6.0, a warm cache.

    ``template``: a ``project_tree`` of the same ``name`` and ``house``, copied instead of made
    again (conftest's ``project`` fixture makes one per session)."""
    root = tmp_path / name
    if template is None:
        project_tree(root, house)
    else:
        assert template.name == name, (template, name)  # the venv's prompt is the folder's
        copy_tree(template, root)
    cache = make(Path(os.environ["TORCHINDUCTOR_CACHE_DIR"]), BuiltBy())
    return Project(root=root, venv=root / ".venv", house=house, cache=cache)


def project_tree(root: Path, house: Path) -> Path:
    """The project's repository (the training code committed) and its venv, at ``root``."""
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "train.py").write_text("import model\n\nmodel.forward(1)\n")
    (root / "model.py").write_text("def forward(x):\n    return x\n")
    (root / "data.py").write_text("def batches():\n    return []\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "known good")
    venv = make_venv(root / ".venv")
    incident.install(venv, house, "torch==2.11.0+cu128", "transformers==5.6.0")
    return root


def copy_tree(template: Path, root: Path) -> Path:
    """``template`` copied to ``root``, as if made there and then: git needs nothing, uv's venv
    names its own path only in the activate scripts (rewritten here), and each installed
    package's metadata folder takes the time of the copy, the install time envguard reads."""
    shutil.copytree(template, root, symlinks=True)
    old, new = str(template).encode(), str(root).encode()
    for path in (root / ".venv" / "bin").iterdir():
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            if old in data:
                path.write_bytes(data.replace(old, new))
    for meta in root.glob(".venv/lib/python*/site-packages/*.dist-info"):
        os.utime(meta)
    return root


def run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kwargs)  # type: ignore[call-overload]
