"""--json keeps DEL, C1 and the bidi overrides out of a terminal that shows it (a CI log):
escaped as \\uXXXX, the same text to any JSON parser."""

from __future__ import annotations

import json

from envguard.output.json import _RAW, Json
from envguard.results.journal import LogDone


def test_json_escapes_what_json_dumps_leaves_raw() -> None:
    from envguard.journal import Entry

    hostile = "a\x7fb\x9bc\u202ed\u2066e"
    entry = Entry(schema=1, command=(hostile,), user=hostile, host="h", cwd="/", started="s",
                  finished="f", exit_code=0)  # fmt: skip
    text = Json().format(LogDone(journal="/j", entries=(entry,)))
    assert not _RAW.search(text)
    assert json.loads(text)["result"]["entries"][0]["user"] == hostile
