"""The only place uv runs: find the binary, build argv, run it, turn failures into errors.

envguard passes flags for what the lockfile or the user decided (the Python version, the
pins, the indexes). Of the machine's ``UV_*`` settings only those that say where packages
come from and how to reach them (a mirror, credentials, TLS, the cache's place) reach uv;
those that would change what gets installed (constraints, overrides, ``exclude-newer``,
``no-binary``, a system Python, a torch backend) never do, and ``PIP_*`` is pip's. Messages
name exactly what uv was asked.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from envguard._run import Completed, run
from envguard.errors import CommandError, InterpreterError, UvNotFound
from envguard.errors import UvError as UvError  # uv.UvError, as restore and bisect catch it
from envguard.redact import strip_url_credentials

# Variants uv's --torch-backend knows route torch-family packages to the PyTorch index and
# everything else to the default index: per-package indexes in one call.
_TORCH_BACKEND = re.compile(r"^(cpu|cu\d{2,3}|rocm\d+(\.\d+)*|xpu)$")
# Names are bounded and anchored, so that a hostile 100 kB "name" in uv's output costs a
# linear scan, not a quadratic one.
_NAME = r"(?<![\w.\-])([A-Za-z0-9][\w.\-]{0,199})"
_NOT_FOUND = (
    re.compile(
        r"Because (?:there is no version of )?" + _NAME + r"(?:\[[^\]\n]{0,200}\])?"
        r"(?:==(\S{1,100}))? (?:was not found|could not be found)"
    ),
    re.compile(r"no version of " + _NAME + r"(?:\[[^\]\n]{0,200}\])?==(\S{1,100})"),
    re.compile(r"Package `" + _NAME + r"()` was not found"),
    re.compile(_NAME + r"==(\S{1,100}) (?:was not found|could not be found)"),
)
# What uv prints when no index can be reached (DNS, refused, no route, TLS to a proxy...).
_NO_NETWORK = re.compile(
    r"dns error|failed to lookup address|Could not connect|Connection refused|"
    r"error sending request|tcp connect error|Network is unreachable|"
    r"client error \(Connect\)|Temporary failure in name resolution",
    re.IGNORECASE,
)


# The user's machine decides where packages come from and how uv gets there: kept.
_KEPT = re.compile(
    r"UV_(CACHE_DIR|NO_CACHE|NO_CONFIG|CONFIG_FILE|OFFLINE|NO_PROGRESS|COLOR|"
    r"INDEX_URL|EXTRA_INDEX_URL|DEFAULT_INDEX|INDEX|INDEX_\w+_(USERNAME|PASSWORD)|FIND_LINKS|"
    r"KEYRING_PROVIDER|NATIVE_TLS|INSECURE_HOST|HTTP_TIMEOUT|HTTP_RETRIES|REQUEST_TIMEOUT|"
    r"CONCURRENT_DOWNLOADS|CONCURRENT_INSTALLS|CONCURRENT_BUILDS|LINK_MODE|"
    r"PYTHON_DOWNLOADS|PYTHON_INSTALL_DIR|PYTHON_INSTALL_MIRROR|PYPY_INSTALL_MIRROR|"
    r"PYTHON_PREFERENCE|NO_MANAGED_PYTHON|MANAGED_PYTHON)"
)


def environ(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment envguard runs uv in: the machine's, less every ``UV_*`` that would
    change what a sync of exact pins installs, less ``PIP_*`` and ``VIRTUAL_ENV`` (each uv
    call names its interpreter with ``--python``)."""
    out = {
        k: v
        for k, v in os.environ.items()
        if not (k.startswith(("PIP_", "CONDA_")) or k == "VIRTUAL_ENV")
        and (not k.startswith("UV_") or _KEPT.fullmatch(k))
    }
    return {**out, **(extra or {})}


# Offline, uv read a cached index page naming a file it does not hold.
_UNCACHED = re.compile(
    r"Failed to download `([^`\n]{1,300})`[\s\S]{0,300}?Network connectivity is disabled, "
    r"but the requested data wasn't found in the cache"
)


@dataclass(frozen=True, kw_only=True)
class Indexes:
    """Where pins come from: inferred from the lock, with the user's flags."""

    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    offline: bool = False
    no_index: bool = False
    torch_backend: str | None = None  # cu128 etc., when inferred from the lock

    def argv(self) -> list[str]:
        out: list[str] = []
        if self.index_url:
            out += ["--index-url", self.index_url]
        for url in self.extra_index_urls:
            out += ["--extra-index-url", url]
        for link in self.find_links:
            out += [
                "--find-links",
                link if "://" in link else str(Path(link).expanduser().absolute()),
            ]
        if self.no_index:
            out.append("--no-index")
        if self.offline:
            out.append("--offline")
        if self.torch_backend:
            out += ["--torch-backend", self.torch_backend]
        return out

    def describe(self) -> str:
        """What uv was asked, for people and logs; index credentials never appear."""
        parts = []
        if not self.no_index:
            parts.append(self.index_url or "the default index (PyPI or UV_INDEX_URL)")
            parts += list(self.extra_index_urls)
        parts += [f"find-links {p}" for p in self.find_links]
        if self.torch_backend and not self.no_index:
            parts.append(f"torch-family from https://download.pytorch.org/whl/{self.torch_backend}")
        text = ", ".join(parts) or "no index at all (--no-index, no --find-links)"
        flags = [f for f, on in (("--no-index", self.no_index), ("offline", self.offline)) if on]
        return strip_url_credentials(text + (f" ({', '.join(flags)})" if flags else ""))


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
        raise UvNotFound("the uv package is not installed; pip install uv") from exc
    try:
        return str(find_uv_bin())
    except FileNotFoundError as exc:
        raise UvNotFound(f"uv binary not found: {exc}") from exc


def _uv(args: Sequence[str], timeout: float) -> Completed:
    # From the root folder: uv reads project config (uv.toml, pyproject's [tool.uv]) from the
    # folder it runs in and up, and the checked-out repository is a teammate's, not the
    # user's; the user's own uv.toml (~/.config/uv) still applies. Every path is absolute.
    try:
        return run([find_uv(), *args], check=False, timeout=timeout, env=environ(), cwd=os.sep)
    except CommandError as exc:
        raise UvError(str(exc)) from exc


# --- interpreters ---------------------------------------------------------------------------


# Interpreters of this machine only: no venv (the one being replaced, or a .venv a commit
# carries into the checkout) and no project's Python request; nothing is downloaded.
_FIND = ("python", "find", "--system", "--no-project", "--no-python-downloads")


def interpreter_for(version: str, explicit: str | None = None) -> tuple[str, str]:
    """The interpreter a venv of exactly ``version`` is built with, and what found it
    (``"--python"``, ``"uv"`` or ``"pyenv"``): ``--python`` (a path, or a version uv finds),
    else what ``uv python find`` finds on this machine, else pyenv's. A lock's
    ``python.home`` is never asked: a lockfile is untrusted, and running the python it names
    would run whatever a commit put there (#23). None is a clear error."""
    if explicit:
        return _explicit(explicit), "--python"
    done = _uv([*_FIND, f"=={version}"], timeout=60)
    if done.returncode == 0 and done.stdout.strip():
        return done.stdout.strip(), "uv"
    pyenv = _pyenv_python(version)
    if pyenv:
        return pyenv, "pyenv"
    why = _last(done.stderr) if done.stderr.strip() else "no interpreter of that version"
    raise InterpreterError(
        f"no Python {version} interpreter found (uv python find: {why}; no pyenv version "
        f"{version}), and the venv must be built with the locked version; install one "
        f"(uv python install {version}) or pass --python PATH"
    )


def _explicit(given: str) -> str:
    path = Path(given).expanduser()
    if os.sep in given or path.exists():
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise InterpreterError(f"--python {given}: not an executable interpreter")
        return str(path.absolute())
    done = _uv([*_FIND, given], timeout=60)
    if done.returncode != 0 or not done.stdout.strip():
        raise InterpreterError(
            f"--python {given}: uv python find found none ({_last(done.stderr)})"
        )
    return done.stdout.strip()


def _pyenv_python(version: str) -> str | None:
    """pyenv's build of ``version``: its shims can fail to run where its builds work."""
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    minor = ".".join(version.split(".")[:2])
    candidate = root / "versions" / version / "bin" / f"python{minor}"
    return str(candidate) if candidate.is_file() and os.access(candidate, os.X_OK) else None


def create_venv(
    path: Path, python: str, prompt: str | None, *, system_site_packages: bool = False
) -> None:
    """A relocatable venv, so that it works after being renamed into the target path."""
    args = ["venv", "--quiet", "--relocatable", "--python", python]
    if prompt:  # one argument: a prompt "--python=/x" stays the prompt (#23)
        args.append(f"--prompt={prompt}")
    if system_site_packages:
        args.append("--system-site-packages")
    done = _uv([*args, str(path.absolute())], timeout=300)
    if done.returncode != 0:
        raise UvError(f"uv venv failed: {_last(done.stderr)}")


# --- installs -------------------------------------------------------------------------------


def install(python: Path, reqs: Sequence[str], indexes: Indexes, timeout: float = 3600) -> None:
    """``uv pip install REQS`` into the venv of ``python``: its own resolution."""
    args = ["pip", "install", "--python", str(python.absolute()), *indexes.argv(), "--", *reqs]
    done = _uv(args, timeout=timeout)
    if done.returncode != 0:
        raise UvError(
            f"uv could not install {' '.join(reqs)} ({indexes.describe()}): {_last(done.stderr)}"
        )


def sync(python: Path, requirements: Path, indexes: Indexes, timeout: float = 3600) -> None:
    """Install exactly the pinned set, in one uv call."""
    args = ["pip", "sync", "--python", str(python.absolute()), *indexes.argv(),
            str(requirements.absolute())]  # fmt: skip
    done = _uv(args, timeout=timeout)
    if done.returncode != 0:
        _fail(
            "uv pip sync",
            done,
            indexes,
            lambda found: _all_missing(python, requirements, indexes, found),
        )


def _fail(
    what: str,
    done: Completed,
    indexes: Indexes,
    more: Callable[[list[str]], list[str]] | None = None,
) -> None:
    if _NO_NETWORK.search(done.stderr) and not indexes.offline:
        raise UvError(
            f"{what} could not reach {indexes.describe()}: {_last(done.stderr)}. No network? "
            "Pass --find-links DIR with the wheels, and --offline"
        )
    uncached = _UNCACHED.search(done.stderr)
    if uncached:
        raise UvError(
            f"{what}: offline, and uv's cache knows {uncached.group(1)} from an earlier run's "
            f"index page but does not hold its file ({indexes.describe()}): put the wheel in "
            "a --find-links folder, or run without --offline",
            [uncached.group(1)],
        )
    missing = missing_packages(done.stderr)
    if missing:
        if more is not None:
            missing = more(missing)
        raise UvError(f"uv could not find {', '.join(missing)} in {indexes.describe()}", missing)
    raise UvError(f"{what} failed (exit {done.returncode}): {_last(done.stderr)}")


def _all_missing(
    python: Path, requirements: Path, indexes: Indexes, found: list[str], rounds: int = 30
) -> list[str]:
    """uv stops at the first pin it cannot find; dry-run without each one to name them all."""
    lines = requirements.read_text(encoding="utf-8").splitlines()
    rest = requirements.with_name("remaining.txt")
    pinned = {_req_name(ln): ln.strip() for ln in lines}
    for _ in range(rounds):
        gone = {_req_name(n) for n in found}
        lines = [ln for ln in lines if _req_name(ln) not in gone]
        if not lines:
            break
        rest.write_text("\n".join(lines) + "\n", encoding="utf-8")
        args = ["pip", "sync", "--dry-run", "--python", str(python.absolute()), *indexes.argv(),
                str(rest.absolute())]  # fmt: skip
        more = [n for n in missing_packages(_uv(args, timeout=600).stderr) if n not in found]
        if not more:
            break
        found = [*found, *more]
    rest.unlink(missing_ok=True)
    # each with the version the lock pins, as the requirements file has it
    return [pinned.get(_req_name(n), n) if "==" not in n else n for n in found]


def _req_name(line: str) -> str:
    return re.split(r"[=<>!~ @\[;]", line.strip(), maxsplit=1)[0].lower().replace("_", "-")


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
        str(requirements.absolute()),
        "-o",
        str(output.absolute()),
    ]
    done = _uv(args, timeout=1800)
    if done.returncode != 0:
        _fail("uv pip compile", done, indexes)


def missing_packages(stderr: str) -> list[str]:
    """The pins uv says it could not find, as "name==version" where it says the version."""
    names: list[str] = []
    for pattern in _NOT_FOUND:
        for name, version in pattern.findall(stderr[:1_000_000]):
            shown = f"{name}=={version}" if version else name
            if not any(_req_name(n) == _req_name(shown) for n in names):
                names.append(shown)
    return names


def _last(stderr: str) -> str:
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    return " ".join(lines[-3:])[:500] if lines else "(no output)"
