"""The screens people read, at 80, 100 and 160 columns: golden files and the layout's rules.

The incident is replayed once: a training project is snapshotted, ``envguard preflight``
is asked about the inference server's install, ``envguard run`` makes it (so the journal
names the command), the compile cache is removed and an experiment left uncommitted. Every
screen is then checked two ways:

- the rules (:mod:`envguard.output.layout`), for every screen: no line longer than the width;
  no value (a version, a path) broken across lines; the incident's diff in at most 60 lines
  at 80 columns;
- golden files in ``tests/screens/``, for the screens that do not name this machine (its
  Python, host or user): the exact text, so that a change to a screen is a reviewed diff.
  ``ENVGUARD_UPDATE_SCREENS=1`` rewrites them.

Paths are made the same length on every machine (a ``/tmp/eg-screens-XXXXXXXX`` folder), so
that the text wraps the same way everywhere; timestamps, hashes and the host are masked after
rendering, never before, so the masking cannot hide a wrap.
"""

from __future__ import annotations

import getpass
import json
import os
import re
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from envguard.demo import incident
from tests.conftest import uv_bin
from tests.project import Project, invoke, new_project

GOLDEN = Path(__file__).parent / "screens"
UPDATE = os.environ.get("ENVGUARD_UPDATE_SCREENS", "") not in ("", "0")
WIDTHS = (80, 100, 160)


class Screens:
    def __init__(self, base: Path, project: Project) -> None:
        self.base = base
        self.project = project
        self.text: dict[str, str] = {}
        self.changes: list[dict[str, str]] = []

    def take(
        self, name: str, *args: str, widths: tuple[int, ...] = WIDTHS, stderr: bool = False
    ) -> int:
        """The screen of ``envguard ARGS`` at each width (``stderr``: the one it prints
        there, as ``run`` does to keep stdout the command's)."""
        codes = set()
        for width in widths:
            code, out, err = invoke(*args, env={**self.project.activated(), "COLUMNS": str(width)})
            assert code in (0, 1), err
            self.text[f"{name}.{width}"] = err if stderr else out
            codes.add(code)
        assert len(codes) == 1, f"{name}: the exit code depends on the width"
        return codes.pop()

    def masked(self, key: str) -> str:
        text = self.text[key].replace(str(self.base), "/tmp/eg-screens-XXXXXXXX")
        text = re.sub(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\dZ?", "YYYY-MM-DD hh:mm:ss", text)
        text = re.sub(r"\b\d{8}-\d{6}-[0-9a-f]{6}\b", "YYYYMMDD-hhmmss-xxxxxx", text)
        text = re.sub(r"\b[0-9a-f]{12,40}\b", lambda m: "h" * len(m.group()), text)
        return text.replace(f"{getpass.getuser()}@{socket.gethostname()}", "user@host")


@pytest.fixture(scope="module")
def screens(house: Path, sglang_house: Path) -> Iterator[Screens]:
    base = Path(tempfile.mkdtemp(prefix="eg-screens-", dir="/tmp"))
    assert len(base.name) == len("eg-screens-XXXXXXXX")
    with pytest.MonkeyPatch.context() as mp:
        _isolate(mp, base)
        (base / "after").symlink_to(sglang_house)
        (base / "bin").mkdir()
        (base / "bin" / "uv").symlink_to(uv_bin())  # `uv` on PATH, as people have it
        mp.setenv("PATH", f"{base / 'bin'}{os.pathsep}{os.environ['PATH']}")
        project = new_project(base, house)
        mp.chdir(project.root)
        shown = Screens(base, project)
        project.snapshot("--save-cache")
        project.commit("lock the known-good environment", "lockfiles")
        sglang = (*incident.SGLANG_INSTALL, *incident.sglang_install(sglang_house))
        install = ("uv", "pip", "install", "--offline", "--no-index",
                   "--find-links", str(base / "after"), *sglang)  # fmt: skip
        assert shown.take("preflight", "preflight", "--", *install) == 1
        assert shown.take("run", "run", "--", *install, widths=(80,), stderr=True) == 0
        shutil.rmtree(project.cache)
        project.write("model.py", "def forward(x):\n    return x\n# a faster attention path\n")
        assert shown.take("diff", "diff") == 1
        assert shown.take("diff-verbose", "diff", "-v", widths=(80,)) == 1
        assert shown.take("diff-expand", "diff", "--expand", widths=(80,)) == 1
        assert shown.take("log", "log") == 0
        lock = str(project.lock)
        assert shown.take("plan", "restore", lock, "--dry-run", "--offline", "--find-links",
                          str(house)) == 0  # fmt: skip
        assert invoke("diff", env=project.activated())[0] == 1
        _, out, _ = invoke("diff", "--json", env=project.activated())
        shown.changes = json.loads(out)["result"]["changes"]
        yield shown
    shutil.rmtree(base, ignore_errors=True)


def _isolate(mp: pytest.MonkeyPatch, base: Path) -> None:
    """What the per-test isolation does, for this module's one replay."""
    mp.setenv("ENVGUARD_CACHE_DIR", str(base / "envguard-cache"))
    mp.setenv("TORCHINDUCTOR_CACHE_DIR", str(base / "inductor"))
    mp.setenv("TRITON_CACHE_DIR", str(base / "triton"))
    mp.delenv("VIRTUAL_ENV", raising=False)
    mp.setenv("UV_OFFLINE", "1")
    for who in ("AUTHOR", "COMMITTER"):
        mp.setenv(f"GIT_{who}_NAME", "t")
        mp.setenv(f"GIT_{who}_EMAIL", "t@example.invalid")


ALL = ["preflight.80", "preflight.100", "preflight.160", "run.80", "diff.80", "diff.100",
       "diff.160", "diff-verbose.80", "diff-expand.80", "log.80", "log.100", "log.160",
       "plan.80", "plan.100", "plan.160"]  # fmt: skip
# The restore plan names this machine's Python ("Python 3.11.7"): its wrapping differs by
# version, so it is held to the rules but has no golden file.
GOLDEN_SCREENS = [name for name in ALL if not name.startswith("plan.")]


@pytest.mark.slow
@pytest.mark.parametrize("key", ALL)
def test_no_line_is_longer_than_the_width(screens: Screens, key: str) -> None:
    width = int(key.rsplit(".", 1)[1])
    long = [line for line in screens.text[key].splitlines() if len(line) > width]
    assert long == [], f"{key}: {len(long)} lines over {width} columns"


@pytest.mark.parametrize("key", [k for k in ALL if k.startswith("diff.")])
def test_no_value_is_broken_across_lines(screens: Screens, key: str) -> None:
    lines = screens.text[key].splitlines()
    for change in screens.changes:
        for value in (change["old"], change["new"]):
            if value and change["severity"] != "info":
                assert any(value in line for line in lines), (key, value)


def test_the_incident_fits_one_screen_at_80_columns(screens: Screens) -> None:
    lines = screens.text["diff.80"].splitlines()
    assert len(lines) <= 60, len(lines)
    subjects = {c["subject"] for c in screens.changes if c["severity"] != "info"}
    assert subjects == {
        "torch", "CUDA runtime", "cuDNN", "NCCL", "transformers", "sglang", "Inductor cache",
        "model.py", "52 packages",
    }  # fmt: skip
    heads = [line[10:] for line in lines if line.startswith(("critical  ", "warning   "))]
    for subject in subjects:  # each change has a line of its own, its subject in the column
        assert sum(head.startswith(subject) for head in heads) == 1, subject


def test_causes_are_short_and_name_the_journal(screens: Screens) -> None:
    text = screens.text["diff.160"]
    assert (
        "by `uv pip install torch==2.11.0 transformers==5.8.1 sglang==0.5.23` (journal #1)" in text
    )
    assert "--find-links" not in text and "--reinstall-package" not in text
    journal = [c for c in screens.changes if "journal #1" in c["cause"]]
    assert len(journal) == 6  # torch, CUDA runtime, cuDNN, NCCL, sglang, transformers
    assert all("--find-links" in c["cause_detail"] for c in journal)  # JSON: the whole command


@pytest.mark.parametrize("key", GOLDEN_SCREENS)
def test_screen_matches_its_golden_file(screens: Screens, key: str) -> None:
    golden = GOLDEN / f"{key}.txt"
    text = screens.masked(key)
    if UPDATE:
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(text)
    assert golden.is_file(), f"no golden file {golden.name}: ENVGUARD_UPDATE_SCREENS=1 writes it"
    assert text == golden.read_text(), f"{key} changed; review, then ENVGUARD_UPDATE_SCREENS=1"


@given(
    st.lists(st.sampled_from(["word", "a", "longer-word", "x" * 12]), max_size=12),
    st.integers(min_value=20, max_value=60),
)
def test_wrap_keeps_a_date_with_its_time_and_a_size_with_its_unit(
    words: list[str], width: int
) -> None:
    from envguard.output.layout import wrap

    text = " ".join([*words, "set aside 2026-11-30 21:54:26,", *words, "3.9 kB", "(journal #3)",
                     *words, "GOOD 540.3 Ksamples/s,", *words, "BAD 4.3 s/step"])  # fmt: skip
    lines = wrap(text, width, 2, first="")
    for whole in (
        "2026-11-30 21:54:26",
        "3.9 kB",
        "(journal #3)",
        "540.3 Ksamples/s",
        "4.3 s/step",
    ):
        assert any(whole in line for line in lines), (whole, lines)  # on one line, whole
