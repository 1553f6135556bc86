"""The scenario corpus: one realistic situation per test, and the verdict it must get.

Each builds a real project (git repo, uv venv from local wheels, lock committed in
``lockfiles/``, an Inductor-layout cache), changes one thing the way users do, and states the
exact set of changes at warning or above, through ``diff --json``, the human ``diff`` and
``envguard.guard()`` alike (``tests/project.py``). False-alarm scenarios state that nothing
at warning or above is reported.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envguard import lockfile
from envguard.demo import incident
from envguard.demo.cache import BuiltBy, make
from envguard.demo.wheels import build_wheel, torch_version_py
from tests.conftest import PipVenv, git, make_venv, offline_install, uv_bin
from tests.project import Project, invoke

# ---------------------------------------------------------------------------------------------
# False alarms: each of these must be silent at warning and above.


def test_clean_project_has_no_drift(project: Project) -> None:
    project.snapshot()
    project.commit("lock the environment")
    v = project.verdict()
    assert v.exit_code == 0 and v.found() == set()
    assert v.found("info") == {("info", "code", "git HEAD")}  # moved by the lock's commit


def test_committing_the_lockfile_is_not_drift(project: Project) -> None:
    project.snapshot()
    project.commit("lock the environment", "lockfiles")
    v = project.verdict()
    assert v.found() == set()
    head = v.one("git HEAD")
    assert head["severity"] == "info" and "only envguard's own files" in head["why"]
    assert "lockfiles/train.envguard.toml" in head["why"]


def test_project_config_under_tool_envguard_is_envguards_own(project: Project) -> None:
    project.write("pyproject.toml", '[project]\nname = "train"\nversion = "1"\n')
    project.commit("pyproject")
    project.snapshot()
    project.write(
        "pyproject.toml",
        '[project]\nname = "train"\nversion = "1"\n\n[tool.envguard]\nfail-on = "critical"\n',
    )
    project.commit("configure envguard")
    assert project.verdict().found() == set()


def test_a_dirty_file_is_not_changed_by_another_becoming_dirty(project: Project) -> None:
    project.write("model.py", "def forward(x):\n    return 2 * x\n")
    project.snapshot()
    project.write("train.py", "import model\n\nmodel.forward(2)\n")  # sorts after model.py
    project.write("data.py", "def batches():\n    return [1]\n")  # and one before it
    v = project.verdict()
    assert v.found() == {("critical", "code", "train.py"), ("critical", "code", "data.py")}


def test_committing_the_dirty_change_as_it_was_is_not_drift(project: Project) -> None:
    project.write("model.py", "def forward(x):\n    return 2 * x\n")
    project.snapshot()
    project.commit("the experiment worked")
    v = project.verdict()
    assert v.found() == set()
    assert "the working tree has the snapshot's code all the same" in v.one("git HEAD")["why"]


def test_envguards_own_files_are_not_untracked_code(project: Project) -> None:
    project.snapshot("--save-cache")
    code, _, err = invoke("run", "--", "true", env=project.activated())
    assert code == 0, err
    assert (project.root / "lockfiles" / "train.envguard-journal.jsonl").is_file()
    v = project.verdict()
    assert v.found("info") == set()


def test_resnapshot_over_a_committed_lock_is_not_drift(project: Project) -> None:
    project.snapshot()
    project.commit("lock")
    project.write("notes.txt", "scratch\n")
    project.snapshot()  # the committed lockfile is now dirty in the working tree
    project.commit("lock again", "lockfiles")
    project.snapshot()
    assert project.verdict().found() == set()


TORCHRUN = {
    "TORCHELASTIC_RUN_ID": "none",
    "TORCHELASTIC_RESTART_COUNT": "0",
    "TORCHELASTIC_MAX_RESTARTS": "0",
    "TORCHELASTIC_USE_AGENT_STORE": "True",
    "TORCHELASTIC_ERROR_FILE": "/tmp/torchelastic/error.json",
    "RANK": "1",
    "LOCAL_RANK": "1",
    "WORLD_SIZE": "2",
    "LOCAL_WORLD_SIZE": "2",
    "GROUP_RANK": "0",
    "GROUP_WORLD_SIZE": "1",
    "ROLE_RANK": "1",
    "ROLE_NAME": "default",
    "ROLE_WORLD_SIZE": "2",
    "MASTER_ADDR": "127.0.0.1",
    "MASTER_PORT": "29500",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
    "OMP_NUM_THREADS": "1",  # torchrun sets it when unset and nproc_per_node > 1
}


def test_what_torchrun_sets_is_not_drift(project: Project) -> None:
    project.snapshot(env={"OMP_NUM_THREADS": None})
    assert project.verdict(env=TORCHRUN).found() == set()


def test_a_lock_taken_under_torchrun_checked_from_a_shell(project: Project) -> None:
    project.snapshot(env=TORCHRUN)
    assert project.verdict(env={"OMP_NUM_THREADS": None}).found() == set()


def test_a_thread_count_the_user_chose_is_still_drift(project: Project) -> None:
    project.snapshot(env={"OMP_NUM_THREADS": "8"})
    v = project.verdict(env={**TORCHRUN, "OMP_NUM_THREADS": "1"})
    assert v.found() == {("warning", "env", "OMP_NUM_THREADS")}


def test_what_slurm_and_mpi_set_is_not_drift(project: Project) -> None:
    project.snapshot(env={"CUDA_VISIBLE_DEVICES": None})
    slurm = {
        "SLURM_JOB_ID": "4242",
        "SLURM_PROCID": "3",
        "SLURM_LOCALID": "1",
        "SLURM_STEP_GPUS": "1",
        "CUDA_VISIBLE_DEVICES": "1",
        "PMI_RANK": "3",
        "PMIX_RANK": "3",
        "OMPI_COMM_WORLD_RANK": "3",
        "OMPI_COMM_WORLD_LOCAL_RANK": "1",
    }
    assert project.verdict(env=slurm).found() == set()


def test_activation_and_torch_itself_are_not_drift(project: Project) -> None:
    project.snapshot(env={"CUDA_MODULE_LOADING": None})
    # no VIRTUAL_ENV, another PATH; torch's lazy CUDA init set CUDA_MODULE_LOADING
    env = {"VIRTUAL_ENV": None, "PATH": "/usr/bin:/bin", "CUDA_MODULE_LOADING": "LAZY"}
    v = project.verdict("lockfiles/train.envguard.toml", env=env)
    assert v.found("info") <= {("info", "code", "git HEAD")}


@pytest.mark.slow
def test_versions_equal_under_pep_440_are_not_drift(project: Project) -> None:
    project.install("plainpkg==2.4")
    project.snapshot()
    project.install("--reinstall", "plainpkg==2.4.0")
    assert project.verdict().found() == set()


def test_reinstalling_the_same_torch_is_not_drift(project: Project) -> None:
    project.snapshot()
    project.install("--reinstall-package", "torch", "torch==2.11.0+cu128")
    assert project.verdict().found() == set()


def test_a_grown_cache_and_an_untracked_file_are_info(project: Project) -> None:
    project.snapshot()
    make(project.cache, BuiltBy(), graphs=6, kernels=8)  # more graphs, same build
    project.write("scratch.ipynb", "{}\n")
    v = project.verdict()
    assert v.exit_code == 0 and v.found() == set()
    assert {("info", "caches", "Inductor cache"), ("info", "code", "scratch.ipynb")} <= v.found(
        "info"
    )


def test_a_symlinked_venv_is_the_same_venv(project: Project, tmp_path: Path) -> None:
    link = tmp_path / "venv-link"
    link.symlink_to(project.venv)
    project.snapshot("--venv", str(link))
    assert project.verdict("--venv", str(project.venv)).found() == set()


def test_diff_from_a_subfolder_of_the_repo(project: Project, monkeypatch) -> None:
    project.snapshot()
    (project.root / "configs").mkdir()
    monkeypatch.chdir(project.root / "configs")
    assert project.verdict(str(project.lock)).found() == set()


# ---------------------------------------------------------------------------------------------
# Missed truth: each of these must be reported, with its severity and area.


@pytest.mark.slow
def test_the_incident(project: Project, sglang_house: Path) -> None:
    project.write("model.py", "def forward(x):\n    return x\n# tuned\n")
    project.commit("tuned")
    project.snapshot()
    project.commit("lock", "lockfiles")
    incident.swap_in_sglang(project.venv, sglang_house)
    shutil.rmtree(project.cache)
    project.write("model.py", "def forward(x):\n    return x\n# tuned\n# experiment\n")
    v = project.verdict()
    assert v.found() == {
        ("critical", "torch", "torch"),
        ("critical", "cuda", "CUDA runtime"),
        ("critical", "code", "model.py"),
        ("warning", "cuda", "cuDNN"),
        ("warning", "cuda", "NCCL"),
        ("warning", "caches", "Inductor cache"),
        ("warning", "libraries", "sglang"),
        ("warning", "libraries", "transformers"),
        ("warning", "packages", "52 packages"),
    }
    torch = v.one("torch")
    assert torch["why"].startswith("same source (git 70d99e9), CUDA build 12.8 → 13.0")
    assert torch["cause"] == "installed with sglang 0.5.23 (sglang requires torch==2.11.0)"


def test_a_commit_that_changes_the_training_code(project: Project) -> None:
    project.snapshot()
    project.commit("lock", "lockfiles")
    project.write("model.py", "def forward(x):\n    return x * 3\n")
    project.commit("try something")
    v = project.verdict()
    assert v.found() == {("critical", "code", "model.py")}
    assert v.one("model.py")["why"] == "model.py was changed by commits since the snapshot"
    assert "return x * 3" in v.one("model.py")["patch"]
    head = v.one("git HEAD")
    assert head["severity"] == "info" and "1 file changed by commits since: model.py" in head["why"]


def test_the_snapshot_commit_rebased_away(project: Project) -> None:
    project.write("model.py", "def forward(x):\n    return x + 1\n")
    project.commit("experiment")
    project.snapshot()
    git(project.root, "reset", "-q", "--hard", "HEAD~1")
    git(project.root, "reflog", "expire", "--expire=now", "--all")
    git(project.root, "gc", "-q", "--prune=now")
    v = project.verdict()
    assert v.found() == {("critical", "code", "git HEAD")}
    assert "is not in this repository (rebased away, or not fetched)" in v.one("git HEAD")["why"]


def test_a_dirty_change_that_was_reverted(project: Project) -> None:
    project.write("model.py", "def forward(x):\n    return 2 * x\n")
    project.snapshot()
    git(project.root, "checkout", "--", "model.py")
    v = project.verdict()
    assert v.found() == {("critical", "code", "model.py")}
    assert "is gone" in v.one("model.py")["why"]


def test_a_dirty_change_committed_with_more_edits(project: Project) -> None:
    project.write("model.py", "def forward(x):\n    return 2 * x\n")
    project.snapshot()
    project.write("model.py", "def forward(x):\n    return 4 * x\n")
    project.commit("more")
    v = project.verdict()
    assert v.found() == {("critical", "code", "model.py")}
    assert "not as the snapshot had it" in v.one("model.py")["why"]


def test_a_deleted_base_interpreter(project: Project, tmp_path: Path) -> None:
    base = tmp_path / "python-home"
    shutil.copytree(Path(os.path.realpath(project.venv / "bin" / "python")).parent, base)
    cfg = project.venv / "pyvenv.cfg"
    cfg.write_text(
        "".join(
            f"home = {base}\n" if line.startswith("home") else line + "\n"
            for line in cfg.read_text().splitlines()
        )
    )
    project.snapshot()
    shutil.rmtree(base)
    v = project.verdict(guard=False)  # guard runs inside the venv it checks
    assert v.found() == {("critical", "python", "interpreter")}
    assert f"{base} (pyvenv.cfg home) no longer exists" in v.one("interpreter")["why"]


@pytest.mark.slow
def test_system_site_packages_recorded_and_compared(project: Project, tmp_path: Path) -> None:
    venv = project.venv
    shutil.rmtree(venv)
    subprocess.run(
        [uv_bin(), "venv", "-q", "--system-site-packages", "--python", str(_base_python()), venv],
        check=True,
    )
    project.install("torch==2.11.0+cu128", "transformers==5.6.0")
    project.snapshot()
    snap = lockfile.read(project.lock)
    assert snap.venv.system_site_packages
    seen = _importable_distributions(venv)
    assert {d.name for d in (*snap.packages, *snap.inherited)} == seen
    cfg = venv / "pyvenv.cfg"
    cfg.write_text(
        cfg.read_text().replace(
            "include-system-site-packages = true", "include-system-site-packages = false"
        )
    )
    v = project.verdict()
    assert v.found() == {("warning", "python", "system site-packages")}


def test_a_cache_built_by_another_torch(project: Project) -> None:
    project.snapshot()
    shutil.rmtree(project.cache)
    make(project.cache, BuiltBy(torch="2.11.0+cu130", cuda="13.0"))  # a colleague's cache
    v = project.verdict()
    assert ("warning", "caches", "Inductor cache") in v.found()
    whys = [c["why"] for c in v.changes if c["subject"] == "Inductor cache"]
    assert any(
        w.startswith("torch 2.11.0+cu130 (cache) vs 2.11.0+cu128 (here); CUDA 13.0 (cache)")
        for w in whys
    )


def test_torchvision_built_for_another_cuda(project: Project) -> None:
    _torchvision(project.house, "0.26.0+cu128")
    _torchvision(project.house, "0.26.0+cu132")
    project.install("torchvision==0.26.0+cu128")
    project.snapshot()
    project.install("torchvision==0.26.0+cu132")
    v = project.verdict()
    tv = [c for c in v.changes if c["subject"] == "torchvision"]
    assert {(c["severity"], c["area"]) for c in tv} == {("warning", "libraries")}
    assert any("is built for cu132 while torch 2.11.0+cu128 is cu128" in c["why"] for c in tv)


def test_two_installs_of_one_package(project: Project) -> None:
    project.install("plainpkg==2.4")
    project.snapshot()
    site = next(project.venv.glob("lib/python*/site-packages"))
    shutil.copytree(site / "plainpkg-2.4.dist-info", site / "plainpkg-2.5.dist-info")
    meta = site / "plainpkg-2.5.dist-info" / "METADATA"
    meta.write_text(meta.read_text().replace("Version: 2.4", "Version: 2.5"))
    v = project.verdict()
    assert ("warning", "packages", "plainpkg") in v.found()
    assert any("installed twice (plainpkg-2.4.dist-info" in c["why"] for c in v.changes)


def test_guard_and_diff_both_check_the_locks_custom_cache(project: Project, tmp_path) -> None:
    custom = make(tmp_path / "aot-cache", BuiltBy())
    project.snapshot("--cache-dir", str(custom))
    shutil.rmtree(custom)
    v = project.verdict()  # guard's verdict is checked against diff's inside
    assert v.found() == {("warning", "caches", f"cache {custom}")}
    assert v.guard_stopped


def test_a_training_variable_set_by_the_user(project: Project) -> None:
    project.snapshot()
    v = project.verdict(env={"NCCL_ALGO": "Tree"})
    assert v.found() == {("warning", "env", "NCCL_ALGO")}


def test_tf32_refused_by_the_libraries_is_critical_for_what_it_does(project: Project) -> None:
    """NVIDIA_TF32_OVERRIDE=0 cut fp32 training steps 5.4x on an H100 (#32): critical, with
    its own reason, never its prefix's ("which GPUs and driver features a container sees");
    guard() stops at its default fail-on."""
    project.snapshot()
    v = project.verdict(env={"NVIDIA_TF32_OVERRIDE": "0"}, fail_on="critical")
    assert v.found() == {("critical", "env", "NVIDIA_TF32_OVERRIDE")}
    assert "TF32" in v.one("NVIDIA_TF32_OVERRIDE")["why"] and v.guard_stopped


def test_nccl_logging_is_info_and_stops_nothing(project: Project) -> None:
    """NCCL_DEBUG only logs: below warning, where NCCL_ALGO (what runs) is a warning."""
    project.snapshot()
    v = project.verdict(env={"NCCL_DEBUG": "INFO"})
    assert v.found() == set() and v.exit_code == 0
    assert v.one("NCCL_DEBUG")["severity"] == "info"
    assert "logging only" in v.one("NCCL_DEBUG")["why"]


def test_one_package_added_and_one_removed(project: Project) -> None:
    project.install("plainpkg==2.4")
    project.snapshot()
    subprocess.run(
        [uv_bin(), "pip", "uninstall", "-q", "--python", str(project.venv / "bin" / "python"),
         "plainpkg"],
        check=True,
    )  # fmt: skip
    project.install("harmless==1.0")
    v = project.verdict()
    assert v.found() == {("warning", "packages", "plainpkg"), ("warning", "packages", "harmless")}


def test_a_package_upgraded(project: Project) -> None:
    project.install("plainpkg==2.4")
    project.snapshot()
    project.install("plainpkg==2.5")
    v = project.verdict()
    assert v.found() == {("warning", "packages", "plainpkg")}
    assert v.one("plainpkg")["why"] == "upgrade of a package on the import path"


def test_another_python_patch_release(project: Project) -> None:
    project.snapshot()
    cfg = project.venv / "pyvenv.cfg"
    lines = cfg.read_text().splitlines()
    for i, line in enumerate(lines):
        if line.startswith("version"):  # uv writes version_info = 3.11.7
            key, version = (p.strip() for p in line.split("="))
            major, minor, patch = version.split(".")[:3]
            lines[i] = f"{key} = {major}.{minor}.{int(patch) + 1}"
    cfg.write_text("\n".join(lines) + "\n")
    v = project.verdict(guard=False)
    assert v.found() == {("critical", "python", "Python")}
    assert v.one("Python")["why"].startswith("a patch release of the same ABI")


def test_fail_on_critical_lets_warnings_pass(project: Project, sglang_house: Path) -> None:
    project.snapshot()
    incident.install(project.venv, sglang_house, "transformers==5.8.1")
    v = project.verdict(fail_on="critical")
    assert v.exit_code == 0 and ("warning", "libraries", "transformers") in v.found()


# ---------------------------------------------------------------------------------------------
# preflight: a forecast says what it knows and leaves the rest unknown


def _forecast(project: Project, *install: str, env=None) -> tuple[int, dict, str]:
    import json

    code, out, err = invoke("preflight", "--json", "--", *install, env=env)
    return code, (json.loads(out) if out.strip() else {}), err


def test_preflight_with_uv_invents_nothing(project: Project) -> None:
    python = str(project.venv / "bin" / "python")
    code, doc, err = _forecast(
        project, *offline_install(project.house, "--python", python, "needs-new-torch")
    )
    assert code == 1, err  # the user's own --python names the venv: honoured, not doubled
    changes = {(c["severity"], c["area"], c["subject"]): c for c in doc["result"]["changes"]}
    assert set(changes) == {
        ("critical", "torch", "torch"),
        ("critical", "cuda", "CUDA runtime"),
        ("warning", "packages", "3 packages"),  # one install, one row
    }
    torch = changes["critical", "torch", "torch"]
    # no commit or debug flag is known for a build not yet installed: none is claimed
    assert torch["why"] == (
        "another release, CUDA build 12.8 → 13.0: compiled kernels in the Inductor cache "
        "will not be reused"
    )
    # uv's plan carries no requirements: the install group is known, a "because" is not;
    # and the install has not happened: the cause is a forecast too
    assert torch["cause"] == "would come with needs-new-torch 1.0"
    assert doc["result"]["reasons"] == [
        "would replace torch 2.11.0+cu128 with 2.14.1+cu130 (CUDA 12.8 → 13.0)"
    ]
    assert "2.11.0+cu128" in _torch_of(project.venv)  # nothing was installed


def test_preflight_judges_only_the_areas_asked(project: Project) -> None:
    """--only/--ignore as diff takes them: the critical torch swap ignored, packages left."""
    import json

    python = str(project.venv / "bin" / "python")
    install = offline_install(project.house, "--python", python, "needs-new-torch")
    code, out, err = invoke("preflight", "--json", "--ignore", "torch,cuda", "--", *install)
    assert code == 0, err  # nothing critical left to stop it
    areas = {c["area"] for c in json.loads(out)["result"]["changes"]}
    assert areas and not areas & {"torch", "cuda"}
    code, _, err = invoke("preflight", "--only", "torch", "--ignore", "torch", "--", *install)
    assert code == 2 and "nothing left to judge" in err


@pytest.mark.slow
def test_preflight_with_pip_names_the_requirement(
    project: Project, tmp_path: Path, pip_venv_at: PipVenv
) -> None:
    shutil.rmtree(project.venv)
    pip_venv_at(project.venv)  # python -m venv --clear: the same folder, now with pip
    project.install("torch==2.11.0+cu128", "transformers==5.6.0")
    pip = [str(project.venv / "bin" / "pip"), "install", "--no-index", "--find-links",
           str(project.house), "needs-new-torch"]  # fmt: skip
    code, doc, err = _forecast(project, *pip, env=project.activated())
    assert code == 1, err
    assert doc["result"]["reasons"] == [
        "would replace torch 2.11.0+cu128 with 2.14.1+cu130 (CUDA 12.8 → 13.0) because "
        "needs-new-torch 1.0 requires torch==2.14.1"
    ]


def test_preflight_refuses_two_venvs(project: Project, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other_python = str(make_venv(other) / "bin" / "python")
    argv = offline_install(project.house, "--python", other_python, "harmless")
    code, out, err = invoke("preflight", "--venv", str(project.venv), "--", *argv)
    assert code == 2 and out == ""
    assert err.strip().count("\n") == 0 and "targets" in err and "--venv is" in err


def test_preflight_of_a_harmless_install(project: Project) -> None:
    code, doc, err = _forecast(
        project, *offline_install(project.house, "harmless"), env=project.activated()
    )
    assert code == 0, err
    keys = {(c["severity"], c["area"], c["subject"]) for c in doc["result"]["changes"]}
    assert keys == {("warning", "packages", "harmless")}


# ---------------------------------------------------------------------------------------------
# helpers


def _torch_of(venv: Path) -> str:
    code = "import torch.version as v; print(v.__version__)"
    return subprocess.run(
        [str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()


def _base_python() -> Path:
    """The base interpreter of the one running the tests (a venv's python resolves to it)."""
    return Path(sys.base_prefix) / "bin" / f"python{sys.version_info[0]}.{sys.version_info[1]}"


def _importable_distributions(venv: Path) -> set[str]:
    code = (
        "import importlib.metadata as m, re;"
        "print('\\n'.join(sorted({re.sub(r'[-_.]+', '-', d.metadata['Name']).lower() "
        "for d in m.distributions()})))"
    )
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, check=True
    ).stdout
    return set(out.split())


def _torchvision(house: Path, version: str) -> None:
    build_wheel(
        house,
        "torchvision",
        version,
        files={"torchvision/version.py": torch_version_py(version, None, "c" * 40)},
        requires=["torch==2.11.0"],
    )


@pytest.fixture(autouse=True)
def _no_launcher(monkeypatch) -> None:
    """The developer's own shell may run under Slurm or torchrun; scenarios say which."""
    for name in list(os.environ):
        if name.startswith(("SLURM_", "TORCHELASTIC_", "OMPI_", "PMI_", "PMIX_")):
            monkeypatch.delenv(name)
    for name in ("OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES", "NCCL_ALGO", "CUDA_MODULE_LOADING",
                 "NVIDIA_TF32_OVERRIDE", "NCCL_DEBUG"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)


# ---------------------------------------------------------------------------------------------
# restore's verify and cache check use the same rules


@pytest.mark.slow
def test_restore_accepts_a_version_equal_under_pep_440(project: Project, tmp_path: Path) -> None:
    project.install("plainpkg==2.4")
    project.snapshot()
    only_240 = tmp_path / "mirror"
    incident.known_good(only_240)
    build_wheel(only_240, "plainpkg", "2.4.0")  # the mirror has it as 2.4.0
    code, _, err = invoke(
        "restore", str(project.lock), "--venv", str(tmp_path / "rebuilt"),
        "--find-links", str(only_240), "--offline", "--yes",
    )  # fmt: skip
    assert code == 0, err
    assert "plainpkg-2.4.0.dist-info" in os.listdir(
        next((tmp_path / "rebuilt").glob("lib/python*/site-packages"))
    )


def test_a_nightly_torch_with_pytorch_triton_keeps_its_cache(
    project: Project, tmp_path: Path, monkeypatch
) -> None:
    nightly = tmp_path / "nightly"
    version = "2.12.0.dev20261101+cu130"
    build_wheel(nightly, "pytorch-triton", "3.7.0+git1a2b3c4d")
    build_wheel(
        nightly,
        "torch",
        version,
        files={
            **incident.TORCH_PACKAGE,
            "torch/version.py": torch_version_py(version, "13.0", "d" * 40),
        },
        requires=["pytorch-triton==3.7.0+git1a2b3c4d"],
    )
    incident.install(project.venv, nightly, "--reinstall", f"torch=={version}")
    shutil.rmtree(project.cache)
    make(project.cache, BuiltBy(torch=version, cuda="13.0", git="d" * 40, triton="3.7.0"))
    project.snapshot("--save-cache")
    assert project.verdict().found() == set()  # the cache fits its own venv: no finding
    shutil.rmtree(project.cache)
    code, _, err = invoke("restore", str(project.lock), "--cache", env=project.activated())
    assert code == 0, err
    assert (project.cache / "fxgraph").is_dir()


# ---------------------------------------------------------------------------------------------
# Found by an adversarial review: each of these was wrong once.


def test_fleet_and_two_lockfiles_judge_a_committed_lock_as_diff_does(project: Project) -> None:
    project.snapshot()
    project.commit("lock", "lockfiles")
    node = project.root.parent / "nodes" / "n1.envguard.toml"
    project.snapshot("-o", str(node))
    code, out, err = invoke("fleet", str(project.lock), str(node.parent))
    assert code == 0, out + err
    code, out, err = invoke("diff", str(project.lock), str(node), "--json")
    assert code == 0, out


@pytest.mark.slow
def test_a_change_inside_a_dirty_submodule(project: Project, tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    git(lib, "init", "-q", "-b", "main")
    (lib / "layers.py").write_text("A = 1\n")
    git(lib, "add", ".")
    git(lib, "commit", "-q", "-m", "lib")
    git(project.root, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "lib")
    project.commit("add lib")
    (project.root / "lib" / "layers.py").write_text("A = 2\n")
    project.snapshot()
    project.commit("lock", "lockfiles")
    assert project.verdict().found() == set()
    (project.root / "lib" / "layers.py").write_text("A = 3\n")
    assert project.verdict().found() == {("critical", "code", "lib")}


@pytest.mark.parametrize("setting", ["log", "diff"])
def test_the_users_diff_submodule_setting_changes_nothing(project: Project, setting) -> None:
    project.write("model.py", "def forward(x):\n    return 2 * x\n")
    git(project.root, "config", "diff.submodule", setting)
    project.snapshot()
    project.write("train.py", "import model\n\nmodel.forward(3)\n")
    assert project.verdict().found() == {("critical", "code", "train.py")}


def test_a_worktree_of_the_repository_is_compared_not_the_original(
    project: Project, monkeypatch
) -> None:
    project.snapshot()
    project.commit("lock", "lockfiles")
    worktree = project.root.parent / "ablation"
    git(project.root, "worktree", "add", "-q", "-b", "ablation", str(worktree))
    (worktree / "model.py").write_text("def forward(x):\n    return 0 * x\n")
    monkeypatch.chdir(worktree)
    v = project.verdict(str(project.lock))
    assert v.found() == {("critical", "code", "model.py")}


def test_a_file_name_that_is_not_utf8(project: Project) -> None:
    project.snapshot()
    (project.root / os.fsdecode(b"caf\xe9.py")).write_text("x = 1\n")
    v = project.verdict()
    assert v.found() == set() and any("caf" in c["subject"] for c in v.changes)


def test_what_torch_compile_sets_in_its_own_process(project: Project) -> None:
    project.snapshot(env={"TORCHINDUCTOR_CACHE_DIR": None, "TRITON_CACHE_DIR": None})
    env = {
        "TORCHINDUCTOR_CACHE_DIR": "/tmp/torchinductor_root",
        "TRITON_CACHE_DIR": "/tmp/torchinductor_root/triton/0",
    }
    found = project.verdict(env=env, guard=False).found("info")
    assert not {c for c in found if c[1] == "env"}


@pytest.mark.parametrize(
    "name", ["CUBLAS_WORKSPACE_CONFIG", "PYTHONHASHSEED", "ACCELERATE_MIXED_PRECISION",
             "NVTE_FLASH_ATTN", "MKL_NUM_THREADS", "XLA_FLAGS", "CUDNN_LOGINFO_DBG"],
)  # fmt: skip
def test_training_variables_are_warnings(project: Project, name: str) -> None:
    project.snapshot(env={name: None})
    assert project.verdict(env={name: "1"}).found() == {("warning", "env", name)}


def test_under_slurm_each_rank_has_its_own_gpus(project: Project) -> None:
    slurm = {"SLURM_JOB_ID": "42", "SLURM_PROCID": "0", "CUDA_VISIBLE_DEVICES": "0"}
    project.snapshot(env=slurm)
    v = project.verdict(env={**slurm, "SLURM_PROCID": "1", "CUDA_VISIBLE_DEVICES": "1"})
    assert v.found() == set()


@pytest.mark.slow
def test_more_than_500_committed_files_and_one_model_change(project: Project) -> None:
    project.snapshot()
    project.commit("lock", "lockfiles")
    for i in range(520):
        project.write(f"fleet/gpu-{i:03d}.envguard.toml", f"# {i}\n")
    project.write("model.py", "def forward(x):\n    return 2 * x\n")
    project.commit("many")
    assert project.verdict().found() == {("critical", "code", "model.py")}


def test_a_lock_with_another_name_committed_and_an_export(project: Project) -> None:
    project.snapshot("-o", "env.lock.toml")
    project.lock = project.root / "env.lock.toml"
    project.write("pylock.toml", "lock-version = '1.0'\n")
    project.commit("lock and export")
    assert project.verdict("env.lock.toml").found() == set()


def test_envguard_settings_added_to_pyproject_but_not_committed(project: Project) -> None:
    project.write("pyproject.toml", '[project]\nname = "train"\nversion = "1"\n')
    project.commit("pyproject")
    project.snapshot()
    project.write(
        "pyproject.toml",
        '[project]\nname = "train"\nversion = "1"\n\n[tool.envguard]\nfail-on = "warning"\n',
    )
    assert project.verdict().found() == set()


def test_a_mode_change_documentation_and_a_committed_venv(project: Project) -> None:
    project.snapshot()
    project.commit("lock", "lockfiles")
    (project.root / "train.py").chmod(0o755)
    project.write("README.md", "# notes\n")
    (project.venv / ".gitignore").unlink()  # a venv that git does not ignore, committed
    project.commit("docs and venv")
    v = project.verdict()
    assert v.found() == set()
    assert ("info", "code", "README.md") in v.found("info")


@pytest.mark.slow
def test_a_repository_without_commits(house: Path, tmp_path: Path, monkeypatch) -> None:
    from tests.project import new_project

    project = new_project(tmp_path, house)
    shutil.rmtree(project.root / ".git")
    git(project.root, "init", "-q", "-b", "main")
    monkeypatch.chdir(project.root)
    project.snapshot()
    project.write("model.py", "def forward(x):\n    return 5 * x\n")
    assert project.verdict().found() == {("critical", "code", "model.py")}
    project.write("model.py", "def forward(x):\n    return x\n")
    git(project.root, "add", "model.py", "train.py", "data.py")
    git(project.root, "commit", "-q", "-m", "first commit of the snapshotted code")
    assert project.verdict().found() == set()


def test_the_locks_repository_is_not_here(project: Project, tmp_path: Path, monkeypatch) -> None:
    project.snapshot()
    elsewhere = tmp_path / "moved"
    project.root.rename(elsewhere)
    monkeypatch.chdir(tmp_path)
    v = project.verdict(
        str(elsewhere / "lockfiles" / "train.envguard.toml"),
        "--venv", str(elsewhere / ".venv"), guard=False,
    )  # fmt: skip
    assert v.found() == {("warning", "code", "repository")}


def test_an_untracked_file_changed_in_place_and_a_crlf_patch(project: Project) -> None:
    project.write("big.bin", "x" * 20000)
    project.snapshot()
    project.write("big.bin", "y" * 20000)
    (project.root / "model.py").write_bytes(b"def forward(x):\r\n    return 3 * x\r\n")
    code, out, _ = invoke("diff", "--show-patch", env=project.activated())
    assert code == 1 and "return 3 * x" in out
    assert ("info", "code", "big.bin") in project.verdict().found("info")


def test_a_base_interpreter_replaced_by_another_version(project: Project, tmp_path: Path) -> None:
    home = tmp_path / "usr" / "bin"  # a distro's /usr/bin: python3 -> python3.X
    home.mkdir(parents=True)
    real = Path(os.path.realpath(project.venv / "bin" / "python"))
    minor = f"{sys.version_info[0]}.{sys.version_info[1]}"
    (home / f"python{minor}").symlink_to(real)
    (home / "python3").symlink_to(f"python{minor}")
    python = project.venv / "bin" / "python"
    python.unlink()
    python.symlink_to(home / "python3")
    project.snapshot()
    (home / "python3.99").symlink_to(real)  # the distro upgrade re-points python3
    (home / "python3").unlink()
    (home / "python3").symlink_to("python3.99")
    v = project.verdict(guard=False)
    assert v.found() == {("critical", "python", "interpreter")}
    assert "now runs Python 3.99" in v.one("interpreter")["why"]


def test_guard_judges_only_the_areas_asked(project: Project) -> None:
    import envguard
    from envguard.runtime_guard import DriftError

    project.snapshot()
    os.environ["NCCL_ALGO"] = "Tree"
    try:
        envguard.guard(project.lock, venv=project.venv, fail_on="warning", only=["torch"])
        with pytest.raises(DriftError):
            envguard.guard(project.lock, venv=project.venv, fail_on="warning", only=["env"])
    finally:
        del os.environ["NCCL_ALGO"]


def test_preflight_of_a_wheel_file_and_of_another_venvs_pip(project: Project, tmp_path) -> None:
    wheels = tmp_path / "wheels"
    build_wheel(
        wheels, "torch", "2.12.0+cu128",
        files={**incident.TORCH_PACKAGE,
               "torch/version.py": torch_version_py("2.12.0+cu128", "12.8", "e" * 40)},
    )  # fmt: skip
    wheel = next(wheels.glob("torch-*.whl"))
    argv = [uv_bin(), "pip", "install", "--offline", "--no-deps", str(wheel)]
    code, doc, err = _forecast(project, *argv, env=project.activated())
    assert code == 1, err
    assert any(c["subject"] == "torch" and c["new"] == "2.12.0+cu128"
               for c in doc["result"]["changes"])  # fmt: skip
    scratch = make_venv(tmp_path / "scratch")
    pip = [str(scratch / "bin" / "python"), "-m", "pip", "install", "harmless"]
    code, _, err = invoke("preflight", "--venv", str(project.venv), "--", *pip)
    assert code == 2 and f"targets {scratch}" in err


@pytest.mark.slow
def test_torch_inherited_from_the_base_interpreter(project: Project, tmp_path: Path) -> None:
    """An NGC-style container: torch and its CUDA wheels live in the base interpreter's
    site-packages, and the training venv sees them through --system-site-packages."""
    base = make_venv(tmp_path / "base")  # stands in for the container's Python prefix
    incident.install(base, project.house, "torch==2.11.0+cu128")
    shutil.rmtree(project.venv)
    subprocess.run([uv_bin(), "venv", "-q", "--system-site-packages", "--python",
                    str(_base_python()), str(project.venv)], check=True)  # fmt: skip
    cfg = project.venv / "pyvenv.cfg"
    cfg.write_text("".join(
        f"home = {base / 'bin'}\n" if line.startswith("home") else line + "\n"
        for line in cfg.read_text().splitlines()
    ))  # fmt: skip
    project.install("transformers==5.6.0", "--no-deps")
    project.snapshot()
    locked = lockfile.read(project.lock)
    assert locked.torch and locked.torch.version == "2.11.0+cu128"
    assert locked.cuda.runtime and locked.cuda.runtime.version == "12.8"
    incident.install(base, project.house, "needs-new-torch")  # the image's torch moves
    v = project.verdict(guard=False)
    assert {("critical", "torch", "torch"), ("critical", "cuda", "CUDA runtime")} <= v.found()


def test_torch_that_loads_the_systems_cuda(project: Project, tmp_path: Path) -> None:
    """A torch built against the system's CUDA (no nvidia wheels): the system's libraries
    are the ones it loads, so they are judged like the wheels'."""
    cuda_home = tmp_path / "cuda"
    (cuda_home / "include").mkdir(parents=True)
    (cuda_home / "version.json").write_text('{"cuda": {"version": "12.8.93"}}')
    (cuda_home / "include" / "cudnn_version.h").write_text(
        "#define CUDNN_MAJOR 9\n#define CUDNN_MINOR 7\n#define CUDNN_PATCHLEVEL 1\n"
    )
    shutil.rmtree(project.venv)
    make_venv(project.venv)
    project.install("--no-deps", "torch==2.11.0+cu128")
    env = {"CUDA_HOME": str(cuda_home)}
    project.snapshot(env=env)
    (cuda_home / "include" / "cudnn_version.h").write_text(
        "#define CUDNN_MAJOR 9\n#define CUDNN_MINOR 8\n#define CUDNN_PATCHLEVEL 0\n"
    )
    v = project.verdict(env=env, guard=False)
    cudnn = v.one("cuDNN")
    assert (cudnn["severity"], cudnn["old"], cudnn["new"]) == ("warning", "9.7.1", "9.8.0")
    assert "torch loads the system's copy" in cudnn["why"]


def test_a_journaled_install_is_never_merged_with_a_manual_one(
    project: Project, sglang_house: Path
) -> None:
    """Within two minutes: one package by hand, one through `envguard run`. The journal knows
    they are two installs; the verdict must not call them 'added together'."""
    from tests.conftest import uv_bin
    from tests.project import invoke

    project.snapshot()
    incident.install(project.venv, sglang_house, "sgl-dep-07")
    install = [uv_bin(), "pip", "install", "--offline", "--no-index",
               "--find-links", str(sglang_house), "sgl-dep-08"]  # fmt: skip
    code, _, err = invoke("run", "--", *install, env=project.activated())
    assert code == 0, err
    v = project.verdict()
    rows = {c["subject"]: c for c in v.changes if c["area"] == "packages"}
    assert "2 packages" not in rows
    assert "journal #1" in rows["sgl-dep-08"]["cause"]
    assert "journal" not in rows["sgl-dep-07"]["cause"]


def test_no_code_leaves_the_code_to_git_and_code_brings_it_back(project: Project) -> None:
    project.snapshot()
    project.write("model.py", "def forward(x):\n    return 2 * x\n")
    env = project.activated()
    assert invoke("diff", env=env)[0] == 1
    assert invoke("diff", "--no-code", env=env)[0] == 0  # the hook's default
    assert invoke("diff", "--no-code", "--code", env=env)[0] == 1  # args: [--code]
    project.write("pyproject.toml", '[tool.envguard]\nignore = ["code"]\n')
    assert invoke("diff", env=env)[0] == 0
    assert invoke("diff", "--code", env=env)[0] == 1
    code, _, err = invoke("diff", "--only", "code", "--no-code", env=env)
    assert code == 2 and err.startswith("error: nothing left to judge")


def test_a_relative_cache_dir_and_the_projects_cache_dirs_are_recorded_absolute(
    project: Project,
) -> None:
    make(project.root / "aot", BuiltBy())
    make(project.root / "extra", BuiltBy())
    project.write("pyproject.toml", '[tool.envguard]\ncache-dirs = ["extra"]\n')
    project.snapshot("--cache-dir", "aot")
    locked = lockfile.read(project.lock)
    custom = sorted(c.path for c in locked.caches if c.kind == "custom")
    assert custom == [str(project.root / "aot"), str(project.root / "extra")]
    project.write("pyproject.toml", "")
    assert project.verdict().found() == set()  # and diff still finds both where they are
