"""Benchmark of secret scrubbing: recall on planted secrets, false positives on real transitions.

Run ``.venv/bin/python benchmarks/scrubbing.py [--corpus RUN] [--web-corpus RUN | --no-web]``.

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

**False positives.** The demo corpus (``worldtrace collect terminal --episodes 48
--workers 2``, collected into a temporary folder unless ``--corpus`` names a run) and a few
exploring web episodes (``worldtrace collect web --policy explore --episodes 3``, unless
``--web-corpus`` or ``--no-web``), and if asked exploring terminal episodes
(``--explore-episodes N`` or ``--explore-corpus``), are scrubbed with secrets only (no
e-mail or IP scrubbing): the share of rows changed (target < 1%). Replacements of
credentials the task library plants on purpose (:data:`KNOWN_CORPUS_SECRETS`) are counted
apart; the rows changed with e-mail and IP scrubbing on are reported too.

Tables are printed; the report goes to ``benchmarks/results/scrubbing.json``.
"""

from __future__ import annotations

import argparse
import base64
import copy
import difflib
import json
import random
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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from common import loadavg, log, machine_info, write_report
from datatrove.data import Document

from worldtrace.collectors.base import EpisodePlan, ReplayPolicy
from worldtrace.collectors.episode import EpisodeLimits, run_episode
from worldtrace.collectors.recorder import RunRecorder
from worldtrace.collectors.terminal.actions import command
from worldtrace.collectors.terminal.environment import TerminalConfig, TerminalEnvironment
from worldtrace.collectors.terminal.render import TerminalRenderer
from worldtrace.collectors.terminal.screen import plain_screen
from worldtrace.collectors.terminal.tasks.helpers import TerminalTask, write_file
from worldtrace.curation.config import ScrubSettings
from worldtrace.curation.scrub import ScrubStep
from worldtrace.normalizers.base import episode_records
from worldtrace.schemas import Action, Transition, to_row, transition_id
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
    setup = tuple(write_file(path, text) for path, text in files.items())
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
    image: str, workers: int, seed: int, work: Path, formats: Sequence[SecretFormat] = FORMATS
) -> dict[str, Any]:
    """Plant every format in every placement that fits it; return per-case results."""
    rng = random.Random(seed)
    prompt = first_prompt(image)
    plans = []
    for fmt in formats:
        value = fmt.make(rng)
        cases = [PLACEMENTS[name](fmt, value, prompt) for name in placements_of(fmt)]
        plans.append((fmt, cases))
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        recorded = list(pool.map(lambda plan: record_format(plan[0], plan[1], work, image), plans))
    record_s = time.monotonic() - started
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
    return {
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
    from rich.table import Table

    console = Console(width=None if sys.stdout.isatty() else 150)
    summary = report["recall"]["summary"]
    table = Table(title=f"Planted secrets: recall by placement ({summary['formats']} formats)")
    for column in ("placement", "cases", "secret wrapped", "split sb/screen", "leaked", "recall"):
        table.add_column(column, justify="right")
    for placement, counts in summary["by_placement"].items():
        recall = 1 - counts["leaked"] / counts["cases"]
        table.add_row(
            placement,
            str(counts["cases"]),
            str(counts["wrapped"]),
            str(counts["split"]),
            str(counts["leaked"]),
            f"{recall:.1%}",
        )
    table.add_row(
        "all", str(summary["cases"]), "", "", str(summary["leaked"]), f"{summary['recall']:.1%}"
    )
    console.print(table)
    verdict = "met" if summary["recall"] >= TARGET_RECALL else "MISSED"
    console.print(f"recall {summary['recall']:.2%} (target 100%): {verdict}")
    for case in report["recall"]["cases"]:
        if case["leaked"]:
            console.print(
                f"  leaked: {case['format']} / {case['placement']}: {case['leaked_runs']}"
            )
    if summary["not_planted"]:
        console.print(f"  {summary['not_planted']} cases did not show their secret (not planted)")

    fp = Table(title="Ordinary transitions: rows changed by secret scrubbing")
    columns = ("corpus", "rows", "changed", "known credentials", "false positives", "FP rate")
    for column in (*columns, "changed with e-mail/IP", "ms/row"):
        fp.add_column(column, justify="right")
    for entry in report["false_positives"]:
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
    for entry in report["false_positives"]:
        for example in entry["false_positive_examples"]:
            console.print(f"  false positive in {example['id']}: {example['replaced']}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, help="a terminal run or corpus folder")
    parser.add_argument("--episodes", type=int, default=48, help="demo episodes to collect")
    parser.add_argument("--explore-corpus", type=Path, help="a terminal run of exploring")
    parser.add_argument(
        "--explore-episodes",
        type=int,
        default=0,
        help="exploring terminal episodes to collect as a further corpus (default: none)",
    )
    parser.add_argument("--web-corpus", type=Path, help="a web run or corpus folder")
    parser.add_argument("--web-episodes", type=int, default=3, help="web episodes to collect")
    parser.add_argument("--no-web", action="store_true", help="skip the web transitions")
    parser.add_argument("--workers", type=int, default=2, help="sandboxes recording at once")
    parser.add_argument("--seed", type=int, default=0, help="seed of the planted secrets")
    parser.add_argument("--image", default="worldtrace/terminal:latest")
    parser.add_argument(
        "--formats", nargs="*", choices=[f.name for f in FORMATS], help="only these formats"
    )
    parser.add_argument("--output", type=Path, default=RESULTS_FILE)
    args = parser.parse_args(argv)

    started = time.monotonic()
    loadavg_start = loadavg()
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench-scrubbing-", dir=RESULTS_DIR) as tmp:
        work = Path(tmp)
        formats = [f for f in FORMATS if not args.formats or f.name in args.formats]
        recall = measure_recall(args.image, args.workers, args.seed, work / "planted", formats)
        recall["summary"] = summarize(recall["cases"])
        corpus = args.corpus or collect(
            "terminal",
            work / "demo",
            ["--episodes", str(args.episodes), "--workers", str(args.workers)],
        )
        false_positives = [measure_false_positives(read_rows(corpus), "terminal demo")]
        explore = args.explore_corpus
        workers = ["--workers", str(args.workers)]
        explore_args = ["--policy", "explore", "--episodes", str(args.explore_episodes)]
        if explore is None and args.explore_episodes:
            explore = collect("terminal", work / "explore", [*explore_args, *workers])
        if explore is not None:
            rows = read_rows(explore)
            false_positives.append(measure_false_positives(rows, "terminal explore"))
        if not args.no_web:
            web = args.web_corpus or collect(
                "web", work / "web", ["--policy", "explore", "--episodes", str(args.web_episodes)]
            )
            false_positives.append(measure_false_positives(read_rows(web), "web explore"))

    report = {
        "benchmark": "scrubbing",
        "created_at": datetime.now(UTC).isoformat(),
        "machine": machine_info(loadavg_start),
        "leak_run": LEAK_RUN,
        "recall": recall,
        "false_positives": false_positives,
        "targets": {"recall": TARGET_RECALL, "false_positive_rate": TARGET_FP_RATE},
        "elapsed_s": round(time.monotonic() - started, 1),
        "results_file": str(args.output),
    }
    print_report(report)
    write_report(args.output, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
