from __future__ import annotations

import dataclasses
import inspect

import pytest

from envguard import drift
from envguard.drift import areas, packages
from envguard.model import (
    ChangedFile,
    CodeState,
    CompileCache,
    CudaLibrary,
    GpuInfo,
    GpuState,
    Snapshot,
    VenvInfo,
)
from tests.factories import base, dist, inductor, torch_build


def _only(report: drift.DriftReport, subject: str) -> drift.Change:
    found = [c for c in report.changes if c.subject == subject]
    assert len(found) == 1, [c.subject for c in report.changes]
    return found[0]


def test_identical_snapshots_have_no_drift() -> None:
    report = drift.compare(base(), base(taken_at="2026-11-29T10:00:00Z"))
    assert report.changes == () and not report.fails("any")


def test_variant_swap_same_source() -> None:
    new = base(torch=torch_build("2.11.0+cu130", "13.0"))
    c = _only(drift.compare(base(), new), "torch")
    assert c.severity == "critical"
    assert c.why == (
        "same source (git 70d99e9), CUDA build 12.8 → 13.0: compiled kernels in "
        "the Inductor cache will not be reused"
    )


def test_new_release_other_source() -> None:
    new = base(torch=torch_build("2.12.0+cu128", "12.8", git="b" * 40))
    c = _only(drift.compare(base(), new), "torch")
    assert c.why.startswith("another source (git 70d99e9 → bbbbbbb), CUDA build 12.8:")


def test_torch_removed() -> None:
    c = _only(drift.compare(base(), base(torch=None)), "torch")
    assert (c.severity, c.new) == ("critical", "absent")


@pytest.mark.parametrize(
    ("old", "new", "why"),
    [("3.12.3", "3.12.8", "a patch release"), ("3.12.3", "3.13.0", "another interpreter ABI")],
)
def test_python(old: str, new: str, why: str) -> None:
    py = base().python
    a = base(python=dataclasses.replace(py, version=old))
    b = base(python=dataclasses.replace(py, version=new, abi="cp" + new.replace(".", "")[:3]))
    change = _only(drift.compare(a, b), "Python")
    assert change.severity == "critical" and change.why.startswith(why)


@pytest.mark.parametrize(
    ("part", "new", "severity"),
    [
        ("runtime", "13.0", "critical"),
        ("runtime", "12.9", "warning"),
        ("cudnn", "10.0.0", "critical"),
        ("cudnn", "9.19.0", "warning"),
        ("nccl", "2.28.9", "warning"),
        ("nccl", "3.0.0", "critical"),
    ],
)
def test_cuda_major_is_critical(part: str, new: str, severity: str) -> None:
    lib = getattr(base().cuda, part)
    cuda = dataclasses.replace(base().cuda, **{part: dataclasses.replace(lib, version=new)})
    report = drift.compare(base(), base(cuda=cuda))
    assert [c.severity for c in report.changes] == [severity]


def test_key_library_is_a_warning_with_a_reason() -> None:
    new = base(
        key_libraries={"torch": "2.11.0+cu128", "transformers": "5.8.1"},
        packages=(
            dist("torch", "2.11.0+cu128"),
            dist("transformers", "5.8.1"),
            dist("numpy", "2.3.0"),
        ),
    )
    report = drift.compare(base(), new)
    c = _only(report, "transformers")
    assert (c.severity, c.old, c.new) == ("warning", "5.6.0", "5.8.1")
    assert "attention" in c.why
    assert len(report.changes) == 1  # not reported again as a plain package


def test_packages_added_together_are_grouped_under_their_root() -> None:
    t = "2026-11-28T14:02:{:02d}Z"
    deps = tuple(dist(f"dep-{i}", "1.0", at=t.format(i)) for i in range(5))
    sglang = dist("sglang", "0.5.23", at=t.format(9), requires=tuple(d.name for d in deps))
    late = dist("pytest", "9.0", at="2026-11-28T18:00:00Z")
    new = base(
        packages=(*base().packages, *deps, sglang, late),
        key_libraries={**base().key_libraries, "sglang": "0.5.23"},
    )
    report = drift.compare(base(), new)
    group = next(c for c in report.changes if c.members)
    assert group.why == (
        "sglang 0.5.23 and the 5 packages it brought (5 added) at 2026-11-28 14:02:00"
    )
    assert group.members[-1] == drift.Member(name="sglang", old="absent", new="0.5.23")
    assert _only(report, "pytest").why == "new package on the import path"
    assert _only(report, "sglang").severity == "warning"


def test_removed_packages() -> None:
    new = base(packages=base().packages[:2])
    c = _only(drift.compare(base(), new), "numpy")
    assert (c.old, c.new, c.severity) == ("2.3.0", "absent", "warning")


def _ext(files: int, size: int, fp: str = "x1") -> CompileCache:
    """A custom cache (``snapshot --cache-dir``): torch's JIT-built extensions, files none of
    which is an Inductor or Triton entry."""
    return CompileCache(kind="custom", path="/scratch/ext", exists=files > 0, files=files,
                        bytes=size, entries=0, fingerprint=fp)  # fmt: skip


@pytest.mark.parametrize(
    ("now", "new", "severity", "why"),
    [
        (_ext(0, 0), "gone", "warning",
         "cache /scratch/ext is gone: cold, what it held is built again when used"),
        (_ext(3, 40_000_000, "x2"), "3 files / 40 MB", "warning",
         "shrunk: what went is built again"),
        (_ext(9, 130_000_000, "x3"), "9 files / 130 MB", "info",
         "grew: written since the snapshot"),
    ],
)  # fmt: skip
def test_a_custom_cache_is_read_by_its_files(
    now: CompileCache, new: str, severity: str, why: str
) -> None:
    """Its files are what it holds: counted by Inductor's entries (none), the cache read
    empty when full, and its going was never said."""
    before = base(caches=(_ext(8, 120_000_000),))
    c = _only(drift.compare(before, base(caches=(now,))), "cache /scratch/ext")
    assert (c.old, c.new, c.severity, c.why) == ("8 files / 120 MB", new, severity, why)


def test_cache_cold_shrunk_grown_and_incompatible() -> None:
    cold = drift.compare(base(), base(caches=(inductor(entries=0, size=0),)))
    c = _only(cold, "Inductor cache")
    assert (c.old, c.new) == ("285 entries / 353 MB", "gone")
    assert c.why == "Inductor cache is gone: cold, the first steps will recompile"
    shrunk = _only(
        drift.compare(base(), base(caches=(inductor(120, 100_000_000, "f2"),))), "Inductor cache"
    )
    assert shrunk.severity == "warning" and "shrunk" in shrunk.why
    grew = _only(
        drift.compare(base(), base(caches=(inductor(300, 360_000_000, "f3"),))), "Inductor cache"
    )
    assert grew.severity == "info"
    # the cache says it was built by cu130 while the venv runs cu128: a finding the lock lacked
    other = drift.compare(base(), base(caches=(inductor(torch=("2.11.0+cu130",), cuda=("13.0",)),)))
    c = _only(other, "Inductor cache")
    assert c.severity == "warning"
    assert c.why == (
        "torch 2.11.0+cu130 (cache) vs 2.11.0+cu128 (here); CUDA 13.0 (cache) vs 12.8 (here): "
        "its entries will not be reused"
    )


def test_code_changes() -> None:
    code = base().code
    assert code is not None
    dirty = dataclasses.replace(
        code,
        dirty=True,
        patch_sha256="p1",
        changed=(ChangedFile(path="dflash_model.py", added=12, removed=0, sha256="s1"),),
    )
    report = drift.compare(base(), base(code=dirty))
    c = _only(report, "dflash_model.py")
    assert (c.severity, c.why) == (
        "critical",
        "dflash_model.py has an uncommitted change not in the snapshot (+12 −0)",
    )
    back = _only(drift.compare(base(code=dirty), base()), "dflash_model.py")
    assert "is gone" in back.why
    moved = _only(
        drift.compare(base(), base(code=dataclasses.replace(code, head="b" * 40))), "git HEAD"
    )
    assert moved.severity == "critical" and moved.new == "bbbbbbbbbbbb on main"


def test_env_vars_and_host() -> None:
    new = base(
        environ={"NCCL_DEBUG": "INFO", "NCCL_ALGO": "Tree", "UV_INDEX_URL": "https://x"},
        host=dataclasses.replace(base().host, hostname="gpu-02"),
    )
    report = drift.compare(base(), new)
    assert _only(report, "NCCL_ALGO").severity == "warning"
    assert _only(report, "NCCL_DEBUG").severity == "info"  # it only logs
    assert _only(report, "UV_INDEX_URL").severity == "info"
    assert _only(report, "hostname").severity == "info"


def test_gpu_and_driver() -> None:
    h100 = GpuState(
        driver="570.1",
        source="nvml",
        gpus=(GpuInfo(index=0, name="NVIDIA H100", uuid="GPU-9", compute_capability="9.0"),),
    )
    report = drift.compare(base(), base(gpu=h100))
    assert _only(report, "GPUs").severity == "warning"
    assert _only(report, "NVIDIA driver").old == "580.159.04"


def test_ordering_and_fail_on() -> None:
    new = base(
        torch=torch_build("2.11.0+cu130", "13.0"),
        environ={"NCCL_DEBUG": "WARN", "NCCL_ALGO": "Ring"},
        host=dataclasses.replace(base().host, hostname="gpu-02"),
    )
    report = drift.compare(base(), new)
    # torch; the cache built for cu128 no longer fits; NCCL_ALGO set; the host
    assert [(c.severity, c.area) for c in report.changes] == [
        ("critical", "torch"),
        ("warning", "caches"),
        ("warning", "env"),
        ("info", "host"),
    ]
    assert report.counts() == {"critical": 1, "warning": 2, "info": 1}
    info_only = drift.compare(base(), base(host=new.host))
    assert not info_only.fails("warning") and not info_only.fails("critical")
    assert info_only.fails("any")


def test_report_is_pure() -> None:
    a, b = base(), base(torch=torch_build("2.11.0+cu130", "13.0"))
    assert drift.compare(a, b) == drift.compare(a, b)
    assert a == base()  # inputs untouched


def test_cache_moved_is_named_even_when_the_new_place_is_empty() -> None:
    moved = dataclasses.replace(inductor(entries=0, size=0), path="/elsewhere")
    report = drift.compare(base(), base(caches=(moved,)))
    whys = [c.why for c in report.changes]
    assert whys[0] == "the cache folder moved; entries under the old path are not used"
    assert "cold" in whys[1]


def _everywhere() -> tuple[Snapshot, Snapshot]:
    """Two snapshots apart in every area."""
    old = base(venv=VenvInfo(path="/data/venv", kind="venv", system_site_packages=True),
               inherited=(dist("six", "1.16.0"),))  # fmt: skip
    new = dataclasses.replace(
        old,
        python=dataclasses.replace(old.python, version="3.13.1", abi="cp313"),
        torch=torch_build("2.11.0+cu130", "13.0"),
        cuda=dataclasses.replace(
            old.cuda, cudnn=CudaLibrary(name="cudnn", version="9.19.0", source="h")
        ),
        gpu=dataclasses.replace(old.gpu, driver="590.1"),
        code=CodeState(root="/src/train", head="b" * 40, branch="main"),
        caches=(inductor(entries=0),),
        key_libraries={**old.key_libraries, "transformers": "5.8.1"},
        packages=(*old.packages, dist("rich", "15.0.0")),
        inherited=(dist("six", "1.17.0"),),
        environ={"NCCL_DEBUG": "WARN", "NCCL_ALGO": "Tree"},
        host=dataclasses.replace(old.host, hostname="gpu-02"),
    )
    return old, new


def test_a_change_is_built_by_its_registered_area() -> None:
    """Changes come from ``areas.named(NAME).change(...)``, never ``Change(area=NAME)`` by hand:
    a name the registry lacks fails when its module loads, not in a report that ``--only``
    then filters wrong; the areas a venv determines are registered ones (#22 item 3)."""
    import re
    from pathlib import Path

    import envguard

    root = Path(envguard.__file__).parent
    by_hand = [
        str(p.relative_to(root))
        for p in root.rglob("*.py")
        if p != root / "drift" / "areas.py"
        and re.search(r"(?<!class )\bChange\(", p.read_text("utf-8"))
    ]
    assert by_hand == []
    with pytest.raises(KeyError):
        areas.named("library")
    assert set(drift.VENV_AREAS) < set(drift.AREAS)


def test_one_table_of_areas_their_rules_and_severities() -> None:
    """Each area's rule is its module's ``changes(old, new, context)``, one signature for all,
    and yields that area's changes alone; compare() is the rules' changes, ordered; the names,
    the thresholds and the CLI's help are the table's (#22)."""
    from envguard import cli, config

    assert drift.AREAS == config.AREAS == tuple(a.name for a in areas.ALL)
    assert drift.FAIL_ON == config.FAIL_ON == ("critical", "warning", "any")
    assert ", ".join(drift.AREAS) == cli._AREAS
    old, new = _everywhere()
    moved = packages.delta(old, new)
    found = []
    for area in areas.ALL:
        rule = area.rule()
        assert list(inspect.signature(rule).parameters) == ["old", "new", "context"]
        mine = list(rule(old, new, areas.Context(moved=moved)))
        assert mine and {c.area for c in mine} == {area.name}, area.name
        assert any(c.severity == area.severity for c in mine), area.name
        found += mine
    report = drift.compare(old, new)
    assert {c.area for c in report.changes} == set(drift.AREAS)
    assert sorted(map(_key, found)) == sorted(map(_key, report.changes))


def _key(c: drift.Change) -> tuple[str, str, str]:
    return c.area, c.subject, c.why


# --- major moves of the ML stack stand out (#32 item 2) ------------------------------------

AT = "2026-11-30T13:42:50Z"


def _upgrade(hub: str, numpy: str = "2.3.0") -> drift.DriftReport:
    """transformers 5.6.0 → 5.8.1 in one install, bringing huggingface-hub ``hub`` (from
    0.36.2) and a helper, numpy moved to ``numpy`` beside it."""
    old = base(packages=(*base().packages, dist("huggingface-hub", "0.36.2")),
               key_libraries={**base().key_libraries, "numpy": "2.3.0"})  # fmt: skip
    kept = [d for d in base().packages if d.name not in ("transformers", "numpy")]
    new = base(
        packages=(*kept,
                  dist("transformers", "5.8.1", AT, requires=(f"huggingface-hub>={hub}",)),
                  dist("huggingface-hub", hub, AT, requires=("hf-xet",)),
                  dist("hf-xet", "1.2.0", AT), dist("numpy", numpy, AT)),
        key_libraries={"torch": "2.11.0+cu128", "transformers": "5.8.1", "numpy": numpy},
    )  # fmt: skip
    return drift.compare(old, new)


def test_a_major_move_under_a_key_library_gets_its_own_row_in_its_group() -> None:
    report = _upgrade("2.4.0")
    hub = _only(report, "huggingface-hub")
    assert (hub.area, hub.severity, hub.old, hub.new) == ("libraries", "warning", "0.36.2", "2.4.0")
    assert hub.why.startswith("major version 0 → 2: what transformers downloads and loads")
    group = next(c for c in report.changes if c.members)  # it still came with that install
    assert "huggingface-hub" in {m.name for m in group.members}


def test_a_minor_move_of_the_same_package_has_no_row_of_its_own() -> None:
    """What must not be reported: the stack moving within a major version is the install's."""
    report = _upgrade("0.36.5")
    assert [c for c in report.changes if c.subject == "huggingface-hub"] == []
    group = next(c for c in report.changes if c.members)
    assert "huggingface-hub" in {m.name for m in group.members}


def test_a_key_librarys_row_says_its_major_move() -> None:
    numpy = _only(_upgrade("0.36.5", numpy="1.26.4"), "numpy")
    assert numpy.why.startswith("major version 2 → 1: numerics and the C ABI")
    same_major = _only(_upgrade("0.36.5", numpy="2.4.0"), "numpy")
    assert same_major.why.startswith("numerics and the C ABI")


def test_a_cache_emptied_or_deleted_reads_one_word() -> None:
    """#32: the same missing cache read "gone" in diff and "empty" in bisect, as a run had
    made its folder again. Folder or not, what it held is gone."""
    for left in (False, True):  # deleted, or emptied in place (rm -rf cache/*)
        cold = dataclasses.replace(inductor(entries=0, size=0), exists=left)
        c = _only(drift.compare(base(), base(caches=(cold,))), "Inductor cache")
        assert (c.new, c.why) == (
            "gone",
            "Inductor cache is gone: cold, the first steps will recompile",
        )
