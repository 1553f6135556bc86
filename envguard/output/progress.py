"""Progress on long work: a bar per phase on stderr, on a terminal only (rich, loaded here).

A phase shows done as soon as the next one starts; the bars go when the work is over.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

Step = Callable[[str, int, int], None]  # (phase, done, total)


@contextmanager
def bars(enabled: bool, color: bool) -> Iterator[Step]:
    if not enabled:
        yield lambda phase, done, total: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=Console(stderr=True, no_color=not color, highlight=False),
        transient=True,
    )
    tasks: dict[str, list[Any]] = {}  # phase -> [task id, total]

    def update(phase: str, done: int, total: int) -> None:
        total = max(total, 1)
        if phase not in tasks:
            for task_id, its_total in tasks.values():  # the phases before this one are done
                bar.update(task_id, completed=its_total)
            tasks[phase] = [bar.add_task(phase, total=total), total]
        tasks[phase][1] = total
        bar.update(tasks[phase][0], completed=done, total=total)

    with bar:
        yield update
