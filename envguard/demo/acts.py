"""``envguard demo``: the incident and its cure, in a temporary folder, offline, in seconds.

It builds a small training project with uv from wheels made on the spot (a torch whose
METADATA says 2.11.0+cu128, nvidia wheels with their real header layout, a transformers), a
git repository and a compile cache in Inductor's layout; snapshots it; replays the incident
(an inference server installed into the same venv swaps torch for PyPI's cu130 build, moves
transformers and brings dozens of packages; the cache is "cleaned up"; an experiment is left
uncommitted); and runs the real ``envguard diff``, ``envguard restore --all`` and the clean
``envguard diff`` that follows, with a line of narration before each. With ``bisect``, the
project's benchmark is bisected between the diff and the cure: torch's build is found.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from envguard import _term
from envguard._run import run as run_command
from envguard.demo import incident, repo
from envguard.demo.cache import BuiltBy, make
from envguard.errors import ArgumentError, EnvguardError
from envguard.uv import find_uv


def play(
    keep: Path | None = None, say: Callable[..., None] | None = None, bisect: bool = False
) -> int:
    """Run the demo; 0 when every step behaved as it should. ``keep``: build there and keep
    it (else a temporary folder, removed at the end); ``bisect``: the bisect act too."""
    tell = say or _narrate
    started = time.perf_counter()
    if keep is not None and keep.exists() and (not keep.is_dir() or any(keep.iterdir())):
        # it builds a venv, a repository and caches there: never over someone's files
        raise ArgumentError(f"--keep {keep}: must be a new or empty folder")
    work = keep.absolute() if keep else Path(tempfile.mkdtemp(prefix="envguard-demo-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        _Demo(work, tell, bisect).play()
    finally:
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)
    where = f"kept in {work}" if keep else "its folder is removed"
    tell(f"That was the incident and its cure, in {time.perf_counter() - started:.1f} s ({where}).")
    return 0


class ActFailed(EnvguardError):
    """An act of the demo did not do what it shows: the demo stops there, with its error."""

    exit_code = 1


class _Demo:
    def __init__(self, work: Path, tell: Callable[..., None], bisect: bool = False) -> None:
        self.work, self.tell, self.bisect = work, tell, bisect
        self.project = work / "train"
        self.venv = self.project / ".venv"
        self.before, self.after = work / "wheels-before", work / "wheels-after"
        self.lock = self.project / "lockfiles" / "train.envguard.toml"
        # the demo's own wheels only: none of the machine's uv cache, config, index settings
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_"))},
            "UV_CACHE_DIR": str(work / "uv-cache"),
            "UV_NO_CONFIG": "1",
            "UV_OFFLINE": "1",
            "UV_PYTHON_DOWNLOADS": "never",
            "UV_NO_PROGRESS": "1",
            "ENVGUARD_CACHE_DIR": str(work / "envguard-cache"),
            "TORCHINDUCTOR_CACHE_DIR": str(work / "inductor"),
            "TRITON_CACHE_DIR": str(work / "triton"),
            "VIRTUAL_ENV": str(self.venv),
            "GIT_AUTHOR_NAME": "demo",
            "GIT_AUTHOR_EMAIL": "demo@example.invalid",
            "GIT_COMMITTER_NAME": "demo",
            "GIT_COMMITTER_EMAIL": "demo@example.invalid",
        }
        for name in ("PIP_CONSTRAINT", "UV_CONSTRAINT", "ENVGUARD_VENV", "ENVGUARD_LOCK"):
            self.env.pop(name, None)

    def play(self) -> None:
        self.tell(
            f"Building a training project in {self.project}: a venv with torch 2.11.0+cu128 "
            "(CUDA 12.8) and transformers 5.6.0, a git repository, a warm compile cache."
        )
        self._build()
        self.tell("Recording the known-good environment, compile caches saved beside it:")
        self._envguard("snapshot", "--save-cache")
        self._git("add", "lockfiles")
        self._git("commit", "-q", "-m", "lock the known-good environment")
        self.tell(
            "The incident: an inference server is installed into the same venv, the compile "
            "cache is 'cleaned up', an experiment is left uncommitted."
        )
        self._incident()
        self.tell("What changed since it last worked, and why it matters for training:")
        self._envguard("diff", expect=1)
        if self.bisect:
            self.tell(
                "Which of it costs the throughput? The project's benchmark, bench.py, run in "
                "trials between the lock and now, each in a venv, worktree and caches of its own:"
            )
            houses = ("--find-links", str(self.before), "--find-links", str(self.after))
            self._envguard("bisect", *houses, "--offline", *incident.METRIC, "--", "python",
                           "bench.py")  # fmt: skip
        self.tell(
            "Putting it back: the venv rebuilt beside the old one (which is kept), the caches "
            "unpacked, the code checked out, the uncommitted experiment stashed:"
        )
        lock = str(self.lock.relative_to(self.project))
        restore = ("restore", lock, "--all", "--yes", "--find-links", str(self.before))
        self._envguard(*restore, "--offline")
        self.tell("And the same question again:")
        self._envguard("diff")
        self.tell(
            "Try it in your own training project (and commit lockfiles/ with your code):\n"
            "  envguard snapshot                         record the active venv (or ./.venv)\n"
            "  envguard diff                             later: what changed, why it matters\n"
            "  envguard preflight -- uv pip install X    before an install: what it would do\n"
            "  envguard restore --dry-run                how it would put it back\n"
            "  envguard bisect -- python bench.py        which of the drift costs your metric"
        )

    def _build(self) -> None:
        reqs = incident.known_good(self.before)
        train = "import model\n\nfor step in range(1000):\n    model.forward(step)\n"
        model = "def forward(x):\n    return x\n"
        files = {"train.py": train, "model.py": model, "bench.py": incident.BENCH}
        repo.committed(self.project, files, env=self.env)
        self._run([find_uv(), "venv", "--quiet", "--python", sys.executable, str(self.venv)])
        incident.install(self.venv, self.before, *reqs, env=self.env)
        make(self.work / "inductor", BuiltBy())

    def _incident(self) -> None:
        reqs = incident.sglang_install(self.after)
        incident.install(self.venv, self.after, *incident.SGLANG_INSTALL, *reqs, env=self.env)
        shutil.rmtree(self.work / "inductor")
        (self.project / "model.py").write_text(
            "def forward(x):\n    return x\n# experiment: a faster attention path\n"
        )

    def _envguard(self, *args: str, expect: int = 0) -> None:
        """Run one act as the user would, its screen on the terminal; an act that exits
        otherwise than it should stops the demo with the act's own error line."""
        houses = {str(self.before): "wheels-before/", str(self.after): "wheels-after/"}
        shown = shlex.join(houses.get(a, a) for a in args)
        self.tell(f"$ envguard {shown}", command=True)
        argv = [sys.executable, "-m", "envguard", *args]
        done = subprocess.run(
            argv, cwd=self.project, env=self.env, check=False, stderr=subprocess.PIPE, text=True
        )
        sys.stderr.write(done.stderr)
        if done.returncode != expect:
            errors = [ln for ln in done.stderr.splitlines() if ln.startswith("error:")]
            why = errors[-1].removeprefix("error:").strip() if errors else "no error line"
            raise ActFailed(
                f"the demo stopped: `envguard {args[0]}` exited {done.returncode}, not "
                f"{expect} ({why})"
            )

    def _git(self, *args: str) -> None:
        self._run(["git", "-C", str(self.project), *args])

    def _run(self, argv: Sequence[str]) -> None:
        run_command(argv, env=self.env, timeout=300)


def _narrate(text: str, command: bool = False) -> None:
    from envguard.output.layout import wrap

    on = _term.color(sys.stdout)
    if command:
        for line in _continued(text, _term.width(sys.stdout)):
            print(_term.visible(_term.paint(line, "bold", on)), flush=True)
        return
    print()
    for paragraph in text.splitlines():
        indent = len(paragraph) - len(paragraph.lstrip())
        for line in wrap(
            paragraph.strip(), _term.width(sys.stdout), indent + 2, first=" " * indent
        ):
            print(_term.visible(_term.paint(line, "cyan", on)), flush=True)


def _continued(command: str, width: int) -> list[str]:
    """A long shell command broken the way a person would type it: `` \\`` at each line end,
    between its words (a quoted one, ``'throughput: ([0-9.]+)'``, is one word)."""
    lines: list[str] = []
    line = ""
    for word in (w if w == "$" else shlex.quote(w) for w in shlex.split(command)):
        if line and len(line) + 1 + len(word) + 2 > width:
            lines.append(line + " \\")
            line = "    " + word
        else:
            line = f"{line} {word}" if line else word
    return [*lines, line]
