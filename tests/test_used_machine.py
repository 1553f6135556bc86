"""envguard on a machine where uv has been used before: uv's cache holds the index's page for
a locked package (as after any `uv pip install numpy`), a uv.toml and ``UV_*`` name another
index. The demo and an offline restore from a wheelhouse must not care.

The index is a real HTTP server on the loopback interface that serves PEP 503 pages with
PEP 658 metadata, the way PyPI does; uv caches its pages exactly as it caches PyPI's.
"""

from __future__ import annotations

import hashlib
import http.server
import os
import subprocess
import sys
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from envguard import lockfile, snapshot
from envguard.demo.incident import known_good, swap_in_sglang
from tests.conftest import make_venv, uv_bin, uv_install
from tests.test_cli import cli

# PyPI's numpy is a manylinux wheel for this very CPython: a better match than a wheelhouse's
# py3-none-any, which is why uv picks the index's file.
_TAG = f"cp{sys.version_info[0]}{sys.version_info[1]}"
_BETTER = f"{_TAG}-{_TAG}-manylinux_2_17_x86_64"


class _Index(http.server.BaseHTTPRequestHandler):
    """A simple index of the wheels in ``house``, each listed as a platform wheel: pages and
    metadata, never the wheel files (a dry run needs only metadata, so the cache ends up
    with the page and not the file)."""

    house: Path

    def do_GET(self) -> None:
        parts = self.path.strip("/").split("/")
        if parts[0] == "simple" and len(parts) == 2:
            return self._page(parts[1])
        if parts[0] == "files" and parts[-1].endswith(".whl.metadata"):
            name = parts[-1].removesuffix(".metadata").replace(_BETTER, "py3-none-any")
            return self._send(_metadata(self.house / name), "text/plain")
        self.send_error(404)

    def _page(self, project: str) -> None:
        wheels = [w for w in self.house.glob("*.whl") if _project(w) == project]
        if not wheels:
            return self.send_error(404)
        links = "".join(
            f'<a href="/files/{w.name.replace("py3-none-any", _BETTER)}'
            f'#sha256={hashlib.sha256(w.read_bytes()).hexdigest()}" '
            f'data-dist-info-metadata="sha256={hashlib.sha256(_metadata(w)).hexdigest()}">'
            f"{w.name.replace('py3-none-any', _BETTER)}</a>\n"
            for w in wheels
        )
        self._send(f"<html><body>\n{links}</body></html>".encode(), "text/html")

    def _send(self, body: bytes, kind: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Cache-Control", "max-age=3600")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def _project(wheel: Path) -> str:
    return wheel.name.split("-")[0].replace("_", "-").lower()


def _metadata(wheel: Path) -> bytes:
    with zipfile.ZipFile(wheel) as zf:
        return zf.read(next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA")))


@pytest.fixture
def index(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """(the index URL, its wheelhouse): the same versions the lock pins, as PyPI would
    list them."""
    house = tmp_path / "index-house"
    known_good(house)
    handler = type("Handler", (_Index,), {"house": house})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple", house
    finally:
        server.shutdown()
        server.server_close()


def _seed(cache: Path, url: str, *reqs: str) -> None:
    """What `uv pip install --dry-run numpy` leaves behind: the index's pages, no files."""
    probe = make_venv(cache.parent / "probe")
    env = {**os.environ, "UV_CACHE_DIR": str(cache)}
    env.pop("UV_OFFLINE", None)
    done = subprocess.run(
        [uv_bin(), "pip", "install", "--dry-run", "--python", str(probe / "bin" / "python"),
         "--index-url", url, *reqs],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert list(cache.rglob("*")), "uv cached nothing: the test would prove nothing"


def _used_machine(tmp_path: Path, url: str) -> dict[str, str]:
    """A seeded cache, a user-wide uv.toml and UV_INDEX_URL that both name the index."""
    config = tmp_path / "xdg"
    (config / "uv").mkdir(parents=True)
    (config / "uv" / "uv.toml").write_text(f'index-url = "{url}"\n')
    cache = tmp_path / "uv-cache"
    _seed(cache, url, "numpy==2.3.0", "transformers==5.6.0", "tokenizers")
    return {"UV_CACHE_DIR": str(cache), "XDG_CONFIG_HOME": str(config), "UV_INDEX_URL": url}


@pytest.mark.slow
def test_an_offline_restore_from_a_wheelhouse_ignores_the_index_pages_uv_cached(
    tmp_path: Path, index: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    venv = make_venv(tmp_path / "train-venv")
    house = tmp_path / "before"
    uv_install(venv, house, *known_good(house))
    lock = tmp_path / "lockfiles" / "train.envguard.toml"
    lockfile.write(lock, snapshot.take(venv, name="train", with_code=False))
    swap_in_sglang(venv, tmp_path / "after")
    env = _used_machine(tmp_path, index[0])
    monkeypatch.delenv("UV_NO_CONFIG")
    done = cli("restore", str(lock), "--find-links", str(house), "--offline", "--yes", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "uv reads only that (--no-index)" in " ".join(done.stdout.split())
    restored = snapshot.take(venv, with_code=False).versions()
    assert restored["numpy"] == "2.3.0" and restored["transformers"] == "5.6.0"


@pytest.mark.slow
def test_an_offline_restore_says_which_pins_the_wheelhouse_lacks(
    tmp_path: Path, index: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    venv = make_venv(tmp_path / "train-venv")
    house = tmp_path / "before"
    uv_install(venv, house, *known_good(house))
    lock = tmp_path / "lockfiles" / "train.envguard.toml"
    lockfile.write(lock, snapshot.take(venv, name="train", with_code=False))
    swap_in_sglang(venv, tmp_path / "after")
    for wheel in house.glob("numpy-*.whl"):
        wheel.unlink()  # the folder cannot serve numpy: only uv's cache could
    env = _used_machine(tmp_path, index[0])
    monkeypatch.delenv("UV_NO_CONFIG")
    done = cli("restore", str(lock), "--find-links", str(house), "--offline", "--yes", env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    plan = " ".join(done.stdout.split())
    assert f"1 of 8 pins are not in {house} (numpy==2.3.0)" in plan
    error = done.stderr.strip().splitlines()
    assert len(error) == 1, error
    # uv stops at the first cached page it cannot serve: any of the index's pins
    assert "uv's cache knows " in error[0] and "a --find-links folder" in error[0], error
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_the_demo_runs_on_a_used_machine(
    tmp_path: Path, index: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {**os.environ, **_used_machine(tmp_path, index[0]), "COLUMNS": "80", "NO_COLOR": "1"}
    env.pop("UV_NO_CONFIG")
    env["UV_CONSTRAINT"] = str(tmp_path / "nowhere.txt")  # a user setting that breaks installs
    done = subprocess.run(
        [sys.executable, "-m", "envguard", "demo"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Restored .venv: 8 packages match the lock" in done.stdout
    assert done.stdout.rstrip().splitlines()[-1].startswith("That was the incident")


@pytest.mark.slow
def test_a_uv_toml_committed_into_the_checkout_does_not_steer_a_restore(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """uv reads project config from the folder it runs in: a teammate's repository is not the
    user's configuration (a committed uv.toml could send pins to another index)."""
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    venv = make_venv(checkout / ".venv")
    house = tmp_path / "before"
    uv_install(venv, house, *known_good(house))
    lock = checkout / "lockfiles" / "train.envguard.toml"
    lockfile.write(lock, snapshot.take(venv, name="train", with_code=False))
    swap_in_sglang(venv, tmp_path / "after")
    (checkout / "uv.toml").write_text('[pip]\nno-binary = [":all:"]\n')  # nothing installable
    monkeypatch.delenv("UV_NO_CONFIG")
    done = cli("restore", str(lock), "--find-links", str(house), "--offline", "--yes", cwd=checkout)
    assert done.returncode == 0, done.stdout + done.stderr
    assert snapshot.take(venv, with_code=False).versions()["transformers"] == "5.6.0"
