"""Where an install command says its wheels come from: its index options, and those inside
the requirements files it names (``-r``), as pip and uv read them.

A priced install (``preflight --bench``, ``run --max-cost``) rebuilds the venv twice; both
copies look where the user's install looks, so that ``uv pip install --no-index
--find-links W pkg`` is priced from W, not from an index the command never named. What is
found is a layer of :meth:`envguard.restore.plan.Overrides.over`: envguard's own flags over
it, it over what the lock recorded.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator, Sequence
from pathlib import Path

from envguard.restore.plan import Overrides

# option → the field it fills; uv's --index and --default-index are its names of
# --extra-index-url and --index-url
_VALUED = {
    "--index-url": "index", "-i": "index", "--default-index": "index",
    "--extra-index-url": "extra", "--index": "extra",
    "--find-links": "links", "-f": "links",
    "--requirement": "file", "-r": "file",
}  # fmt: skip
_FLAGS = {"--no-index": "no_index", "--offline": "offline"}
_MOST_BYTES = 1 << 20  # a requirements file larger than this is no one's to read here
_MOST_DEPTH = 8  # -r inside -r inside …


def of(args: Sequence[str], cwd: Path) -> Overrides:
    """The sources ``args`` (what follows ``pip install``) name; relative wheelhouses read
    against ``cwd``, or, inside a requirements file, against its folder where that exists
    (as pip reads them)."""
    found: dict[str, list[str]] = {"index": [], "extra": [], "links": []}
    flags: set[str] = set()
    for field, value in _options(list(args), cwd, cwd, depth=0, seen=set()):
        if field in _FLAGS.values():
            flags.add(field)
        else:
            found[field].append(value)
    index = found["index"][-1] if found["index"] else None  # the last one given, as pip reads
    return Overrides(
        index_url=index,
        extra_index_urls=tuple(dict.fromkeys(found["extra"])),
        find_links=tuple(dict.fromkeys(found["links"])),
        offline="offline" in flags,
        no_index="no_index" in flags,
    )


def _options(
    words: list[str], cwd: Path, base: Path, *, depth: int, seen: set[Path]
) -> Iterator[tuple[str, str]]:
    i = 0
    while i < len(words):
        option, value, i = _next(words, i)
        if option in _FLAGS:
            yield _FLAGS[option], ""
            continue
        field = _VALUED.get(option)
        if field is None or value is None:
            continue
        if field == "file":
            yield from _file(_local(value, cwd, base), depth=depth, seen=seen)
        elif field == "links":
            yield field, _wheelhouse(value, cwd, base)
        else:
            yield field, value.split("=", 1)[1] if field == "extra" and _named(value) else value


def _next(words: list[str], i: int) -> tuple[str, str | None, int]:
    """The option at ``words[i]``, its value (``--opt=V``, ``--opt V``, ``-iV``, ``-i V``)
    and where the next word is."""
    word = words[i]
    if word.startswith("--"):
        name, eq, value = word.partition("=")
        if eq:
            return name, value, i + 1
    elif word.startswith("-") and len(word) > 2 and word[:2] in _VALUED:
        return word[:2], word[2:], i + 1
    else:
        name = word
    if name in _VALUED:
        value_at = i + 1
        return name, words[value_at] if value_at < len(words) else None, i + 2
    return name, None, i + 1


def _named(value: str) -> bool:
    """uv's ``--index name=URL``: a name before the URL."""
    name, eq, rest = value.partition("=")
    return bool(eq) and "://" not in name and "/" not in name and bool(rest)


def _wheelhouse(value: str, cwd: Path, base: Path) -> str:
    if "://" in value:
        return value
    return str(_local(value, cwd, base))


def _local(value: str, cwd: Path, base: Path) -> Path:
    """A path as pip reads it in a requirements file: against the file's folder where that
    exists, else against where the command runs."""
    path = Path(value).expanduser()
    if path.is_absolute():
        return path
    beside = base / path
    return beside if beside.exists() else cwd / path


def _file(path: Path, *, depth: int, seen: set[Path]) -> Iterator[tuple[str, str]]:
    """The index options of a requirements file, and of those it names in turn."""
    real = path.resolve()
    if depth >= _MOST_DEPTH or real in seen:
        return
    seen.add(real)
    try:
        if not real.is_file() or real.stat().st_size > _MOST_BYTES:
            return
        text = real.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return  # the install itself says why it cannot read it
    words: list[str] = []
    for line in _lines(text):
        try:
            words.extend(shlex.split(line, comments=True))
        except ValueError:
            continue  # a line the installer refuses too
    base = real.parent
    yield from _options(words, base, base, depth=depth + 1, seen=seen)


def _lines(text: str) -> Iterator[str]:
    """Its logical lines: continuations joined, whole-line options only (a requirement's
    own ``--hash`` is no source)."""
    joined = text.replace("\\\n", " ")
    for line in joined.splitlines():
        stripped = line.strip()
        if stripped.startswith("-"):
            yield stripped
