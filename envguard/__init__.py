"""envguard: snapshot a known-good ML training environment, explain drift, put it back."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["__version__", "guard"]


def __getattr__(name: str) -> Any:
    # `envguard.guard` without importing the core at `import envguard` (and so at --version)
    if name == "guard":
        from envguard.runtime_guard import guard

        return guard
    raise AttributeError(f"module 'envguard' has no attribute {name!r}")
