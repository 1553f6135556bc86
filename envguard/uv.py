"""The only place uv runs: find the binary, build argv, run it, turn failures into errors.

uv's own ``UV_*`` settings reach it untouched: envguard passes flags only for what the
lockfile or the user decided (the Python version, the pins, the indexes).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from envguard._run import Completed, run
from envguard.errors import CommandError, EnvguardError
from envguard.redact import strip_url_credentials

# Variants uv's --torch-backend knows route torch-family packages to the PyTorch index and
# everything else to the default index: per-package indexes in one call.
_TORCH_BACKEND = re.compile(r"^(cpu|cu\d{2,3}|rocm\d+(\.\d+)*|xpu)$")
_NOT_FOUND = (
    re.compile(
        r"Because (?:there is no version of )?([A-Za-z0-9][\w.\-]*)(?:\[[^\]]*\])?"
        r"(?:==\S+)? (?:was not found|could not be found)"
    ),
    re.compile(r"no version of ([A-Za-z0-9][\w.\-]*)(?:\[[^\]]*\])?=="),
    re.compile(r"Package `([A-Za-z0-9][\w.\-]*)` was not found"),
    re.compile(r"([A-Za-z0-9][\w.\-]*)==\S+ (?:was not found|could not be found)"),
)


class UvError(EnvguardError):
    """uv failed; ``missing`` names the pins it could not find."""

    def __init__(self, message: str, missing: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.missing = tuple(missing)


@dataclass(frozen=True, kw_only=True)
class Indexes:
    """Where pins come from: inferred from the lock, or the user's overrides."""

    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    offline: bool = False
    torch_backend: str | None = None  # cu128 etc., when inferred from the lock

    def argv(self) -> list[str]:
        out: list[str] = []
        if self.index_url:
            out += ["--index-url", self.index_url]
        for url in self.extra_index_urls:
            out += ["--extra-index-url", url]
        for link in self.find_links:
            out += ["--find-links", link]
        if self.find_links and not self.index_url and not self.extra_index_urls:
            out.append("--no-index")  # a wheelhouse alone: air-gapped, never the network
        if self.offline:
            out.append("--offline")
        if self.torch_backend:
            out += ["--torch-backend", self.torch_backend]
        return out

    def describe(self) -> str:
        """For people and logs: index credentials never appear, only uv's argv has them."""
        parts = [self.index_url or "the default index (PyPI or UV_INDEX_URL)"]
        parts += list(self.extra_index_urls) + [f"find-links {p}" for p in self.find_links]
        if self.torch_backend:
            parts.append(f"torch-family from https://download.pytorch.org/whl/{self.torch_backend}")
        text = ", ".join(parts) + (" (offline)" if self.offline else "")
        return strip_url_credentials(text)


def torch_backend_for(variant: str) -> str | None:
    return variant if _TORCH_BACKEND.match(variant) else None


def find_uv() -> str:
    """The uv binary the ``uv`` package ships; ``ENVGUARD_UV`` points elsewhere (tests)."""
    explicit = os.environ.get("ENVGUARD_UV")
    if explicit:
        return explicit
    try:
        from uv import find_uv_bin
    except ImportError as exc:  # pragma: no cover - uv is a dependency
        raise EnvguardError("the uv package is not installed; pip install uv") from exc
    try:
        return str(find_uv_bin())
    except FileNotFoundError as exc:
        raise EnvguardError(f"uv binary not found: {exc}") from exc


def _uv(args: Sequence[str], timeout: float) -> Completed:
    try:
        return run([find_uv(), *args], check=False, timeout=timeout)
    except CommandError as exc:
        raise UvError(str(exc)) from exc


def home_python(version: str, home: str | None) -> str | None:
    """The locked venv's own base interpreter (pyvenv.cfg ``home``), if it is still there.

    Searching with ``uv python find`` queries every interpreter on PATH (a quarter second
    with pyenv shims); the caller checks the new venv's version instead.
    """
    if not home:
        return None
    candidate = Path(home) / f"python{'.'.join(version.split('.')[:2])}"
    return str(candidate) if candidate.is_file() and os.access(candidate, os.X_OK) else None


def find_python(version: str) -> str:
    """The path of an interpreter of exactly ``version``, or a clear error."""
    done = _uv(["python", "find", "--no-python-downloads", f"=={version}"], timeout=60)
    if done.returncode != 0:
        raise EnvguardError(
            f"no Python {version} interpreter found, and the venv must be built with the locked "
            f"version; install one (uv python install {version}) and run restore again"
        )
    return done.stdout.strip()


def create_venv(path: Path, python: str, prompt: str | None) -> None:
    """A relocatable venv, so that it works after being renamed into the target path."""
    args = ["venv", "--quiet", "--relocatable", "--python", python, str(path)]
    if prompt:
        args[1:1] = ["--prompt", prompt]
    done = _uv(args, timeout=300)
    if done.returncode != 0:
        raise UvError(f"uv venv failed: {_last(done.stderr)}")


def sync(python: Path, requirements: Path, indexes: Indexes, timeout: float = 3600) -> None:
    """Install exactly the pinned set, in one uv call."""
    args = ["pip", "sync", "--python", str(python), *indexes.argv(), str(requirements)]
    done = _uv(args, timeout=timeout)
    if done.returncode != 0:
        missing = missing_packages(done.stderr)
        where = indexes.describe()
        if missing:
            missing = _all_missing(python, requirements, indexes, missing)
            raise UvError(f"uv could not find {', '.join(missing)} in {where}", missing)
        raise UvError(f"uv pip sync failed (exit {done.returncode}): {_last(done.stderr)}")


def _all_missing(
    python: Path, requirements: Path, indexes: Indexes, found: list[str], rounds: int = 30
) -> list[str]:
    """uv stops at the first pin it cannot find; dry-run without each one to name them all."""
    lines = requirements.read_text(encoding="utf-8").splitlines()
    rest = requirements.with_name("remaining.txt")
    for _ in range(rounds):
        lines = [ln for ln in lines if _req_name(ln) not in {n.lower() for n in found}]
        if not lines:
            break
        rest.write_text("\n".join(lines) + "\n", encoding="utf-8")
        args = ["pip", "sync", "--dry-run", "--python", str(python), *indexes.argv(), str(rest)]
        more = [n for n in missing_packages(_uv(args, timeout=600).stderr) if n not in found]
        if not more:
            break
        found = [*found, *more]
    return found


def _req_name(line: str) -> str:
    return re.split(r"[=<>!~ @\[;]", line.strip(), maxsplit=1)[0].lower()


def compile_pylock(requirements: Path, output: Path, indexes: Indexes, python: str) -> None:
    """Resolve exact pins to wheel URLs and hashes, written as PEP 751 by uv."""
    args = [
        "pip",
        "compile",
        "--quiet",
        "--no-deps",
        "--format",
        "pylock.toml",
        "--python-version",
        python,
        "--no-header",
        *indexes.argv(),
        str(requirements),
        "-o",
        str(output),
    ]
    done = _uv(args, timeout=1800)
    if done.returncode != 0:
        missing = missing_packages(done.stderr)
        if missing:
            raise UvError(
                f"uv could not find {', '.join(missing)} in {indexes.describe()}", missing
            )
        raise UvError(f"uv pip compile failed (exit {done.returncode}): {_last(done.stderr)}")


def missing_packages(stderr: str) -> list[str]:
    names: list[str] = []
    for pattern in _NOT_FOUND:
        for name in pattern.findall(stderr):
            if name not in names:
                names.append(name)
    return names


def _last(stderr: str) -> str:
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    return " ".join(lines[-3:]) if lines else "(no output)"
