"""The mcp image: every server of the manifest answers, at its pinned version, over seeded state.

One container for the whole module (nothing here changes the seeded state), started like an
episode's: ``--network none``, read-only root, a capped disk under the writable paths. The
servers are spoken to through the bare SDK (``/opt/mcp-venv/bin/python``), not our driver.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from worldtrace.collectors.mcp.servers import (
    IMAGE_TAG,
    MANIFEST_IN_IMAGE,
    SDK_VERSION,
    SERVERS,
    load_servers,
)
from worldtrace.sandboxes.docker import DockerSandbox
from worldtrace.sandboxes.limits import Limits
from worldtrace.schemas.errors import ConfigError

pytestmark = pytest.mark.docker

# Run as `user` with the image's SDK: start each server of the manifest the way the driver
# does (its stdio command and env; the everything server also over streamable HTTP), do the
# initialize handshake and tools/list, and say which uid each server's process has.
PROBE = r"""
import json, os, subprocess, sys, time
import anyio
from mcp import Client, StdioServerParameters

manifest = json.load(open(sys.argv[1]))["servers"]


def server_uids(marker):
    lines = subprocess.run(["ps", "-eo", "uid=,args="], capture_output=True, text=True).stdout
    return sorted({int(line.split(None, 1)[0]) for line in lines.splitlines()
                   if marker in line and "ps -eo" not in line and "probe" not in line})


async def talk(target, marker):
    async with Client(target, mode="legacy") as client:
        tools = await client.list_tools()
        return {
            "server_info": [client.server_info.name, client.server_info.version],
            "protocol_version": client.protocol_version,
            "tools": sorted(tool.name for tool in tools.tools),
            "uids": server_uids(marker),
        }


async def main():
    report = {}
    for name, spec in manifest.items():
        command = spec["transports"]["stdio"]["command"]
        params = StdioServerParameters(
            command=command[0], args=command[1:], env=spec["env"], cwd="/tmp"
        )
        report[name] = await talk(params, command[-1] if len(command) > 1 else command[0])
    http = manifest["everything"]["transports"]["http"]
    process = subprocess.Popen(
        http["command"], env={**os.environ, **manifest["everything"]["env"]},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(100):
            try:
                report["everything/http"] = await talk(http["url"], "streamableHttp")
                break
            except Exception:
                time.sleep(0.1)
    finally:
        process.terminate()
        process.wait()
    print(json.dumps(report))


anyio.run(main)
"""

EXPECTED_TOOLS = {
    "filesystem": {
        "read_text_file",
        "read_multiple_files",
        "write_file",
        "edit_file",
        "create_directory",
        "list_directory",
        "directory_tree",
        "move_file",
        "search_files",
        "get_file_info",
        "list_allowed_directories",
    },
    "git": {
        "git_status",
        "git_log",
        "git_diff",
        "git_add",
        "git_commit",
        "git_create_branch",
        "git_checkout",
        "git_show",
        "git_branch",
    },
    "memory": {
        "create_entities",
        "create_relations",
        "add_observations",
        "delete_entities",
        "delete_observations",
        "delete_relations",
        "read_graph",
        "search_nodes",
        "open_nodes",
    },
    "postgres": {"query"},
    "time": {"get_current_time", "convert_time"},
    "fetch": {"fetch"},
    "everything": {"echo", "get-sum"},
}


@pytest.fixture(scope="module")
def sandbox(mcp_image: str) -> Iterator[DockerSandbox]:
    """One sandbox of the image with PostgreSQL started, as an episode has it."""
    box = DockerSandbox(IMAGE_TAG, limits=Limits(disk_mb=256, cpus=2), network="none").start()
    try:
        started = box.exec(["/opt/worldtrace/start_postgres.sh"], timeout=30)
        assert started.exit_code == 0, started.stderr.decode()
        yield box
    finally:
        box.close()


@pytest.fixture(scope="module")
def probe(sandbox: DockerSandbox) -> dict:
    """What every server said to the bare SDK: server info, protocol, tool names, uids."""
    sandbox.put_file("/tmp/probe.py", PROBE.encode())
    result = sandbox.exec(
        ["/opt/mcp-venv/bin/python", "/tmp/probe.py", MANIFEST_IN_IMAGE], timeout=120, user="user"
    )
    assert result.exit_code == 0, result.stderr.decode()[-3000:]
    return json.loads(result.text)


def run(sandbox: DockerSandbox, command: str, user: str | None = None) -> str:
    """Stdout of a shell command in the sandbox; fails the test on a non-zero exit."""
    result = sandbox.exec(command, timeout=30, user=user)
    assert result.exit_code == 0, f"{command}: {result.stderr.decode()}"
    return result.text


@pytest.mark.parametrize("name", [*SERVERS, "everything/http"])
def test_every_server_answers_initialize_and_tools_list(probe: dict, name: str) -> None:
    """Each server does the handshake with the SDK and lists at least the tools we rely on."""
    answer = probe[name]
    server = name.split("/")[0]
    assert answer["protocol_version"], answer
    assert EXPECTED_TOOLS[server] <= set(answer["tools"]), answer["tools"]


def test_servers_run_as_uid_1000(probe: dict) -> None:
    """A server started by `user` runs as uid 1000 (its files on the disk belong to user)."""
    assert {name: answer["uids"] for name, answer in probe.items()} == {
        name: [1000] for name in probe
    }


def test_installed_versions_match_the_manifest(sandbox: DockerSandbox) -> None:
    """Each package is installed at the manifest's version; the SDK at SDK_VERSION.

    Read from the installed packages, not the handshake: servers report other versions there
    (server-filesystem 2026.8.31 says 0.2.0).
    """
    npm = json.loads(
        run(
            sandbox,
            "node -e 'const out = {}; for (const p of process.argv.slice(1)) out[p] = "
            'require("/opt/mcp-npm/node_modules/" + p + "/package.json").version; '
            "console.log(JSON.stringify(out))' "
            + " ".join(s.package for s in SERVERS.values() if s.registry == "npm"),
        )
    )
    pypi_names = [s.package for s in SERVERS.values() if s.registry == "pypi"] + ["mcp"]
    pypi = json.loads(
        run(
            sandbox,
            "/opt/mcp-venv/bin/python -c 'import importlib.metadata as m, json, sys; "
            "print(json.dumps({p: m.version(p) for p in sys.argv[1:]}))' " + " ".join(pypi_names),
        )
    )
    installed = {**npm, **pypi}
    assert installed.pop("mcp") == SDK_VERSION
    assert installed == {s.package: s.version for s in SERVERS.values()}


def test_seeded_project_folder(sandbox: DockerSandbox) -> None:
    """/srv/project: 33 files, owned by user, fixed modification times."""
    listing = run(sandbox, "cd /srv/project && find . -type f -printf '%u %TY %P\\n' | sort")
    rows = [line.split(" ", 2) for line in listing.splitlines()]
    assert len(rows) == 33
    assert {(owner, year) for owner, year, _ in rows} == {("user", "2000")}
    assert "src/tidewatch/readings.py" in {path for _, _, path in rows}


def test_seeded_git_repository(sandbox: DockerSandbox) -> None:
    """/srv/repo: 9 commits over 3 branches, a tag, a clean tree on main, stable ids."""
    git = "git -C /srv/repo"
    assert run(sandbox, f"{git} rev-list --all | wc -l").strip() == "9"
    assert run(sandbox, f"{git} branch --format='%(refname:short)'").split() == [
        "feature/cli",
        "fix/unicode",
        "main",
    ]
    assert run(sandbox, f"{git} rev-parse --abbrev-ref HEAD").strip() == "main"
    # Fixed authors and dates: the same ids in every build (the other helpers' tasks use them).
    assert run(sandbox, f"{git} rev-parse main").strip() == (
        "c3991bbf1bd50c64465b72afc16c34929905c2a6"
    )
    assert run(sandbox, f"{git} rev-list --count main").strip() == "6"
    assert run(sandbox, f"{git} tag").split() == ["v0.1.0"]
    assert run(sandbox, f"{git} status --porcelain", user="user") == ""
    log = run(sandbox, f"{git} log --format='%an|%aI|%s' fix/unicode -1")
    assert log.strip() == (
        "Maya Chen|2024-01-12T09:30:00+00:00|Tokenizer: keep accented letters (café, naïve)"
    )


def test_seeded_memory_graph(sandbox: DockerSandbox) -> None:
    """The memory file holds 6 entities and 6 relations in the server's own JSONL form."""
    text = run(sandbox, "cat /srv/memory/memory.jsonl")
    items = [json.loads(line) for line in text.split("\n")]
    assert not text.endswith("\n")  # the server joins lines with "\n" and adds none at the end
    assert [item["type"] for item in items].count("entity") == 6
    assert [item["type"] for item in items].count("relation") == 6
    assert run(sandbox, "stat -c %U /srv/memory /srv/memory/memory.jsonl").split() == ["user"] * 2


def test_seeded_shop_database_readable_by_mcp(sandbox: DockerSandbox) -> None:
    """Role mcp reads every table of shop over loopback TCP; the row counts are the seeded ones."""
    counts = {
        "categories": 12,
        "suppliers": 8,
        "products": 40,
        "customers": 120,
        "orders": 300,
        "order_items": 762,
        "reviews": 150,
    }
    query = " UNION ALL ".join(f"SELECT '{t}', count(*) FROM {t}" for t in counts)
    psql = 'psql -X -At -F= "postgresql://mcp@127.0.0.1:5432/shop"'
    out = run(sandbox, f'{psql} -c "{query}"')
    assert dict(line.split("=") for line in out.splitlines()) == {
        t: str(n) for t, n in counts.items()
    }
    # The rows themselves are the seeded ones (random.Random(2024)), not just their number.
    total = run(sandbox, f'{psql} -c "SELECT sum(quantity * unit_price) FROM order_items"')
    assert total.strip() == "137866.41"
    refused = sandbox.exec(
        'psql -X "postgresql://mcp@127.0.0.1:5432/shop" -c "DELETE FROM reviews"', timeout=30
    )
    assert refused.exit_code != 0 and b"permission denied" in refused.stderr


def test_start_postgres_is_idempotent_and_fast(sandbox: DockerSandbox) -> None:
    """A second start leaves the running cluster alone; the cluster belongs to postgres."""
    started = time.monotonic()
    run(sandbox, "/opt/worldtrace/start_postgres.sh")
    assert time.monotonic() - started < 2
    assert run(sandbox, "pgrep -c -u postgres -x postgres").strip() != "0"
    assert run(sandbox, "stat -c %U /var/lib/postgresql/15/main").strip() == "postgres"


def test_postgres_starts_cold_under_network_none(mcp_image: str) -> None:
    """A fresh sandbox without network starts the cluster from the image in under 2 s."""
    with DockerSandbox(IMAGE_TAG, limits=Limits(disk_mb=128), network="none") as box:
        started = time.monotonic()
        result = box.exec(["/opt/worldtrace/start_postgres.sh"], timeout=30)
        took = time.monotonic() - started
        assert result.exit_code == 0, result.stderr.decode()
        assert took < 2, took
        assert run(box, "psql -X -At postgresql://mcp@127.0.0.1/shop -c 'SELECT 1'") == "1\n"


def test_a_malformed_manifest_is_refused_naming_the_field(tmp_path: Path) -> None:
    """A manifest with a missing version and an http transport without url: both named."""
    entry = json.loads(SERVERS["everything"].model_dump_json(exclude={"name"}))
    del entry["version"]
    del entry["transports"]["http"]["url"]
    path = tmp_path / "servers.json"
    path.write_text(json.dumps({"servers": {"everything": entry}}))
    with pytest.raises(ConfigError) as caught:
        load_servers(path)
    assert "servers.everything.version: Field required" in str(caught.value)
    (path).write_text("{not json")
    with pytest.raises(ConfigError, match="cannot read"):
        load_servers(path)
