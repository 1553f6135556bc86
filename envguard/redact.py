"""Keep secrets' values out of everything envguard writes or prints.

Lockfiles and journals are committed and shared, so every string envguard writes or prints
(the patch, environment values, commands, ``--json``, screens, errors) goes through
:func:`redact`. Its rules are the ones secret scanners use (gitleaks, detect-secrets):

- shapes, whatever the variable is called: provider prefixes (``AKIA``, ``ghp_``,
  ``github_pat_``, ``glpat-``, ``xoxb-``, ``sk_live_``, ``AIza``, ``sk-``/``sk-proj-``,
  ``sk-ant-``, ``hf_``, …), JWTs, PEM private key blocks;
- URLs: ``user:password@``, secret-named query parameters (``?token=``), Slack and Discord
  webhook paths, and a random-looking path segment (``/<token>/simple``);
- headers and command lines: ``Authorization: Basic|Bearer|token …``, ``-u user:pass``,
  ``--password X``/``--token X``/``--api-key X``, ``mysql -pX``, ``.netrc`` lines;
- keyword assignments (password, secret, token, api_key, client_secret, …) with ``=``, ``:``,
  ``=>``, ``:=``, quoted or not: INI, YAML, .env, JSON, TOML, shell, code, XML, connection
  strings (``Password=…;``). A word that only may name a secret (``key``, ``token``) takes a
  value only when it looks random (hex, or mixed-case letters and digits).

Then gitleaks' default rules (:mod:`envguard.secret_rules`) find what these did not: the
tokens of 219 providers, by prefix or by the provider's name before them.

What stays: hashes and shas (no keyword beside them), versions, ``token_count = 5``,
``password = getpass()``, ``pad_token = "<pad>"``; a redacted look-alike damages every diff.

Linear time, whatever the input: each rule is anchored on a literal and bounded (``{0,N}``,
no nested unbounded quantifier), each family is one ``re`` pass over the text, and nothing
rebuilds the text per match.
"""

from __future__ import annotations

import base64
import binascii
import functools
import itertools
import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar
from urllib.parse import unquote

REDACTED = "<redacted>"
_T = TypeVar("_T")

# --- names --------------------------------------------------------------------------------

_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def _set(words: str) -> frozenset[str]:
    return frozenset(words.split())


# A name holding one of these words names a secret, whatever its value looks like.
_SECRET_WORDS = _set(
    "pwd passphrase passcode secret secrets credential credentials creds apikey accesskey "
    "secretkey privatekey authtoken accesstoken apitoken"
)
# X_key / X_token with such an X is a credential: api_key, access_token, client_key.
_QUALIFIERS = _set(
    "api access secret private client auth refresh session bearer oauth account master "
    "signing encryption personal deploy app bot service admin webhook consumer security "
    "storage subscription license sas ssh gpg pgp aws hf gh github gitlab npm pypi wandb "
    "openai anthropic slack discord stripe twilio sendgrid"
)
# A tokenizer's tokens: pad_token = "<pad>" is no credential.
_SPECIAL_TOKENS = _set(
    "pad eos bos unk sep cls mask start end sos eot eom special image audio video begin stop "
    "think default additional new max num first last next prev current cur word sub subword "
    "decoder vision tool chat system user assistant fim prefix suffix middle placeholder "
    "dummy ignore sentinel separator padding unknown text input output page continuation "
    "cancellation cancel resume sync per"
)
_WEAK_WORDS = _set("token key auth sig signature salt hmac cookie")
# password_length, token_count, secret_name, api_key_file: about a secret, not one.
_NOT_SECRET_LAST = _set(
    "count counts len length size num number max min limit type types kind name names id ids "
    "file files path paths dir field fields label prompt hint pattern regex policy required "
    "enabled enable disable disabled url uri urls endpoint env var header format mode timeout "
    "ttl expiry expires expiration algorithm algo version method scheme provider source "
    "location store manager backend class fn func callback stdin cmd command helper index idx "
    "position pos ratio rate prob dim dims shape strategy budget usage used total bits rounds "
    "iterations lifetime seconds secs minutes hours days ms duration interval info details "
    "config settings options sources handler loader factory error errors exception date time "
    "at timestamp arn"
)
_VERBS = _set(
    "get set has is load fetch read make create build validate check ensure update delete "
    "remove parse generate lookup resolve find"
)


@functools.lru_cache(maxsize=4096)
def _strength(name: str) -> int:
    """2: ``name`` names a secret; 1: it may (``key``, ``token``: only a random-looking value
    goes); 0: it does not. An option (``--token``) that may name one does."""
    words = [w.lower() for w in _WORDS.findall(name)]
    if not words or words[-1] in _NOT_SECRET_LAST or name in ("PWD", "OLDPWD", "pass"):
        return 0  # about a secret (token_count); the shell's PWD; prose ("a first pass:")
    if len(words) > 1 and words[0] in _VERBS:
        return 0  # get_credentials, update_api_key: a function, a flag
    if words[-1] == "pass" or any(w in _SECRET_WORDS or "passw" in w for w in words):
        return 2  # DB_PASS, not pass_rates
    for before, word in zip(["", *words], words, strict=False):
        if word in ("key", "token") and before in _QUALIFIERS:
            return 2
        if word == "token" and before and before not in _SPECIAL_TOKENS:
            return 2
    if not any(w in _WEAK_WORDS for w in words):
        return 0
    return 2 if name.startswith("-") and words[-1] in ("token", "auth") else 1


def is_secret_name(name: str) -> bool:
    return _strength(name) > 0


def is_strong_secret_name(name: str) -> bool:
    return _strength(name) == 2


# --- values -------------------------------------------------------------------------------

# Not a secret whatever its key: a placeholder, a template, a small number, a constant.
_KEEP_VALUE = re.compile(
    r"""<[^<>\n]{0,64}>|\$\{?[A-Za-z_][\w.:\-]{0,64}\}?|\*{3,}|\.\.\.|…|-?\d{1,5}(?:\.\d+)?"""
    r"""|(?i:none|null|nil|true|false|undefined)"""
)
_TEMPLATE = re.compile(r"""\{[\w.\[\]"' ]{0,64}\}|\$\{|%\(\w{0,64}\)s|%s""")  # f"{token}"
# Code that computes a value (get_password(), os.environ["X"], args.token, a type) rather
# than holding it: what follows is code too, and only its literals can be secrets.
_REFERENCE = re.compile(
    r"(?P<head>[A-Za-z_]\w{0,63})(?P<dots>(?:\.[A-Za-z_]\w{0,63}){0,8})"
    r"(?P<tail>[ \t]{0,4}[(\[|=]|[ \t]*\Z)"
)
_ROOTS = _set(
    "self cls args opts options config cfg conf settings os env environ secrets params kwargs "
    "request ctx context st app flags"
)
_TYPES = _set(
    "str bytes int float bool dict list tuple set frozenset object optional union literal "
    "callable sequence mapping any none secretstr secretbytes path final lambda"
)
_IDENT = re.compile(r"[A-Za-z_]\w{0,63}")
_HEX = re.compile(r"[0-9a-fA-F]+")
_RANDOM_CHARS = re.compile(r"[A-Za-z0-9+/=_\-.~]+")


def _looks_random(value: str, least: int = 16) -> bool:
    """Hex, or letters of both cases and digits that change class often (random text does
    at ~60% of its letters, ``MetaLlama370BInstruct`` at 30%); not a dotted or snake_case
    name (``rfc7191.id_aa_KP_keyPkgId``)."""
    if len(value) < least or not _RANDOM_CHARS.fullmatch(value):
        return False
    has_digit = any(c.isdigit() for c in value)
    if _HEX.fullmatch(value):
        return has_digit and any(c.isalpha() for c in value)
    words = re.split(r"[_\-]", value)
    if "." in value or (len(words) > 1 and not any(c.isdigit() for c in value)):
        return False
    kinds = ["d" if c.isdigit() else "u" if c.isupper() else "l" for c in value if c.isalnum()]
    if not (has_digit and "u" in kinds and "l" in kinds):
        return False
    changes = sum(a != b for a, b in itertools.pairwise(kinds))
    return changes >= 0.35 * (len(kinds) - 1)


def _class_name(word: str) -> bool:
    """HiddenText, SSHPrivateKeyTypes: a type, where code annotates a secret's name."""
    return _CLASS.fullmatch(word) is not None


_CLASS = re.compile(r"(?:[A-Z]{1,4}[a-z]{2,}){2,8}")


def _mentions_secret(value: str) -> bool:
    """A word of ``value`` is one a secret's name holds: page_token, cloud_credential_info."""
    return any(
        w in _SECRET_WORDS or w in _WEAK_WORDS or "passw" in w
        for w in (w.lower() for w in _WORDS.findall(value))
    )


def _is_reference(value: str) -> bool:
    """Code, not a literal: a call, a subscript, a dotted name, a type (``str | None``), a
    variable named for the secret (``api_key=api_key``), an expression (``await f()``)."""
    if _VARIABLE.fullmatch(value) and _NAME_WORDS.fullmatch(value) and _mentions_secret(value):
        return True
    m = _REFERENCE.match(value)
    if m is None:
        return False
    head, tail = m.group("head"), m.group("tail").strip()[:1]
    if head.lower() in _TYPES or head in _CODE_WORDS or tail in ("(", "[") or m.group("dots"):
        return True
    return _class_name(head) and tail in ("|", "=")


# page_token, apiKey, DEFAULT_KEK_PASSPHRASE: not Hunter2 (a password is one word too)
_VARIABLE = re.compile(r"[a-z_][A-Za-z0-9_]{0,63}|[A-Z][A-Z0-9]{0,31}(?:_[A-Z0-9]{1,31}){1,8}")
# A name is made of words, each letters with digits only at its end (api_key_v2, x509_key,
# pageToken2): A00TOKEN_000 is a random value that happens to hold a word, not a constant.
_NAME_WORDS = re.compile(
    r"_*[A-Za-z]+[0-9]*(?:_+[A-Za-z]+[0-9]*|_+[0-9]{1,2}|[A-Z][a-z]+[0-9]*)*_*"
)
_CODE_WORDS = frozenset(("await", "not", "yield", "lambda", "self"))


def _secret_value(value: str, strength: int, key: str = "") -> bool:
    """Whether ``value``, held by a name of that strength, is a secret: not a placeholder,
    a template, a structure (``{``, ``[``), nor the name itself (an enum's constant)."""
    value = value.strip()
    if not value or value[0] in "{[(" or _KEEP_VALUE.fullmatch(value) or _TEMPLATE.search(value):
        return False
    if value.startswith(("/", "~/", "./")):
        return False  # GOOGLE_APPLICATION_CREDENTIALS=/path/key.json: where it is
    words = [w.lower() for w in _WORDS.findall(value)]
    named = [w.lower() for w in _WORDS.findall(key.rsplit(".", 1)[-1])]
    if words and words == named[-len(words) :]:
        return False  # CHALLENGE_PASSWORD: "challengePassword", an enum's constant
    if (" " in value or "." in value) and _mentions_secret(value):
        return False  # "llm.token_count.total", "The API key to use": a name, a description
    return _looks_random(value) if strength == 1 else True


# --- PEM blocks ---------------------------------------------------------------------------

_PEM_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]{0,64}PRIVATE KEY(?: BLOCK)?-----")
_PEM_END = re.compile(r"-----END [A-Z0-9 ]{0,64}PRIVATE KEY(?: BLOCK)?-----")
# A line of a key's body, as a file, a patch or a string literal holds it: base64, or a
# header (Proc-Type: 4,ENCRYPTED), or blank.
_PEM_BODY = re.compile(
    r"""[+\- ]?[ \t]*["'`]?(?:[A-Za-z0-9+/=]{1,256}|[A-Za-z][\w\-]{0,31}:[^\n\x00]{0,256})?"""
    r"""(?:\\n)?["'`]?[ \t]*[,+\\]?[ \t]*"""
)


def _pem_blocks(text: str, code: bool) -> str:
    """Each line of a private key block, BEGIN to END, becomes ``<redacted>`` (a patch line
    keeps its mark). A block goes on only while its lines look like a key's: a BEGIN line
    that code keeps as a constant does not take the rest of the file with it."""
    out: list[str] = []
    pos = 0
    while (m := _PEM_BEGIN.search(text, pos)) is not None:
        start = text.rfind("\n", 0, m.start()) + 1
        end = _line_end(text, m.end())
        closed = _PEM_END.search(text, m.end(), end) is not None
        while not closed and end < len(text):
            after = _line_end(text, end + 1)
            line = text[end + 1 : after]
            closed = _PEM_END.search(line) is not None
            if not closed and not _PEM_BODY.fullmatch(line):
                break
            end = after
        lines = text[start:end].split("\n")
        marks = [_mark(ln, code) for ln in lines]
        out += (text[pos:start], "\n".join(f"{mark}{REDACTED}" for mark in marks))
        pos = end
    out.append(text[pos:])
    return "".join(out)


# --- Kubernetes Secrets -------------------------------------------------------------------

_K8S_SECRET = re.compile(r"kind:[ \t]*[\"']?(?i:secret)\b")
_K8S_DATA = re.compile(r"(?P<indent>[ \t]*)(?:data|stringData):[ \t]*(?:#.*)?")
_K8S_ENTRY = re.compile(r"(?P<indent>[ \t]*)(?P<key>[\w.-]{1,253}):[ \t]*(?P<value>\S.*)")


def _k8s_secrets(text: str, code: bool) -> str:
    """A Secret's manifest (``kind: Secret``, in either order with its ``data:``, as kubectl
    prints it): every value of its ``data:`` and ``stringData:`` maps. gitleaks' own rule for
    it reads 300 characters past each "kind:" and "data:" and took 3 s a megabyte; this
    reads each line of a Secret's document once."""
    lines = text.split("\n")
    out: list[str] = []
    doc: list[str] = []
    for line in lines:
        body = line[len(_mark(line, code)) :]
        if body.rstrip() == "---":
            out += _k8s_document(doc, code)
            doc = []
        doc.append(line)
    out += _k8s_document(doc, code)
    return "\n".join(out)


def _k8s_document(lines: list[str], code: bool) -> list[str]:
    if not any(_K8S_SECRET.search(line) for line in lines):
        return lines
    out, within, items = [], -1, -1  # the indents of the data map read (-1: none), its keys
    for line in lines:
        mark = _mark(line, code)
        body = line[len(mark) :]
        indent = body[: len(body) - len(body.lstrip(" \t"))]
        if within >= 0 and body.strip() and len(indent) > within:  # an entry, or its value's
            entry = _K8S_ENTRY.fullmatch(body)  # next line (a block scalar's "|")
            items = len(indent) if items < 0 else items
            key = f"{entry.group('key')}: " if entry and len(indent) == items else ""
            out.append(f"{mark}{indent}{key}{REDACTED}")
            continue
        data = _K8S_DATA.fullmatch(body)
        within = len(data.group("indent")) if data else (within if not body.strip() else -1)
        items = -1
        out.append(line)
    return out


def _mark(line: str, code: bool) -> str:
    """A patch line's ``+``/``-``/space mark, which a redacted line keeps ("" for text)."""
    return line[:1] if code and line[:1] in ("+", "-", " ") else ""


def _line_end(text: str, at: int) -> int:
    end = text.find("\n", at)
    return len(text) if end < 0 else end


# --- URLs ---------------------------------------------------------------------------------

_URL = re.compile(r"://(?P<rest>[^\s\"'<>`\\]{1,2048})")
_URL_PARTS = re.compile(r"(?P<authority>[^/?#]*)(?P<path>[^?#]*)(?P<query>[?#].*)?", re.DOTALL)
_QUERY_PARAM = re.compile(r"(?P<key>[^=&;?#]{1,128})=(?P<value>[^&;#]*)")
_WEBHOOKS = (("hooks.slack.com", "/services/"), ("discord.com", "/api/webhooks/"),
             ("discordapp.com", "/api/webhooks/"))  # fmt: skip


def _url(m: re.Match[str]) -> str:
    """``://`` and what follows: userinfo dropped (on hosted git and package indexes the user
    name is often the token itself), secret-named query parameters, webhook paths and
    random-looking path segments redacted."""
    parts = _URL_PARTS.match(m.group("rest"))
    assert parts is not None  # every part may be empty
    host = parts.group("authority").rpartition("@")[2]
    path = parts.group("path")
    for hook_host, prefix in _WEBHOOKS:
        if host.lower().endswith(hook_host) and path.startswith(prefix) and len(path) > len(prefix):
            path = prefix + REDACTED
    segments = [REDACTED if _token_segment(s) else s for s in path.split("/")]
    query = _QUERY_PARAM.sub(_param, parts.group("query") or "")
    return f"://{host}{'/'.join(segments)}{query}"


def _token_segment(segment: str) -> bool:
    """``/<token>/simple``: a long random segment; not a hash (hex: a wheel's, a commit's),
    nor a file or a model name (``torch-2.11.0-….whl``, ``Meta-Llama-3-70B-Instruct``). A
    percent-encoded one (``%2B``, ``%2F`` of a base64 token) is judged as it decodes; and
    gitleaks' rules judge each segment alone, since theirs end a token at a quote, a space
    or the end of the text, never at a ``/``."""
    decoded = unquote(segment)
    if decoded != segment:
        return _token_segment(decoded.replace("%", "").replace("/", ""))
    if len(segment) >= 8 and _gitleaks_spans(segment):  # a token alone, as its rule ends it
        return True
    return "." not in segment and not _HEX.fullmatch(segment) and _looks_random(segment, 20)


def _param(m: re.Match[str]) -> str:
    value = m.group("value")
    if value and (_strength(m.group("key")) > 0 or ("%" in value and _token_segment(value))):
        return f"{m.group('key')}={REDACTED}"
    return m.group(0)


# --- shapes: provider prefixes ------------------------------------------------------------


def _shape(prefix: str, rest: str) -> str:
    """``prefix`` at a word's start, then ``rest``. The first character is a plain literal,
    so that ``re`` skips to the places it occurs; the start test comes after it."""
    first = re.escape(prefix[0])
    return f"{first}(?<![A-Za-z0-9_]{first}){re.escape(prefix[1:])}{rest}"


_B64URL = r"[A-Za-z0-9_\-]{8,4096}"
_SHAPES = re.compile(
    "|".join(
        (
            _shape("hf_", r"[A-Za-z0-9]{20,256}"),  # Hugging Face
            _shape("gh", r"[pousr]_[A-Za-z0-9]{20,256}"),  # GitHub
            _shape("github_pat_", r"[A-Za-z0-9_]{20,256}"),
            _shape("gl", r"(?:pat|dt|ptt|rt|cbt|soat)-[A-Za-z0-9_\-]{20,256}"),  # GitLab
            _shape("sk-", r"(?:proj-|ant-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,256}"),  # OpenAI
            _shape("sk_", r"(?:live|test)_[A-Za-z0-9]{16,256}"),  # Stripe
            _shape("rk_", r"(?:live|test)_[A-Za-z0-9]{16,256}"),
            _shape("xox", r"[abeoprs]-[A-Za-z0-9\-]{10,256}"),  # Slack
            _shape("xapp-", r"[0-9]-[A-Za-z0-9\-]{10,256}"),
            _shape("A", r"(?:KIA|SIA|GPA|IDA|ROA|IPA|NPA|NVA)[0-9A-Z]{16}(?![0-9A-Za-z])"),  # AWS
            # JWT: three base64url parts, the first two JSON objects
            _shape("eyJ", rf"{_B64URL}\.eyJ{_B64URL}\.{_B64URL}"),
            _shape("npm_", r"[A-Za-z0-9]{30,256}"),
            _shape("pypi-", r"[A-Za-z0-9_\-]{40,1024}"),
            _shape("wandb_v1_", r"[A-Za-z0-9_\-]{20,256}"),
            _shape("GOCSPX-", r"[A-Za-z0-9_\-]{8,256}"),  # Google OAuth client secrets
            _shape("1//0", r"[A-Za-z0-9_\-]{16,1024}"),  # Google refresh tokens
            _shape("ya29.", r"[A-Za-z0-9_\-]{20,2048}"),  # Google access tokens
            _shape("AIza", r"[0-9A-Za-z_\-]{35}"),  # Google API keys
            _shape("SG.", r"[A-Za-z0-9_\-]{16,64}\.[A-Za-z0-9_\-]{16,128}"),  # SendGrid
            _shape("SK", r"[0-9a-fA-F]{32}(?![0-9A-Za-z])"),  # Twilio
            _shape("shp", r"(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"),  # Shopify
            _shape("do", r"[opr]_v1_[a-f0-9]{64}"),  # DigitalOcean
            _shape("dapi", r"[a-f0-9]{32}(?:-[0-9])?"),  # Databricks
            _shape("dckr_pat_", r"[A-Za-z0-9_\-]{20,256}"),  # Docker Hub
            _shape("hv", r"[sb]\.[A-Za-z0-9_\-]{24,256}"),  # HashiCorp Vault
            _shape("AGE-SECRET-KEY-1", r"[0-9A-Z]{58}"),
            _shape("gsk_", r"[A-Za-z0-9]{40,256}"),  # Groq
            _shape("r8_", r"[A-Za-z0-9]{30,256}"),  # Replicate
            _shape("gl", r"(?:sa|c)_[A-Za-z0-9_\-+/=]{20,256}"),  # Grafana
            _shape("PMAK-", r"[a-f0-9]{24}-[a-f0-9]{34}"),  # Postman
            _shape("lin_api_", r"[A-Za-z0-9]{40,256}"),  # Linear
            _shape("pplx-", r"[A-Za-z0-9]{40,256}"),  # Perplexity
            _shape("sntrys_", r"[A-Za-z0-9_\-+/=]{20,512}"),  # Sentry
            _shape("NRAK-", r"[A-Z0-9]{27}"),  # New Relic
            _shape("ATATT3", r"[A-Za-z0-9_\-=]{20,512}"),  # Atlassian
            r":(?<=[0-9]:)AA[A-Za-z0-9_\-]{33}",  # Telegram bots: the part after the bot's id
        )
    )
)

# --- headers and command lines ------------------------------------------------------------


def _by_first_char(alternatives: Sequence[tuple[str, str]]) -> re.Pattern[str]:
    """One pattern for (first characters, rest) pairs that starts with a character class, so
    that ``re`` jumps from one place such a character occurs to the next instead of trying
    every alternative at every position (10-100 times faster on a megabyte)."""
    union = "".join(sorted({c for firsts, _ in alternatives for c in firsts}))
    body = "|".join(f"(?<=[{re.escape(firsts)}]){rest}" for firsts, rest in alternatives)
    return re.compile(f"[{re.escape(union)}](?:{body})")


_SCHEMES = "basic|bearer|token|digest|negotiate|apikey|sso-key"
_WORD_HINT = r"(?i:passw|pwd|pass|secret|token|key|auth|credential|creds|passphrase)"
_COMMANDS = _by_first_char(
    (
        # Authorization: Basic|Bearer|token VALUE, in a header, a dict, a curl -H
        ("AaPp", r"(?i:(?<=a)uthorization|(?<=p)roxy-authorization)[\"']?[ \t]{0,4}[:=][ \t]{0,4}"
         rf"(?:[fbr]?[\"'])?(?:(?P<scheme>(?i:{_SCHEMES}))[ \t]{{1,4}})?"
         r"(?P<auth>[A-Za-z0-9._~+/=:\-]{1,4096})"),
        ("Bb", r"(?i:earer)[ \t]{1,4}(?P<bearer>[A-Za-z0-9._~+/\-]{16,4096}=*)"),
        ("Bb", r"(?i:asic)[ \t]{1,4}(?P<basic>[A-Za-z0-9+/]{4,1024}={0,2})(?![A-Za-z0-9+/=])"),
        # curl -u user:pass, --user user:pass
        ("-", r"(?<![\w\-]-)(?:u|-user|-proxy-user)(?:=|[ \t]{1,4})[\"']?"
         r"(?P<user>[^\s:\"'@/]{1,128}):(?P<userpass>[^\s\"'@]{1,512})"),
        # --password X, --token=X, --api-key X
        ("-", rf"(?<![\w\-]-)(?P<opt>-?(?=[\w\-]{{0,40}}?{_WORD_HINT})[A-Za-z][\w\-]{{0,40}})"
         r"(?:=|[ \t]{1,4})[\"']?(?P<optval>[^\s\"'=][^\s\"']{0,511})"),  # "= x": not a value
        # mysql -pSECRET (the password joined to -p)
        ("Mm", r"(?<![\w\-]\w)(?i:ysql|ysqldump|ysqladmin|(?<=m)ariadb)\b[^\n]{0,256}?[ \t]-p"
         r"(?P<mysql>[^\s\"']{1,256})"),
        # .netrc: machine HOST login USER password SECRET
        ("l", r"(?<![\w\-]l)ogin[ \t]{1,8}[^\s]{1,256}[ \t]{1,8}(?:password|passwd)[ \t]{1,8}"
         r"(?P<netrc>[^\s]{1,256})"),
        # <password>SECRET</password>
        ("<", r"(?P<tag>[\w.\-:]{1,64})>(?P<xml>[^<\n]{1,512})</(?P=tag)>"),
    )
)  # fmt: skip


def _command(m: re.Match[str]) -> str:
    group = m.lastgroup
    assert group is not None
    value = m.group(group)
    if not _command_secret(m, group, value):
        return m.group(0)
    start, end = m.span(group)
    return f"{m.string[m.start() : start]}{REDACTED}{m.string[end : m.end()]}"


def _command_secret(m: re.Match[str], group: str, value: str) -> bool:
    if group == "auth":  # no scheme: a raw key (random), else code or prose
        after = m.string[m.end() : m.end() + 1]
        if after in ("(", "[") or _is_reference(value):
            return False
        return _secret_value(value, 2 if m.group("scheme") else 1)
    if group == "basic":  # "Basic usage" is English; base64 of "user:pass" is a credential
        try:
            return b":" in base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            return False
    if group == "userpass":
        return not (m.group("user").isdigit() and value.isdigit())  # docker -u 1000:1000
    if group == "optval":  # the option with its dashes: --token names a secret, token may
        option = m.string[m.start() : m.end("opt")]
        return _strength(option) > 0 and _secret_value(value, _strength(option), option)
    if group == "xml":
        tag = m.group("tag")
        return _strength(tag) > 0 and _secret_value(value, _strength(tag), tag)
    return _secret_value(value, 2)


# --- keyword assignments ------------------------------------------------------------------

# A secret word, the rest of its name, a closing quote or bracket, the operator. The name's
# start is found by looking back from the word (monkey = … is no key).
_KEY_REST = (
    r"[\w.\-]{0,48}(?P<close>[\"'`]?\]?)"
    r"(?P<op>[ \t]{0,8}(?:=>|:=|\?=|=|:)(?![=/:])[ \t]{0,8})"
)
# The word's first letter as a class: re jumps between its occurrences (see _by_first_char).
_KEYWORD = re.compile(
    r"[PpSsTtKkAaCcHh](?i:(?<=p)(?:assw|assphrase|wd|ass)|(?<=s)(?:ecret|ig|alt)|(?<=t)oken"
    r"|(?<=k)ey|(?<=a)uth|(?<=c)(?:redential|reds|ookie)|(?<=h)mac)" + _KEY_REST
)
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
_QUOTED = re.compile(
    r"""[fbru]{0,2}(?:"(?P<d>(?:[^"\\\n]|\\.){0,512})"|'(?P<s>(?:[^'\\\n]|\\.){0,512})'"""
    r"""|`(?P<b>[^`\n]{0,512})`)"""
)
_TIGHT = re.compile(r"""[^\s,;&)\]}"'`<>]{1,512}""")  # NAME=value: to the first space
# name = value, name: value: to the end of the line (an apostrophe of "user's" included)
_LOOSE = re.compile(r"""(?:[^\n,;)\]}"'`<>]|(?<=[A-Za-z])'(?=[A-Za-z])){1,512}""")
# A literal after "or", "||", "??", ":-", "," or "=", up to the end of the line.
_LATER_LITERAL = re.compile(
    r"""(?P<sep>\bor\b|\|\||\?\?|,|=|:-)[ \t]{0,8}[fbr]{0,2}"""
    r"""(?:"(?P<d>(?:[^"\\\n]|\\.){1,512})"|'(?P<s>(?:[^'\\\n]|\\.){1,512})')"""
)


def _keywords(text: str) -> str:
    out: list[str] = []
    pos = done = 0
    while (m := _KEYWORD.search(text, pos)) is not None:
        start = m.start()
        floor = max(done, start - 64)
        while start > floor and text[start - 1] in _NAME_CHARS:
            start -= 1
        key = text[start : m.start("close")]
        pos = m.end()
        if _documented(text, start, key):
            continue
        if strength := _strength(key):
            edits, pos = _assignment(text, m, strength, key)
            for a, b in edits:
                out += (text[done:a], REDACTED)
                done = b
    out.append(text[done:])
    return "".join(out)


_DOC_FIELD = re.compile(
    r":(?:param|arg|argument|ivar|cvar|var|type|keyword|kwarg)[ \t]+(?:\w+[ \t]+)?\Z"
)


def _documented(text: str, start: int, key: str) -> bool:
    """``:param token: …`` and ``google.auth.Credentials: The …`` document a name or a type."""
    if "." in key and re.fullmatch(r"(?:[A-Z][a-z]+)+", key.rsplit(".", 1)[-1]):
        return True
    return _DOC_FIELD.search(text, max(0, start - 40), start) is not None


def _assignment(
    text: str, m: re.Match[str], strength: int, key: str
) -> tuple[list[tuple[int, int]], int]:
    """The spans of ``text`` to redact after the operator ``m`` ends with, and where to go
    on looking."""
    at = m.end()
    quoted = _QUOTED.match(text, at)
    if quoted is not None:
        group = next(g for g in ("d", "s", "b") if quoted.group(g) is not None)
        secret = _secret_value(quoted.group(group), strength, key)
        return ([quoted.span(group)] if secret else []), quoted.end()
    tight = m.group("op") == "="  # NAME=value (shell, .env, a connection string): no spaces
    bare = (_TIGHT if tight else _LOOSE).match(text, at)
    if bare is None:  # nothing, or a quote that closes the string around "password: "
        return [], at
    value = bare.group(0)
    comment = min((i for i in (value.find(" #"), value.find("\t#")) if i >= 0), default=-1)
    value = (value[:comment] if comment >= 0 else value).rstrip()
    end = at + len(value)
    if (
        strength == 2
        and not _dotenv_line(text, m.start("close"), key, tight)
        and _is_reference(value)
    ):
        return _later_literals(text, at, value, key)
    if _code_word(text, value, end, tight) or not _secret_value(value, strength, key):
        return [], end
    return [(at, end)], end


def _dotenv_line(text: str, key_end: int, key: str, tight: bool) -> bool:
    """``API_KEY=value`` alone at a line's head (``export``, a patch's mark allowed): a .env
    file or a shell, where a bare value is a literal, never a variable (that is ``$X``)."""
    if not tight or not _ENV_NAME.fullmatch(key):
        return False
    start = key_end - len(key)
    line = text.rfind("\n", max(0, start - 32), start) + 1  # bounded: redaction stays linear
    if line == 0 and start > 32:
        return False
    head = text[line:start]
    return _LINE_HEAD.fullmatch(head) is not None


_ENV_NAME = re.compile(r"[A-Z][A-Z0-9_]{0,127}")
_LINE_HEAD = re.compile(r"[+\- ]?[ \t]*(?:export[ \t]+)?")


def _code_word(text: str, value: str, end: int, tight: bool) -> bool:
    """f(password=pw, …) passes a variable; "password: The password of the URL." is a
    docstring. Neither holds a secret."""
    if _IDENT.fullmatch(value) and text[end : end + 1] in (",", ")"):
        return True  # an argument: a variable, or a parameter's type
    if tight:
        return False
    words = value.split()
    if len(words) < 2:
        return False
    expression = _IDENT.fullmatch(words[0]) is not None and _mentions_secret(words[0])
    prose = len(words) > 3 and sum(w.lower() in _STOPWORDS for w in words) > 1
    return expression or prose or value.endswith((".", ":")) or _mentions_secret(value)


# Two of these in four words or more: English (a docstring), not a passphrase
_STOPWORDS = _set("the of to a an in is are for this that be with if or and not it by on as from")


def _later_literals(text: str, at: int, value: str, key: str) -> tuple[list[tuple[int, int]], int]:
    """``get_password() or "fallback"``, ``environ.get("X", "default")``, ``token: str =
    "…"``: the literals a computed or typed secret falls back to, up to the end of the line;
    not a call's other arguments (``_from_dict(d, "service_credential")``)."""
    eol = text.find("\n", at)
    end = min(at + 512, len(text) if eol < 0 else eol)
    getter = "get" in value.lower()
    head = _IDENT.match(value)
    typed = head is not None and (head.group(0).lower() in _TYPES or _class_name(head.group(0)))
    default = text.find("=", at, end)  # token: str = "…": the default, not Field(alias="…")
    edits = []
    for lit in _LATER_LITERAL.finditer(text, at, end):
        sep = lit.group("sep")
        if (sep == "," and not getter) or (sep == "=" and not (typed and lit.start() == default)):
            continue
        group = "d" if lit.group("d") is not None else "s"
        if _secret_value(lit.group(group), 2, key):
            edits.append(lit.span(group))
    return edits, (edits[-1][1] if edits else at)


# --- the redactor -------------------------------------------------------------------------


def redact(text: str, *, code: bool = False) -> str:
    """``text`` with every secret's value replaced by ``<redacted>``; lines stay lines.

    ``code``: a patch, whose lines keep their ``+``/``-``/space mark when a private key
    block takes them."""
    if "PRIVATE KEY" in text:
        text = _pem_blocks(text, code)
    if _K8S_SECRET.search(text):
        text = _k8s_secrets(text, code)
    if "://" in text:
        text = _URL.sub(_url, text)
    text = _SHAPES.sub(REDACTED, text)
    text = _COMMANDS.sub(_command, text)
    return _by_gitleaks(_keywords(text))


def _by_gitleaks(text: str) -> str:
    """What gitleaks' rules find that the rules above did not (a provider's token known by
    its shape, or by the provider's name before it)."""
    found = _gitleaks_spans(text)
    return _replaced(text, found) if found else text


def _gitleaks_spans(text: str) -> list[tuple[int, int]]:
    from envguard import secret_rules

    return secret_rules.spans(text)


def _replaced(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with each of the sorted, disjoint ``spans`` made ``<redacted>``."""
    parts, at = [], 0
    for start, end in spans:
        parts += [text[at:start], REDACTED]
        at = end
    parts.append(text[at:])
    return "".join(parts)


def redact_text(text: str, *, code: bool = False) -> tuple[str, int]:
    """Redact secrets in ``text``; returns the text and how many lines changed."""
    new = redact(text, code=code)
    if new == text:
        return text, 0
    return new, sum(a != b for a, b in zip(text.split("\n"), new.split("\n"), strict=True))


def strip_url_credentials(text: str) -> str:
    """What :func:`redact` makes of a URL, a command or a message: credentials in URLs and
    every other secret go."""
    return redact(text)


def redact_value(name: str, value: str) -> str:
    """An environment variable's value: all of it when its name names a secret; else what
    the rules find in it, read as ``NAME=value`` so that a rule that needs the provider's
    name before a token (``TORCH_HEROKU_KEY``'s uuid, ``SENTRY_…``'s hex) sees it."""
    if is_secret_name(name):
        return REDACTED
    value = redact(value)
    line = f"{name}={value}"
    at = len(name) + 1
    found = [(max(a, at), b) for a, b in _gitleaks_spans(line) if b > at]
    if not found:
        return value
    return _replaced(line, found)[at:]


def redact_argv(argv: Sequence[str]) -> tuple[str, ...]:
    """A command as run: each word redacted, and the word after ``--password``/``--token``,
    the password of ``-u user:pass``, and mysql's ``-pSECRET``, which look like nothing on
    their own."""
    out, mysql = [], False
    for i, word in enumerate(argv):
        mysql = mysql or word.rsplit("/", 1)[-1] in ("mysql", "mysqldump", "mysqladmin", "mariadb")
        out.append(_argv_word(argv[i - 1] if i else "", word, mysql))
    return tuple(out)


_OPTION = re.compile(r"--?[A-Za-z][\w\-]{0,63}")


def _argv_word(before: str, word: str, mysql: bool) -> str:
    if _OPTION.fullmatch(before) and not word.startswith("-"):
        strength = _strength(before)
        if strength and _secret_value(word, strength):
            return REDACTED
    if before in ("-u", "--user", "--proxy-user") and ":" in word:
        user, _, password = word.partition(":")
        if password and not (user.isdigit() and password.isdigit()):
            return f"{redact(user)}:{REDACTED}"
    if mysql and word.startswith("-p") and len(word) > 2:
        return "-p" + REDACTED
    return redact(word)


_SEPARATOR = "\n\x00\n"  # no rule crosses a line, and no text holds a NUL


def redact_data(data: _T) -> _T:
    """Every string in ``data`` (dicts, lists and tuples of them, as ``to_dict`` gives) redacted,
    keys left as they are. Redacted together, in one pass over them all: a lockfile holds
    tens of thousands of short strings. A long base64 string (a binary patch) is data, not
    text; the probe redacted what it encodes."""
    strings: list[str] = []
    _walk(data, strings.append)
    texts = [s for s in strings if not _encoded(s)]
    if not texts:
        return data
    joined = redact(_SEPARATOR.join(texts)) if not any("\x00" in s for s in texts) else None
    done = joined.split(_SEPARATOR) if joined is not None else []
    if len(done) != len(texts):  # a rule took a separator: one at a time then
        done = [redact(s) for s in texts]
    new = dict(zip(texts, done, strict=True))
    return _rebuilt(data, lambda s: new.get(s, s))  # type: ignore[no-any-return]


def _encoded(s: str) -> bool:
    return len(s) > 1024 and _BASE64.fullmatch(s) is not None


_BASE64 = re.compile(r"[A-Za-z0-9+/=\n]+")


def _walk(data: Any, found: Callable[[str], None]) -> None:
    if isinstance(data, str):
        found(data)
    elif isinstance(data, dict):
        for value in data.values():
            _walk(value, found)
    elif isinstance(data, (list, tuple)):
        for value in data:
            _walk(value, found)


def _rebuilt(data: Any, new: Callable[[str], str]) -> Any:
    if isinstance(data, str):
        return new(data)
    if isinstance(data, dict):
        return {key: _rebuilt(value, new) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return type(data)(_rebuilt(value, new) for value in data)
    return data


def binary_holds_secrets(data: bytes) -> bool:
    """A binary file's content (a pickle, a SQLite file) that holds a secret by shape, or a
    secret-looking name beside a value: such a file's patch is not kept."""
    text = data.decode("latin-1")
    return _SHAPES.search(text) is not None or _BINARY_NAME.search(text) is not None


_BINARY_NAME = re.compile(
    r"(?:token|secret|passw|api_?key|access_?key|private_?key|credential|client_secret)",
    re.IGNORECASE,
)
