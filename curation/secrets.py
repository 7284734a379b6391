"""Where the secrets and personal data are in a text.

:meth:`SecretFinder.find` returns the spans of one *logical* text to replace: a terminal
screen whose wrapped lines are already joined (see :mod:`worldtrace.curation.scrub`), a task,
an action or one JSON string. Detection combines detect-secrets' plugins (provider keys and tokens,
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
  strings that follow a secret-sounding word; bare hex (git hashes, checksums) is left;
* secrets whose shape says nothing, by their context: the passwords of ``.netrc`` entries
  (``machine … login … password …``), and, in the output of a command or tool that read
  the file or asked for the secret (:func:`command_output_kind`, :func:`file_output_kind`),
  the passwords of ``.pgpass`` lines and of git credential-store URLs (or the token that is
  a URL's user), a private key file whole, and the value a command printed because it was
  asked for it (``gh auth token``, ``heroku auth:token``, ``aws configure get
  aws_secret_access_key``, ``vault print token``, ``kubectl get secret … -o jsonpath=…``).
  A terminal screen shows the command line above its output (:func:`terminal_outputs`);
  elsewhere the row's action names the command (``worldtrace.curation.scrub``).

What counts as a secret-sounding name is decided by :func:`secret_name_kind`: names built
from PASSWORD, SECRET, TOKEN, KEY or CREDENTIAL parts (``DB_PASSWORD``, ``apiKey``,
``X-Auth-Token``); a lower-case plain ``key`` only with a qualifier (``api_key``, not the
cache ``key=user:17``); and never a name that holds something about the secret rather than
the secret (``password_file``, ``TOKEN_URL``, ``credential.helper``, ``KeyError``). What an
assigned value must be to be a secret is decided by :func:`is_secret_value`: not code
(``password=None,``, ``token=self.token``), not a placeholder a manual or an example puts
there (``--password=PASSWORD``, ``-u user:password``, ``[-P passphrase]``, ``fake-key``) and
not the next word of a manual's sentence (``--password is ignored``). Random-looking runs
that are base64 of ordinary text (an MCP resource's ``blob``) are searched as that text;
tokens in the query of a status badge's image URL are published with the badge and left.

E-mail addresses are someone's unless their domain is reserved for documentation and
testing (``example.com``/``.net``/``.org`` and their subdomains, the ``.test``, ``.example``,
``.invalid`` and ``.localhost`` TLDs: RFC 2606 and 6761), they are a message id
(``<uuid@host>``), or they are the login and host of an SSH remote or a URL. A dotted quad is
an IPv4 address only where the text around it makes it one (:func:`ipv4_is_address`: a
port, a prefix length, a URL, ``user@``, an address word such as ``inet``, ``ping`` or
``nameserver``, a hosts-file or access-log line) and never when it is a version
(``1.0.0.7-10+b3``, ``foo-1.2.3.4``, ``==1.2.3.4``); an IPv6 address needs its own shape or
such a word, and never has a path after it (``0::/docker/…``). Addresses of no one are kept:
loopback, unspecified, multicast, IPv4 link-local, netmasks, networks written with their
prefix (``10.0.0.0/8``) and the documentation ranges (RFC 5737, RFC 3849).

An ordinary screen costs little: everything but private keys and base64 blocks is found
line by line, each distinct line once (a screen repeats most lines of the step before), and
each detector only looks where what it finds can be: token detectors at words of at least
:data:`MIN_TOKEN_WORD` characters holding one of their literal markers (each distinct word
once), keyword detectors at lines holding a keyword marker, URL detectors at lines holding
``://``, private keys only when ``-----`` or a PuTTY header occurs, e-mail and IP patterns at
lines with their hints.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import itertools
import math
import re
import shlex
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
    if kind in KEYWORD_KINDS or kind == "printed_secret":
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
# Words that make even an upper-case KEY the key of a mapping or a table, not a secret.
_LOOKUP_QUALIFIERS = frozenset(
    {"tag", "cache", "dict", "map", "lookup", "sort", "primary", "foreign", "partition", "row",
     "column", "field", "label", "metric", "group", "queue", "attr", "attribute", "param",
     "query", "index", "dedup", "idempotency", "unique", "composite", "hot", "id", "routing",
     "shard", "bucket", "object", "s3", "redis", "registry", "context", "state", "event",
     "meta", "metadata"}
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
        if word == "key" and index > 0 and words[index - 1] in _LOOKUP_QUALIFIERS:
            return None  # `CACHE_KEY`, `USER_ID_TAG_KEY`: the key of a mapping
        if word == "key" and (shouting or (index > 0 and words[index - 1] in _KEY_QUALIFIERS)):
            return "key"
    return None


_VARIABLE_REFERENCE = re.compile(r"\$\{?[A-Za-z_]\w*\}?|\$\(.*\)|%\(?\w+\)?s?|\{\{.*\}\}")
_CODE_VALUE = re.compile(r"[A-Za-z_][\w.]*(?:\(.*\)|\[.*\])")
_EMPTY_VALUES = frozenset(
    {"", "null", "none", "nil", "~", "true", "false", "|", ">", "|-", ">-", "str", "bytes",
     "int", "string", "secretstr", "optional[str]", "str | none", "undefined"}
)  # fmt: skip


# Values that stand for a secret in documentation and code rather than being one: the name of
# what goes there (`--password=PASSWORD`, `-u user:password`, `--private-key=file`), the word
# after an option in prose (`--password is ignored`), an elided or made-up example.
_PLACEHOLDER_WORDS = frozenset(
    {"password", "passwd", "pass", "pwd", "passphrase", "new_passphrase", "old_passphrase",
     "secret", "token", "key", "apikey", "api_key", "api-key", "value", "values", "file",
     "path", "filename", "keyfile", "credential", "credentials", "user", "username", "name",
     "is", "are", "was", "be", "and", "or", "the", "to", "of", "for", "with", "when", "if",
     "not", "in", "on", "option", "options", "flag", "argument", "arguments", "parameter",
     "string", "text", "here", "arg", "args", "pass:arg", "env:var", "file:pathname"}
)  # fmt: skip
_METAVARIABLE = re.compile(
    r"[A-Z][A-Z_]*[A-Z](?:,?\.\.\.)?|<[^<>]+>(?:[:@/]<[^<>]+>)*|\[[^\[\]]*\]"
)
# A template's field (`{password}`, `{from_email}?bcc=…`) or a manual's page reference
# (`systemd.exec(1)`) in a value: a description of a value, not one.
_TEMPLATE_OR_REFERENCE = re.compile(r"^\{[a-z_]+\}|(?:^|[\s(])[a-z][a-z0-9._-]*\(\d[a-z]*\)")
# Another setting's name (`LoadCredential=/SetCredential=` lists two settings).
_SETTING_NAME = re.compile(r"/?[A-Z][a-z]+(?:[A-Z][a-z]+)+=")
_MADE_UP = re.compile(r"(?i)fake|dummy|example|placeholder|your[_\-]?|redacted|xxxx|\*\*\*")
_COLOR = re.compile(r"#(?:[0-9a-fA-F]{3}){1,2}(?:[0-9a-fA-F]{2})?(?: \w+)*")  # `Token: '#ddd bold'`
# The size of a secret, where its value is not shown (`kubectl describe secret`: `password:  16
# bytes`).
_SIZE = re.compile(r"\d+ (?:bytes?|characters|chars)")
# A manual's metavariables (`VALUE,[KEY=VALUE,...]`, `LOCAL_FILE_PATH,[...]`), or one followed
# by the manual's sentence (`VALUE pairs of HTTP headers …`).
_METAVARIABLES = re.compile(r"(?=.*[A-Z]{3})[A-Z_\[\],.=…]+|[A-Z][A-Z_]{3,}[ \t]+[a-z][^\n]*")
# A call cut at a blank: `self.pprint(self.token,` (lower-case names, as code has them).
_CALL_START = re.compile(r"[a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)*\([a-z_][a-z0-9_.]*$")
_OPTION_VALUE = re.compile(r"--[a-z][a-z0-9-]*(?:=|$)")
_DOTTED_NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
_CLOSING = {")": "(", "]": "[", "}": "{"}


def trim_value(value: str) -> str:
    """``value`` without what follows it in code or prose.

    That is a trailing comma or semicolon, an unbalanced closing bracket, or the hyphen a
    manual page's hyphenation leaves at a line's end (U+2010).
    """
    value = value.strip()
    while value:
        last = value[-1]
        if last in ",;.\u2010" or (
            last in _CLOSING and value.count(_CLOSING[last]) < value.count(last)
        ):
            value = value[:-1].rstrip()
        else:
            break
    return value


def is_secret_value(value: str, name: str | None = None) -> bool:
    """Whether an assigned ``value`` can hold a secret.

    It cannot when it is empty, a reference, code (a call, a subscription, ``self.password``,
    the variable of the same name ``name``), a placeholder (``PASSWORD``, ``<token>``,
    ``your-api-key``, ``fake-key``, ``hf_…``) or a word of prose.
    """
    value = trim_value(value)
    if len(value) < 3 or value.lower() in _EMPTY_VALUES or set(value) <= {"*", "x", "X", "."}:
        return False
    if PLACEHOLDER.fullmatch(value) or value.startswith(("<SECRET:", "<PASSWORD>")):
        return False
    if _OPTION_VALUE.match(value):  # `KEY : --disk-encryption-key-keyring=…`: an option
        return False
    if value.lower().strip("<>[]{}$") in _PLACEHOLDER_WORDS or _METAVARIABLE.fullmatch(value):
        return False
    if _METAVARIABLES.fullmatch(value):
        return False  # `VALUE,[KEY=VALUE,...]`, `LOCAL_FILE_PATH,[...]`, `VALUE pairs of …`
    if value.endswith(("…", "...")) or _MADE_UP.search(value) or _COLOR.fullmatch(value):
        return False
    if _SIZE.fullmatch(value):
        return False
    if _TEMPLATE_OR_REFERENCE.search(value) or _SETTING_NAME.fullmatch(value):
        return False
    if name is not None and value == name:
        return False  # `password=password`: a variable passed on
    if _DOTTED_NAME.fullmatch(value) and (
        value.startswith(("self.", "cls.")) or secret_name_kind(value.rsplit(".", 1)[1])
    ):
        return False  # `self.password`, `config.api_key`
    return not (
        _VARIABLE_REFERENCE.fullmatch(value)
        or _CODE_VALUE.fullmatch(value)
        or _CALL_START.fullmatch(value)
    )


def is_url_secret(value: str) -> bool:
    """Whether the password of a URL (``scheme://user:value@host``) is one.

    Not our placeholder, a reference or template (``$PASS``, ``{password}``) or the name of
    what goes there (``user:password@``); any length.
    """
    if PLACEHOLDER.fullmatch(value) or _VARIABLE_REFERENCE.fullmatch(value):
        return False
    if _TEMPLATE_OR_REFERENCE.search(value) or _METAVARIABLE.fullmatch(value):
        return False
    return value.lower().strip("<>[]{}$%()") not in _PLACEHOLDER_WORDS


# --------------------------------------------------------------------------- patterns

MIN_TOKEN_WORD = 16
"""Words shorter than this hold no token a token detector looks for."""
MIN_ENCODED_TEXT = 40
"""Random-looking runs at least this long are decoded as base64 to tell encoded text from keys
(a shorter run decodes to too few characters to tell)."""

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
# `passwd:` and `pwd:` alone as a YAML or INI name: the password database of nsswitch.conf, the
# pwd command in a list of authors; a password is `password:` or has a qualifier (`db_pwd`).
_DATABASE_NAMES = frozenset({"passwd", "pwd", "shadow", "gshadow"})
# Two more words of prose after an option's value: a manual's sentence, not a command line.
_PROSE_AFTER = re.compile(r"[ \t]+[A-Za-z']+[ \t]+[A-Za-z']+")
# `Name= text`: a blank after `=` and none before it, where a value is not assigned (an empty
# assignment in a shell, a setting named in a manual).
_SETTING_THEN_PROSE = re.compile(r"""["']?=[ \t]+""")
# A value that closes a synopsis' optional group: `[-P passphrase]`.
_SYNOPSIS_VALUE = re.compile(r"\]")
_URL_VALUE_END = re.compile(r"[)\]#]")
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
# a body line, after the line number a swe read_file puts before it (`    12\t`)
_PEM_BODY_LINE = re.compile(r"[ \t]*(?:\d+\t)?(?:[A-Za-z0-9+/=]+|[A-Za-z][A-Za-z-]*: .*)[ \t]*")
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

# --------------------------------------------------------------------------- e-mail and IPs

RESERVED_DOMAINS = ("example.com", "example.net", "example.org")
"""Second-level domains reserved for documentation (RFC 2606), with their subdomains."""
RESERVED_TLDS = frozenset({"test", "example", "invalid", "localhost"})
"""Top-level domains reserved for testing and documentation (RFC 2606, RFC 6761)."""
DOCUMENTATION_NETWORKS = (
    ipaddress.IPv4Network("192.0.2.0/24"),  # TEST-NET-1 (RFC 5737)
    ipaddress.IPv4Network("198.51.100.0/24"),  # TEST-NET-2
    ipaddress.IPv4Network("203.0.113.0/24"),  # TEST-NET-3
    ipaddress.IPv6Network("2001:db8::/32"),  # RFC 3849
)


def is_reserved_domain(domain: str) -> bool:
    """Whether ``domain`` is reserved for documentation or testing (RFC 2606 and 6761)."""
    domain = domain.lower().rstrip(".")
    if domain.rsplit(".", 1)[-1] in RESERVED_TLDS:
        return True
    return any(domain == name or domain.endswith("." + name) for name in RESERVED_DOMAINS)


_MESSAGE_ID = re.compile(
    r"(?i)[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{16,}"
)
SYSTEMD_UNIT_TYPES = frozenset(
    {"service", "socket", "target", "slice", "scope", "mount", "automount", "timer", "path",
     "device", "swap"}
)  # fmt: skip
_PLACEHOLDER_LABEL = re.compile(r"(?i)(?:^|\.)(?:your|my)?[-_]?domain\.")
_RETINA_IMAGE = re.compile(r"(?i)\d+(?:\.\d+)?x\.(?:png|jpe?g|gif|webp|svg|avif)")
_REMOTE_PATH = re.compile(r":[^\s:]")
_URL_USERINFO = re.compile(r"://(?:[^\s/@:]*:)?$")


def is_personal_email(address: str) -> bool:
    """Whether an address the e-mail pattern matched is someone's.

    Not when its domain is reserved (:func:`is_reserved_domain`), when its local part is a
    UUID or a long hex string (a message or object id: ``<uuid@host>``), or when it is an
    image's retina variant (``icon@2x.png``), an instance of a systemd template unit
    (``user@1000.service``), or a manual's placeholder (``NAME@YOUR.DOMAIN``, all capitals,
    or a ``domain`` label before the TLD: ``sender@host.domain.name``).
    """
    local, _, domain = address.rpartition("@")
    if is_reserved_domain(domain) or _RETINA_IMAGE.fullmatch(domain):
        return False
    if domain.rsplit(".", 1)[-1] in SYSTEMD_UNIT_TYPES:
        return False  # a template unit's instance: `user@1000.service`
    if address.isupper() or _PLACEHOLDER_LABEL.search(domain):
        return False  # a manual's `NAMESPACE@YOUR.DOMAIN`, `sender@host.domain.name`
    return not _MESSAGE_ID.fullmatch(local)


def email_is_personal(line: str, start: int, end: int) -> bool:
    """Whether the :data:`EMAIL` match ``line[start:end]`` is someone's address.

    Besides :func:`is_personal_email`: not when a path or port follows it (``git@github.com:
    org/repo.git``, ``deploy@build.corp.io:/srv``), the login and host of an SSH remote, nor
    in a URL's authority (``ftp://anonymous@ftp.gnu.org``, ``https://user:password@host``).
    """
    if _REMOTE_PATH.match(line, end) or _URL_USERINFO.search(line, max(0, start - 200), start):
        return False
    return is_personal_email(line[start:end])


def is_documentation_ip(value: str) -> bool:
    """Whether ``value`` is in a range reserved for documentation (RFC 5737, RFC 3849)."""
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        return False
    return any(address in network for network in DOCUMENTATION_NETWORKS)


def _is_kept(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Addresses of no one: loopback, unspecified, multicast, broadcast, documentation."""
    return (
        address.is_loopback
        or address.is_unspecified
        or address.is_multicast
        or (address.version == 4 and address.is_link_local)  # 169.254.0.0/16, the same anywhere
        or str(address) == "255.255.255.255"
        or any(address in network for network in DOCUMENTATION_NETWORKS)
    )


_PREFIX = re.compile(r"/(\d{1,3})(?![\d.])")


def _is_network(
    line: str, end: int, address: ipaddress.IPv4Address | ipaddress.IPv6Address
) -> bool:
    """A network written as ``address/prefix`` with no host bits set (``10.0.0.0/8``)."""
    prefix = _PREFIX.match(line, end)
    if prefix is None or int(prefix.group(1)) >= address.max_prefixlen:
        return False
    try:
        ipaddress.ip_network(f"{address}/{prefix.group(1)}", strict=True)
    except ValueError:
        return False
    return True


def _is_netmask(value: str) -> bool:
    """A dotted netmask (``255.255.240.0``): ones, then zeros."""
    bits = int(ipaddress.IPv4Address(value))
    inverted = ~bits & 0xFFFFFFFF
    return value.startswith("255.") and inverted & (inverted + 1) == 0


# What makes a dotted quad an IPv4 address rather than a version or another dotted number:
# only the text around it. The rules, in order (see :func:`ipv4_is_address`):
#
# 1. a version: joined to a revision or suffix (`1.0.0.7-10+b3`, `1.2.3.4~rc1`), after a
#    package name and a hyphen (`foo-1.2.3.4`) or a pin (`foo==1.2.3.4`);
# 2. an address by its shape: a port (`:8080`), a prefix length (`/24`), a URL's host, the host
#    of `user@host`, `[host]:port`, `host.name (address)`, or followed by `port`;
# 3. a version by a word shortly before it (`version`, `release`, `upgraded`, `install` …);
# 4. an address by a word shortly before it (`inet`, `ip`, `addr`, `host`, `server`, `ping`,
#    `ssh`, `dns` …), by `from`, `at` or `deny` right before it, by `port`, `dev`, `via`,
#    `ether` right after it, or in brackets after a host name (`wijiji [192.12.12.5]`);
# 5. an address by its line: the line holds nothing but addresses (`hostname -I`), or it
#    starts with the quad followed by a host name or ` - ` (hosts files, access logs, ARP and
#    neighbour tables);
# 6. an address because another quad of its line is one by rule 2, 4 or 5 (tables, routes).
_VERSION_AFTER = re.compile(r"[-+~](?!(?:\d{1,3}\.){3}\d)[0-9A-Za-z]")
_VERSION_BEFORE = re.compile(r"(?:[A-Za-z][\w.+]*-|[=<>!~]=)$")
_ADDRESS_AFTER = re.compile(r":\d{1,5}(?!\d)|/\d{1,2}(?![\d.])|\]:\d|[ \t]+port\b", re.I)
_ADDRESS_BEFORE = re.compile(
    r"(?://|[\w.%+-]@|::ffff:|[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+[ \t]+\()$", re.I
)
_VERSION_WORDS = re.compile(
    r"(?i)\b(?:version|ver|release[sd]?|revision|rev|build|upgrad\w*|updat\w*|downgrad\w*|"
    r"unpack\w*|setting up|install\w*|changelog)\b"
)
_ADDRESS_WORDS = re.compile(
    r"(?i)(?<![A-Za-z])(?:ip|ipv4|ipv6|ips|inet6?|addr|address(?:es)?|ipaddress|host(?:name)?s?|"
    r"server|servers|nameserver|gateway|gw|via|src|dst|peer|client|remote|proxy|dns|resolver|"
    r"listen(?:ing)?|bind|bound|connect(?:s|ed|ing|ion)?|ping|traceroute|ssh|sftp|scp|telnet|"
    r"nc|ncat|nmap|dig|nslookup|whois|curl|wget|netmask|broadcast|brd|subnet|forwarded|"
    r"real-ip|upstream|endpoint|route|lease|dhcp|router|neighbou?r|icmp)(?![A-Za-z])"
)
# Words that make the quad right after them an address: `from 1.2.3.4`, `deny 1.2.3.4;`.
_DIRECT_WORDS = re.compile(
    r"(?i)(?<![A-Za-z])(?:from|at|by|source|destination|origin|allow|deny|ban|block)[ \t]+$"
)
_HOST_BRACKET = re.compile(r"[A-Za-z][\w.-]*[ \t]\[$")
_ADDRESS_WORDS_AFTER = re.compile(r"(?i)[ \t]+(?:port|dev|via|ether|lladdr|netmask)\b")
ADDRESS_REACH = 40
"""How far before a quad (on its line) a word about versions or addresses counts."""
_ONLY_ADDRESSES = re.compile(r"[\s,;]*")
_HOST_LINE = re.compile(r"[ \t]+(?:-[ \t]|[A-Za-z][\w-]*(?:\.[A-Za-z][\w-]*)*(?:[ \t]|$))")


def _ipv4_version(line: str, start: int, end: int) -> bool:
    if _VERSION_AFTER.match(line, end):
        return True
    return bool(_VERSION_BEFORE.search(line, max(0, start - ADDRESS_REACH), start))


def _ipv4_by_shape(line: str, start: int, end: int) -> bool:
    """Rules 2, 4 and 5 of :func:`ipv4_is_address` for a quad that is not a version."""
    if _ADDRESS_AFTER.match(line, end) or _ADDRESS_BEFORE.search(line, max(0, start - 80), start):
        return True
    before = line[max(0, start - ADDRESS_REACH) : start]
    if _VERSION_WORDS.search(before):
        return False
    if _ADDRESS_WORDS.search(before) or _DIRECT_WORDS.search(before):
        return True
    if _HOST_BRACKET.search(before) and line.startswith("]", end):
        return True  # a mail header's `Received: from host (host [1.2.3.4])`
    if _ADDRESS_WORDS_AFTER.match(line, end):
        return True
    return not line[:start].strip() and _HOST_LINE.match(line, end) is not None


def ipv4_is_address(line: str, start: int, end: int) -> bool:
    """Whether the dotted quad ``line[start:end]`` (an :data:`IPV4` match) is an address.

    It must not be kept (loopback, any, a netmask, a documentation range) and the text around
    it on its line must make it an address (the rules above).
    """
    value = line[start:end]
    address = ipaddress.IPv4Address(value)
    if value in KEPT_IPS or _is_kept(address) or _is_netmask(value):
        return False
    if _is_network(line, end, address) or _ipv4_version(line, start, end):
        return False
    if _ipv4_by_shape(line, start, end):
        return True
    quads = [m.span() for m in IPV4.finditer(line)]
    if _ONLY_ADDRESSES.fullmatch("".join(line[a:b] for a, b in _gaps(quads, len(line)))):
        return True
    return any(
        (s, e) != (start, end) and not _ipv4_version(line, s, e) and _ipv4_by_shape(line, s, e)
        for s, e in quads
    )


def _gaps(spans: list[tuple[int, int]], length: int) -> Iterator[tuple[int, int]]:
    """The parts of ``[0, length)`` between sorted, disjoint ``spans``."""
    done = 0
    for start, end in spans:
        yield done, start
        done = end
    yield done, length


# An IPv6-looking match is an address by its shape (a zone, a prefix length, a port after
# brackets, eight groups, or `::` with a group of three or more digits: `fe80::1`) or by an
# address word before it; never when a path follows (`0::/docker/…` in /proc/self/cgroup),
# and not for short forms without either (`xs[1::2]`, `ab::cd`).
_IPV6_AFTER = re.compile(r"%[\w.-]+|/\d{1,3}(?!\d)|\]:\d")
_PATH_AFTER = re.compile(r"/(?!\d)")
_V4_PART = re.compile(r"\.\d")


def ipv6_is_address(line: str, start: int, end: int) -> bool:
    """Whether ``line[start:end]`` (an :data:`IPV6` match) is an IPv6 address to scrub."""
    value = line[start:end]
    if value in KEPT_IPS:
        return False
    try:
        address = ipaddress.IPv6Address(value)
    except ValueError:
        return False
    if _is_kept(address) or _is_network(line, end, address):
        return False
    if _PATH_AFTER.match(line, end) or _V4_PART.match(line, end):
        return False  # `0::/docker/…`; `::ffff:169` of `::ffff:169.254.0.0/112`
    if _IPV6_AFTER.match(line, end):
        return True
    groups = [group for group in value.split(":") if group]
    if "::" not in value or (len(groups) >= 2 and max(map(len, groups)) >= 3):
        return True
    return bool(_ADDRESS_WORDS.search(line, max(0, start - ADDRESS_REACH), start))


# Query parameters of a status badge's image URL: the token some badge services put there
# (Codecov's graph token, Travis' and CircleCI's status tokens) is made to be published with
# the badge, in a README.
_BADGE_URL = re.compile(
    r"(?i)https?://(?:[^\s/?#]+/[^\s?#]*badge[^\s?#]*|(?:img\.shields\.io|badgen\.net|"
    r"badge\.fury\.io)/[^\s?#]*|(?:[\w.-]+\.)?(?:travis-ci\.(?:com|org)|circleci\.com)/"
    r"[^\s?#]*\.(?:svg|png))\?[^\s)\]\"'<>]*"
)

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
_FILLER_RUN = re.compile(r"([xX*#])\1{11}")


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


MIN_CLASS_CHANGES = 0.25
"""Share of neighbouring letters and digits of another class (upper, lower, digit) a
random-looking token has at least: about 0.6 in random base62 or base64 (under 0.25 in about
one random 20-character token in 600 to 1,200, in none of 32 characters or more in 20,000
tried), under 0.2 in names and model numbers."""


def _class_changes(body: str) -> float:
    """The share of neighbouring letters and digits that differ in class.

    The classes are upper case, lower case and digits; pairs with another character in them
    (``-``, ``_``, ``/``) are not counted.
    """
    classes = [c.isupper() + 2 * c.isdigit() if c.isalnum() else -1 for c in body]
    pairs = [(a, b) for a, b in itertools.pairwise(classes) if min(a, b) >= 0]
    return sum(1 for a, b in pairs if a != b) / max(len(pairs), 1)


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
    if not relaxed and _class_changes(body) < MIN_CLASS_CHANGES:
        return False  # names and model numbers: `AMD-Instinct-MI300X-OAM`
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


def _outside_badge_queries(line: str, found: list[Finding]) -> list[Finding]:
    """``found`` without the guessed or keyword findings inside a status badge URL's query."""
    queries = [m.span() for m in _BADGE_URL.finditer(line)]
    if not queries:
        return found
    return [
        f
        for f in found
        if not (
            (f.kind in GUESSED_KINDS or f.kind in KEYWORD_KINDS)
            and any(start <= f.start < end for start, end in queries)
        )
    ]


# --------------------------------------------------------------------------- context

# Secrets whose shape says nothing: what makes them secrets is the format of the file they
# are in (a `.netrc`, a `.pgpass`, git's credential store, a private key file) or the command
# that printed them because it was asked for one (`gh auth token`, `aws configure get
# aws_secret_access_key`, `kubectl get secret … -o jsonpath=…`). The command is the action of
# a row (a typed command line, a swe shell command, a tool reading a path) or, on a terminal
# screen, the command line shown above the output.

CONTEXT_KINDS = frozenset({"netrc", "pgpass", "git_credentials", "private_key", "token", "value"})
"""How an output is read: a file format, a token printed alone (``token``), or a secret value
printed alone (``value``: the first line whole, blanks included)."""

# Programs whose output is the file they are given (a `cat ~/.netrc`, a `grep … ~/.pgpass`).
_READERS = frozenset(
    {"cat", "tac", "nl", "less", "more", "most", "head", "tail", "bat", "batcat", "view", "sed",
     "awk", "grep", "egrep", "fgrep", "rg", "cut", "sort", "column", "strings", "type"}
)  # fmt: skip
# Files whose format says where the secret is, by path.
_CREDENTIAL_FILES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(?:^|/)[._]netrc$"), "netrc"),
    (re.compile(r"(?:^|/)(?:\.pgpass|pgpass\.conf)$"), "pgpass"),
    (re.compile(r"(?:^|/)(?:\.git-credentials|git/credentials)$"), "git_credentials"),
    (
        re.compile(
            r"(?:^|/)\.ssh/(?!(?:config|known_hosts(?:\.old)?|authorized_keys2?|environment|rc)$)"
            r"[^/\s]+$|(?:^|/)(?:id_(?:rsa|dsa|ecdsa|ed25519|xmss)(?:_sk)?(?:[_.-][\w.-]*)?|"
            r"ssh_host_[a-z0-9_]+_key)$|\.(?:ppk|key)$"
        ),
        "private_key",
    ),
)
# Programs that print a token when asked `PROGRAM auth token`, and other token printers.
_TOKEN_SUBCOMMANDS = frozenset(
    {"print-access-token", "print-identity-token", "get-access-token", "get-login-password"}
)
_PASSWORD_MANAGERS = {"pass": "show", "gopass": "show", "secret-tool": "lookup", "op": "read"}
_WRAPPERS = frozenset({"sudo", "env", "command", "exec", "time", "nice", "nohup", "doas"})
_WRAPPER_ARGUMENTS = frozenset({"-u", "-g", "-n", "-C"})  # `sudo -u bob`, `nice -n 5`
_SEPARATORS = frozenset({";", "&&", "||", "&", "\n"})
# kubectl's `-o jsonpath=…`, `-ojsonpath=…`, `--output=go-template=…` (the value alone after `-o`)
_TEMPLATE_OUTPUT = re.compile(r"(?:-o=?|--output=?)?(?:jsonpath|go-template|template)\b")
_SHELL_WORDS = re.compile(r"\|\||&&|[;|&\n]|[^\s;|&]+")


def _pipelines(command: str) -> list[list[list[str]]]:
    """A command line as pipelines of commands of words (quotes removed where they close)."""
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words = list(lexer)
    except ValueError:  # an unclosed quote: a command line still being typed
        words = _SHELL_WORDS.findall(command)
    pipelines: list[list[list[str]]] = [[[]]]
    for word in words:
        if word in _SEPARATORS:
            pipelines.append([[]])
        elif word == "|":
            pipelines[-1].append([])
        else:
            pipelines[-1][-1].append(word)
    return [[c for c in pipeline if c] for pipeline in pipelines if any(pipeline)]


def _program(words: list[str]) -> list[str]:
    """The words of a command from its program on (``sudo -u bob``, ``env``, ``A=b`` left)."""
    index = 0
    while index < len(words):
        word = words[index]
        if word in _WRAPPERS or re.fullmatch(r"[A-Za-z_]\w*=\S*", word):
            index += 1
        elif word.startswith("-") and index > 0 and words[index - 1] in _WRAPPERS | {"-u"}:
            index += 2 if word in _WRAPPER_ARGUMENTS else 1
        else:
            break
    return words[index:]


def _asks_for_secret(words: list[str], pipeline: list[list[str]]) -> str | None:
    """``token`` or ``value`` when the command (in its pipeline) prints a secret it asked for."""
    program = words[0].rsplit("/", 1)[-1]
    rest = words[1:]
    if rest[:2] == ["auth", "token"] or rest[:1] == ["auth:token"]:
        return "token"  # gh, glab, doctl …; heroku
    if _TOKEN_SUBCOMMANDS & set(rest):
        return "token"  # gcloud auth print-access-token, az account get-access-token, aws ecr …
    if program == "vault":
        if rest[:2] == ["print", "token"]:
            return "token"
        if any(w == "-field" or w.startswith("-field=") for w in rest):
            return "value"
    if program == "kubectl" and "get" in rest:
        after = rest[rest.index("get") + 1 :]
        if after and (after[0] in ("secret", "secrets") or after[0].startswith("secret/")):
            templated = any(_TEMPLATE_OUTPUT.match(w) for w in after)
            decoded = any(
                c[:1] == ["base64"] and {"-d", "--decode", "-D"} & set(c) for c in pipeline
            )
            if templated or decoded:
                return "value"
    if program == "kubectl" and rest[:1] == ["create"] and "token" in rest[1:2]:
        return "token"
    if program == "aws" and "configure" in rest:
        after = rest[rest.index("configure") + 1 :]
        if len(after) >= 2 and after[0] == "get":
            name = after[1].rsplit(".", 1)[-1]
            return "token" if secret_name_kind(name) is not None else None
    if _PASSWORD_MANAGERS.get(program) in rest[:1]:
        return "value"
    if program == "security" and rest[:1] and "password" in rest[0] and "-w" in rest:
        return "value"
    if program == "bw" and rest[:2] == ["get", "password"]:
        return "value"
    return None


def file_output_kind(path: str) -> str | None:
    """How the content of the file at ``path`` is read for secrets (None: like any text)."""
    path = path.strip().strip("'\"")
    if path.endswith(".pub"):
        return None
    for pattern, kind in _CREDENTIAL_FILES:
        if pattern.search(path):
            return kind
    return None


def command_output_kind(command: str) -> str | None:
    """How the output of a shell command line is read for secrets (None: like any text).

    ``token`` or ``value`` for a command that prints a secret it was asked for, a file format
    for a reading program (``cat``, ``head``, ``grep`` …) given a credential file. Only the
    programs of the line's commands count (`echo gh auth token` prints no token).
    """
    for pipeline in _pipelines(command):
        for command_words in pipeline:
            words = _program(command_words)
            if not words:
                continue
            kind = _asks_for_secret(words, pipeline)
            if kind is not None:
                return kind
            if words[0].rsplit("/", 1)[-1] in _READERS:
                for word in words[1:]:
                    kind = file_output_kind(word)
                    if kind is not None:
                        return kind
    return None


# a swe read_file line number (`     3\t`): not part of the file
_LINE_NUMBER = re.compile(r"[ \t]*\d+\t")
_NETRC_TOKEN = re.compile(r'"[^"\n]*"|(?:[^\s\\]|\\(?![nrt]))+')
_NETRC_KEYWORDS = frozenset({"machine", "default", "login", "password", "passwd", "account",
                             "macdef", "port"})  # fmt: skip
_NETRC_SECRETS = frozenset({"password", "passwd", "account"})
_NETRC_START = re.compile(r"[ \t]*(?:machine[ \t]+\S+|default)(?:[ \t]|$)")
_NETRC_LINE = re.compile(r"[ \t]*(?:login|password|passwd|account|macdef|port)\b")
_PGPASS_LINE = re.compile(r"[ \t]*([^:\s#][^:\s]*):(\d+|\*):([^:\s]+):((?:[^:\\\s]|\\.)+):(\S.*)")
_CREDENTIAL_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://([^\s/@\"']+)@[^\s\"']")
_PRINTED_TOKEN = re.compile(r"[A-Za-z0-9+/=._~:\-]{8,}")
_PRINTED_WORD = re.compile(r"\S{4,}")
# A line that is a message, not a value: an error, a usage line, a sentence.
_MESSAGE = re.compile(
    r"(?i)^(?:error|usage|warning|fatal|no[ \t]|unable|could not|cannot|can't|failed|not[ \t]|"
    r"the[ \t]|please|run[ \t]|try[ \t])|: |[.!]$|^\["
)
_PROMPT_END = re.compile(r"[$#%>][ \t]*$")
# a line of key material alone: base64 of random bytes (letters of both cases and digits)
_KEY_MATERIAL = re.compile(
    r"[ \t]*(?=[^\n]*[A-Z])(?=[^\n]*[a-z])(?=[^\n]*\d)[A-Za-z0-9+/]{16,}={0,2}[ \t]*"
)


def _lines(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    """The bounds of each line of ``text[start:end]``, a swe line number left out."""
    position = start
    while position < end:
        line_end = text.find("\n", position, end)
        line_end = end if line_end < 0 else line_end
        number = _LINE_NUMBER.match(text, position, line_end)
        yield (number.end() if number else position), line_end
        position = line_end + 1


def _netrc(text: str, start: int, end: int, whole: bool) -> list[Finding]:
    """The passwords of netrc entries: the word after ``password``, ``passwd`` or ``account``.

    ``whole``: the text is a netrc file; otherwise only entries that start with a
    ``machine NAME`` or ``default`` line, and the lines of login, password … that follow it.
    """
    spans: list[tuple[int, int]] = []
    if whole:
        spans.append((start, end))
    else:
        inside = False
        for line_start, line_end in _lines(text, start, end):
            if _NETRC_START.match(text, line_start, line_end):
                if inside:
                    spans[-1] = (spans[-1][0], line_end)
                else:
                    spans.append((line_start, line_end))
                inside = True
            elif inside and _NETRC_LINE.match(text, line_start, line_end):
                spans[-1] = (spans[-1][0], line_end)
            else:
                inside = False
    found: list[Finding] = []
    for span_start, span_end in spans:
        tokens = [
            match
            for line_start, line_end in _lines(text, span_start, span_end)
            for match in _NETRC_TOKEN.finditer(text, line_start, line_end)
        ]
        for keyword, value in itertools.pairwise(tokens):
            if keyword.group() not in _NETRC_SECRETS or value.group() in _NETRC_KEYWORDS:
                continue
            value_start, value_end = value.span()
            raw = value.group()
            if raw.startswith('"'):
                value_start, value_end = value_start + 1, value_end - 1
            else:
                value_end -= len(raw) - len(raw.rstrip('"}],'))
            if value_end > value_start and is_secret_value(text[value_start:value_end]):
                found.append(Finding("password", value_start, value_end))
    return found


def _pgpass(text: str, start: int, end: int) -> list[Finding]:
    """The password of each ``host:port:database:user:password`` line."""
    found: list[Finding] = []
    for line_start, line_end in _lines(text, start, end):
        match = _PGPASS_LINE.fullmatch(text, line_start, line_end)
        if match is not None:
            value = match.group(5).rstrip()
            if is_url_secret(value) and len(value) >= 3:
                found.append(Finding("password", match.start(5), match.start(5) + len(value)))
    return found


def _git_credentials(text: str, start: int, end: int) -> list[Finding]:
    """The password of each stored URL, or its user when it has none (a token as the user)."""
    found: list[Finding] = []
    for match in _CREDENTIAL_URL.finditer(text, start, end):
        user_start, user_end = match.span(1)
        userinfo = match.group(1)
        if ":" in userinfo:
            value_start = user_start + userinfo.index(":") + 1
            if is_url_secret(text[value_start:user_end]):
                found.append(Finding("url_password", value_start, user_end))
        elif len(userinfo) >= 4 and is_url_secret(userinfo):
            found.append(Finding("url_token", user_start, user_end))
    return found


def _key_file(text: str, start: int, end: int) -> list[Finding]:
    """A private key file's lines, from its first line of key material to its last, whole."""
    first = last = -1
    for line_start, line_end in _lines(text, start, end):
        line = text[line_start:line_end]
        if (
            _PEM_BEGIN.search(line)
            or _PEM_END.search(line)
            or _PUTTY.match(line)
            or _KEY_MATERIAL.fullmatch(line)
        ):
            first = line_start if first < 0 else first
            last = line_end
    return [Finding("private_key", first, last)] if first >= 0 else []


def _printed(text: str, start: int, end: int, kind: str) -> list[Finding]:
    """A secret printed alone: every line that is one token-shaped word.

    For ``value`` also a first line of a few words that is not a message (a passphrase).
    """
    found: list[Finding] = []
    first = True
    for line_start, line_end in _lines(text, start, end):
        line = text[line_start:line_end]
        value = line.strip()
        if not value:
            continue
        at = line_start + line.index(value)
        shape = _PRINTED_TOKEN if kind == "token" else _PRINTED_WORD
        if shape.fullmatch(value) and not _PROMPT_END.search(value):
            if is_secret_value(value) or (kind == "value" and len(value) >= 3):
                found.append(Finding("printed_secret", at, at + len(value)))
        elif (
            kind == "value"
            and first
            and len(value.split()) <= 8
            and not _MESSAGE.search(value)
            and is_secret_value(value)
        ):
            found.append(Finding("printed_secret", at, at + len(value)))
        first = False
    return found


def context_findings(kind: str, text: str, start: int = 0, end: int | None = None) -> list[Finding]:
    """The secrets in ``text[start:end]``, an output read as ``kind`` (:data:`CONTEXT_KINDS`)."""
    end = len(text) if end is None else end
    if kind == "netrc":
        return _netrc(text, start, end, whole=True)
    if kind == "pgpass":
        return _pgpass(text, start, end)
    if kind == "git_credentials":
        return _git_credentials(text, start, end)
    if kind == "private_key":
        return _key_file(text, start, end)
    if kind in ("token", "value"):
        return _printed(text, start, end, kind)
    return []


def _prompt_head(prompt: str) -> str:
    """What every prompt of the shell starts with: ``user@host:`` of ``user@host:~/work$``."""
    prompt = prompt.strip()
    at, colon = prompt.find("@"), prompt.find(":")
    if 0 < at < colon:
        return prompt[: colon + 1]
    return prompt


def output_end(text: str, start: int, prompt: str | None) -> int:
    """Where the output starting at ``start`` ends: at the next prompt.

    Also when the output did not end its last line and the prompt follows it on that line.
    """
    head = _prompt_head(prompt) if prompt else ""
    for line_start, line_end in _lines(text, start, len(text)):
        line = text[line_start:line_end]
        if head and line.startswith(head):
            return max(start, line_start - 1)
        if len(head) >= 3:
            glued = line.find(head)
            if glued > 0:
                return line_start + glued
        if not head and line_end == len(text) and _PROMPT_END.search(line):
            return max(start, line_start - 1)  # the last line: the prompt that came back
    return len(text)


# The command line of a terminal screen: a prompt (up to its `$`, `#`, `%` or `>`), a command.
_COMMAND_LINE = re.compile(r"(.{0,80}?[$#%>\u276f])[ \t]+(\S.*)")  # \u276f: zsh themes
CONTEXT_MARKERS: tuple[str, ...] = (
    "token", "netrc", "pgpass", "credentials", ".ssh/", "id_", "_key", ".key", ".ppk",
    "secret", "vault", "pass", "op read", "get-login-password",
)  # fmt: skip
"""Literal parts one of which a command line :func:`command_output_kind` reads holds."""


def terminal_outputs(text: str) -> list[Finding]:
    """Secrets in the outputs of the command lines a terminal text shows.

    A line that is a prompt and a command :func:`command_output_kind` knows starts an output
    that ends at the next line starting with the same prompt (or where that prompt follows
    the output on its last line).
    """
    found: list[Finding] = []
    position = 0
    for line in text.split("\n"):
        line_end = position + len(line)
        if any(marker in line for marker in CONTEXT_MARKERS):
            match = _COMMAND_LINE.match(line)
            kind = command_output_kind(match.group(2)) if match else None
            if match is not None and kind is not None:
                start = min(line_end + 1, len(text))
                end = output_end(text, start, match.group(1))
                if end > start:
                    found += context_findings(kind, text, start, end)
        position = line_end + 1
    return found


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
        if ("machine" in text or "default" in text) and ("pass" in text or "account" in text):
            found += _netrc(text, 0, len(text), whole=False)
        if any(marker in text for marker in CONTEXT_MARKERS):
            found += terminal_outputs(text)
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
            if found:
                found = _outside_badge_queries(line, found)
        if self.emails and EMAIL_HINT.search(line):
            found += [
                Finding("email", *m.span())
                for m in EMAIL.finditer(line)
                if email_is_personal(line, *m.span())
            ]
        if self.ips:
            if IPV4_HINT.search(line):
                found += [
                    Finding("ipv4", *m.span())
                    for m in IPV4.finditer(line)
                    if ipv4_is_address(line, *m.span())
                ]
            if IPV6_HINT.search(line):
                found += [
                    Finding("ipv6", *m.span())
                    for m in IPV6.finditer(line)
                    if ipv6_is_address(line, *m.span())
                ]
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
            elif text.startswith("\\n", header_end) and (  # a key inside a JSON string
                escaped := _PEM_ESCAPED_BODY.match(text, header_end)
            ):
                end = escaped.end()
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
        if found:
            # a made-up example of a format (`ACxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx`)
            found = [f for f in found if not _FILLER_RUN.search(word, f[1], f[2])]
        if not word.isupper() and not word.islower() and _DIGIT.search(word):
            for match in _TOKEN_RUN.finditer(word):
                if match.group().startswith("-") and word[match.start() - 1 : match.start()] == "[":
                    continue  # a manual's synopsis of one-letter options: `[-46AaCfGg…]`
                if (
                    not _DIGEST_RUN.match(match.group())
                    and looks_random(match.group())
                    and not self._encoded_text(match.group())
                ):
                    found.append(("random_token", *match.span()))
        if "'" in word or '"' in word:
            # detect-secrets' quoted high-entropy strings (hex is left: digests are quoted too)
            for value in _BASE64_ENTROPY.analyze_string(word):
                if (
                    len(value) >= MIN_TOKEN_WORD
                    and not _DIGEST_RUN.match(value)
                    and shannon_entropy(value) > _BASE64_ENTROPY.entropy_limit
                    and not all(c in "0123456789abcdefABCDEF" for c in value)
                    and sum(map(len, _WORDISH.findall(value))) <= len(value) / 2
                    and not self._encoded_text(value)
                ):
                    found += [
                        ("high_entropy", *span) for span in _locate(word, 0, len(word), value)
                    ]
        if len(self._word_memo) >= 4096:
            self._word_memo.clear()
        self._word_memo[word] = found
        return found

    def _encoded_text(self, token: str) -> bool:
        """Whether a random-looking run is base64 of ordinary text holding no secret.

        An MCP resource's ``blob``, a data URL: a file's bytes, not a key. The text it decodes
        to is searched like any other (a service-account JSON in base64 is still a secret).
        """
        if len(token) < MIN_ENCODED_TEXT:
            return False
        body = token.rstrip("=").replace("-", "+").replace("_", "/")
        body = body[: len(body) - len(body) % 4]
        try:
            data = base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            return False
        text = data.decode("utf-8", errors="replace")
        printable = sum(1 for c in text if c != "\ufffd" and (c.isprintable() or c in "\n\r\t"))
        if printable < 0.97 * len(text):
            return False
        return not any(f.kind not in PII_KINDS for f in self.find(text))

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
                if (
                    pattern is _ASSIGNMENT
                    and match.start(1) > 0
                    and text[match.start(1) - 1] in "?&"
                ):
                    # a URL's query parameter: its value ends where the URL does
                    bracket = _URL_VALUE_END.search(text, value_start, value_end)
                    if bracket is not None:
                        value_end = bracket.start()
                if pattern is _LINE_ASSIGNMENT:
                    if match.group(1) in _DATABASE_NAMES:
                        continue  # `passwd: files systemd` (nsswitch.conf), `pwd: Jim Meyering`
                    if _SETTING_THEN_PROSE.fullmatch(text, match.end(1), value_start):
                        continue  # `ConditionCredential= may be used …`: a manual's prose
                    comment = _TRAILING_COMMENT.search(text, value_start, value_end)
                    if comment is not None:
                        value_end = comment.start()
                found += self._value(text, kind, value_start, value_end, match.group(1))
        if "-" in line:
            for match in _OPTION.finditer(text, start, end):
                kind = secret_name_kind(match.group(1))
                if kind is None or match.group(2).startswith("-"):
                    continue
                if _PROSE_AFTER.match(text, match.end(2), end) and match.group(2).isalpha():
                    continue  # `--discard-dual-password Discard the user's …`: a manual's prose
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
            named = [at for at in (lowered.find(word) for word in gate) if at >= 0]
            if not named:
                continue
            # the tool's own options, from its name on (`man -P cat ssh-keygen` is man's -P)
            for match in pattern.finditer(text, start + min(named), end):
                if not _SYNOPSIS_VALUE.match(text, match.end(1)):
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
    def _value(
        text: str, kind: str, start: int, end: int, name: str | None = None
    ) -> list[Finding]:
        """The finding for an assigned value, or none if it holds no secret.

        Quotes and what follows the value in code or prose (:func:`trim_value`) are left out.
        """
        if end - start >= 2 and text[start] == text[end - 1] and text[start] in "\"'":
            start, end = start + 1, end - 1
        raw = text[start:end]
        if end <= start or not is_secret_value(raw, name):
            return []
        start += len(raw) - len(raw.lstrip())
        return [Finding(kind, start, start + len(trim_value(raw)))]

    @staticmethod
    def _keyword_plugin(text: str, start: int, end: int, line: str) -> list[Finding]:
        """detect-secrets' keyword detector (quoted values), kept to secret-sounding names."""
        found: list[Finding] = []
        for value in set(_KEYWORD_PLUGIN.analyze_string(line)):
            for value_start, value_end in _locate(text, start, end, value):
                name = re.search(r"([A-Za-z_][\w.\-]*)[\"'\]]*\s*[:=!]{0,3}>?\s*@?[\"'`]?$",
                                 text[start:value_start])  # fmt: skip
                kind = secret_name_kind(name.group(1)) if name else None
                if kind is not None and is_secret_value(value, name.group(1) if name else None):
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
            if is_url_secret(match.group(1)):
                found.append(Finding("url_password", *match.span(1)))
        for value in _BASIC_AUTH_PLUGIN.analyze_string(text[start:end]):
            for span in _locate(text, start, end, f":{value}@"):
                if is_url_secret(value):
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
