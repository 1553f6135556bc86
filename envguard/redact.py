"""Keep secrets' values out of everything envguard writes or prints.

A value is a secret by its name (``HF_TOKEN=…``, ``{"api_key": …}``,
``os.environ["AWS_SECRET_ACCESS_KEY"] = …``) or by its shape, whatever it is called: the
prefixes and formats secret scanners know (``hf_``, ``ghp_``/``github_pat_``, ``sk-``,
``xoxb-``, ``AKIA…``, JWTs, PEM private keys, ``Bearer …``). Lockfiles are committed and
shared, so the patch of the training code goes through this too.
"""

from __future__ import annotations

import re

REDACTED = "<redacted>"

_SECRET_NAME = re.compile(
    r"TOKEN|SECRET|PASSW|API_?KEY|ACCESS_?KEY|PRIVATE|CREDENTIAL|AUTH|SESSION_?KEY|SIGNATURE"
    r"|(?:^|[^A-Z])KEY$",
    re.IGNORECASE,
)
# scheme://user:password@host or scheme://token@host: everything between // and @.
_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<userinfo>[^/@\s]+)@")

# ?token=…, &sig=…, &X-Amz-Signature=…: presigned and tokened index URLs carry secrets there.
_URL_SECRET_PARAM = re.compile(
    r"(?P<key>[?&][^=&\s#]*(?:token|key|secret|passw|sig|credential|auth)[^=&\s#]*)=[^&\s#]+",
    re.IGNORECASE,
)
# Secrets by their shape: what secret scanners match, whatever the variable is called.
_SHAPES = re.compile(
    "|".join(
        (
            r"\bhf_[A-Za-z0-9]{20,}",  # Hugging Face
            r"\bgh[pousr]_[A-Za-z0-9]{20,}",  # GitHub
            r"\bgithub_pat_[A-Za-z0-9_]{20,}",
            r"\bglpat-[A-Za-z0-9_\-]{20,}",  # GitLab
            r"\bsk-(?:proj-|ant-|live_|test_)?[A-Za-z0-9_\-]{20,}",  # OpenAI, Anthropic, Stripe
            r"\bxox[abeprs]-[A-Za-z0-9\-]{10,}",  # Slack
            r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",  # AWS access key ids
            r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",  # JWT
            r"\bnpm_[A-Za-z0-9]{30,}",
            r"\bpypi-[A-Za-z0-9_\-]{40,}",
            r"\bwandb_v1_[A-Za-z0-9_\-]{20,}",
            r"(?<=[Bb]earer )[A-Za-z0-9._~+/\-]{16,}=*",
        )
    )
)
_PEM_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----")
_PEM_END = re.compile(r"-----END [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----")


def is_secret_name(name: str) -> bool:
    return _SECRET_NAME.search(name) is not None


def strip_url_credentials(text: str) -> str:
    """Drop ``user:password@`` (or a bare ``token@``) from every URL in ``text``, redact
    secret-looking query parameters (``?token=…``) and anything shaped like a secret.

    The user name goes too: on hosted git and package indexes it is often the token itself.
    """
    text = _URL_USERINFO.sub(lambda m: m.group("scheme"), text)
    text = _URL_SECRET_PARAM.sub(lambda m: f"{m.group('key')}={REDACTED}", text)
    return _SHAPES.sub(REDACTED, text)


def redact_value(name: str, value: str) -> str:
    if is_secret_name(name):
        return REDACTED
    return strip_url_credentials(value)


# NAME = value, name: value, "name": value, ["NAME"] = value, name=value inside a call
_ASSIGNMENT = re.compile(
    r"""(?P<key>[A-Za-z_][A-Za-z0-9_.\-]*)["']?\]?(?P<sep>\s*[=:]\s*)(?=[^\s,)}])"""
)
# A literal that looks like a credential: long, letters and digits, no spaces.
_TOKEN_LIKE = re.compile(
    r"""(?P<q>["']?)(?=[^"'\s]*[0-9])(?=[^"'\s]*[A-Za-z])[A-Za-z0-9_\-./+=:~]{16,}(?P=q)"""
)


def redact_text(text: str, *, code: bool = False) -> tuple[str, int]:
    """Redact secrets in ``text``; returns the text and how many lines changed.

    By shape everywhere; by name on ``NAME=value``-like lines. In ``code`` (a patch), only
    literal token-like values go by name, so ``token_count = 5`` or ``password = ask()`` stay
    and the patch still applies. Lines inside a PEM private key block go whole.
    """
    out, changed, in_pem = [], 0, False
    for line in text.splitlines(keepends=True):
        new, in_pem = _redact_line(line, code=code, in_pem=in_pem)
        changed += new != line
        out.append(new)
    return "".join(out), changed


def _redact_line(line: str, *, code: bool, in_pem: bool) -> tuple[str, bool]:
    end = "\n" if line.endswith("\n") else ""
    if in_pem or _PEM_BEGIN.search(line):
        closing = _PEM_END.search(line) is not None
        keep = line[:1] if code and line[:1] in "+- " else ""  # a patch line keeps its mark
        return f"{keep}{REDACTED}{end}", not closing
    new = strip_url_credentials(line)
    pos = 0
    while (m := _ASSIGNMENT.search(new, pos)) is not None:
        pos = m.end()
        if not is_secret_name(m.group("key")):
            continue
        literal = _TOKEN_LIKE.match(new, m.end())
        if literal:
            q = literal.group("q")
            new = f"{new[: m.end()]}{q}{REDACTED}{q}{new[literal.end() :]}"
        elif not code:
            new = f"{new[: m.end()]}{REDACTED}{end}"
            break
    return new, False
