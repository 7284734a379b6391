"""`worldtrace collect web` end to end: real sites, real Chromium, real Prefect, polars reads it."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from PIL import Image

from tests.prefect_server import client_env
from worldtrace.collectors.recorder import read_episode
from worldtrace.collectors.web import WebCollector, WebConfig, browser
from worldtrace.schemas import Transition, from_row

pytestmark = pytest.mark.docker


def test_collect_web_produces_transitions_that_pass_the_schema_and_load_in_polars(
    tmp_path: Path, site_images: None, prefect_server: str
) -> None:
    command = [
        sys.executable, "-m", "worldtrace.flows.cli", "collect", "web",
        "--site", "datasette", "--policy", "explore",
        "--episodes", "2", "--workers", "2", "--max-steps", "4",
        "--out", str(tmp_path), "--run-name", "web",
    ]  # fmt: skip
    # On the session's server: the temporary API costs 11 s of CPU and is not this test's subject.
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=600, env=client_env(prefect_server)
    )
    assert result.returncode == 0, result.stdout + result.stderr
    run_dir = tmp_path / "web"
    assert '"site": "datasette"' in (run_dir / "run.json").read_text()

    # Raw records keep the full accessibility tree, so the text can be rendered again.
    episodes = sorted((run_dir / "raw" / "episodes").glob("*.jsonl"))
    assert len(episodes) == 2
    start = next(iter(read_episode(episodes[0])))
    assert start.observation["axtree"]["nodes"]

    frame = pl.read_parquet(run_dir / "transitions" / "web" / "*.parquet")
    assert frame.height == 8
    assert set(frame["domain"]) == {"web"}
    assert (
        frame.select(pl.col("observation").struct.field("format")).to_series().to_list()
        == ["axtree"] * 8
    )
    for row in frame.to_dicts():
        transition = from_row(Transition, row)  # raises if a row breaks the schema
        assert transition.observation.text.startswith("RootWebArea")
        assert transition.env.name == "web/datasette"
        assert "chromium" in transition.env.components
        assert transition.action.text.split("(")[0] in {
            "click", "fill", "select_option", "scroll", "go_back", "go_forward",
            "tab_close", "tab_focus", "new_tab", "goto",
        }  # fmt: skip
        meta = transition.next_observation.meta
        assert meta["url"].startswith("http://datasette.test/") or meta["url"] == "about:blank"
        assert isinstance(meta["noop"], bool)
        assert set(meta["timing"]) >= {"action_s", "settle_s", "extract_s", "screenshot_s"}
        screenshot = transition.next_observation.screenshot
        assert screenshot is not None
        assert Image.open(io.BytesIO(screenshot)).size == (1280, 720)
    # The same seed range, two workers: two different walks.
    by_episode = frame.group_by("episode_id").agg(pl.col("action").struct.field("text"))
    walks = [tuple(texts) for texts in by_episode["text"].to_list()]
    assert len(set(walks)) == 2


def test_collect_web_refuses_an_unknown_site_with_a_clear_error(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "worldtrace.flows.cli", "collect", "web", "--site", "nope", "--out",
         str(tmp_path), "--policy", "explore"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2
    assert "nope" in result.stderr + result.stdout


def test_without_chromium_a_web_collection_names_the_setup_that_installs_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A machine set up for the demo: `make setup` installs the core's packages only.
    monkeypatch.setattr(browser, "CHROMIUM_CANDIDATES", ("/nonexistent/chromium",))
    real_which = shutil.which
    monkeypatch.setattr(
        shutil, "which", lambda name, *a, **k: None if name == "chromium" else real_which(name)
    )
    # The path is looked up once per process: forget it here, and again for the tests after.
    browser.chromium_path.cache_clear()
    try:
        with pytest.raises(browser.BrowserUnavailable, match="`make setup WORLDTRACE_DOMAINS=web`"):
            WebCollector().preflight(WebConfig())
    finally:
        browser.chromium_path.cache_clear()
