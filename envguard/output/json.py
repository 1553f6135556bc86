"""The versioned JSON envelope every ``--json`` prints: one document per run.

Its keys are a contract pinned by a test: ``schema``, ``tool``, ``version``, ``kind``,
``exit_code``, ``result``, and ``error`` (null unless the command failed; then ``result`` is
null too).
"""

from __future__ import annotations

import json
import re

from envguard import __version__, results
from envguard.redact import redact_data

# 2: a group's members, a restore plan's changes and a fleet's differing facts are records
# (name, old, new), not text for people; 3: a bisect's stop is a code, its words in "why"
SCHEMA = 3
# json.dumps escapes C0 controls; DEL, C1 and the bidi overrides would reach a terminal that
# shows the JSON (a CI log) raw. They occur only inside strings, where \uXXXX is the same text.
_RAW = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


class Json:
    def format(self, result: results.Result) -> str:
        error = result.error
        doc = {
            "schema": SCHEMA,
            "tool": "envguard",
            "version": __version__,
            "kind": result.command_name,
            "exit_code": result.exit_code,
            "result": None if error is not None else result.to_dict(),
            "error": error,
        }
        text = json.dumps(redact_data(doc), indent=2, ensure_ascii=False)
        return _RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", text) + "\n"
