"""torch's real build. (Its C++ extensions, Triton and the key ML libraries: :mod:`.libraries`.)"""

from __future__ import annotations

from collections.abc import Iterator

from envguard.drift.areas import ALONE, Context, named
from envguard.drift.report import Change
from envguard.model import PackageBuild, Snapshot
from envguard.versions import same

AREA = named("torch")


def changes(old: Snapshot, new: Snapshot, context: Context = ALONE) -> Iterator[Change]:
    yield from _torch(old.torch, new.torch)


def _torch(a: PackageBuild | None, b: PackageBuild | None) -> Iterator[Change]:
    if a is None and b is None:
        return
    if a is None or b is None:
        yield AREA.change(
            subject="torch",
            old=a.version if a else "absent",
            new=b.version if b else "absent",
            why="torch was "
            + ("removed" if b is None else "installed")
            + ": training does not run as it did",
        )
        return
    if (
        same(a.version, b.version)
        and _known_equal(a.git_version, b.git_version)
        and (_known_equal(a.debug, b.debug))
    ):
        # an unknown source (most are: pip and uv record none) is no other source
        if a.index_url and b.index_url and a.index_url != b.index_url:
            yield AREA.change(
                severity="info",
                subject="torch",
                old=a.index_url,
                new=b.index_url,
                why="the same build, from another index",
            )
        return
    yield AREA.change(
        subject="torch",
        old=a.version,
        new=b.version,
        why=_torch_why(a, b),
    )


def _known_equal(a: object, b: object) -> bool:
    """Equal, or unknown on either side (a forecast cannot know a build's commit)."""
    return a is None or b is None or a == b


def _torch_why(a: PackageBuild, b: PackageBuild) -> str:
    git_a, git_b = (a.git_version or "")[:7], (b.git_version or "")[:7]
    public_a, public_b = a.version.split("+")[0], b.version.split("+")[0]
    if git_a and git_a == git_b:
        source = f"same source (git {git_a})"
    elif git_a and git_b:
        source = f"another source (git {git_a} → {git_b})"
    elif public_a == public_b:
        source = f"the same release {public_a}"
    else:
        source = "another release"
    build_a, build_b = _build_of(a), _build_of(b)
    if build_a == build_b:
        build = build_a
    elif build_b == "unknown build":
        build = f"{build_a} → unknown"
    else:
        build = f"{build_a} → {build_b.removesuffix(' build').split(' build ')[-1]}"
    if a.debug is not None and b.debug is not None and a.debug != b.debug:
        build += f"; debug {a.debug} → {b.debug}"
    return f"{source}, {build}: compiled kernels in the Inductor cache will not be reused"


def _build_of(build: PackageBuild) -> str:
    if build.cuda:
        return f"CUDA build {build.cuda}"
    if build.hip or build.rocm:
        return f"ROCm build {build.hip or build.rocm}"
    return f"{build.variant} build" if build.variant else "unknown build"
