"""Secrets never reach what envguard writes or prints; look-alikes stay as they are (#23).

A corpus of secret shapes (what gitleaks' and detect-secrets' rules know: provider prefixes,
keyword assignments in every config syntax, URLs, headers, argv forms), each planted in a real
repository (an uncommitted tracked file, an untracked file), in the environment, and in the
argv of ``envguard run``; then looked for in the lockfile, the journal, ``--json`` and the
screen. And harmless look-alikes (hashes, shas, versions, ``token_count = 5``) that must come
through unchanged, since a redacted hash or version damages every diff.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import string
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envguard import _gitleaks as gitleaks
from envguard import journal, lockfile
from envguard.probes import code
from envguard.redact import redact, redact_argv, redact_data, redact_text, strip_url_credentials
from tests.conftest import git
from tests.project import Project, invoke

_B62 = string.ascii_letters + string.digits
_B64 = _B62 + "+/"
_HEX = "0123456789abcdef"
_UP = string.ascii_uppercase + string.digits


def _tok(alphabet: str, n: int, seed: str) -> str:
    """Random-looking, deterministic, and never a literal in this file: scanners of this
    repository must not take the corpus for leaked credentials."""
    rng = random.Random(seed)
    return "".join(rng.choice(alphabet) for _ in range(n))


def _b62(n: int, seed: str) -> str:
    return _tok(_B62, n, seed)


def _hex(n: int, seed: str) -> str:
    return _tok(_HEX, n, seed)


def _jwt() -> str:
    def part(doc: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(doc).encode()).decode().rstrip("=")

    return f"{part({'alg': 'HS256'})}.{part({'sub': '1234567890'})}.{_tok(_B62 + '-_', 43, 'jwt')}"


_PEM_BODY = _tok(_B64, 64, "pem")
_PEM = "-----BEGIN %s PRIVATE KEY-----\n" + _PEM_BODY + "\n%s\n-----END %s PRIVATE KEY-----\n"

# shape -> (planted text with %s for the secret, the secret)
CORPUS: dict[str, tuple[str, str]] = {
    # provider prefixes: caught whatever the variable is called
    "aws-access-key-id": ('ID = "%s"\n', "AKIA" + _tok(_UP, 16, "aws")),
    "aws-secret-ini": ("aws_secret_access_key = %s\n", _tok(_B64, 40, "aws-secret")),
    "github-classic": ('gh = "%s"\n', "ghp_" + _b62(36, "ghp")),
    "github-oauth": ("print(%r)\n", "gho_" + _b62(36, "gho")),
    "github-app": ("remote: %s\n", "ghs_" + _b62(36, "ghs")),
    "github-fine-grained": ('x = "%s"\n', "github_pat_" + _b62(22, "pat") + "_" + _b62(59, "p2")),
    "gitlab": ("pat %s\n", "glpat-" + _b62(20, "glpat")),
    "slack-bot": ('HOOK = "%s"\n', "xoxb-" + _tok(string.digits, 12, "s1") + "-" + _b62(24, "s")),
    "slack-user": ("%s\n", "xoxp-" + _tok(string.digits, 12, "s2") + "-" + _b62(32, "su")),
    "slack-app": ("app %s\n", "xapp-1-A0" + _b62(30, "xapp")),
    "slack-webhook": (
        'url = "https://hooks.slack.com/services/%s"\n',
        "T0" + _tok(_UP, 8, "t") + "/B0" + _tok(_UP, 8, "b") + "/" + _b62(24, "hook"),
    ),
    "discord-webhook": (
        "https://discord.com/api/webhooks/%s\n",
        _tok(string.digits, 18, "dw") + "/" + _tok(_B62 + "-_", 68, "dh"),
    ),
    "stripe-live": ('stripe.api_key = "%s"\n', "sk_live_" + _b62(24, "stripe")),
    "stripe-restricted": ("key %s\n", "rk_live_" + _b62(24, "rk")),
    "google-api-key": ("maps(%r)\n", "AIza" + _tok(_B62 + "-_", 35, "aiza")),
    "google-oauth-secret": ("%s\n", "GOCSPX-" + _tok(_B62 + "-_", 28, "gocspx")),
    "google-access-token": ("%s\n", "ya29." + _tok(_B62 + "-_", 60, "ya29")),
    "openai-legacy": ("openai %s\n", "sk-" + _b62(20, "oa1") + "T3BlbkFJ" + _b62(20, "oa2")),
    "openai-project": ("client = OpenAI(%r)\n", "sk-proj-" + _tok(_B62 + "-_", 48, "proj")),
    "anthropic": ("%s\n", "sk-ant-api03-" + _tok(_B62 + "-_", 93, "ant") + "AA"),
    "huggingface": ('login("%s")\n', "hf_" + _b62(34, "hf")),
    "jwt": ('T = "%s"\n', _jwt()),
    "pem-rsa": (_PEM % ("RSA", "%s", "RSA"), _b62(48, "rsa")),
    "pem-openssh": (_PEM % ("OPENSSH", "%s", "OPENSSH"), _b62(48, "ssh")),
    "pem-pgp": (
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\n%s\n-----END PGP PRIVATE KEY BLOCK-----\n",
        _b62(48, "pgp"),
    ),
    "pem-in-json": (
        '{"private_key": "-----BEGIN PRIVATE KEY-----\\n%s\\n-----END PRIVATE KEY-----\\n"}\n',
        _b62(48, "gcp"),
    ),
    "npm": ("//registry.npmjs.org/:_authToken=%s\n", "npm_" + _b62(36, "npm")),
    "pypi": ("password = %s\n", "pypi-AgEIcHlwaS5vcmc" + _tok(_B62 + "-_", 60, "pypi")),
    "sendgrid": ("%s\n", "SG." + _tok(_B62 + "-_", 22, "sg1") + "." + _tok(_B62 + "-_", 43, "sg")),
    "twilio": ("twilio %s\n", "SK" + _hex(32, "twilio")),
    "shopify": ("%s\n", "shpat_" + _hex(32, "shopify")),
    "digitalocean": ("%s\n", "dop_v1_" + _hex(64, "do")),
    "databricks": ("%s\n", "dapi" + _hex(32, "databricks")),
    "telegram-bot": ("bot = Bot('123456789:%s')\n", "AA" + _tok(_B62 + "-_", 33, "tg")),
    "docker-hub": ("%s\n", "dckr_pat_" + _tok(_B62 + "-_", 27, "dckr")),
    "vault": ("VAULT = %r\n", "hvs." + _b62(24, "vault")),
    "age": ("%s\n", "AGE-SECRET-KEY-1" + _tok(_UP, 58, "age")),
    "groq": ("%s\n", "gsk_" + _b62(52, "groq")),
    "replicate": ("%s\n", "r8_" + _b62(37, "r8")),
    "grafana": ("%s\n", "glsa_" + _b62(32, "glsa") + "_" + _hex(8, "g2")),
    "postman": ("%s\n", "PMAK-" + _hex(24, "pm1") + "-" + _hex(34, "pm2")),
    "linear": ("%s\n", "lin_api_" + _b62(40, "linear")),
    # keyword assignments, in each syntax config and code write them
    "ini-unquoted": ("password = %s\n", "Tr0ub4dor&3"),
    "ini-spaces": ("password = %s\n", "correct horse battery staple"),
    "yaml": ("  password: %s\n", "s3cr3t-yaml"),
    "yaml-quoted": ('  password: "%s"\n', "y4ml-qu0ted"),
    "yaml-client-secret": ("  client_secret: %s\n", _b62(32, "yaml-cs")),
    "dotenv": ("DB_PASSWORD=%s\n", "d0tenv-pw"),
    "shell-export": ("export PGPASSWORD=%s\n", "pgp4ss-w0rd"),
    "shell-quoted": ("export API_TOKEN='%s'\n", "sh-quoted-tok3n"),
    "json-password": ('{"user": "bob", "password": "%s"}\n', "js0n-pw"),
    "json-api-key": ('{"api_key": "%s"}\n', _hex(32, "json-api")),
    "json-token": ('CONFIG = {"token": "%s"}\n', _hex(24, "json-token")),
    "toml-client-secret": ('client_secret = "%s"\n', _b62(40, "toml")),
    "python-kwarg": ('db = connect(user="bob", password="%s")\n', "kw4rg-pw"),
    "python-or-default": ('PASSWORD = get_password() or "%s"\n', "0r-default-pw"),
    "python-getenv-default": ('password = os.environ.get("DB_PASS", "%s")\n', "g3tenv-pw"),
    "python-environ": ('os.environ["AWS_SECRET_ACCESS_KEY"] = "%s"\n', _tok(_B64, 40, "env")),
    "python-annotated": ('hf_token: str = "%s"\n', _b62(30, "annotated")),
    "wandb-login": ('wandb.login(key="%s")\n', _hex(40, "wandb")),
    "keyword-hex": ('SIGNING_KEY = "%s"\n', _hex(64, "signing")),
    "django-secret-key": ("SECRET_KEY = 'django-insecure-%s'\n", _b62(40, "django")),
    "php-arrow": ("'password' => '%s',\n", "ph9-arr0w"),
    "go-walrus": ('dbPassword := "%s"\n', "g0-walrus"),
    "js-camel-case": ('const apiKey = "%s";\n', _b62(32, "camel")),
    "xml": ("<password>%s</password>\n", "xml-pw-9"),
    "netrc": ("machine pypi.internal login bob password %s\n", "n3trc-pw"),
    "conn-string": ('"Server=db;User Id=sa;Password=%s;"\n', "c0nn-Str1ng"),
    "conn-pwd": ("Driver={ODBC};Uid=sa;Pwd=%s;\n", "pwd-c0nn"),
    "azure-storage": (
        "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=%s;EndpointSuffix=x\n",
        _tok(_B64, 86, "azure") + "==",
    ),
    # URLs
    "url-basic-auth": ("DATABASE_URL=postgres://admin:%s@db.internal:5432/app\n", "pg-url-pw"),
    "url-token-user": ("git clone https://oauth2:%s@gitlab.com/team/repo.git\n", _b62(20, "gl")),
    "redis-url": ('REDIS = "redis://:%s@cache:6379/0"\n', "r3dis-pw"),
    "sentry-dsn": ('sentry_sdk.init("https://%s@o12345.ingest.sentry.io/678")\n', _hex(32, "dsn")),
    "index-url-path-token": (
        "--extra-index-url https://pkgs.example.com/%s/simple\n",
        _b62(28, "path-token"),
    ),
    "index-url-query": ("index-url = https://idx.example/simple?token=%s\n", _b62(20, "q")),
    "jdbc": ("jdbc:mysql://db:3306/app?user=bob&password=%s\n", "jdbc-pw-7"),
    # headers
    "authorization-basic": (
        'headers = {"Authorization": "Basic %s"}\n',
        base64.b64encode(b"alice:basic-pw-1").decode(),
    ),
    "authorization-bearer": (
        'curl -H "Authorization: Bearer %s" https://api.example.com\n',
        _b62(24, "bearer"),
    ),
    "authorization-token": ("Authorization: token %s\n", _hex(40, "authz")),
    # command lines
    "curl-u": ("curl -u alice:%s https://api.example.com\n", "curl-pw-1"),
    "curl-user": ("curl --user alice:%s https://x.example\n", "curl-pw-2"),
    "mysql-p": ("mysql -u root -p%s appdb\n", "mysql-pw-3"),
    "argv-password": ("tool --password %s\n", "argv-pw-4"),
    "argv-token": ("huggingface-cli login --token %s\n", _b62(30, "cli")),
    "argv-api-key": ("tool --api-key %s --verbose\n", _b62(32, "argv-key")),
    "argv-client-secret": ("tool --client-secret=%s\n", "argv-cs-5"),
    "env-prefix": ("env DB_PASSWORD=%s python train.py\n", "env-pr3fix"),
    "docker-env": ("docker run -e WANDB_API_KEY=%s img\n", _hex(40, "docker")),
}  # fmt: skip

# Harmless text that looks like a secret to a careless rule: each must come through unchanged.
_SHA = hashlib.sha256(b"wheel").digest()
LOOKALIKES: dict[str, str] = {
    "record-sha256": "torch/__init__.py,sha256="
    + base64.urlsafe_b64encode(_SHA).decode().rstrip("=") + ",1234\n",
    "wheel-hash": f"torch==2.11.0 --hash=sha256:{_SHA.hex()}\n",
    "git-sha": "commit 9fceb02d0ae598e95dc970b74767f19372d61af8\n",
    "short-sha": "HEAD is now at 9fceb02 fix the loader\n",
    "versions": "torch==2.11.0+cu128 transformers>=4.41.0,<5\n",
    "password-length": "password_length = 12\n",
    "token-count": "token_count = 5\n",
    "max-new-tokens": "max_new_tokens = 512\n",
    "max-tokens-flag": "serve --max-tokens 4096\n",
    "tokenizer": 'tokenizer = AutoTokenizer.from_pretrained("meta-llama/Llama-3.1-8B-Instruct")\n',
    "pad-token": 'pad_token = "<pad>"\n',
    "special-tokens": "tokenizer.pad_token = tokenizer.eos_token\n",
    "getpass": "password = getpass.getpass()\n",
    "environ-reference": 'api_key = os.environ["OPENAI_API_KEY"]\n',
    "annotation": "hf_token: str | None = None\n",
    "placeholder": 'password = "${DB_PASSWORD}"\n',
    "index-path": "https://download.pytorch.org/whl/cu128/simple/torch/\n",
    "pythonhosted": "https://files.pythonhosted.org/packages/5c/2f/" + _SHA.hex()[:60]
    + "/torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl\n",
    "hf-model-url": "https://huggingface.co/meta-llama/Meta-Llama-3-70B-Instruct/tree/main\n",
    "github-blob": "https://github.com/huggingface/transformers/blob/main/src/"
    "transformers/models/llama/modeling_llama.py\n",
    "uuid": 'run_id = "3f2b8c1e-9a4d-4e7b-8c6f-1d2e3f4a5b6c"\n',
    "scp-remote": "git@github.com:team/train.git\n",
    "author": 'author = "Jane Doe"\n',
    "state-dict-key": 'key = "model.layers.0.self_attn.q_proj.weight"\n',
    "sort-key": "sort_key = 'name'\n",
    "docker-digest": f'image = "nvcr.io/nvidia/pytorch@sha256:{_SHA.hex()}"\n',
    "uid-gid": "docker run -u 1000:1000 img\n",
    "learning-rate": "lr: 3e-4\n",
    "tokenizers-env": "TOKENIZERS_PARALLELISM=false\n",
    # found by redacting 1.8 M lines of the libraries in envguard's own venv
    "docstring": "    password: The password part of the URL.\n",
    "sphinx-param": ":param consistency_token: the token to compare with\n",
    "google-docstring": "google.oauth2.credentials.Credentials: The constructed credentials\n",
    "type-annotation": "password: HiddenText | None = None\n",
    "page-token": 'query["page_token"] = page_token\n',
    "kwarg-variable": "client = Client(api_key=api_key, timeout=30)\n",
    "enum-constant": 'OAUTH_CLIENT_CREDENTIALS = "OAUTH_CLIENT_CREDENTIALS"\n',
    "prose-pass": "first pass: check every value\n",
    "f-string": 'self.sas_token = f"?{sas_token}"\n',
    "header-from-request": 'authorization = request.headers.get("Authorization")\n',
    "credentials-path": "GOOGLE_APPLICATION_CREDENTIALS=/etc/gcp/service-account.json\n",
}  # fmt: skip

# argv as a shell splits it: the value is a word of its own after the option
ARGV: dict[str, tuple[list[str], str]] = {
    "token": (["--token", _b62(30, "a1")], _b62(30, "a1")),
    "password": (["--password", "argv-split-pw"], "argv-split-pw"),
    "api-key": (["--api-key", _b62(32, "a2")], _b62(32, "a2")),
    "client-secret": (["--client-secret", "split-cs-9"], "split-cs-9"),
    "curl-u": (["-u", "alice:split-curl-pw"], "split-curl-pw"),
    "curl-user": (["--user", "alice:split-curl-pw2"], "split-curl-pw2"),
    "env": (["env", "DB_PASSWORD=split-env-pw", "python"], "split-env-pw"),
    "mysql": (["mysql", "-u", "root", "-psplit-mysql-pw", "db"], "split-mysql-pw"),
    "header": (["-H", "Authorization: Bearer " + _b62(24, "a3")], _b62(24, "a3")),
    "index-path": (["--index-url", f"https://pkgs.example.com/{_b62(28, 'a4')}/simple"],
                   _b62(28, "a4")),
    "index-userinfo": (["--extra-index-url", "https://bob:split-idx-pw@pypi.internal/simple"],
                       "split-idx-pw"),
}  # fmt: skip


def _planted(name: str) -> str:
    template, value = CORPUS[name]
    return template % value


def test_the_corpus_is_large_and_each_secret_is_in_its_text() -> None:
    assert len(CORPUS) >= 60 and len(LOOKALIKES) >= 20
    for name, (template, value) in CORPUS.items():
        assert value in template % value, name


@pytest.mark.parametrize("name", sorted(CORPUS))
@pytest.mark.parametrize("as_code", [False, True])
def test_each_shape_is_redacted(name: str, as_code: bool) -> None:
    text = _planted(name)
    patch = "".join(f"+{line}\n" for line in text.splitlines()) if as_code else text
    redacted, changed = redact_text(patch, code=as_code)
    assert CORPUS[name][1] not in redacted, redacted
    assert changed >= 1  # a URL's userinfo goes without a trace; everything else says it went
    assert redacted.count("\n") == patch.count("\n")  # a patch keeps its lines
    assert redact_text(redacted, code=as_code)[0] == redacted  # the boundary pass changes nothing


@pytest.mark.parametrize("name", sorted(LOOKALIKES))
def test_lookalikes_are_left_alone(name: str) -> None:
    text = LOOKALIKES[name]
    assert redact_text(text) == (text, 0)
    assert redact_text(f"+{text}", code=True) == (f"+{text}", 0)
    assert redact_argv(text.split()) == tuple(text.split())


@pytest.mark.parametrize("name", sorted(ARGV))
def test_argv_values_after_their_option_are_redacted(name: str) -> None:
    argv, value = ARGV[name]
    cleaned = journal.clean_command(["uv", "pip", "install", *argv])
    full = ["uv", "pip", "install", *argv]
    assert value not in " ".join(cleaned), cleaned
    # only the secret goes: the option names and the rest of the command stay
    kept = [a for a, b in zip(cleaned, full, strict=True) if a == b]
    assert kept == [a for a in full if value not in a]


def _all_out(*texts: str) -> str:
    return "\n".join(texts)


def test_no_secret_reaches_the_lock_json_or_screen(project: Project) -> None:
    """The corpus in an uncommitted tracked file, an untracked file and the environment."""
    body = "".join(_planted(n) for n in CORPUS)
    looks = "".join(LOOKALIKES.values())
    project.write("secrets_in_code.py", "import os\n")
    project.commit("a module")
    project.write("secrets_in_code.py", "import os\n" + body + looks)
    project.write("notes.txt", body)  # untracked
    project.write("deploy.sh", "#!/bin/sh\ncurl -u alice:untracked-curl-pw https://x\n")
    planted_env = {f"TORCH_PLANTED_{i}": _planted(n) for i, n in enumerate(sorted(CORPUS))}
    looks_env = {f"TORCH_LOOKALIKE_{i}": t.strip() for i, t in enumerate(LOOKALIKES.values())}
    env = {**project.activated(), **planted_env, **looks_env}
    code_, screen, err = invoke("snapshot", env=env)
    assert code_ == 0, err
    lock_text = project.lock.read_text()
    _, as_json, json_err = invoke("snapshot", "--json", "-o", "again.toml", env=env)
    _, diff_json, diff_err = invoke("diff", "--json", "--show-patch", env=project.activated())
    _, diff_screen, screen_err = invoke("diff", "--show-patch", env=project.activated())
    everything = _all_out(lock_text, screen, err, as_json, json_err, diff_json, diff_err)
    everything += diff_screen + screen_err
    for name, (_, value) in CORPUS.items():
        assert value not in everything, name
    assert "untracked-curl-pw" not in everything
    lock = lockfile.read(project.lock)
    assert lock.code is not None
    for name, text in LOOKALIKES.items():  # in the patch, and in the environment
        assert f"+{text}" in lock.code.patch, name
        assert text.strip() in lock.environ.values(), name
    assert "\n import os\n" in lock.code.patch  # context lines stay as they are


def test_untracked_files_are_recorded_by_hash_never_their_content(project: Project) -> None:
    notes = project.write("notes.txt", "lr=3e-4\nDB_PASSWORD=hunter2-untracked\n")
    project.snapshot()
    lock = lockfile.read(project.lock)
    assert lock.code is not None
    (recorded,) = [u for u in lock.code.untracked if u.path == "notes.txt"]
    assert recorded.blob and "hunter2" not in project.lock.read_text()
    assert recorded.size == notes.stat().st_size
    assert "lr=3e-4" not in project.lock.read_text()
    project.write("notes.txt", "lr=1e-4\nDB_PASSWORD=hunter2-untracked\n")  # same size
    verdict = project.verdict()
    change = verdict.one("notes.txt")
    assert "untracked file changed" in change["why"]


def test_no_secret_reaches_the_journal_json_or_screen(project: Project) -> None:
    project.snapshot()
    planted = [_planted(n) for n in sorted(CORPUS)]
    split = [word for argv, _ in ARGV.values() for word in argv]
    code_, out, err = invoke("run", "--", "true", *planted, *split, env=project.activated())
    assert code_ == 0, err
    _, as_json, json_err = invoke("run", "--json", "--", "true", *split, env=project.activated())
    _, log_screen, _ = invoke("log", env=project.activated())
    _, log_json, _ = invoke("log", "--json", env=project.activated())
    written = journal.path_for(project.lock).read_text()
    everything = _all_out(written, out, err, as_json, json_err, log_screen, log_json)
    for name, (_, value) in CORPUS.items():
        assert value not in everything, name
    for name, (_, value) in ARGV.items():
        assert value not in everything, name
    entries = journal.read(journal.path_for(project.lock))
    assert entries[0].command[:1] == ("true",) and "--token" in entries[0].command


_PIECES = [
    *(_planted(n) for n in CORPUS), *LOOKALIKES.values(), "password", "token", "key", "=",
    ":", " ", "\n", '"', "'", "https://", "@", "/", "?", "&", "-u ", "--token ", "<", ">",
    "Bearer ", "Basic ", "+", "-", "\x00", "-----BEGIN RSA PRIVATE KEY-----",
    "-----END RSA PRIVATE KEY-----", "AKIA", "hf_", "Ab1" * 8,
]  # fmt: skip
_TEXT = st.lists(st.sampled_from(_PIECES) | st.text(max_size=8), max_size=30).map("".join)


@pytest.mark.slow
@settings(max_examples=300, suppress_health_check=list(HealthCheck), deadline=None)
@given(texts=st.lists(_TEXT, max_size=6))
def test_redaction_is_idempotent_keeps_lines_and_is_the_same_in_bulk(texts: list[str]) -> None:
    """The lockfile is redacted again as a whole when written: that must change nothing the
    probe redacted (its patch hash stands), and strings redacted together come out as each
    alone."""
    for text in texts:
        once = redact(text)
        assert redact(once) == once
        assert once.count("\n") == text.count("\n") == redact(text, code=True).count("\n")
    assert redact_data({"a": texts, "b": tuple(texts)}) == {
        "a": [redact(t) for t in texts],
        "b": tuple(redact(t) for t in texts),
    }


@pytest.mark.parametrize("code", [False, True])
def test_a_kubernetes_secrets_data_goes_in_either_order_and_a_configmap_stays(code: bool) -> None:
    """kubectl prints ``data:`` before ``kind: Secret``; a block scalar's lines go with it."""
    value, other = _b62(32, "k8s-a"), _b62(40, "k8s-b")
    text = (f"apiVersion: v1\ndata:\n  db.conf: {value}\n  tls.key: |\n    {other}\n"
            f"kind: Secret\nmetadata:\n  name: db\n  namespace: production\n---\n"
            f"kind: ConfigMap\ndata:\n  lr: {value[:12]}\n")  # fmt: skip
    if code:
        text = "".join(f"+{line}\n" for line in text.splitlines())
    out = redact(text, code=code)
    assert value not in out and other not in out and "tls.key: <redacted>" in out
    assert "namespace: production" in out and f"lr: {value[:12]}" in out  # not a Secret's
    assert out.count("\n") == text.count("\n") and redact(out, code=code) == out


def test_error_lines_are_redacted(capsys: pytest.CaptureFixture[str]) -> None:
    from envguard.output import lines

    secret = _planted("dotenv") + _planted("github-classic")
    lines.error_line(f"uv failed: {secret}")
    lines.warning_line(f"note: {secret}")
    err = capsys.readouterr().err
    assert CORPUS["dotenv"][1] not in err and CORPUS["github-classic"][1] not in err


# ---------------------------------------------------------------------------------------------
# Linear time: one dirty 100 kB line took a snapshot 59 s


_GITLEAKS_KEYWORDS = sorted({k for rule in gitleaks.RULES for k in rule[4]})
ADVERSARIAL = {
    "letters": "B" * 1_000_000,
    "colons": "a:" * 500_000,
    "url": "https://" + "a" * 1_000_000,
    "urls": "a://" * 250_000,
    "keys": "key:" * 250_000,
    "passwords": "password=" * 111_111,
    "jwt-starts": "eyJ" * 333_333,
    "dashes": "-a b " * 200_000,
    "pem-begins": "-----BEGIN RSA PRIVATE KEY-----" * 32_000,
    "quotes": 'password="' * 100_000,
    "mixed": ("token = " + "x" * 40 + " https://u:p@h/" + "Ab1" * 10 + " ") * 10_000,
    "random": _tok(_B62 + " =:/@._-\"'", 1_000_000, "random"),
    # gitleaks' rules: every keyword, then a megabyte; a keyword every 4 kB; their slow forms
    "gitleaks-keywords": " ".join(_GITLEAKS_KEYWORDS) + " " + "a" * 1_000_000,
    "gitleaks-every-4k": "".join(f"{k} = {'b' * 4000}\n" for k in _GITLEAKS_KEYWORDS),
    "gitleaks-prefixes": "ghp_" * 250_000,
    "curl-headers": "curl -H " * 100_000,
    "k8s-secret": "kind: secret\ndata:\n  x: " * 50_000,
    "k8s-inline": "kind: secret data: " * 50_000,
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_redaction_is_linear(name: str) -> None:
    """A quarter of each megabyte: a quadratic rule takes seconds there (the curl rules
    that were left out, ten), and a linear one a tenth of a second."""
    text = ADVERSARIAL[name][:262_144]
    start = time.perf_counter()
    redact_text(text)
    strip_url_credentials(text)
    took = time.perf_counter() - start
    assert took < 1.0, f"{name}: {took:.2f} s"


@pytest.mark.slow
def test_a_dirty_1_mb_line_snapshots_in_linear_time(repo: Path) -> None:
    line = "x = '" + _tok(_B62 + " =:/._-", 1_000_000, "line") + "'\n"
    (repo / "train.py").write_text("import dflash_model\n" + line)
    start = time.perf_counter()
    state, _ = code.probe(repo, required=True)
    took = time.perf_counter() - start
    assert state is not None and state.dirty
    assert took < 2.0, f"{took:.2f} s"
    git(repo, "status", "--short")  # the repository is as it was
