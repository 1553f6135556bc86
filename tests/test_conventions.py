"""The conventions people expect of a CLI (uv, ruff, git), and the project's defaults.

Each test lays the project out as users do (``tests.project``): a git repo with its venv
and a committed ``lockfiles/``; the CLI runs in-process except where the process boundary
(terminal width, a pipe) is what is tested.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import envguard
from envguard.config import AREAS
from envguard.output.progress import Bars
from tests.conftest import git, make_venv
from tests.project import Project, invoke

ANSI = "\x1b["


def _subprocess(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """envguard as a separate process with its output in a pipe, as in CI or ``| tee``."""
    full = {**os.environ, **env}
    full.pop("COLUMNS", None) if "COLUMNS" not in env else None
    return subprocess.run(
        [sys.executable, "-m", "envguard", *args],
        cwd=cwd, env=full, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def _drift(project: Project) -> None:
    """A change in three areas: code (critical), caches and packages (warnings)."""
    project.write("model.py", "def forward(x):\n    return x * 2\n")
    shutil.rmtree(project.cache)
    project.install("plainpkg==2.4")


# --- version, help, errors --------------------------------------------------------------------


@pytest.mark.parametrize("flag", ["-V", "--version"])
def test_version_flag(flag: str) -> None:
    code, out, _ = invoke(flag)
    assert code == 0 and envguard.__version__ in out


def test_bare_envguard_prints_help_not_an_error() -> None:
    code, out, err = invoke()
    assert code == 0
    assert "Usage:" in out and "snapshot" in out and "diff" in out
    assert "error" not in err.lower()


@pytest.mark.parametrize(
    "command", ["snapshot", "diff", "restore", "preflight", "run", "log", "fleet", "export"]
)
def test_every_command_help_lists_exit_codes_and_an_example(command: str) -> None:
    code, out, _ = invoke(command, "--help")
    assert code == 0
    assert "Exit codes:" in out and f"envguard {command}" in out.split("Options:")[0]
    assert "-q, --quiet" in out and "-v, --verbose" in out


@pytest.mark.parametrize(
    "args",
    [
        ["diff", "--bogus"],
        ["nosuch"],
        ["diff", "--fail-on", "sometimes"],
        ["diff", "--only", "torch,nonsense"],
        ["diff", "/no/such/folder/with/a/rather/long/name/train.envguard.toml"],
    ],
)
def test_errors_are_one_line_in_a_narrow_pipe(tmp_path: Path, args: list[str]) -> None:
    done = _subprocess(*args, cwd=tmp_path, env={"COLUMNS": "20", "NO_COLOR": "1"})
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert "Traceback" not in done.stderr
    if args[-1].startswith("/no/such"):
        assert args[-1] in lines[0]  # the path whole, not split at the width


@pytest.mark.parametrize(
    "args", [["diff", "--json", "--bogus"], ["diff", "--json", "/no/such/l.envguard.toml"]]
)
def test_an_error_under_json_is_an_envelope_on_stdout(args: list[str]) -> None:
    code, out, _ = invoke(*args)
    doc = json.loads(out)
    assert code == 2 and doc["exit_code"] == 2 and doc["result"] is None
    assert doc["tool"] == "envguard" and doc["kind"] == "diff" and doc["error"]


# --- colour -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flag", "env", "coloured"),
    [
        ([], {}, False),  # not a terminal: plain
        ([], {"FORCE_COLOR": "1"}, True),
        ([], {"CLICOLOR_FORCE": "1"}, True),
        ([], {"FORCE_COLOR": "1", "NO_COLOR": "1"}, False),  # NO_COLOR wins over FORCE_COLOR
        (["--color", "always"], {"NO_COLOR": "1"}, True),  # the flag wins over both
        (["--color", "never"], {"FORCE_COLOR": "1"}, False),
    ],
)
def test_colour_follows_flag_then_environment(
    project: Project, flag: list[str], env: dict[str, str], coloured: bool
) -> None:
    project.snapshot()
    _drift(project)
    base: dict[str, str | None] = {"NO_COLOR": None, "FORCE_COLOR": None, "CLICOLOR_FORCE": None}
    code, out, _ = invoke("diff", *flag, env={**project.activated(), **base, **env})
    assert code == 1
    assert (ANSI in out) is coloured


# --- area filters -----------------------------------------------------------------------------


@pytest.mark.slow
def test_only_and_ignore_filter_diff_and_guard_alike(project: Project) -> None:
    project.snapshot()
    _drift(project)
    every = {c["area"] for c in project.verdict().changes if c["severity"] != "info"}
    assert {"code", "caches", "packages"} <= every
    only = project.verdict("--only", "caches,packages", guard=False)
    assert {c["area"] for c in only.changes} == {"caches", "packages"}
    assert only.exit_code == 1
    ignored = project.verdict("--ignore", "code", guard=False)
    assert "code" not in {c["area"] for c in ignored.changes}
    assert every - {"code"} <= {c["area"] for c in ignored.changes}
    report = envguard.guard(project.lock, venv=project.venv, only=["caches"])
    assert {c.area for c in report.changes} == {"caches"}  # a warning: guard(critical) passes
    as_text = envguard.guard(project.lock, venv=project.venv, only="caches,packages")
    assert {c.area for c in as_text.changes} == {"caches", "packages"}  # not the letters
    with pytest.raises(envguard.DriftError):
        envguard.guard(project.lock, venv=project.venv, ignore=["caches"], fail_on="critical",
                       fail_on_code=True)  # the edit, critical  # fmt: skip


def test_only_and_ignore_that_leave_nothing_are_an_error_not_a_pass(project: Project) -> None:
    """Judging no area at all would say "No drift" whatever changed."""
    project.snapshot()
    _drift(project)
    code, out, err = invoke("diff", "--only", "torch,cuda", "--ignore", "cuda,torch")
    assert (code, out) == (2, "")
    assert err == "error: nothing left to judge: every area in only (torch, cuda) is also ignored\n"
    every = ",".join(AREAS)
    code, out, err = invoke("diff", "--ignore", every)
    assert (code, err) == (2, "error: nothing left to judge: every area is ignored\n")
    code, out, _ = invoke("diff", "--ignore", every, "--json")
    assert code == 2 and json.loads(out)["error"].startswith("nothing left to judge")
    with pytest.raises(envguard.EnvguardError, match="nothing left to judge"):
        envguard.guard(project.lock, venv=project.venv, only=["caches"], ignore=["caches"])


def test_a_clash_in_the_project_config_is_mended_by_a_flag_and_spares_other_commands(
    project: Project,
) -> None:
    """The clash is an error where a command judges, once the flags are in: a flag can mend
    it, and commands that judge nothing (snapshot, restore --dry-run) never see it."""
    _configure(project, 'only = ["torch"]\nignore = ["torch"]\n')
    env = project.activated()
    assert invoke("snapshot", env=env)[0] == 0
    assert invoke("diff", env=env)[:2] == (2, "")
    assert invoke("diff", "--only", "caches,torch", env=env)[0] in (0, 1)
    assert invoke("restore", "--dry-run", env=env)[0] == 0


def test_only_code_passes_when_the_drift_is_elsewhere(project: Project) -> None:
    project.snapshot()
    shutil.rmtree(project.cache)
    assert project.verdict("--only", "code", guard=False).exit_code == 0
    assert project.verdict(guard=False).exit_code == 1


# --- project config and precedence ------------------------------------------------------------


def _configure(project: Project, table: str) -> None:
    project.write("pyproject.toml", f'[project]\nname = "train"\n\n[tool.envguard]\n{table}')
    project.commit("configure envguard", "pyproject.toml")


def test_precedence_flag_then_environment_then_config(project: Project) -> None:
    _configure(project, 'fail-on = "critical"\n')
    project.snapshot()
    shutil.rmtree(project.cache)  # a warning, nothing critical
    assert project.verdict(guard=False).exit_code == 1  # the helper passes --fail-on warning
    env = project.activated()
    assert invoke("diff", env=env)[0] == 0  # config: critical
    env_warning = {**env, "ENVGUARD_FAIL_ON": "warning"}
    assert invoke("diff", env=env_warning)[0] == 1  # environment over config
    assert invoke("diff", "--fail-on", "critical", env=env_warning)[0] == 0  # flag over both


def test_config_ignores_areas_variables_and_paths(project: Project) -> None:
    _configure(
        project, 'ignore = ["caches"]\nignore-env = ["WANDB_*"]\nignore-paths = ["notes/*"]\n'
    )
    project.snapshot()
    shutil.rmtree(project.cache)
    project.write("notes/idea.txt", "try a larger batch\n")
    verdict = project.verdict(env={"WANDB_PROJECT": "another"})  # guard reads the same config
    assert verdict.found("info") == set()
    assert verdict.exit_code == 0


def test_a_bad_config_is_one_line_naming_the_setting(project: Project) -> None:
    _configure(project, 'fail-on = "sometimes"\n')
    code, out, err = invoke("diff", env=project.activated())
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and "tool.envguard.fail-on" in err and "sometimes" in err


def test_envguard_toml_for_projects_without_a_pyproject(project: Project) -> None:
    project.write("envguard.toml", 'lockfiles = "locks"\n')
    project.commit("configure", "envguard.toml")
    project.snapshot()
    assert (project.root / "locks" / "train.envguard.toml").is_file()
    assert not (project.root / "lockfiles").exists()


def test_a_config_above_the_repository_is_not_this_projects(
    tmp_path: Path, project: Project
) -> None:
    (project.root.parent / "envguard.toml").write_text('lockfiles = "elsewhere"\n')
    project.snapshot()
    assert project.lock.is_file()


# --- the project root and the defaults that follow the lock -----------------------------------


def test_snapshot_from_a_subfolder_writes_at_the_project_root(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    sub = project.root / "configs" / "exp1"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)
    project.snapshot()
    assert project.lock.is_file()
    assert not (sub / "lockfiles").exists()
    assert invoke("diff", env=project.activated())[0] == 0  # and diff finds it from there


def test_defaults_follow_the_lock_when_no_venv_is_active(project: Project) -> None:
    code, _, err = invoke("snapshot", "-q", "--venv", str(project.venv), env={"VIRTUAL_ENV": None})
    assert code == 0, err
    code, out, err = invoke("diff", "--json", env={"VIRTUAL_ENV": None})
    assert code == 0, err
    assert Path(json.loads(out)["result"]["venv"]) == project.venv
    code, out, err = invoke("log", "--json", env={"VIRTUAL_ENV": None})
    assert code == 0, err
    assert Path(json.loads(out)["result"]["journal"]).parent == project.lock.parent


def test_envguards_own_venv_is_not_the_default_target(project: Project) -> None:
    """``pip install envguard`` into a venv, activated to run it, in a project with its own
    ``.venv``: the project's venv is the one recorded and judged."""
    own = {"VIRTUAL_ENV": sys.prefix}
    code, out, err = invoke("snapshot", "--json", env=own)
    assert code == 0, err
    assert Path(json.loads(out)["result"]["venv"]["path"]) == project.venv
    code, out, err = invoke("log", "--json", env=own)
    assert code == 0, err
    assert Path(json.loads(out)["result"]["journal"]).parent == project.lock.parent


def test_with_two_locks_the_venv_picks_its_own(project: Project, tmp_path: Path) -> None:
    project.snapshot()
    other = make_venv(tmp_path / "serve")
    other_lock = project.lock.with_name("serve.envguard.toml")
    assert invoke("snapshot", "-q", "--venv", str(other), "-o", str(other_lock))[0] == 0
    code, out, err = invoke("diff", "--json", env={"VIRTUAL_ENV": None})  # ./.venv's
    assert code == 0, err
    assert Path(json.loads(out)["result"]["venv"]) == project.venv
    code, out, err = invoke("diff", "--json", env={"VIRTUAL_ENV": str(other)})
    assert code == 0, err
    assert Path(json.loads(out)["result"]["venv"]) == other
    assert envguard.guard(venv=other).changes == ()  # guard picks the same lock diff does
    shutil.rmtree(project.venv)  # no venv to tell them apart: a question, not a guess
    code, _, err = invoke("diff", env={"VIRTUAL_ENV": None})
    assert code == 2 and "2 lockfiles" in err and "[tool.envguard]" in err


def test_guard_without_arguments_uses_the_projects_lock(project: Project) -> None:
    project.snapshot()
    report = envguard.guard(venv=project.venv)
    assert report.changes == () or all(c.severity == "info" for c in report.changes)
    project.write("model.py", "def forward(x):\n    return -x\n")
    with pytest.raises(envguard.DriftError):
        envguard.guard(venv=project.venv, fail_on_code=True)


# --- files people share -----------------------------------------------------------------------


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_lockfiles_follow_the_umask(project: Project, umask: int, mode: int) -> None:
    old = os.umask(umask)
    try:
        project.snapshot("--save-cache")
    finally:
        os.umask(old)
    assert project.lock.stat().st_mode & 0o777 == mode
    archive = project.lock.with_name("train.envguard-caches.tar.gz")
    assert archive.stat().st_mode & 0o777 == mode


def test_committing_the_lockfile_is_not_drift(project: Project) -> None:
    project.snapshot()
    project.commit("lock the known-good environment", "lockfiles")
    assert git(project.root, "status", "--porcelain").strip() == ""
    verdict = project.verdict(fail_on="warning")
    assert verdict.exit_code == 0 and verdict.found() == set()


# --- progress ---------------------------------------------------------------------------------


def _screen(written: str) -> list[str]:
    """What a terminal shows for ``written``: ``\\r\\x1b[2K`` clears the line the cursor is on."""
    lines = [""]
    for chunk in re.split(r"(\r\x1b\[2K|\n)", written):
        if chunk == "\n":
            lines.append("")
        elif chunk == "\r\x1b[2K":
            lines[-1] = ""
        else:
            lines[-1] += chunk
    return lines


def test_progress_never_writes_over_text_printed_meanwhile() -> None:
    terminal = io.StringIO()  # stdout and stderr on one terminal, as people run it
    bars = Bars(terminal)
    bars("install", 3, 8)
    bars.echo("Restored .venv: 8 packages match the lock\n", terminal)
    bars("verify", 0, 1)
    bars.echo("Restored cache: inductor\n", terminal)
    assert _screen(terminal.getvalue())[:2] == [
        "Restored .venv: 8 packages match the lock",
        "Restored cache: inductor",
    ]
    assert _screen(terminal.getvalue())[2].startswith("verify")  # the status line, below
    bars.close()
    assert _screen(terminal.getvalue())[2] == ""  # and gone when the work is over
    assert "\x1b[1A" not in terminal.getvalue() and "\x1b[A" not in terminal.getvalue()


def test_no_progress_without_a_terminal(project: Project) -> None:
    code, _, err = invoke("snapshot", env=project.activated())
    assert code == 0 and "\r" not in err and "━" not in err


def test_snapshot_into_a_folder_names_the_lock_inside_it(project: Project, tmp_path: Path) -> None:
    out = tmp_path / "locks"
    out.mkdir()
    project.snapshot("-o", str(out))
    assert out.is_dir() and (out / "train.envguard.toml").is_file()


@pytest.mark.parametrize("command", [["backups"], ["unprotect"], ["log"]])
def test_a_mistyped_venv_is_an_error_everywhere(project: Project, command: list[str]) -> None:
    code, _, err = invoke(*command, "--venv", "/no/such/venv", env=project.activated())
    assert code == 2 and "/no/such/venv" in err and len(err.splitlines()) == 1


def test_fail_on_any_shows_the_info_rows_it_counts(project: Project) -> None:
    project.snapshot()
    project.write("notes.txt", "an untracked note\n")  # info: an untracked file
    code, out, _ = invoke("diff", "--fail-on", "any", env=project.activated())
    assert code == 1
    assert any(line.startswith("info      ") for line in out.splitlines())
    assert "-v shows them" not in out


def test_an_unreadable_cache_is_unknown_not_cold(project: Project) -> None:
    """As another user sees a cache they cannot read (root reads everything, so the probe's
    finding is laid over a real lock: no entries counted, one folder unreadable)."""
    from envguard import drift, lockfile

    project.snapshot()
    lock = lockfile.read(project.lock)
    (cache,) = [c for c in lock.caches if c.kind == "inductor"]
    unreadable = dataclasses.replace(cache, entries=0, files=0, bytes=0, unreadable=1)
    live = dataclasses.replace(
        lock, caches=tuple(unreadable if c is cache else c for c in lock.caches)
    )
    (change,) = drift.compare(lock, live).changes
    assert change.new == "unreadable" and "unknown" in change.why


def test_a_base_interpreter_out_of_reach_is_unknown_not_an_error(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A venv built from another user's pyenv: its `home` cannot be looked into. The verdict
    goes on, and does not claim the venv cannot start."""
    import pathlib

    from envguard.probes import venv as venv_probe

    project.snapshot()
    home = venv_probe._read_cfg(project.venv / "pyvenv.cfg")["home"]
    real_is_dir, real_resolve = pathlib.Path.is_dir, pathlib.Path.resolve

    def denied(method):  # type: ignore[no-untyped-def]
        def call(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            if str(self).startswith(str(pathlib.Path(home).parent)):
                raise PermissionError(13, "Permission denied", str(self))
            return method(self, *args, **kwargs)

        return call

    monkeypatch.setattr(pathlib.Path, "is_dir", denied(real_is_dir))
    monkeypatch.setattr(pathlib.Path, "resolve", denied(real_resolve))
    verdict = project.verdict(guard=False)
    assert verdict.exit_code == 0, verdict.human
    assert not any("cannot start" in c["why"] for c in verdict.changes)


@pytest.mark.parametrize(
    "command",
    [[], *([c] for c in ("snapshot", "diff", "restore", "fleet", "preflight", "run", "log",
                         "export", "protect", "unprotect", "backups", "demo")),
     ["tool"], ["tool", "add"]],
)  # fmt: skip
def test_help_fits_80_columns(command: list[str]) -> None:
    code, out, _ = invoke(*command, "--help", env={"COLUMNS": "80"})
    assert code == 0
    assert [line for line in out.splitlines() if len(line) > 80] == []


# --- the areas, as the registry has them -------------------------------------------------------

ROOT = Path(__file__).resolve().parents[1]


def _listed(text: str, after: str, end: str) -> list[str]:
    """The comma-separated names in ``text`` from just after ``after`` to the next ``end``."""
    text = " ".join(text.split())  # a list wraps where its page does
    start = text.index(after) + len(after)
    names = text[start : text.index(end, start)].replace(" and ", ", ")
    return [name.strip("` ") for name in names.split(",")]


def test_every_list_of_areas_is_the_registrys() -> None:
    """Where a docstring or a page lists areas, it lists drift/areas.py's: all of them in its
    order, or the ones a venv determines; an example's --only/--ignore names only areas it has
    (#22 item 3)."""
    from envguard import drift
    from envguard.bisect import moves
    from envguard.runtime_guard import guard

    def read(name: str) -> str:
        return (ROOT / name).read_text(encoding="utf-8")

    assert _listed(guard.__doc__ or "", "areas to judge (", ")") == list(drift.AREAS)
    assert _listed(read("docs/commands.md"), "(comma-separated):", ".") == list(drift.AREAS)
    assert _listed(read("docs/how-it-works.md"), "a module per area (", ")") == list(drift.AREAS)
    venv = _listed(read("docs/restore.md"), "the areas a venv determines (", ")")
    assert venv == list(drift.VENV_AREAS)
    # the image's Python is checked on what it determines, as a restore verifies a venv
    image = re.search(r"--only (\S+)", read("docs/ci/Dockerfile"))
    assert image and image[1].split(",") == list(drift.VENV_AREAS)
    # the pre-commit hook: every area but the code, left to git, and the host, info alone
    hook = _listed(read("README.md"), "or its caches drifted: ", ".")
    words = {"environment": "env"}
    assert sorted(words.get(w.lower(), w.lower()) for w in hook) == sorted(
        set(drift.AREAS) - {"code", "host"}
    )
    examples = set(moves.KINDS)  # a bisect move is named by its area, as diff names it
    for page in [ROOT / "README.md", *(p for p in (ROOT / "docs").rglob("*") if p.is_file())]:
        text = page.read_text(encoding="utf-8")
        for found in re.finditer(r'--(?:only|ignore)[ ,"]+([a-z,]+)', text):
            examples.update(found[1].split(","))
        for found in re.finditer(r"^(?:only|ignore) = \[(.*)\]", text, re.MULTILINE):
            examples.update(n.strip(' "') for n in found[1].split(","))
    assert examples - set(drift.AREAS) == set()
