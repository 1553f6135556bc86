from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envguard import lockfile, snapshot
from envguard.demo.wheels import build_wheel
from envguard.errors import LockfileError
from envguard.model import (
    CodeState,
    CompileCache,
    Distribution,
    GpuInfo,
    GpuState,
    HostInfo,
    PackageBuild,
    PythonInfo,
    Snapshot,
    VenvInfo,
)  # fmt: skip
from tests.conftest import FUZZ_LOCKS, make_venv, uv_install

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=30)
LINE = st.text(
    st.characters(exclude_categories=("Cs",), exclude_characters="\n\r\x00"), max_size=30
)
NAME = st.from_regex(r"[a-z][a-z0-9-]{0,15}[a-z0-9]", fullmatch=True)
VERSION = st.from_regex(
    r"[0-9]{1,3}(\.[0-9]{1,3}){0,3}(\.dev[0-9])?(\+[a-z0-9]{1,6})?", fullmatch=True
)
# a file: URL names an absolute path (#23)
URL = st.from_regex(
    r"(https|git\+https)://[a-z0-9./_-]{1,30}|file:///[a-z0-9./_-]{0,30}", fullmatch=True
)
PATH = st.from_regex(r"/[a-z0-9/._-]{0,30}", fullmatch=True)
SHA = st.sampled_from(["", "0" * 40, "f" * 64])
INT = st.integers(0, 2**62)

DISTS = st.lists(
    st.builds(
        Distribution,
        name=NAME,
        version=VERSION,
        installer=TEXT,
        requested=st.booleans(),
        installed_at=TEXT,
        direct_url=st.none() | URL,
        requires=st.tuples(LINE, LINE),
        problem=st.none() | TEXT,
    ),
    max_size=4,
)
SNAPSHOTS = st.builds(
    Snapshot,
    name=TEXT,
    taken_at=TEXT,
    envguard_version=TEXT,
    venv=st.builds(
        VenvInfo,
        path=PATH,
        kind=TEXT,
        creator=st.none() | TEXT,
    ),
    python=st.builds(
        PythonInfo,
        version=st.from_regex(r"3\.[0-9]{1,2}\.[0-9]{1,2}", fullmatch=True),
        implementation=TEXT,
        abi=TEXT,
        site_packages=TEXT,
    ),
    host=st.builds(
        HostInfo, hostname=TEXT, os=TEXT, kernel=TEXT, machine=TEXT, cpu_count=INT, memory_bytes=INT
    ),
    torch=st.none()
    | st.builds(
        PackageBuild,
        name=NAME,
        version=VERSION,
        metadata_version=TEXT,
        variant=st.sampled_from(["", "cu128", "cpu", "rocm6.4", "xpu"]),
        index_url=URL,
        source=TEXT,
        debug=st.none() | st.booleans(),
    ),
    gpu=st.builds(
        GpuState,
        driver=st.none() | TEXT,
        gpus=st.tuples(st.builds(GpuInfo, index=INT, name=TEXT, memory_mib=INT)),
    ),
    caches=st.tuples(
        st.builds(
            CompileCache,
            kind=TEXT,
            path=TEXT,
            exists=st.booleans(),
            counts=st.dictionaries(NAME, INT, max_size=3),
        )
    ),
    code=st.none()
    | st.builds(
        CodeState, root=PATH, head=SHA, patch=st.text(st.characters(exclude_categories=("Cs",)))
    ),
    environ=st.dictionaries(st.from_regex(r"[A-Z_]{1,12}", fullmatch=True), TEXT, max_size=4),
    warnings=st.tuples(TEXT),
    packages=DISTS.map(tuple),
)


@pytest.mark.slow
@given(SNAPSHOTS)  # the profile's count: 100 (ci), 1,000 (thorough); 3 s at 150
def test_round_trip(snap: Snapshot) -> None:
    assert lockfile.loads(lockfile.dumps(snap)) == snap


def test_resnapshot_changes_only_the_timestamp(tmp_path: Path, repo: Path) -> None:
    env = make_venv(tmp_path / "venv")
    house = tmp_path / "house"
    build_wheel(house, "numpy", "2.3.0")
    uv_install(env, house, "numpy")
    (repo / "train.py").write_text("changed\n")
    first = lockfile.dumps(snapshot.take(env, repo=repo))
    second = lockfile.dumps(snapshot.take(env, repo=repo))
    a, b = first.decode().splitlines(), second.decode().splitlines()
    different = [(x, y) for x, y in zip(a, b, strict=True) if x != y]
    # the time, and the seal that hashes it
    timed = ("taken_at = ", "# envguard seal: sha256=")
    assert len(different) <= 2 and all(x.startswith(timed) for x, _ in different)


def test_write_is_atomic_and_leaves_no_temp(tmp_path: Path, monkeypatch) -> None:
    snap = lockfile.loads(
        b'schema = 1\nname = "a"\ntaken_at = "t"\nenvguard_version = "0"\n'
        b'[venv]\npath = "/v"\nkind = "venv"\n[python]\nversion = "3.12.3"\n'
        b'implementation = "cpython"\nabi = "cp312"\nsite_packages = "/s"\n'
        b'[host]\nhostname = "h"\nos = "o"\nkernel = "k"\nmachine = "m"\n'
    )
    target = tmp_path / "lockfiles" / "a.envguard.toml"
    lockfile.write(target, snap)
    good = target.read_bytes()

    def boom(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("os.fsync", boom)
    with pytest.raises(LockfileError, match="No space left"):
        lockfile.write(target, snap)
    assert target.read_bytes() == good
    assert [p.name for p in target.parent.iterdir()] == ["a.envguard.toml"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty file"),
        (b"\x89PNG\r\n\x1a\n\x00\x00", "not UTF-8"),
        (b"[[packages]\nname = ", "not valid TOML"),
        (b'name = "x"\n', "no integer 'schema'"),
        (b"schema = 99\n", "schema 99, this envguard reads up to 4; upgrade envguard"),
        (b'schema = 1\nname = "x"\n', "taken_at: missing"),
    ],
)
def test_bad_lockfiles(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.envguard.toml"
    path.write_bytes(content)
    with pytest.raises(LockfileError, match=message):
        lockfile.read(path)


def test_truncated_real_lockfile_names_the_problem(tmp_path: Path) -> None:
    """Cut inside a value (half-way, moved into the next quoted string: where the cut fell
    decided before, and one in thirty fell between two lines)."""
    env = make_venv(tmp_path / "venv")
    data = lockfile.dumps(snapshot.take(env, default_caches=False))
    path = tmp_path / "t.envguard.toml"
    path.write_bytes(data[: data.index(b' = "', len(data) // 2) + 5])
    with pytest.raises(LockfileError):
        lockfile.read(path)


def test_a_lockfile_cut_at_any_line_boundary_is_refused(tmp_path: Path) -> None:
    env = make_venv(tmp_path / "venv")
    (env / "lib").mkdir(exist_ok=True)
    data = lockfile.dumps(snapshot.take(env, default_caches=False))
    lines = data.splitlines(keepends=True)
    assert len(lines) > 20
    for n in range(1, len(lines)):  # every cut that leaves something, the seal line itself too
        cut = b"".join(lines[:n])
        with pytest.raises(LockfileError) as caught:
            lockfile.loads(cut, source="lock", remember=False)
        said = str(caught.value)
        assert len(said.splitlines()) == 1 and said.startswith("lock: "), (n, said)
        assert "cut short" in said, (n, said)
    # the whole lock reads, and names what a cut lacks against what its first line counts
    lock = lockfile.loads(data, remember=False)
    at = data.index(b"\n[environ]") + 1
    with pytest.raises(LockfileError, match=r"cut short .*: it lacks its environ"):
        lockfile.loads(data[:at], source="lock", remember=False)
    assert lock.venv.path == str(env.resolve())


def test_a_sealed_lock_reads_through_line_ends_git_may_turn(tmp_path: Path) -> None:
    env = make_venv(tmp_path / "venv")
    data = lockfile.dumps(snapshot.take(env, default_caches=False))
    assert lockfile.loads(data.replace(b"\n", b"\r\n"), remember=False) == lockfile.loads(
        data, remember=False
    )
    assert lockfile.loads(data.rstrip(b"\n"), remember=False).name  # no final newline
    # a comment of the user's, anywhere, is no change of what the lock holds
    noted = data.replace(b"\n[venv]\n", b"\n# the venv we train in\n[venv]\n") + b"# note\n"
    assert lockfile.loads(noted, remember=False) == lockfile.loads(data, remember=False)


def test_a_sealed_lock_changed_since_is_refused_and_older_locks_still_read(
    tmp_path: Path,
) -> None:
    env = make_venv(tmp_path / "venv")
    data = lockfile.dumps(snapshot.take(env, default_caches=False))
    edited = data.replace(b'name = "', b'name = "x', 1)
    with pytest.raises(LockfileError, match=r"lock: changed since envguard wrote it"):
        lockfile.loads(edited, source="lock", remember=False)
    # its first and last lines gone, it reads as a lock of before the seal: as edited
    unsealed = b"".join(edited.splitlines(keepends=True)[1:-1])
    assert lockfile.loads(unsealed, remember=False).name.startswith("x")
    # sealing it again makes it whole; a TOML reader ignores the seal either way
    assert lockfile.loads(lockfile.seal(edited), remember=False).name.startswith("x")
    assert tomllib.loads(data.decode())["schema"] == tomllib.loads(unsealed.decode())["schema"]


def test_field_path_in_errors(tmp_path: Path) -> None:
    env = make_venv(tmp_path / "venv")
    doc = tomllib.loads(lockfile.dumps(snapshot.take(env, default_caches=False)).decode())
    doc["packages"] = [{"name": 12, "version": "1"}]
    with pytest.raises(
        LockfileError, match=r"lock\.packages\[0\]\.name: expected a string, got 12"
    ):
        lockfile.loads(tomli_w.dumps(doc).encode(), source="lock")
    doc["packages"] = [{"name": "a", "version": "1", "colour": "red"}]
    with pytest.raises(LockfileError, match=r"packages\[0\]\.colour: unknown field"):
        lockfile.loads(tomli_w.dumps(doc).encode(), source="lock")


def test_missing_lockfile(tmp_path: Path) -> None:
    with pytest.raises(LockfileError, match="no such lockfile"):
        lockfile.read(tmp_path / "nope.toml")
    with pytest.raises(LockfileError, match="is a directory"):
        lockfile.read(tmp_path)


def test_default_path_is_safe() -> None:
    assert lockfile.default_path("train") == Path("lockfiles/train.envguard.toml")
    assert lockfile.default_path("../../etc/passwd").parent == Path("lockfiles")


# Hostile input: whatever the bytes, the reader answers with a Snapshot or a LockfileError
# naming the problem, never another exception (a traceback) and never a long stall.
_SCALAR = st.one_of(
    st.text(max_size=40), st.integers(), st.booleans(), st.floats(allow_nan=False),
    st.just("x" * 2_000), st.just("1.0\n--find-links /evil"),
)  # fmt: skip
_VALUE = st.recursive(
    _SCALAR,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(NAME, inner, max_size=4),
    max_leaves=12,
)
_KEYS = st.sampled_from(
    ["name", "taken_at", "envguard_version", "venv", "python", "host", "torch", "packages",
     "code", "caches", "environ", "warnings", "inherited", "launcher", "gpu", "cuda"]
)  # fmt: skip


def _valid_doc() -> dict:
    from tests.factories import base

    global _VALID
    if not _VALID:
        _VALID.update(tomllib.loads(lockfile.dumps(base()).decode()))
    return dict(_VALID)


_VALID: dict = {}


@settings(
    max_examples=FUZZ_LOCKS, deadline=None, database=None, suppress_health_check=list(HealthCheck)
)
@given(
    st.one_of(
        st.binary(max_size=200),
        st.dictionaries(_KEYS, _VALUE, max_size=6),
        st.tuples(_KEYS, _VALUE).map(lambda kv: {**_valid_doc(), kv[0]: kv[1]}),
        st.integers(1, 600).map(lambda depth: "x = " + "[" * depth + "]" * depth),
    )
)
@pytest.mark.slow
def test_ten_thousand_hostile_lockfiles(doc: object) -> None:
    """300 hostile documents by default (about 2 s); the full ten thousand with
    ``ENVGUARD_FUZZ_LOCKS=10000`` (or ``HYPOTHESIS_PROFILE=thorough``), about a minute on 2
    cores, before a release or after a change to the reader."""
    if isinstance(doc, bytes):
        data = doc
    elif isinstance(doc, str):
        data = f"schema = 2\n{doc}\n".encode()
    else:
        try:
            data = tomli_w.dumps({"schema": 2, **doc}).encode()
        except (TypeError, ValueError):
            return  # not expressible in TOML: nothing to read
    try:
        lockfile.loads(data)
    except LockfileError as exc:
        assert "\n" not in str(exc).strip() or len(str(exc)) < 2000


def test_a_100_kb_package_name_is_refused_at_once(tmp_path: Path) -> None:
    import time

    doc = _valid_doc()
    doc["packages"][0]["name"] = "a" * 100_000
    start = time.perf_counter()
    with pytest.raises(LockfileError, match=r"packages\[0\]\.name: 'aaaa.*100000 characters"):
        lockfile.loads(tomli_w.dumps(doc).encode())
    assert time.perf_counter() - start < 2.0


def test_a_pipe_or_device_is_written_through_never_replaced(tmp_path: Path) -> None:
    """``-o /dev/null`` or ``-o /dev/stdout``: a rename over a device, as root, would leave a
    regular file at /dev/null for every program after. A FIFO stands in for the device here."""
    import threading

    from envguard._fs import atomic_write

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    atomic_write(fifo, b"lock\n")
    reader.join(timeout=10)
    assert got == [b"lock\n"]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)  # still the pipe
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]  # no temp file left


def test_a_symlinked_lockfile_keeps_its_link(tmp_path: Path) -> None:
    from envguard._fs import atomic_write

    shared = tmp_path / "shared" / "train.envguard.toml"
    shared.parent.mkdir()
    shared.write_bytes(b"old\n")
    link = tmp_path / "lockfiles" / "train.envguard.toml"
    link.parent.mkdir()
    link.symlink_to(shared)
    atomic_write(link, b"new\n")
    assert link.is_symlink() and shared.read_bytes() == b"new\n"
    with pytest.raises(IsADirectoryError):
        atomic_write(tmp_path / "shared", b"x")


def test_a_large_lockfile_is_parsed_once_and_remembered_by_its_content(
    tmp_path: Path, monkeypatch
) -> None:
    """TOML read in Python is most of a big diff's cost: the parsed document is kept under the
    bytes' hash, so a second read of the same bytes skips it, and changed bytes never match."""
    import tomllib

    snap = lockfile.loads(
        b'schema = 2\nname = "a"\ntaken_at = "t"\nenvguard_version = "0"\n'
        b'[venv]\npath = "/v"\nkind = "venv"\n[python]\nversion = "3.12.3"\n'
        b'implementation = "cpython"\nabi = "cp312"\nsite_packages = "/s"\n'
        b'[host]\nhostname = "h"\nos = "o"\nkernel = "k"\nmachine = "m"\n'
    )
    from dataclasses import replace

    from envguard.model import Distribution

    many = tuple(
        Distribution(name=f"pkg-{i:04d}", version="1.0", installer="uv", requires=("a>=1",))
        for i in range(400)
    )
    data = lockfile.dumps(replace(snap, packages=many))
    assert len(data) >= lockfile._REMEMBER_FROM
    first = lockfile.loads(data)
    changed = lockfile.seal(data.replace(b'name = "pkg-0001"', b'name = "pkg-0001x"'))
    parses: list[int] = []
    real = tomllib.loads
    monkeypatch.setattr(tomllib, "loads", lambda text: parses.append(1) or real(text))
    assert lockfile.loads(data) == first and parses == []  # remembered
    assert lockfile.loads(changed).packages[1].name == "pkg-0001x" and parses == [1]
    remembered = Path(os.environ["ENVGUARD_CACHE_DIR"]) / "parsed"
    for damaged in remembered.glob("*.json"):
        damaged.write_text("{")
    assert lockfile.loads(data) == first and len(parses) == 2  # damaged: read again
    monkeypatch.setattr(lockfile, "_REMEMBERED", 1)
    lockfile.loads(changed)
    assert len(list(remembered.glob("*.json"))) == 1
