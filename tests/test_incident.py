"""The incident replayed end to end with real wheels, a uv venv, a git repo and the real cache."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from envguard import drift, lockfile, snapshot
from envguard.cli import cli
from envguard.demo.incident import N_SGLANG_DEPS, known_good, sglang_install, swap_in_sglang
from tests.conftest import make_venv, uv_bin, uv_install


@pytest.mark.slow
def test_incident_replay(tmp_path: Path, repo: Path, inductor_cache: Path, monkeypatch) -> None:
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(inductor_cache))
    venv = make_venv(tmp_path / "venv")
    before = tmp_path / "before"
    uv_install(venv, before, *known_good(before))
    lock = tmp_path / "lockfiles" / "train.envguard.toml"

    good = snapshot.take(venv, repo=repo, name="train")
    lockfile.write(lock, good)
    assert good.torch is not None and good.torch.version == "2.11.0+cu128"
    assert good.torch.index_url is None  # uv installed it from a --find-links folder
    assert good.cuda.runtime and good.cuda.runtime.version == "12.8"
    inductor = next(c for c in good.caches if c.kind == "inductor")
    assert (inductor.files, inductor.bytes) == (108, 11_300_011)

    # The drift: sglang arrives, the cache is "cleaned up", a patch sits uncommitted.
    swap_in_sglang(venv, tmp_path / "after")
    shutil.rmtree(inductor_cache)
    (repo / "dflash_model.py").write_text(
        "def forward(x):\n    return x\n" + "".join(f"# experiment {i}\n" for i in range(12))
    )

    live = snapshot.take(venv, repo=repo, name="train")
    assert live.torch and live.torch.version == "2.11.0+cu130"
    assert live.torch.metadata_version == "2.11.0"  # what pip freeze would show
    assert live.torch.index_url is None
    report = drift.compare(lockfile.read(lock), live)
    whys = {c.subject: c for c in report.changes}

    torch = whys["torch"]
    assert torch.severity == "critical"
    assert torch.why.startswith("same source (git 70d99e9), CUDA build 12.8 → 13.0")
    assert "Inductor cache will not be reused" in torch.why
    assert whys["CUDA runtime"].severity == "critical"
    assert (whys["cuDNN"].old, whys["cuDNN"].new) == ("9.10.2", "9.19.0")
    assert whys["transformers"].severity == "warning"
    assert (whys["transformers"].old, whys["transformers"].new) == ("5.6.0", "5.8.1")
    group = next(c for c in report.changes if c.members and "sglang 0.5.23" in c.why)
    # sglang, its deps and the cu13 wheels were added; torch and transformers changed with them.
    assert group.why.startswith(
        f"sglang 0.5.23 and the {N_SGLANG_DEPS + 3 + 2} packages it brought "
        f"({N_SGLANG_DEPS + 3} added, 2 changed)"
    )
    moved = {m.name: (m.old, m.new) for m in group.members}
    assert moved["torch"] == ("2.11.0+cu128", "2.11.0+cu130")
    # attribution: the install group's root, and the requirement that pulled the new version
    assert torch.cause == "installed with sglang 0.5.23 (sglang requires torch==2.11.0)"
    assert whys["transformers"].cause.endswith("(sglang requires transformers==5.8.1)")
    assert whys["CUDA runtime"].cause == (
        "nvidia-cuda-runtime 13.0.96, installed with sglang 0.5.23 "
        "(torch requires nvidia-cuda-runtime==13.0.96)"
    )
    # the root has no cause but itself
    assert drift.Member(name="sglang", old="absent", new="0.5.23") in group.members
    cache = whys["Inductor cache"]
    assert (
        inductor.entries == 31
    )  # 4 fxgraph + 2 aotautograd + 11 kernels + 11 modules + 3 autotune
    assert (cache.old, cache.new) == ("31 entries / 11.3 MB", "gone")
    assert cache.why == "Inductor cache is gone: cold, the first steps will recompile"
    code = whys["dflash_model.py"]
    assert code.severity == "critical"
    assert code.why == "dflash_model.py has an uncommitted change not in the snapshot (+12 −0)"
    assert "+# experiment 11" in code.patch

    # The CLI over the same state: exit 1, JSON names the causes too.
    monkeypatch.chdir(repo)
    result = CliRunner().invoke(cli, ["diff", str(lock), "--venv", str(venv), "--json"])
    assert result.exit_code == 1, result.output
    doc = json.loads(result.output)
    assert {c["subject"] for c in doc["result"]["changes"]} >= {
        "torch",
        "transformers",
        "Inductor cache",
        "dflash_model.py",
    }


def test_pip_freeze_cannot_tell_the_builds_apart(tmp_path: Path) -> None:
    """The premise: a freeze of the PyPI cu130 torch says 2.11.0; envguard says +cu130."""
    venv = make_venv(tmp_path / "venv")
    house = tmp_path / "after"
    sglang_install(house)
    uv_install(venv, house, "torch==2.11.0")
    freeze = subprocess.run(
        [uv_bin(), "pip", "freeze", "--python", str(venv / "bin" / "python")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "torch==2.11.0\n" in freeze
    snap = snapshot.take(venv, default_caches=False)
    assert snap.torch and snap.torch.version == "2.11.0+cu130" and snap.torch.variant == "cu130"
    assert snap.torch.source == "version.py"
    assert sys.executable  # the venv's interpreter was never run by envguard
