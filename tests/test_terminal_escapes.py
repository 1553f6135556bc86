"""A lockfile is untrusted input (#23): a string it carries reaches the screen as text, never
as an instruction to the terminal.

A real lock (``envguard snapshot`` of a real uv venv) is edited as a teammate's commit could
edit it: its hostname, an environment value, a cache path and its name each carry a
title-setting OSC (``ESC ] 0 ; pwned BEL``), a screen clear (``ESC [ 2 J``), a carriage return
that would write over the line, and a right-to-left override (U+202E). Every screen that shows
them (``diff``, ``restore --dry-run``, ``fleet``, ``log``, an error line) shows them escaped, as
visible text, and envguard's own colours still come out when colour is on.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from envguard import _term
from envguard.output.progress import Bars
from tests.project import Project, invoke

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - 3.10 only
    import tomli as tomllib

HOSTILE = "\x1b]0;pwned\x07\x1b[2J\r\u202e"
ESCAPED = "\\x1b]0;pwned\\x07\\x1b[2J"  # then "\\r" (a space where text is wrapped), "\\u202e"
RAW = ("\x1b", "\x07", "\r", "\u202e")
OWN = tuple(f"\x1b[{code}m" for code in (*_term.STYLES.values(), "0"))  # envguard's colours


def _hostile(project: Project, at: Path) -> Path:
    """The project's real lock, the strings a screen shows edited to carry ``HOSTILE``."""
    project.snapshot()
    doc: dict[str, Any] = tomllib.loads(project.lock.read_text(encoding="utf-8"))
    doc["name"] = "train" + HOSTILE
    doc["host"]["hostname"] = "gpu-7" + HOSTILE
    doc.setdefault("environ", {})["CUDA_VISIBLE_DEVICES"] = "0" + HOSTILE
    doc["caches"][0]["path"] = doc["caches"][0]["path"] + HOSTILE
    at.parent.mkdir(parents=True, exist_ok=True)
    at.write_text(tomli_w.dumps(doc), encoding="utf-8")
    return at


def _plain(*streams: str) -> str:
    """The streams, checked to hold no raw control of the lock's, envguard's colours aside."""
    for text in streams:
        for own in OWN:
            text = text.replace(own, "")
        for raw in RAW:
            assert raw not in text, (raw, text)
    shown = "".join(streams)
    assert "\\u202e" in shown, shown  # the override, visible
    return shown


def test_diff_shows_the_lock_s_strings_escaped(project: Project, tmp_path: Path) -> None:
    lock = _hostile(project, tmp_path / "hostile.envguard.toml")
    code, out, err = invoke("diff", str(lock), "-v", env=project.activated())
    assert code == 1, err
    shown = _plain(out, err)
    for value in ("gpu-7", "/inductor", "0"):  # the hostname, the cache path, the env value
        assert f"{value}{ESCAPED}" in shown, (value, shown)


def test_with_colour_on_envguard_s_own_colours_survive(project: Project, tmp_path: Path) -> None:
    lock = _hostile(project, tmp_path / "hostile.envguard.toml")
    env = {**project.activated(), "NO_COLOR": None}
    code, out, err = invoke("diff", str(lock), "--color", "always", env=env)
    assert code == 1, err
    assert out.startswith("\x1b[1;31mDrift\x1b[0m: ")  # the verdict's word, bold red
    assert "/inductor" + ESCAPED in _plain(out, err)


@pytest.mark.slow
def test_restore_plan_shows_them_escaped(project: Project, tmp_path: Path) -> None:
    """The plan names the lock's venv: a path is refused with a control character in it, and
    still reaches the screen with a bidi override."""
    lock = _hostile(project, tmp_path / "hostile.envguard.toml")
    doc = tomllib.loads(lock.read_text(encoding="utf-8"))
    doc["venv"]["path"] = str(tmp_path / "venv\u202eos.")
    lock.write_text(tomli_w.dumps(doc), encoding="utf-8")
    env = {**project.activated(), "NO_COLOR": None}
    code, out, err = invoke("restore", str(lock), "--dry-run", "--color", "always", env=env)
    assert code == 0, err
    assert "venv\\u202eos." in _plain(out, err)
    assert out.startswith("\x1b[1mRestore plan\x1b[0m for ")


def test_fleet_shows_a_node_s_strings_escaped(project: Project, tmp_path: Path) -> None:
    node = _hostile(project, tmp_path / "nodes" / "gpu-7.envguard.toml")
    code, out, err = invoke("fleet", str(project.lock), str(node.parent), "-v",
                            env=project.activated())  # fmt: skip
    assert code == 1, err
    assert "gpu-7" + ESCAPED in _plain(out, err)


def test_log_shows_a_journal_s_strings_escaped(project: Project) -> None:
    """The journal is committed beside the lock: a teammate's too."""
    project.snapshot()
    entry = {
        "schema": 1, "command": ["uv", "pip", "install", "plainpkg" + HOSTILE],
        "user": "mallory" + HOSTILE, "host": "gpu-7" + HOSTILE, "cwd": "/work" + HOSTILE,
        "started": "2026-11-30T21:54:26Z", "finished": "2026-11-30T21:54:30Z", "exit_code": 0,
        "added": ["plainpkg 2.4" + HOSTILE],
    }  # fmt: skip
    journal = project.lock.with_name("train.envguard-journal.jsonl")
    journal.write_text(json.dumps(entry) + "\n", encoding="utf-8")
    code, out, err = invoke("log", "-v", env=project.activated())
    assert code == 0, err
    shown = _plain(out, err)
    assert "gpu-7" + ESCAPED in shown and "mallory" + ESCAPED in shown


def test_an_error_line_quoting_them_shows_them_escaped(project: Project, tmp_path: Path) -> None:
    """A field refused when read, in a file whose very path carries them: one line, escaped."""
    folder = tmp_path / f"evil{HOSTILE}"
    lock = _hostile(project, folder / "hostile.envguard.toml")
    doc = tomllib.loads(lock.read_text(encoding="utf-8"))
    doc["torch"]["index_url"] = "https://download.pytorch.org/whl/cu128" + HOSTILE
    lock.write_text(tomli_w.dumps(doc), encoding="utf-8")
    code, out, err = invoke("diff", str(lock), env=project.activated())
    assert code == 2 and out == ""
    assert f"evil{ESCAPED}" in _plain(out, err) and len(err.splitlines()) == 1
    code, out, err = invoke("diff", str(lock), "--json", env=project.activated())
    assert code == 2
    assert "\\u001b" in out and json.loads(out)["error"]  # json.dumps escapes C0 controls
    _plain(err)


# --- the boundary itself ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("a\x1b[2Jb", "a\\x1b[2Jb"),
        ("title\x1b]0;x\x07", "title\\x1b]0;x\\x07"),
        ("over\rwrite", "over\\rwrite"),
        ("nul\x00del\x7f", "nul\\x00del\\x7f"),
        ("csi\x9b2J", "csi\\x9b2J"),  # C1: one character CSI
        ("\u202eevil\u2066x\u2069", "\\u202eevil\\u2066x\\u2069"),
        ("two\nlines", "two\nlines"),
        ("a\tb", "a       b"),
        ("surrogate\udcff", "surrogate\\udcff"),  # a file name's undecodable byte
        ("ok: München → 5 MB", "ok: München → 5 MB"),
    ],
)
def test_visible_escapes_every_control_but_newline(raw: str, shown: str) -> None:
    assert _term.visible(raw) == shown


def test_paint_s_colours_survive_and_an_input_s_marks_do_not() -> None:
    painted = _term.paint("Drift", "bold red", True) + ": " + HOSTILE
    assert _term.visible(painted) == f"\x1b[1;31mDrift\x1b[0m: {ESCAPED}\\r\\u202e"
    # what paint makes is no escape code until visible: text built from it stays measurable
    assert "\x1b" not in _term.paint("x", "bold", True)
    # a mark carried in by input (one this process never made) is shown, not obeyed
    forged = "".join(chr(c) for c in range(0xE000, 0xE010)) + "\U000f0000\U0010fffd"
    assert "\x1b" not in _term.visible(forged)
    assert _term.visible(_term.paint("x", "bold", False)) == "x"


def test_progress_escapes_what_it_echoes() -> None:
    terminal = io.StringIO()
    bars = Bars(terminal, color=True)
    bars("install", 3, 8)
    bars.echo(f"Restored {HOSTILE}\n", terminal)
    bars.close()
    written = terminal.getvalue()
    assert f"Restored {ESCAPED}\\r\\u202e\n" in written
    assert "\x1b[32m" in written  # the bar's own colour
    assert "\x1b]" not in written and "\u202e" not in written and "\x07" not in written
