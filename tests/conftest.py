from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings

# Hypothesis profiles, picked by HYPOTHESIS_PROFILE: ``ci`` (the default) runs each property at
# Hypothesis' own count with no deadline (the cores are shared: a slow example is not a bug);
# ``thorough`` runs ten times as many, and the hostile-lockfile fuzz at its full 10,000
# (ENVGUARD_FUZZ_LOCKS sets that one count alone). A test's own @settings(max_examples=...)
# wins over both.
settings.register_profile("ci", deadline=None)
settings.register_profile("thorough", deadline=None, max_examples=1_000)
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
settings.load_profile(PROFILE)
FUZZ_LOCKS = int(
    os.environ.get("ENVGUARD_FUZZ_LOCKS") or (10_000 if PROFILE == "thorough" else 300)
)

FIXTURES = (
    Path(__file__).resolve().parents[1].parent
    / "shared"
    / "fixtures"
    / ("cuda-h200-torch2.11-cu130")
)


def uv_bin() -> str:
    from uv import find_uv_bin

    return find_uv_bin()


def _before_pyenv_shims(path: str) -> str:
    """PATH with this interpreter's own folder just before pyenv's shims, where a shim there
    runs this very interpreter. ``uv python find`` (each restore's) runs the first python3.X on
    PATH to learn what it is, and uv cannot remember what a script runs: a shim, a bash script
    that runs pyenv, cost 0.1-0.25 s each time, 80 times a session. The interpreter found, and
    the path uv reports for it, are the ones the shim gave."""
    base = Path(sys._base_executable)  # type: ignore[attr-defined]
    dirs = path.split(os.pathsep)
    for i, folder in enumerate(dirs):
        if folder == str(base.parent):
            return path  # found before any shim already
        shim = Path(folder) / base.name
        try:
            head = shim.read_bytes()[:4096] if shim.is_file() else b""
        except OSError:
            continue
        if head.startswith(b"#!") and b"pyenv" in head:
            code = "import sys; print(sys.executable)"
            ran = subprocess.run([shim, "-c", code], capture_output=True, text=True, check=False)
            if ran.stdout.strip() != str(base):
                return path  # the shim picks another interpreter here: leave it be
            return os.pathsep.join([*dirs[:i], str(base.parent), *dirs[i:]])
    return path


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--real",
        action="store_true",
        help="run the real tier too: tests with real torch or a real benchmark (CONTRIBUTING.md)",
    )


@pytest.hookimpl(tryfirst=True)  # before xdist's, which starts the workers
def pytest_configure(config: pytest.Config) -> None:
    """With --real, one process: a real benchmark measures the machine, and a second worker
    running another beside it would be what it measures."""
    if config.getoption("--real") and getattr(config.option, "dist", "no") != "no":
        config.option.dist, config.option.numprocesses = "no", 0


@pytest.hookimpl(tryfirst=True)  # before -m deselects: a real test is slow too
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip = pytest.mark.skip(reason="the real tier runs with --real (CONTRIBUTING.md)")
    for item in items:
        if item.get_closest_marker("real") is None:
            continue
        item.add_marker(pytest.mark.slow)
        if not config.getoption("--real"):
            item.add_marker(skip)


# What the machine and the person running the suite have that must decide nothing: their HOME
# (git's global config, ~/.cache, ~/.config, trackers' folders), git's system config and any
# GIT_* variable a hook or an IDE sets, uv's and pip's settings, the XDG folders and TMPDIR.
_MACHINE_PREFIXES = ("UV_", "PIP_", "GIT_", "XDG_", "WANDB_", "MLFLOW_", "HF_", "VIRTUALENV_")
# pip's settings as the machine gives them, before the isolation unsets them: the real tier
# downloads torch as pip here is configured to find it (a mirror, a local folder), and only
# that does
MACHINE_PIP = {k: v for k, v in os.environ.items() if k.startswith("PIP_")}
IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
}


def isolate(mp: pytest.MonkeyPatch, root: Path, tmp: Path) -> dict[str, Path]:
    """Point every per-user folder at ``root``: a HOME of its own (git's global config is
    read there, so none of the developer's, and no identity but :data:`IDENTITY`), the XDG
    folders, the trackers' folders and uv's cache; TMPDIR at ``tmp``. Returns the folders."""
    dirs = {
        name: root / name
        for name in ("home", "config", "cache", "data", "state", "runtime", "uv-cache")
    }
    dirs["tmp"] = tmp
    for path in dirs.values():
        path.mkdir(parents=True, exist_ok=True)
    dirs["runtime"].chmod(0o700)
    for name in [k for k in os.environ if k.startswith(_MACHINE_PREFIXES)]:
        mp.delenv(name)
    mp.setenv("HOME", str(dirs["home"]))
    mp.setenv("XDG_CONFIG_HOME", str(dirs["config"]))
    mp.setenv("XDG_CACHE_HOME", str(dirs["cache"]))
    mp.setenv("XDG_DATA_HOME", str(dirs["data"]))
    mp.setenv("XDG_STATE_HOME", str(dirs["state"]))
    mp.setenv("XDG_RUNTIME_DIR", str(dirs["runtime"]))
    # pyenv's shims on PATH find pyenv's versions by HOME unless PYENV_ROOT says
    pyenv = Path(os.path.expanduser("~/.pyenv"))
    if "PYENV_ROOT" not in os.environ and pyenv.is_dir():
        mp.setenv("PYENV_ROOT", str(pyenv))
    mp.setenv("TMPDIR", str(dirs["tmp"]))
    mp.setattr(tempfile, "tempdir", str(dirs["tmp"]))
    mp.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for name, value in IDENTITY.items():
        mp.setenv(name, value)
    mp.setenv("WANDB_DIR", str(dirs["data"] / "wandb"))
    mp.setenv("WANDB_CACHE_DIR", str(dirs["cache"] / "wandb"))
    mp.setenv("WANDB_CONFIG_DIR", str(dirs["config"] / "wandb"))
    mp.setenv("WANDB_DATA_DIR", str(dirs["data"] / "wandb"))
    mp.setenv("UV_CACHE_DIR", str(dirs["uv-cache"]))
    mp.setenv("UV_NO_CONFIG", "1")
    mp.setenv("UV_OFFLINE", "1")
    mp.setenv("UV_PYTHON_DOWNLOADS", "never")
    mp.setenv("PATH", _before_pyenv_shims(os.environ["PATH"]))
    return dirs


@pytest.fixture(scope="session", autouse=True)
def session_isolation(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """The session's isolation (:func:`isolate`), the first fixture of every test: as an
    autouse fixture of session scope it is set up before any fixture of any scope, the
    session's wheelhouses, venvs and module-scoped repositories included."""
    # TMPDIR as short as a machine's own (/tmp/eg-…): the demo's screens show paths in it at
    # 80 columns, and a path is never broken (output/layout.py)
    tmp = Path(tempfile.mkdtemp(prefix="eg-"))
    try:
        with pytest.MonkeyPatch.context() as mp:
            yield isolate(mp, tmp_path_factory.mktemp("machine"), tmp=tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="session")
def uv_cache(session_isolation: dict[str, Path]) -> Path:
    """The session's one uv cache, shared by its tests: never the user's (which may hold
    index pages from earlier online runs)."""
    return session_isolation["uv-cache"]


@pytest.fixture(autouse=True)
def _isolated(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's own working directory and caches, over the session's isolation."""
    base = tmp_path_factory.mktemp("isolated")
    # lockfiles/ and journals land relative to the working directory: never in the checkout
    monkeypatch.chdir(base)
    monkeypatch.setenv("ENVGUARD_CACHE_DIR", str(base / "envguard-cache"))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(base / "inductor"))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(base / "triton"))
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)


def offline_install(house: Path, *reqs: str, uv: str | None = None) -> list[str]:
    """``uv pip install`` of ``reqs`` from a local wheelhouse, never the network."""
    return [
        uv or uv_bin(),
        "pip",
        "install",
        "--offline",
        "--no-index",
        "--find-links",
        str(house),
        *reqs,
    ]


def make_venv(path: Path) -> Path:
    subprocess.run([uv_bin(), "venv", "--quiet", "--python", sys.executable, str(path)], check=True)
    return path


PipVenv = Callable[[Path], Path]


def _files(root: Path) -> dict[Path, tuple[int, int, int]]:
    """Each regular file under ``root``: (inode, size, mtime)."""
    found = {}
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            st = path.stat()
            found[path] = (st.st_ino, st.st_size, st.st_mtime_ns)
    return found


def _link(source: str, target: str) -> None:
    """A hard link, or a copy where ``target`` is on another file system."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


@pytest.fixture(scope="session")
def pip_venv_at(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PipVenv]:
    """``python -m venv DEST`` (a venv with ensurepip's pip), as a call: ``pip_venv_at(dest)``.

    ensurepip takes 3 s a venv; this makes one per session and copies it. A copy names its
    template in pip's shebangs, the activate scripts (the prompt too) and pyvenv.cfg: those are
    rewritten to ``dest``, so that pip there installs into ``dest`` and activate says its name,
    as in a venv made there. The other 1,600 files (pip's, setuptools') are hard links to the
    template's (a copy of them took 0.4 s): installs and uninstalls replace or unlink files,
    never write into one, and the session ends in an error if a test changed one anyway."""
    template = tmp_path_factory.mktemp("pip-venv") / "envguard-tests-pip-venv-template"
    made: dict[Path, tuple[int, int, int]] = {}

    def at(dest: Path) -> Path:
        if not template.exists():
            subprocess.run([sys.executable, "-m", "venv", str(template)], check=True)
            made.update(_files(template))
        shutil.copytree(template, dest, symlinks=True, copy_function=_link)
        for path in [dest / "pyvenv.cfg", *(dest / "bin").iterdir()]:
            if path.is_file() and not path.is_symlink():  # a file of its own, the paths its own
                data = path.read_bytes()
                data = data.replace(str(template).encode(), str(dest).encode())
                mode = path.stat().st_mode
                path.unlink()
                path.write_bytes(data.replace(template.name.encode(), dest.name.encode()))
                path.chmod(mode)
        return dest

    yield at
    if made:
        assert _files(template) == made, "a test wrote into a file the pip venvs share"


def uv_install(venv: Path, wheelhouse: Path, *reqs: str) -> None:
    python = str(venv / "bin" / "python")
    subprocess.run(offline_install(wheelhouse, "--quiet", "--python", python, *reqs), check=True)


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if done.returncode != 0:  # git's own words, not only its exit status
        raise AssertionError(f"git {' '.join(args)} exited {done.returncode}: {done.stderr}")
    return done.stdout


@pytest.fixture
def fixture_dir() -> Path:
    if not FIXTURES.is_dir():
        pytest.skip(f"shared fixtures not found at {FIXTURES}")
    return FIXTURES


@pytest.fixture
def inductor_cache(tmp_path: Path, fixture_dir: Path) -> Path:
    """The real TorchInductor cache from the H200 (108 files, 11.3 MB)."""
    with tarfile.open(fixture_dir / "inductor_cache.tgz") as tar:
        tar.extractall(tmp_path / "cache", filter="data")
    return tmp_path / "cache" / "probe_inductor"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "train"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "dflash_model.py").write_text("def forward(x):\n    return x\n")
    (root / "train.py").write_text("import dflash_model\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "known good")
    return root


@pytest.fixture(scope="session")
def house(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One wheelhouse for the whole session: the known-good set, a tool needing a newer
    torch, and the odd shapes the scenarios need."""
    from envguard.demo import incident
    from envguard.demo.wheels import build_wheel

    root = tmp_path_factory.mktemp("house")
    incident.known_good(root)
    incident.newer_torch(root)
    build_wheel(root, "plainpkg", "2.4")
    build_wheel(root, "plainpkg", "2.4.0")
    build_wheel(root, "plainpkg", "2.5")
    return root


@pytest.fixture(scope="session")
def sglang_house(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What the sglang install brings, on its own: PyPI's torch 2.11.0 (the cu130 build)."""
    from envguard.demo import incident

    root = tmp_path_factory.mktemp("sglang-house")
    incident.sglang_install(root)
    return root


@pytest.fixture(scope="session")
def project_template(tmp_path_factory: pytest.TempPathFactory, house: Path, uv_cache: Path) -> Path:
    """The known-good project's repository and venv, made once a session: ``project`` copies
    it (a git repository and a uv venv made afresh were 0.15 s of each of 300 tests' setup)."""
    from tests.project import project_tree

    return project_tree(tmp_path_factory.mktemp("project-template") / "train", house)


@pytest.fixture
def project(
    tmp_path: Path, house: Path, project_template: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[object]:
    """The known-good training project, the working directory at its root, lock committed."""
    from tests.project import new_project

    proj = new_project(tmp_path, house, template=project_template)
    monkeypatch.chdir(proj.root)
    yield proj


def siblings(venv: Path) -> list[str]:
    """What restore leaves beside the venv: its lock file is removed as it lets go."""
    return sorted(p.name for p in venv.parent.iterdir() if venv.name in p.name)
