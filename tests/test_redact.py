from __future__ import annotations

import re

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from envguard.probes import environ
from envguard.redact import REDACTED, redact_text, strip_url_credentials

SECRET = st.text(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-", min_size=12, max_size=40
)


def test_captures_training_vars_and_redacts_secrets() -> None:
    env = {
        "NCCL_DEBUG": "INFO",
        "TORCHINDUCTOR_CACHE_DIR": "/c",
        "HOME": "/root",
        "PATH": "/bin",
        "HF_TOKEN": "hf_abc",
        "WANDB_API_KEY": "k",
        "AWS_SECRET_ACCESS_KEY": "x",
        "PIP_INDEX_URL": "https://me:pw@pypi.internal/simple",
        "OMP_NUM_THREADS": "8",
    }
    got = environ.capture(env)
    assert got == {
        "HF_TOKEN": REDACTED,
        "NCCL_DEBUG": "INFO",
        "OMP_NUM_THREADS": "8",
        "PIP_INDEX_URL": "https://pypi.internal/simple",
        "TORCHINDUCTOR_CACHE_DIR": "/c",
        "WANDB_API_KEY": REDACTED,
    }
    assert list(got) == sorted(got)


def test_url_query_secrets() -> None:
    url = "https://idx.example/simple?token=abc123&page=2&X-Amz-Signature=ff00"
    assert strip_url_credentials(url) == (
        "https://idx.example/simple?token=<redacted>&page=2&X-Amz-Signature=<redacted>"
    )


def test_url_credentials() -> None:
    assert strip_url_credentials("git+https://tok@github.com/a/b") == "git+https://github.com/a/b"
    assert (
        strip_url_credentials("a https://u:p@h/x and s3://k:s@b/y") == "a https://h/x and s3://b/y"
    )
    assert (
        strip_url_credentials("user@host:repo.git") == "user@host:repo.git"
    )  # scp-style: no secret


@given(
    name=st.sampled_from(
        [
            "HF_TOKEN",
            "NCCL_PASSWORD",
            "TORCH_API_KEY",
            "CUDA_CREDENTIALS",
            "PIP_PRIVATE_KEY",
            "TRITON_SECRET",
            "UV_ACCESS_KEY",
        ]
    ),
    secret=SECRET,
)
def test_secret_named_values_never_survive(name: str, secret: str) -> None:
    assert secret not in str(environ.capture({name: secret}))


@given(user=SECRET, password=SECRET, host=st.sampled_from(["pypi.internal", "10.0.0.1:8080"]))
def test_url_passwords_never_survive(user: str, password: str, host: str) -> None:
    value = f"https://{user}:{password}@{host}/simple"
    captured = environ.capture({"UV_INDEX_URL": value, "PIP_EXTRA_INDEX_URL": f"x {value}"})
    assert password not in str(captured) and user not in str(captured)


# A value that is a name holding a secret's word (HF_TOKEN_X, page_token) may be code that
# names the secret (password: DEFAULT_TOKEN); the tests of references hold those.
_NAMED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_WORD = re.compile(r"(?i)token|key|secret|passw|pwd|pass|auth|cred|sig|salt|hmac|cookie")


@given(secret=SECRET)
def test_redact_text_dotenv(secret: str) -> None:
    text, n = redact_text(f"API_KEY={secret}\nLR=0.1\nexport HF_TOKEN={secret}\n")
    assert secret not in text and n == 2 and "LR=0.1" in text


@given(secret=SECRET)
def test_redact_text_yaml(secret: str) -> None:
    assume(not (_NAMED.fullmatch(secret) and _WORD.search(secret)))
    text, n = redact_text(f"API_KEY={secret}\nLR=0.1\npassword: {secret}\n")
    assert secret not in text and n == 2 and "LR=0.1" in text


@pytest.mark.parametrize("value", ["A00TOKEN_000", "HF_TOKEN", "page_token", "DEFAULT_KEY_2"])
def test_a_dotenv_value_shaped_as_a_name_is_a_literal(value: str) -> None:
    text, n = redact_text(f"API_KEY={value}\n+export AWS_SECRET_ACCESS_KEY={value}\n")
    assert value not in text and n == 2


@pytest.mark.parametrize(
    ("line", "kept"),
    [
        ("client = Client(api_key=API_TOKEN)", "API_TOKEN"),
        ("    password: DEFAULT_KEK_PASSPHRASE", "DEFAULT_KEK_PASSPHRASE"),
        ("token = page_token", "page_token"),
    ],
)
def test_code_naming_a_secret_is_kept(line: str, kept: str) -> None:
    assert kept in redact_text(line + "\n", code=True)[0]


def test_a_random_value_holding_a_word_is_no_name() -> None:
    assert "A00TOKEN_000" not in redact_text("    password: A00TOKEN_000\n")[0]
