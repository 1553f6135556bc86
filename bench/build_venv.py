"""Build a venv holding the H200 training venv's 197 distributions, from installed.json.

Each distribution gets a real dist-info (METADATA with its Requires-Dist, INSTALLER, REQUESTED,
RECORD) written into a venv made by uv, so that envguard, uv and pip all read the same thing.
The torch entry gets the H200's torch/version.py, byte for byte, and the nvidia wheels their
headers, so the snapshot exercises every probe.

    python bench/build_venv.py DEST [--fixtures ../shared/fixtures/cuda-h200-torch2.11-cu130]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from packaging.utils import canonicalize_name

DEFAULT_FIXTURES = (
    Path(__file__).resolve().parents[2] / "shared" / "fixtures" / ("cuda-h200-torch2.11-cu130")
)
HEADERS = {
    "nvidia-cuda-runtime": (
        "nvidia/cu13/include/cuda_runtime_api.h",
        "#define CUDART_VERSION 13000\n",
    ),
    "nvidia-cudnn-cu13": (
        "nvidia/cudnn/include/cudnn_version.h",
        "#define CUDNN_MAJOR 9\n#define CUDNN_MINOR 19\n#define CUDNN_PATCHLEVEL 0\n",
    ),
    "nvidia-nccl-cu13": (
        "nvidia/nccl/include/nccl.h",
        "#define NCCL_MAJOR 2\n#define NCCL_MINOR 28\n#define NCCL_PATCH 9\n",
    ),
}


def build(dest: Path, fixtures: Path, total: int = 0) -> Path:
    """``total``: pad the H200 set with small synthetic distributions up to this many."""
    from uv import find_uv_bin

    subprocess.run(
        [find_uv_bin(), "venv", "--quiet", "--python", sys.executable, str(dest)], check=True
    )
    site = next(dest.glob("lib/python*/site-packages"))
    installed = json.loads((fixtures / "installed.json").read_text())["installed"]
    for dist in installed:
        _write_dist(site, dist)
    for i in range(total - len(installed)):
        requires = [f"synthetic-{i // 2:05d}>=1"] if i % 2 else []
        _write_dist(
            site, {"name": f"synthetic-{i:05d}", "version": "1.0", "requires_dist": requires}
        )
    (site / "torch").mkdir(exist_ok=True)
    (site / "torch" / "version.py").write_bytes((fixtures / "torch_version.py").read_bytes())
    for name, (rel, text) in HEADERS.items():
        if any(canonicalize_name(d["name"]) == name for d in installed):
            (site / rel).parent.mkdir(parents=True, exist_ok=True)
            (site / rel).write_text(text)
    return dest


def _write_dist(site: Path, dist: dict[str, object]) -> None:
    name, version = str(dist["name"]), str(dist["version"])
    info = site / f"{canonicalize_name(name).replace('-', '_')}-{version}.dist-info"
    info.mkdir(exist_ok=True)
    lines = ["Metadata-Version: 2.4", f"Name: {name}", f"Version: {version}"]
    if dist.get("requires_python"):
        lines.append(f"Requires-Python: {dist['requires_python']}")
    lines += [f"Requires-Dist: {r}" for r in dist.get("requires_dist") or []]  # type: ignore[union-attr]
    # A real METADATA carries the long description after the headers; keep one of real size.
    body = "\n".join(lines) + "\n\n" + ("Lorem ipsum dolor sit amet. " * 200) + "\n"
    (info / "METADATA").write_text(body)
    (info / "INSTALLER").write_text(f"{dist.get('installer') or 'uv'}\n")
    if dist.get("requested"):
        (info / "REQUESTED").write_text("")
    (info / "RECORD").write_text(f"{info.name}/METADATA,,\n{info.name}/RECORD,,\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dest", type=Path)
    parser.add_argument("--fixtures", type=Path, default=DEFAULT_FIXTURES)
    parser.add_argument("--total", type=int, default=0, help="pad to this many distributions")
    args = parser.parse_args()
    print(build(args.dest, args.fixtures, args.total))


if __name__ == "__main__":
    main()
