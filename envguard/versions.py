"""Versions compared as PEP 440 says, not as strings: a lock's ``2.4`` is an installed
``2.4.0``, while ``2.11.0+cu128`` and ``2.11.0+cu130`` stay two builds."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from packaging.version import Version


def same(a: str, b: str) -> bool:
    if a == b:
        return True
    pa, pb = _parse(a), _parse(b)
    return pa is not None and pa == pb


def valid(text: str) -> bool:
    return len(text) <= 200 and _parse(text) is not None


def newer(old: str, new: str) -> bool | None:
    """True for an upgrade, False for a downgrade, None when either does not parse."""
    po, pn = _parse(old), _parse(new)
    if po is None or pn is None:
        return None
    return pn > po


def major_move(old: str, new: str) -> tuple[int, int] | None:
    """The major versions of ``old`` and ``new`` where they differ (0.36.2 → 1.0: (0, 1));
    None when they do not, or either does not parse."""
    po, pn = _parse(old), _parse(new)
    if po is None or pn is None or po.major == pn.major:
        return None
    return po.major, pn.major


# N(.N)*(+local)? in its normal form: what torch's version.py says in practice, read without
# importing packaging (and typing) on the snapshot's hot path; anything else goes to packaging.
# A local segment is normal when it holds a letter, or is a number without leading zeros:
# packaging turns an all-digit segment into an int, so '00' reads '0'.
_SEGMENT = r"(?:[0-9]*[a-z][a-z0-9]*|0|[1-9][0-9]*)"
_PLAIN = re.compile(rf"[0-9]+(?:\.[0-9]+)*(?:\+({_SEGMENT}(?:\.{_SEGMENT})*))?", re.ASCII)


def local(text: str) -> str | None:
    """The local label (``cu130`` of ``2.11.0+cu130``) normalised as PEP 440 says; None when
    there is none or ``text`` is not a version."""
    plain = _PLAIN.fullmatch(text)
    if plain:
        return plain.group(1)
    version = _parse(text)
    return version.local if version is not None else None


@lru_cache(maxsize=4096)
def _parse(text: str) -> Version | None:
    from packaging.version import InvalidVersion, Version

    try:
        return Version(text)
    except InvalidVersion:
        return None
