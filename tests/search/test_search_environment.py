"""The search environment against the real engine, corpus and site of ``worldtrace/search``.

Each test resets real episodes (a fresh container, the site server on its loopback, the Xapian
index opened, an empty memory) and checks what the host records: the tools and the corpus
identity, ranked results, pages and memory results as the driver gives them, the memory and its
diff after every step, errors that change nothing, and how an episode ends when the driver is
lost. The scripted task library is played here too: a sample by default, all of it with
``WORLDTRACE_FULL_TASKS=1``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.full_run import FULL
from worldtrace.collectors.base import HistoryItem, StepOutcome
from worldtrace.collectors.search.actions import TOOLS, dict_memory, web_extractor, web_search
from worldtrace.collectors.search.environment import SearchConfig, SearchEnvironment
from worldtrace.collectors.search.explore import SearchExplorePolicy
from worldtrace.collectors.search.render import SearchRenderer
from worldtrace.collectors.search.tasks import load_tasks
from worldtrace.collectors.tool_calls import tool_call
from worldtrace.schemas import Action

pytestmark = pytest.mark.docker

RENDER = SearchRenderer()
BASE = "http://docs.localhost/"
SAMPLE = (
    "git-rebase-autostash",
    "postgresql-default-port",
    "python-lru-cache-default-size",
    "man-ls-sort-by-time",
    "man-sigkill-number",
    "sqlite-enable-wal",
    "debian-reference-which-package-owns-file",
)
"""Tasks played by default: one per collection, and tasks that search twice or use their memory
more than once (names checked against the library below)."""
LIBRARY = {task.name: task for task in load_tasks()}


def text(outcome: StepOutcome) -> str:
    """The rendered observation text of a step."""
    return RENDER.observation(outcome.observation).text


def test_reset_lists_the_tools_and_the_corpus_identity(
    search_env: SearchEnvironment, search_image: str
) -> None:
    first = search_env.reset(0, None)
    assert first["tools"] == [dict(tool) for tool in TOOLS]
    assert first["memory"] == {} and first["state_diff"] is None
    corpus = first["corpus"]
    assert corpus["documents"]["total"] >= 20_000
    observation = RENDER.observation(first)
    assert observation.text.startswith(f"Documentation search over {BASE}: ")
    assert "Tools: web_search, web_extractor, dict_memory" in observation.text
    identity = search_env.describe()
    assert identity.name == "search/docs"
    assert identity.version == identity.components["image_digest"] == search_image
    assert identity.components["engine"] == "xapian"
    assert identity.components["index_sha256"] == corpus["index"]["sha256"]
    assert len(identity.components["index_sha256"]) == 64
    assert identity.components["packages"]["git-doc"]
    assert identity.components["converter"] == "markdownify"


def test_a_known_query_ranks_its_page_first_and_a_nonsense_one_finds_nothing(
    search_env: SearchEnvironment,
) -> None:
    search_env.reset(0, None)
    found = search_env.step(web_search("git rebase autostash", 5), 30)
    assert found.error is None
    assert found.observation["results"][0]["url"] == BASE + "git/git-rebase.html"
    rendered = text(found)
    assert rendered.startswith(f"[1] {BASE}git/git-rebase.html\nTitle: git-rebase")
    assert "Snippet: " in rendered and "**autostash**" in rendered
    assert rendered.count("\nDate: ") == len(found.observation["results"]) <= 5
    # The raw record keeps the engine's own response: scores, document ids, parsed query.
    assert found.observation["results"][0]["docid"] > 0
    assert found.observation["results"][0]["score"] > 0
    assert "rebas" in found.observation["parsed_query"]
    nothing = search_env.step(web_search("qzxv wplkj zzyzzx"), 30)
    assert nothing.error is None and nothing.observation["results"] == []
    assert text(nothing) == "No results found for the query: qzxv wplkj zzyzzx"


def test_a_page_is_its_markdown_and_a_missing_or_outside_page_an_error(
    search_env: SearchEnvironment,
) -> None:
    search_env.reset(0, None)
    page = search_env.step(web_extractor(BASE + "git/git-stash.html", "untracked files"), 30)
    assert page.error is None
    observation = RENDER.observation(page.observation)
    assert observation.format == "markdown"
    assert "--include-untracked" in observation.text
    # The raw record keeps the fetched HTML and the whole markdown.
    assert page.observation["html"].lstrip().startswith("<")
    assert len(page.observation["markdown"]) >= len(observation.text) - 200
    missing = search_env.step(web_extractor(BASE + "git/git-stash-nope.html", "x"), 30)
    assert missing.error == "HTTP 404 Not Found" and text(missing) == "Error: HTTP 404 Not Found"
    outside = search_env.step(web_extractor("http://example.com/", "x"), 30)
    assert outside.error and outside.error.startswith("the URL is outside the corpus site")


def test_a_long_page_is_cut_at_the_configured_size(search_image: str) -> None:
    env = SearchEnvironment(SearchConfig(max_markdown_chars=500))
    try:
        env.reset(0, None)
        page = env.step(web_extractor(BASE + "git/git-rebase.html", "options"), 30)
        observation = RENDER.observation(page.observation)
        assert observation.meta["markdown_cut"] is True
        assert len(observation.text) < 600
        assert observation.text.endswith(" characters shown]")
    finally:
        env.close()


def test_memory_keeps_state_across_steps_and_errors_change_nothing(
    search_env: SearchEnvironment,
) -> None:
    search_env.reset(0, None)
    added = search_env.step(dict_memory("add", "stash", "git stash -u"), 30)
    assert added.error is None and text(added) == "Added 'stash' to memory."
    assert added.observation["state_diff"]["added"] == {"stash": "git stash -u"}
    search_env.step(web_search("sqlite wal"), 30)  # other calls in between
    got = search_env.step(dict_memory("retrieve", "stash"), 30)
    assert text(got) == "Value of 'stash':\ngit stash -u"
    assert got.observation["state_diff"]["changed"] is False
    before = got.observation["memory_digest"]
    for bad in (
        dict_memory("retrieve", "nope"),
        dict_memory("add", "stash", "again"),
        tool_call("dict_memory", {"action": "drop", "key": "stash"}),
        tool_call("web_search", {"query": "x", "num_results": 0}),
        tool_call("open_url", {"url": BASE}),
    ):
        outcome = search_env.step(bad, 30)
        assert outcome.error, bad.text
        assert not outcome.truncated
        assert outcome.observation["memory_digest"] == before
        assert outcome.observation["state_diff"]["changed"] is False
    missing = search_env.step(dict_memory("retrieve", "nope"), 30)
    assert text(missing) == "Error: no key 'nope' in memory"
    invalid = search_env.step(tool_call("dict_memory", {"action": "drop", "key": "stash"}), 30)
    assert invalid.observation["schema_problems"]  # our check saw it, and sent it anyway
    assert "unknown action 'drop'" in (invalid.error or "")
    listed = search_env.step(dict_memory("list"), 30)
    assert text(listed) == 'Keys in memory: ["stash"]'
    # A second reset is a fresh episode: an empty memory.
    again = search_env.reset(1, None)
    assert again["memory"] == {}
    assert text(search_env.step(dict_memory("list"), 30)) == "Keys in memory: []"


KILL_DRIVER = (
    "import os\n"
    "for pid in filter(str.isdigit, os.listdir('/proc')):\n"
    "    try:\n"
    "        line = open(f'/proc/{pid}/cmdline', 'rb').read()\n"
    "    except OSError:\n"
    "        continue\n"
    "    if b'search_driver.py\\0' in line and int(pid) != os.getpid():\n"
    "        os.kill(int(pid), 9)\n"
)


def test_a_driver_killed_inside_ends_the_episode_with_a_fresh_look(
    search_env: SearchEnvironment,
) -> None:
    search_env.reset(0, None)
    search_env.step(dict_memory("add", "kept", "in the SQLite file"), 30)
    killed = search_env.sandbox.exec(["/opt/search-venv/bin/python", "-c", KILL_DRIVER])
    assert killed.exit_code == 0, killed.stderr
    after = search_env.step(web_search("git"), 30)
    assert after.truncated and after.error
    assert after.observation["sandbox_lost"] is True
    # A second driver process could still read the memory: fresh, not the one from before.
    assert after.observation["state_stale"] is False
    assert after.observation["memory"] == {"kept": "in the SQLite file"}
    assert text(after) == "[no result: the sandbox stopped answering]"


def test_the_exploring_policy_stays_inside_the_site_over_a_long_walk(
    search_env: SearchEnvironment,
) -> None:
    policy = SearchExplorePolicy()
    policy.reset(5, None)
    observation = search_env.reset(5, None)
    history: list[HistoryItem] = []
    for _ in range(40):
        action = policy.act(observation, history)
        assert action is not None
        outcome = search_env.step(action, 30)
        assert not outcome.truncated, outcome.error
        observation = outcome.observation
        history.append(HistoryItem(action=action, observation=observation, error=outcome.error))
    names = [item.action.name for item in history]
    assert {"web_search", "web_extractor", "dict_memory"} <= set(names)
    opened = [i.action.arguments["url"] for i in history if i.action.name == "web_extractor"]
    assert all(url.startswith(BASE) for url in opened)
    # Pages were read: most opens gave markdown, and later queries use words read there.
    pages = [i for i in history if i.action.name == "web_extractor" and i.error is None]
    assert pages
    assert search_env.step(dict_memory("list"), 30).observation["memory"] == observation["memory"]


def _tasks() -> list[Any]:
    names = sorted(LIBRARY) if FULL else list(SAMPLE)
    return [pytest.param(name, id=name) for name in names]


def test_the_sample_names_real_tasks() -> None:
    assert set(SAMPLE) <= set(LIBRARY)


@pytest.mark.parametrize("name", _tasks())
def test_a_task_check_fails_before_its_script_and_holds_after_it(
    name: str, search_env: SearchEnvironment
) -> None:
    task = LIBRARY[name]
    search_env.reset(0, task)
    assert search_env.evaluate(task) == 0.0
    for action in task.steps:
        outcome = search_env.step(action, 30)
        assert outcome.error is None, (action.text, outcome.error)
    opened = [step.arguments["url"] for step in task.steps if step.name == "web_extractor"]
    assert opened[0] == task.documents[0]
    assert search_env.evaluate(task) == 1.0


def test_a_replayed_call_in_json_text_is_the_same_call(search_env: SearchEnvironment) -> None:
    search_env.reset(0, None)
    call = Action.model_validate_json(web_search("sqlite pragma", 3).model_dump_json())
    outcome = search_env.step(call, 30)
    assert json.loads(call.text) == {"name": "web_search", "arguments": call.arguments}
    assert len(outcome.observation["results"]) == 3
