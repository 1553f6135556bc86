"""An error is one line, or, on a terminal narrower than it, lines broken between words: a
terminal left to fold a long line itself cuts words (``UV_I`` / ``NDEX_URL``)."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

# 117 columns of words, the longest one short: a terminal of 80 would cut one of them
_ARGS = ["diff", "--only", "torch,nonsense"]
_MESSAGE = (
    "error: --only: unknown area 'nonsense'; one of python, torch, cuda, gpu, code, caches, "
    "libraries, packages, env, host"
)


def _on_a_terminal(args: list[str], cwd: Path, columns: int) -> tuple[int, str]:
    """envguard run with its stderr on a pseudo-terminal: what it wrote there, unfolded."""
    leader, follower = pty.openpty()
    env = {**os.environ, "COLUMNS": str(columns), "ENVGUARD_COLOR": "never"}
    try:
        done = subprocess.run(
            [sys.executable, "-m", "envguard", *args],
            cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=follower, timeout=60,
        )  # fmt: skip
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the follower's side is closed: all is read
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(leader)
    return done.returncode, b"".join(chunks).decode().replace("\r\n", "\n")


@pytest.mark.parametrize("columns", [80, 40])
def test_a_long_error_on_a_terminal_breaks_between_words(tmp_path: Path, columns: int) -> None:
    code, err = _on_a_terminal(_ARGS, tmp_path, columns)
    lines = err.splitlines()
    assert code == 2 and len(lines) > 1, err
    assert all(len(line) <= columns for line in lines), err
    assert all(line.startswith(" " * 7) for line in lines[1:]), err  # under the message
    assert " ".join(line.strip() for line in lines) == _MESSAGE


def test_an_error_that_fits_the_terminal_stays_one_line(tmp_path: Path) -> None:
    code, err = _on_a_terminal(_ARGS, tmp_path, 200)
    assert (code, err) == (2, _MESSAGE + "\n")


def test_an_error_in_a_pipe_stays_one_line_whatever_the_width(tmp_path: Path) -> None:
    env = {**os.environ, "COLUMNS": "40", "ENVGUARD_COLOR": "never"}
    done = subprocess.run(
        [sys.executable, "-m", "envguard", *_ARGS],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert (done.returncode, done.stderr) == (2, _MESSAGE + "\n")
