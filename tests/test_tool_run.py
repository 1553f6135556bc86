"""``envguard tool run NAME [OPTIONS] [--] COMMAND...``: as in ``uv run``, the options before
the command (or before ``--``) are envguard's, everything from the command on is the
command's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import make_venv
from tests.project import invoke


@pytest.fixture
def train(tmp_path: Path, house: Path) -> Path:
    """A training venv nothing finds on its own (no lock, not active, not ./.venv), with a
    tool ``plain`` beside it."""
    venv = make_venv(tmp_path / "train")
    offline = ["--offline", "--no-index", "--find-links", str(house)]
    code, _, err = invoke("tool", "add", "plain", "plainpkg==2.4", "--venv", str(venv), *offline)
    assert code == 0, err
    return venv


def _argv_of(tmp_path: Path, *args: str) -> tuple[int, str, list[str] | None]:
    """``envguard tool ARGS PROGRAM``, PROGRAM recording the prefix and argv it ran with."""
    out = tmp_path / "ran.json"
    out.unlink(missing_ok=True)
    program = f"import json, sys; open({str(out)!r}, 'w').write(json.dumps(sys.argv[1:]))"
    code, _, err = invoke("tool", "run", *[program if a == "PROGRAM" else a for a in args])
    return code, err, json.loads(out.read_text()) if out.exists() else None


@pytest.mark.slow
def test_venv_after_the_tool_name_is_envguard_s(tmp_path: Path, train: Path) -> None:
    code, err, argv = _argv_of(
        tmp_path, "plain", "--venv", str(train), "--", "python", "-c", "PROGRAM", "--venv", "x"
    )
    assert (code, argv) == (0, ["--venv", "x"]), err  # after --, the command's own


@pytest.mark.slow
def test_the_command_starts_at_its_first_word_without_dash_dash(
    tmp_path: Path, train: Path
) -> None:
    code, err, argv = _argv_of(
        tmp_path, "plain", "-q", "--venv", str(train), "python", "-c", "PROGRAM", "-q", "--venv"
    )
    assert (code, argv) == (0, ["-q", "--venv"]), err


def test_an_unknown_option_before_the_command_is_an_error(tmp_path: Path, train: Path) -> None:
    code, err, argv = _argv_of(
        tmp_path, "plain", "--venv", str(train), "--bogus", "--", "python", "-c", "PROGRAM"
    )
    assert code == 2 and argv is None and "--bogus" in err and len(err.splitlines()) == 1


def test_no_command_is_said(train: Path) -> None:
    code, _, err = invoke("tool", "run", "plain", "--venv", str(train), "--")
    assert code == 2 and "COMMAND" in err and len(err.splitlines()) == 1
