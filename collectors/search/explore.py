"""The search domain's exploring policy: queries built from what it has read, pages, memory.

:class:`SearchExplorePolicy` works without a task, the way a person finds their way around an
unknown documentation site. It starts from a small seed vocabulary (:data:`SEED_QUERIES`) and
then builds every query from what the episode has read: words of earlier titles, snippets and
pages, and phrases of three words taken from them. Each search is one of
:data:`QUERY_KINDS`:

- ``seed``: a query of the seed vocabulary (the first search, and now and then a fresh start);
- ``terms``: two or three words read recently;
- ``phrase``: a quoted phrase read in a snippet or a page (Xapian's phrase search);
- ``narrow``: the last query and one more word read since (fewer, closer results);
- ``broaden``: the last query without its last word (after a search that found nothing);
- ``title``: a word under the ``title:`` prefix (the engine's field search);

and a share (``misspell_share``) has one word misspelled (two letters swapped, one dropped or
doubled), as people type. Between searches it opens results (``web_extractor``, mostly the
top ones not opened yet; now and then a URL of the site that does not exist, which the site
answers with a 404), stores a sentence of each page it read under a key made from the page's
URL (``dict_memory`` add, or update when the key is there), and uses its memory: retrieve,
list, update, remove, and sometimes retrieve a key it never stored (``missing_key_share``).

**Reproducibility.** Every choice comes from a ``random.Random(seed)``; what the episode has
read is kept in insertion-ordered dicts and lists (never iterated sets), and everything it
learns comes from the raw observations (results, markdown, memory). The same seed and the same
observations give the same actions, in any process.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from pydantic import Field, field_validator

from worldtrace.collectors.base import HistoryItem, Policy, PolicyParams, Share
from worldtrace.collectors.search.actions import dict_memory, web_extractor, web_search
from worldtrace.schemas import Action
from worldtrace.schemas.raw import RawObservation

SEED_QUERIES = (
    "git branch",
    "rebase",
    "sqlite index",
    "postgresql string functions",
    "python list sort",
    "file permissions",
    "signal handler",
    "regular expression",
    "compress archive",
    "network interface",
    "environment variable",
    "date format",
    "json",
    "unicode string",
    "mount filesystem",
    "package manager",
    "socket",
    "thread lock",
    "locale",
    "transaction",
)
"""The vocabulary the first queries come from (topics every part of the corpus has)."""

QUERY_KINDS = ("seed", "terms", "phrase", "narrow", "broaden", "title")
"""How a query is made (see the module docstring); :meth:`SearchExplorePolicy.query_kinds`."""

STOPWORD_TEXT = (
    "a an and are as at be by can for from has have if in into is it its may more must no not "
    "of on or so such that the their then there these this those to was were when which will "
    "with you your also any all but each other only than use used using see one two new does "
    "do should would how what where who why"
)
STOPWORDS = frozenset(STOPWORD_TEXT.split())
"""Words never searched for alone (they match nearly every page)."""
WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]*(?:[.+-][A-Za-z0-9_]+)*")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
MARKUP = re.compile(r"[*_`#>|\[\]()]+")
PAGE_CHARS = 6000
"""Characters of a page's markdown the policy reads (its start: title, synopsis, description)."""
RECENT_TERMS = 60
"""How many of the most recently read words queries are built from."""
MAX_QUERY_WORDS = 6


def words_of(text: str) -> list[str]:
    """The words of ``text`` worth searching for: lower case, no stop words, 3 to 30 letters."""
    found = (word.lower() for word in WORD.findall(text))
    return [word for word in found if 3 <= len(word) <= 30 and word not in STOPWORDS]


def phrases_of(text: str) -> list[str]:
    """Runs of three words of ``text`` that start and end with a word worth searching for."""
    phrases: list[str] = []
    for line in text.splitlines():
        tokens = [token.lower() for token in WORD.findall(MARKUP.sub(" ", line))]
        for start in range(len(tokens) - 2):
            first, last = tokens[start], tokens[start + 2]
            if first in STOPWORDS or last in STOPWORDS or min(len(first), len(last)) < 3:
                continue
            phrases.append(" ".join(tokens[start : start + 3]))
    return phrases


def misspell(word: str, rng: random.Random) -> str:
    """``word`` with one typo: two neighbouring letters swapped, one dropped or doubled."""
    if len(word) < 4:
        return word + word[-1]
    at = rng.randrange(1, len(word) - 1)
    kind = rng.choice(("swap", "drop", "double"))
    if kind == "swap":
        return word[: at - 1] + word[at] + word[at - 1] + word[at + 1 :]
    if kind == "drop":
        return word[:at] + word[at + 1 :]
    return word[:at] + word[at] + word[at:]


def page_key(url: str) -> str:
    """The memory key of a page: its URL's path without the extension, ``/`` as ``-``."""
    path = urlsplit(url).path.strip("/")
    return re.sub(r"\.html?$", "", path).replace("/", "-") or "home"


def page_fact(markdown: str, wanted: Sequence[str]) -> str | None:
    """A sentence of the page worth remembering, or None when it has no long sentence.

    The first sentence that holds a ``wanted`` word, else the first long one.
    """
    fallback = None
    for line in markdown[:PAGE_CHARS].splitlines():
        text = " ".join(MARKUP.sub(" ", line).split())
        if len(text) < 30 or line.lstrip().startswith("#"):
            continue
        for sentence in SENTENCE_END.split(text):
            if len(sentence) < 30:
                continue
            sentence = sentence[:200]
            if any(word in sentence.lower() for word in wanted):
                return sentence
            fallback = fallback or sentence
    return fallback


class SearchExploreParams(PolicyParams):
    """The parameters of :class:`SearchExplorePolicy` (a config's ``policy.params``)."""

    policy = "search explore policy"

    vocabulary: list[str] | None = Field(
        default=None, description="the seed queries; null: SEED_QUERIES"
    )
    open_share: Share = Field(default=0.45, description="the chance of opening a result")
    memory_share: Share = Field(default=0.3, description="the chance of using the memory")
    misspell_share: Share = Field(default=0.1, description="the chance that a query is misspelt")
    missing_key_share: Share = Field(
        default=0.15, description="the chance that a memory read asks for a key never stored"
    )
    missing_page_share: Share = Field(
        default=0.05, description="the chance of opening a page that does not exist"
    )

    @field_validator("vocabulary")
    @classmethod
    def _queries(cls, vocabulary: list[str] | None) -> list[str] | None:
        if vocabulary is not None and not (vocabulary and all(q.strip() for q in vocabulary)):
            raise ValueError("vocabulary must be a non-empty list of non-empty queries")
        return vocabulary


class SearchExplorePolicy(Policy[Any]):
    """Seeded searches built from what the episode has read; opens results; uses its memory.

    Its parameters are :class:`SearchExploreParams`, given as the model or as keywords
    (``SearchExplorePolicy(open_share=0.2)``).
    """

    kind = "explore"
    name = "search-explore"
    version = "1"

    def __init__(self, params: SearchExploreParams | None = None, /, **keywords: Any) -> None:
        self.params = SearchExploreParams.given(params, keywords)
        given = self.params.vocabulary
        self.vocabulary = tuple(SEED_QUERIES if given is None else given)
        self.open_share = self.params.open_share
        self.memory_share = self.params.memory_share
        self.misspell_share = self.params.misspell_share
        self.missing_key_share = self.params.missing_key_share
        self.missing_page_share = self.params.missing_page_share
        self.reset(0, None)

    def reset(self, seed: int, task: Any | None) -> None:
        """Forget the last episode; seed the choices."""
        self._rng = random.Random(seed)
        self._terms: dict[str, None] = {}
        self._phrases: dict[str, None] = {}
        self._unopened: dict[str, str] = {}
        self._opened: dict[str, None] = {}
        self._last_results: list[str] = []
        self._last_query: str | None = None
        self._last_found = 0
        self._facts: dict[str, str] = {}
        self._stored: dict[str, None] = {}
        self._memory: dict[str, Any] = {}
        self._kinds: list[str] = []

    @property
    def query_kinds(self) -> tuple[str, ...]:
        """How each search of the episode was made (:data:`QUERY_KINDS`, ``+typo`` if misspelt)."""
        return tuple(self._kinds)

    def act(self, observation: RawObservation, history: Sequence[HistoryItem]) -> Action | None:
        """Learn from the newest observation, then choose the next call."""
        self._learn(observation)
        rng = self._rng
        if self._last_query is None:
            return self._search("seed")
        if self._unopened and self._last_results and rng.random() < self.open_share:
            return self._open()
        if rng.random() < self.memory_share and (self._facts or self._memory):
            return self._use_memory()
        return self._search(self._query_kind())

    # --- learning -------------------------------------------------------------------------------

    def _learn(self, observation: Mapping[str, Any]) -> None:
        memory = observation.get("memory")
        if isinstance(memory, Mapping):
            self._memory = dict(memory)
        tool = observation.get("tool")
        if tool == "web_search":
            results = [r for r in observation.get("results") or () if isinstance(r, Mapping)]
            self._last_results = [str(r.get("url")) for r in results]
            self._last_found = len(results)
            for result in results:
                url = str(result.get("url"))
                if url not in self._opened:
                    self._unopened.setdefault(url, str(result.get("title") or ""))
                text = f"{result.get('title') or ''}\n{result.get('snippet') or ''}"
                self._read(text)
        elif tool == "web_extractor":
            markdown = observation.get("markdown")
            url = str(observation.get("url"))
            if isinstance(markdown, str) and not observation.get("error"):
                self._read(markdown[:PAGE_CHARS])
                wanted = words_of(self._last_query or "")
                fact = page_fact(markdown, wanted)
                if fact is not None:
                    self._facts[page_key(url)] = fact

    def _read(self, text: str) -> None:
        for word in words_of(text):
            self._terms.pop(word, None)  # re-inserted: the most recent last
            self._terms[word] = None
        for phrase in phrases_of(text):
            self._phrases.setdefault(phrase, None)

    # --- searching ------------------------------------------------------------------------------

    def _query_kind(self) -> str:
        rng = self._rng
        if self._last_found == 0 and self._last_query and len(self._last_query.split()) > 1:
            return "broaden"
        if not self._terms:
            return "seed"
        kinds = ["terms", "terms", "narrow", "title", "seed"]
        if self._phrases:
            kinds += ["phrase", "phrase"]
        return rng.choice(kinds)

    def _recent_terms(self) -> list[str]:
        return list(self._terms)[-RECENT_TERMS:]

    def _search(self, kind: str) -> Action:
        rng = self._rng
        last = self._last_query or ""
        if kind == "terms":
            query = " ".join(
                rng.sample(self._recent_terms(), min(len(self._terms), rng.randint(2, 3)))
            )
        elif kind == "phrase":
            query = f'"{rng.choice(list(self._phrases)[-RECENT_TERMS:])}"'
        elif kind == "narrow" and last and len(last.split()) < MAX_QUERY_WORDS:
            extra = [t for t in self._recent_terms() if t not in last.lower().split()]
            query = f"{last} {rng.choice(extra)}" if extra else rng.choice(self.vocabulary)
        elif kind == "broaden":
            query = " ".join(last.split()[:-1])
        elif kind == "title":
            query = f"title:{rng.choice(self._recent_terms())}"
        else:
            kind = "seed"
            query = rng.choice(self.vocabulary)
        if rng.random() < self.misspell_share:
            words = query.split()
            at = rng.randrange(len(words))
            prefix, _, word = words[at].rpartition(":")
            quote = word.startswith('"') or word.endswith('"')
            if not quote and len(word) >= 3:
                words[at] = f"{prefix}:{misspell(word, rng)}" if prefix else misspell(word, rng)
                query = " ".join(words)
                kind += "+typo"
        self._kinds.append(kind)
        self._last_query = query
        return web_search(query, rng.choice((3, 5, 10, 10)))

    # --- reading --------------------------------------------------------------------------------

    def _open(self) -> Action:
        rng = self._rng
        candidates = [url for url in self._last_results if url in self._unopened][:3]
        if not candidates:
            candidates = list(self._unopened)[:3]
        url = candidates[0] if rng.random() < 0.6 else rng.choice(candidates)
        goal = f"what the page says about {self._last_query or 'this topic'}"
        if rng.random() < self.missing_page_share:
            # A page of the site that does not exist: the site's own 404 is the answer.
            return web_extractor(re.sub(r"\.html$", "-overview.html", url), goal)
        self._unopened.pop(url, None)
        self._opened[url] = None
        return web_extractor(url, goal)

    # --- memory ---------------------------------------------------------------------------------

    def _use_memory(self) -> Action:
        rng = self._rng
        new_facts = [key for key in self._facts if key not in self._stored]
        if new_facts and (not self._memory or rng.random() < 0.5):
            key = new_facts[-1]
            self._stored[key] = None  # stored once: a fact removed later is not stored again
            action = "update" if key in self._memory else "add"
            return dict_memory(action, key, self._facts[key])
        keys = list(self._memory)
        if rng.random() < self.missing_key_share or not keys:
            known = keys or list(self._facts) or ["notes"]
            return dict_memory("retrieve", f"{rng.choice(known)}-{rng.choice(('old', 'v2', 'x'))}")
        choice = rng.choice(("retrieve", "retrieve", "list", "update", "remove"))
        key = rng.choice(keys)
        if choice == "list":
            return dict_memory("list")
        if choice == "update":
            note = rng.choice(self._recent_terms() or list(self.vocabulary))
            value = f"{self._memory[key]} (see also: {note})"[-500:]
            return dict_memory("update", key, value)
        return dict_memory(choice, key)


__all__ = [
    "QUERY_KINDS",
    "SEED_QUERIES",
    "SearchExplorePolicy",
    "misspell",
    "page_fact",
    "page_key",
    "phrases_of",
    "words_of",
]
