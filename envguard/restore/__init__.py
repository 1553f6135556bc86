"""``envguard restore``: put a venv (and its code and caches) back as a lockfile says.

- :mod:`.plan`: what will happen, from the lock alone;
- :mod:`.build`: build beside the old venv, verify, swap (through :mod:`.transaction`);
- :mod:`.parts`: the caches (:mod:`.cache_archive`) and the code (:mod:`.checkout`);
- :mod:`.processes`: who is using a venv.
"""

from __future__ import annotations

from envguard.restore.build import Outcome, execute, import_check, matches, verify
from envguard.restore.plan import (
    Overrides,
    Pin,
    Plan,
    Removal,
    indexes_for,
    plan,
    requirements_text,
)

__all__ = [
    "Outcome",
    "Overrides",
    "Pin",
    "Plan",
    "Removal",
    "execute",
    "import_check",
    "indexes_for",
    "matches",
    "plan",
    "requirements_text",
    "verify",
]
