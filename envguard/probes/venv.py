"""Find the target environment and read its Python from ``pyvenv.cfg`` and its layout."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from envguard.errors import VenvError
from envguard.model import PythonInfo, VenvInfo

_LIB_DIR = re.compile(r"^(python|pypy)(\d+)\.(\d+)(t?)$")


@dataclass(frozen=True, kw_only=True)
class Environment:
    """A located environment: where it is and where its distributions live."""

    root: Path
    site_packages: Path
    info: VenvInfo
    python: PythonInfo
    # the base interpreter's site folders a --system-site-packages venv also imports from,
    # in sys.path order (user site first)
    inherited_sites: tuple[Path, ...] = ()

    @property
    def name(self) -> str:
        """The default lockfile name: the venv's prompt, else its folder (or the project's)."""
        if self.info.prompt:
            return self.info.prompt
        if self.root.name in (".venv", "venv", "env", ".env"):
            return self.root.resolve().parent.name or self.root.name.lstrip(".")
        return self.root.name


def locate(path: Path) -> Environment:
    """Read ``path`` as a venv (pyvenv.cfg) or a conda env (conda-meta/).

    A symlink to a venv is that venv: its real path is what gets recorded and compared.
    """
    if not path.exists():
        raise VenvError(f"{path}: no such directory")
    if not path.is_dir():
        raise VenvError(f"{path}: not a directory, so not a venv")
    path = path.resolve()
    cfg_path = path / "pyvenv.cfg"
    if cfg_path.is_file():
        cfg = _read_cfg(cfg_path)
        kind = "venv"
    elif (path / "conda-meta").is_dir():
        cfg, kind = _conda_version(path), "conda"
    elif _prefix_site(path) is not None:
        # a plain install prefix, as in NGC-style containers: /usr/local with dist-packages
        cfg, kind = _patchlevel(path), "prefix"
    else:
        raise VenvError(
            f"{path}: not a venv (no pyvenv.cfg), a conda env (no conda-meta/) or "
            "a Python prefix (no lib/pythonX.Y/site-packages or lib/python3/dist-packages)"
        )
    site = _prefix_site(path) if kind == "prefix" else _find_site_packages(path)
    assert site is not None
    python = _python(cfg, site)
    system_site = cfg.get("include-system-site-packages", "").lower() == "true"
    info = VenvInfo(
        path=str(path.absolute()),
        kind=kind,
        creator=_creator(cfg),
        prompt=cfg.get("prompt"),
        system_site_packages=system_site,
        problem=_cannot_start(path, cfg) if kind == "venv" else None,
    )
    inherited = _base_sites(cfg.get("home"), python.version, site) if system_site else ()
    return Environment(
        root=path, site_packages=site, info=info, python=python, inherited_sites=inherited
    )


def _cannot_start(root: Path, cfg: dict[str, str]) -> str | None:
    """Why a venv's interpreter cannot start, read from the filesystem (never run); None
    also when the base interpreter cannot be looked at (another user's pyenv): unknown is
    not broken."""
    try:
        return _why_not(root, cfg)
    except PermissionError:
        return None


def _why_not(root: Path, cfg: dict[str, str]) -> str | None:
    home = cfg.get("home")
    if home and not Path(home).is_dir():
        return f"its base interpreter's folder {home} (pyvenv.cfg home) no longer exists"
    for rel in ("bin/python", "Scripts/python.exe", "bin/python3"):
        exe = root / rel
        if exe.is_symlink() and not exe.exists():
            return f"{rel} points to {exe.readlink()}, which no longer exists"
        if exe.exists():
            return _other_version(exe, rel, cfg)
    return "it has no bin/python"


def _other_version(exe: Path, rel: str, cfg: dict[str, str]) -> str | None:
    """A base interpreter replaced by another minor version under the same name (a distro
    upgrade re-points /usr/bin/python3): the venv's packages are not on its path."""
    made = ".".join((cfg.get("version_info") or cfg.get("version") or "").split(".")[:2])
    named = _named_version(exe)
    if made and named and named[0] != made:
        return (
            f"{rel} now runs Python {named[0]} ({named[1]}), and the venv was made for "
            f"{made}: its packages are not on that interpreter's path"
        )
    return None


def _named_version(exe: Path) -> tuple[str, Path] | None:
    """The first pythonX.Y along the chain of links from ``exe``: what the link that
    the base system controls (``/usr/bin/python3 -> python3.12``) says it runs."""
    path = exe
    for _ in range(40):
        m = re.match(r"^python(\d+\.\d+)$", path.name)
        if m:
            return m.group(1), path
        if not path.is_symlink():
            return None
        path = path.parent / path.readlink()
    return None


def _base_sites(home: str | None, version: str, own: Path) -> tuple[Path, ...]:
    """Where the base interpreter of ``home`` keeps its distributions, as ``site`` lays them
    out: the user site, then the prefix's site- and dist-packages (Debian's included)."""
    if not home:
        return ()
    minor = ".".join(version.split(".")[:2])
    prefix = Path(home).parent
    user_base = os.environ.get("PYTHONUSERBASE") or str(Path.home() / ".local")
    candidates = [
        Path(user_base) / "lib" / f"python{minor}" / "site-packages",
        prefix / "local" / "lib" / f"python{minor}" / "dist-packages",
        prefix / "lib" / f"python{minor}" / "site-packages",
        prefix / "lib" / "python3" / "dist-packages",
        prefix / "lib" / f"python{minor}" / "dist-packages",
    ]
    seen: set[Path] = set()
    out = []
    for path in candidates:
        try:
            real = path.resolve()
            found = path.is_dir() and real not in seen and real != own.resolve()
        except PermissionError:  # a base interpreter this user cannot look into
            continue
        if found:
            seen.add(real)
            out.append(path)
    return tuple(out)


def _read_cfg(path: Path) -> dict[str, str]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise VenvError(f"{path}: cannot read ({exc.strerror})") from exc
    cfg: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            cfg[key.strip().lower()] = value.strip()
    return cfg


def _find_site_packages(root: Path) -> Path:
    windows = root / "Lib" / "site-packages"
    if windows.is_dir():
        return windows
    lib = root / "lib"
    candidates = sorted(p for p in lib.glob("*/site-packages") if _LIB_DIR.match(p.parent.name))
    if not candidates:
        raise VenvError(f"{root}: no lib/pythonX.Y/site-packages, so not a usable environment")
    # Several only after an in-place upgrade; the newest is the one the interpreter uses.
    return max(candidates, key=lambda p: _lib_version(p.parent.name))


def _prefix_site(root: Path) -> Path | None:
    """``lib/pythonX.Y/site-packages`` or Debian's ``dist-packages`` holding distributions."""
    for name in ("site-packages", "dist-packages"):
        found = [
            p
            for p in sorted((root / "lib").glob(f"python3*/{name}"))
            if _LIB_DIR.match(p.parent.name) and any(p.glob("*.dist-info"))
        ]
        if found:
            return max(found, key=lambda p: _lib_version(p.parent.name))
    # Debian and Ubuntu: the distro's packages for every python3 in one versionless folder
    debian = root / "lib" / "python3" / "dist-packages"
    if debian.is_dir() and (any(debian.glob("*.dist-info")) or any(debian.glob("*.egg-info"))):
        return debian
    return None


def _conda_version(root: Path) -> dict[str, str]:
    """conda records the interpreter as ``conda-meta/python-3.12.3-<build>.json``."""
    for meta in sorted((root / "conda-meta").glob("python-3*.json")):
        version = meta.name.split("-")[1]
        if version.count(".") == 2:
            return {"version": version}
    return {}


def _patchlevel(root: Path) -> dict[str, str]:
    """A prefix's exact version from its C headers, when they are installed; else its
    minor version from the standard library's folder (``lib/python3.11/os.py``), which a
    versionless ``lib/python3/dist-packages`` does not name."""
    for header in sorted(root.glob("include/python3*/patchlevel.h")):
        m = re.search(r'#define\s+PY_VERSION\s+"([\d.]+)', header.read_text(errors="replace"))
        if m:
            return {"version": m.group(1)}
    stdlibs = [
        p.parent.name for p in root.glob("lib/python3*/os.py") if _LIB_DIR.match(p.parent.name)
    ]
    if stdlibs:
        major, minor = _lib_version(max(stdlibs, key=_lib_version))
        return {"version": f"{major}.{minor}"}
    return {}


def _lib_version(dirname: str) -> tuple[int, int]:
    m = _LIB_DIR.match(dirname)
    return (int(m.group(2)), int(m.group(3))) if m else (0, 0)


def _creator(cfg: dict[str, str]) -> str | None:
    for tool in ("uv", "virtualenv"):
        if tool in cfg:
            return f"{tool} {cfg[tool]}"
    return "venv" if "home" in cfg else None


def _python(cfg: dict[str, str], site: Path) -> PythonInfo:
    m = _LIB_DIR.match(site.parent.name)
    impl_from_dir = "pypy" if m and m.group(1) == "pypy" else "cpython"
    implementation = cfg.get("implementation", impl_from_dir).lower()
    version = cfg.get("version_info") or cfg.get("version") or ""
    if not version and m:
        version = f"{m.group(2)}.{m.group(3)}"
    parts = version.split(".")
    free_threaded = bool(m and m.group(4))
    tag = "pp" if implementation == "pypy" else "cp"
    abi = f"{tag}{''.join(parts[:2])}{'t' if free_threaded else ''}" if len(parts) >= 2 else ""
    # uv writes "3.12.3", venv "3.12.3", some tools "3.12.3.final.0": keep three parts.
    return PythonInfo(
        version=".".join(parts[:3]),
        implementation=implementation,
        abi=abi,
        site_packages=str(site.absolute()),
        home=cfg.get("home"),
    )
