"""The secrets harness (#39): gitleaks' default rules × the seven places a secret sits in an
ML project, through the real commands, looked for in everything envguard writes or prints.

One sample per gitleaks rule (``tests/secrets_corpus.py``, checked against the rule's own
regex in ``tests/data/gitleaks/gitleaks.toml``), planted, each place with its own random
characters, in: the environment under neutral names, the index URLs uv and pip are given,
the uncommitted patch, an untracked file, commit messages and branch names, the git remote,
and ``envguard run``'s argv. Then ``snapshot``, ``diff`` and ``run``/``log`` run in-process,
screen and ``--json``, and every output (the lock, the journal, stdout and stderr) is searched
for each secret, as written, percent-encoded, JSON-escaped and with the screen's line breaks
taken out. The look-alikes (commit hashes, digests, versions, uuids, paths…) are planted the
same way and counted when they no longer read as they were.

``KNOWN_LEAKS`` is what this harness found and redaction does not yet stop: each place's test
fails on any leak not listed there, and on a listed one that no longer leaks, so the list only
shrinks. ``python -m pytest -q tests/test_secret_places.py -rA`` prints the figures, and with
``SECRET_LEAKS_OUT=FILE`` each place's leaks of today are written to FILE too.
"""

from __future__ import annotations

import functools
import json
import os
import re
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - 3.10 only
    import tomli as tomllib

from envguard import _gitleaks as gitleaks
from envguard import journal, lockfile
from envguard.probes import code
from envguard.redact import redact
from tests import secrets_corpus as corpus
from tests.conftest import git
from tests.project import Project, invoke, new_project

PLACES = ("env", "index-url", "patch", "untracked", "history", "remote", "argv")
_RULES = Path(__file__).parent / "data" / "gitleaks" / "gitleaks.toml"


def _ident(shape: corpus.Shape) -> str:
    return re.sub(r"[^A-Za-z0-9_]+", "_", shape.ident).upper()


# --- planting ---------------------------------------------------------------------------------


def _env(shapes: tuple[corpus.Shape, ...]) -> dict[str, str]:
    """Each secret as a captured variable's value, under a neutral name (or one that holds
    only the provider's word, where gitleaks' rule needs it): ``TORCH_SETTING_7=hf_…``."""
    out = {}
    for i, s in enumerate(shapes):
        name = f"TORCH_{_ident(s)}_SETTING_{i}" if s.ident else f"TORCH_SETTING_{i}"
        out[name] = s.line % s.secret if s.line else s.secret
    return out


_URL_FORMS = ("https://__token__:{}@pypi.example.com/simple",
              "https://{}@pkgs.example.com/pypi/simple",
              "https://pkgs.example.com/{}/pypi/simple/",
              "https://pypi.example.com/simple?token={}")  # fmt: skip


def _urls(shapes: tuple[corpus.Shape, ...]) -> list[str]:
    return [_URL_FORMS[i % len(_URL_FORMS)].format(quote(s.secret, safe=""))
            for i, s in enumerate(shapes)]  # fmt: skip


def _file(shapes: tuple[corpus.Shape, ...]) -> str:
    return "".join(corpus.text(s) + "\n" for s in shapes)


_REF_BAD = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{|//|/\.|\.lock(?:/|$)|^[./-]|[./]$")


def _branch_safe(shapes: tuple[corpus.Shape, ...]) -> list[corpus.Shape]:
    """The shapes a branch name can hold: a token alone (no name before it, no line)."""
    return [s for s in shapes if not (s.line or s.ident) and not _REF_BAD.search(s.secret)]


def _argv(shapes: tuple[corpus.Shape, ...]) -> list[str]:
    """How a secret reaches a command line: alone, after an option, as ``--opt=VALUE``, in an
    ``env`` prefix, or a shell line as one word (``sh -c "curl -H …"``)."""
    out: list[str] = []
    for i, s in enumerate(shapes):
        if s.line:
            out += ["sh", "-c", s.line % s.secret]
        elif s.ident:
            out.append(f"--{s.ident.lower()}-key={s.secret}")
        else:
            out += ([s.secret], ["--token", s.secret], [f"--api-key={s.secret}"],
                    ["env", f"MY_SETTING={s.secret}", "python"])[i % 4]  # fmt: skip
    return out


# --- measuring --------------------------------------------------------------------------------


def _forms(secret: str) -> Iterator[str]:
    yield secret
    yield quote(secret, safe="")
    yield json.dumps(secret)[1:-1]


def _leaks(secret: str, outputs: dict[str, str]) -> list[str]:
    """The outputs that hold ``secret``, in any of its forms, line breaks and indents
    of a wrapped screen taken out."""
    whole = "".join(secret.split())
    found = []
    for name, text in outputs.items():
        flat = _flat(text)
        if any(f in text for f in _forms(secret)) or (len(whole) >= 8 and whole in flat):
            found.append(name)
    return found


@functools.lru_cache(maxsize=64)
def _flat(text: str) -> str:
    return "".join(text.split())


@dataclass
class Harness:
    shapes: dict[str, tuple[corpus.Shape, ...]] = field(default_factory=dict)  # place's shapes
    outputs: dict[str, str] = field(default_factory=dict)
    lock: Path = Path()

    def leaked(self, place: str) -> dict[str, list[str]]:
        """{rule: the outputs its secret reached} for the place's samples that leaked."""
        out = {}
        for s in self.shapes[place]:
            where = _leaks(s.secret, self.outputs)
            if where:
                out[s.rule] = where
        return out


def _run(outputs: dict[str, str], name: str, *args: str, env: dict[str, str | None]) -> None:
    code, out, err = invoke(*args, env=env)
    assert code in (0, 1), (name, out, err)
    outputs[name] = out + "\n" + err


def _planted(project: Project, harness: Harness) -> dict[str, str | None]:
    """Everything but argv planted, as the lock's machine had it; the environment to run in."""
    root = project.root
    for place in PLACES:  # a URL holds no line of text, nor a name before a token
        shapes = corpus.shapes(place)
        urls = place in ("index-url", "remote")
        harness.shapes[place] = tuple(s for s in shapes if not (urls and (s.line or s.ident)))
    token = harness.shapes["remote"][0].secret
    git(root, "remote", "add", "origin", f"https://x-access-token:{token}@github.com/a/train.git")
    project.write("settings.py", "lr = 3e-4\n")
    project.commit("settings")
    git(root, "checkout", "-q", "-b", "wip/" + _branch_safe(harness.shapes["history"])[0].secret)
    looks = "".join(f'setting = "{v}"\n' for v in dict(corpus.LOOKALIKES_BY_NAME).values())
    project.write("settings.py", "lr = 3e-4\n" + _file(harness.shapes["patch"]) + looks)
    project.write("notes.env", _file(harness.shapes["untracked"]))
    env = {**project.activated(), **_env(harness.shapes["env"]), **corpus.LOOKALIKES_BY_NAME}
    env["UV_EXTRA_INDEX_URL"] = " ".join(_urls(harness.shapes["index-url"]))
    env["PIP_INDEX_URL"] = _urls(harness.shapes["index-url"])[0]
    return env


def _moved(project: Project, harness: Harness, env: dict[str, str | None]) -> None:
    """After the snapshot: a commit whose message holds secrets, more branches, a new remote
    URL, other values now (so that diff shows both sides)."""
    root = project.root
    git(root, "add", "settings.py")
    git(root, "commit", "-q", "-m", "tune\n\n" + _file(harness.shapes["history"]))
    git(root, "checkout", "-q", "-b", "wip/" + _branch_safe(harness.shapes["history"])[1].secret)
    git(root, "remote", "set-url", "origin",
        f"https://{harness.shapes['remote'][1].secret}@github.com/acme/train.git")  # fmt: skip
    project.write("settings.py", "lr = 1e-4\n" + _file(harness.shapes["patch"][::-1]))
    project.write("notes.env", _file(harness.shapes["untracked"][::-1]))
    for name in list(env):
        if name.startswith("TORCH_") and "SETTING_" in name:
            value = env[name]
            env[name] = value[::-1] if value else value  # another value, the same shape's


def _each_branch_and_remote(base: Path, h: Harness) -> None:
    """A repository has one branch and one remote at a time: every other shape goes through
    the probe that reads them (git's own files written, as ``git checkout -b`` and ``git
    remote set-url`` leave them) and the redaction every output passes through; in a clean
    clone, whose probe has no patch to redact each time."""
    root = base / "each"
    git(base, "clone", "-q", str(base / "train"), str(root))
    head = git(root, "rev-parse", "HEAD").strip()
    shown = []
    for s in _branch_safe(h.shapes["history"])[2:]:
        ref = root / ".git" / "refs" / "heads" / "wip" / s.secret
        ref.parent.mkdir(parents=True, exist_ok=True)
        ref.write_text(head + "\n")
        (root / ".git" / "HEAD").write_text(f"ref: refs/heads/wip/{s.secret}\n")
        state, _ = code.probe(root, required=True)
        assert state is not None and state.branch == f"wip/{s.secret}"
        shown.append(redact(state.branch))
    for i, s in enumerate(h.shapes["remote"][2:]):
        form = ("https://x-access-token:{}@github.com/a/b.git", "https://{}@github.com/a/b.git",
                "https://gitlab.example.com/{}/b.git")[i % 3]  # fmt: skip
        git(root, "config", "remote.origin.url", form.format(quote(s.secret, safe="")))
        state, _ = code.probe(root, required=True)
        assert state is not None and state.remote
        shown.append(redact(state.remote))
    h.outputs["probe: branch and remote"] = "\n".join(shown)


@pytest.fixture(scope="module")
def harness(
    tmp_path_factory: pytest.TempPathFactory, house: Path, project_template: Path
) -> Iterator[Harness]:
    mp = pytest.MonkeyPatch()
    base = tmp_path_factory.mktemp("secret-places")
    mp.chdir(base)
    for var, sub in (("ENVGUARD_CACHE_DIR", "envguard-cache"), ("TORCHINDUCTOR_CACHE_DIR",
                     "inductor"), ("TRITON_CACHE_DIR", "triton")):  # fmt: skip
        mp.setenv(var, str(base / sub))
    mp.delenv("VIRTUAL_ENV", raising=False)
    try:
        project = new_project(base, house, template=project_template)
        mp.chdir(project.root)
        h = Harness()
        env = _planted(project, h)
        out = h.outputs
        _run(out, "snapshot", "snapshot", env=env)
        _run(out, "snapshot --json", "snapshot", "--json", "-o", str(base / "second.toml"), env=env)
        out["lock"] = project.lock.read_text()
        h.lock = project.lock
        _moved(project, h, env)
        _run(out, "diff", "diff", "--show-patch", env=env)
        _run(out, "diff --json", "diff", "--json", "--show-patch", env=env)
        argv = _argv(h.shapes["argv"])
        _run(out, "run", "run", "--", "true", *argv, env=env)
        _run(out, "run --json", "run", "--json", "--", "true", *argv, env=env)
        _run(out, "log", "log", env=env)
        _run(out, "log --json", "log", "--json", env=env)
        out["journal"] = journal.path_for(project.lock).read_text()
        _each_branch_and_remote(base, h)
        yield h
    finally:
        mp.undo()


# Found by this harness and not yet redacted, a line "PLACE RULE" each: the test of each place
# fails on a leak not listed and on a listed one that no longer leaks (take its line out).
_KNOWN = Path(__file__).parent / "data" / "secret-leaks-known.txt"


def _known() -> dict[str, frozenset[str]]:
    pairs = [ln.split() for ln in _KNOWN.read_text().splitlines() if ln and ln[0] != "#"]
    return {place: frozenset(r for p, r in pairs if p == place) for place in PLACES}


KNOWN_LEAKS = _known()


@pytest.mark.slow
@pytest.mark.parametrize("place", PLACES)
def test_no_gitleaks_shape_leaks_from_any_place(harness: Harness, place: str) -> None:
    leaked = harness.leaked(place)
    shapes = harness.shapes[place]
    print(f"{place}: {len(leaked)} of {len(shapes)} gitleaks shapes leaked")  # -rA: figures
    if os.environ.get("SECRET_LEAKS_OUT"):  # a maintainer's list of today's leaks, to compare
        with open(os.environ["SECRET_LEAKS_OUT"], "a") as out:
            out.writelines(f"{place} {rule}\n" for rule in sorted(leaked))
    new = {rule: where for rule, where in leaked.items() if rule not in KNOWN_LEAKS[place]}
    assert not new, f"{place}: {len(new)} new leak(s): {new}"
    fixed = KNOWN_LEAKS[place] - set(leaked)
    assert not fixed, f"{place}: no longer leaking, take out of KNOWN_LEAKS: {sorted(fixed)}"


# --- the corpus is gitleaks' ------------------------------------------------------------------


def _rules() -> dict[str, dict[str, object]]:
    return {r["id"]: r for r in tomllib.loads(_RULES.read_text())["rules"]}


def test_every_gitleaks_rule_has_a_sample_that_its_own_regex_finds() -> None:
    rules = _rules()
    sampled = {s.rule.split(":")[0] for s in corpus.SHAPES}
    textual = {rid for rid, r in rules.items() if "regex" in r}  # pkcs12-file: a file's name
    assert textual - sampled == set() and sampled - textual == set()
    for s in corpus.SHAPES:
        rule = rules[s.rule.split(":")[0]]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # RE2's [[ reads as a nested set
            rx = re.compile(corpus.python_regex(str(rule["regex"])))
        m = rx.search(corpus.text(s))
        assert m, (s.rule, corpus.text(s))
        group = int(str(rule.get("secretGroup", 1 if rx.groups else 0)))
        found = m.group(group) or m.group(0)
        assert s.secret in found or found in s.secret, (s.rule, found, s.secret)


def test_each_place_has_its_own_characters() -> None:
    a, b = corpus.shapes("env"), corpus.shapes("patch")
    assert [s.rule for s in a] == [s.rule for s in b]
    assert all(x.secret != y.secret for x, y in zip(a, b, strict=True) if len(x.secret) > 12)


@pytest.mark.slow
def test_lookalikes_stay_readable(harness: Harness) -> None:
    """≤ 2 % of the look-alikes come out changed: as captured variables' values in the lock
    (through the real snapshot: ``TORCH_LOOKALIKE_*``), and as a patch's lines."""
    lock = lockfile.read(harness.lock)
    values = dict(corpus.LOOKALIKES_BY_NAME)
    changed = [v for n, v in values.items() if lock.environ.get(n) != v]
    assert lock.code is not None
    patched = [v for v in values.values() if f'+setting = "{v}"' not in lock.code.patch]
    share = (len(changed) + len(patched)) / (2 * len(values))
    print(
        f"look-alikes: {len(changed)} + {len(patched)} of 2 x {len(values)} changed ({share:.1%})"
    )
    assert share <= 0.02, (changed, patched)


def test_envguards_rules_are_made_from_gitleaks_rule_file() -> None:
    """envguard/_gitleaks.py is what the generator makes of tests/data/gitleaks/gitleaks.toml:
    regenerate it with ``python -m tests.secrets_corpus > envguard/_gitleaks.py``."""
    made = Path(__file__).parents[1] / "envguard" / "_gitleaks.py"
    assert made.read_text() == corpus.envguard_rules()
    rules = _rules()
    kept = {entry[0] for entry in gitleaks.RULES}
    assert kept == set(rules) - corpus.LEFT_OUT and all(entry[4] for entry in gitleaks.RULES)
