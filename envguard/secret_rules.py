"""gitleaks' default rules, run over text: where the secrets they know by shape are.

gitleaks (MIT licence) keeps the most complete public catalogue of credential shapes: 219
providers' prefixes, alphabets and lengths, and for tokens that are only random text, the
provider's name that must stand before them (``heroku_api_key = <uuid>``). envguard runs
them as gitleaks does, in Python's ``re``, from ``envguard/_gitleaks.py`` (made from gitleaks'
own rule file): a rule runs only where one of its keywords is on the lines it matched (not
anywhere in the text, as gitleaks has it for a file: over a lockfile that took every commit
hash for a Sourcegraph token), and a secret below the rule's entropy, or one its allow-list
names, is not one. Each rule is bounded and runs once over the text: linear time.
"""

from __future__ import annotations

import functools
import math
import re
import warnings
from collections import Counter
from collections.abc import Iterator

from envguard._gitleaks import ALLOWED, RULES

_Rule = tuple[re.Pattern[str], int, float, tuple[str, ...], tuple[re.Pattern[str], ...]]


@functools.cache
def _compiled(i: int) -> _Rule:
    """Rule ``i``, compiled the first time its keyword is seen: all of them take 50 ms, and
    most texts call for a few."""
    _, rx, group, entropy, keywords, allowed = RULES[i]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # RE2's "[[" reads as a nested set
        return re.compile(rx), group, entropy, keywords, tuple(re.compile(a) for a in allowed)


@functools.cache
def _allowed() -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(a) for a in ALLOWED)


@functools.cache
def _keywords() -> frozenset[str]:
    return frozenset(k for rule in RULES for k in rule[4])


def spans(text: str) -> list[tuple[int, int]]:
    """Where in ``text`` the rules find a secret, as (start, end), sorted, overlaps merged."""
    lowered = _lower(text)
    present = {k for k in _keywords() if k in lowered}
    if not present:
        return []
    found = sorted(_found(text, lowered, present))
    return _merged(found)


def _lower(text: str) -> str:
    """``text`` in lower case, one character for one (``İ`` lowers to two: kept as it is), so
    that a place in it is the same place in ``text``."""
    lowered = text.lower()
    if len(lowered) == len(text):
        return lowered
    return "".join(c if len(c.lower()) != 1 else c.lower() for c in text)


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for start, end in spans:
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(end, out[-1][1]))
        else:
            out.append((start, end))
    return out


# How far from a keyword a rule's match may reach: back to a name before it (``…contribsys.com``
# ends its URL), on to the token and its end. A window ends at a space or a line's end, where
# no token goes on, so that none is cut.
_BEFORE, _AFTER, _TO_END = 512, 4096, 65536


def _windows(lowered: str, keywords: tuple[str, ...]) -> list[tuple[int, int]]:
    """The parts of the text around the rule's keywords, where alone it can match: each rule
    reads those, not the whole text (219 rules over a megabyte took two seconds). A window
    grows to take each keyword that falls inside it, so that the text is read once."""
    n = len(lowered)
    hits = sorted(at for k in keywords for at in _occurrences(lowered, k))
    out: list[tuple[int, int]] = []
    for at in hits:
        need = min(n, at + _AFTER)
        if out and at - _BEFORE <= out[-1][1]:
            if need > out[-1][1]:
                out[-1] = (out[-1][0], _token_end(lowered, need))
        else:
            out.append((max(0, at - _BEFORE), _token_end(lowered, need)))
    return out


def _occurrences(lowered: str, keyword: str) -> Iterator[int]:
    at = lowered.find(keyword)
    while at >= 0:
        yield at
        at = lowered.find(keyword, at + 1)


def _token_end(lowered: str, at: int) -> int:
    ends = [i for i in (lowered.find(c, at, at + _TO_END) for c in " \n\t") if i >= 0]
    return min(ends) + 1 if ends else min(len(lowered), at + _TO_END)


def _near(lowered: str, m: re.Match[str], keywords: tuple[str, ...]) -> bool:
    """A keyword on the lines of the match."""
    start = lowered.rfind("\n", 0, m.start()) + 1
    end = lowered.find("\n", m.end())
    line = lowered[start : end if end >= 0 else len(lowered)]
    return any(k in line for k in keywords)


def _found(text: str, lowered: str, present: set[str]) -> Iterator[tuple[int, int]]:
    for i, rule in enumerate(RULES):
        if present.isdisjoint(rule[4]):  # every rule has keywords (a test holds it)
            continue
        rx, group, entropy, keywords, allowed = _compiled(i)
        for pos, endpos in _windows(lowered, tuple(k for k in keywords if k in present)):
            for m in rx.finditer(text, pos, endpos):
                span = _secret(m, group)
                if span is None or not _near(lowered, m, keywords):
                    continue
                if _secret_ok(text[span[0] : span[1]], entropy, allowed):
                    yield span


def _secret_ok(secret: str, entropy: float, allowed: tuple[re.Pattern[str], ...]) -> bool:
    """A secret gitleaks would report: on one line, random enough, not allowed by name."""
    if "\n" in secret or (entropy and _entropy(secret) < entropy):
        return False
    return not any(a.search(secret) for a in (*allowed, *_allowed()))


def _secret(m: re.Match[str], group: int) -> tuple[int, int] | None:
    """The secret's span: the rule's secret group, else its first group that matched, else
    the whole match (gitleaks' own choice)."""
    if group:
        return m.span(group) if m.group(group) else None
    for i in range(1, (m.re.groups or 0) + 1):
        if m.group(i):
            return m.span(i)
    return m.span()


def _entropy(text: str) -> float:
    """Shannon entropy in bits a character, as gitleaks measures a secret."""
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in Counter(text).values()) if n else 0.0
