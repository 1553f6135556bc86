from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from envguard.errors import RepoError
from envguard.probes import code
from tests.conftest import git
from tests.project import Project


def _apply_to_clean_clone(repo: Path, tmp_path: Path, patch: bytes) -> Path:
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    subprocess.run(["git", "-C", str(clone), "apply", "--binary", "-"], input=patch, check=True)
    return clone


def test_clean_repo(repo: Path) -> None:
    state, warnings = code.probe(repo, required=True)
    assert state is not None and not state.dirty and state.patch == ""
    assert state.branch == "main" and len(state.head) == 40
    assert state.root == str(repo) and warnings == ()


def test_dirty_patch_is_byte_exact_and_applies(repo: Path, tmp_path: Path) -> None:
    (repo / "dflash_model.py").write_text(
        "def forward(x):\n    return x * 2\n# no newline",
    )
    (repo / "weights.bin").write_bytes(bytes(range(256)) * 4)
    git(repo, "add", "weights.bin")  # a binary file, staged
    (repo / "latin1.py").write_bytes("# caf\xe9\n".encode("latin-1"))
    git(repo, "add", "latin1.py")  # not UTF-8: the patch must go base64
    git(repo, "mv", "train.py", "train_v2.py")
    state, _ = code.probe(repo, required=True)
    assert state is not None and state.dirty
    assert state.patch_encoding == "base64"
    clone = _apply_to_clean_clone(repo, tmp_path, state.patch_bytes())
    for name in ("dflash_model.py", "weights.bin", "latin1.py", "train_v2.py"):
        assert (clone / name).read_bytes() == (repo / name).read_bytes(), name
    assert not (clone / "train.py").exists()
    paths = {f.path: f for f in state.changed}
    assert paths["weights.bin"].added == -1  # binary
    assert paths["dflash_model.py"].added == 2 and paths["dflash_model.py"].removed == 1


def test_utf8_patch_kept_as_text_with_per_file_sections(repo: Path, tmp_path: Path) -> None:
    (repo / "dflash_model.py").write_text("def forward(x):\n    return x\n# ünïcode\n")
    (repo / "train.py").write_text("import dflash_model\nimport os\n")
    state, _ = code.probe(repo, required=True)
    assert state is not None and state.patch_encoding == "utf-8"
    sections = state.file_patches()
    assert set(sections) == {"dflash_model.py", "train.py"}
    assert "+# ünïcode" in sections["dflash_model.py"] and "import os" in sections["train.py"]
    clone = _apply_to_clean_clone(repo, tmp_path, state.patch_bytes())
    assert (clone / "dflash_model.py").read_text() == (repo / "dflash_model.py").read_text()


def test_secret_in_patch_and_untracked_is_redacted(repo: Path) -> None:
    (repo / "train.py").write_text(
        'import os\nWANDB_API_KEY = "abcdef0123456789abcdef"\ntoken_count = 5\n'
    )
    (repo / "notes.txt").write_text("HF_TOKEN=hf_abcdefghijklmnop\nlr=3e-4\n")
    (repo / ".env").write_text("OPENAI_API_KEY=sk-zzzzzzzzzzzz\n")
    state, warnings = code.probe(repo, required=True)
    assert state is not None
    assert "abcdef0123456789abcdef" not in state.patch and "token_count = 5" in state.patch
    assert warnings and "redacted" in warnings[0]
    untracked = {u.path: u for u in state.untracked}
    for name, text in {"notes.txt": "hf_abcdefghijklmnop", ".env": "sk-zzzzzzzzzzzz"}.items():
        assert set(untracked[name].to_dict()) == {"path", "size", "blob"}  # hash only
        assert text not in str(untracked[name].to_dict()) and untracked[name].size > 0


def test_remote_credentials_are_stripped(repo: Path) -> None:
    git(repo, "remote", "add", "origin", "https://bob:ghp_SECRET@github.com/team/train.git")
    state, _ = code.probe(repo, required=True)
    assert state is not None and state.remote == "https://github.com/team/train.git"


def test_detached_head_and_empty_repo(repo: Path, tmp_path: Path) -> None:
    git(repo, "checkout", "-q", "--detach")
    state, _ = code.probe(repo, required=True)
    assert state is not None and state.branch is None
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    (empty / "a.py").write_text("x = 1\n")
    git(empty, "add", "a.py")
    state, _ = code.probe(empty, required=True)
    assert state is not None and state.head == "" and state.dirty


def test_not_a_repo(tmp_path: Path) -> None:
    with pytest.raises(RepoError, match="not inside a git repository"):
        code.probe(tmp_path, required=True)
    assert code.probe(tmp_path, required=False) == (None, ())


def test_numstat_parser_handles_renames() -> None:
    text = "1\t0\ta.py\x003\t1\t\x00old.py\x00new.py\x00-\t-\tw.bin\x00"
    assert code._parse_numstat_z(text) == [("a.py", 1, 0), ("new.py", 3, 1), ("w.bin", -1, -1)]


def test_crlf_patch_survives_the_lockfile(repo: Path, tmp_path: Path) -> None:
    from envguard import lockfile, snapshot
    from tests.conftest import make_venv

    (repo / "win.txt").write_bytes(b"a\r\nb\r\n")
    git(repo, "add", "win.txt")
    snap = snapshot.take(make_venv(tmp_path / "venv"), repo=repo, default_caches=False)
    again = lockfile.loads(lockfile.dumps(snap))
    assert again.code is not None and again.code.patch_encoding == "base64"
    clone = _apply_to_clean_clone(repo, tmp_path, again.code.patch_bytes())
    assert (clone / "win.txt").read_bytes() == b"a\r\nb\r\n"


def test_secret_redacted_in_a_base64_patch_too(repo: Path) -> None:
    (repo / "train.py").write_bytes(b'# caf\xe9\r\nAPI_KEY = "abcdef0123456789abcdef"\r\n')
    state, _ = code.probe(repo, required=True)
    assert state is not None and state.patch_encoding == "base64"
    assert b"abcdef0123456789abcdef" not in state.patch_bytes()
    assert b"caf\xe9" in state.patch_bytes()


@given(
    st.lists(
        st.tuples(
            st.from_regex(r"[a-z_/]{1,20}\.py", fullmatch=True),
            st.integers(-1, 500),
            st.integers(-1, 500),
            st.booleans(),
        ),
        max_size=6,
    )
)
@pytest.mark.slow
def test_numstat_parser_round_trip(rows: list[tuple[str, int, int, bool]]) -> None:
    text, want = "", []
    for path, added, removed, renamed in rows:
        a = "-" if added < 0 else str(added)
        r = "-" if added < 0 else str(max(removed, 0))
        text += f"{a}\t{r}\t\0old_{path}\0{path}\0" if renamed else f"{a}\t{r}\t{path}\0"
        want.append((path, -1 if added < 0 else added, -1 if added < 0 else max(removed, 0)))
    assert code._parse_numstat_z(text) == want


# --- a new pyproject.toml holding only [tool.envguard] is envguard's own (#20) ---------------

_ONLY_OURS = '[tool.envguard]\nfail-on = "warning"\n'


@pytest.mark.parametrize("how", ["committed", "staged", "untracked"])
def test_a_new_pyproject_of_only_envguards_settings_is_not_the_code(
    project: Project, how: str
) -> None:
    """`envguard` configured in a project that had no pyproject.toml: the file is envguard's
    configuration, as a new [tool.envguard] table in an existing pyproject already is."""
    project.snapshot()
    project.commit("lock", "lockfiles")
    project.write("pyproject.toml", _ONLY_OURS)
    if how != "untracked":
        git(project.root, "add", "pyproject.toml")
    if how == "committed":
        project.commit("configure envguard", "pyproject.toml")
    v = project.verdict()
    assert v.exit_code == 0 and v.found() == set(), v.changes
    assert ("critical", "code", "pyproject.toml") not in v.found("info")
    if how == "committed":
        head = v.one("git HEAD")
        assert "only envguard's own files" in head["why"] and "pyproject.toml" in head["why"]


def test_a_new_pyproject_with_dependencies_too_is_the_code(project: Project) -> None:
    project.snapshot()
    project.commit("lock", "lockfiles")
    project.write("pyproject.toml", f'[project]\nname = "train"\nversion = "1"\n\n{_ONLY_OURS}')
    project.commit("package the project", "pyproject.toml")
    assert project.verdict().found() == {("critical", "code", "pyproject.toml")}
