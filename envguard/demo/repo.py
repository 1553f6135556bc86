"""The training repository the demo, the bisect bench and the bisect tests start from: its
files committed on ``main`` as the known-good code."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from envguard._run import run


def committed(root: Path, files: Mapping[str, str], env: Mapping[str, str] | None = None) -> Path:
    """``root`` made a git repository of ``files`` (name: text), committed as "known good";
    ``env``: git's, for its identity (by default this process's)."""
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)  # src/pkg/__init__.py
        (root / name).write_text(text)
    for args in (("init", "-q", "-b", "main"), ("add", "."), ("commit", "-q", "-m", "known good")):
        run(["git", "-C", str(root), *args], env=env, timeout=300)
    return root
