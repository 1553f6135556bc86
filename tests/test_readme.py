"""The README's examples run as printed, and its screens are the real ones.

- the Quickstart's two commands are the ones CI and a new user run;
- every ``envguard`` command line in a code block parses with the real CLI (options, their
  values and arguments), so none is a typo or an option that no longer exists;
- the Quickstart's project walk-through runs, line by line, in a real project, offline;
- the ``$ envguard diff`` screen is the golden one that ``tests/test_screens.py`` checks
  against the live output at 80 columns;
- the configuration example is a valid config.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import click
import pytest

from envguard import config
from envguard.cli import cli
from tests.project import Project, invoke
from tests.test_screens import GOLDEN

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
BLOCKS = re.findall(r"^```(\w*)\n(.*?)^```", README, flags=re.S | re.M)


def _commands() -> list[str]:
    """Every envguard command line in the README's bash and console blocks."""
    found = []
    for lang, body in BLOCKS:
        if lang not in ("bash", "console"):
            continue
        joined = body.replace("\\\n", " ")
        for line in joined.splitlines():
            line = line.removeprefix("$ ").strip()
            for part in re.split(r"\s*&&\s*", line):
                part = part.split(" #", 1)[0].strip()
                words = shlex.split(part) if part else []
                if "envguard" in words:  # first, or after srun or torchrun -m
                    found.append(shlex.join(words[words.index("envguard") :]))
                # quoted for a remote shell: pdsh 'envguard …', ansible -a 'envguard …'
                found += [w for w in words if w.startswith("envguard ")]
    return found


def test_the_quickstart_is_what_ci_and_a_new_user_run() -> None:
    bash = [body.strip() for lang, body in BLOCKS if lang == "bash"]
    assert bash[0] == "pip install . && envguard demo"
    assert bash[1] == "pip install -e '.[test]' && python -m pytest -q"
    assert bash[1] in (ROOT / ".ci" / "run").read_text().replace(" --quiet", "")


@pytest.mark.parametrize("line", _commands())
def test_every_command_in_the_readme_parses(line: str) -> None:
    name, *args = shlex.split(line)[1:]
    parent = click.Context(cli, info_name="envguard")
    command = cli.get_command(parent, name)
    assert command is not None, f"{line}: no command {name!r}"
    try:
        command.make_context(name, args, parent=parent)
    except click.UsageError as exc:
        pytest.fail(f"{line}: {exc.format_message()}")


def test_the_quickstart_walk_through_runs(project: Project) -> None:
    walk = next(body for lang, body in BLOCKS if lang == "bash" and "envguard snapshot" in body)
    env = project.activated()
    for line in walk.splitlines():
        for part in re.split(r"\s*&&\s*", line.split(" #", 1)[0]):
            words = shlex.split(part)
            if words[0] == "envguard":
                code, out, err = invoke(*words[1:], env=env)
                assert code == 0, (part, out, err)
            else:
                subprocess.run(words, cwd=project.root, check=True, capture_output=True)
    assert project.lock.is_file()


def test_the_diff_screen_is_the_real_one() -> None:
    block = next(body for lang, body in BLOCKS if body.startswith("$ envguard diff\n"))
    shown = block.split("\n", 1)[1]
    masked = re.sub(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\dZ?", "YYYY-MM-DD hh:mm:ss", shown)
    assert masked == (GOLDEN / "diff.80.txt").read_text()
    assert max(len(line) for line in shown.splitlines()) <= 80


def test_the_configuration_example_is_valid(tmp_path: Path) -> None:
    example = next(body for lang, body in BLOCKS if lang == "toml" and "[tool.envguard]" in body)
    (tmp_path / "pyproject.toml").write_text(example)
    cfg = config.load(tmp_path, environ={})
    assert cfg.source.endswith("pyproject.toml")
    assert cfg.fail_on == "warning" and cfg.ignore == ("host",)
    assert cfg.lock == tmp_path / "lockfiles" / "train.envguard.toml"
