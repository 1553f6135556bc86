"""Keep secrets' values out of everything envguard writes or prints."""

from __future__ import annotations

import re

REDACTED = "<redacted>"

_SECRET_NAME = re.compile(
    r"TOKEN|SECRET|PASSW|API_?KEY|ACCESS_?KEY|PRIVATE|CREDENTIAL|AUTH|SESSION_?KEY|SIGNATURE",
    re.IGNORECASE,
)
# scheme://user:password@host or scheme://token@host: everything between // and @.
_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<userinfo>[^/@\s]+)@")


# ?token=…, &sig=…, &X-Amz-Signature=…: presigned and tokened index URLs carry secrets there.
_URL_SECRET_PARAM = re.compile(
    r"(?P<key>[?&][^=&\s#]*(?:token|key|secret|passw|sig|credential|auth)[^=&\s#]*)=[^&\s#]+",
    re.IGNORECASE,
)


def is_secret_name(name: str) -> bool:
    return _SECRET_NAME.search(name) is not None


def strip_url_credentials(text: str) -> str:
    """Drop ``user:password@`` (or a bare ``token@``) from every URL in ``text``, and redact
    secret-looking query parameters (``?token=…``, ``&X-Amz-Signature=…``).

    The user name goes too: on hosted git and package indexes it is often the token itself.
    """
    text = _URL_USERINFO.sub(lambda m: m.group("scheme"), text)
    return _URL_SECRET_PARAM.sub(lambda m: f"{m.group('key')}={REDACTED}", text)


def redact_value(name: str, value: str) -> str:
    if is_secret_name(name):
        return REDACTED
    return strip_url_credentials(value)


_ASSIGNMENT = re.compile(r"(?P<key>[A-Za-z_][A-Za-z0-9_.\-]*)(?P<sep>\s*[=:]\s*)(?P<value>\S.*)")
_TOKEN_LIKE = re.compile(r"^[\"']?[A-Za-z0-9_\-./+=:~]{8,}[\"']?[,;]?$")


def redact_text(text: str, *, code: bool = False) -> tuple[str, int]:
    """Redact ``NAME=value`` / ``name: value`` lines whose name looks secret, and URL
    credentials anywhere; returns the text and how many lines changed.

    In ``code`` (a patch), only token-like literal values go, so ``token_count = 5`` or
    ``password = ask()`` stay and the patch still applies.
    """
    out, changed = [], 0
    for line in text.splitlines(keepends=True):
        new = strip_url_credentials(line)
        m = _ASSIGNMENT.search(new)
        if m and is_secret_name(m.group("key")):
            value = m.group("value").strip()
            if not code or _TOKEN_LIKE.match(value):
                end = "\n" if new.endswith("\n") else ""
                new = f"{new[: m.start('value')]}{REDACTED}{end}"
        changed += new != line
        out.append(new)
    return "".join(out), changed
