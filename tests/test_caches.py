from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from envguard.probes import caches


def _expected_counts(manifest: Path) -> Counter[str]:
    """Count the H200 cache's manifest by the documented layout, independently of envguard."""
    counts: Counter[str] = Counter()
    kernels = set()
    for line in manifest.read_text().splitlines():
        rel = line.split(" ", 1)[1]
        top = rel.split("/")[0]
        if top in ("fxgraph", "aotautograd"):
            counts[top] += 1
        elif top == "triton":
            kernels.add(rel.rsplit("/", 1)[0])
        elif rel.endswith(".best_config"):
            counts["autotune"] += 1
        elif rel.endswith(".py"):
            counts["generated_code"] += 1
    counts["triton_kernels"] = len(kernels)
    return counts


def test_real_inductor_cache(inductor_cache: Path, fixture_dir: Path) -> None:
    cache, warnings = caches.probe("inductor", inductor_cache)
    expected = _expected_counts(fixture_dir / "inductor_manifest.txt")
    assert (cache.files, cache.bytes) == (108, 11_300_011)
    for kind in caches.KINDS:
        assert cache.counts.get(kind, 0) == expected[kind], kind
    # what the cache says about itself, against what the H200 venv's torch/version.py says
    version_py = (fixture_dir / "torch_version.py").read_text()
    assert f"__version__ = '{cache.compat.torch[0]}'" in version_py
    assert f"git_version = '{cache.compat.torch_git[0]}'" in version_py
    assert f"cuda: Optional[str] = '{cache.compat.cuda[0]}'" in version_py
    assert len(cache.compat.torch) == len(cache.compat.cuda) == 1
    assert cache.compat.triton == ("3.6.0",)  # the kernels' triton_version
    assert cache.compat.archs == ("sm90",)  # and their arch
    assert cache.compat.gpus == ("NVIDIA H200",)  # the graphs' "GPU Hardware Info"
    assert warnings == ()


def test_fingerprint_is_stable_and_skips_noise(inductor_cache: Path) -> None:
    first, _ = caches.probe("inductor", inductor_cache)
    (inductor_cache / "fxgraph" / "x.lock").write_text("pid")
    (inductor_cache / "tmpab12cd34ef").write_text("half-written")
    (inductor_cache / "__pycache__").mkdir()
    (inductor_cache / "__pycache__" / "m.cpython-312.pyc").write_bytes(b"\0")
    second, _ = caches.probe("inductor", inductor_cache)
    assert second.fingerprint == first.fingerprint and second.files == first.files


def test_content_change_changes_fingerprint(inductor_cache: Path) -> None:
    first, _ = caches.probe("inductor", inductor_cache)
    victim = next(inductor_cache.glob("*/*.best_config"))
    data = victim.read_bytes()
    victim.write_bytes(data[:-1] + (b"X" if data[-1:] != b"X" else b"Y"))  # same size
    os.utime(victim, ns=(1, 1))  # an old mtime, so only the stat key tells it changed
    second, _ = caches.probe("inductor", inductor_cache)
    assert second.fingerprint != first.fingerprint and second.bytes == first.bytes


def test_warm_fingerprint_reads_no_content(inductor_cache: Path, monkeypatch) -> None:
    old = 1_600_000_000_000_000_000  # files older than the racy window are trusted
    for p in inductor_cache.rglob("*"):
        os.utime(p, ns=(old, old))
    cold, _ = caches.probe("inductor", inductor_cache)
    reads: list[str] = []
    real_hash = caches._hash
    monkeypatch.setattr(caches, "_hash", lambda root, e: reads.append(e[0]) or real_hash(root, e))
    warm, _ = caches.probe("inductor", inductor_cache)
    assert reads == [] and warm == cold
    # unchanged since: the last result stands, without even loading the per-file hashes
    monkeypatch.setattr(caches._StatCache, "load", lambda root, started: pytest.fail("loaded"))
    again, _ = caches.probe("inductor", inductor_cache)
    assert again == cold


def test_a_fresh_file_is_hashed_again_until_it_settles(inductor_cache: Path, monkeypatch) -> None:
    """A file written within the racy window may change again in the same mtime tick: neither
    its hash nor the cache's result is kept."""
    cold, _ = caches.probe("inductor", inductor_cache)
    victim = next(inductor_cache.glob("*/*.best_config"))
    victim.write_bytes(victim.read_bytes() + b" ")  # now: inside the racy window
    reads: list[str] = []
    real_hash = caches._hash
    monkeypatch.setattr(caches, "_hash", lambda root, e: reads.append(e[0]) or real_hash(root, e))
    first, _ = caches.probe("inductor", inductor_cache)
    second, _ = caches.probe("inductor", inductor_cache)
    assert reads == [str(victim.relative_to(inductor_cache))] * 2
    assert first == second and first.fingerprint != cold.fingerprint


def test_a_new_file_after_a_warm_pass_is_seen(inductor_cache: Path) -> None:
    cold, _ = caches.probe("inductor", inductor_cache)
    caches.probe("inductor", inductor_cache)
    (inductor_cache / "fxgraph" / "new-entry").write_bytes(b"graph")
    os.utime(inductor_cache / "fxgraph" / "new-entry", ns=(1, 1))
    later, _ = caches.probe("inductor", inductor_cache)
    assert later.files == cold.files + 1 and later.fingerprint != cold.fingerprint


def test_unreadable_file_is_reported_not_fatal(inductor_cache: Path, monkeypatch) -> None:
    real_hash = caches._hash
    monkeypatch.setattr(
        caches,
        "_hash",
        lambda root, e: None if e[0].endswith(".best_config") else real_hash(root, e),
    )
    cache, warnings = caches.probe("inductor", inductor_cache)
    assert cache.unreadable == 3 and cache.files == 105
    assert "3 unreadable" in warnings[0]


def test_missing_cache(tmp_path: Path) -> None:
    cache, _ = caches.probe("inductor", tmp_path / "none")
    assert not cache.exists and cache.entries == 0


def test_triton_cache_layout(tmp_path: Path) -> None:
    for h in ("AAAA", "BBBB"):
        (tmp_path / h).mkdir()
        (tmp_path / h / "k.cubin").write_bytes(b"\x7fELF")
        (tmp_path / h / "k.json").write_text(
            f'{{"arch": 90, "name": "k", "triton_version": "3.{len(h)}.0"}}'
        )
    cache, _ = caches.probe("triton", tmp_path)
    assert cache.counts == {"triton_kernels": 2} and cache.compat.archs == ("sm90",)
    assert cache.compat.triton == ("3.4.0",) and cache.compat.torch == ()


def test_default_paths_follow_torch_and_triton(monkeypatch) -> None:
    env = {"USER": "alice", "HOME": "/home/alice"}
    monkeypatch.setattr(caches, "_user", lambda environ: "alice")
    paths = caches.default_paths(env)
    assert paths["inductor"].name == "torchinductor_alice"
    assert paths["triton"] == Path.home() / ".triton" / "cache"
    paths = caches.default_paths({"TORCHINDUCTOR_CACHE_DIR": "/c/i", "TRITON_CACHE_DIR": "/c/t"})
    assert paths == {"inductor": Path("/c/i"), "triton": Path("/c/t")}


@given(st.text(max_size=12))
def test_skipped_names_match_the_rule(name: str) -> None:
    """The cheap prefilter in front of the regex decides as the rule alone would."""
    rule = (
        name == "__pycache__"
        or name.endswith(caches._SKIP_SUFFIXES)
        or bool(caches._TMP_NAME.match(name))
    )
    assert caches.skipped(name) == rule


@pytest.mark.parametrize("name", ["a.lock", "b.tmp", "__pycache__", "tmpk2j3h4g5", ".hidden"])
def test_skipped_names(name: str) -> None:
    assert caches.skipped(name)
    assert not caches.skipped("fxgraph")


def test_freshness_is_judged_when_the_files_were_looked_at(tmp_path: Path, monkeypatch) -> None:
    """A file written just before the probe stays untrusted even when its hash comes back
    late (a slow file ahead of it, a busy machine): racy is judged against the walk's time."""
    cache = tmp_path / "cache"
    (cache / "fxgraph").mkdir(parents=True)
    (cache / "fxgraph" / "z").write_bytes(b"AAAA")  # now: inside the racy window
    real_time, real_walk = caches.time.time, caches._walk
    walked: list[bool] = []

    class Clock:  # 5 s later once the walk is done: a slow pass before the hashes come back
        @staticmethod
        def time() -> float:
            return real_time() + (5.0 if walked else 0.0)

    def walk(root: Path) -> tuple[list[caches._Entry], int]:
        found = real_walk(root)
        walked.append(True)
        return found

    monkeypatch.setattr(caches, "time", Clock)
    monkeypatch.setattr(caches, "_walk", walk)
    caches.probe("inductor", cache)
    monkeypatch.setattr(caches, "time", __import__("time"))
    monkeypatch.setattr(caches, "_walk", real_walk)
    reads: list[str] = []
    real_hash = caches._hash
    monkeypatch.setattr(caches, "_hash", lambda root, e: reads.append(e[0]) or real_hash(root, e))
    caches.probe("inductor", cache)
    assert reads == ["fxgraph/z"]  # not trusted: read again


@pytest.mark.slow
@pytest.mark.parametrize("files", ["[]", '"x"', "null", "[" * 10_000])
def test_a_damaged_stat_cache_costs_a_re_read_not_the_snapshot(
    inductor_cache: Path, files: str
) -> None:
    cold, _ = caches.probe("inductor", inductor_cache)
    folder = next(Path(os.environ["ENVGUARD_CACHE_DIR"]).glob("statcache"))
    for summary in folder.glob("*.summary.json"):
        summary.write_text(files)
    for rows in folder.glob("*[0-9a-f].json"):
        rows.write_text(f'{{"version": 3, "root": "{inductor_cache}", "files": {files}}}')
    again, warnings = caches.probe("inductor", inductor_cache)
    assert again == cold and warnings == ()


def test_a_kernel_json_nested_beyond_reason_is_no_facts_not_a_crash(tmp_path: Path) -> None:
    (tmp_path / "abc").mkdir()
    (tmp_path / "abc" / "k.json").write_text("[" * 100_000)
    cache, warnings = caches.probe("triton", tmp_path)
    assert cache.files == 1 and cache.compat.archs == () and warnings == ()
