"""Remake ``install.json``: a real ``uv pip install vllm`` into a training venv, as the
package index resolves it, with each distribution's real METADATA headers (PEP 658 files,
the description left out). Run by hand, with network, from the repository's root:

    python tests/data/vllm/make.py

The training venv is ``training.in``; the install is that venv plus ``vllm==0.34.0``,
resolved with the training venv's versions preferred (as ``uv pip install`` keeps what it
can). Tests build a wheel per distribution from these headers and install them for real.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import urllib.request
import zipfile
from email.parser import HeaderParser
from pathlib import Path

HERE = Path(__file__).parent
VLLM = "vllm==0.33.0"
TARGET = ("--python-version", "3.11", "--python-platform", "x86_64-manylinux_2_28")
KEEP = ("Metadata-Version", "Name", "Version", "Requires-Python", "Requires-Dist", "Provides-Extra")


def compile_(reqs: Path, out: Path) -> dict[str, str]:
    uv = shutil.which("uv") or sys.exit("uv on PATH, please")
    subprocess.run(
        [uv, "pip", "compile", "-q", "--no-header", "--no-annotate", "--index-strategy",
         "unsafe-best-match", *TARGET, str(reqs), "-o", str(out)],
        check=True,
    )  # fmt: skip
    pins = {}
    for line in out.read_text().splitlines():
        name, sep, version = line.strip().partition("==")
        if sep:
            pins[name.strip()] = version.split(";")[0].strip()
    return pins


def metadata(name: str, version: str) -> str:
    """The headers of the wheel's METADATA the index serves beside it (PEP 658)."""
    url = f"https://pypi.org/simple/{name}/"
    req = urllib.request.Request(url, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        files = json.load(resp)["files"]
    wheels = [
        f for f in files if f["filename"].endswith(".whl") and f"-{version}-" in f["filename"]
    ]
    wheels.sort(key=lambda f: ("x86_64" not in f["filename"] and "any" not in f["filename"],
                               "cp311" not in f["filename"]))  # fmt: skip
    for f in wheels:
        if f.get("core-metadata") or f.get("data-dist-info-metadata"):
            with urllib.request.urlopen(f["url"] + ".metadata", timeout=60) as resp:
                return _headers(resp.read())
    for f in wheels:  # no PEP 658 file: the wheel's own METADATA, read by byte ranges
        archive = zipfile.ZipFile(_Remote(f["url"], f["size"]))  # type: ignore[arg-type]
        inner = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        return _headers(archive.read(inner))
    raise SystemExit(f"{name} {version}: no wheel on the index")


class _Remote:
    """A file on the index, read as zipfile reads it (its end first) with Range requests:
    an nvidia wheel of 400 MB gives its METADATA for a few kB."""

    def __init__(self, url: str, size: int) -> None:
        self.url, self.size, self.pos = url, size, 0

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        start = {0: 0, 1: self.pos, 2: self.size}[whence]
        self.pos = start + offset
        return self.pos

    def tell(self) -> int:
        return self.pos

    def read(self, n: int = -1) -> bytes:
        end = self.size if n < 0 else min(self.size, self.pos + n)
        if end <= self.pos:
            return b""
        req = urllib.request.Request(self.url, headers={"Range": f"bytes={self.pos}-{end - 1}"})
        with urllib.request.urlopen(req, timeout=120) as resp:
            data: bytes = resp.read()
        self.pos += len(data)
        return data


def _headers(data: bytes) -> str:
    headers = HeaderParser().parsestr(data.decode("utf-8"), headersonly=True)
    return "".join(f"{k}: {v}\n" for k, v in headers.items() if k in KEEP)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        before = compile_(HERE / "training.in", Path(tmp) / "before.txt")
        after_in = Path(tmp) / "after.in"
        # the same names, unpinned: an install keeps each version it can, moves the rest
        names = [ln.split("==")[0] for ln in (HERE / "training.in").read_text().splitlines()
                 if ln and not ln.startswith("#")]  # fmt: skip
        after_in.write_text("\n".join([*names, VLLM]) + "\n")
        after_out = Path(tmp) / "after.txt"
        shutil.copyfile(Path(tmp) / "before.txt", after_out)  # the installed versions preferred
        after = compile_(after_in, after_out)
    wanted = sorted({*before.items(), *after.items()})
    meta = {f"{n}=={v}": metadata(n, v) for n, v in wanted}
    doc = {"before": before, "after": after, "metadata": meta}
    (HERE / "install.json").write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    print(f"{len(before)} before, {len(after)} after, {len(meta)} METADATA")


if __name__ == "__main__":
    main()
