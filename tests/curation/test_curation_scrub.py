"""The scrubber: secrets planted the way the attack planted them never survive curation.

Rows are built the way the terminal driver records them (:class:`Pane`): lines wrapped at
the pane's 160th column, the lines that scroll off the top during a step in the next
observation's ``new_scrollback``, screens trimmed as ``plain_screen`` trims them. Each kind
the attack leaked is planted as it leaked (typed and echoed, printed by ``cat``, wrapped at
the pane edge, split between scrollback and screen, a private key whose BEGIN line scrolled
away in an earlier step) and run through the real scrub step; no run of more than
:data:`LEAK_RUN` characters of the secret may survive in any field of any row. Ordinary
screens (git hashes, checksums, UUIDs, listings, tracebacks) must come out unchanged, and
so must what issue 22 found replaced in real observations (versions, cgroup paths, reserved
documentation domains and address ranges, badge URLs, manual placeholders, code), while the
personal data and secrets next to them still go; over the precision set of real observations
(benchmarks/data/, docs/scrubbing.md) fewer than 0.5% of each domain's rows may change.

The hint shortcuts of the e-mail and IP search are checked against a reference that applies
the full patterns to the whole text.
"""

from __future__ import annotations

import base64
import copy
import gzip
import json
import random
import re
import string
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from datatrove.data import Document

from tests.records import make_transition
from worldtrace.collectors.terminal.screen import plain_screen
from worldtrace.curation import CurationConfig, curate
from worldtrace.curation.config import ScrubSettings
from worldtrace.curation.scrub import LogicalText, Scrubber, ScrubStep
from worldtrace.curation.secrets import (
    EMAIL,
    IPV4,
    IPV6,
    Finding,
    email_is_personal,
    ipv4_is_address,
    ipv6_is_address,
    merge,
    secret_name_kind,
)
from worldtrace.normalizers.shards import ShardWriter
from worldtrace.schemas import Action, Observation, Transition, from_row, to_row

LEAK_RUN = 9
"""A run of this many characters of a secret found anywhere after scrubbing is a leak."""
PROMPT = "root@sandbox:~/work# "
RNG = random.Random(20260308)
ALNUM = string.ascii_letters + string.digits


def rand(n: int, alphabet: str = ALNUM) -> str:
    return "".join(RNG.choice(alphabet) for _ in range(n))


def b64(n_bytes: int) -> str:
    return base64.b64encode(RNG.randbytes(n_bytes)).decode()


def jwt() -> str:
    def part(data: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")

    header = part({"alg": "HS256", "typ": "JWT"})
    claims = part({"sub": "user-8812", "name": "Dana Ops", "iat": 1772900000, "scope": "admin"})
    signature = base64.urlsafe_b64encode(RNG.randbytes(32)).decode().rstrip("=")
    return f"{header}.{claims}.{signature}"


def pem_key(body_lines: int = 25, label: str = "RSA PRIVATE KEY") -> tuple[str, list[str]]:
    """Return a PEM private key and its body lines (64 base64 characters, a shorter last)."""
    body = base64.b64encode(b"\x30\x82\x04\xa4\x02\x01\x00" + RNG.randbytes(body_lines * 48))
    text = body.decode()
    lines = [text[i : i + 64] for i in range(0, len(text), 64)]
    return "\n".join([f"-----BEGIN {label}-----", *lines, f"-----END {label}-----"]), lines


# --------------------------------------------------------------------------- recorded rows


class Pane:
    """A tmux pane as the terminal driver records it.

    Logical lines wrap at ``width``; lines pushed off the top during a step become that step's
    ``new_scrollback``; screens and scrollback are trimmed like ``plain_screen``. ``clear``
    empties the screen.
    """

    def __init__(self, width: int = 160, height: int = 40, prompt: str = PROMPT) -> None:
        self.width, self.height, self.prompt = width, height, prompt
        self.lines = [prompt]
        self.scrolled: list[str] = []

    def _put(self, logical: str) -> None:
        chunks = [logical[i : i + self.width] for i in range(0, len(logical), self.width)]
        self.lines += chunks or [""]
        while len(self.lines) > self.height:
            self.scrolled.append(self.lines.pop(0))

    def run(self, step: Step) -> tuple[str, str]:
        """Type the step's keys and Enter, print its output; return new scrollback and screen."""
        self.scrolled = []
        self._put(self.lines.pop() + (step.typed if step.echo else ""))
        if step.typed == "clear":
            self.lines = []
        for line in step.output[:-1] if step.waits else step.output:
            self._put(line)
        # a program waiting for input leaves the cursor on its last line, not on a prompt
        self._put(step.output[-1] if step.waits else self.prompt)
        return plain_screen("\n".join(self.scrolled)), self.screen()

    def screen(self) -> str:
        return plain_screen("\n".join(self.lines))


@dataclass(frozen=True)
class Step:
    """Keys typed (then Enter) and what the program printed."""

    typed: str
    output: list[str] = field(default_factory=list)
    echo: bool = True  # False: typed at a prompt that does not echo (a password)
    waits: bool = False  # True: the last output line is a prompt waiting for input


def record(
    steps: list[Step | tuple[str, list[str]]],
    episode_id: str = "ep-planted",
    width: int = 160,
    columns_in_meta: bool = False,
) -> list[dict[str, Any]]:
    """Play the steps in a :class:`Pane`; return the rows the driver would have recorded."""
    pane = Pane(width=width)
    columns = {"columns": width} if columns_in_meta else {}
    screen, scrollback = pane.screen(), ""
    rows = []
    for index, item in enumerate(steps):
        step = item if isinstance(item, Step) else Step(*item)
        new_scrollback, next_screen = pane.run(step)
        transition = make_transition(
            step=index,
            episode_id=episode_id,
            task="set up the service and check that it starts",
            observation=Observation(
                format="terminal-screen",
                text=screen,
                meta={"cwd": "/root/work", "new_scrollback": scrollback, **columns},
            ),
            action=Action(
                name="keys",
                arguments={"keys": [step.typed, "Enter"]},
                text=f"{step.typed}<Enter>",
            ),
            next_observation=Observation(
                format="terminal-screen",
                text=next_screen,
                meta={"cwd": "/root/work", "new_scrollback": new_scrollback, **columns},
            ),
        )
        rows.append(to_row(transition))
        screen, scrollback = next_screen, new_scrollback
    return rows


def scrub(rows: list[dict[str, Any]], settings: ScrubSettings | None = None) -> list[dict]:
    """Run the real scrub step over the rows (as documents, in order); return the rows."""
    docs = [Document(text="", id=row["id"], metadata=copy.deepcopy(row)) for row in rows]
    return [doc.metadata for doc in ScrubStep(settings or ScrubSettings()).run(iter(docs))]


def strings(value: Any) -> Iterator[str]:
    """Every string in a row, JSON columns decoded (a secret must not hide in an escape)."""
    if isinstance(value, str):
        yield value
        try:
            decoded = json.loads(value)
        except ValueError:
            return
        if not isinstance(decoded, str):
            yield from strings(decoded)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def leaks(rows: list[dict[str, Any]], secret: str) -> list[str]:
    """Runs of :data:`LEAK_RUN` characters of ``secret`` found in any string of any row.

    Each observation is also read as a reader could put it back together: its scrollback and
    screen with the line breaks taken out.
    """
    texts = list(strings(rows))
    for row in rows:
        for name in ("observation", "next_observation"):
            scrollback = json.loads(row[name]["meta"] or "{}").get("new_scrollback") or ""
            texts.append(f"{scrollback}{row[name]['text']}".replace("\n", ""))
    pieces = {secret[i : i + LEAK_RUN] for i in range(len(secret) - LEAK_RUN + 1)}
    return sorted(piece for piece in pieces if any(piece in text for text in texts))


def planted(rows: list[dict[str, Any]], secret: str) -> None:
    """Check the planting worked: the unscrubbed rows do hold the whole secret."""
    assert leaks(rows, secret), "the secret was not planted"


def filler(n: int, name: str = "build") -> list[str]:
    return [f"[{i:02d}] {name}: step {i} of {n} ok" for i in range(n)]


def padding(before: str, after: str, column: int) -> str:
    """Filler to put between ``before`` and ``after`` so that what follows starts at ``column``."""
    return "x" * (column - len(before) - len(after))


# --------------------------------------------------------------------------- the attack's kinds


def test_github_token_typed_and_wrapped_at_the_160th_column() -> None:
    token = "ghp_" + rand(36)
    pad = padding(f"{PROMPT}echo 'deploy ", "' && export GITHUB_TOKEN=", 140)
    typed = f"echo 'deploy {pad}' && export GITHUB_TOKEN={token}"
    assert len(PROMPT) + typed.index(token) == 140  # the 160th column falls inside the token
    rows = record([(typed, []), ("git push origin main", ["Everything up-to-date"])])
    planted(rows, token)
    assert not leaks(scrub(rows), token)


def test_slack_token_printed_wrapped_and_split_between_scrollback_and_screen() -> None:
    token = f"xoxb-{rand(12, string.digits)}-{rand(13, string.digits)}-{rand(24).lower()}"
    line = "notify: " + "-" * 130 + f" SLACK_BOT={token}"
    # the printed line wraps inside the token; 38 more lines push its first half off the top
    rows = record([("clear", []), ("cat notify.log", [line, *filler(38)])])
    assert token[:10] in json.loads(rows[1]["next_observation"]["meta"])["new_scrollback"]
    assert token[-10:] in rows[1]["next_observation"]["text"].split("\n")[0]
    planted(rows, token)
    assert not leaks(scrub(rows), token)


def test_pem_key_with_its_begin_line_in_the_scrollback() -> None:
    key, body = pem_key()
    # the BEGIN line and a few body lines scroll off while the rest stays on screen
    output = [*filler(8), *key.split("\n"), *filler(16)]
    rows = record([("clear", []), ("cat ~/.ssh/id_rsa", output)])
    scrollback = json.loads(rows[1]["next_observation"]["meta"])["new_scrollback"]
    assert "BEGIN RSA PRIVATE KEY" in scrollback
    assert "BEGIN" not in rows[1]["next_observation"]["text"]
    out = scrub(rows)
    for line in body:
        assert not leaks(out, line), line


def test_pem_body_left_on_later_screens_after_its_begin_scrolled_away() -> None:
    key, body = pem_key(body_lines=30)
    steps = [
        ("cat deploy_key", key.split("\n")),
        ("ls", ["app.py  deploy_key  README.md"]),
        # the BEGIN line has scrolled away in an earlier step; a window of the body remains
        ("sed -n 3,12p deploy_key", body[1:11]),
        ("tail -n 4 deploy_key", [*body[-3:], "-----END RSA PRIVATE KEY-----"]),
        ("head -c 200 deploy_key | tail -c 120", [key[80:200].replace("\n", "")]),
    ]
    rows = record(steps)
    out = scrub(rows)
    for line in body:
        assert not leaks(out, line), line


def test_jwt_wrapped_at_the_pane_edge() -> None:
    token = jwt()
    head = f"{PROMPT}curl -s https://api.internal/v1/me -H 'X-Session: "
    typed = f"curl -s https://api.internal/v1/me -H 'X-Session: {token}'"
    assert len(head) + len(token) > 160  # the token wraps
    rows = record([(typed, ['{"user": "dana", "role": "admin"}']), ("echo $?", ["0"])])
    planted(rows, token)
    assert not leaks(scrub(rows), token)


def test_hex_token_printed_then_echoed_bare_later() -> None:
    token = rand(64, "0123456789abcdef")
    rows = record(
        [
            ("./get-token --service billing", [f"Issued API token for billing: {token}"]),
            ("export BILLING=$(./get-token -q)", []),
            # printed bare: only the memory of the episode knows it is a secret
            ("echo $BILLING", [token]),
        ]
    )
    planted(rows, token)
    assert not leaks(scrub(rows), token)


def test_base64_token_typed_and_printed() -> None:
    token = b64(32)
    rows = record(
        [
            (f"echo '{token}' > ~/.config/app/session", []),
            ("cat ~/.config/app/session", [token]),
        ]
    )
    planted(rows, token)
    assert not leaks(scrub(rows), token)


def test_db_password_from_env_file_and_typed_export() -> None:
    password = "Xk9#pLm2!qR7" + rand(6)
    spaced = "correct horse battery " + rand(8).lower()
    head = f"{PROMPT}export DB_PASSWORD='"
    typed = f"export DB_PASSWORD='{spaced}'"
    rows = record(
        [
            ("cat .env", ["DATABASE_HOST=db.internal", f"DB_PASSWORD={password}", "DB_PORT=5432"]),
            (" " * (160 - len(head) - 6) + typed, []),  # wraps inside the value
        ]
    )
    planted(rows, password)
    out = scrub(rows)
    assert not leaks(out, password)
    assert not leaks(out, spaced)


def test_aws_secret_access_key_in_credentials_split_across_scrollback() -> None:
    secret = rand(40, ALNUM + "/+")
    credentials = [
        "[default]",
        "aws_access_key_id = AKIA" + rand(16, string.ascii_uppercase + string.digits),
        f"aws_secret_access_key = {secret}",
        "region = eu-west-1",
    ]
    rows = record([("clear", []), ("cat ~/.aws/credentials && ls", [*credentials, *filler(38)])])
    scrollback = json.loads(rows[1]["next_observation"]["meta"])["new_scrollback"]
    assert secret in scrollback  # the key line scrolled off during the step
    planted(rows, secret)
    assert not leaks(scrub(rows), secret)


def test_json_password_value_pretty_and_wrapped() -> None:
    password = "p4ss " + rand(14)
    one_line = json.dumps(
        {"service": "billing", "notes": "-" * 120, "db": {"user": "app", "password": password}}
    )
    rows = record(
        [
            ("cat config.json", json.dumps({"db": {"password": password}}, indent=2).split("\n")),
            ("jq -c . config.prod.json", [one_line]),  # wraps at 160
        ]
    )
    planted(rows, password)
    assert not leaks(scrub(rows), password)


def test_stripe_live_key_wrapped_inside_the_key() -> None:
    key = "sk_live_" + rand(24)
    head = f"{PROMPT}export STRIPE_API_KEY="
    typed = " " * (160 - len(head) - 12) + f"export STRIPE_API_KEY={key}"
    rows = record([(typed, []), ("python3 charge.py", ["charged 12.00 EUR"])])
    planted(rows, key)
    assert not leaks(scrub(rows), key)


def test_bearer_token_in_a_wrapped_curl_command() -> None:
    token = rand(48, ALNUM + "-._~")
    typed = (
        "curl -sS -X POST https://api.example.net/v2/deployments/production/rollouts "
        f"-H 'Content-Type: application/json' -H 'Authorization: Bearer {token}' -d @body.json"
    )
    rows = record([(typed, ['{"status": "queued"}'])])
    planted(rows, token)
    assert not leaks(scrub(rows), token)


def test_the_pane_width_comes_from_meta_columns() -> None:
    token = f"xoxb-{rand(12, string.digits)}-{rand(13, string.digits)}-{rand(24).lower()}"
    # printed on a 100-column pane with only "xoxb-1" before the edge: neither part is a
    # token alone, only the line joined at column 100 shows it
    line = "notify " + "-" * (94 - len("notify  bot=")) + " bot=" + token
    assert line.index(token) == 94
    rows = record([("cat notify.log", [line])], width=100, columns_in_meta=True)
    planted(rows, token)
    assert not leaks(scrub(rows), token)
    without_columns = record([("cat notify.log", [line])], width=100)
    assert leaks(scrub(without_columns), token)  # read as 160 wide, the line is not joined


def test_password_typed_at_a_prompt_is_scrubbed() -> None:
    password = "tr0ub4dor&" + rand(4)
    rows = record(
        [
            Step("mysql -u root -p shop", ["Enter password: "], waits=True),
            Step(password, ["Welcome to the MariaDB monitor.", "MariaDB [shop]> "], echo=False),
        ]
    )
    # the prompt does not echo: the password is only in the typed action
    planted(rows, password)
    assert not leaks(scrub(rows), password)


def test_every_json_string_in_meta_and_arguments_is_scrubbed() -> None:
    token = "ghp_" + rand(36)
    row = to_row(
        make_transition(
            action=Action(
                name="keys",
                arguments={"keys": [f"echo {token}", "Enter"], "note": {"auth": f"token {token}"}},
                text="echo <hidden>",
            ),
            next_observation=Observation(
                format="axtree",
                text="[1] link 'Home'",
                meta={"url": f"http://127.0.0.1:8000/?access_token={token}", "title": "ok"},
            ),
        )
    )
    assert not leaks(scrub([row]), token)


def test_web_fill_of_a_password_field_is_scrubbed() -> None:
    password = "hunter2-" + rand(6)
    row = to_row(
        make_transition(
            domain="web",
            observation=Observation(
                format="axtree", text="[12] textbox 'Username'\n[13] textbox 'Password'"
            ),
            action=Action(
                name="fill",
                arguments={"bid": "13", "value": password},
                text=f"fill('13', '{password}')",
            ),
            next_observation=Observation(format="axtree", text="[13] textbox 'Password' •••••"),
        )
    )
    assert not leaks(scrub([row]), password)


# --------------------------------------------------------------------------- context secrets
# Secrets whose shape says nothing: the file format, or the command that printed them, is what
# makes them secrets (issue 24). Each family in a terminal screen, a swe tool output and an mcp
# tool result, as the domains render them.

PG_PASSWORD = "wint3r-" + rand(9).lower()
NETRC_PASSWORD = "plum" + rand(7).lower()
HEROKU_TOKEN = "5f0c2e4a-" + rand(4, "0123456789abcdef") + "-4d3e-8f9a-0b1c2d3e4f5a"
VAULT_TOKEN = "s." + rand(24)
AWS_SECRET = rand(40, string.ascii_lowercase + string.digits)
DB_PASSWORD = "t0wer" + rand(7).lower()
GIT_TOKEN = rand(14).lower()


def swe_row(command: str, output: str, step: int = 0, episode_id: str = "ep-swe") -> dict:
    """A swe ``run_shell_command`` row rendered as the swe renderer renders it."""
    from worldtrace.collectors.swe.render import SweRenderer
    from worldtrace.collectors.swe.tools import tool_call

    raw = {"tool": "run_shell_command", "output": output, "exit_code": 0}
    return to_row(
        make_transition(
            step=step,
            episode_id=episode_id,
            domain="swe",
            observation=Observation(format="tool-result", text="[exit code: 0]\n"),
            action=tool_call("run_shell_command", command=command),
            next_observation=SweRenderer().observation(raw),
        )
    )


def swe_read_row(path: str, content: str, end_line: int | None = None) -> dict:
    """A swe ``read_file`` row: the file with line numbers, as the driver prints it."""
    from worldtrace.collectors.swe.render import SweRenderer
    from worldtrace.collectors.swe.tools import tool_call

    lines = content.split("\n")[:end_line]
    output = "".join(f"{number:6}\t{line}\n" for number, line in enumerate(lines, 1))
    arguments = {"path": path} if end_line is None else {"path": path, "end_line": end_line}
    return to_row(
        make_transition(
            domain="swe",
            observation=Observation(format="tool-result", text="[exit code: 0]\n"),
            action=tool_call("read_file", **arguments),
            next_observation=SweRenderer().observation({"tool": "read_file", "output": output}),
        )
    )


def mcp_read_row(path: str, content: str) -> dict:
    """An mcp filesystem ``read_text_file`` row rendered as the mcp renderer renders it."""
    from worldtrace.collectors.mcp.render import McpRenderer
    from worldtrace.collectors.tool_calls import canonical_text

    raw = {
        "tool": "read_text_file",
        "server": "filesystem",
        "result": {
            "content": [{"type": "text", "text": content}],
            "structuredContent": {"content": content},
        },
    }
    arguments = {"path": path}
    return to_row(
        make_transition(
            domain="mcp",
            observation=Observation(format="tool-result", text="[structured content]\n{}"),
            action=Action(
                name="read_text_file",
                arguments=arguments,
                text=canonical_text("read_text_file", arguments),
            ),
            next_observation=McpRenderer().observation(raw),
        )
    )


NETRC = (
    "machine api.heroku.com\n"
    f"  login dana@ops.example\n  password {NETRC_PASSWORD}\n"
    "machine git.corp.example login deploy password " + NETRC_PASSWORD[::-1]
)
PGPASS = (
    f"# host:port:db:user:password\ndb.internal:5432:shop:app:{PG_PASSWORD}\n*:*:*:ro:{DB_PASSWORD}"
)
GIT_CREDENTIALS = (
    f"https://{GIT_TOKEN}@github.com\nhttps://deploy:{DB_PASSWORD[::-1]}@git.corp.example"
)


@pytest.mark.parametrize(
    ("path", "content", "secrets"),
    [
        ("~/.netrc", NETRC, [NETRC_PASSWORD, NETRC_PASSWORD[::-1]]),
        ("~/.pgpass", PGPASS, [PG_PASSWORD, DB_PASSWORD]),
        ("~/.git-credentials", GIT_CREDENTIALS, [GIT_TOKEN, DB_PASSWORD[::-1]]),
    ],
    ids=["netrc", "pgpass", "git-credentials"],
)
def test_credential_files_are_read_by_their_format_in_every_domain(
    path: str, content: str, secrets: list[str]
) -> None:
    placements = {
        "terminal": record([("clear", []), (f"cat {path}", content.split("\n")), ("ls", ["a"])]),
        "terminal-cleared": record([(f"clear && cat {path}", content.split("\n"))]),
        "swe-shell": [swe_row(f"cat {path}", content + "\n")],
        "swe-read": [swe_read_row(path.replace("~", "/root"), content)],
        "mcp": [mcp_read_row(path.replace("~", "/root"), content)],
    }
    for name, rows in placements.items():
        out = scrub(rows)
        for secret in secrets:
            planted(rows, secret)
            assert not leaks(out, secret), (name, secret)


@pytest.mark.parametrize(
    ("command", "output", "secret"),
    [
        ("heroku auth:token", [HEROKU_TOKEN], HEROKU_TOKEN),
        ("vault print token", [VAULT_TOKEN], VAULT_TOKEN),
        ("aws configure get aws_secret_access_key", [AWS_SECRET], AWS_SECRET),
        ("gh auth token --hostname ghe.corp.example", [GIT_TOKEN + "q7x"], GIT_TOKEN + "q7x"),
        (
            "kubectl get secret db -o jsonpath='{.data.password}' | base64 -d",
            [DB_PASSWORD],
            DB_PASSWORD,
        ),
    ],
    ids=["heroku", "vault", "aws-configure", "gh", "kubectl-decoded"],
)
def test_a_token_printed_because_a_command_asked_for_it(
    command: str, output: list[str], secret: str
) -> None:
    placements = {
        "terminal": record([("clear", []), (command, output), ("ls", ["a"])]),
        "terminal-cleared": record([(f"clear; {command}", output)]),
        "terminal-scrolled": record([("clear", []), (command, output), ("ls", filler(45))]),
        "swe-shell": [swe_row(command, "\n".join(output) + "\n")],
    }
    for name, rows in placements.items():
        planted(rows, secret)
        assert not leaks(scrub(rows), secret), name


def test_a_secret_printed_without_a_newline_runs_into_the_next_prompt() -> None:
    encoded = base64.b64encode(DB_PASSWORD.encode()).decode()
    command = "kubectl get secret db -o jsonpath='{.data.password}'"
    # no newline after the value: the prompt comes back on the same line
    rows = record([("clear", []), Step(command, [encoded + PROMPT], waits=True), ("ls", ["a"])])
    assert encoded + PROMPT.rstrip() in rows[1]["next_observation"]["text"]
    planted(rows, encoded)
    out = scrub(rows)
    assert not leaks(out, encoded)
    assert PROMPT.rstrip() in out[1]["next_observation"]["text"]  # the prompt is kept
    swe = [swe_row(command, encoded)]
    assert not leaks(scrub(swe), encoded)


def test_a_private_key_file_is_redacted_whole_even_when_cut() -> None:
    key, body = pem_key(body_lines=20)
    # swe's read_file numbers the lines, and a window of the file shows no END line
    rows = [swe_read_row("/root/.ssh/id_rsa", key, end_line=12)]
    out = scrub(rows)
    for line in body[:11]:
        planted(rows, line)
        assert not leaks(out, line), line
    # one line of the body left on a screen whose BEGIN line scrolled off in the same step
    steps = [("clear", []), ("cat ~/.ssh/id_ed25519", [*filler(30), *key.split("\n")[:-1]])]
    rows = record(steps)
    out = scrub(rows)
    for line in body:
        assert not leaks(out, line), line
    mcp = [mcp_read_row("/root/.ssh/deploy_key", "\n".join(key.split("\n")[5:]))]
    out = scrub(mcp)
    for line in body[4:]:
        assert not leaks(out, line), line


CONTEXT_NEAR_MISSES = {
    "kubectl describe secret": "root@sandbox:~/work# kubectl describe secret db\nName:  db\n"
    "Type:  Opaque\n\nData\n====\npassword:  16 bytes\nusername:  3 bytes\nroot@sandbox:~/work# ",
    "gh auth status": "root@sandbox:~/work# gh auth status\ngithub.com\n"
    "  ✓ Logged in to github.com account dana (keyring)\n  - Active account: true\n"
    "  - Git operations protocol: https\n  - Token: gho_************************************\n"
    "  - Token scopes: 'gist', 'read:org', 'repo'\nroot@sandbox:~/work# ",
    "gh auth token without one": "root@sandbox:~/work# gh auth token\n"
    "no oauth token found for github.com\nroot@sandbox:~/work# ",
    "netrc with a blank password": "root@sandbox:~/work# cat ~/.netrc\n"
    'machine ftp.gnu.org login anonymous password ""\n'
    "machine mirror.internal login anonymous password\n"
    "default login anonymous\nroot@sandbox:~/work# ",
    "kubectl not a secret": "root@sandbox:~/work# kubectl get secrets\n"
    "NAME                  TYPE                                  DATA   AGE\n"
    "db-credentials        Opaque                                2      3d\n"
    "default-token-x7k2p   kubernetes.io/service-account-token   3      40d\n"
    "root@sandbox:~/work# kubectl get pods -o jsonpath='{.items[*].metadata.name}'\n"
    "api-7d9f8b6c5d-x2k4p web-5c6d7e8f9a-q8w7eroot@sandbox:~/work# ",
    "ssh public key": "root@sandbox:~/work# cat ~/.ssh/id_ed25519.pub\n"
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHc3mKb1u9PqQx8Hq2wzZxJm1v0d8f7R2sYtFz6cXq9L dana@ops\n"
    "root@sandbox:~/work# ls ~/.ssh\n"
    "authorized_keys  config  id_ed25519  id_ed25519.pub  known_hosts",
    "missing key": "root@sandbox:~/work# cat ~/.ssh/id_rsa\n"
    "cat: /root/.ssh/id_rsa: No such file or directory\nroot@sandbox:~/work# ",
    "netrc manual": "NETRC(5)\n   machine name\n       Identify a remote machine name.\n"
    "   login name\n       Identify a user on the remote machine.\n   password string\n"
    "       Supply a password. If this token is present, the auto-login process will supply\n"
    "       the specified string if the remote server requires a password as part of the\n"
    "       login process.",
    "grep with line numbers": "root@sandbox:~/work# grep -rn url setup.cfg\n"
    "setup.cfg:12:url:https://github.com/pytoolz/toolz\nroot@sandbox:~/work# ",
    "pgpass wildcard": "root@sandbox:~/work# cat ~/.pgpass\n"
    "# hostname:port:database:username:password\nroot@sandbox:~/work# ",
    "aws configure get region": "root@sandbox:~/work# aws configure get region\neu-west-1\n"
    "root@sandbox:~/work# aws configure list\n      Name                    Value             Type"
    "    Location\n      ----                    -----             ----    --------\n"
    "   profile                <not set>             None    None\n"
    "access_key     ****************MPLE shared-credentials-file\n"
    "secret_key     ****************EKEY shared-credentials-file\nroot@sandbox:~/work# ",
}


@pytest.mark.parametrize("text", CONTEXT_NEAR_MISSES.values(), ids=CONTEXT_NEAR_MISSES.keys())
def test_context_near_misses_are_left(text: str) -> None:
    assert Scrubber(ScrubSettings()).text(text) == text


def test_context_near_misses_in_tool_results_are_left() -> None:
    rows = [
        swe_row("gh auth status", "github.com\n  ✓ Logged in to github.com account dana\n"),
        swe_row("gh auth token", "no oauth token found for github.com\n"),
        swe_row("kubectl get secrets", "NAME   TYPE     DATA   AGE\ndb     Opaque   2      3d\n"),
        swe_read_row("/root/.netrc", 'machine ftp.gnu.org login anonymous password ""'),
        swe_read_row("/root/.ssh/config", "Host git\n  HostName git.corp.example\n  User git"),
        mcp_read_row("/root/.pgpass", "# hostname:port:database:username:password\n"),
        mcp_read_row("/srv/project/README.md", "Run `gh auth token` to print your token."),
    ]
    out = scrub(copy.deepcopy(rows))
    for before, after in zip(rows, out, strict=True):
        assert after["next_observation"] == before["next_observation"], before["action"]


# --------------------------------------------------------------------------- the real pipeline


def test_curate_removes_every_planted_secret_from_parquet(tmp_path: Path) -> None:
    token, key_body, password = "ghp_" + rand(36), pem_key()[0], "Zq8!" + rand(12)
    steps = [
        ("clear", []),
        ("export GITHUB_TOKEN=" + token, []),
        ("cat ~/.ssh/id_ed25519", [*filler(6), *key_body.split("\n")]),
        ("cat .env", [f"DB_PASSWORD={password}", *filler(38)]),
        ("env | grep -c TOKEN", ["1"]),
    ]
    rows = [from_row(Transition, row) for row in record(steps, width=160)]
    run = tmp_path / "run"
    with ShardWriter(run / "transitions" / "terminal", Transition) as writer:
        writer.write(rows)  # type: ignore[arg-type]
    out = tmp_path / "curated"
    config = CurationConfig(minhash={"enabled": False}, filters={"noop": "keep"})
    report = curate(run, out, config)
    assert report.rows_out == len(rows)
    frame = pl.read_parquet(sorted((out / "transitions").glob("*/*.parquet")))
    written = frame.to_dicts()
    for secret in [token, password, *key_body.split("\n")[1:-1]]:
        assert not leaks(written, secret), secret
    scrubbed = json.loads((out / "stats.json").read_text())["total"]["scrubbed"]
    assert scrubbed["github_token"] >= 1 and scrubbed["private_key"] >= 1
    assert scrubbed["password"] >= 1


# --------------------------------------------------------------------------- false positives

ORDINARY_SCREENS = [
    # git log: commit hashes are not secrets
    "root@sandbox:~/work/repo# git log -2\n"
    "commit 3f8a9c1d2e4b5a6978c0d1e2f3a4b5c6d7e8f901 (HEAD -> main)\n"
    "Author: Dana Ops <dana@ops>\nDate:   Fri Mar 1 08:00:00 2024 +0000\n\n"
    "    fix token refresh in the session cache\n\n"
    "commit 9b1e2d3c4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c\n"
    "root@sandbox:~/work/repo# git rev-parse HEAD\n3f8a9c1d2e4b5a6978c0d1e2f3a4b5c6d7e8f901",
    # checksums
    "root@sandbox:~/work# sha256sum dist/*\n"
    "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08  dist/app-1.4.2.tar.gz\n"
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  dist/api_token.txt\n"
    "root@sandbox:~/work# md5sum notes.txt\nd41d8cd98f00b204e9800998ecf8427e  notes.txt",
    # UUIDs in paths, docker-style ids
    "root@sandbox:~/work# ls /var/lib/app/sessions/\n"
    "2f1c8a4e-9b7d-4c3a-8e5f-1a2b3c4d5e6f.json  7d9e1f2a-3b4c-4d5e-8f6a-7b8c9d0e1f2a.json\n"
    "root@sandbox:~/work# cat /proc/sys/kernel/random/uuid\n5b3c1e2a-8f4d-4e6b-9a7c-2d1e0f9b8a7c",
    # a file listing
    "root@sandbox:~/work# ls -la\ntotal 48\n"
    "drwxr-xr-x 5 root root 4096 Mar  1 08:00 .\n"
    "-rw-r--r-- 1 root root  220 Mar  1 08:00 .env.example\n"
    "-rw------- 1 root root 1679 Mar  1 08:00 id_rsa\n"
    "-rw-r--r-- 1 root root  398 Mar  1 08:00 id_rsa.pub\n"
    "-rw-r--r-- 1 root root 2048 Mar  1 08:00 password_policy.md\n"
    "-rw-r--r-- 1 root root  734 Mar  1 08:00 tokenizer_config.json",
    # a Python traceback
    "root@sandbox:~/work/api-server# python3 app.py\nTraceback (most recent call last):\n"
    '  File "/root/work/api-server/app.py", line 3, in <module>\n'
    '    password = os.environ["DB_PASSWORD"]\n'
    "               ~~~~~~~~~~^^^^^^^^^^^^^^^^^\n"
    '  File "<frozen os>", line 679, in __getitem__\n'
    "KeyError: 'DB_PASSWORD'",
    # environment listings, logs, configuration that names secrets without holding them
    "root@sandbox:~/work# env | sort\nHOME=/root\nOLDPWD=/root\nPWD=/root/work\n"
    "TOKEN_URL=https://auth.example.org/oauth/token\nPASSWORD_FILE=/run/secrets/db\n"
    "2024-03-01 08:00:01,120 INFO cache hit key=user:17 ttl=300\n"
    "max_tokens: 512\nsort_keys: true\ngit config: credential.helper=store",
    # public keys and fingerprints, package hashes
    "root@sandbox:~# ssh-keygen -lf ~/.ssh/id_ed25519.pub\n"
    "256 SHA256:8Kx2vQ9mZ1pL4rT7yB3nC6wE0aF5hJ2kD8sG1uI4oP0 root@sandbox (ED25519)\n"
    "root@sandbox:~# cat ~/.ssh/id_ed25519.pub\n"
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHq4X2mN8vR5tY1wZ3cB7dF9gH0jK6lP2sQ4uE8iO1aT root@box\n"
    '  "integrity": "sha512-Tr9X2mN8vR5tY1wZ3cB7dF9gH0jK6lP2sQ4uE8iO1aTqLp0ZxWvYbNmKjHgFdSaQ=="',
    # a wrapped long line of ordinary output
    "root@sandbox:~/work# python3 -c 'print(\"=\" * 200)'\n" + "=" * 160 + "\n" + "=" * 40,
]


@pytest.mark.parametrize("screen", ORDINARY_SCREENS)
def test_ordinary_screens_are_left_unchanged(screen: str) -> None:
    row = to_row(
        make_transition(
            observation=Observation(
                format="terminal-screen", text=screen, meta={"new_scrollback": screen[:200]}
            ),
            next_observation=Observation(format="terminal-screen", text=screen),
            action=Action(name="keys", arguments={"keys": ["ls", "Enter"]}, text="ls<Enter>"),
        )
    )
    scrubber = Scrubber(ScrubSettings())
    scrubbed = copy.deepcopy(row)
    scrubber.row(scrubbed)
    assert scrubbed == row, scrubber.counts


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("DB_PASSWORD", "password"),
        ("dbPass", "password"),
        ("GITHUB_TOKEN", "token"),
        ("X-Auth-Token", "token"),
        ("apiKey", "key"),
        ("SECRET_KEY", "secret"),
        ("AWS_SECRET_ACCESS_KEY", "secret"),
        ("KEY", "key"),
        ("azure_credentials", "credential"),
        ("key", None),
        ("monkey", None),
        ("max_tokens", None),
        ("tokenizer", None),
        ("PWD", None),
        ("password_file", None),
        ("TOKEN_URL", None),
        ("credential.helper", None),
        ("KeyError", None),
    ],
)
def test_secret_names(name: str, kind: str | None) -> None:
    assert secret_name_kind(name) == kind


# --------------------------------------------------------------------------- not secrets (issue 22)

# What the scrubber replaced in real observations although it is neither a secret nor personal
# data (issue 22), each in the shape it had there, with the lines around it.
CGROUP_ID = "4f1d0c8e2b7a95c3d6e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9"
NOT_PERSONAL = {
    "dpkg -l": (
        "root@sandbox:~# dpkg -l | grep foo\n"
        "ii  libfoo1:amd64        1.0.0.7-10+b3          amd64        foo shared library\n"
        "ii  libsemanage-common   1.2.5.1-2              all          SELinux library (common)"
    ),
    "apt": (
        "root@sandbox:~# apt list --upgradable\n"
        "libfoo1/stable 1.0.0.7-10+b3 amd64 [upgradable from: 1.0.0.6-1]\n"
        "Get:1 http://deb.debian.org/debian bookworm/main amd64 libfoo1 amd64 1.0.0.7-10+b3 "
        "[51.2 kB]\n"
        "Unpacking libfoo1:amd64 (1.0.0.7-10+b3) over (1.0.0.6-1) ...\n"
        "Setting up libfoo1:amd64 (1.0.0.7-10+b3) ..."
    ),
    "cgroup v2": f"root@sandbox:~# cat /proc/self/cgroup\n0::/docker/{CGROUP_ID}",
    "cgroup root": "root@sandbox:~# cat /proc/1/cgroup\n0::/",
    "cgroup v1": (
        f"12:cpu,cpuacct:/docker/{CGROUP_ID}\n0::/docker/{CGROUP_ID}/init.scope\n"
        f"4:memory:/process_api/bd2e5126898081e25b24555ec5f9bde5"
    ),
    "example.com": "Author: Maya Lin <maya@example.com>\nReported-by: ops@mail.example.com",
    "example.org/.net": "mailto:ada@example.org, grace.hopper@example.net, root@EXAMPLE.ORG",
    "reserved TLDs": (
        "bob@mail.test alice@shop.test\nnoreply@nowhere.invalid worldtrace@sandbox.invalid\n"
        "carol@corp.example dan@host.localhost"
    ),
    "search results": (
        "[1] http://docs.localhost/python/library/email.examples.html\n"
        "email: Examples\n"
        "msg['From'] = 'Pepé Le Pew <pepe@example.com>' ... msg['To'] = 'Penelope Pussycat "
        "<penelope@example.com>, Fabrette Pussycat <fabrette@example.com>'\n"
        "Date: 2023-02-03"
    ),
    "RFC 5737 addresses": (
        "root@sandbox:~# ping -c1 192.0.2.10\nPING 192.0.2.10 (192.0.2.10) 56(84) bytes of data.\n"
        "inet 198.51.100.7/24 brd 198.51.100.255 scope global eth0\n"
        "ssh admin@203.0.113.9 -p 2222\nhttp://203.0.113.200:8080/health"
    ),
    "RFC 3849 addresses": "inet6 2001:db8::1/64 scope global\nhttp://[2001:db8:85a3::8a2e:370:7334]:80/",
    "badge URL": (
        "[![codecov](https://codecov.io/gh/psf/requests/branch/main/graph/badge.svg?token=xJ1kD8Yc2L)]"
        "(https://codecov.io/gh/psf/requests)\n"
        "![status](https://img.shields.io/badge/build-passing-brightgreen?logo=github&style=flat)\n"
        "![ci](https://travis-ci.com/psf/requests.svg?token=q8Zx2mPb7Kd9&branch=main)"
    ),
    "versions": (
        "Successfully installed foo-1.2.3.4 bar-2.0.1.7\nfoo==1.2.3.4\n"
        "Version 1.2.3.4 of foo, released 2024-03-01\nkernel 5.15.0.105 (v6.1.0.13)"
    ),
    "systemd units": (
        "user@1000.service loaded active running User Manager for UID 1000\n"
        "/user.slice/user-1000.slice/user@1000.service/app.slice"
    ),
    "SSH remotes and URL logins": (
        "> git clone git@gitlab.com:procps-ng/procps.git\nftp://anonymous@ftp.gnu.org/gnu/"
    ),
    "networks and well-known addresses": (
        "docker network create --subnet 172.20.0.0/16 --ip-range 172.20.240.0/20 net\n"
        "127.0.1.1       thishost\nff02::1         ip6-allnodes\n"
        "inet 127.0.0.1  netmask 255.255.255.0  broadcast 255.255.255.255"
    ),
    "slices and namespaces": "xs[1::2] + ys[::2] + zs[::-1]\nab::cd and ::ffff\n",
}


@pytest.mark.parametrize("text", NOT_PERSONAL.values(), ids=NOT_PERSONAL.keys())
def test_what_is_neither_a_secret_nor_personal_data_is_left(text: str) -> None:
    scrubber = Scrubber(ScrubSettings())
    assert scrubber.text(text) == text, scrubber.counts


# Secret-looking text the precision set (benchmarks/data/) showed in manuals, code and tool
# results: names of secrets with code, placeholders or prose where a value would be.
NOT_SECRETS = {
    "keyword arguments": (
        "    450    channel_credentials=None,\n    451    private_key=None,\n"
        "    452    store = HfStore(repo_id, token=token, endpoint=endpoint)\n"
        "    453    client = AsyncOpenAI(api_key=self.config.api_key, base_url=url)\n"
        "    454    connect(host, port=port, username=username, password=password)\n"
        "    455    plain_url = url._replace(password=None)\n"
        '    456    authorization = b"Basic " + base64.b64encode(userpass)\n'
        '    457    token=self.pprint(self.token, privacy, safe=""),'
    ),
    "manual placeholders": (
        "       --update-labels=[KEY=VALUE,...]\n         --metadata=KEY=VALUE,[KEY=VALUE,...]\n"
        "       --password=PASSWORD    --page_token=PAGE_TOKEN    --private-key=file\n"
        "       curl --location-trusted -u user:password https://example.com\n"
        "       openssl smime [-passin arg] [-keyform PEM]; set with the -passin option.\n"
        "       [--disk-encryption-key=DISK_ENCRYP\u2010\n"
        '       "postgresql+asyncpg://user:pass@host/dbname", "{schema}://{user}:{password}@{host}"'
    ),
    "manual prose": (
        "           specified when --password is being used, because they are exclusive\n"
        "       --discard-dual-password Discard the user's secondary password.\n"
        "           ConditionCredential= may be used to check whether a credential by"
    ),
    "synopsis": (
        "user@sandbox:~/work$ man -P cat ssh-keygen\n"
        "     ssh-keygen -p [-a rounds] [-f keyfile] [-m format] [-N new_passphrase]\n"
        "                [-P old_passphrase] [-Z cipher]\n"
        "     ssh [-46AaCfGgKkMNnqsTtVvXxYy] [-B bind_interface] [-b bind_address]"
    ),
    "system files": (
        "passwd:         files systemd\ngroup:          files systemd\n"
        "printf: David MacKenzie\npwd: Jim Meyering\nreadlink: Dmitry V. Levin"
    ),
    "styles and identifiers": (
        "        Token:              '#dddddd',\n        Error: '#e37170 bold',\n"
        '    307        "crypto_aead_chacha20poly1305_ietf_NSECBYTES",\n'
        "    14    # Account SID (ACxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx)\n"
        '   114    `{"access_token": "hf_jwt_\u2026", "token_type": "bearer"}`\n'
        '    13    client = OpenAI(base_url="http://localhost:8000/v1", api_key="fake-key")'
    ),
    "names and mapping keys": (
        '    13    "AMD-Instinct-MI300X-OAM": "AMD Instinct MI300X",\n'
        '    85    FASTAPI_HTTP_USER_ID_TAG_KEY: "truncated",'
    ),
    "a resource's base64 blob": (
        "[structured content]\n"
        + json.dumps(
            {
                "blob": base64.b64encode(
                    b"time,height_m,quality\n2024-03-01T00:00:00,3.200,good\n"
                    b"2024-03-01T00:15:00,3.465,good\n2024-03-01T00:30:00,3.726,good\n"
                ).decode()
            }
        )
    ),
}


@pytest.mark.parametrize("text", NOT_SECRETS.values(), ids=NOT_SECRETS.keys())
def test_what_only_names_a_secret_is_left(text: str) -> None:
    scrubber = Scrubber(ScrubSettings())
    assert scrubber.text(text) == text, scrubber.counts


PERSONAL = {
    "e-mail": ("Author: Maya Lin <maya.lin@gmail.com>", "Author: Maya Lin <<EMAIL>>"),
    "e-mail at a lookalike domain": ("bob@example.co.uk", "<EMAIL>"),
    "e-mail at a subdomain of a lookalike": ("bob@notexample.com", "<EMAIL>"),
    "ping": (
        "PING 93.184.216.34 (93.184.216.34) 56(84) bytes of data.\n"
        "64 bytes from 93.184.216.34: icmp_seq=1 ttl=56 time=11.6 ms",
        "PING <IP> (<IP>) 56(84) bytes of data.\n"
        "64 bytes from <IP>: icmp_seq=1 ttl=56 time=11.6 ms",
    ),
    "ip addr": (
        "inet 172.17.0.2/16 brd 172.17.255.255 scope global eth0\n"
        "inet6 fe80::42:acff:fe11:2/64 scope link",
        "inet <IP>/16 brd <IP> scope global eth0\ninet6 <IP>/64 scope link",
    ),
    "port": ("listening on 10.0.3.7:8080", "listening on <IP>:8080"),
    "URL": ("curl http://10.1.2.3/status", "curl http://<IP>/status"),
    "user@host": ("ssh deploy@34.120.7.9", "ssh deploy@<IP>"),
    "sshd log": (
        "Failed password for root from 45.33.32.156 port 51234 ssh2",
        "Failed password for root from <IP> port 51234 ssh2",
    ),
    "access log": (
        '81.2.69.160 - - [01/Mar/2024:08:00:00 +0000] "GET / HTTP/1.1" 200 612',
        '<IP> - - [01/Mar/2024:08:00:00 +0000] "GET / HTTP/1.1" 200 612',
    ),
    "hosts file": ("10.20.30.40  db.internal db", "<IP>  db.internal db"),
    "alone on a line": ("$ hostname -I\n172.18.0.5 \n", "$ hostname -I\n<IP> \n"),
    "JSON": ('{"client_ip": "81.2.69.160", "ok": true}', '{"client_ip": "<IP>", "ok": true}'),
    "header": ("X-Forwarded-For: 81.2.69.160", "X-Forwarded-For: <IP>"),
    "IPv6 alone": ("2a00:1450:4001:82a::200e is up", "<IP> is up"),
    "IPv6 with a zone": ("ping fe80::1%eth0", "ping <IP>%eth0"),
    "token in a non-badge URL": (
        "GET https://api.shop.io/v1/orders?token=xJ1kD8Yc2L9qWe",
        "GET https://api.shop.io/v1/orders?token=<SECRET:token>",
    ),
    "keyword argument with a literal": (
        'client = Client(api_key="Zq8vN2xLp4Rt7Wm1")',
        'client = Client(api_key="<SECRET:key>")',
    ),
    "sshpass": ("sshpass -p 'Hunter2xyz' ssh db", "sshpass -p '<PASSWORD>' ssh db"),
    "ssh-keygen": ("ssh-keygen -N s3cretPass -f k", "ssh-keygen -N <PASSWORD> -f k"),
    "a base64 blob of random bytes": (
        '{"blob": "' + base64.b64encode(bytes(range(7, 255, 5))).decode() + '"}',
        '{"blob": "<SECRET:random_token>"}',
    ),
    "a URL password": (
        "git clone https://alice:hunter2@github.com/org/repo.git",
        "git clone https://alice:<PASSWORD>@github.com/org/repo.git",
    ),
    "mail header": (
        "Received: from wijiji.santafe.edu (wijiji [192.12.12.5])",
        "Received: from wijiji.santafe.edu (wijiji [<IP>])",
    ),
    "token in a markdown link": (
        "[orders](https://api.shop.io/v1/orders?token=xJ1kD8Yc2L9qWe) and more",
        "[orders](https://api.shop.io/v1/orders?token=<SECRET:token>) and more",
    ),
}


@pytest.mark.parametrize(("text", "expected"), PERSONAL.values(), ids=PERSONAL.keys())
def test_personal_data_and_secrets_near_the_false_positives_are_still_scrubbed(
    text: str, expected: str
) -> None:
    assert Scrubber(ScrubSettings()).text(text) == expected


# --------------------------------------------------------------------------- the precision set

PRECISION_SET = Path(__file__).parents[2] / "benchmarks" / "data" / "scrub_precision.jsonl.gz"
"""Real observation texts of every domain holding no secret and no personal data (built and
read by benchmarks/scrubbing.py, described in docs/scrubbing.md)."""
TARGET_FP_RATE = 0.005
NEAR_MISSES = PRECISION_SET.with_name("scrub_near_misses.json")
"""Near-misses of context secrets (issue 24), some with the action that printed them."""


def test_precision_set_false_positives_are_under_half_a_percent_per_domain() -> None:
    with gzip.open(PRECISION_SET, "rt", encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle]
    near_misses = json.loads(NEAR_MISSES.read_text())["rows"]
    assert {row["domain"] for row in near_misses} == {"terminal", "swe", "mcp"}
    rows += near_misses
    scrubber = Scrubber(ScrubSettings())
    rows_of: Counter[str] = Counter()
    changed: dict[str, list[str]] = {}
    for row in rows:
        rows_of[row["domain"]] += 1
        width = row["columns"] if row["format"] == "terminal-screen" else None
        if row.get("action"):
            after = scrubber.observation(
                row["text"], row["format"], width, row["action"], row.get("domain")
            )
            if after != row["text"]:
                changed.setdefault(row["domain"], []).append(f"{row['id']}: {after!r}")
        elif scrubber.text(row["text"], width=width) != row["text"]:
            text = LogicalText(row["text"], width).logical
            spans = [f"{k} {text[s:e]!r}" for k, s, e in scrubber.finder.find(text)]
            changed.setdefault(row["domain"], []).append(f"{row['id']}: {', '.join(spans)}")
    assert set(rows_of) == {"terminal", "swe", "mcp", "search", "web", "os"} & set(rows_of)
    assert len(rows_of) >= 4 and min(rows_of.values()) >= 100, rows_of
    rates = {domain: len(changed.get(domain, [])) / n for domain, n in rows_of.items()}
    assert max(rates.values()) < TARGET_FP_RATE, (rates, changed)


# --------------------------------------------------------------------------- e-mail and IPs


def reference(text: str, settings: ScrubSettings) -> tuple[str, Counter[str]]:
    """E-mail and IP scrubbing the slow, obvious way: full patterns over the whole text, each
    match judged on its own line."""
    found: list[Finding] = []
    for pattern, kind, keep in (
        (EMAIL, "email", email_is_personal if settings.emails else None),
        (IPV4, "ipv4", ipv4_is_address if settings.ips else None),
        (IPV6, "ipv6", ipv6_is_address if settings.ips else None),
    ):
        for match in pattern.finditer(text) if keep else ():
            start = text.rfind("\n", 0, match.start()) + 1
            end = text.find("\n", match.end())
            line = text[start : len(text) if end < 0 else end]
            if keep(line, match.start() - start, match.end() - start):
                found.append(Finding(kind, *match.span()))
    spans = merge(found)
    out, done = [], 0
    for kind, start, end in spans:
        out += [text[done:start], "<EMAIL>" if kind == "email" else "<IP>"]
        done = end
    out.append(text[done:])
    return "".join(out), Counter(f.kind for f in spans)


CASES = [
    # a prompt has '@' but no e-mail; a clock has colons but no IPv6 address
    "root@wt:/etc# ls\n12:34:56 up 3 days\nroot@wt:/etc# ",
    "mail bob@example.com\nroot@wt:~# ping 8.8.4.4\n",
    "mail bob@corp.io\nroot@wt:~# ping 8.8.4.4\ninet 10.0.0.5/24 brd 10.0.0.255\n",
    "first line\nfe80::1 on eth0\n2001:db8:0:0:0:0:0:1\n1:2:3:4:5:6:7:8",
    "ip -6 route: 2a00:1450::1 via fe80::1 dev eth0\nxs[1::2] 0::/docker/abc",
    "10:23:45:67:89 not an address\n::1 and :: are kept, 127.0.0.1 too",
    "a@b.co\nc@d.org",  # hinted lines at the very start and end of the text
    "\n\n8.8.8.8\n\nx@y.io\n",
    "version 1.2.3.4.5 and 256.1.1.1 and 1.2.3.4",
    "ii  libfoo  1.0.0.7-10+b3  amd64\n10.1.1.1 db.internal\n  ssh root@10.1.1.2 -p 22",
    "café@example.com é1.2.3.4 ab::cd",
    "line\r\nuser@host.example.com\r\nuser@host.corp.de\r\n",
]


@pytest.mark.parametrize("text", CASES)
@pytest.mark.parametrize("settings", [ScrubSettings(), ScrubSettings(emails=False, ips=False)])
def test_email_and_ip_scrubbing_matches_reference(text: str, settings: ScrubSettings) -> None:
    scrubber = Scrubber(settings)
    expected, counts = reference(text, settings)
    assert scrubber.text(text) == expected
    assert +scrubber.counts == counts


def test_email_and_ip_scrubbing_matches_reference_on_random_screens() -> None:
    atoms = [
        "a", "F", "0", "9", "255", ".", ":", "::", "@", "\n", " ", "-", "_", "%", "é",
        "x.com", "mail.example.org", "bob", "fe80", "db8", "2001", "127.0.0.1", "8.8.4.4",
        "10:23:45", "0:0:0:0:0:0:0:1", "ping ", "inet ", ":8080", "/24", "-1", "/x", "(",
        "192.0.2.1", "host.io",
    ]  # fmt: skip
    rng = random.Random(7)
    changed = 0
    for _ in range(3000):
        # words of atoms: a run of 20 letters and digits could be a random-looking token
        text = " ".join(
            "".join(rng.choice(atoms) for _ in range(rng.randint(1, 6)))
            for _ in range(rng.randint(1, 6))
        )
        scrubber = Scrubber(ScrubSettings())
        expected, counts = reference(text, ScrubSettings())
        assert scrubber.text(text) == expected, text
        assert +scrubber.counts == counts, text
        changed += expected != text
    assert changed > 300  # the random texts do exercise the replacements


def test_json_column_untouched_without_secrets_and_scrubbed_with_them() -> None:
    scrubber = Scrubber(ScrubSettings())
    raw = json.dumps({"cwd": "/root", "keys": ["ls -la", "Enter"]})
    assert scrubber.json_column(raw) is raw
    escaped = json.dumps({"to": "bob\u0040corp.io"}, ensure_ascii=True).replace("@", "\\u0040")
    assert json.loads(scrubber.json_column(escaped) or "") == {"to": "<EMAIL>"}
    assert scrubber.counts == Counter({"email": 1})


def test_scrub_step_tallies_repeated_screens_per_document() -> None:
    row = to_row(make_transition(task="mail bob@corp.io"))
    docs = [Document(text="", id=f"d{i}", metadata=copy.deepcopy(row)) for i in range(3)]
    step = ScrubStep(ScrubSettings())
    out = list(step.run(iter(docs)))
    assert [doc.metadata["task"] for doc in out] == ["mail <EMAIL>"] * 3
    assert step.tallies["terminal|sha256:abc|scrubbed:email"] == 3
    assert step.tallies["terminal|sha256:abc|scrubbed_rows"] == 3


def test_placeholders_are_typed_and_scrubbing_twice_changes_nothing() -> None:
    token, password = "sk_live_" + rand(24), "hunter2-" + rand(6)
    rows = record([(f"export STRIPE_KEY={token} DB_PASSWORD={password}", [])])
    once = scrub(rows)
    screen = once[0]["next_observation"]["text"]
    assert re.search(r"STRIPE_KEY=<SECRET:stripe_key> DB_PASSWORD=<PASSWORD>", screen)
    assert scrub(once) == once


def recorded_rows(
    run: Path, image: str, task: Any, actions: list[Action], name: str, max_steps: int
) -> list[dict[str, Any]]:
    """Replay ``actions`` in a real terminal episode of ``task``; the normalized rows."""
    from worldtrace.collectors.base import ReplayPolicy
    from worldtrace.collectors.episode import EpisodeLimits, run_episode
    from worldtrace.collectors.recorder import RunRecorder
    from worldtrace.collectors.terminal import TerminalCollector
    from worldtrace.collectors.terminal.environment import TerminalConfig
    from worldtrace.normalizers.run import normalize_run

    collector = TerminalCollector()
    config = TerminalConfig(image=image)
    env = collector.make_environment(config)
    recorder = RunRecorder(run, {"domain": "terminal", "run_name": name})
    plan = collector.plan(0, 1, "script", None, config)
    plan.task = task
    try:
        result = run_episode(
            env,
            ReplayPolicy(actions),
            recorder.begin(f"{name}-ep"),
            plan,
            EpisodeLimits(max_steps, 20),
        )
    finally:
        env.close()
    assert result.steps == len(actions)
    assert normalize_run(run).transitions == len(actions)
    return pl.read_parquet(sorted((run / "transitions").glob("*/*.parquet"))).to_dicts()


@pytest.mark.docker
def test_a_recorded_episode_with_the_attacks_secrets_is_curated_clean(
    tmp_path: Path, terminal_image: str
) -> None:
    """The attack replayed in a real sandbox, recorded, normalized and curated."""
    from worldtrace.collectors.terminal.actions import command
    from worldtrace.collectors.terminal.tasks.helpers import TerminalTask, write_file

    token, slack = "ghp_" + rand(36), f"xoxb-{rand(11, string.digits)}-{rand(24).lower()}"
    password, key_text = "Xk9#pLm2!" + rand(8), pem_key()
    key, body = key_text
    task = TerminalTask(
        name="attack",
        instruction="configure the service",
        setup=(
            write_file("/home/user/work/.env", f"DB_PASSWORD={password}\nLOG_LEVEL=info"),
            write_file("/home/user/work/id_rsa", "\n".join([*filler(8), key, *filler(14)])),
            write_file("/home/user/work/notify.log", "notify " + "-" * 141 + f" bot={slack}"),
        ),
    )
    prompt = "user@sandbox:~/work$ "
    pad = padding(f"{prompt}echo 'deploy ", "' && export GITHUB_TOKEN=", 140)
    actions = [
        command("cd ~/work && clear"),
        command(f"echo 'deploy {pad}' && export GITHUB_TOKEN={token}"),  # wraps in the token
        command("cat notify.log"),  # wraps in the Slack token
        command("cat .env"),
        command("clear && cat id_rsa"),  # the BEGIN line scrolls into new_scrollback
        command("ls"),
    ]
    run = tmp_path / "run"
    recorded = recorded_rows(run, terminal_image, task, actions, "attack", 10)
    for secret in (token, slack, password, *body):
        assert leaks(recorded, secret), f"not planted: {secret}"
    assert any(
        "BEGIN RSA" in json.loads(row["next_observation"]["meta"])["new_scrollback"]
        for row in recorded
    )

    out = tmp_path / "curated"
    curate(run, out, CurationConfig(minhash={"enabled": False}, filters={"noop": "keep"}))
    curated = pl.read_parquet(sorted((out / "transitions").glob("*/*.parquet"))).to_dicts()
    assert len(curated) == len(recorded)
    for secret in (token, slack, password, *body):
        assert not leaks(curated, secret), secret


@pytest.mark.docker
def test_a_recorded_episode_with_context_secrets_is_curated_clean(
    tmp_path: Path, terminal_image: str
) -> None:
    """Context secrets in a real sandbox: credential files read with ``cat``, tokens printed by
    commands that were asked for them (fake tools: the real ones need an account), one
    printed without a newline so that the prompt follows it, one on a cleared screen."""
    from worldtrace.collectors.terminal.actions import command
    from worldtrace.collectors.terminal.tasks.helpers import TerminalTask, write_file

    work = "/home/user/work"
    encoded = base64.b64encode(DB_PASSWORD.encode()).decode()
    key, body = pem_key(body_lines=8, label="OPENSSH PRIVATE KEY")
    tools = {
        "heroku": f"printf '%s\\n' {HEROKU_TOKEN}",
        "aws": f"printf '%s\\n' {AWS_SECRET}",
        "kubectl": f"printf %s {encoded}",
    }
    task = TerminalTask(
        name="context-secrets",
        instruction="look around",
        setup=(
            write_file(f"{work}/.netrc", NETRC),
            write_file(f"{work}/.pgpass", PGPASS),
            write_file(f"{work}/.git-credentials", GIT_CREDENTIALS),
            write_file(f"{work}/.ssh/id_ed25519", key),
            *(
                write_file(f"{work}/bin/{name}", f"#!/bin/sh\n{line}", "755")
                for name, line in tools.items()
            ),
        ),
    )
    actions = [
        command(f"cd {work} && export PATH=$PWD/bin:$PATH && clear"),
        command("cat .netrc"),
        command("cat .pgpass"),
        command("clear; cat .git-credentials"),
        command("clear; heroku auth:token"),
        command("aws configure get aws_secret_access_key"),
        command("kubectl get secret db -o jsonpath='{.data.password}'"),
        command("clear && cat .ssh/id_ed25519 | tail -n 4"),
        command("ls"),
    ]
    run = tmp_path / "run"
    recorded = recorded_rows(run, terminal_image, task, actions, "context", 12)
    secrets = [
        NETRC_PASSWORD, NETRC_PASSWORD[::-1], PG_PASSWORD, DB_PASSWORD, GIT_TOKEN,
        DB_PASSWORD[::-1], HEROKU_TOKEN, AWS_SECRET, encoded, *body[-3:],
    ]  # fmt: skip
    for secret in secrets:
        assert leaks(recorded, secret), f"not planted: {secret}"
    assert any(encoded + "user@" in row["next_observation"]["text"] for row in recorded)

    out = tmp_path / "curated"
    curate(run, out, CurationConfig(minhash={"enabled": False}, filters={"noop": "keep"}))
    curated = pl.read_parquet(sorted((out / "transitions").glob("*/*.parquet"))).to_dicts()
    assert len(curated) == len(recorded)
    for secret in secrets:
        assert not leaks(curated, secret), secret
