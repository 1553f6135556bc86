"""envguard: snapshot a known-good ML training environment, explain drift, put it back."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["DriftError", "EnvguardError", "__version__", "guard"]


def __getattr__(name: str) -> Any:
    # `envguard.guard` without importing the core at `import envguard` (and so at --version)
    if name in ("guard", "DriftError"):
        from envguard import runtime_guard

        return getattr(runtime_guard, name)
    if name == "EnvguardError":
        from envguard.errors import EnvguardError

        return EnvguardError
    raise AttributeError(f"module 'envguard' has no attribute {name!r}")
