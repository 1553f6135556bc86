"""The result of ``envguard tools``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from envguard.results import Result

if TYPE_CHECKING:
    from envguard.tools import Tool


@dataclass(frozen=True, kw_only=True)
class ToolAdded(Result):
    kind: ClassVar[str] = "tool add"
    tool: Tool
    action: str = "added"  # or "exists" (tool sync)

    def to_dict(self) -> dict[str, Any]:
        return {"action": self.action, **self.tool.to_dict()}


@dataclass(frozen=True, kw_only=True)
class ToolsListed(Result):
    kind: ClassVar[str] = "tool list"
    train: str
    tools: tuple[Tool, ...]
    added: tuple[str, ...] = ()  # tool sync: the tools it built

    def to_dict(self) -> dict[str, Any]:
        return {"train": self.train, "tools": [t.to_dict() for t in self.tools],
                "added": list(self.added)}  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class ToolRemoved(Result):
    kind: ClassVar[str] = "tool remove"
    tool: Tool

    def to_dict(self) -> dict[str, Any]:
        return {"action": "removed", **self.tool.to_dict()}
