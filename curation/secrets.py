"""Where the secrets and personal data are in a text.

:meth:`SecretFinder.find` returns the spans of one *logical* text to replace: a terminal
screen whose wrapped lines are already joined (see :mod:`worldtrace.curation.scrub`), a task, an
action
or one JSON string. Detection combines detect-secrets' plugins (provider keys and tokens,
JWTs, private-key headers, keyword assignments in quoted form, quoted high-entropy strings,
URL credentials), its entropy measure, and our own patterns for what it lacks:

* private keys from their ``BEGIN`` line to their ``END`` line, or to the end of the key's
  body when the end is not shown, and fragments: a body that ends with its ``END`` line, a
  body of two or more base64 lines alone;
* provider formats detect-secrets does not know (newer OpenAI, Anthropic, Hugging Face,
  Google, GitLab, Vault, DigitalOcean, Stripe test keys …);
* assignments to a secret-sounding name, whatever the value looks like: shell and ``.env``
  ``NAME=value``, ``export NAME=…``, YAML and INI ``name: value`` lines, JSON and code
  ``"name": "value"``, command-line ``--password value`` and ``--token=value``, URL query
  parameters, HTTP ``Authorization``/``Bearer``/``X-Api-Key`` headers and cookies, and a few
  tools' password flags (``mysql -p…``, ``curl -u user:pass``, ``sshpass -p``);
* tokens that look random (mixed case and digits, high entropy, not made of words) and hex
  strings that follow a secret-sounding word; bare hex (git hashes, checksums) is left.

What counts as a secret-sounding name is decided by :func:`secret_name_kind`: names built
from PASSWORD, SECRET, TOKEN, KEY or CREDENTIAL parts (``DB_PASSWORD``, ``apiKey``,
``X-Auth-Token``); a lower-case plain ``key`` only with a qualifier (``api_key``, not the
cache ``key=user:17``); and never a name that holds something about the secret rather than
the secret (``password_file``, ``TOKEN_URL``, ``credential.helper``, ``KeyError``).

An ordinary screen costs little: everything but private keys and base64 blocks is found
line by line, each distinct line once (a screen repeats most lines of the step before), and
each detector only looks where what it finds can be: token detectors at words of at least
:data:`MIN_TOKEN_WORD` characters holding one of their literal markers (each distinct word
once), keyword detectors at lines holding a keyword marker, URL detectors at lines holding
``://``, private keys only when ``-----`` or a PuTTY header occurs, e-mail and IP patterns at
lines with their hints.
"""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Iterator
from typing import NamedTuple

from detect_secrets.plugins.artifactory import ArtifactoryDetector
from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.base import BasePlugin
from detect_secrets.plugins.basic_auth import BasicAuthDetector
from detect_secrets.plugins.cloudant import CloudantDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.high_entropy_strings import (
    Base64HighEntropyString,
    HexHighEntropyString,
)
from detect_secrets.plugins.ibm_cloud_iam import IbmCloudIamDetector
from detect_secrets.plugins.ibm_cos_hmac import IbmCosHmacDetector
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.keyword import KeywordDetector
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.npm import NpmDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.private_key import PrivateKeyDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.softlayer import SoftlayerDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
from detect_secrets.plugins.twilio import TwilioKeyDetector


class Finding(NamedTuple):
    """A span ``[start, end)`` of a text holding something of ``kind`` to replace."""

    kind: str
    start: int
    end: int


# --------------------------------------------------------------------------- kinds

PASSWORD_KINDS = frozenset({"password", "url_password"})
PII_KINDS = frozenset({"email", "ipv4", "ipv6"})
GUESSED_KINDS = frozenset({"random_token", "high_entropy", "hex_token", "base64_block"})
KEYWORD_KINDS = frozenset(
    {"password", "secret", "token", "key", "credential", "authorization", "cookie"}
)
PLACEHOLDER = re.compile(r"<(?:PASSWORD|EMAIL|IP|SECRET:[a-z0-9_]+)>")
"""Every placeholder :func:`placeholder` writes (so that scrubbed text is left alone)."""


def placeholder(kind: str) -> str:
    """Return the typed placeholder that replaces a finding of ``kind``."""
    if kind in PASSWORD_KINDS:
        return "<PASSWORD>"
    if kind == "email":
        return "<EMAIL>"
    if kind in ("ipv4", "ipv6"):
        return "<IP>"
    return f"<SECRET:{kind}>"


def priority(kind: str) -> int:
    """Which kind names a span found by several detectors: the most specific one."""
    if kind in PII_KINDS:
        return 0
    if kind in GUESSED_KINDS:
        return 1
    if kind in KEYWORD_KINDS:
        return 2
    return 3  # a provider format, a private key, a JWT, URL credentials


# --------------------------------------------------------------------------- names

# Splits a name into words: separators, camelCase and digit runs (`AWSSecretKey` -> AWS,
# Secret, Key).
_NAME_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
# A last word that says the value is about the secret, not the secret itself.
_ABOUT_WORDS = frozenset(
    {
        "file", "files", "path", "dir", "directory", "url", "uri", "endpoint", "id", "ids",
        "name", "names", "type", "kind", "length", "len", "size", "ttl", "timeout", "expiry",
        "expires", "expiration", "lifetime", "algorithm", "alg", "format", "hint", "prompt",
        "helper", "env", "var", "field", "label", "header", "count", "min", "max", "limit",
        "policy", "required", "enabled", "disabled", "error", "exception", "warning", "mode",
        "version", "store", "storage", "backend", "provider", "command", "cmd", "script",
        "regex", "pattern", "reset", "changed", "strength", "rotation", "index", "usage",
    }
)  # fmt: skip
# Words that make a lower-case `key` a secret key (`api_key`, `secretKey`), where a plain
# `key` is more often a lookup key (`cache hit key=user:17`).
_KEY_QUALIFIERS = frozenset(
    {
        "api", "secret", "access", "private", "auth", "master", "signing", "sign",
        "encryption", "enc", "crypt", "crypto", "client", "license", "licence", "service",
        "account", "app", "consumer", "subscription", "admin", "root", "shared", "webhook",
        "deploy", "hmac", "aes", "session", "storage", "sas", "write", "read", "ingest",
    }
)  # fmt: skip
_COMPOUND_KEYS = frozenset(w + "key" for w in _KEY_QUALIFIERS)
_NOT_SECRET_NAMES = frozenset({"PWD", "OLDPWD"})  # the shell's working directories


def secret_name_kind(name: str) -> str | None:
    """Return the kind of secret a variable, key or option named ``name`` holds, or None.

    ``password`` (PASSWORD, PASSWD, PASSPHRASE, PWD, PASS), ``secret``, ``credential``,
    ``token`` or ``key``; None for other names and for names about a secret
    (``password_file``, ``TOKEN_URL``, ``KeyError``).
    """
    if name in _NOT_SECRET_NAMES:
        return None
    words = [w.lower() for w in _NAME_WORDS.findall(name)]
    if not words or words[-1] in _ABOUT_WORDS:
        return None
    shouting = name.upper() == name  # an environment variable: KEY and PASS are secrets
    for index, word in enumerate(words):
        if (
            "password" in word
            or "passwd" in word
            or "passphrase" in word
            or "passcode" in word
            or word in ("pwd", "passin", "passout")
            or (word == "pass" and (shouting or (index > 0 and index == len(words) - 1)))
        ):
            return "password"
    for index, word in enumerate(words):
        if "secret" in word:
            return "secret"
        if "credential" in word or word == "creds":
            return "credential"
        if word.endswith("token") or word == "bearer":
            return "token"
        if word in _COMPOUND_KEYS:
            return "key"
        if word == "key" and (shouting or (index > 0 and words[index - 1] in _KEY_QUALIFIERS)):
            return "key"
    return None


_VARIABLE_REFERENCE = re.compile(r"\$\{?[A-Za-z_]\w*\}?|\$\(.*\)|%\(?\w+\)?s?|\{\{.*\}\}")
_CODE_VALUE = re.compile(r"[A-Za-z_][\w.]*(?:\(.*\)|\[.*\])")
_EMPTY_VALUES = frozenset(
    {"", "null", "none", "nil", "~", "true", "false", "|", ">", "|-", ">-", "str", "bytes",
     "int", "string", "secretstr", "optional[str]", "str | none", "undefined"}
)  # fmt: skip


def is_secret_value(value: str) -> bool:
    """Whether an assigned ``value`` can hold a secret (not empty, a reference or code)."""
    value = value.strip()
    if value.lower() in _EMPTY_VALUES or set(value) <= {"*", "x", "X", "."}:
        return False
    if PLACEHOLDER.fullmatch(value) or value.startswith(("<SECRET:", "<PASSWORD>")):
        return False
    return not (_VARIABLE_REFERENCE.fullmatch(value) or _CODE_VALUE.fullmatch(value))


# --------------------------------------------------------------------------- patterns

MIN_TOKEN_WORD = 16
"""Words shorter than this hold no token a token detector looks for."""

# `NAME=value`: shell, `export`, `.env`, URL query parameters, keyword arguments.
_ASSIGNMENT = re.compile(
    r"""(?<![\w.\-$])([A-Za-z_][\w.\-]*)=(?![=~])("[^"\n]*"|'[^'\n]*'|[^\s"'`;&|<>]+)"""
)
# A quoted value after `name:`, `name =`, `"name": ` (JSON, YAML, TOML, code).
_QUOTED_ASSIGNMENT = re.compile(
    r"""(?<![\w.\-])["']?([A-Za-z_][\w.\-]*)["']?[ \t]*(?::=|=>|=|:)[ \t]*"""
    r"""("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')"""
)
# `name: value` and `name = value` lines (YAML, INI, TOML, JSON scalars): the rest of the line.
_LINE_ASSIGNMENT = re.compile(
    r"""^[ \t]*(?:-[ \t]+)?["']?([A-Za-z_][\w.\-]*)["']?[ \t]*[:=][ \t]*([^\s"'#][^\n]*?)"""
    r"""[ \t]*,?[ \t]*$""",
    re.M,
)
_TRAILING_COMMENT = re.compile(r"[ \t]+#.*$")
# `--password value`, `--token=value`, `-password value`.
_OPTION = re.compile(
    r"""(?<![\w\-])--?([A-Za-z][\w\-]*)(?:=|[ \t]+)("[^"\n]*"|'[^'\n]*'|[^\s"'`;&|<>]+)"""
)
_AUTHORIZATION = re.compile(
    r"""(?i)\b(?:proxy-)?authorization["']?[ \t]*[:=][ \t]*["']?"""
    r"""(?:(bearer|basic|token|digest|bot|apikey|key|sso-key|negotiate)[ \t]+)?"""
    r"""([^\s"'\\,;]+)"""
)
_BEARER = re.compile(r"(?i)\bbearer[ \t]+([A-Za-z0-9._~+/=\-]{8,})")
_HEADER = re.compile(r"""(?<![\w\-])((?:[A-Za-z0-9]+-)+[A-Za-z0-9]+)[ \t]*:[ \t]*([^\s"'\\,;]+)""")
_COOKIE = re.compile(r"""(?i)\b(?:set-)?cookie[ \t]*:[ \t]*([^\n"']+)""")
_CURL_USER = re.compile(r"""(?<![\w\-])(?:-u|--user)(?:[ \t]+|=)["']?[^\s:"']+:([^\s"'@]+)""")
_MYSQL_PASSWORD = re.compile(r"""(?<![\w\-])-p(?![\s\-])("[^"\n]*"|'[^'\n]*'|[^\s"']+)""")
_SSHPASS = re.compile(r"""\bsshpass[ \t]+-p[ \t]*("[^"\n]*"|'[^'\n]*'|\S+)""")
_KEYGEN_PASSPHRASE = re.compile(r"""(?<![\w\-])-[NP][ \t]+("[^"\n]+"|'[^'\n]+'|[^\s"'-]\S*)""")
# tools that take a password on the command line: (words one of which the line holds, pattern)
_TOOL_PASSWORDS: tuple[tuple[tuple[str, ...], re.Pattern[str]], ...] = (
    (("curl", "wget"), _CURL_USER),
    (("mysql", "mariadb"), _MYSQL_PASSWORD),
    (("sshpass",), _SSHPASS),
    (("ssh-keygen",), _KEYGEN_PASSPHRASE),
)
# A word saying that what follows is secret, for hex strings without a name (within
# :data:`CONTEXT_REACH` characters after it: "Issued API token for billing: 9f86d0…").
_SECRET_CONTEXT = re.compile(
    r"(?i)token|secret|passw|passphrase|api[ _-]?key|access[ _-]?key|private[ _-]?key|"
    r"credential|bearer|session[ _-]?(?:id|key)"
)
CONTEXT_REACH = 40
# A string right after such a word and a separator ("token: a1b2c3…", "password is x7…").
_CONTEXT_VALUE = re.compile(
    r"(?i)(?:token|secret|passw\w*|passphrase|api[ _-]?key|access[ _-]?key|credential)s?"
    r"""[ \t]*(?:[:=]|[ \t]is[ \t])[ \t]*["'`]?([A-Za-z0-9+/_\-.~]{12,}={0,2})"""
)
_DIGEST_PREFIX = re.compile(r"(?i)(?:sha\d*|md5|blake2b?|commit|digest|checksum|hash)[:= -]+$")
_HEX = re.compile(r"(?<![0-9A-Za-z])(?:[0-9a-f]{32,}|[0-9A-F]{32,})(?![0-9A-Za-z])")
_TOKEN_RUN = re.compile(r"[A-Za-z0-9+/_\-]{20,}={0,2}")
# public keys and digests printed in base64: never secrets
_PUBLIC_PREFIX = re.compile(
    r"(?:ssh-(?:rsa|dss|ed25519)|ecdsa-sha2-nistp\d+|sk-ssh-ed25519@openssh\.com|"
    r"sk-ecdsa-sha2-nistp256@openssh\.com)[ \t]+$|(?:SHA256|SHA1|MD5):$|sha(?:256|384|512)-$"
)
_DIGEST_RUN = re.compile(r"sha(?:1|256|384|512)-")
_WORDISH = re.compile(r"[A-Z]?[a-z]{3,}|[A-Z]{4,}")
_BASE64_WORD = re.compile(r"[A-Za-z0-9+/]{40,}={0,2}")
_BASE64_TAIL = re.compile(r"[ \t]*[A-Za-z0-9+/]+={0,2}[ \t]*")

_PEM_BEGIN = re.compile(r"-{4,5} ?BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)? ?-{4,5}")
_PEM_END = re.compile(r"-{4,5} ?END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)? ?-{4,5}")
_PEM_BODY_LINE = re.compile(r"[ \t]*(?:[A-Za-z0-9+/=]+|[A-Za-z][A-Za-z-]*: .*)[ \t]*")
_PEM_ESCAPED_BODY = re.compile(r"(?:\\n|\\r|[A-Za-z0-9+/=])+")
_PUTTY = re.compile(r"PuTTY-User-Key-File-\d+: [^\n]*")
_PUTTY_LINE = re.compile(r"[ \t]*(?:[A-Za-z][A-Za-z-]*: [^\n]*|[A-Za-z0-9+/=]+)")

_URL_PASSWORD = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s:/@]+:([^\s@/]+)@")
_URL_TOKEN_USER = re.compile(r"://([A-Za-z0-9_\-.~%]{20,})@")

EMAIL = re.compile(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")
IPV4 = re.compile(
    r"(?<![\w.])(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?![\w.])"
)
IPV6 = re.compile(r"(?<![\w:])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:])")
KEPT_IPS = frozenset({"127.0.0.1", "0.0.0.0", "::1", "::"})
# Hints: patterns that match inside every match of the e-mail and IP patterns, on its line.
# Each starts with a literal character, which the regex engine finds with a fast scan, where
# the full patterns start with a look-behind or `\b` and are tried at every position. Screens
# are full of `user@host:` prompts and `12:34:56` clocks, so the hints also ask for what those
# lack: a dot in the domain, and for IPv6 either `::` or the run of full groups `ipaddress`
# requires without it.
EMAIL_HINT = re.compile(r"@[A-Za-z0-9-]+\.")
IPV4_HINT = re.compile(r"\.\d{1,3}\.\d")
IPV6_HINT = re.compile(r"::|:[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{1,4}:")

# Lower-case markers of the keyword detectors: a line without any is not searched by them.
KEYWORD_MARKERS: tuple[str, ...] = (
    "pass", "pwd", "secret", "token", "key", "cred", "authoriz", "bearer", "cookie",
    "session", "private", "sshpass", "curl", "wget", "mysql", "mariadb", "ssh-keygen",
)  # fmt: skip


# Our own provider formats, each with the literal markers one of which every match holds.
OWN_PROVIDER_PATTERNS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("anthropic_key", r"sk-ant-[A-Za-z0-9_\-]{20,}", ("sk-ant-",)),
    ("openai_key", r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}", ("sk-",)),
    ("github_token", r"gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,}",
     ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_")),
    ("gitlab_token", r"gl(?:pat|dt|ft|rt|soat|cbt|imt|ptt|oas|agent)-[A-Za-z0-9_\-]{20,}",
     ("gl",)),
    ("slack_token", r"xox[abposre]-[A-Za-z0-9\-]{10,}|xapp-\d-[A-Za-z0-9\-]{10,}",
     ("xox", "xapp-")),
    ("slack_webhook", r"https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9_/]+",
     ("hooks.slack.com",)),
    ("hf_token", r"hf_[A-Za-z0-9]{30,}", ("hf_",)),
    ("google_api_key", r"AIza[0-9A-Za-z_\-]{35}", ("AIza",)),
    ("google_oauth_token", r"ya29\.[0-9A-Za-z_\-]{20,}|1//0[0-9A-Za-z_\-]{40,}",
     ("ya29.", "1//0")),
    ("google_client_secret", r"GOCSPX-[A-Za-z0-9_\-]{20,}", ("GOCSPX-",)),
    ("stripe_key", r"(?:sk|rk)_(?:live|test)_[0-9a-zA-Z]{16,}|whsec_[A-Za-z0-9]{24,}",
     ("k_live_", "k_test_", "whsec_")),
    ("npm_token", r"npm_[A-Za-z0-9]{36}", ("npm_",)),
    ("pypi_token", r"pypi-[A-Za-z0-9_\-]{50,}", ("pypi-",)),
    ("digitalocean_token", r"do[por]_v1_[a-f0-9]{64}", ("_v1_",)),
    ("shopify_token", r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}", ("shp",)),
    ("vault_token", r"hv[sbr]\.[A-Za-z0-9_\-]{24,}", ("hvs.", "hvb.", "hvr.")),
    ("doppler_token", r"dp\.(?:st|ct|sa|scim|audit)\.[A-Za-z0-9_\-.]{40,}", ("dp.",)),
    ("age_secret_key", r"AGE-SECRET-KEY-1[0-9A-Z]{58}", ("AGE-SECRET-KEY-",)),
    ("linear_key", r"lin_api_[A-Za-z0-9]{40}", ("lin_api_",)),
    ("postman_key", r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}", ("PMAK-",)),
    ("grafana_token", r"glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}|glc_[A-Za-z0-9+/]{32,}={0,2}",
     ("glsa_", "glc_")),
    ("databricks_token", r"dapi[a-f0-9]{32}(?:-\d)?", ("dapi",)),
    ("newrelic_key", r"NRAK-[A-Z0-9]{27}", ("NRAK-",)),
    ("docker_hub_token", r"dckr_pat_[A-Za-z0-9_\-]{27,}", ("dckr_pat_",)),
    ("atlassian_token", r"ATATT3[A-Za-z0-9_\-=]{100,}", ("ATATT3",)),
    ("mailgun_key", r"key-[0-9a-f]{32}", ("key-",)),
    ("square_token", r"sq0(?:atp|csp|idp)-[0-9A-Za-z_\-]{22,}", ("sq0",)),
    ("supabase_token", r"sbp_[a-f0-9]{40}", ("sbp_",)),
    ("planetscale_token", r"pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_\-.]{32,}", ("pscale_",)),
    ("pulumi_token", r"pul-[a-f0-9]{40}", ("pul-",)),
    ("azure_client_secret", r"[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.\-]{31,34}", ("Q~",)),
    ("alibaba_key", r"LTAI[A-Za-z0-9]{12,20}", ("LTAI",)),
    ("sentry_token", r"sntry[su]_[A-Za-z0-9+/=_]{40,}", ("sntry",)),
    ("firebase_key", r"AAAA[A-Za-z0-9_\-]{7}:APA91b[A-Za-z0-9_\-]{100,}", ("APA91b",)),
    ("twilio_key", r"SK[0-9a-fA-F]{32}", ("SK",)),
)  # fmt: skip
_OWN_PROVIDERS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(rf"(?<![A-Za-z0-9])(?:{pattern})"))
    for kind, pattern, _ in OWN_PROVIDER_PATTERNS
)
# (marker, index of what it gates), for one flat loop per word
_OWN_MARKERS: tuple[tuple[str, int], ...] = tuple(
    (marker, index)
    for index, (_, _, markers) in enumerate(OWN_PROVIDER_PATTERNS)
    for marker in markers
)
_DIGIT = re.compile(r"\d")


# detect-secrets' plugins for token formats, each with the kind its findings are counted as
# and literal markers one of which every match holds: a plugin's own (often unanchored)
# patterns only run on words holding a marker.
TOKEN_PLUGINS: tuple[tuple[BasePlugin, str, tuple[str, ...]], ...] = (
    (AWSKeyDetector(), "aws_key", ("A3T", "ABIA", "ACCA", "AKIA", "ASIA")),
    (ArtifactoryDetector(), "artifactory_token", ("AKC", "AP")),
    (AzureStorageKeyDetector(), "azure_storage_key", ("AccountKey=",)),
    (DiscordBotTokenDetector(), "discord_token", (".",)),
    (GitHubTokenDetector(), "github_token", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    (GitLabTokenDetector(), "gitlab_token", ("gl", "GR1348941")),
    (JwtTokenDetector(), "jwt", ("eyJ",)),
    (MailchimpDetector(), "mailchimp_key", ("-us",)),
    (NpmDetector(), "npm_token", ("_authToken",)),
    (OpenAIDetector(), "openai_key", ("T3BlbkFJ",)),
    (PypiTokenDetector(), "pypi_token", ("pypi-AgE",)),
    (SendGridDetector(), "sendgrid_key", ("SG.",)),
    (SlackDetector(), "slack_token", ("xox", "XOX", "hooks.slack.com")),
    (SquareOAuthDetector(), "square_token", ("sq0csp-",)),
    (StripeDetector(), "stripe_key", ("k_live_",)),
    (TelegramBotTokenDetector(), "telegram_token", (":",)),
    (TwilioKeyDetector(), "twilio_key", ("AC", "SK")),
)
# detect-secrets' plugins that need a secret-sounding word before the secret: run on the
# lines holding a keyword marker that also hold one of these (lower-cased) markers.
CONTEXT_PLUGINS: tuple[tuple[BasePlugin, str, tuple[str, ...]], ...] = (
    (AWSKeyDetector(), "aws_key", ("aws",)),
    (CloudantDetector(), "cloudant_credential", ("cl",)),
    (IbmCloudIamDetector(), "ibm_cloud_key", ("ibm", "iam", "cloud")),
    (IbmCosHmacDetector(), "ibm_cos_key", ("secret",)),
    (SoftlayerDetector(), "softlayer_key", ("softlayer", "sl")),
)
_PLUGIN_MARKERS: tuple[tuple[str, int], ...] = tuple(
    (marker, index) for index, (_, _, markers) in enumerate(TOKEN_PLUGINS) for marker in markers
)
_KEYWORD_PLUGIN = KeywordDetector()
_PRIVATE_KEY_PLUGIN = PrivateKeyDetector()
_BASIC_AUTH_PLUGIN = BasicAuthDetector()
_BASE64_ENTROPY = Base64HighEntropyString()
_HEX_ENTROPY = HexHighEntropyString()
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-+/.")


# --------------------------------------------------------------------------- helpers


def _line_bounds(text: str, position: int) -> tuple[int, int]:
    """Return the start and end of the line holding ``position``."""
    start = text.rfind("\n", 0, position) + 1
    end = text.find("\n", position)
    return start, len(text) if end < 0 else end


def _locate(text: str, start: int, end: int, value: str) -> Iterator[tuple[int, int]]:
    """Yield the spans where ``value`` occurs in ``text[start:end]``."""
    if not value:
        return
    position = text.find(value, start, end)
    while position >= 0:
        yield position, position + len(value)
        position = text.find(value, position + len(value), end)


def _widen_token(text: str, start: int, end: int) -> tuple[int, int]:
    """Extend a token span over neighbouring token characters (a JWT's signature, a key's tail).

    Plugins report a token as their pattern sees it; the token on screen may go on (a newer,
    longer format, a JWT signature the pattern leaves out). ``=`` is only taken at the end,
    as base64 padding, so that ``NAME=token`` does not take the name.
    """
    while start > 0 and text[start - 1] in _TOKEN_CHARS:
        start -= 1
    while end < len(text) and text[end] in _TOKEN_CHARS:
        end += 1
    while end < len(text) and text[end] == "=":
        end += 1
    return start, end


def shannon_entropy(value: str) -> float:
    """Shannon entropy of ``value`` in bits per character (detect-secrets' measure)."""
    return _BASE64_ENTROPY.calculate_shannon_entropy(value)


def looks_random(token: str, relaxed: bool = False) -> bool:
    """Whether a base64-alphabet ``token`` looks like random bytes rather than words or a path.

    It must mix upper case, lower case and digits, have close to the entropy of random
    characters of its length, and be mostly not made of words. ``relaxed`` (a secret-sounding
    word precedes the token) asks for less.
    """
    body = token.rstrip("=")
    n = len(body)
    if n < (12 if relaxed else 20):
        return False
    upper = sum(1 for c in body if "A" <= c <= "Z")
    lower = sum(1 for c in body if "a" <= c <= "z")
    digits = sum(1 for c in body if "0" <= c <= "9")
    if relaxed:
        if digits == 0 or upper + lower == 0:
            return False
    elif upper < 2 or lower < 2 or digits < (1 if n >= 32 else 2):
        return False
    wordish = sum(len(m) for m in _WORDISH.findall(body))
    if wordish > n * (0.6 if relaxed else 0.4):
        return False
    slack = 1.6 if relaxed else 1.2
    return shannon_entropy(body) >= math.log2(min(n, 64)) - slack


def _plugin_spans(plugin: BasePlugin, kind: str, text: str) -> list[tuple[str, int, int]]:
    """Where a detect-secrets plugin finds secrets in ``text``, widened to the whole token."""
    found: list[tuple[str, int, int]] = []
    for value in set(plugin.analyze_string(text)):
        value = value.strip(" \t\"'=:")
        if len(value) < 8:
            continue
        named = kind
        if kind == "aws_key":  # the key id or the secret access key
            named = "aws_access_key" if len(value) == 20 else "aws_secret_key"
        for span in _locate(text, 0, len(text), value):
            found.append((named, *_widen_token(text, *span)))
    return found


def _is_ipv6(match: re.Match[str]) -> bool:
    """Whether an IPv6-looking match is an address to scrub (not kept, and valid)."""
    if match.group() in KEPT_IPS:
        return False
    try:
        ipaddress.IPv6Address(match.group())
    except ValueError:
        return False
    return True


LINE_MEMORY = 16384
"""Distinct lines whose findings a :class:`SecretFinder` keeps."""
_BASE64_LINE_KIND = "base64 line"  # a line finding that marks a line of random base64 alone


# --------------------------------------------------------------------------- the finder


class SecretFinder:
    """Finds secrets (and, if asked, e-mail addresses and IP addresses) in logical text."""

    def __init__(self, emails: bool = True, ips: bool = True) -> None:
        self.emails = emails
        self.ips = ips
        self._word_memo: dict[str, list[tuple[str, int, int]]] = {}
        self._line_memo: dict[str, list[Finding]] = {}

    def find(self, text: str) -> list[Finding]:
        """Return the spans to replace in ``text``: sorted, not overlapping, merged.

        Everything but private keys and blocks of base64 lines is found line by line, and each
        distinct line is examined once: a screen repeats most lines of the one before.
        """
        found: list[Finding] = []
        base64_lines: list[tuple[int, int]] = []
        memo = self._line_memo
        position = 0
        for line in text.split("\n"):
            in_line = memo.get(line)
            if in_line is None:
                in_line = self._line(line)
                if len(memo) >= LINE_MEMORY:
                    memo.clear()
                memo[line] = in_line
            for kind, start, end in in_line:
                if kind == _BASE64_LINE_KIND:
                    base64_lines.append((position, position + len(line)))
                else:
                    found.append(Finding(kind, position + start, position + end))
            position += len(line) + 1
        if len(base64_lines) >= 2:
            found += self._base64_blocks(text, base64_lines)
        if "-----" in text or "PuTTY-User-Key-File" in text:
            found += self._private_keys(text)
        return merge(found)

    def _line(self, line: str) -> list[Finding]:
        """The findings of one line (a line of random base64 alone is marked as such)."""
        found: list[Finding] = []
        words = [w for w in line.split() if len(w) >= MIN_TOKEN_WORD]
        if words:
            found += self._tokens(line, words)
        lowered = line.lower()
        for marker in KEYWORD_MARKERS:
            if marker in lowered:
                found += self._keywords(line, 0, len(line))
                break
        if "://" in line:
            found += self._url_credentials(line, 0, len(line))
        if self.emails and EMAIL_HINT.search(line):
            found += [Finding("email", *m.span()) for m in EMAIL.finditer(line)]
        if self.ips:
            if IPV4_HINT.search(line):
                found += [
                    Finding("ipv4", *m.span())
                    for m in IPV4.finditer(line)
                    if m.group() not in KEPT_IPS
                ]
            if IPV6_HINT.search(line):
                found += [Finding("ipv6", *m.span()) for m in IPV6.finditer(line) if _is_ipv6(m)]
        return found

    # ----------------------------------------------------------------- private keys

    def _private_keys(self, text: str) -> list[Finding]:
        found: list[Finding] = []
        headers = [(m.start(), m.end()) for m in _PEM_BEGIN.finditer(text)]
        # detect-secrets knows headers our pattern does not (`---- BEGIN SSH2 ENCRYPTED …`)
        for value in _PRIVATE_KEY_PLUGIN.analyze_string(text):
            if value.startswith("PuTTY"):
                continue  # handled with its own layout below
            for value_start, value_end in _locate(text, 0, len(text), value):
                line_start = text.rfind("\n", 0, value_start) + 1
                if not any(s <= value_start < e for s, e in headers):
                    headers.append((line_start, _line_bounds(text, value_end)[1]))
        covered = 0
        for start, header_end in sorted(headers):
            if start < covered:
                continue
            end_match = _PEM_END.search(text, header_end)
            if end_match is not None and not _PEM_BEGIN.search(text, header_end, end_match.start()):
                end = end_match.end()
            elif text.startswith("\\n", header_end):  # a key inside a JSON string
                end = _PEM_ESCAPED_BODY.match(text, header_end).end()  # type: ignore[union-attr]
            else:
                end = self._body_end(text, header_end)
            found.append(Finding("private_key", start, end))
            covered = end
        for match in _PEM_END.finditer(text):
            if match.start() < covered or any(f.start <= match.start() < f.end for f in found):
                continue
            found.append(Finding("private_key", self._body_start(text, match.start()), match.end()))
        for match in _PUTTY.finditer(text):
            end = match.end()
            while end < len(text) and text[end] == "\n":
                line_end = _line_bounds(text, end + 1)[1]
                if not _PUTTY_LINE.fullmatch(text, end + 1, line_end):
                    break
                end = line_end
            found.append(Finding("private_key", match.start(), end))
        return found

    @staticmethod
    def _body_end(text: str, position: int) -> int:
        """Return where the body lines of a key whose END line is not shown stop."""
        end = position
        while end < len(text) and text[end] == "\n":
            line_end = _line_bounds(text, end + 1)[1]
            line = text[end + 1 : line_end]
            if not line.strip():
                # a blank line separates encryption headers from the body
                previous = text[text.rfind("\n", 0, end) + 1 : end]
                if ": " not in previous:
                    break
            elif not _PEM_BODY_LINE.fullmatch(line):
                break
            end = line_end
        return end

    @staticmethod
    def _body_start(text: str, end_line: int) -> int:
        """Return where the body lines before an END line (whose BEGIN is not shown) start."""
        start = text.rfind("\n", 0, end_line) + 1
        while start > 0:
            line_start = text.rfind("\n", 0, start - 1) + 1
            line = text[line_start : start - 1]
            if not line.strip() or not _PEM_BODY_LINE.fullmatch(line):
                break
            start = line_start
        return start

    # ----------------------------------------------------------------- tokens

    def _tokens(self, line: str, words: list[str]) -> list[Finding]:
        """Tokens in the long words of a line, each distinct word examined once."""
        found: list[Finding] = []
        for word in dict.fromkeys(words):
            in_word = self._word_tokens(word)
            if (
                len(words) == 1
                and line.strip() == word
                and _BASE64_WORD.fullmatch(word)
                and looks_random(word)
            ):
                found.append(Finding(_BASE64_LINE_KIND, 0, len(line)))
            if not in_word:
                continue
            for at, _ in _locate(line, 0, len(line), word):
                for kind, start, end in in_word:
                    if kind == "random_token" and _PUBLIC_PREFIX.search(
                        line, max(0, at + start - 40), at + start
                    ):
                        continue  # a public key after its type, a fingerprint
                    found.append(Finding(kind, at + start, at + end))
        return found

    def _word_tokens(self, word: str) -> list[tuple[str, int, int]]:
        """The tokens inside one whitespace-free word, as ``(kind, start, end)`` in the word."""
        known = self._word_memo.get(word)
        if known is not None:
            return known
        found: list[tuple[str, int, int]] = []
        plugins = {index for marker, index in _PLUGIN_MARKERS if marker in word}
        for index in sorted(plugins):
            plugin, kind, _ = TOKEN_PLUGINS[index]
            found += _plugin_spans(plugin, kind, word)
        patterns = {index for marker, index in _OWN_MARKERS if marker in word}
        for index in sorted(patterns):
            kind, pattern = _OWN_PROVIDERS[index]
            for match in pattern.finditer(word):
                found.append((kind, *_widen_token(word, *match.span())))
        if not word.isupper() and not word.islower() and _DIGIT.search(word):
            for match in _TOKEN_RUN.finditer(word):
                if not _DIGEST_RUN.match(match.group()) and looks_random(match.group()):
                    found.append(("random_token", *match.span()))
        if "'" in word or '"' in word:
            # detect-secrets' quoted high-entropy strings (hex is left: digests are quoted too)
            for value in _BASE64_ENTROPY.analyze_string(word):
                if (
                    len(value) >= MIN_TOKEN_WORD
                    and not _DIGEST_RUN.match(value)
                    and shannon_entropy(value) > _BASE64_ENTROPY.entropy_limit
                    and not all(c in "0123456789abcdefABCDEF" for c in value)
                ):
                    found += [
                        ("high_entropy", *span) for span in _locate(word, 0, len(word), value)
                    ]
        if len(self._word_memo) >= 4096:
            self._word_memo.clear()
        self._word_memo[word] = found
        return found

    @staticmethod
    def _base64_blocks(text: str, lines: list[tuple[int, int]]) -> list[Finding]:
        """Two or more consecutive lines of random base64 alone: a key body without its header.

        ``lines`` are the bounds of the lines that hold one random base64 word and nothing
        else. A block takes the shorter last line of the body with it.
        """
        found: list[Finding] = []
        blocks: list[list[tuple[int, int]]] = []
        for start, end in lines:
            if blocks and blocks[-1][-1][1] + 1 == start:
                blocks[-1].append((start, end))
            else:
                blocks.append([(start, end)])
        for block in blocks:
            if len(block) < 2:
                continue
            block_end = block[-1][1]
            if block_end < len(text):
                tail_end = _line_bounds(text, block_end + 1)[1]
                if _BASE64_TAIL.fullmatch(text, block_end + 1, tail_end):
                    block_end = tail_end
            found.append(Finding("base64_block", block[0][0], block_end))
        return found

    # ----------------------------------------------------------------- keywords

    def _keywords(self, text: str, start: int, end: int) -> list[Finding]:
        """Secrets a secret-sounding word points at, on one line.

        Each pattern only runs where its literal parts occur.
        """
        found: list[Finding] = []
        line = text[start:end]
        lowered = line.lower()
        quoted = '"' in line or "'" in line
        patterns: list[re.Pattern[str]] = []
        if "=" in line:
            patterns.append(_ASSIGNMENT)
        if quoted and ("=" in line or ":" in line):
            patterns.append(_QUOTED_ASSIGNMENT)
        if "=" in line or ":" in line:
            patterns.append(_LINE_ASSIGNMENT)
        for pattern in patterns:
            for match in pattern.finditer(text, start, end):
                kind = secret_name_kind(match.group(1))
                if kind is None:
                    continue
                value_start, value_end = match.span(2)
                if pattern is _LINE_ASSIGNMENT:
                    comment = _TRAILING_COMMENT.search(text, value_start, value_end)
                    if comment is not None:
                        value_end = comment.start()
                found += self._value(text, kind, value_start, value_end)
        if "-" in line:
            for match in _OPTION.finditer(text, start, end):
                kind = secret_name_kind(match.group(1))
                if kind is not None and not match.group(2).startswith("-"):
                    found += self._value(text, kind, *match.span(2))
            if ":" in line:
                for match in _HEADER.finditer(text, start, end):
                    kind = secret_name_kind(match.group(1))
                    if kind is not None:
                        found += self._value(text, kind, *match.span(2))
        if "authoriz" in lowered:
            for match in _AUTHORIZATION.finditer(text, start, end):
                scheme = (match.group(1) or "").lower()
                kind = {"bearer": "bearer_token", "basic": "basic_auth"}.get(
                    scheme, "authorization"
                )
                found += self._value(text, kind, *match.span(2))
        if "bearer" in lowered:
            for match in _BEARER.finditer(text, start, end):
                found += self._value(text, "bearer_token", *match.span(1))
        if "cookie" in lowered:
            for match in _COOKIE.finditer(text, start, end):
                found += self._value(text, "cookie", *match.span(1))
        for gate, pattern in _TOOL_PASSWORDS:
            if any(word in lowered for word in gate):
                for match in pattern.finditer(text, start, end):
                    found += self._value(text, "password", *match.span(1))
        if quoted:
            found += self._keyword_plugin(text, start, end, line)
        for plugin, kind, markers in CONTEXT_PLUGINS:
            if any(marker in lowered for marker in markers):
                found += [
                    Finding(named, start + s, start + e)
                    for named, s, e in _plugin_spans(plugin, kind, line)
                ]
        found += self._context_strings(text, start, end)
        return found

    @staticmethod
    def _value(text: str, kind: str, start: int, end: int) -> list[Finding]:
        """The finding for an assigned value (quotes left out), or none if it holds no secret."""
        if end - start >= 2 and text[start] == text[end - 1] and text[start] in "\"'":
            start, end = start + 1, end - 1
        if end <= start or not is_secret_value(text[start:end]):
            return []
        return [Finding(kind, start, end)]

    @staticmethod
    def _keyword_plugin(text: str, start: int, end: int, line: str) -> list[Finding]:
        """detect-secrets' keyword detector (quoted values), kept to secret-sounding names."""
        found: list[Finding] = []
        for value in set(_KEYWORD_PLUGIN.analyze_string(line)):
            for value_start, value_end in _locate(text, start, end, value):
                name = re.search(r"([A-Za-z_][\w.\-]*)[\"'\]]*\s*[:=!]{0,3}>?\s*@?[\"'`]?$",
                                 text[start:value_start])  # fmt: skip
                kind = secret_name_kind(name.group(1)) if name else None
                if kind is not None and is_secret_value(value):
                    found.append(Finding(kind, value_start, value_end))
        return found

    @staticmethod
    def _context_strings(text: str, start: int, end: int) -> list[Finding]:
        """Hex strings shortly after a secret-sounding word; other strings right after one."""
        found: list[Finding] = []
        context = _SECRET_CONTEXT.search(text, start, end)
        if context is None:
            return found
        for match in _HEX.finditer(text, context.end(), end):
            before = text[max(start, match.start() - 12) : match.start()]
            if match.start() - context.end() > CONTEXT_REACH or _DIGEST_PREFIX.search(before):
                continue
            if _HEX_ENTROPY.calculate_shannon_entropy(match.group()) > _HEX_ENTROPY.entropy_limit:
                found.append(Finding("hex_token", *match.span()))
        for match in _CONTEXT_VALUE.finditer(text, start, end):
            if looks_random(match.group(1), relaxed=True):
                found.append(Finding("token", *match.span(1)))
        return found

    # ----------------------------------------------------------------- URLs, e-mail, IPs

    @staticmethod
    def _url_credentials(text: str, start: int, end: int) -> list[Finding]:
        found: list[Finding] = []
        for match in _URL_PASSWORD.finditer(text, start, end):
            if not PLACEHOLDER.fullmatch(match.group(1)):
                found.append(Finding("url_password", *match.span(1)))
        for value in _BASIC_AUTH_PLUGIN.analyze_string(text[start:end]):
            for span in _locate(text, start, end, f":{value}@"):
                if not PLACEHOLDER.fullmatch(value):
                    found.append(Finding("url_password", span[0] + 1, span[1] - 1))
        for match in _URL_TOKEN_USER.finditer(text, start, end):
            found.append(Finding("url_token", *match.span(1)))
        return found


def merge(findings: list[Finding]) -> list[Finding]:
    """Sort findings and merge the overlapping ones; a merged span keeps the strongest kind.

    An e-mail or IP address overlapping a secret is dropped rather than merged: the password
    of ``https://alice:hunter2@github.com`` also looks like the start of an e-mail address.
    """
    if len(findings) < 2:
        return findings
    secrets = [f for f in findings if f.kind not in PII_KINDS]
    if secrets and len(secrets) < len(findings):
        findings = secrets + [
            f
            for f in findings
            if f.kind in PII_KINDS and not any(s.start < f.end and f.start < s.end for s in secrets)
        ]
    findings.sort(key=lambda f: (f.start, -f.end))
    merged: list[Finding] = [findings[0]]
    for finding in findings[1:]:
        last = merged[-1]
        if finding.start < last.end:
            kind = last.kind if priority(last.kind) >= priority(finding.kind) else finding.kind
            merged[-1] = Finding(kind, last.start, max(last.end, finding.end))
        else:
            merged.append(finding)
    return merged
