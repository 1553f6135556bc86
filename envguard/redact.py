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

# Names that say "a secret" outright, and names that only may (sort_key, cache_key): the
# value of the first kind goes whatever it looks like, of the second only if it looks like one.
_STRONG_NAME = re.compile(
    r"TOKEN|SECRET|PASSW|PASSPHRASE|(?:^|[^A-Z])PASS(?:$|[^A-Z])|(?:^|[^A-Z])PWD(?:$|[^A-Z])"
    r"|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIAL|AUTH(?!OR(?!IZ))|SESSION_?KEY|SIGNATURE",
    re.IGNORECASE,
)
_WEAK_NAME = re.compile(r"(?:^|[^A-Z])KEY$|PRIVATE", re.IGNORECASE)
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
            r"\bGOCSPX-[A-Za-z0-9_\-]{8,}",  # Google OAuth client secrets
            r"\b1//0[A-Za-z0-9_\-]{16,}",  # Google refresh tokens
            r"\bya29\.[A-Za-z0-9_\-]{20,}",  # Google access tokens
            r"\bAIza[0-9A-Za-z_\-]{35}",  # Google API keys
            r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}",  # Stripe
            r"(?<=[Bb]earer )[A-Za-z0-9._~+/\-]{16,}=*",
        )
    )
)
_PEM_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----")
_PEM_END = re.compile(r"-----END [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----")


def is_secret_name(name: str) -> bool:
    return _STRONG_NAME.search(name) is not None or _WEAK_NAME.search(name) is not None


def is_strong_secret_name(name: str) -> bool:
    return _STRONG_NAME.search(name) is not None


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
# Any quoted literal of four or more characters: what a secret-named key holds in code.
_QUOTED = re.compile(r"""(?P<q>["'])(?:(?!(?P=q)|\\).|\\.){4,}(?P=q)""")
# NAME=value as a shell or .env line (in a patch, after its +/-/space mark)
_ENV_LINE = re.compile(
    r"^(?P<lead>[+\- ]?\s*(?:export\s+)?[A-Za-z_][A-Za-z0-9_]*=)(?P<value>\S.*)$"
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
    env = _ENV_LINE.match(new.rstrip("\n"))
    if env and is_strong_secret_name(env.group("lead").split("=")[0].split()[-1].lstrip("+- ")):
        return f"{env.group('lead')}{REDACTED}{end}", False
    pos = 0
    while (m := _ASSIGNMENT.search(new, pos)) is not None:
        pos = m.end()
        key = m.group("key")
        if not is_secret_name(key):
            continue
        literal = _TOKEN_LIKE.match(new, m.end())
        if literal is None and is_strong_secret_name(key):
            literal = _QUOTED.match(new, m.end())
        if literal:
            q = literal.group("q")
            new = f"{new[: m.end()]}{q}{REDACTED}{q}{new[literal.end() :]}"
        elif not code:
            new = f"{new[: m.end()]}{REDACTED}{end}"
            break
    return new, False


def binary_holds_secrets(data: bytes) -> bool:
    """A binary file's content (a pickle, a SQLite file) that holds a secret by shape, or a
    secret-looking name beside a value: such a file's patch is not kept."""
    text = data.decode("latin-1")
    return _SHAPES.search(text) is not None or _BINARY_NAME.search(text) is not None


_BINARY_NAME = re.compile(
    r"(?:token|secret|passw|api_?key|access_?key|private_?key|credential|client_secret)",
    re.IGNORECASE,
)
