"""``envguard tool``: tool venvs beside the training venv (:mod:`envguard.tools`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from envguard import _run, targets, tools, uv
from envguard.config import Config
from envguard.install_target import in_target, in_venv
from envguard.results.tools import ToolAdded, ToolRemoved, ToolsListed


def train_venv(cfg: Config, venv: Path | None) -> Path:
    """The training venv the tools belong to: as ``log`` finds it (the project's lock's)."""
    return targets.recorded(venv, cfg)


def add(
    cfg: Config,
    name: str,
    reqs: Sequence[str],
    indexes: uv.Indexes,
    *,
    venv: Path | None,
    python: str | None,
) -> ToolAdded:
    train = train_venv(cfg, venv)
    return ToolAdded(tool=tools.add(train, name, reqs, indexes, cfg.lockfiles, python=python))


def sync(cfg: Config, indexes: uv.Indexes, *, venv: Path | None) -> ToolsListed:
    """Build every tool ``[tool.envguard.tools]`` declares and that does not exist yet."""
    train = train_venv(cfg, venv)
    if not cfg.tools:
        raise tools.ToolError(
            'no tools declared: add [tool.envguard.tools] NAME = ["requirement", ...]'
        )
    have = {t.name for t in tools.listing(train, None)}
    added = []
    for name, reqs in cfg.tools.items():
        if name not in have:
            tools.add(train, name, reqs, indexes, cfg.lockfiles)
            added.append(name)
    return ToolsListed(
        train=str(train), tools=tuple(tools.listing(train, cfg.lockfiles)), added=tuple(added)
    )


def listing(cfg: Config, *, venv: Path | None) -> ToolsListed:
    train = train_venv(cfg, venv)
    return ToolsListed(train=str(train), tools=tuple(tools.listing(train, cfg.lockfiles)))


def path(cfg: Config, name: str, *, venv: Path | None) -> Path:
    return tools.path_of(train_venv(cfg, venv), name)


def run(cfg: Config, name: str, command: Sequence[str], *, venv: Path | None) -> int:
    """COMMAND as in the activated tool venv; its output streamed, its exit code returned."""
    where = path(cfg, name, venv=venv)
    if not command:
        raise tools.ToolError(f"nothing to run: envguard tool run {name} -- COMMAND...")
    # an install lands in the tool, never in whatever pip comes next on PATH
    return _run.stream(in_target(command, where), env=in_venv(where))


def remove(cfg: Config, name: str, *, venv: Path | None, force: bool) -> ToolRemoved:
    train = train_venv(cfg, venv)
    return ToolRemoved(tool=tools.remove(train, name, cfg.lockfiles, force=force))
