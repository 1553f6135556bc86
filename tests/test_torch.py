from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from envguard.demo.wheels import torch_version_py
from envguard.model import Distribution
from envguard.probes import torch as torch_probe


def test_reads_the_real_h200_version_py(fixture_dir: Path) -> None:
    fields = torch_probe.parse_version_file((fixture_dir / "torch_version.py").read_text())
    assert fields["__version__"] == "2.11.0+cu130"
    assert fields["cuda"] == "13.0"
    assert fields["git_version"] == "70d99e998b4955e0049d13a98d77ae1b14db1f45"
    assert fields["debug"] is False and fields["hip"] is None


def test_computed_values_are_skipped_not_executed() -> None:
    src = "import os\n__version__ = '0.26.0+cu130'\ncuda = os.system('false')\ngit_version = 'ab'\n"
    assert torch_probe.parse_version_file(src) == {
        "__version__": "0.26.0+cu130",
        "git_version": "ab",
    }


def test_pypi_wheel_label_only_in_version_py(tmp_path: Path) -> None:
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "version.py").write_text(
        torch_version_py("2.11.0+cu130", "13.0", "a" * 40)
    )
    build = torch_probe.probe(tmp_path, Distribution(name="torch", version="2.11.0"))
    assert (build.version, build.variant, build.source) == ("2.11.0+cu130", "cu130", "version.py")
    assert build.index_url is None  # pip and uv record no index: unknown, not PyPI


def test_pytorch_index_wheel_label_in_metadata(tmp_path: Path) -> None:
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "version.py").write_text(
        torch_version_py("2.11.0+cu128", "12.8", "a" * 40)
    )
    build = torch_probe.probe(tmp_path, Distribution(name="torch", version="2.11.0+cu128"))
    # the label tells the PyTorch index's kind of build, not that this one came from there
    assert build.index_url is None and build.variant == "cu128"
    assert torch_probe.labelled(build.metadata_version, build.variant)


def test_no_version_py_falls_back_to_metadata(tmp_path: Path) -> None:
    build = torch_probe.probe(tmp_path, Distribution(name="torchvision", version="0.26.0+cpu"))
    assert (build.version, build.variant, build.source) == ("0.26.0+cpu", "cpu", "METADATA")
    assert build.index_url is None
    triton = torch_probe.probe(tmp_path, Distribution(name="triton", version="3.6.0"))
    assert (triton.variant, triton.index_url) == ("", None)


def test_a_source_the_install_recorded_is_said(tmp_path: Path) -> None:
    url = "https://download.pytorch.org/whl/cu128/torch-2.11.0%2Bcu128-cp312-none-any.whl"
    dist = Distribution(name="torch", version="2.11.0+cu128", direct_url=url)
    assert torch_probe.probe(tmp_path, dist).index_url == url


def test_variant_from_build_fields_when_no_label() -> None:
    assert torch_probe.variant_of("2.11.0", {"__version__": "2.11.0", "cuda": "12.8"}) == "cu128"
    assert (
        torch_probe.variant_of("2.9.0", {"__version__": "2.9.0", "hip": "6.4.43482"}) == "rocm6.4"
    )
    assert torch_probe.variant_of("2.9.0", {"__version__": "2.9.0", "xpu": "20250101"}) == "xpu"
    assert torch_probe.variant_of("2.9.0", {"__version__": "2.9.0"}) == "cpu"
    assert torch_probe.variant_of("2.9.0+rocm6.3", {}) == "rocm6.3"


@given(
    major=st.integers(10, 14),
    minor=st.integers(0, 9),
    patch=st.integers(0, 30),
    git=st.text("0123456789abcdef", min_size=40, max_size=40),
)
def test_version_py_round_trip(major: int, minor: int, patch: int, git: str) -> None:
    version = f"2.{patch}.0+cu{major}{minor}"
    fields = torch_probe.parse_version_file(torch_version_py(version, f"{major}.{minor}", git))
    assert fields["__version__"] == version and fields["git_version"] == git
    assert torch_probe.variant_of(version, fields) == f"cu{major}{minor}"
    assert torch_probe.variant_of(version.split("+")[0], fields) == f"cu{major}{minor}"
