"""envguard's exit codes: one table, read by the command line's help, the commands that exit
with them and docs/exit-codes.md (a test holds the page to it)."""

from __future__ import annotations

from dataclasses import dataclass

OK = 0
DRIFT = 1  # drift at --fail-on; not restored; refused; the search found no culprit
ERROR = 2
PARTLY = 3  # restore --all, --code or --cache: some of the asked parts restored, some not
INTERRUPTED = 130  # ^C or SIGTERM, once what was under way is put back: as shells report it


@dataclass(frozen=True)
class Code:
    code: int
    short: str  # as the group's --help says it
    meaning: str  # as the docs say it


CODES = (
    Code(OK, "clean", "clean: no drift, restored, culprits found, safe"),
    Code(DRIFT, "drift (or not restored, refused)",
         "drift (at `--fail-on`), not restored, refused by `--max-cost`, no culprit found"),
    Code(ERROR, "error", "error: bad input, usage, a command that cannot run; one line on stderr"),
    Code(PARTLY, "partly restored",
         "partly restored: `restore --all`, `--code` or `--cache` did some parts, not others"),
    Code(INTERRUPTED, "interrupted",
         "interrupted (^C, SIGTERM), after putting back what it was doing"),
)  # fmt: skip


def summary(width: int = 76) -> str:
    """The lines ``envguard --help`` says them in (its text sits 2 columns in)."""
    import textwrap

    said = "Exit codes: " + ", ".join(f"{c.code} {c.short}" for c in CODES) + "."
    return "\n".join(textwrap.wrap(said, width, subsequent_indent="  "))


def table() -> str:
    """The table docs/exit-codes.md carries, as Markdown."""
    rows = [f"| {c.code} | {c.meaning} |" for c in CODES]
    return "\n".join(["| exit | meaning |", "| --- | --- |", *rows])
