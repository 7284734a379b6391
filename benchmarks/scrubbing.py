"""Benchmark of scrubbing: recall on planted secrets, false positives on real observations.

Run ``.venv/bin/python benchmarks/scrubbing.py`` (both), ``--precision-only`` (no Docker) or
``--no-precision``; ``--build-precision-set`` builds the precision set (below). What the
scrubber replaces and leaves, and the numbers, are in docs/scrubbing.md.

**Recall.** :data:`FORMATS` holds 55 secret formats: provider keys and tokens (GitHub,
GitLab, Slack, AWS, Stripe, OpenAI, Anthropic, Hugging Face, Google, npm, PyPI, Vault …),
JWTs, hex and base64 tokens, passwords (plain, passphrases with spaces, special characters),
credentials inside URLs and connection strings, and private keys (PEM RSA, PKCS#8, EC,
OpenSSH, encrypted PKCS#8, PGP, PuTTY). Each is planted in every placement that fits it
(:data:`PLACEMENTS`): exported by a typed command and echoed back later, typed so that the
pane's 160th column falls inside it, printed wrapped and split between ``new_scrollback``
and the screen, printed by ``cat .env``, inside pretty JSON and YAML files, in a URL, as a
command-line option, in an ``Authorization: Bearer`` header, printed bare; keys are printed
whole, with their BEGIN line scrolled into the scrollback, with their BEGIN line scrolled
away in an earlier step, JSON-escaped in a service-account file and in a YAML block.

Every planted case is recorded for real: a fresh terminal sandbox per format (Docker, the
project's tmux driver), files written by the task setup, the placements played one after the
other with ``clear`` between them and split into one episode per case, then normalized into
transitions exactly as ``worldtrace collect`` does. The rows of each case go through the real
scrub step. A case leaks if any run of more than :data:`LEAK_RUN` - 1 characters of its
secret survives in any string of any of its rows (JSON columns decoded). Target: 100%.

:data:`CONTEXT_FAMILIES` (issue 24) are secrets whose shape says nothing: credential files
(``.netrc``, ``.pgpass``, a git credential store, an SSH private key) and tokens printed by a
command asked for one (``gh auth token``, ``heroku auth:token``, ``aws configure get
aws_secret_access_key``, ``vault print token``, ``kubectl get secret … -o jsonpath=…``, with
and without ``| base64 -d``, ``gcloud auth print-access-token``, ``pass show``; the tools are
fake scripts). Each is recorded in a real terminal with the command line on the screen, on a
screen the command line cleared, and scrolled away by the next step; and rendered by the swe
and mcp renderers as a ``run_shell_command``, ``read_file`` or ``read_text_file`` result
(:func:`tool_case`). ``--families`` and ``--formats`` choose what is planted; ``--rows-out``
keeps the recorded rows of every case to scrub them again with another scrubber.

**False positives.** The precision set (:data:`PRECISION_FILE`, gzip'd JSONL: ``id``,
``domain``, ``source``, ``format``, ``columns``, ``text``) holds real observation texts of
every domain in which a person found no secret and no personal data, so every row the
scrubber changes (secrets, e-mail and IP scrubbing all on) is a false positive: the share of
rows changed per domain (target < 0.5% in each), with the replaced spans of every false
positive printed. ``--build-precision-set --from-runs RUN… [--from-machine]`` draws the
distinct observations of collected runs and fills each domain up to ``--per-domain`` with
this machine's own text shaped as the domain renders it (:func:`machine_rows`); the drawn
rows go to ``--candidates`` to be read, and the set is written without the rows listed in
:data:`REMOVED_FILE` (those found holding personal data or what the scrubber must replace);
``--from-candidates`` writes it again from a read candidates file.

Collected corpora can be measured as before (``--corpus RUN`` or ``--demo-episodes N``,
``--explore-corpus RUN`` or ``--explore-episodes N``, ``--web-corpus RUN`` or
``--web-episodes N``): scrubbed with secrets only, the share of rows changed (target < 1%),
replacements of credentials the task library plants on purpose
(:data:`KNOWN_CORPUS_SECRETS`) counted apart, rows changed with e-mail and IP scrubbing on
reported too.

Tables are printed; the report goes to ``benchmarks/results/scrubbing.json``.
"""

from __future__ import annotations

import argparse
import base64
import copy
import difflib
import gzip
import hashlib
import json
import random
import re
import shlex
import string
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pyarrow.parquet as pq
from common import loadavg, log, machine_info, write_report
from datatrove.data import Document

from worldtrace.collectors.base import EpisodePlan, ReplayPolicy
from worldtrace.collectors.episode import EpisodeLimits, run_episode
from worldtrace.collectors.recorder import RunRecorder
from worldtrace.collectors.terminal.actions import command
from worldtrace.collectors.terminal.environment import TerminalConfig, TerminalEnvironment
from worldtrace.collectors.terminal.render import FORMAT as TERMINAL_FORMAT
from worldtrace.collectors.terminal.render import TerminalRenderer
from worldtrace.collectors.terminal.screen import plain_screen
from worldtrace.collectors.terminal.tasks.helpers import TerminalTask, write_file
from worldtrace.curation.config import ScrubSettings
from worldtrace.curation.scrub import LogicalText, Scrubber, ScrubStep
from worldtrace.curation.secrets import EMAIL, IPV4, IPV6
from worldtrace.normalizers.base import episode_records
from worldtrace.schemas import (
    Action,
    EnvironmentRef,
    Observation,
    PolicyRef,
    Source,
    Timing,
    Transition,
    to_row,
    transition_id,
)
from worldtrace.schemas.raw import read_raw_episode

RESULTS_DIR = Path(__file__).resolve().parent / "results"
RESULTS_FILE = RESULTS_DIR / "scrubbing.json"
LEAK_RUN = 9
"""A run of this many characters of a secret found after scrubbing is a leak."""
TARGET_RECALL = 1.0
TARGET_FP_RATE = 0.01
WIDTH, HEIGHT = 160, 40
STEP_TIMEOUT_S = 20.0
WORKDIR = "/home/user/work"

KNOWN_CORPUS_SECRETS: dict[str, str] = {
    "app": "the password in DATABASE_URL=postgres://app:app@localhost of the api-server "
    "task's .env (a credential the task library plants on purpose)",
}
"""Replaced strings of the demo corpus that are credentials, with why."""

ALNUM = string.ascii_letters + string.digits
HEX = "0123456789abcdef"
URLSAFE = ALNUM + "-_"

# --------------------------------------------------------------------------- secret formats


@dataclass(frozen=True)
class SecretFormat:
    """One kind of secret: how to make one, the name it is kept under, how tools take it."""

    name: str
    make: Callable[[random.Random], str]
    env: str  # the variable it is exported as / the key it has in config files
    flag: str = "--token"  # the command-line option it is passed with
    identifying: bool = True  # recognisable without a name: printed bare is measured
    header: bool = True  # sent as a Bearer token
    in_url: bool = True  # passed as a URL query parameter
    secret: Callable[[str], list[str]] | None = None  # what must not survive (default: all)
    multiline: bool = False

    def parts(self, value: str) -> list[str]:
        """The strings no run of :data:`LEAK_RUN` characters of may survive."""
        return self.secret(value) if self.secret else [value]


def _chars(rng: random.Random, n: int, alphabet: str = ALNUM) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _b64(rng: random.Random, n_bytes: int) -> str:
    return base64.b64encode(rng.randbytes(n_bytes)).decode()


def _jwt(rng: random.Random) -> str:
    def part(data: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")

    claims = {"sub": f"user-{rng.randint(1000, 9999)}", "iat": 1772900000, "scope": "admin"}
    signature = base64.urlsafe_b64encode(rng.randbytes(32)).decode().rstrip("=")
    return f"{part({'alg': 'HS256', 'typ': 'JWT'})}.{part(claims)}.{signature}"


def _pem(label: str, der_bytes: int, line: int = 64) -> Callable[[random.Random], str]:
    def make(rng: random.Random) -> str:
        body = base64.b64encode(b"\x30\x82" + rng.randbytes(der_bytes)).decode()
        lines = [body[i : i + line] for i in range(0, len(body), line)]
        return "\n".join([f"-----BEGIN {label}-----", *lines, f"-----END {label}-----"])

    return make


def _encrypted_pem(rng: random.Random) -> str:
    body = base64.b64encode(rng.randbytes(1200)).decode()
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    return "\n".join(
        [
            "-----BEGIN RSA PRIVATE KEY-----",
            "Proc-Type: 4,ENCRYPTED",
            f"DEK-Info: AES-128-CBC,{_chars(rng, 32, '0123456789ABCDEF')}",
            "",
            *lines,
            "-----END RSA PRIVATE KEY-----",
        ]
    )


def _pgp(rng: random.Random) -> str:
    body = base64.b64encode(rng.randbytes(900)).decode()
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    return "\n".join(
        [
            "-----BEGIN PGP PRIVATE KEY BLOCK-----",
            "",
            *lines,
            f"={_b64(rng, 3)}",
            "-----END PGP PRIVATE KEY BLOCK-----",
        ]
    )


def _putty(rng: random.Random) -> str:
    public = base64.b64encode(rng.randbytes(51)).decode()
    private = base64.b64encode(rng.randbytes(96)).decode()
    private_lines = [private[i : i + 64] for i in range(0, len(private), 64)]
    return "\n".join(
        [
            "PuTTY-User-Key-File-3: ssh-ed25519",
            "Encryption: none",
            "Comment: deploy@ci",
            "Public-Lines: 2",
            public[:64],
            public[64:],
            f"Private-Lines: {len(private_lines)}",
            *private_lines,
            f"Private-MAC: {_chars(rng, 64, HEX)}",
        ]
    )


def _key_body(value: str) -> list[str]:
    """The secret lines of a key: everything but its BEGIN/END lines and headers."""
    return [
        line
        for line in value.split("\n")
        if line and "-----" not in line and ": " not in line and len(line) >= LEAK_RUN
    ] + [line.split(": ", 1)[1] for line in value.split("\n") if line.startswith("Private-MAC")]


def _password_in(value: str) -> list[str]:
    """The password of a URL or connection string."""
    return [value.split("://", 1)[1].split("@", 1)[0].split(":", 1)[1]]


def _user_of(value: str) -> list[str]:
    return [value.split("://", 1)[1].split("@", 1)[0]]


def _account_key(value: str) -> list[str]:
    return [value.split("AccountKey=", 1)[1].split(";", 1)[0]]


def _pypi(rng: random.Random) -> str:
    return "pypi-AgEIcHlwaS5vcmc" + _chars(rng, 150, URLSAFE)


FORMATS: tuple[SecretFormat, ...] = (
    SecretFormat("github_classic", lambda r: "ghp_" + _chars(r, 36), "GITHUB_TOKEN"),
    SecretFormat("github_oauth", lambda r: "gho_" + _chars(r, 36), "GH_OAUTH_TOKEN"),
    SecretFormat(
        "github_fine_grained",
        lambda r: f"github_pat_{_chars(r, 22)}_{_chars(r, 59)}",
        "GH_PAT",
    ),
    SecretFormat("gitlab_pat", lambda r: "glpat-" + _chars(r, 20, URLSAFE), "GITLAB_TOKEN"),
    SecretFormat(
        "slack_bot",
        lambda r: (
            f"xoxb-{_chars(r, 12, string.digits)}-{_chars(r, 13, string.digits)}-" + _chars(r, 24)
        ),
        "SLACK_BOT_TOKEN",
    ),
    SecretFormat(
        "slack_user",
        lambda r: (
            "xoxp-"
            + "-".join(_chars(r, 12, string.digits) for _ in range(3))
            + "-"
            + _chars(r, 32, HEX)
        ),
        "SLACK_USER_TOKEN",
    ),
    SecretFormat(
        "slack_webhook",
        lambda r: (
            f"https://hooks.slack.com/services/T{_chars(r, 10, string.ascii_uppercase)}"
            f"/B{_chars(r, 10, string.ascii_uppercase)}/{_chars(r, 24)}"
        ),
        "SLACK_WEBHOOK",
        flag="--webhook",
        header=False,
        in_url=False,
        secret=lambda v: [v.rsplit("/", 3)[-3] + "/" + v.rsplit("/", 2)[-2] + "/" + v[-24:]],
    ),
    SecretFormat(
        "aws_access_key_id",
        lambda r: "AKIA" + _chars(r, 16, string.ascii_uppercase + string.digits),
        "AWS_ACCESS_KEY_ID",
        flag="--access-key",
        header=False,
    ),
    SecretFormat(
        "aws_secret_access_key",
        lambda r: _chars(r, 40, ALNUM + "/+"),
        "AWS_SECRET_ACCESS_KEY",
        flag="--secret-key",
        header=False,
    ),
    SecretFormat(
        "aws_session_token",
        lambda r: "IQoJb3JpZ2luX2VjE" + _b64(r, 260).rstrip("="),
        "AWS_SESSION_TOKEN",
    ),
    SecretFormat("stripe_secret", lambda r: "sk_live_" + _chars(r, 24), "STRIPE_SECRET_KEY"),
    SecretFormat("stripe_long", lambda r: "sk_live_" + _chars(r, 99), "STRIPE_API_KEY"),
    SecretFormat("stripe_restricted", lambda r: "rk_live_" + _chars(r, 24), "STRIPE_RK"),
    SecretFormat("stripe_webhook", lambda r: "whsec_" + _chars(r, 32), "STRIPE_WEBHOOK_SECRET"),
    SecretFormat("openai_project", lambda r: "sk-proj-" + _chars(r, 64, URLSAFE), "OPENAI_API_KEY"),
    SecretFormat(
        "openai_legacy",
        lambda r: "sk-" + _chars(r, 20) + "T3BlbkFJ" + _chars(r, 20),
        "OPENAI_KEY",
    ),
    SecretFormat(
        "anthropic",
        lambda r: "sk-ant-api03-" + _chars(r, 93, URLSAFE) + "AA",
        "ANTHROPIC_API_KEY",
    ),
    SecretFormat("huggingface", lambda r: "hf_" + _chars(r, 34), "HF_TOKEN"),
    SecretFormat("google_api_key", lambda r: "AIza" + _chars(r, 35, URLSAFE), "GOOGLE_API_KEY"),
    SecretFormat(
        "google_client_secret", lambda r: "GOCSPX-" + _chars(r, 28, URLSAFE), "GOOGLE_SECRET"
    ),
    SecretFormat(
        "google_access_token", lambda r: "ya29." + _chars(r, 120, URLSAFE), "GCLOUD_ACCESS"
    ),
    SecretFormat("jwt", _jwt, "ID_JWT", flag="--jwt"),
    SecretFormat("npm", lambda r: "npm_" + _chars(r, 36), "NPM_TOKEN"),
    SecretFormat("pypi", _pypi, "TWINE_PASSWORD", flag="--password"),
    SecretFormat("docker_hub", lambda r: "dckr_pat_" + _chars(r, 27, URLSAFE), "DOCKERHUB_PAT"),
    SecretFormat("digitalocean", lambda r: "dop_v1_" + _chars(r, 64, HEX), "DO_ACCESS_TOKEN"),
    SecretFormat("vault", lambda r: "hvs." + _chars(r, 90, URLSAFE), "VAULT_TOKEN"),
    SecretFormat(
        "sendgrid",
        lambda r: f"SG.{_chars(r, 22, URLSAFE)}.{_chars(r, 43, URLSAFE)}",
        "SENDGRID_API_KEY",
        flag="--api-key",
    ),
    SecretFormat(
        "twilio_api_key", lambda r: "SK" + _chars(r, 32, HEX), "TWILIO_API_KEY", flag="--api-key"
    ),
    SecretFormat(
        "mailchimp",
        lambda r: f"{_chars(r, 32, HEX)}-us{r.randint(1, 21)}",
        "MAILCHIMP_API_KEY",
        flag="--api-key",
    ),
    SecretFormat(
        "telegram_bot",
        lambda r: f"{_chars(r, 10, string.digits)}:AA{_chars(r, 33, URLSAFE)}",
        "TELEGRAM_BOT_TOKEN",
    ),
    SecretFormat(
        "discord_bot",
        lambda r: f"M{_chars(r, 23)}.{_chars(r, 6)}.{_chars(r, 27, URLSAFE)}",
        "DISCORD_TOKEN",
    ),
    SecretFormat("square_oauth", lambda r: "sq0csp-" + _chars(r, 43, URLSAFE), "SQUARE_SECRET"),
    SecretFormat("shopify", lambda r: "shpat_" + _chars(r, 32, HEX), "SHOPIFY_TOKEN"),
    SecretFormat("databricks", lambda r: "dapi" + _chars(r, 32, HEX), "DATABRICKS_TOKEN"),
    SecretFormat("linear", lambda r: "lin_api_" + _chars(r, 40), "LINEAR_API_KEY"),
    SecretFormat(
        "newrelic",
        lambda r: "NRAK-" + _chars(r, 27, string.ascii_uppercase + string.digits),
        "NEW_RELIC_API_KEY",
    ),
    SecretFormat(
        "age_secret_key",
        lambda r: "AGE-SECRET-KEY-1" + _chars(r, 58, string.ascii_uppercase + string.digits),
        "AGE_IDENTITY",
        flag="--identity",
        header=False,
    ),
    SecretFormat(
        "azure_storage",
        lambda r: (
            "DefaultEndpointsProtocol=https;AccountName=shopdata;AccountKey="
            + _b64(r, 64)
            + ";EndpointSuffix=core.windows.net"
        ),
        "AZURE_STORAGE_CONNECTION_STRING",
        flag="--connection-string",
        header=False,
        in_url=False,
        secret=_account_key,
    ),
    SecretFormat(
        "sentry_dsn",
        lambda r: (
            f"https://{_chars(r, 32, HEX)}@o{r.randint(100000, 999999)}"
            f".ingest.sentry.io/{r.randint(1000000, 9999999)}"
        ),
        "SENTRY_DSN",
        flag="--dsn",
        header=False,
        in_url=False,
        secret=_user_of,
    ),
    SecretFormat(
        "postgres_url",
        lambda r: f"postgres://shop:{_chars(r, 18)}@db.internal:5432/shop",
        "DATABASE_URL",
        flag="--db",
        header=False,
        in_url=False,
        secret=_password_in,
    ),
    SecretFormat(
        "hex_token",
        lambda r: _chars(r, 64, HEX),
        "API_TOKEN",
        identifying=False,  # a bare 64-hex string is a checksum as often as a token
    ),
    SecretFormat("base64_token", lambda r: _b64(r, 32), "SESSION_SECRET", flag="--secret"),
    SecretFormat(
        "uuid_api_key",
        lambda r: str(uuid.UUID(bytes=r.randbytes(16), version=4)),
        "HEROKU_API_KEY",
        flag="--api-key",
        identifying=False,  # a UUID alone is an identifier
    ),
    SecretFormat(
        "password_plain",
        lambda r: f"Summer{r.randint(2000, 2030)}!{_chars(r, 3)}",
        "DB_PASSWORD",
        flag="--password",
        identifying=False,
        header=False,
    ),
    SecretFormat(
        "password_passphrase",
        lambda r: (
            " ".join(
                r.choice(["correct", "horse", "battery", "staple", "orbit", "maple"])
                for _ in range(4)
            )
            + f" {r.randint(10, 99)}"
        ),
        "ADMIN_PASSWORD",
        flag="--password",
        identifying=False,
        header=False,
        in_url=False,
    ),
    SecretFormat(
        "password_special",
        lambda r: f"p@$$-{_chars(r, 6)}#%&!",
        "MYSQL_ROOT_PASSWORD",
        flag="--password",
        identifying=False,
        header=False,
        in_url=False,
    ),
    SecretFormat(
        "bearer_opaque",
        lambda r: _chars(r, 40, ALNUM + "-._~"),
        "API_BEARER",
        identifying=False,  # an opaque token without a scheme or name
    ),
    SecretFormat(
        "pem_rsa", _pem("RSA PRIVATE KEY", 1190), "TLS_KEY", multiline=True, secret=_key_body
    ),
    SecretFormat(
        "pem_pkcs8", _pem("PRIVATE KEY", 1210), "TLS_KEY", multiline=True, secret=_key_body
    ),
    SecretFormat("pem_ec", _pem("EC PRIVATE KEY", 119), "EC_KEY", multiline=True, secret=_key_body),
    SecretFormat(
        "openssh",
        _pem("OPENSSH PRIVATE KEY", 400, line=70),
        "SSH_KEY",
        multiline=True,
        secret=_key_body,
    ),
    SecretFormat("pem_encrypted", _encrypted_pem, "TLS_KEY", multiline=True, secret=_key_body),
    SecretFormat("pgp", _pgp, "GPG_KEY", multiline=True, secret=_key_body),
    SecretFormat("putty", _putty, "PPK", multiline=True, secret=_key_body),
)

# --------------------------------------------------------------------------- placements


@dataclass
class Case:
    """One planted secret: the files the sandbox starts with and the commands typed."""

    format: str
    placement: str
    value: str
    parts: list[str]
    files: dict[str, str] = field(default_factory=dict)
    steps: list[Action] = field(default_factory=list)


def _quote(value: str) -> str:
    return shlex.quote(value)


def _log_line(name: str, value: str, column: int) -> str:
    """A log line printing ``name=value`` with the value starting at ``column``."""
    quote = '"' if " " in value else ""
    head = "2026-03-01 08:00:01,120 INFO worker ready "
    tail = f" {name}={quote}"
    dots = "." * max(0, column - len(head) - len(tail))
    return f"{head}{dots}{tail}{value}{quote}"


def _wrap_point(value: str) -> int:
    """Where in the value the pane edge should fall: its middle, at most 80 in."""
    return min(len(value) // 2, 80)


def typed(fmt: SecretFormat, value: str, prompt: str) -> Case:
    """Exported by a typed command, then printed bare by ``echo``."""
    case = Case(fmt.name, "typed", value, fmt.parts(value))
    case.steps = [command(f"export {fmt.env}={_quote(value)}"), command(f'echo "${fmt.env}"')]
    return case


def typed_wrapped(fmt: SecretFormat, value: str, prompt: str) -> Case:
    """Typed so that the pane's 160th column falls inside the secret."""
    case = Case(fmt.name, "typed-wrapped", value, fmt.parts(value))
    quoted = _quote(value)
    before = f"{prompt}echo 'release ' && export {fmt.env}={quoted[: quoted.find(value)]}"
    pad = (WIDTH - _wrap_point(value) - len(before)) % WIDTH
    case.steps = [command(f"echo 'release {'r' * pad}' && export {fmt.env}={quoted}")]
    return case


def split(fmt: SecretFormat, value: str, prompt: str) -> Case:
    """Printed wrapped, its first part scrolled into new_scrollback, the rest on screen."""
    case = Case(fmt.name, "split", value, fmt.parts(value))
    line = _log_line(fmt.env, value, WIDTH - _wrap_point(value))
    physical = -(-len(line) // WIDTH)
    filler = [f"worker {i}: heartbeat ok" for i in range(HEIGHT - physical)]
    case.files = {"worker.log": "\n".join([line, *filler])}
    case.steps = [command("cat worker.log")]
    return case


def env_file(fmt: SecretFormat, value: str, prompt: str) -> Case:
    """Printed by ``cat .env``."""
    case = Case(fmt.name, "env-file", value, fmt.parts(value))
    shown = f'"{value}"' if " " in value else value
    case.files = {".env": f"APP_ENV=production\n{fmt.env}={shown}\nLOG_LEVEL=info"}
    case.steps = [command("cat .env")]
    return case


def json_file(fmt: SecretFormat, value: str, prompt: str) -> Case:
    """A value in a pretty-printed JSON configuration."""
    case = Case(fmt.name, "json", value, fmt.parts(value))
    config = {"service": "billing", "credentials": {fmt.env.lower(): value}, "retries": 3}
    case.files = {"config.json": json.dumps(config, indent=2)}
    case.steps = [command("cat config.json")]
    return case


def yaml_file(fmt: SecretFormat, value: str, prompt: str) -> Case:
    """A value in a YAML configuration."""
    case = Case(fmt.name, "yaml", value, fmt.parts(value))
    shown = json.dumps(value) if any(c in value for c in ":#&!%@ ") else value
    case.files = {
        "config.yml": f"service: billing\ncredentials:\n  {fmt.env.lower()}: {shown}\nretries: 3"
    }
    case.steps = [command("cat config.yml")]
    return case


def url(fmt: SecretFormat, value: str, prompt: str) -> Case:
    """A URL query parameter of a typed ``curl``."""
    case = Case(fmt.name, "url", value, fmt.parts(value))
    case.steps = [command(f"curl -sS 'https://api.example.com/v1/sync?access_token={value}'")]
    return case


def cli(fmt: SecretFormat, value: str, prompt: str) -> Case:
    """A command-line option of a typed command."""
    case = Case(fmt.name, "cli", value, fmt.parts(value))
    case.steps = [command(f"./deploy.sh --env prod {fmt.flag} {_quote(value)}")]
    return case


def bearer(fmt: SecretFormat, value: str, prompt: str) -> Case:
    """An ``Authorization: Bearer`` header of a typed ``curl``."""
    case = Case(fmt.name, "bearer", value, fmt.parts(value))
    case.steps = [
        command(f"curl -sS https://api.example.com/v1/me -H 'Authorization: Bearer {value}'")
    ]
    return case


def bare(fmt: SecretFormat, value: str, prompt: str) -> Case:
    """Printed alone, with no name near it."""
    case = Case(fmt.name, "bare", value, fmt.parts(value))
    case.files = {"out.txt": value}
    case.steps = [command("cat out.txt")]
    return case


def key_cat(fmt: SecretFormat, value: str, prompt: str) -> Case:
    """A key printed whole."""
    case = Case(fmt.name, "key-cat", value, fmt.parts(value))
    case.files = {"key.pem": value}
    case.steps = [command("cat key.pem")]
    return case


def key_split(fmt: SecretFormat, value: str, prompt: str) -> Case:
    """A key whose BEGIN line and first body lines scroll into new_scrollback."""
    case = Case(fmt.name, "key-split", value, fmt.parts(value))
    lines = value.split("\n")
    before = [f"checking {i}" for i in range(8)]
    # typed line + 8 + BEGIN + 2 body lines scroll off; the rest stays on screen
    after = [f"ok {i}" for i in range(max(0, 12 + HEIGHT - 2 - len(before) - len(lines)))]
    case.files = {"key.pem": "\n".join([*before, *lines, *after])}
    case.steps = [command("cat key.pem")]
    return case


def key_scrolled(fmt: SecretFormat, value: str, prompt: str) -> Case:
    """A key whose BEGIN line scrolled away in an earlier step; later screens show the rest."""
    case = Case(fmt.name, "key-scrolled", value, fmt.parts(value))
    case.files = {"key.pem": value, "list.txt": "\n".join(f"item {i}" for i in range(12))}
    case.steps = [command("cat key.pem"), command("cat list.txt"), command("cat list.txt")]
    return case


def key_json(fmt: SecretFormat, value: str, prompt: str) -> Case:
    """A key JSON-escaped in a service-account file (one line, wrapped many times)."""
    case = Case(fmt.name, "key-json", value, fmt.parts(value))
    account = {"type": "service_account", "private_key_id": "a1b2", "private_key": value + "\n"}
    case.files = {"sa.json": json.dumps(account, indent=2)}
    case.steps = [command("cat sa.json")]
    return case


def key_yaml(fmt: SecretFormat, value: str, prompt: str) -> Case:
    """A key in a YAML block scalar."""
    case = Case(fmt.name, "key-yaml", value, fmt.parts(value))
    block = "\n".join(f"    {line}" for line in value.split("\n"))
    case.files = {"tls.yml": f"tls:\n  cert_file: /etc/tls/cert.pem\n  private_key: |\n{block}"}
    case.steps = [command("cat tls.yml")]
    return case


Placement = Callable[[SecretFormat, str, str], Case]
PLACEMENTS: dict[str, Placement] = {
    "typed": typed,
    "typed-wrapped": typed_wrapped,
    "split": split,
    "env-file": env_file,
    "json": json_file,
    "yaml": yaml_file,
    "url": url,
    "cli": cli,
    "bearer": bearer,
    "bare": bare,
    "key-cat": key_cat,
    "key-split": key_split,
    "key-scrolled": key_scrolled,
    "key-json": key_json,
    "key-yaml": key_yaml,
}
KEY_PLACEMENTS = ("key-cat", "key-split", "key-scrolled", "key-json", "key-yaml")


def placements_of(fmt: SecretFormat) -> list[str]:
    """The placements that fit a format."""
    if fmt.multiline:
        return list(KEY_PLACEMENTS)
    names = ["typed", "typed-wrapped", "split", "env-file", "json", "yaml", "cli"]
    if fmt.in_url:
        names.append("url")
    if fmt.header:
        names.append("bearer")
    if fmt.identifying:
        names.append("bare")
    return names


# --------------------------------------------------------------------------- context secrets
# Secrets whose shape says nothing (issue 24): what makes them secrets is the format of the
# file they are in, or the command that printed them because it was asked for one. Each is
# planted in a real terminal (the command line on the screen, the screen cleared by the same
# command line, the output scrolled away by the next step), in a swe ``run_shell_command`` and
# ``read_file`` output, and in an mcp filesystem ``read_text_file`` result (the mcp servers
# have no shell: command families are not planted there), the last two rendered by the
# domains' own renderers from the raw records their drivers write.


@dataclass(frozen=True)
class ContextSecret:
    """One planted context secret: the files the case starts with, what is run, the parts."""

    files: dict[str, str]  # relative to the case folder; `bin/…` are the fake tools
    command: str  # typed in the case folder
    output: str  # what the command prints
    parts: list[str]
    path: str | None = None  # the file read, for read_file / read_text_file placements


def _tool(name: str, body: str) -> dict[str, str]:
    """A fake command-line tool printing ``body`` (the real ones need a network account)."""
    return {f"bin/{name}": f"#!/bin/sh\n{body}"}


def _printing(tool: str, command: str, value: str, newline: bool = True) -> ContextSecret:
    fmt = "%s\\n" if newline else "%s"
    return ContextSecret(
        _tool(tool, f"printf '{fmt}' {shlex.quote(value)}"),
        command,
        value + ("\n" if newline else ""),
        [value],
    )


def _netrc_line(rng: random.Random) -> ContextSecret:
    first = _chars(rng, 14)
    second = f"{_chars(rng, 6, string.ascii_lowercase)}-{rng.randint(10, 99)}"
    text = (
        f"machine api.heroku.com login dana@ops.example password {first}\n"
        f"machine ftp.corp.example login deploy password {second}\n"
    )
    return ContextSecret({".netrc": text}, "cat .netrc", text, [first, second], ".netrc")


def _netrc_entries(rng: random.Random) -> ContextSecret:
    password = f"{_chars(rng, 5, string.ascii_lowercase)}{rng.randint(1000, 9999)}"
    text = f"machine git.corp.example\n  login deploy\n  password {password}\n"
    return ContextSecret({".netrc": text}, "cat .netrc", text, [password], ".netrc")


def _pgpass(rng: random.Random) -> ContextSecret:
    first = _chars(rng, 16)
    second = f"{_chars(rng, 8, string.ascii_lowercase)}{rng.randint(1, 99)}"
    text = f"db.internal:5432:shop:app:{first}\n*:*:*:readonly:{second}\n"
    return ContextSecret({".pgpass": text}, "cat .pgpass", text, [first, second], ".pgpass")


def _git_credentials(rng: random.Random) -> ContextSecret:
    token = _chars(rng, 16, string.ascii_lowercase + string.digits)
    password = f"{_chars(rng, 9, string.ascii_lowercase)}{rng.randint(10, 99)}"
    text = f"https://{token}@github.com\nhttps://deploy:{password}@git.corp.example\n"
    name = ".git-credentials"
    return ContextSecret({name: text}, f"cat {name}", text, [token, password], name)


def _ssh_key(rng: random.Random) -> ContextSecret:
    key = _pem("OPENSSH PRIVATE KEY", 300, line=70)(rng)
    name = ".ssh/id_ed25519"
    return ContextSecret({name: key}, f"cat {name}", key + "\n", _key_body(key), name)


CONTEXT_FAMILIES: dict[str, Callable[[random.Random], ContextSecret]] = {
    "netrc-line": _netrc_line,
    "netrc-entries": _netrc_entries,
    "pgpass": _pgpass,
    "git-credentials": _git_credentials,
    "ssh-key": _ssh_key,
    "gh-auth-token": lambda r: _printing("gh", "gh auth token", "gho_" + _chars(r, 36)),
    "heroku-auth-token": lambda r: _printing(
        "heroku", "heroku auth:token", str(uuid.UUID(bytes=r.randbytes(16), version=4))
    ),
    "aws-configure-get": lambda r: _printing(
        "aws", "aws configure get aws_secret_access_key", _chars(r, 40, ALNUM + "/+")
    ),
    "vault-print-token": lambda r: _printing("vault", "vault print token", "s." + _chars(r, 24)),
    "kubectl-jsonpath": lambda r: _printing(
        "kubectl",
        "kubectl get secret db -o jsonpath='{.data.password}'",
        base64.b64encode(f"{_chars(r, 10)}!{r.randint(10, 99)}".encode()).decode(),
        newline=False,  # jsonpath prints no newline: the prompt follows the value
    ),
    "kubectl-decoded": lambda r: _kubectl_decoded(r),
    "gcloud-access-token": lambda r: _printing(
        "gcloud", "gcloud auth print-access-token", "ya29." + _chars(r, 120, URLSAFE)
    ),
    "pass-show": lambda r: _pass_show(r),
}
"""Context families by name: how to plant one secret of each."""


def _kubectl_decoded(rng: random.Random) -> ContextSecret:
    password = f"{_chars(rng, 6, string.ascii_lowercase)}{rng.randint(100, 999)}"
    encoded = base64.b64encode(password.encode()).decode()
    command = "kubectl get secret db -o jsonpath='{.data.password}' | base64 -d"
    return ContextSecret(_tool("kubectl", f"printf %s {encoded}"), command, password, [password])


def _pass_show(rng: random.Random) -> ContextSecret:
    password = f"{_chars(rng, 5, string.ascii_lowercase)} {_chars(rng, 5, string.ascii_lowercase)}"
    body = f"{password}\nlogin: app\nurl: db.internal"
    files = _tool("pass", f"printf '%s\\n' {shlex.quote(body)}")
    return ContextSecret(files, "pass show db/prod", body + "\n", [password])


CONTEXT_TERMINAL_PLACEMENTS = ("ctx-screen", "ctx-cleared", "ctx-scrolled")
CONTEXT_TOOL_PLACEMENTS = ("swe-shell", "swe-read", "mcp-read")


def context_case(family: str, secret: ContextSecret, placement: str) -> Case:
    """A terminal case of a context secret (the fake tools put first on the PATH)."""
    case = Case(family, placement, secret.parts[0], secret.parts, dict(secret.files))
    tools = any(name.startswith("bin/") for name in secret.files)
    steps = [command("export PATH=$PWD/bin:$PATH")] if tools else []
    if placement == "ctx-screen":
        steps += [command(secret.command), command("true")]
    elif placement == "ctx-cleared":
        steps += [command(f"clear; {secret.command}")]
    else:
        case.files["list.txt"] = "\n".join(f"item {i}" for i in range(HEIGHT + 5))
        steps += [command(secret.command), command("cat list.txt")]
    case.steps = steps
    return case


def _tool_transition(domain: str, step: int, episode: str, before: Observation,
                     action: Action, after: Observation) -> dict[str, Any]:  # fmt: skip
    transition = Transition(
        id=transition_id(episode, step),
        episode_id=episode,
        step=step,
        domain=domain,
        env=EnvironmentRef(name=f"{domain}/planted", version="planted", config_hash="planted"),
        task="planted secrets",
        policy=PolicyRef(kind="replay", name="planted", version="1"),
        observation=before,
        action=action,
        next_observation=after,
        timing=Timing(started_at=datetime(2026, 11, 27, tzinfo=UTC), step_latency_s=0.01),
        source=Source(origin="collected", collector_version="planted", licence="cc0-1.0"),
    )
    return to_row(transition)


def tool_case(family: str, secret: ContextSecret, placement: str) -> tuple[Case, list[dict]]:
    """A swe or mcp case: the call that shows the secret, then a call after it (whose
    observation is the secret's output again), rendered by the domain's renderer."""
    from worldtrace.collectors.mcp.render import McpRenderer
    from worldtrace.collectors.swe.render import SweRenderer
    from worldtrace.collectors.swe.tools import tool_call
    from worldtrace.collectors.tool_calls import tool_call as mcp_call

    case = Case(family, placement, secret.parts[0], secret.parts)
    home = "/root/"
    if placement == "swe-shell":
        domain = "swe"
        shown = secret.command.replace(" .", f" {home}.")
        action = tool_call("run_shell_command", command=shown)
        raw = {"tool": "run_shell_command", "output": secret.output, "exit_code": 0}
        after = SweRenderer().observation(raw)
        follow = tool_call("run_shell_command", command="ls")
    elif placement == "swe-read":
        domain = "swe"
        lines = secret.output.rstrip("\n").split("\n")
        numbered = "".join(f"{n:6}\t{line}\n" for n, line in enumerate(lines, 1))
        action = tool_call("read_file", path=home + str(secret.path))
        after = SweRenderer().observation({"tool": "read_file", "output": numbered})
        follow = tool_call("list_dir", path=".")
    else:
        domain = "mcp"
        content = secret.output
        action = mcp_call("read_text_file", {"path": home + str(secret.path)})
        raw = {
            "tool": "read_text_file",
            "server": "filesystem",
            "result": {
                "content": [{"type": "text", "text": content}],
                "structuredContent": {"content": content},
            },
        }
        after = McpRenderer().observation(raw)
        follow = mcp_call("list_directory", {"path": home})
    episode = f"planted-{family}-{placement}"
    start = Observation(format="tool-result", text="[exit code: 0]\n")
    end = Observation(format="tool-result", text="[exit code: 0]\n")
    rows = [
        _tool_transition(domain, 0, episode, start, action, after),
        _tool_transition(domain, 1, episode, after, follow, end),
    ]
    return case, rows


def context_plans(rng: random.Random, families: Sequence[str]) -> tuple[list, list]:
    """The terminal plans (one fake format per family, for :func:`record_format`) and the
    tool cases with their rows."""
    terminal, tools = [], []
    for family in families:
        secret = CONTEXT_FAMILIES[family](rng)
        fmt = SecretFormat(family, lambda _r: "", "CONTEXT")
        terminal.append(
            (fmt, [context_case(family, secret, name) for name in CONTEXT_TERMINAL_PLACEMENTS])
        )
        for name in CONTEXT_TOOL_PLACEMENTS:
            if name != "swe-shell" and secret.path is None:
                continue  # a command's output: no file to read, no shell in mcp
            tools.append(tool_case(family, secret, name))
    return terminal, tools


# --------------------------------------------------------------------------- recording


def record_format(
    fmt: SecretFormat, cases: list[Case], work: Path, image: str
) -> list[tuple[Case, list[dict[str, Any]]]]:
    """Play every case of one format in one fresh sandbox; return each case's rows.

    The cases run one after the other, each after a ``clear``; the recorded episode is then
    cut into one episode per case (the ``clear`` steps dropped), with its own id.
    """
    files: dict[str, str] = {}
    actions: list[Action] = []
    spans: list[tuple[int, int]] = []
    for index, case in enumerate(cases):
        folder = f"{WORKDIR}/c{index:02d}"
        for name, text in case.files.items():
            files[f"{folder}/{name}"] = text
        actions.append(command(f"clear; cd {folder}"))
        start = len(actions)
        actions += case.steps
        spans.append((start, len(actions)))
    setup = tuple(  # the fake tools of context cases are executable
        write_file(path, text, "755" if "/bin/" in path else None) for path, text in files.items()
    )
    setup += tuple(f"mkdir -p {WORKDIR}/c{i:02d}" for i in range(len(cases)))
    task = TerminalTask(name=f"plant-{fmt.name}", instruction="planted secrets", setup=setup)
    env = TerminalEnvironment(TerminalConfig(image=image, width=WIDTH, height=HEIGHT))
    run = RunRecorder(work / fmt.name, {"domain": "terminal", "format": fmt.name})
    writer = run.begin(fmt.name)
    limits = EpisodeLimits(max_steps=len(actions) + 1, step_timeout_s=STEP_TIMEOUT_S)
    try:
        result = run_episode(env, ReplayPolicy(actions), writer, EpisodePlan(0, 0, task), limits)
    finally:
        env.close()
    if result.status != "completed" or result.steps != len(actions):
        raise RuntimeError(f"recording {fmt.name} ended {result.status} after {result.steps}")
    raw = read_raw_episode(run.layout.sealed / f"{fmt.name}.jsonl")
    _, transitions = episode_records(raw, "terminal", TerminalRenderer(), fmt.name, "cc0-1.0")
    out = []
    for case, (start, end) in zip(cases, spans, strict=True):
        episode_id = f"planted-{case.format}-{case.placement}"
        rows = []
        for step, transition in enumerate(transitions[start:end]):
            moved = transition.model_copy(
                update={
                    "episode_id": episode_id,
                    "step": step,
                    "id": transition_id(episode_id, step),
                }
            )
            rows.append(to_row(Transition.model_validate(moved.model_dump())))
        out.append((case, rows))
    return out


def first_prompt(image: str) -> str:
    """The prompt line the sandbox shows (with its trailing space) in the work folder."""
    env = TerminalEnvironment(TerminalConfig(image=image, width=WIDTH, height=HEIGHT))
    try:
        env.reset(0, None)
        screen = env.step(command(f"mkdir -p {WORKDIR}/c00 && cd {WORKDIR}/c00"), 20).observation
    finally:
        env.close()
    last = [line for line in plain_screen(screen["screen"]).split("\n") if line.strip()][-1]
    return last + " "


# --------------------------------------------------------------------------- measuring


def scrub_rows(rows: list[dict[str, Any]], settings: ScrubSettings) -> list[dict[str, Any]]:
    """Run the real scrub step over rows, in order (one datatrove document per row)."""
    docs = [Document(text="", id=row["id"], metadata=copy.deepcopy(row)) for row in rows]
    return [doc.metadata for doc in ScrubStep(settings).run(iter(docs))]


def strings(value: Any) -> Iterator[str]:
    """Every string in a row, JSON columns decoded too."""
    if isinstance(value, str):
        yield value
        if value[:1] in "{[":
            try:
                decoded = json.loads(value)
            except ValueError:
                return
            yield from strings(decoded)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def readable(rows: list[dict[str, Any]]) -> list[str]:
    """Every string of the rows, and each observation as a reader could put it back together:
    its scrollback and screen with the line breaks taken out (undoing the pane's wrapping)."""
    texts = [text for text in strings(rows) if len(text) >= LEAK_RUN]
    for row in rows:
        for name in ("observation", "next_observation"):
            scrollback = json.loads(row[name]["meta"] or "{}").get("new_scrollback") or ""
            texts.append(f"{scrollback}{row[name]['text']}".replace("\n", ""))
    return texts


def surviving(rows: list[dict[str, Any]], parts: list[str]) -> list[str]:
    """Runs of :data:`LEAK_RUN` characters of the secret's parts found in the rows."""
    texts = readable(rows)
    found = []
    for part in parts:
        for i in range(len(part) - LEAK_RUN + 1):
            piece = part[i : i + LEAK_RUN]
            if any(piece in text for text in texts):
                found.append(piece)
    return found


def layout(case: Case, rows: list[dict[str, Any]]) -> dict[str, bool]:
    """Whether the planting did what was meant: a secret wrapped over two screen lines, a
    secret (or a key) split between an observation's new_scrollback and its screen."""
    wrapped = split = False
    for row in rows:
        for name in ("observation", "next_observation"):
            scrollback = json.loads(row[name]["meta"] or "{}").get("new_scrollback") or ""
            screen = row[name]["text"]
            for text in (scrollback, screen):
                wrapped |= any(p not in text and p in text.replace("\n", "") for p in case.parts)
            if not scrollback:
                continue
            joined = f"{scrollback}{screen}".replace("\n", "")
            pieces = [p for p in case.parts if p not in scrollback and p not in screen]
            split |= any(p in joined for p in pieces)
            if len(case.parts) > 1:  # a key: body lines on both sides
                split |= any(p in scrollback for p in case.parts) and any(
                    p in screen for p in case.parts
                )
    return {"wrapped": wrapped, "split": split}


def measure_recall(
    image: str,
    workers: int,
    seed: int,
    work: Path,
    formats: Sequence[SecretFormat] = FORMATS,
    families: Sequence[str] = tuple(CONTEXT_FAMILIES),
    rows_out: Path | None = None,
) -> dict[str, Any]:
    """Plant every format in every placement that fits it, and every context family in its
    placements; return per-case results (``rows_out``: the recorded rows of every case, one
    JSON line a case, to scrub again with another scrubber)."""
    rng = random.Random(seed)
    prompt = first_prompt(image)
    plans = []
    for fmt in formats:
        value = fmt.make(rng)
        cases = [PLACEMENTS[name](fmt, value, prompt) for name in placements_of(fmt)]
        plans.append((fmt, cases))
    context_terminal, tool_cases = context_plans(random.Random(seed + 1), families)
    plans += context_terminal
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        recorded = list(pool.map(lambda plan: record_format(plan[0], plan[1], work, image), plans))
    record_s = time.monotonic() - started
    recorded.append(tool_cases)
    if rows_out is not None:
        with open(rows_out, "w", encoding="utf-8") as handle:
            for fmt_cases in recorded:
                for case, rows in fmt_cases:
                    entry = {"format": case.format, "placement": case.placement}
                    record = {**entry, "parts": case.parts, "rows": rows}
                    handle.write(json.dumps(record, default=str) + "\n")
    results = []
    scrub_s = 0.0
    for fmt_cases in recorded:
        for case, rows in fmt_cases:
            planted = bool(surviving(rows, case.parts))
            started = time.perf_counter()
            scrubbed = scrub_rows(rows, ScrubSettings())
            scrub_s += time.perf_counter() - started
            leaked = surviving(scrubbed, case.parts)
            results.append(
                {
                    "format": case.format,
                    "placement": case.placement,
                    "context": case.format in CONTEXT_FAMILIES,
                    "rows": len(rows),
                    "planted": planted,
                    **layout(case, rows),
                    "leaked": bool(leaked),
                    "leaked_runs": leaked[:5],
                }
            )
    log(f"recorded {len(results)} planted cases in {record_s:.0f} s")
    return {"cases": results, "record_s": record_s, "scrub_s": scrub_s}


def collect(domain: str, out: Path, extra: list[str]) -> Path:
    """Run ``worldtrace collect`` into ``out``; return the run folder."""
    cli = Path(sys.executable).with_name("worldtrace")
    args = [str(cli), "collect", domain, "--out", str(out), *extra]
    log(f"collecting: {' '.join(args[1:])}")
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    runs = [path for path in out.iterdir() if (path / "transitions").is_dir()]
    if len(runs) != 1:
        raise RuntimeError(f"expected one run folder in {out}, found {runs}")
    return runs[0]


def read_rows(run: Path) -> list[dict[str, Any]]:
    """The transitions of a run or corpus folder, file by file, in stored order."""
    files = sorted((run / "transitions").glob("*/*.parquet"))
    if not files:
        raise FileNotFoundError(f"no transitions under {run}")
    return [row for path in files for row in pq.read_table(path).to_pylist()]


def replaced(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """The strings a scrubbed row lost, found by diffing each changed string."""
    lost: list[str] = []
    for old, new in zip(strings(before), strings(after), strict=False):
        if old == new:
            continue
        matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
        for tag, i1, i2, _, _ in matcher.get_opcodes():
            if tag in ("replace", "delete"):
                lost.append(old[i1:i2])
    return lost


def measure_false_positives(rows: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """Rows changed by the scrubber on ordinary transitions (secrets only, and all on)."""
    secrets_only = ScrubSettings(emails=False, ips=False)
    started = time.perf_counter()
    scrubbed = scrub_rows(rows, secrets_only)
    elapsed = time.perf_counter() - started
    changed = [(b, a) for b, a in zip(rows, scrubbed, strict=True) if b != a]
    known, unknown, examples = 0, 0, []
    for before, after in changed:
        lost = sorted({text for text in replaced(before, after) if text})
        if lost and all(text in KNOWN_CORPUS_SECRETS for text in lost):
            known += 1
        else:
            unknown += 1
            examples.append({"id": before["id"], "replaced": lost[:5]})
    everything = scrub_rows(rows, ScrubSettings())
    pii_changed = sum(1 for b, a in zip(rows, everything, strict=True) if b != a)
    return {
        "corpus": name,
        "rows": len(rows),
        "episodes": len({row["episode_id"] for row in rows}),
        "rows_changed": len(changed),
        "rows_changed_known_secrets": known,
        "false_positive_rows": unknown,
        "rows_changed_rate": len(changed) / len(rows),
        "false_positive_rate": unknown / len(rows),
        "false_positive_examples": examples[:10],
        "rows_changed_with_email_and_ip": pii_changed,
        "scrub_ms_per_row": elapsed / len(rows) * 1e3,
    }


# --------------------------------------------------------------------------- precision set

PRECISION_FILE = Path(__file__).resolve().parent / "data" / "scrub_precision.jsonl.gz"
"""Real observation texts of every domain, none holding a secret or personal data."""
NEAR_MISS_FILE = Path(__file__).resolve().parent / "data" / "scrub_near_misses.json"
"""Near-misses of context secrets (issue 24), read with the precision set."""
REMOVED_FILE = Path(__file__).resolve().parent / "data" / "scrub_precision_removed.json"
"""The drawn rows left out of the precision set by hand, each with what it holds and why."""
TARGET_PRECISION_FP_RATE = 0.005
DOMAINS = ("terminal", "swe", "mcp", "search", "web", "os")
PER_DOMAIN = 500
"""Rows drawn per domain when the set is built (fewer where a source has fewer)."""
MAX_TEXT_CHARS = 6000
"""Longer observations are cut (at a line end) to keep the set small."""
CONTEXT_CHARS = 40
"""Characters shown on each side of a replaced span."""


def precision_rows(
    path: Path = PRECISION_FILE, near_misses: Path | None = NEAR_MISS_FILE
) -> list[dict[str, Any]]:
    """The rows of the precision set: ``id``, ``domain``, ``format``, ``columns``, ``text``,
    and the near-misses of context secrets (with the ``action`` that printed them, if any)."""
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    if near_misses is not None:
        rows += json.loads(near_misses.read_text(encoding="utf-8"))["rows"]
    return rows


def scrub_observation(scrubber: Scrubber, row: dict[str, Any]) -> str:
    """The row's text as the scrub step leaves it (a terminal screen joined at its width),
    with the row's action as its context when it has one."""
    width = row.get("columns") if row.get("format") == TERMINAL_FORMAT else None
    if row.get("action"):
        return scrubber.observation(
            row["text"], row["format"], width or None, row["action"], row.get("domain")
        )
    return scrubber.text(row["text"], width=width or None)


def replaced_spans(scrubber: Scrubber, row: dict[str, Any]) -> list[dict[str, str]]:
    """What the scrubber replaces in a row: kind, value and the text around it."""
    if row.get("action"):  # the action's context: what changed, from a diff
        after = scrub_observation(scrubber, row)
        return [
            {"kind": "context", "value": value, "context": value}
            for value in replaced({"text": row["text"]}, {"text": after})
        ]
    width = row.get("columns") if row.get("format") == TERMINAL_FORMAT else None
    view = LogicalText(row["text"], width or None)
    text = view.logical
    return [
        {
            "kind": kind,
            "value": text[start:end],
            "context": text[max(0, start - CONTEXT_CHARS) : start]
            + "⟦"
            + text[start:end]
            + "⟧"
            + text[end : end + CONTEXT_CHARS],
        }
        for kind, start, end in scrubber.finder.find(text)
    ]


def measure_precision(
    rows: list[dict[str, Any]], settings: ScrubSettings | None = None
) -> dict[str, Any]:
    """Rows changed by the scrubber on the precision set (every row a false positive), per
    domain, with the replaced spans of each."""
    settings = settings or ScrubSettings()
    scrubber = Scrubber(settings)
    by_domain: dict[str, dict[str, Any]] = {}
    started = time.perf_counter()
    for row in rows:
        entry = by_domain.setdefault(
            row["domain"], {"rows": 0, "false_positive_rows": 0, "kinds": Counter(), "rows_fp": []}
        )
        entry["rows"] += 1
        if scrub_observation(scrubber, row) != row["text"]:
            spans = replaced_spans(scrubber, row)
            entry["false_positive_rows"] += 1
            entry["kinds"].update(span["kind"] for span in spans)
            entry["rows_fp"].append({"id": row["id"], "spans": spans})
    elapsed = time.perf_counter() - started
    domains = {}
    for domain in sorted(by_domain, key=lambda d: (*DOMAINS, d).index(d)):
        entry = by_domain[domain]
        domains[domain] = {
            "rows": entry["rows"],
            "false_positive_rows": entry["false_positive_rows"],
            "false_positive_rate": entry["false_positive_rows"] / entry["rows"],
            "kinds": dict(entry["kinds"]),
            "false_positives": entry["rows_fp"],
        }
    total = sum(d["rows"] for d in domains.values())
    fps = sum(d["false_positive_rows"] for d in domains.values())
    return {
        "rows": total,
        "false_positive_rows": fps,
        "false_positive_rate": fps / total if total else 0.0,
        "domains": domains,
        "scrub_ms_per_row": elapsed / max(total, 1) * 1e3,
        "settings": settings.model_dump(),
    }


# Building the set. From collected runs (``--from-runs``): the distinct observation texts of
# each domain's transitions, drawn evenly over episodes. Without runs (``--from-machine``):
# real text of the machine the benchmark runs on, shaped as each domain renders it (see
# :func:`machine_rows`). Either way rows that hold real personal data or a secret are removed
# (:func:`holds_personal_data`), after reading what that rule removes by hand.


def _cut(text: str, limit: int = MAX_TEXT_CHARS) -> str:
    if len(text) <= limit:
        return text
    end = text.rfind("\n", 0, limit)
    return text[: end if end > limit // 2 else limit]


def _row(domain: str, source: str, fmt: str, text: str, columns: int | None = None) -> dict:
    return {
        "id": f"{domain}:{hashlib.sha256(text.encode()).hexdigest()[:12]}",
        "domain": domain,
        "source": source,
        "format": fmt,
        "columns": columns,
        "text": _cut(text),
    }


def rows_from_runs(paths: Sequence[Path], per_domain: int, seed: int) -> list[dict[str, Any]]:
    """Distinct observation texts of the runs' transitions, ``per_domain`` of each domain,
    drawn round-robin over the episodes (in a seeded order)."""
    rng = random.Random(seed)
    by_episode: dict[str, dict[str, list[dict[str, Any]]]] = {}
    seen: set[str] = set()
    files = sorted(f for path in paths for f in Path(path).glob("**/transitions/*/*.parquet"))
    for file in files:
        columns = ["domain", "episode_id", "step", "observation", "next_observation"]
        for record in pq.read_table(file, columns=columns).to_pylist():
            observations = [record["next_observation"]]
            if record["step"] == 0:
                observations.insert(0, record["observation"])
            for observation in observations:
                text = (observation or {}).get("text") or ""
                if not text.strip() or text in seen:
                    continue
                seen.add(text)
                meta = json.loads(observation.get("meta") or "{}")
                width = meta.get("columns") if isinstance(meta, dict) else None
                source = f"{file.parent.parent.parent.name}/{record['episode_id']}:{record['step']}"
                row = _row(record["domain"], source, observation["format"], text, width)
                domain = by_episode.setdefault(record["domain"], {})
                domain.setdefault(record["episode_id"], []).append(row)
    rows = []
    for _domain, episodes in sorted(by_episode.items()):
        queues = [episodes[key] for key in sorted(episodes)]
        rng.shuffle(queues)
        for queue in queues:
            rng.shuffle(queue)
        taken: list[dict[str, Any]] = []
        while len(taken) < per_domain and any(queues):
            for queue in queues:
                if queue and len(taken) < per_domain:
                    taken.append(queue.pop())
        rows += taken
    return rows


def _run(command: str, cwd: Path | None = None, timeout: float = 60) -> str:
    """A command's output on this machine (stdout and stderr), or nothing if it fails."""
    environment = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "MANWIDTH": "80"}
    try:
        done = subprocess.run(
            ["bash", "-c", command],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            cwd=cwd,
            env={**environment, "HOME": "/root", "TERM": "dumb"},
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return (done.stdout + done.stderr).replace("\t", "    ")


def _screens(command: str, output: str, rng: random.Random, most: int) -> list[str]:
    """Terminal screens (160 x 40, wrapped like tmux) showing parts of a command's output."""
    prompt = "user@sandbox:~/work$ "
    physical: list[str] = []
    for line in [prompt + command, *output.rstrip("\n").split("\n"), prompt]:
        line = line.rstrip()
        physical += [line[i : i + WIDTH] for i in range(0, len(line), WIDTH)] or [""]
    if len(physical) <= HEIGHT:
        return [plain_screen("\n".join(physical))]
    starts = {0, len(physical) - HEIGHT}
    starts |= {rng.randrange(len(physical) - HEIGHT) for _ in range(most)}
    return [plain_screen("\n".join(physical[s : s + HEIGHT])) for s in sorted(starts)][:most]


TERMINAL_COMMANDS = (
    "dpkg -l",
    "apt list --installed",
    "apt-cache policy libc6 openssl git python3 tmux libsemanage-common",
    "/work/main/.venv/bin/pip list",
    "/work/main/.venv/bin/pip list --outdated --format=columns 2>/dev/null | head -0; "
    "/work/main/.venv/bin/pip freeze",
    "git log -n 80 --stat",
    "git log -n 300 --oneline --decorate",
    "git log -n 60 --format=fuller",
    "git show --stat HEAD~5",
    "git diff HEAD~3 -- README.md | head -400",
    "ls -la /etc",
    "ls -la /usr/share/doc | head -300",
    "ls -l /usr/bin | head -400",
    "find /usr/share/zoneinfo -maxdepth 2 | head -300",
    "sha256sum /usr/bin/[a-f]* 2>/dev/null | head -200",
    "md5sum /etc/*.conf 2>/dev/null",
    "cat /etc/services",
    "cat /etc/protocols",
    "python3 --version; git --version; tmux -V; openssl version; ssh -V",
    "cat pyproject.toml",
    "ls -la; ls -la collectors schemas curation",
    "grep -rn 'import' --include=*.py curation | head -200",
    "grep -rhoE '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}.{0,60}' "
    "/usr/share/mime /usr/share/doc 2>/dev/null | head -200",
)
SANDBOX_COMMANDS = (
    "cat /proc/self/cgroup",
    "cat /proc/self/mountinfo",
    "cat /proc/self/status",
    "cat /proc/self/maps",
    "cat /proc/cpuinfo",
    "cat /proc/meminfo",
    "cat /proc/1/cgroup; cat /proc/self/cgroup; cat /proc/sys/kernel/random/boot_id",
    "uname -a; cat /etc/os-release; cat /etc/debian_version",
    "df -h; mount",
    "ls -la /dev",
    "ps aux",
)
"""Run in a terminal sandbox (its image, no network): what the environment shows of itself."""
TERMINAL_MAN_PAGES = (
    "ls", "tar", "ssh", "git-log", "dpkg", "curl", "ping", "ip", "grep", "find", "ps", "mount",
    "apt-get", "bash", "tmux", "python3", "gzip", "rsync", "sshd_config", "resolv.conf", "hosts",
    "crontab", "chmod", "systemd.unit", "sudoers", "ssh-keygen", "openssl", "wget", "netstat",
)  # fmt: skip


_MAINTAINER = re.compile(r"(?:Original-)?Maintainer:|Uploaders:")
_CLOUD_SDK = re.compile(r"gcloud|gsutil|bq[._]|docker-credential-gcloud|git-credential-gcloud")


def machine_rows(
    per_domain: int, seed: int, repo: Path, image: str = "worldtrace/terminal:latest"
) -> list[dict[str, Any]]:
    """Real text of this machine, shaped as each domain's observations are.

    terminal: screens (160 x 40, wrapped) of ``dpkg -l``, ``apt``, ``pip``, ``git log`` of the
    repository, listings, checksums, man pages, and, run in a terminal sandbox (``image``),
    ``/proc/self/cgroup``, ``mountinfo``, ``maps``, ``status``, ``df``, ``mount``, ``ps``;
    swe: ``read_file`` windows (numbered like ``cat -n``) of the installed Python
    packages' sources, ``grep -rn`` and ``git log`` outputs with their exit code; mcp: the
    filesystem server's listings and file reads of ``/usr/share/doc`` and ``/etc``, the git
    server's ``git_log`` of the repository, the time server's JSON; search: result lists
    (``[n] url / Title / Snippet / Date``) and pages (markdown) of man pages and package
    descriptions. web and os need a browser and a desktop: none are made here.
    """
    rng = random.Random(seed)
    out: dict[str, list[dict[str, Any]]] = {d: [] for d in DOMAINS}

    # terminal
    commands = list(TERMINAL_COMMANDS) + [f"man -P cat {page}" for page in TERMINAL_MAN_PAGES]
    commands += SANDBOX_COMMANDS
    for command_line in commands:
        if command_line in SANDBOX_COMMANDS:
            # the sandbox's own /proc and mounts, not this machine's
            sandbox = f"docker run --rm --network none {shlex.quote(image)} sh -c "
            output = _run(sandbox + shlex.quote(command_line))
        else:
            output = _run(command_line, cwd=repo)
        for screen in _screens(command_line, output, rng, most=12):
            out["terminal"].append(_row("terminal", f"machine:{command_line}", TERMINAL_FORMAT,
                                        screen, WIDTH))  # fmt: skip

    # swe
    site = Path(sys.prefix) / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    sources = sorted((site / "site-packages").glob("*/**/*.py"))
    rng.shuffle(sources)
    for path in sources[: per_domain * 2]:
        try:
            lines = path.read_text(encoding="utf-8").split("\n")
        except (OSError, UnicodeDecodeError):
            continue
        if len(lines) < 5:
            continue
        start = rng.randrange(max(1, len(lines) - 60))
        shown = lines[start : start + rng.randint(30, 120)]
        text = "\n".join(f"{start + i + 1:6d}\t{line}" for i, line in enumerate(shown))
        out["swe"].append(_row("swe", f"machine:read_file {path.relative_to(site)}",
                               "tool-result", text.replace("\t", "    ")))  # fmt: skip
    packages = sorted(p.name for p in (site / "site-packages").iterdir() if p.is_dir())
    for name in rng.sample(packages, min(len(packages), per_domain // 4)):
        folder = site / "site-packages" / name
        pattern = rng.choice(["def ", "import ", "http", "version", "TODO", "raise ", "self."])
        output = _run(f"grep -rn --include=*.py {shlex.quote(pattern)} . | head -60", cwd=folder)
        if output.strip():
            out["swe"].append(_row("swe", f"machine:grep {name}", "tool-result",
                                   output + "\n[exit code: 0]"))  # fmt: skip
    for skip in range(0, 300, 15):
        output = _run(f"git log -n 15 --skip {skip}", cwd=repo)
        out["swe"].append(
            _row("swe", "machine:git log", "tool-result", output + "\n[exit code: 0]")
        )

    # mcp
    folders = sorted(p for p in Path("/usr/share/doc").iterdir() if p.is_dir())
    for folder in rng.sample(folders, min(len(folders), per_domain)):
        entries = sorted(folder.iterdir())
        listing = "\n".join(f"[{'DIR' if e.is_dir() else 'FILE'}] {e.name}" for e in entries)
        out["mcp"].append(_row("mcp", f"machine:list_directory {folder}", "tool-result", listing))
        readable = [e for e in entries if e.is_file() and e.suffix in ("", ".md", ".txt")]
        readable = [e for e in readable if e.name != "copyright"]
        if readable:
            path = rng.choice(readable)
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            out["mcp"].append(_row("mcp", f"machine:read_text_file {path}", "tool-result", text))
    configs = sorted(p for p in Path("/etc").glob("*.conf") if p.is_file())
    for path in configs:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        out["mcp"].append(_row("mcp", f"machine:read_text_file {path}", "tool-result", text))
    log_format = "Commit: %x27%H%x27%nAuthor: %an <%ae>%nDate: %ad%nMessage: %B"
    for skip in range(0, 300, 10):
        output = _run(f"git log -n 10 --skip {skip} --format='{log_format}'", cwd=repo)
        out["mcp"].append(_row("mcp", "machine:git_log", "tool-result",
                               "Commit history:\n" + output))  # fmt: skip
    zones = sorted(str(p.relative_to("/usr/share/zoneinfo")) for p in
                   Path("/usr/share/zoneinfo").glob("[A-Z]*/*") if p.is_file())  # fmt: skip
    for zone in rng.sample(zones, min(len(zones), 40)):
        moment = datetime(2026, 3, 1, 8, 0, tzinfo=UTC) + timedelta(hours=rng.randint(0, 9000))
        local = moment.astimezone(ZoneInfo(zone))
        result = {
            "timezone": zone,
            "datetime": local.isoformat(timespec="seconds"),
            "day_of_week": local.strftime("%A"),
            "is_dst": bool(local.dst()),
        }
        out["mcp"].append(_row("mcp", "machine:get_current_time", "tool-result",
                               json.dumps(result, indent=2)))  # fmt: skip

    # search
    # the manuals of Debian's packages; not the 16,000 pages of google-cloud-cli, which no
    # environment of the project has
    pages = _run("ls /usr/share/man/man1 /usr/share/man/man5 /usr/share/man/man8").split()
    pages = sorted(
        {".".join(p.split(".")[:2]) for p in pages if "." in p and not _CLOUD_SDK.match(p)}
    )
    rendered: list[tuple[str, str, str]] = []
    for page in rng.sample(pages, min(len(pages), per_domain // 2)):
        name, section = page.rsplit(".", 1)
        text = _run(f"man -P cat {shlex.quote(section)} {shlex.quote(name)}", timeout=20)
        if text.strip():
            url = f"http://docs.localhost/man/{section}/{name}.html"
            rendered.append((url, f"{name}({section})", text))
    packages_shown = _run("dpkg-query -W -f='${Package}\\n'").split()
    for name in rng.sample(packages_shown, min(len(packages_shown), per_domain // 3)):
        text = _run(f"apt-cache show --no-all-versions {shlex.quote(name)}")
        # a maintainer's address is a real person's: the page is kept without it
        text = "\n".join(line for line in text.split("\n") if not _MAINTAINER.match(line))
        if text.strip():
            rendered.append((f"http://docs.localhost/packages/{name}.html", name, text))
    for url, _title, text in rendered:
        out["search"].append(_row("search", f"machine:web_extractor {url}", "markdown", text))
    for _ in range(per_domain // 2):
        results = []
        for index, (url, title, text) in enumerate(rng.sample(rendered, 5), 1):
            words = text.split()
            at = rng.randrange(max(1, len(words) - 30))
            snippet = "..." + " ".join(words[at : at + 30]) + "..."
            date = rng.choice(["N/A", "2023-01-13", "2024-06-30", "2022-11-02"])
            results.append(f"[{index}] {url}\nTitle: {title}\nSnippet: {snippet}\nDate: {date}")
        out["search"].append(_row("search", "machine:web_search", "search-results",
                                  "\n\n".join(results)))  # fmt: skip

    rows: list[dict[str, Any]] = []
    for domain in DOMAINS:
        unique = list({row["text"]: row for row in out[domain]}.values())
        rng.shuffle(unique)
        rows += unique[:per_domain]
    return rows


# --------------------------------------------------------------------------- report


def summarize(cases: list[dict[str, Any]]) -> dict[str, Any]:
    """Recall overall, per placement and per format."""
    by_placement: dict[str, Counter[str]] = {}
    by_format: dict[str, Counter[str]] = {}
    for case in cases:
        for table, key in ((by_placement, case["placement"]), (by_format, case["format"])):
            counter = table.setdefault(key, Counter())
            counter["cases"] += 1
            counter["leaked"] += case["leaked"]
            counter["wrapped"] += case["wrapped"]
            counter["split"] += case["split"]
    leaked = sum(case["leaked"] for case in cases)
    context = [case for case in cases if case.get("context")]
    context_leaked = sum(case["leaked"] for case in context)
    return {
        "context_cases": len(context),
        "context_leaked": context_leaked,
        "context_recall": 1 - context_leaked / len(context) if context else None,
        "formats": len(by_format),
        "placements": len(by_placement),
        "cases": len(cases),
        "not_planted": sum(not case["planted"] for case in cases),
        "leaked": leaked,
        "recall": 1 - leaked / len(cases),
        "by_placement": {k: dict(v) for k, v in by_placement.items()},
        "by_format": {k: dict(v) for k, v in by_format.items()},
    }


def print_report(report: dict[str, Any]) -> None:
    from rich.console import Console

    console = Console(width=None if sys.stdout.isatty() else 150)
    if report["recall"] is not None:
        print_recall(console, report["recall"])
    if report["precision"] is not None:
        print_precision(console, report["precision"])
    if report["false_positives"]:
        print_corpora(console, report["false_positives"])


def print_recall(console: Any, recall: dict[str, Any]) -> None:
    from rich.table import Table

    summary = recall["summary"]
    table = Table(title=f"Planted secrets: recall by placement ({summary['formats']} formats)")
    for column in ("placement", "cases", "secret wrapped", "split sb/screen", "leaked", "recall"):
        table.add_column(column, justify="right")
    for placement, counts in summary["by_placement"].items():
        table.add_row(
            placement,
            str(counts["cases"]),
            str(counts["wrapped"]),
            str(counts["split"]),
            str(counts["leaked"]),
            f"{1 - counts['leaked'] / counts['cases']:.1%}",
        )
    table.add_row(
        "all", str(summary["cases"]), "", "", str(summary["leaked"]), f"{summary['recall']:.1%}"
    )
    console.print(table)
    verdict = "met" if summary["recall"] >= TARGET_RECALL else "MISSED"
    console.print(f"recall {summary['recall']:.2%} (target 100%): {verdict}")
    if summary.get("context_cases"):
        console.print(
            f"of which context secrets: {summary['context_cases']} cases, "
            f"{summary['context_leaked']} leaked, recall {summary['context_recall']:.2%}"
        )
    for case in recall["cases"]:
        if case["leaked"]:
            console.print(
                f"  leaked: {case['format']} / {case['placement']}: {case['leaked_runs']}"
            )
    if summary["not_planted"]:
        console.print(f"  {summary['not_planted']} cases did not show their secret (not planted)")


def print_precision(console: Any, precision: dict[str, Any]) -> None:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="Precision set: rows changed by scrubbing (every change a false positive)")
    for column in ("domain", "rows", "false positives", "FP rate", "target", "kinds"):
        table.add_column(column, justify="right")
    target = f"< {TARGET_PRECISION_FP_RATE:.1%}"
    for domain, entry in precision["domains"].items():
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(entry["kinds"].items()))
        verdict = "" if entry["false_positive_rate"] < TARGET_PRECISION_FP_RATE else " MISSED"
        table.add_row(
            domain,
            str(entry["rows"]),
            str(entry["false_positive_rows"]),
            f"{entry['false_positive_rate']:.2%}",
            target + verdict,
            kinds,
        )
    table.add_row(
        "all",
        str(precision["rows"]),
        str(precision["false_positive_rows"]),
        f"{precision['false_positive_rate']:.2%}",
        target,
        f"{precision['scrub_ms_per_row']:.2f} ms/row",
    )
    console.print(table)
    for entry in precision["domains"].values():
        for row in entry["false_positives"]:
            console.print(f"  false positive in {row['id']}:")
            for span in row["spans"]:
                context = span["context"].replace("\n", "⏎")
                console.print(f"    {span['kind']}: {escape(context)}", highlight=False)


def print_corpora(console: Any, false_positives: list[dict[str, Any]]) -> None:
    from rich.table import Table

    fp = Table(title="Collected corpora: rows changed by secret scrubbing")
    columns = ("corpus", "rows", "changed", "known credentials", "false positives", "FP rate")
    for column in (*columns, "changed with e-mail/IP", "ms/row"):
        fp.add_column(column, justify="right")
    for entry in false_positives:
        fp.add_row(
            entry["corpus"],
            str(entry["rows"]),
            str(entry["rows_changed"]),
            str(entry["rows_changed_known_secrets"]),
            str(entry["false_positive_rows"]),
            f"{entry['false_positive_rate']:.2%}",
            str(entry["rows_changed_with_email_and_ip"]),
            f"{entry['scrub_ms_per_row']:.2f}",
        )
    console.print(fp)
    for entry in false_positives:
        for example in entry["false_positive_examples"]:
            console.print(f"  false positive in {example['id']}: {example['replaced']}")


def draw_rows(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Rows of collected runs first (every distinct observation up to ``--per-domain``), then
    this machine's text for the domains still short of it."""
    rows = rows_from_runs(args.from_runs, args.per_domain, args.seed) if args.from_runs else []
    if args.from_machine:
        have = Counter(row["domain"] for row in rows)
        seen = {row["text"] for row in rows}
        repo = Path(__file__).resolve().parents[1]
        for row in machine_rows(args.per_domain, args.seed, repo, args.image):
            if row["text"] not in seen and have[row["domain"]] < args.per_domain:
                rows.append(row)
                have[row["domain"]] += 1
    return rows


def to_review(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What a person must read before a row goes into the set: everything the scrubber would
    replace, and every e-mail- or IP-looking string it would leave."""
    scrubber = Scrubber(ScrubSettings())
    found = []
    for row in rows:
        spans = replaced_spans(scrubber, row)
        text = row["text"]
        looks = [m.group() for p in (EMAIL, IPV4, IPV6) for m in p.finditer(text)]
        looks = [value for value in looks if value not in {s["value"] for s in spans}]
        if spans or looks:
            found.append({"id": row["id"], "replaced": spans, "left": sorted(set(looks))})
    return found


def build_precision_set(
    rows: list[dict[str, Any]], out: Path = PRECISION_FILE, removed: Path = REMOVED_FILE
) -> dict[str, Any]:
    """Write the rows not listed in ``removed`` to ``out``; return counts per domain and what
    the kept rows hold that a person should have read (:func:`to_review`)."""
    drop = {entry["id"] for entry in json.loads(removed.read_text())["rows"]}
    kept = [row for row in rows if row["id"] not in drop]
    out.parent.mkdir(parents=True, exist_ok=True)
    lines = "".join(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n" for row in kept)
    with open(out, "wb") as raw, gzip.GzipFile("", "wb", 9, raw, mtime=0) as handle:
        handle.write(lines.encode())  # no time in the header: the same rows, the same bytes
    counts = Counter(row["domain"] for row in kept)
    removed_counts = Counter(row["domain"] for row in rows if row["id"] in drop)
    log(f"wrote {len(kept)} rows to {out} ({out.stat().st_size / 1e6:.2f} MB): {dict(counts)}")
    log(f"left out as holding personal data or secrets: {dict(removed_counts)}")
    review = to_review(kept)
    for entry in review:
        log(f"  to review: {entry['id']}: replaced {entry['replaced']}, left {entry['left']}")
    return {"kept": dict(counts), "removed": dict(removed_counts), "to_review": review}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--precision-only",
        action="store_true",
        help="only the precision set (no sandbox needed)",
    )
    parser.add_argument("--no-precision", action="store_true", help="skip the precision set")
    parser.add_argument("--precision-set", type=Path, default=PRECISION_FILE)
    parser.add_argument(
        "--build-precision-set",
        action="store_true",
        help="build the precision set (--from-runs or --from-machine) and exit",
    )
    parser.add_argument("--from-runs", type=Path, nargs="*", help="run or corpus folders")
    parser.add_argument("--from-machine", action="store_true", help="this machine's own text")
    parser.add_argument(
        "--candidates",
        type=Path,
        default=RESULTS_DIR / "scrub_precision_candidates.jsonl",
        help="where the drawn rows are written (--build-precision-set) or read from "
        "(--from-candidates), for review",
    )
    parser.add_argument(
        "--from-candidates",
        action="store_true",
        help="build the set from the reviewed --candidates file instead of drawing rows",
    )
    parser.add_argument("--per-domain", type=int, default=PER_DOMAIN)
    parser.add_argument("--corpus", type=Path, help="a terminal run or corpus folder")
    parser.add_argument(
        "--demo-episodes",
        type=int,
        default=0,
        help="demo terminal episodes to collect as a further corpus (default: none)",
    )
    parser.add_argument("--explore-corpus", type=Path, help="a terminal run of exploring")
    parser.add_argument(
        "--explore-episodes",
        type=int,
        default=0,
        help="exploring terminal episodes to collect as a further corpus (default: none)",
    )
    parser.add_argument("--web-corpus", type=Path, help="a web run or corpus folder")
    parser.add_argument(
        "--web-episodes", type=int, default=0, help="web episodes to collect (default: none)"
    )
    parser.add_argument("--workers", type=int, default=2, help="sandboxes recording at once")
    parser.add_argument("--seed", type=int, default=0, help="seed of the planted secrets")
    parser.add_argument("--image", default="worldtrace/terminal:latest")
    parser.add_argument(
        "--formats",
        nargs="*",
        choices=[f.name for f in FORMATS],
        help="only these formats (no names: all of them; none with --families alone)",
    )
    parser.add_argument(
        "--families",
        nargs="*",
        choices=list(CONTEXT_FAMILIES),
        help="only these context families (no names: all of them; none with --formats alone)",
    )
    parser.add_argument(
        "--rows-out", type=Path, help="write every planted case's recorded rows here (JSONL)"
    )
    parser.add_argument("--output", type=Path, default=RESULTS_FILE)
    args = parser.parse_args(argv)

    if args.build_precision_set:
        if args.from_candidates:
            lines = args.candidates.read_text(encoding="utf-8").split("\n")
            rows = [json.loads(line) for line in lines if line.strip()]
        elif args.from_runs or args.from_machine:
            rows = draw_rows(args)
            args.candidates.parent.mkdir(parents=True, exist_ok=True)
            args.candidates.write_text(
                "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
            )
            log(f"drew {len(rows)} rows into {args.candidates}")
        else:
            parser.error("--build-precision-set needs --from-runs, --from-machine or candidates")
        build_precision_set(rows, args.precision_set)
        return 0

    started = time.monotonic()
    loadavg_start = loadavg()
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    recall: dict[str, Any] | None = None
    false_positives: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-scrubbing-", dir=RESULTS_DIR) as tmp:
        work = Path(tmp)
        if not args.precision_only:
            # neither flag: everything; one of them: only that one (with no names: all of it)
            formats, families = list(FORMATS), list(CONTEXT_FAMILIES)
            if args.formats is not None or args.families is not None:
                names = args.formats if args.formats is not None else []
                formats = [f for f in FORMATS if f.name in names or args.formats == []]
                families = args.families or ([] if args.families is None else families)
            recall = measure_recall(
                args.image,
                args.workers,
                args.seed,
                work / "planted",
                formats,
                families,
                args.rows_out,
            )
            recall["summary"] = summarize(recall["cases"])
        workers = ["--workers", str(args.workers)]
        corpus = args.corpus
        if corpus is None and args.demo_episodes:
            corpus = collect(
                "terminal", work / "demo", ["--episodes", str(args.demo_episodes), *workers]
            )
        if corpus is not None:
            false_positives.append(measure_false_positives(read_rows(corpus), "terminal demo"))
        explore = args.explore_corpus
        explore_args = ["--policy", "explore", "--episodes", str(args.explore_episodes)]
        if explore is None and args.explore_episodes:
            explore = collect("terminal", work / "explore", [*explore_args, *workers])
        if explore is not None:
            rows = read_rows(explore)
            false_positives.append(measure_false_positives(rows, "terminal explore"))
        web = args.web_corpus
        if web is None and args.web_episodes:
            web_args = ["--policy", "explore", "--episodes", str(args.web_episodes)]
            web = collect("web", work / "web", web_args)
        if web is not None:
            false_positives.append(measure_false_positives(read_rows(web), "web explore"))
    precision = None
    if not args.no_precision:
        precision = measure_precision(precision_rows(args.precision_set))
        precision["file"] = str(args.precision_set)

    report = {
        "benchmark": "scrubbing",
        "created_at": datetime.now(UTC).isoformat(),
        "machine": machine_info(loadavg_start),
        "leak_run": LEAK_RUN,
        "recall": recall,
        "precision": precision,
        "false_positives": false_positives,
        "targets": {
            "recall": TARGET_RECALL,
            "false_positive_rate": TARGET_FP_RATE,
            "precision_false_positive_rate": TARGET_PRECISION_FP_RATE,
        },
        "elapsed_s": round(time.monotonic() - started, 1),
        "results_file": str(args.output),
    }
    print_report(report)
    write_report(args.output, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
