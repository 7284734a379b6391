"""Read pages with BrowserGym's own environment, for tests/web/test_web_browsergym.py.

Runs in BrowserGym's virtual environment (``.venv-browsergym``, made by
``scripts/browsergym_venv.sh``), never in the project's: browsergym-core 0.14.3 pins an
older Playwright. Reads a JSON request on stdin::

    {"pages": [{"url": "http://trac.test/", "clicks": ["12", "40"]}, ...]}

For each page it opens a fresh ``BrowserEnv`` with BrowserGym's defaults (the task's
1280x720 viewport, ``tags_to_mark="standard_html"``; only ``slow_mo`` and the
``pre_observation_delay`` after each action are set to 0 and the Playwright ``timeout`` to
30 s, which change no observation this probe reads: the first observation comes from the
reset, which never waits, and a probed click is cancelled, so the page it leaves is the one it
found; before each click the probe waits for the page's finite animations to end, as our
environment does, since BrowserGym's 500 ms click limit fails on a moving element under load)
and writes one JSON line:
BrowserGym's tree text (``flatten_axtree_to_str`` with and without ``with_visible``), the
DOM path of each marked element, and for each requested ``click('<bid>')`` the DOM path of
the element the click reached (a capturing listener records the click's target and cancels
it, so the page stays where it is). The browser is whatever ``PLAYWRIGHT_BROWSERS_PATH``
holds (the test links Debian's Chromium there, through a wrapper that enters the sites'
network namespace).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import browsergym.core.env as bgym_env
from browsergym.core.task import AbstractBrowserTask
from browsergym.utils.obs import flatten_axtree_to_str
from probe_scripts import (  # this folder: sys.path[0]
    ANIMATIONS_DONE_JS,
    CATCH_CLICK_JS,
    DOM_PATHS_JS,
)


class OpenPage(AbstractBrowserTask):
    """A task that only opens one URL (BrowserGym's tasks are benchmarks; this is a page)."""

    def __init__(self, seed: int, url: str) -> None:
        super().__init__(seed)
        self.url = url

    @classmethod
    def get_task_id(cls) -> str:
        """The task's id (unused: the environment is built directly)."""
        return "worldtrace-open-page"

    def setup(self, page: Any) -> tuple[str, dict]:
        """Open the page."""
        page.goto(self.url)
        return "", {}

    def validate(self, page: Any, chat_messages: list) -> tuple[float, bool, str, dict]:
        """Nothing to validate."""
        return 0.0, False, "", {}


def probe(url: str, clicks: list[str]) -> dict[str, Any]:
    """Read one page with BrowserGym and click the given bids on it."""
    # timeout: the task's 5 s default for each Playwright call is short on a loaded machine.
    # pre_observation_delay: 0.5 s of sleep after every click, for a page that was left as is.
    env = bgym_env.BrowserEnv(
        task_entrypoint=OpenPage,
        task_kwargs={"url": url},
        slow_mo=0,
        timeout=30_000,
        pre_observation_delay=0,
    )
    try:
        obs, _ = env.reset(seed=0)
        page = env.unwrapped.page
        result: dict[str, Any] = {
            "url": page.url,
            "text": flatten_axtree_to_str(obs["axtree_object"]),
            "text_visible": flatten_axtree_to_str(
                obs["axtree_object"],
                extra_properties=obs["extra_element_properties"],
                with_visible=True,
            ),
            "focused_bid": obs["focused_element_bid"],
            "paths": page.evaluate(DOM_PATHS_JS),
            "clicks": {},
        }
        for bid in clicks:
            page.wait_for_function(ANIMATIONS_DONE_JS)
            page.evaluate(DOM_PATHS_JS)
            page.evaluate(CATCH_CLICK_JS)
            obs, *_ = env.step(f"click({bid!r})")
            page = env.unwrapped.page
            reached = page.evaluate("() => window.__probeClicked")
            result["clicks"][bid] = {"reached": reached, "error": obs["last_action_error"]}
        return result
    finally:
        env.close()


def main() -> None:
    """Read the request from stdin, write one JSON line per page to stdout."""
    request = json.load(sys.stdin)
    for entry in request["pages"]:
        print(json.dumps(probe(entry["url"], entry.get("clicks", []))), flush=True)


if __name__ == "__main__":
    main()
