"""A small compile cache in TorchInductor's real layout, saying what built it.

The layout and the facts each entry carries are those of the H200 cache in
``shared/fixtures`` (``fxgraph/<2>/<key>/<entry>`` with torch's repro header, Triton kernel
folders with their ``.json`` metadata, generated kernel modules, autotune results), so that
envguard reads this cache exactly as it reads a real one.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, kw_only=True)
class BuiltBy:
    torch: str = "2.11.0+cu128"
    cuda: str = "12.8"
    git: str = "70d99e998b4955e0049d13a98d77ae1b14db1f45"
    triton: str = "3.6.0"
    gpu: str = "NVIDIA H200"
    arch: int = 90


def _key(*parts: object) -> str:
    return hashlib.sha256(repr(parts).encode()).hexdigest()


def _graph_entry(built: BuiltBy, name: str) -> bytes:
    """An FX graph entry: a pickle in real life; what envguard reads is the repro header."""
    header = (
        f"# torch version: {built.torch}\n# torch cuda version: {built.cuda}\n"
        f"# torch git version: {built.git}\n\n\n# CUDA Info: \n"
        f"# GPU Hardware Info: \n# {built.gpu} : 1 \n\n"
    )
    body = f"class Repro(torch.nn.Module):\n    # {name}\n    pass\n"
    return b"\x80\x05torch._inductor.output_code\nCompiledFxGraph\n" + (header + body).encode()


def make(root: Path, built: BuiltBy = BuiltBy(), *, graphs: int = 4, kernels: int = 6) -> Path:
    """Write a cache of ``graphs`` FX graphs and ``kernels`` Triton kernels under ``root``."""
    for i in range(graphs):
        key = _key("graph", built, i)
        entry = root / "fxgraph" / key[:2] / f"f{key[:51]}" / key[10:62]
        entry.parent.mkdir(parents=True, exist_ok=True)
        entry.write_bytes(_graph_entry(built, f"graph {i}"))
    aot = root / "aotautograd" / f"a{_key('aot', built)[:51]}"
    aot.mkdir(parents=True, exist_ok=True)
    (aot / _key("aot entry", built)[:52]).write_bytes(b"\x80\x05aot_autograd")
    for i in range(kernels):
        name = f"triton_poi_fused_add_{i}"
        folder = root / "triton" / "0" / _key("kernel", built, i)[:52].upper()
        folder.mkdir(parents=True, exist_ok=True)
        meta = {
            "hash": _key(name, built),
            "target": {"backend": "cuda", "arch": built.arch, "warp_size": 32},
            "num_warps": 4,
            "arch": f"sm{built.arch}",
            "triton_version": built.triton,
            "backend_name": "cuda",
            "name": name,
        }
        (folder / f"{name}.json").write_text(json.dumps(meta))
        (folder / f"__grp__{name}.json").write_text(json.dumps({"child_paths": {}}))
        (folder / f"{name}.cubin").write_bytes(b"\x7fELF" + _key(name).encode())
        (folder / f"{name}.ptx").write_text(f"// {name}\n.version 8.7\n.target sm_{built.arch}\n")
        module = root / _key("module", i)[:2] / f"c{_key('module', built, i)[:51]}.py"
        module.parent.mkdir(parents=True, exist_ok=True)
        module.write_text(f"# kernel {name}\n# DeviceProperties(type='cuda', cc={built.arch})\n")
    (root / "3b").mkdir(parents=True, exist_ok=True)
    (root / "3b" / f"{_key('tune', built)}.best_config").write_text(
        json.dumps({"XBLOCK": 32, "num_warps": 2, "num_stages": 1})
    )
    return root
