"""What is wrong inside one snapshot, whatever it is compared with: a venv that cannot start,
a torchvision built for another CUDA than torch, two installs of one package, a compile
cache its own venv will not reuse.

``snapshot`` records these as warnings; ``diff`` reports the ones the lock did not have.
"""

from __future__ import annotations

from collections.abc import Iterator

from envguard import catalog, compat
from envguard.drift.areas import named
from envguard.drift.report import Change, cache_label
from envguard.model import Snapshot

# the registry's areas, of their default severities: a name it lacks fails here, on import
_PYTHON, _LIBRARIES, _PACKAGES, _CACHES = map(named, ("python", "libraries", "packages", "caches"))


def findings(snap: Snapshot) -> list[Change]:
    return [*_venv(snap), *_extensions(snap), *_duplicates(snap), *_caches(snap)]


def _venv(snap: Snapshot) -> Iterator[Change]:
    if snap.venv.problem:
        yield _PYTHON.change(
            subject="interpreter",
            new="cannot start",
            why=f"the venv cannot start: {snap.venv.problem}",
        )


def _extensions(snap: Snapshot) -> Iterator[Change]:
    torch = snap.torch
    if torch is None or not torch.variant:
        return
    for build in snap.torch_family:
        if build.name not in catalog.TORCH_EXTENSIONS or not build.variant:
            continue
        if build.variant != torch.variant:
            yield _LIBRARIES.change(
                subject=build.name,
                old=f"torch {torch.variant}",
                new=f"{build.name} {build.variant}",
                why=(
                    f"{build.name} {build.version} is built for {build.variant} while torch "
                    f"{torch.version} is {torch.variant}: its C++ ops may fail to load"
                ),
            )


def _duplicates(snap: Snapshot) -> Iterator[Change]:
    for dist in snap.packages:
        if dist.duplicates:
            yield _PACKAGES.change(
                subject=dist.name,
                new=f"{1 + len(dist.duplicates)} installs",
                why=(
                    f"{dist.name} is installed twice ({', '.join(dist.duplicates)} beside "
                    f"{dist.version}): which copy Python imports depends on file order"
                ),
            )


def _caches(snap: Snapshot) -> Iterator[Change]:
    for cache in snap.caches:
        if not (cache.exists and cache.entries):
            continue
        why = compat.mismatches(cache.compat, snap)
        if why:
            yield _CACHES.change(
                subject=cache_label(cache.kind, cache.path),
                new="built for another stack",
                why=f"{'; '.join(why)}: its entries will not be reused",
            )
