"""Project defaults: ``[tool.envguard]`` in pyproject.toml, or an ``envguard.toml``.

Precedence is uv's: a flag, then an ``ENVGUARD_*`` variable, then the project's config, then
the built-in default. The project is found by walking up from the working directory: the
nearest folder with an ``envguard.toml`` or a pyproject.toml holding ``[tool.envguard]``,
else the git root, else the nearest pyproject.toml, else the working directory. Paths in the
config are relative to the project's root.

    [tool.envguard]
    venv = ".venv"                           # the training venv
    lockfiles = "lockfiles"                  # where lockfiles go
    lock = "lockfiles/train.envguard.toml"   # the lock diff, guard and pre-commit compare with
    fail-on = "warning"                      # critical | warning | any
    only = ["torch", "cuda"]                 # areas to judge (default: all)
    ignore = ["host"]                        # areas not to judge
    ignore-env = ["WANDB_*"]                 # variables not to judge (globs)
    ignore-paths = ["notebooks/*"]           # code paths not to judge (globs)
    cache-dirs = ["/scratch/aot-cache"]      # custom caches restore --cache fills, bisect stands in
    cache-store = "/shared/envguard-caches"  # where snapshot --save-cache puts the archive
    fail-on-code = true                      # guard() stops for an edit of the code too

    [tool.envguard.tools]                    # tool venvs beside the training venv
    datagen = ["sglang==0.5.23"]
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envguard.drift.areas import AREAS as AREAS  # re-exported: the names the config takes
from envguard.drift.areas import FAIL_ON
from envguard.errors import ConfigError

if TYPE_CHECKING:
    from envguard.drift import DriftReport

_KEYS = {
    "venv", "lockfiles", "lock", "fail-on", "only", "ignore", "ignore-env", "ignore-paths",
    "tools", "cache-dirs", "fail-on-code", "cache-store",
}  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class Config:
    """The project's settings, resolved: file, ``ENVGUARD_*`` variables, flags."""

    root: Path  # the project's root
    source: str = ""  # the file the settings came from, for messages ("" when none)
    venv: Path | None = None
    lockfiles: Path = Path("lockfiles")
    lock: Path | None = None
    fail_on: str = "warning"
    only: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    ignore_env: tuple[str, ...] = ()
    ignore_paths: tuple[str, ...] = ()
    tools: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    cache_dirs: tuple[Path, ...] = ()  # custom caches a lockfile may name for restore --cache
    fail_on_code: bool = False  # guard() stops for an edit of the training code too
    # a folder the team shares (a mounted filesystem): --save-cache archives go there, by
    # hash, instead of beside the lock, and restore and bisect look there for them
    cache_store: Path | None = None

    def judging(self) -> Config:
        """This config, if it leaves an area to judge: judging none would say "No drift"
        whatever changed. Asked where a command judges (diff, fleet, guard), once the flags
        are in, so that a flag can still mend what the file or the environment says."""
        if not set(self.only or AREAS) - set(self.ignore):
            what = (
                f"every area in only ({', '.join(self.only)}) is also"
                if self.only
                else "every area is"
            )
            raise ConfigError(f"nothing left to judge: {what} ignored")
        return self

    def judged(self, report: DriftReport) -> DriftReport:
        """The project's policy, the one place it is applied (diff, fleet, guard): the areas
        judged, the variables and code paths left out."""
        self.judging()
        return report.only(self.only, self.ignore).without(self.ignore_env, self.ignore_paths)

    def with_flags(self, *, fail_on: str | None = None, only: str | None = None,
                   ignore: str | None = None, code: bool | None = None) -> Config:  # fmt: skip
        """Flags win over everything else. ``code`` False leaves the code to git (the
        pre-commit hook's default: a commit is a code change by definition), True judges it
        whatever the project ignores."""
        ignored = _areas(ignore, "--ignore") if ignore is not None else self.ignore
        if code is not None:
            ignored = tuple(a for a in ignored if a != "code") + (() if code else ("code",))
        return replace(
            self,
            fail_on=fail_on or self.fail_on,
            only=_areas(only, "--only") if only is not None else self.only,
            ignore=ignored,
        )


def load(cwd: Path | None = None, environ: Mapping[str, str] | None = None) -> Config:
    """The project's settings, with ``ENVGUARD_*`` variables over them."""
    env = os.environ if environ is None else environ
    here = (cwd or Path.cwd()).absolute()
    root, source, table = _find(here)
    cfg = _from_table(root, source, table)
    return _from_environ(cfg, env)


def _find(here: Path) -> tuple[Path, str, dict[str, Any]]:
    git_root = None
    nearest_pyproject = None
    for folder in (here, *here.parents):
        own = folder / "envguard.toml"
        if own.is_file():
            doc = _read(own)
            tool = doc.get("tool")
            table = tool.get("envguard", doc) if isinstance(tool, dict) else doc
            return folder, str(own), _table(table, own)
        pyproject = folder / "pyproject.toml"
        if pyproject.is_file():
            doc = _read(pyproject)
            table = (
                doc.get("tool", {}).get("envguard") if isinstance(doc.get("tool"), dict) else None
            )
            if table is not None:
                return folder, str(pyproject), _table(table, pyproject)
            nearest_pyproject = nearest_pyproject or folder
        if (folder / ".git").exists():
            git_root = folder  # a config above the repository belongs to something else
            break
    return git_root or nearest_pyproject or here, "", {}


def _read(path: Path) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib
    try:
        doc: dict[str, Any] = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read ({exc})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from exc
    return doc


def _table(value: object, path: Path) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: [tool.envguard] must be a table")
    unknown = sorted(set(value) - _KEYS)
    if unknown:
        raise ConfigError(f"{path}: tool.envguard.{unknown[0]}: unknown setting")
    return value


def _from_table(root: Path, source: str, t: dict[str, Any]) -> Config:
    where = f"{source}: tool.envguard"
    return Config(
        root=root,
        source=source,
        venv=_path(root, t.get("venv"), f"{where}.venv"),
        lockfiles=_path(root, t.get("lockfiles"), f"{where}.lockfiles") or root / "lockfiles",
        lock=_path(root, t.get("lock"), f"{where}.lock"),
        fail_on=_choice(t.get("fail-on", "warning"), FAIL_ON, f"{where}.fail-on"),
        only=_names(t.get("only", []), AREAS, f"{where}.only"),
        ignore=_names(t.get("ignore", []), AREAS, f"{where}.ignore"),
        ignore_env=_names(t.get("ignore-env", []), None, f"{where}.ignore-env"),
        ignore_paths=_names(t.get("ignore-paths", []), None, f"{where}.ignore-paths"),
        tools=_tools(t.get("tools", {}), f"{where}.tools"),
        cache_dirs=_paths(root, t.get("cache-dirs", []), f"{where}.cache-dirs"),
        fail_on_code=_flag(t.get("fail-on-code", False), f"{where}.fail-on-code"),
        cache_store=_store(root, t.get("cache-store"), f"{where}.cache-store"),
    )


def _from_environ(cfg: Config, env: Mapping[str, str]) -> Config:
    def get(name: str) -> str | None:
        value = env.get(f"ENVGUARD_{name}", "").strip()
        return value or None

    def split(value: str | None) -> list[str]:
        return [v.strip() for v in (value or "").split(",") if v.strip()]

    venv, lockfiles, lock = get("VENV"), get("LOCKFILES"), get("LOCK")
    store = get("CACHE_STORE")
    return replace(
        cfg,
        cache_store=_store(cfg.root, store, "ENVGUARD_CACHE_STORE") if store else cfg.cache_store,
        venv=Path(venv) if venv else cfg.venv,
        lockfiles=Path(lockfiles) if lockfiles else cfg.lockfiles,
        lock=Path(lock) if lock else cfg.lock,
        fail_on=_choice(get("FAIL_ON") or cfg.fail_on, FAIL_ON, "ENVGUARD_FAIL_ON"),
        only=_names(split(get("ONLY")), AREAS, "ENVGUARD_ONLY") if get("ONLY") else cfg.only,
        ignore=_names(split(get("IGNORE")), AREAS, "ENVGUARD_IGNORE")
        if get("IGNORE")
        else cfg.ignore,
        ignore_env=tuple(split(get("IGNORE_ENV"))) or cfg.ignore_env,
        ignore_paths=tuple(split(get("IGNORE_PATHS"))) or cfg.ignore_paths,
    )


def _path(root: Path, value: object, where: str) -> Path | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: expected a path, got {value!r}")
    path = Path(value).expanduser()
    return path if path.is_absolute() else root / path


def _store(root: Path, value: object, where: str) -> Path | None:
    """A folder, or a ``file://`` URL of one. An object store's URL needs a client envguard
    does not ship: refused by name, never read as a folder called ``s3:``."""
    if isinstance(value, str) and "://" in value:
        from urllib.parse import unquote, urlsplit

        url = urlsplit(value)
        if url.scheme != "file" or url.netloc not in ("", "localhost"):
            raise ConfigError(
                f"{where}: {value!r}: only a folder (a shared filesystem) or a file:// URL; "
                "mount an object store (s3fs, gcsfuse) and name its folder"
            )
        value = unquote(url.path)
    return _path(root, value, where)


def _paths(root: Path, value: object, where: str) -> tuple[Path, ...]:
    return tuple(p for p in (_path(root, v, where) for v in _names(value, None, where)) if p)


def _flag(value: object, where: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: expected true or false, got {value!r}")
    return value


def _choice(value: object, choices: tuple[str, ...], where: str) -> str:
    if value not in choices:
        raise ConfigError(f"{where}: expected one of {', '.join(choices)}, got {value!r}")
    return str(value)


def _names(value: object, allowed: tuple[str, ...] | None, where: str) -> tuple[str, ...]:
    items = value if isinstance(value, list) else [value] if isinstance(value, str) else None
    if items is None or not all(isinstance(v, str) for v in items):
        raise ConfigError(f"{where}: expected a list of names, got {value!r}")
    if allowed is not None:
        wrong = [v for v in items if v not in allowed]
        if wrong:
            raise ConfigError(f"{where}: unknown area {wrong[0]!r}; one of {', '.join(allowed)}")
    return tuple(items)


def _areas(text: str, flag: str) -> tuple[str, ...]:
    return _names([v.strip() for v in text.split(",") if v.strip()], AREAS, flag)


def _tools(value: object, where: str) -> dict[str, tuple[str, ...]]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a table of NAME = [requirements]")
    out = {}
    for name, reqs in value.items():
        out[str(name)] = _names(reqs, None, f"{where}.{name}")
    return out
