"""What torch build is installed, read from ``torch/version.py`` with ``ast`` (never imported).

PyPI's CUDA wheels say ``Version: 2.11.0`` in METADATA; only ``version.py`` carries ``+cu130``.
The PyTorch index's wheels carry the label in both places: that tells the kind of build, not
where this one came from (the index, or a wheelhouse holding its wheels). Where it came from
is known only when the install recorded it (``direct_url.json``); pip and uv record neither
the index a wheel was resolved from nor a ``--find-links`` folder.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

from envguard import versions
from envguard.model import Distribution, PackageBuild

PYTORCH_INDEX = "https://download.pytorch.org/whl/{variant}"
_VARIANT = re.compile(r"^(cu\d{2,4}|cpu|rocm\d+(\.\d+)*|xpu)$")
_FIELDS = ("__version__", "git_version", "cuda", "hip", "rocm", "xpu", "debug")


def parse_version_file(source: str) -> dict[str, Any]:
    """The literal top-level assignments of a ``version.py``; anything computed is skipped."""
    values: dict[str, Any] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id in _FIELDS:
            try:
                values[target.id] = ast.literal_eval(value)
            except ValueError:
                continue
    return values


def variant_of(version: str, fields: dict[str, Any]) -> str:
    """cu130 / cpu / rocm6.4 / xpu: the local label if it is one, else what the build says."""
    label = versions.local(version)
    if label and _VARIANT.match(label):
        return label
    cuda, hip, xpu = fields.get("cuda"), fields.get("hip") or fields.get("rocm"), fields.get("xpu")
    if isinstance(cuda, str) and cuda:
        return "cu" + "".join(cuda.split(".")[:2])
    if isinstance(hip, str) and hip:
        return "rocm" + ".".join(hip.split(".")[:2])
    if isinstance(xpu, str) and xpu:
        return "xpu"
    return "cpu" if "__version__" in fields else ""


def labelled(metadata_version: str, variant: str) -> bool:
    """A label in METADATA (``2.11.0+cu128``): a build of the PyTorch index, pinned with its
    label and asked of that index; none: a PyPI-like build, pinned as PyPI has it."""
    return bool(versions.local(metadata_version) and variant)


def probe(site: Path, dist: Distribution) -> PackageBuild:
    # pytorch-triton and its kin install the `triton` module; none of them ships a version.py
    module = "triton" if dist.name.endswith("triton") else dist.name.replace("-", "_")
    fields: dict[str, Any] = {}
    try:
        text = (site / module / "version.py").read_text(encoding="utf-8")
        fields = parse_version_file(text)
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        pass
    declared = fields.get("__version__")
    version = declared if isinstance(declared, str) and declared else dist.version
    variant = variant_of(version, fields) if fields or versions.local(version) else ""
    return PackageBuild(
        name=dist.name,
        version=version,
        metadata_version=dist.version,
        variant=variant,
        index_url=dist.direct_url,  # else unknown: a guessed PyPI would be a wrong fact
        source="version.py" if isinstance(declared, str) and declared else "METADATA",
        git_version=_str(fields.get("git_version")),
        cuda=_str(fields.get("cuda")),
        hip=_str(fields.get("hip")),
        rocm=_str(fields.get("rocm")),
        xpu=_str(fields.get("xpu")),
        debug=fields["debug"] if isinstance(fields.get("debug"), bool) else None,
    )


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
