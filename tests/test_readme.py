"""The README's and the docs/ pages' examples run as printed, and their screens are the real
ones. Every page (README.md and each docs/*.md) is held to the same rules:

- every ``envguard`` command line in a code block parses with the real CLI (options, their
  values and arguments), so none is a typo or an option that no longer exists;
- every ``$ envguard diff`` screen is the golden one that ``tests/test_screens.py`` checks
  against the live output at 80 columns;
- every ``[tool.envguard]`` example is a valid config;
- every relative link leads to a file that exists, and an anchor to a heading it has.

And the README's own: its Quickstart's two commands are the ones CI and a new user run, its
project walk-through runs line by line in a real project, offline, and it links every page.
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
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
Blocks = list[tuple[str, str]]  # (language, body)


def _blocks(page: Path) -> Blocks:
    return re.findall(r"^```(\w*)\n(.*?)^```", page.read_text(), flags=re.S | re.M)


def _name(page: Path) -> str:
    return str(page.relative_to(ROOT))


BLOCKS = _blocks(ROOT / "README.md")


def _commands(blocks: Blocks) -> list[str]:
    """Every envguard command line in a page's bash and console blocks."""
    found = []
    for lang, body in blocks:
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


COMMANDS = [
    pytest.param(line, id=f"{_name(page)}: {line}")
    for page in PAGES
    for line in _commands(_blocks(page))
]
PAGE_IDS = [_name(page) for page in PAGES]


def test_the_quickstart_is_what_ci_and_a_new_user_run() -> None:
    bash = [body.strip() for lang, body in BLOCKS if lang == "bash"]
    assert bash[0] == "pip install . && envguard demo"
    assert bash[1] == "pip install -e '.[test]' && python -m pytest -q"
    ci = (ROOT / ".ci" / "run").read_text().replace(" --quiet", "")
    install, tests = bash[1].split(" && ")
    assert f"\n{install}\n" in ci  # the install as it is, pip's configuration kept
    assert f"\nsuite {tests}\n" in ci  # the suite under an empty HOME (.ci/run's suite())


@pytest.mark.parametrize("line", COMMANDS)
def test_every_command_on_every_page_parses(line: str) -> None:
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


def _diff_screens(blocks: Blocks) -> list[str]:
    return [body.split("\n", 1)[1] for _, body in blocks if body.startswith("$ envguard diff\n")]


def test_the_readme_shows_the_incident_screen() -> None:
    assert _diff_screens(BLOCKS), "the README's `$ envguard diff` screen is gone"


@pytest.mark.parametrize("page", PAGES, ids=PAGE_IDS)
def test_every_diff_screen_is_the_real_one(page: Path) -> None:
    for shown in _diff_screens(_blocks(page)):
        masked = re.sub(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\dZ?", "YYYY-MM-DD hh:mm:ss", shown)
        assert masked == (GOLDEN / "diff.80.txt").read_text()
        assert max(len(line) for line in shown.splitlines()) <= 80


def _config_examples() -> list[str]:
    return [body for page in PAGES for lang, body in _blocks(page)
            if lang == "toml" and "[tool.envguard]" in body]  # fmt: skip


@pytest.mark.parametrize("page", PAGES, ids=PAGE_IDS)
def test_every_configuration_example_is_valid(page: Path, tmp_path: Path) -> None:
    for lang, body in _blocks(page):
        if lang == "toml" and "[tool.envguard]" in body:
            (tmp_path / "pyproject.toml").write_text(body)
            assert config.load(tmp_path, environ={}).source.endswith("pyproject.toml")


def test_the_configuration_example_says_what_it_shows(tmp_path: Path) -> None:
    example = next(body for body in _config_examples() if "fail-on" in body)
    (tmp_path / "pyproject.toml").write_text(example)
    cfg = config.load(tmp_path, environ={})
    assert cfg.fail_on == "warning" and cfg.ignore == ("host",)
    assert cfg.lock == tmp_path / "lockfiles" / "train.envguard.toml"


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)
    return {_anchor(h) for h in re.findall(r"^#{1,6} (.+)$", text, flags=re.M)}


def _links(page: Path) -> list[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)
    return [t for t in re.findall(r"\]\(([^)\s]+)\)", text) if "://" not in t]


@pytest.mark.parametrize("page", PAGES, ids=PAGE_IDS)
def test_every_relative_link_resolves(page: Path) -> None:
    for link in _links(page):
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        assert target.exists(), f"{_name(page)}: {link}: no {path}"
        if anchor and target.suffix == ".md":
            assert anchor in _anchors(target), f"{_name(page)}: {link}: no such heading"


def test_the_readme_links_every_docs_page() -> None:
    linked = {(ROOT / link.partition("#")[0]).resolve() for link in _links(ROOT / "README.md")}
    assert not [_name(p) for p in PAGES[1:] if p.resolve() not in linked]
