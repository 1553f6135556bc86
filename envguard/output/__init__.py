"""Results rendered for people (:class:`.human.Human`) or machines (:class:`.json.Json`).

A format is an object with ``format(result) -> str``; the CLI picks one and prints what it
returns. Nothing here runs a probe or decides an exit code.
"""

from __future__ import annotations

from typing import Protocol

from envguard.results import Result


class Format(Protocol):
    def format(self, result: Result) -> str: ...
