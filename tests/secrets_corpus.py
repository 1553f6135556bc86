"""Secrets shaped as gitleaks' default rules find them, and values that only look like secrets.

``SHAPES``: one sample for each rule of gitleaks' default rule set (its ``config/gitleaks.toml``,
named by the rule's id) that finds a token in text, made here from a seeded generator: the
provider's prefix and the token's alphabet and length are the rule's, the characters random,
so no value is ever a literal of this file and scanners of this repository find nothing. A
rule that finds its token only beside the provider's name (``adafruit_… = <32 chars>``) says
so in ``ident``; ``alone`` says whether the token can be told from a look-alike with no name
beside it (a prefix, or a long random text), not a hex hash, a uuid or a number.

``LOOKALIKES``: a few hundred values an ML environment holds that are no secret (commit hashes,
digests, versions, GPU uuids, paths, hosts, model ids, run ids, cache keys, plain URLs), each
of which must stay readable as an environment variable's value.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import re
import string
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - 3.10 only
    import tomli as tomllib

LOWER = string.ascii_lowercase
UPPER = string.ascii_uppercase
DIGITS = string.digits
ALNUM = LOWER + DIGITS  # gitleaks' (?i)[a-z0-9]: one case, the hardest for a case-change test
UPALNUM = UPPER + DIGITS
B62 = string.ascii_letters + DIGITS
B64 = B62 + "+/"
WORD = B62 + "_-"  # [\w-]
HEX = "0123456789abcdef"
_SALT = [""]  # set by shapes(): one corpus a place, so a leak names the place it came from


def tok(alphabet: str, n: int, seed: str) -> str:
    """``n`` characters of ``alphabet``, the same for the same seed."""
    rng = random.Random(f"secrets-corpus:{_SALT[0]}{seed}")
    return "".join(rng.choice(alphabet) for _ in range(n))


def hexs(n: int, seed: str) -> str:
    return tok(HEX, n, seed)


def uid(seed: str, upper: bool = False) -> str:
    value = str(uuid.UUID(int=random.Random(f"uuid:{_SALT[0]}{seed}").getrandbits(128), version=4))
    return value.upper() if upper else value


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode().rstrip("=")


@dataclass(frozen=True)
class Shape:
    rule: str  # gitleaks' rule id (a suffix tells two samples of one rule apart)
    secret: str  # what must never be written
    ident: str = ""  # the name gitleaks' rule needs before the token; "" when the token is enough
    alone: bool = True  # recognisable with no name beside it
    line: str = ""  # how it sits in a file when not as an assignment to ``ident`` ('%s': it)


def _sentry_org() -> str:
    claims = {"iat": 1767225600.0, "url": "https://sentry.io",
              "region_url": "https://us.sentry.io", "org": "acme-ml"}  # fmt: skip
    return (
        "sntrys_"
        + _b64(json.dumps(claims, separators=(",", ":")).encode())
        + "_"
        + tok(B64, 43, "sentry-org")
    )


def _jwt() -> str:
    def part(doc: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(doc).encode()).decode().rstrip("=")

    return f"{part({'alg': 'HS256', 'typ': 'JWT'})}.{part({'sub': tok(DIGITS, 10, 'sub')})}." + tok(
        WORD, 43, "jwt-sig"
    )


def _shapes() -> Iterator[Shape]:
    t = tok
    yield Shape("1password-secret-key", "A3-" + "-".join(
        (t(UPALNUM, 6, "1p1"), t(UPALNUM, 11, "1p2"), t(UPALNUM, 5, "1p3"), t(UPALNUM, 5, "1p4"),
         t(UPALNUM, 5, "1p5"))))  # fmt: skip
    yield Shape("1password-service-account-token", "ops_eyJ" + t(B64, 260, "1p-sa"))
    yield Shape("adafruit-api-key", t(ALNUM + "_-", 32, "adafruit"), "adafruit")
    yield Shape("adobe-client-id", hexs(32, "adobe-id"), "adobe", alone=False)
    yield Shape("adobe-client-secret", "p8e-" + t(ALNUM, 32, "adobe-secret"))
    yield Shape(
        "age-secret-key", "AGE-SECRET-KEY-1" + t("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58, "age")
    )
    yield Shape("airtable-api-key", t(ALNUM, 17, "airtable"), "airtable")
    yield Shape(
        "airtable-personnal-access-token",
        "pat" + t(B62, 14, "airtable-pat") + "." + hexs(64, "airtable-pat2"),
        "airtable",
    )
    yield Shape("algolia-api-key", t(ALNUM, 32, "algolia"), "algolia")
    yield Shape("alibaba-access-key-id", "LTAI" + t(ALNUM, 20, "ltai"))
    yield Shape("alibaba-secret-key", t(ALNUM, 30, "alibaba"), "alibaba")
    yield Shape("anthropic-admin-api-key", "sk-ant-admin01-" + t(WORD, 93, "ant-admin") + "AA")
    yield Shape("anthropic-api-key", "sk-ant-api03-" + t(WORD, 93, "ant-api") + "AA")
    yield Shape("artifactory-api-key", "AKCp" + t(B62, 69, "akcp"))
    yield Shape("artifactory-reference-token", "cmVmd" + t(B62, 59, "cmvmd"))
    yield Shape("asana-client-id", t(DIGITS, 16, "asana-id"), "asana", alone=False)
    yield Shape("asana-client-secret", t(ALNUM, 32, "asana-secret"), "asana")
    yield Shape("atlassian-api-token", "ATATT3" + t(WORD + "=", 186, "atatt"))
    yield Shape("atlassian-api-token:jira", t(ALNUM, 20, "jira") + hexs(4, "jira2"), "jira")
    au = (t(ALNUM, 12, "au1"), t(ALNUM, 5, "au2"), t(ALNUM, 20, "au3"), t(ALNUM + "+/_", 60, "au4"))
    yield Shape("authress-service-client-access-key", "sc_{}.{}.acc_{}.{}".format(*au))
    yield Shape("aws-access-token", "A3T" + t(UPALNUM, 1, "a3t") + t(UPPER + "234567", 16, "aws"))
    yield Shape("aws-access-token:asia", "ASIA" + t(UPPER + "234567", 16, "asia"))
    yield Shape("aws-amazon-bedrock-api-key-long-lived", "ABSK" + t(B64, 132, "absk"))
    yield Shape(
        "aws-amazon-bedrock-api-key-short-lived",
        "bedrock-api-key-" + _b64(b"bedrock.amazonaws.com") + t(B62, 120, "bedrock"),
    )
    yield Shape("azure-ad-client-secret", t(B62, 3, "az1") + "8Q~" + t(B62 + "_~.-", 34, "az2"))
    yield Shape("beamer-api-token", "b_" + t(ALNUM + "=_-", 44, "beamer"), "beamer")
    yield Shape("bitbucket-client-id", t(ALNUM, 32, "bb-id"), "bitbucket")
    yield Shape("bitbucket-client-secret", t(ALNUM + "_-", 64, "bb-secret"), "bitbucket")
    yield Shape("bittrex-access-key", t(ALNUM, 32, "bittrex-a"), "bittrex")
    yield Shape("bittrex-secret-key", t(ALNUM, 32, "bittrex-s"), "bittrex")
    yield Shape("cisco-meraki-api-key", hexs(40, "meraki"), "meraki", alone=False)
    yield Shape("clickhouse-cloud-api-secret-key", "4b1d" + t(B62, 38, "clickhouse"))
    yield Shape("clojars-api-token", "CLOJARS_" + t(ALNUM, 60, "clojars"))
    yield Shape("cloudflare-api-key", t(ALNUM + "_-", 40, "cf"), "cloudflare")
    yield Shape("cloudflare-global-api-key", hexs(37, "cf-global"), "cloudflare", alone=False)
    yield Shape("cloudflare-origin-ca-key", "v1.0-" + hexs(24, "cf-o1") + "-" + hexs(146, "cf-o2"))
    yield Shape("codecov-access-token", t(ALNUM, 32, "codecov"), "codecov")
    yield Shape("cohere-api-token", t(B62, 40, "cohere"), "cohere")
    yield Shape("coinbase-access-token", t(ALNUM + "_-", 64, "coinbase"), "coinbase")
    yield Shape("confluent-access-token", t(ALNUM, 16, "confluent-a"), "confluent")
    yield Shape("confluent-secret-key", t(ALNUM, 64, "confluent-s"), "confluent")
    yield Shape("contentful-delivery-api-token", t(ALNUM + "=_-", 43, "contentful"), "contentful")
    yield Shape(
        "curl-auth-header",
        t(B62, 40, "curl-h"),
        line='curl -sS -H "Authorization: Bearer %s" https://api.example.com/v1/models',
    )
    yield Shape(
        "curl-auth-header:x-api-key",
        t(ALNUM, 32, "curl-x"),
        line="curl --header 'X-Api-Key: %s' https://api.example.com/v1",
    )
    yield Shape(
        "curl-auth-user",
        t(B62 + "@.-", 20, "curl-u"),
        line="curl -u 'deploy:%s' https://artifacts.example.com/upload",
    )
    yield Shape("databricks-api-token", "dapi" + hexs(32, "dapi") + "-2")
    yield Shape("datadog-access-token", t(ALNUM, 40, "datadog"), "datadog")
    yield Shape(
        "defined-networking-api-token",
        "dnkey-" + t(ALNUM + "_-", 26, "dn1") + "-" + t(ALNUM + "_-", 52, "dn2"),
        "dnkey",
    )
    yield Shape("digitalocean-access-token", "doo_v1_" + hexs(64, "doo"))
    yield Shape("digitalocean-pat", "dop_v1_" + hexs(64, "dop"))
    yield Shape("digitalocean-refresh-token", "dor_v1_" + hexs(64, "dor"))
    yield Shape("discord-api-token", hexs(64, "discord-api"), "discord", alone=False)
    yield Shape("discord-client-id", t(DIGITS, 18, "discord-id"), "discord", alone=False)
    yield Shape("discord-client-secret", t(ALNUM + "_-", 32, "discord-secret"), "discord")
    yield Shape("doppler-api-token", "dp.pt." + t(B62, 43, "doppler"))
    yield Shape("droneci-access-token", t(ALNUM, 32, "droneci"), "droneci")
    yield Shape("dropbox-api-token", t(ALNUM, 15, "dropbox"), "dropbox", alone=False)
    yield Shape(
        "dropbox-long-lived-api-token",
        t(ALNUM, 11, "dbx-l1") + "A" * 10 + t(ALNUM + "_-", 43, "dbx-l2"),
        "dropbox",
    )
    yield Shape("dropbox-short-lived-api-token", "sl." + t(ALNUM + "_-", 135, "dbx-s"), "dropbox")
    yield Shape("duffel-api-token", "duffel_test_" + t(B62 + "_-", 43, "duffel"))
    yield Shape(
        "dynatrace-api-token", "dt0c01." + t(UPALNUM, 24, "dt1") + "." + t(UPALNUM, 64, "dt2")
    )
    yield Shape("easypost-api-token", "EZAK" + t(ALNUM, 54, "ezak"))
    yield Shape("easypost-test-api-token", "EZTK" + t(ALNUM, 54, "eztk"))
    yield Shape("etsy-access-token", t(ALNUM, 24, "etsy"), "etsy")
    yield Shape(
        "facebook-access-token", t(DIGITS, 15, "fb1") + "|" + t(ALNUM + "_-", 32, "fb2"), "facebook"
    )
    yield Shape("facebook-page-access-token", "EAAM" + t(B62, 120, "eaam"))
    yield Shape("facebook-secret", hexs(32, "fb-secret"), "facebook", alone=False)
    yield Shape("fastly-api-token", t(ALNUM + "_-", 32, "fastly"), "fastly")
    yield Shape("finicity-api-token", hexs(32, "finicity-a"), "finicity", alone=False)
    yield Shape("finicity-client-secret", t(ALNUM, 20, "finicity-s"), "finicity")
    yield Shape("finnhub-access-token", t(ALNUM, 20, "finnhub"), "finnhub")
    yield Shape("flickr-access-token", t(ALNUM, 32, "flickr"), "flickr")
    yield Shape("flutterwave-encryption-key", "FLWSECK_TEST-" + t("abcdefgh" + DIGITS, 12, "flw-e"))
    yield Shape(
        "flutterwave-public-key", "FLWPUBK_TEST-" + t("abcdefgh" + DIGITS, 32, "flw-p") + "-X"
    )
    yield Shape(
        "flutterwave-secret-key", "FLWSECK_TEST-" + t("abcdefgh" + DIGITS, 32, "flw-s") + "-X"
    )
    yield Shape("flyio-access-token", "fo1_" + t(WORD, 43, "fo1"))
    yield Shape("flyio-access-token:fm2", "fm2_" + t(B64, 120, "fm2"))
    yield Shape("frameio-api-token", "fio-u-" + t(ALNUM + "_-=", 64, "frameio"))
    yield Shape(
        "freemius-secret-key",
        "sk_" + t(B62 + "!#$%&*", 29, "freemius"),
        line="    'secret_key' => '%s',",
    )
    yield Shape("freshbooks-access-token", t(ALNUM, 64, "freshbooks"), "freshbooks")
    yield Shape("gcp-api-key", "AIza" + t(WORD, 35, "aiza"))
    yield Shape("generic-api-key", t(B62, 28, "generic"), "client_auth")
    yield Shape("github-app-token", "ghu_" + t(B62, 36, "ghu"))
    yield Shape("github-fine-grained-pat", "github_pat_" + t(B62 + "_", 82, "gh-fg"))
    yield Shape("github-oauth", "gho_" + t(B62, 36, "gho"))
    yield Shape("github-pat", "ghp_" + t(B62, 36, "ghp"))
    yield Shape("github-refresh-token", "ghr_" + t(B62, 36, "ghr"))
    yield Shape(
        "gitlab-cicd-job-token", "glcbt-" + t(B62, 3, "glcbt1") + "_" + t(WORD, 20, "glcbt")
    )
    yield Shape("gitlab-deploy-token", "gldt-" + t(WORD, 20, "gldt"))
    yield Shape("gitlab-feature-flag-client-token", "glffct-" + t(WORD, 20, "glffct"))
    yield Shape("gitlab-feed-token", "glft-" + t(WORD, 20, "glft"))
    yield Shape("gitlab-incoming-mail-token", "glimt-" + t(WORD, 25, "glimt"))
    yield Shape("gitlab-kubernetes-agent-token", "glagent-" + t(WORD, 50, "glagent"))
    yield Shape("gitlab-oauth-app-secret", "gloas-" + t(WORD, 64, "gloas"))
    yield Shape("gitlab-pat", "glpat-" + t(WORD, 20, "glpat"))
    yield Shape(
        "gitlab-pat-routable",
        "glpat-" + t(WORD, 36, "glpat-r") + "." + t(ALNUM, 2, "glr2") + t(ALNUM, 7, "glr3"),
    )
    yield Shape("gitlab-ptt", "glptt-" + hexs(40, "glptt"))
    yield Shape("gitlab-rrt", "GR1348941" + t(WORD, 20, "gr13"))
    yield Shape("gitlab-runner-authentication-token", "glrt-" + t(WORD, 20, "glrt"))
    yield Shape(
        "gitlab-runner-authentication-token-routable",
        "glrt-t1_" + t(WORD, 30, "glrt-r") + "." + t(ALNUM, 9, "glrt-r2"),
    )
    yield Shape("gitlab-scim-token", "glsoat-" + t(WORD, 20, "glsoat"))
    yield Shape(
        "gitlab-session-cookie", t(ALNUM, 32, "gl-session"), line="Cookie: _gitlab_session=%s"
    )
    yield Shape("gitter-access-token", t(ALNUM + "_-", 40, "gitter"), "gitter")
    yield Shape("gocardless-api-token", "live_" + t(ALNUM + "_-=", 40, "gocardless"), "gocardless")
    yield Shape("grafana-api-key", "eyJrIjoi" + t(B62, 80, "grafana-k"))
    yield Shape("grafana-cloud-api-token", "glc_" + t(B64, 80, "glc"))
    yield Shape("grafana-service-account-token", "glsa_" + t(B62, 32, "glsa") + "_" + hexs(8, "gs"))
    yield Shape(
        "harness-api-key",
        "pat." + t(WORD, 22, "h1") + "." + t(B62, 24, "h2") + "." + t(B62, 20, "h3"),
    )
    yield Shape(
        "hashicorp-tf-api-token", t(ALNUM, 14, "tf1") + ".atlasv1." + t(ALNUM + "_-=", 66, "tf2")
    )
    yield Shape(
        "hashicorp-tf-password",
        t(ALNUM + "_-", 16, "tf-pw"),
        line='  administrator_login_password = "%s"',
    )
    yield Shape("heroku-api-key", uid("heroku"), "heroku", alone=False)
    yield Shape("heroku-api-key-v2", "HRKU-AA" + t(WORD, 58, "hrku"))
    yield Shape("hubspot-api-key", uid("hubspot", upper=True), "hubspot", alone=False)
    yield Shape("huggingface-access-token", "hf_" + t(string.ascii_letters, 34, "hf"))
    yield Shape(
        "huggingface-organization-api-token", "api_org_" + t(string.ascii_letters, 34, "org")
    )
    yield Shape("infracost-api-token", "ico-" + t(B62, 32, "ico"))
    yield Shape("intercom-api-key", t(ALNUM + "=_-", 60, "intercom"), "intercom")
    yield Shape("intra42-client-secret", "s-s4t2ud-" + hexs(64, "intra42"))
    yield Shape("jfrog-api-key", t(ALNUM, 73, "jfrog-k"), "jfrog")
    yield Shape("jfrog-identity-token", t(ALNUM, 64, "jfrog-i"), "artifactory")
    yield Shape("jwt", _jwt())
    yield Shape("jwt-base64", base64.b64encode(_jwt().encode()).decode().rstrip("="))
    yield Shape("kraken-access-token", t(ALNUM + "/=_+-", 86, "kraken"), "kraken")
    yield Shape(
        "kubernetes-secret-yaml",
        _b64(t(B62, 24, "k8s").encode()),
        line="apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ndata:\n  db.conf: %s",
    )
    yield Shape("kucoin-access-token", hexs(24, "kucoin-a"), "kucoin", alone=False)
    yield Shape("kucoin-secret-key", uid("kucoin"), "kucoin", alone=False)
    yield Shape("launchdarkly-access-token", t(ALNUM + "=_-", 40, "ld"), "launchdarkly")
    yield Shape("linear-api-key", "lin_api_" + t(B62, 40, "linear"))
    yield Shape("linear-client-secret", hexs(32, "linear-s"), "linear", alone=False)
    yield Shape("linkedin-client-id", t(ALNUM, 14, "linkedin-id"), "linkedin", alone=False)
    yield Shape("linkedin-client-secret", t(ALNUM, 16, "linkedin-s"), "linkedin", alone=False)
    yield Shape("lob-api-key", "live_" + hexs(35, "lob"), "lob")
    yield Shape("lob-pub-api-key", "test_pub_" + hexs(31, "lob-pub"), "lob")
    yield Shape("looker-client-id", t(ALNUM, 20, "looker-id"), "looker")
    yield Shape("looker-client-secret", t(ALNUM, 24, "looker-s"), "looker")
    yield Shape("mailchimp-api-key", hexs(32, "mailchimp") + "-us12", "mailchimp")
    yield Shape("mailgun-private-api-token", "key-" + hexs(32, "mailgun"), "mailgun")
    yield Shape("mailgun-pub-key", "pubkey-" + hexs(32, "mailgun-pub"), "mailgun")
    yield Shape("mailgun-signing-key", "-".join((t("abcdefgh" + DIGITS, 32, "mg1"), t(
        "abcdefgh" + DIGITS, 8, "mg2"), t("abcdefgh" + DIGITS, 8, "mg3"))), "mailgun")  # fmt: skip
    yield Shape(
        "mapbox-api-token",
        "pk." + t(ALNUM, 60, "mapbox1") + "." + t(ALNUM, 22, "mapbox2"),
        "mapbox",
    )
    yield Shape("mattermost-access-token", t(ALNUM, 26, "mattermost"), "mattermost")
    yield Shape("maxmind-license-key", t(B62, 6, "mm1") + "_" + t(B62, 29, "mm2") + "_mmk")
    yield Shape("messagebird-api-token", t(ALNUM, 25, "messagebird"), "messagebird")
    yield Shape("messagebird-client-id", uid("messagebird"), "message_bird", alone=False)
    yield Shape("microsoft-teams-webhook", uid("teams1") + "@" + uid("teams2") + "/IncomingWebhook/"
                + t(ALNUM, 32, "teams3") + "/" + uid("teams4"),
                line="https://acme.webhook.office.com/webhookb2/%s")  # fmt: skip
    yield Shape("netlify-access-token", t(ALNUM + "=_-", 43, "netlify"), "netlify")
    yield Shape("new-relic-browser-api-token", "NRJS-" + hexs(19, "nrjs"), "newrelic")
    yield Shape("new-relic-insert-key", "NRII-" + t(ALNUM + "-", 32, "nrii"), "new_relic")
    yield Shape("new-relic-user-api-id", t(ALNUM, 64, "nr-id"), "new-relic")
    yield Shape("new-relic-user-api-key", "NRAK-" + t(UPALNUM, 27, "nrak"), "newrelic")
    yield Shape("notion-api-token", "ntn_" + t(DIGITS, 11, "ntn1") + t(B62, 35, "ntn2"))
    yield Shape("npm-access-token", "npm_" + t(B62, 36, "npm"))
    yield Shape(
        "nuget-config-password",
        t(B62 + "!#", 16, "nuget"),
        line='    <add key="ClearTextPassword" value="%s" />',
    )
    yield Shape("nytimes-access-token", t(ALNUM + "=_-", 32, "nytimes"), "nytimes")
    yield Shape("octopus-deploy-api-key", "API-" + t(UPALNUM, 26, "octopus"))
    yield Shape("okta-access-token", "00" + t(WORD + "=", 40, "okta"), "okta")
    yield Shape(
        "openai-api-key", "sk-proj-" + t(WORD, 74, "oai1") + "T3BlbkFJ" + t(WORD, 74, "oai2")
    )
    yield Shape(
        "openai-api-key:legacy", "sk-" + t(B62, 20, "oai-l1") + "T3BlbkFJ" + t(B62, 20, "oai-l2")
    )
    yield Shape("openshift-user-token", "sha256~" + t(WORD, 43, "openshift"))
    yield Shape("perplexity-api-key", "pplx-" + t(B62, 48, "pplx"))
    yield Shape("plaid-api-token", "access-production-" + uid("plaid-access"), "plaid")
    yield Shape("plaid-client-id", t(ALNUM, 24, "plaid-id"), "plaid")
    yield Shape("plaid-secret-key", t(ALNUM, 30, "plaid-s"), "plaid")
    yield Shape("planetscale-api-token", "pscale_tkn_" + t(WORD + ".", 43, "pscale-t"))
    yield Shape("planetscale-oauth-token", "pscale_oauth_" + t(WORD, 43, "pscale-o"))
    yield Shape("planetscale-password", "pscale_pw_" + t(WORD, 43, "pscale-p"))
    yield Shape("postman-api-token", "PMAK-" + hexs(24, "pmak1") + "-" + hexs(34, "pmak2"))
    yield Shape("prefect-api-token", "pnu_" + t(B62, 36, "pnu"))
    yield Shape("private-key", t(B64, 64, "pem"),
                line="-----BEGIN EC PRIVATE KEY-----\n%s\n" + t(B64, 24, "pem2")
                + "==\n-----END EC PRIVATE KEY-----")  # fmt: skip
    yield Shape("privateai-api-token", t(ALNUM, 32, "privateai"), "private_ai")
    yield Shape("pulumi-api-token", "pul-" + hexs(40, "pulumi"))
    yield Shape("pypi-upload-token", "pypi-AgEIcHlwaS5vcmc" + t(WORD, 70, "pypi"))
    yield Shape("rapidapi-access-token", t(ALNUM + "_-", 50, "rapidapi"), "rapidapi")
    yield Shape("readme-api-token", "rdme_" + t(ALNUM, 70, "rdme"))
    yield Shape("rubygems-api-token", "rubygems_" + hexs(48, "rubygems"))
    yield Shape("scalingo-api-token", "tk-us-" + t(WORD, 48, "scalingo"))
    yield Shape("sendbird-access-id", uid("sendbird"), "sendbird", alone=False)
    yield Shape("sendbird-access-token", hexs(40, "sendbird-t"), "sendbird", alone=False)
    yield Shape("sendgrid-api-token", "SG." + t(WORD, 22, "sg1") + "." + t(WORD, 43, "sg2"))
    yield Shape("sendinblue-api-token", "xkeysib-" + hexs(64, "sib") + "-" + t(B62, 16, "sib2"))
    yield Shape("sentry-access-token", hexs(64, "sentry"), "sentry", alone=False)
    yield Shape("sentry-org-token", _sentry_org())
    yield Shape("sentry-user-token", "sntryu_" + hexs(64, "sntryu"))
    yield Shape("settlemint-application-access-token", "sm_aat_" + t(B62, 16, "sm-aat"))
    yield Shape("settlemint-personal-access-token", "sm_pat_" + t(B62, 16, "sm-pat"))
    yield Shape("settlemint-service-access-token", "sm_sat_" + t(B62, 16, "sm-sat"))
    yield Shape("shippo-api-token", "shippo_live_" + hexs(40, "shippo"))
    yield Shape("shopify-access-token", "shpat_" + hexs(32, "shpat"))
    yield Shape("shopify-custom-access-token", "shpca_" + hexs(32, "shpca"))
    yield Shape("shopify-private-app-access-token", "shppa_" + hexs(32, "shppa"))
    yield Shape("shopify-shared-secret", "shpss_" + hexs(32, "shpss"))
    yield Shape(
        "sidekiq-secret",
        hexs(8, "sk1") + ":" + hexs(8, "sk2"),
        "BUNDLE_ENTERPRISE__CONTRIBSYS__COM",
        alone=False,
    )
    yield Shape(
        "sidekiq-sensitive-url",
        hexs(8, "sku1") + ":" + hexs(8, "sku2"),
        line="source 'https://%s@enterprise.contribsys.com/'",
    )
    yield Shape("slack-app-token", "xapp-1-A" + t(UPALNUM, 10, "xapp1") + "-" + t(
        DIGITS, 13, "xapp2") + "-" + hexs(64, "xapp3"))  # fmt: skip
    yield Shape("slack-bot-token", "xoxb-" + t(DIGITS, 12, "xoxb1") + "-" + t(
        DIGITS, 13, "xoxb2") + "-" + t(B62, 24, "xoxb3"))  # fmt: skip
    yield Shape("slack-config-access-token", "xoxe.xoxp-1-" + t(UPALNUM, 164, "xoxe-a"))
    yield Shape("slack-config-refresh-token", "xoxe-1-" + t(UPALNUM, 146, "xoxe-r"))
    yield Shape(
        "slack-legacy-bot-token", "xoxb-" + t(DIGITS, 10, "xoxb-l1") + "-" + t(B62, 24, "l2")
    )
    yield Shape("slack-legacy-token",
                "xoxs-" + "-".join(t(DIGITS, 10, f"xoxs{i}") for i in range(3))
                + "-" + hexs(64, "xoxs"))  # fmt: skip
    yield Shape("slack-legacy-workspace-token", "xoxa-2-" + t(B62, 40, "xoxa"))
    yield Shape("slack-user-token", "xoxp-" + "-".join(t(DIGITS, 12, f"xoxp{i}") for i in range(3))
                + "-" + t(B62, 32, "xoxp"))  # fmt: skip
    yield Shape("slack-webhook-url", "T0" + t(UPALNUM, 9, "swh1") + "/B0" + t(UPALNUM, 9, "swh2")
                + "/" + t(B62, 24, "swh3"), line="https://hooks.slack.com/services/%s")  # fmt: skip
    yield Shape(
        "slack-webhook-url:workflows",
        t(B62, 48, "swf"),
        line="https://hooks.slack.com/workflows/%s",
    )
    yield Shape("snyk-api-token", uid("snyk"), "snyk_token", alone=False)
    yield Shape("sonar-api-token", t(ALNUM + "_-", 40, "sonar"), "sonar_login")
    yield Shape("sourcegraph-access-token", "sgp_" + hexs(16, "sgp1") + "_" + hexs(40, "sgp2"))
    yield Shape("sourcegraph-access-token:hex", hexs(40, "sourcegraph"), "sourcegraph", alone=False)
    yield Shape("square-access-token", "sq0atp-" + t(WORD, 22, "sq0atp"))
    yield Shape("square-access-token:eaaa", "EAAA" + t(WORD, 60, "eaaa"))
    yield Shape("squarespace-access-token", uid("squarespace"), "squarespace", alone=False)
    yield Shape("stripe-access-token", "sk_prod_" + t(B62, 24, "stripe"))
    yield Shape("stripe-access-token:rk-test", "rk_test_" + t(B62, 12, "stripe-rk"))
    yield Shape("sumologic-access-id", "su" + t(B62, 12, "sumo-id"), "sumo", alone=False)
    yield Shape("sumologic-access-token", t(ALNUM, 64, "sumo-t"), "SUMO")
    yield Shape(
        "telegram-bot-api-token", t(DIGITS, 10, "tg1") + ":A" + t(WORD, 34, "tg2"), "telegram"
    )
    yield Shape("travisci-access-token", t(ALNUM, 22, "travis"), "travis")
    yield Shape("twilio-api-key", "SK" + hexs(32, "twilio"))
    yield Shape("twitch-api-token", t(ALNUM, 30, "twitch"), "twitch")
    yield Shape("twitter-access-secret", t(ALNUM, 45, "tw-as"), "twitter")
    yield Shape(
        "twitter-access-token", t(DIGITS, 19, "tw-at1") + "-" + t(B62, 32, "tw-at2"), "twitter"
    )
    yield Shape("twitter-api-key", t(ALNUM, 25, "tw-ak"), "twitter")
    yield Shape("twitter-api-secret", t(ALNUM, 50, "tw-secret"), "twitter")
    yield Shape("twitter-bearer-token", "A" * 22 + t(B62 + "%", 90, "tw-bearer"), "twitter")
    yield Shape("typeform-api-token", "tfp_" + t(ALNUM + "_-.=", 59, "typeform"), "typeform")
    yield Shape("vault-batch-token", "hvb." + t(WORD, 150, "hvb"))
    yield Shape("vault-service-token", "hvs." + t(WORD, 95, "hvs"))
    yield Shape("vault-service-token:legacy", "s." + t(B62, 24, "vault-s"))
    yield Shape(
        "yandex-access-token", "t1." + t(WORD, 40, "ya-t1") + "." + t(WORD, 86, "ya-t2"), "yandex"
    )
    yield Shape("yandex-api-key", "AQVN" + t(WORD, 36, "aqvn"), "yandex")
    yield Shape("yandex-aws-access-token", "YC" + t(WORD, 38, "yc"), "yandex")
    yield Shape("zendesk-secret-key", t(ALNUM, 40, "zendesk"), "zendesk")


def shapes(salt: str = "") -> tuple[Shape, ...]:
    """One sample a rule; another ``salt`` gives other random characters, the same shapes."""
    _SALT[0] = salt
    try:
        return tuple(_shapes())
    finally:
        _SALT[0] = ""


SHAPES: tuple[Shape, ...] = shapes()

# Where a rule finds its token only in one kind of text (a curl command, a PEM block, a
# Kubernetes manifest, a webhook URL), that text is its one form: it is planted as it is.
LINE_ONLY = frozenset(s.rule for s in SHAPES if s.line)


# --- look-alikes --------------------------------------------------------------------------

_MODELS = (
    "meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-70B-Instruct", "Qwen/Qwen2.5-72B-Instruct",
    "mistralai/Mixtral-8x22B-v0.1", "google/gemma-2-27b-it", "deepseek-ai/DeepSeek-V3",
    "microsoft/Phi-3.5-mini-instruct", "bigscience/bloom-7b1", "EleutherAI/pythia-6.9b-deduped",
    "tiiuae/falcon-40b", "openai-community/gpt2-xl", "sentence-transformers/all-MiniLM-L6-v2",
    "stabilityai/stable-diffusion-xl-base-1.0", "nvidia/Llama-3.1-Nemotron-70B-Instruct-HF",
    "allenai/OLMo-2-1124-13B", "HuggingFaceTB/SmolLM2-1.7B-Instruct",
)  # fmt: skip
_WORDS = (
    "fluent", "sun", "misty", "river", "bright", "forest", "divine", "wave", "cosmic", "dawn",
    "silver", "moon", "gentle", "breeze", "ancient", "glade", "stellar", "lake", "crimson", "sky",
)  # fmt: skip
_B32 = LOWER + "234567"


def _lookalikes() -> Iterator[tuple[str, str]]:
    rng = random.Random("lookalikes")
    for i in range(20):
        yield "git-sha1", hashlib.sha1(f"commit {i}".encode()).hexdigest()
        yield "git-sha256", hashlib.sha256(f"commit {i}".encode()).hexdigest()
        yield "short-sha", hashlib.sha1(f"short {i}".encode()).hexdigest()[:12]
    for i in range(12):
        digest = hashlib.sha256(f"wheel {i}".encode())
        yield "wheel-sha256", digest.hexdigest()
        yield "sha256-digest", "sha256:" + digest.hexdigest()
        yield (
            "record-hash",
            "sha256=" + base64.urlsafe_b64encode(digest.digest()).decode().rstrip("="),
        )
        yield "image-digest", f"nvcr.io/nvidia/pytorch@sha256:{digest.hexdigest()}"
        yield "npm-integrity", "sha512-" + base64.b64encode(
            hashlib.sha512(f"pkg {i}".encode()).digest()).decode()  # fmt: skip
    for torch in ("2.11.0", "2.10.1", "2.9.0", "2.8.0"):
        for build in ("cu128", "cu130", "cu126", "rocm6.4", "cpu", "xpu"):
            yield "version", f"{torch}+{build}"
    yield from (("version", v) for v in ("12.8.1", "13.0.96", "9.19.0.56", "2.28.9", "3.6.0",
        "580.159.04", "4.57.1", "0.26.0+cu130", "2.11.0.dev20261120+cu130", "1.26.4", "2.2.6",
        "0.11.15", "8.9.7.29-1+cuda12.2", "12.8.93-1", "25.01-py3", "v2.11.0-rc3"))  # fmt: skip
    for _ in range(16):
        gpu = uuid.UUID(int=rng.getrandbits(128), version=4)
        yield "gpu-uuid", f"GPU-{gpu}"
        yield "mig-uuid", f"MIG-{uuid.UUID(int=rng.getrandbits(128), version=4)}"
        yield "uuid", str(uuid.UUID(int=rng.getrandbits(128), version=4))
        yield "uuid-hex", uuid.UUID(int=rng.getrandbits(128), version=4).hex
    yield "visible-devices", ",".join(f"GPU-{uuid.UUID(int=rng.getrandbits(128), version=4)}"
                                      for _ in range(2))  # fmt: skip
    for i in range(16):
        yield "mlflow-run-id", uuid.UUID(int=rng.getrandbits(128), version=4).hex
        yield "wandb-run-id", "".join(rng.choice(ALNUM) for _ in range(8))
        words = rng.sample(_WORDS, 2)
        yield "wandb-run-name", f"{words[0]}-{words[1]}-{rng.randrange(1, 999)}"
        yield "mongo-object-id", hexs(24, f"oid{i}")
    for _ in range(12):
        key = "f" + "".join(rng.choice(_B32) for _ in range(51))
        yield "inductor-key-path", f"/tmp/torchinductor_ml/fxgraph/{key[1:3]}/{key}"
        triton = "".join(rng.choice(UPPER + "234567") for _ in range(52))
        yield "triton-cache-path", f"/root/.triton/cache/{triton}"
        yield "triton-cache-dir", f"/scratch/cache/triton/{rng.randrange(8)}/{triton[:20]}"
        aot = "a" + "".join(rng.choice(_B32) for _ in range(51))
        yield "aotautograd-path", f"/tmp/torchinductor_ml/aotautograd/{aot}/entry"
        yield "inductor-kernel", f"/tmp/torchinductor_ml/{key[1:3]}/c{key[2:40]}.py"
    yield from (("path", p) for p in (
        "/usr/local/cuda-12.8", "/usr/local/cuda/lib64:/usr/local/nvidia/lib64",
        "/opt/conda/envs/train/lib/python3.12/site-packages", "/data/hf-cache/hub",
        "~/.cache/huggingface", "/mnt/fsx/checkpoints/llama-70b/step_012000",
        "/etc/nccl/topo.xml", "/scratch/jobs/4412/tmp", "./configs/deepspeed_zero3.json",
        "/home/ml/.netrc", "/run/secrets/hf_token", "/var/run/nvidia-persistenced/socket",
        "/usr/lib/x86_64-linux-gnu/libcudnn.so.9.14.0", "src:tests", "/opt/nvidia/nsight-systems",
        "/dev/shm/torch_compile_debug/run_2026_11_29_11_37_07_123456-pid_4821",
        "/root/.cache/torch/kernels", "/lustre/projects/mlperf/datasets/c4/en/shard-00017",
        "/workspace/outputs/2026-11-29/11-37-07", "s3://ml-artifacts/checkpoints/run-42/",
        "gs://team-bucket/datasets/imagenet/train-00042-of-01024",
    ))  # fmt: skip
    yield from (("host", h) for h in (
        "h200-node-017.cluster.internal", "ip-10-0-12-34.ec2.internal", "gpu-a100-80g-03",
        "login01.hpc.example.edu", "10.0.0.4", "10.0.0.1:29500", "[fd00::12]:23456",
        "trainer-0.trainer-headless.default.svc.cluster.local", "mlflow.internal:5000",
        "pypi.internal.example.com", "eth0", "ib0", "bond0", "^docker0,lo", "enp65s0f1np1",
    ))  # fmt: skip
    yield from (("model-id", m) for m in _MODELS)
    yield from (("model-id", m.split("/")[1]) for m in _MODELS)
    yield from (("url", u) for u in (
        "https://download.pytorch.org/whl/cu128", "https://pypi.org/simple",
        "https://files.pythonhosted.org/packages/5c/2f/"
        + hashlib.sha256(b"torch wheel").hexdigest()[:60]
        + "/torch-2.11.0-cp312-cp312-manylinux_2_28_x86_64.whl",
        "https://download.pytorch.org/whl/cu130/torch-2.11.0%2Bcu130-cp312-cp312-"
        "manylinux_2_28_x86_64.whl#sha256=" + hashlib.sha256(b"cu130 wheel").hexdigest(),
        "https://huggingface.co/meta-llama/Llama-3.1-8B/resolve/"
        + hashlib.sha1(b"hf rev").hexdigest() + "/model-00001-of-00004.safetensors",
        "git+https://github.com/Dao-AILab/flash-attention@" + hashlib.sha1(b"fa").hexdigest(),
        "https://github.com/pytorch/pytorch/archive/" + hashlib.sha1(b"pt").hexdigest() + ".zip",
        "https://hf-mirror.com", "https://api.wandb.ai", "http://mlflow.internal:5000/#/"
        "experiments/3/runs/" + uuid.UUID(int=rng.getrandbits(128), version=4).hex,
        "https://pkgs.dev.azure.com/acme/" + str(uuid.UUID(int=7, version=4))
        + "/_packaging/ml-feed/pypi/simple/",
        "https://gitlab.example.com/api/v4/projects/1234567/packages/pypi/simple",
        "https://acme.jfrog.io/artifactory/api/pypi/pypi-remote/simple",
        "http://10.0.0.1:3141/root/pypi/+simple/", "https://wandb.ai/acme/llama-sft/runs/3k9x2m1q",
        "file:///data/wheels/flash_attn-2.8.3-cp312-cp312-linux_x86_64.whl",
        "redis://cache.internal:6379/0", "https://s3.us-west-2.amazonaws.com/acme-ml/ckpt/run-17",
        "https://dl.cloudsmith.io/public/acme/ml/python/simple/",
    ))  # fmt: skip
    yield from (("setting", s) for s in (
        "0", "1", "0,1,2,3", "0,1,2,3,4,5,6,7", "all", "INFO", "WARN", "DETAIL", "TRACE",
        "expandable_segments:True", "expandable_segments:True,max_split_size_mb:128",
        "backend:cudaMallocAsync", "8.0;8.6;9.0+PTX", "9.0a", "10.0 12.0", "Ring,Tree", "Simple",
        "LL128", "IB", "Socket", "mlx5_0,mlx5_1,mlx5_4,mlx5_5", "^mlx5_2", "=mlx5_0:1", "3",
        "PHB", "SYS", "NVL", "granularity=fine,compact,1,0", "GNU", "INTEL", "bf16", "fp8",
        "FLASHINFER", "FLASH_ATTN", "XFORMERS", "TORCH_SDPA", "offline", "online", "disabled",
        "+dynamo,recompiles,graph_breaks", "output_code", "max-autotune-no-cudagraphs",
        "compute,utility", "cuda>=12.8 brand=tesla,driver>=535,driver<536", "LAZY", "EAGER",
        "llama-sft", "acme-ml", "exp-2026-11-29-lr3e-4", "sweep-a100-bs256-seq4096",
        "llama3-8b-sft-2026-11-29-lr3e4-warmup500", "run_20261129_113707", "1732880227",
        "1732880227.123456", "2026-11-29T11:37:07Z", "2026-11-29 11:37:07.123456+00:00",
        "DistributedDataParallel", "FULL_SHARD", "TRANSFORMER_BASED_WRAP", "LlamaDecoderLayer",
        "NO_PREFETCH", "BACKWARD_PRE", "SHARDED_STATE_DICT", "deepspeed_zero3_offload.json",
        "PYTORCH_NVML_BASED_CUDA_CHECK", "cudaMallocAsync", "nccl", "gloo", "cuda:0",
        "expandable_segments:False,garbage_collection_threshold:0.6", "true", "False",
        "NVIDIA H200", "sm_90a", "libnccl-net.so", "aws-ofi-nccl", "TORCH_NCCL_BLOCKING_WAIT",
        "hf_transfer", "HF_HUB_ENABLE_HF_TRANSFER", "my-team/llama-sft-checkpoints",
        "trainer-7d9f8b6c5d-x2k4q", "job-4412-rank-3", "slurm-4412.out", "c4-en-train",
        "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "0123456789abcdefghijklmnopqrstuvwxyz",
        "AutoModelForCausalLM", "LlamaForCausalLM", "Qwen2ForCausalLM", "torch_dtype=bfloat16",
        "attn_implementation=flash_attention_2", "--nproc_per_node=8 --nnodes=2",
        "python -m torch.distributed.run", "num_workers=8,pin_memory=True",
    ))  # fmt: skip
    for i in range(12):
        yield "checkpoint", f"checkpoint-{rng.randrange(100, 99999)}"
        yield "dated-dir", f"/outputs/{2026}-{rng.randrange(1, 12):02d}-{rng.randrange(1, 28):02d}"
        yield "port", str(rng.randrange(1024, 65535))
        yield "ip-port", f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(256)}:29500"
        yield "pid-path", f"/tmp/torch_compile_{rng.randrange(10**5, 10**6)}"
        yield "container-id", hexs(64, f"container{i}")
        yield "container-short", hexs(12, f"container{i}")
        yield "etag", '"' + hexs(32, f"etag{i}") + '"'
        yield "md5", hashlib.md5(f"file {i}".encode()).hexdigest()


LOOKALIKES: tuple[tuple[str, str], ...] = tuple(_lookalikes())
# each distinct look-alike under a captured variable's neutral name, as a user's would sit
LOOKALIKES_BY_NAME: dict[str, str] = {
    f"TORCH_LOOKALIKE_{i}": v for i, v in enumerate(dict.fromkeys(v for _, v in LOOKALIKES))
}


def text(shape: Shape) -> str:
    """The shape as it sits in a file: its own line, else an assignment to a name that holds
    the provider's word when its rule needs one (``adafruit_setting = "…"``), else to a
    neutral name; never a name that says "key" or "token" unless the rule's word does."""
    if shape.line:
        return shape.line % shape.secret
    name = f"{shape.ident}_setting" if shape.ident else "setting"
    return f'{name} = "{shape.secret}"'


# --- gitleaks' rules, read as Python regexes -------------------------------------------------


_POSIX = {
    "[:alnum:]": "A-Za-z0-9", "[:alpha:]": "A-Za-z", "[:digit:]": "0-9", "[:xdigit:]": "0-9A-Fa-f",
    "[:upper:]": "A-Z", "[:lower:]": "a-z", "[:space:]": "\\s",
}  # fmt: skip


def python_regex(go: str) -> str:
    """A gitleaks (Go RE2) pattern as Python's ``re`` reads it: RE2's ``(?i)`` inside a
    pattern holds to the end of its group, where Python takes flags only at the start, so it
    becomes a ``(?i:…)`` group closed there (and at each ``|`` of that group, reopened
    after it); ``\\z`` is Python's ``\\Z``; POSIX classes are spelled out."""
    for posix, chars in _POSIX.items():
        go = go.replace(posix, chars)
    out: list[str] = []
    opened: list[int] = [0]  # per open group: how many (?i: it must close
    i, in_class = 0, False
    while i < len(go):
        c = go[i]
        if c == "\\":
            pair = go[i : i + 2]
            out.append("\\Z" if pair == "\\z" else pair)
            i += 2
            continue
        if in_class:
            in_class = c != "]"
            out.append(c)
        elif c == "[":
            in_class = True
            out.append(c)
            if go[i + 1 : i + 2] == "]" or go[i + 1 : i + 3] == "^]":
                n = 2 if go[i + 1] == "^" else 1
                out.append(go[i + 1 : i + 1 + n])
                i += n
        elif go.startswith("(?i)", i) and i > 0:
            out.append("(?i:")
            opened[-1] += 1
            i += 4
            continue
        elif c == "(":
            opened.append(0)
            out.append(c)
        elif c == ")":
            out.append(")" * opened.pop() + ")")
        elif c == "|" and opened[-1]:
            out.append(")" * opened[-1] + "|" + "(?i:" * opened[-1])
        else:
            out.append(c)
        i += 1
    return "".join(out) + ")" * opened[0]


# --- envguard/_gitleaks.py, made from gitleaks' rules -----------------------------------------

RULES_TOML = Path(__file__).parent / "data" / "gitleaks" / "gitleaks.toml"
# Rules envguard leaves to its own redaction: the generic keyword rule (envguard's keyword
# assignments, tuned on 1.8 M lines of library code, with fewer false alarms), the PEM block
# (envguard keeps a patch's lines through it) and a file's name (pkcs12-file: no text).
# Three more, whose reach past each keyword is slow in Python's re (RE2 runs them in linear
# time): the two curl rules' ``.*?`` over up to six lines (100,000 "curl -H" took minutes),
# and the Kubernetes Secret's 300 characters past each "kind:" and "data:" (3 s a
# megabyte). envguard's own header, ``-u`` and Secret-manifest rules find what they find
# (the harness measures it).
LEFT_OUT = frozenset({
    "generic-api-key", "private-key", "pkcs12-file",
    "curl-auth-header", "curl-auth-user", "kubernetes-secret-yaml",
})  # fmt: skip
_LAZY_NAME = re.compile(r"^(\(\?i\))?\[\\w\.-\]\{0,50\}\?")


def envguard_rules() -> str:
    """The text of ``envguard/_gitleaks.py``: each rule's Python regex, secret group, entropy,
    keywords and allow-list. The leading ``[\\w.-]{0,50}?`` of a name rule is dropped: it
    only widens gitleaks' report to the name, and tried lazily at every position it made
    redaction slower by 20 times."""
    doc = tomllib.loads(RULES_TOML.read_text())
    lines = [
        '"""gitleaks\' default rules (https://github.com/gitleaks/gitleaks, MIT licence), as',
        "envguard's redaction runs them: made by ``python -m tests.secrets_corpus`` from",
        "``tests/data/gitleaks/gitleaks.toml``; do not edit.",
        "",
        "(rule id, Python regex, secret group, least entropy, keywords, allowed secrets)",
        '"""',
        "",
        "RULES: tuple[tuple[str, str, int, float, tuple[str, ...], tuple[str, ...]], ...] = (",
    ]
    for rule in doc["rules"]:
        if rule["id"] in LEFT_OUT:
            continue
        regex = python_regex(rule["regex"])
        flags, regex = _split_flags(regex)
        group = int(rule.get("secretGroup", 0))
        allowed = tuple(python_regex(rx) for a in rule.get("allowlists", ())
                        if a.get("regexTarget", "secret") == "secret" and "paths" not in a
                        for rx in a.get("regexes", ()))  # fmt: skip
        entry = (rule["id"], flags + regex, group, float(rule.get("entropy", 0)),
                 tuple(k.lower() for k in rule.get("keywords", ())), allowed)  # fmt: skip
        lines.append(f"    {entry!r},")
    allowed = tuple(python_regex(a) for a in doc["allowlist"]["regexes"])
    lines += [")", "", "# the global allow-list: placeholders, booleans, paths, repeated letters",
              f"ALLOWED: tuple[str, ...] = {allowed!r}", ""]  # fmt: skip
    return "\n".join(lines)


def _split_flags(regex: str) -> tuple[str, str]:
    flags = ""
    m = _LAZY_NAME.match(regex)
    if m:
        flags, regex = (m.group(1) or ""), regex[m.end() :]
    lazy = "(?i:[\\w.-]{0,50}?"
    if regex.startswith(lazy):
        regex = "(?i:" + regex[len(lazy) :]
    return flags, regex


if __name__ == "__main__":
    print(envguard_rules(), end="")
