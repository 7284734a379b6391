"""Nothing an action contained or an environment returned reaches Prefect's database or logs.

The attack this guards against: a replay policy's action list with a planted AWS key sat three
times in Prefect's SQLite write-ahead log, because the flow took the whole configuration as
its parameter. Flows now take the run directory (or pipeline file) and a digest.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import pytest
from typer.testing import CliRunner

from worldtrace.collectors.recorder import read_episode
from worldtrace.flows.cli import app

pytestmark = pytest.mark.docker


def _files_holding(root: Path, needle: bytes) -> list[str]:
    return sorted(
        str(path.relative_to(root))
        for path in root.rglob("*")
        if path.is_file() and needle in path.read_bytes()
    )


def test_a_planted_key_in_replayed_actions_never_reaches_prefect(tmp_path, site_images) -> None:
    prefect_home = Path(os.environ["PREFECT_HOME"])
    key = "AKIA" + secrets.token_hex(8).upper()
    password = "hunter-" + secrets.token_hex(6)
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text(
        f"""
collect:
  domain: web
  episodes: 1
  out: {tmp_path / "runs"}
  run_name: planted
  environment: {{site: datasette, screenshot: false}}
  policy:
    kind: replay
    params:
      actions:
        - "send_msg_to_user('my key is {key}')"
        - "fill('99999', '{password}')"
        - "keyboard_type('{key}')"
curate: {{}}
corpus: {tmp_path / "corpus"}
publish:
  to: {tmp_path / "dist"}
"""
    )
    result = CliRunner().invoke(app, ["run", str(pipeline)])
    assert result.exit_code == 0, result.output

    # Control: the run did record the actions, key and all (raw records are lossless).
    (episode,) = (tmp_path / "runs" / "planted" / "raw" / "episodes").glob("*.jsonl")
    texts = [e.action.text for e in read_episode(episode) if e.type == "step"]
    assert any(key in text for text in texts)
    assert any(password in text for text in texts)
    # Prefect kept its database (with its write-ahead log) in this session's home.
    assert list(prefect_home.rglob("*.db*"))
    assert _files_holding(prefect_home, b"collect-episode")  # control: runs were stored
    assert _files_holding(prefect_home, key.encode()) == []
    assert _files_holding(prefect_home, password.encode()) == []
