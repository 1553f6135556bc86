"""Each variable judged by what it does (#32): a catalogued one by its own rule, one caught
only by its prefix by its family, said as such, never by another variable's reason."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from envguard import catalog, drift
from envguard.drift.report import SEVERITIES
from tests.factories import base


def test_every_catalogued_variable_has_a_reason_of_its_own() -> None:
    reasons = [why for _, why in catalog.ENV_RULES.values()]
    assert len(set(reasons)) == len(reasons)  # none borrows another's
    for name, (severity, why) in catalog.ENV_RULES.items():
        assert severity in SEVERITIES, name
        assert "no rule" not in why and why, name
        assert catalog.env_captured(name), f"{name} has a rule but is never recorded"


@pytest.mark.parametrize(
    ("name", "severity", "words"),
    [
        ("NVIDIA_TF32_OVERRIDE", "critical", "TF32"),
        ("CUDA_LAUNCH_BLOCKING", "critical", "waits for the GPU"),
        ("TORCH_COMPILE_DISABLE", "critical", "eager"),
        ("NCCL_ALGO", "warning", "algorithms"),
        ("NCCL_DEBUG", "info", "logging only"),
        ("OMP_NUM_THREADS", "warning", "threads"),
    ],
)
def test_a_variable_reads_by_its_own_rule_in_diff(name: str, severity: str, words: str) -> None:
    report = drift.compare(base(environ={}), base(environ={name: "0"}))
    (change,) = [c for c in report.changes if c.subject == name]
    assert change.severity == severity and words in change.why


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("NVIDIA_DRIVER_CAPABILITIES", "this NVIDIA_ variable (NVIDIA's drivers and libraries)"),
        ("NCCL_NET_GDR_LEVEL", "this NCCL_ variable (NCCL, the GPUs' collectives)"),
        ("TORCHINDUCTOR_COORDINATE_DESCENT_TUNING", "this TORCHINDUCTOR_ variable"),
    ],
)
def test_a_variable_caught_by_its_prefix_says_so(name: str, family: str) -> None:
    severity, why = catalog.env_rule(name)
    assert severity == "" and why.startswith("envguard has no rule for ") and family in why


_PREFIXES = st.sampled_from([p for p, _ in catalog.ENV_FAMILIES])


@given(prefix=_PREFIXES, rest=st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789", min_size=1))
def test_no_uncatalogued_name_borrows_a_catalogued_reason(prefix: str, rest: str) -> None:
    name = prefix + rest
    _, why = catalog.env_rule(name)
    if name not in catalog.ENV_RULES:
        assert why not in {w for _, w in catalog.ENV_RULES.values()}
