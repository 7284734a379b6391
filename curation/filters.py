"""Row and episode rules, each configurable as ``drop`` / ``exclude`` / ``label`` / ``keep``.

The unit curation keeps or drops is the episode: a world model learns each transition in the
context of its episode's history, so a kept episode has every step. A rule never removes a
row from a kept episode; ``drop`` drops the matching row's whole episode, ``exclude`` keeps the
row as history but not as a training target (see :mod:`worldtrace.curation.labels`).

Row rules (:class:`TransitionFilter`): empty or truncated observations, observations above a
size limit, and no-op transitions (next observation text identical to the observation; a
separate mode applies to read-only actions). Episode rules need every row of an episode and
run in three steps like dedup: :class:`EpisodeTally` (every rank, first pass: rows, action
errors and the rules asking to drop the episode), :class:`EpisodeVerdicts` (one task: which
episodes are dropped, excluded or labelled, and why) and :class:`ApplyEpisodeVerdicts` (every
rank, last pass).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from datatrove.data import Document, DocumentsPipeline
from datatrove.pipeline.base import PipelineStep

from worldtrace.collectors.base import INVALID_REPLY
from worldtrace.curation.config import FilterMode, FilterSettings
from worldtrace.curation.documents import section_texts
from worldtrace.curation.labels import add_label, drop_episode, episode_drops_of, exclude
from worldtrace.curation.storage import Location, as_folder, read_text, write_text
from worldtrace.curation.tally import TallyStep

VERDICTS_FILE = "verdicts.json"
"""``{episode_id: {"drop": rule or null, "exclude": [rules], "label": [rules]}}``."""


def apply_mode(doc: Document, rule: str, mode: FilterMode) -> None:
    """Mark ``doc`` as ``mode`` says for a matched ``rule``."""
    if mode == "drop":
        drop_episode(doc, rule)
    elif mode == "exclude":
        exclude(doc, rule)
    elif mode == "label":
        add_label(doc, rule)


class TransitionFilter(PipelineStep):
    """Row rules: empty/truncated, oversize and no-op observations, invalid model replies.

    Forwards every row.
    """

    type = "🧮 - CURATION"
    name = "🔻 transition filters"

    def __init__(self, settings: FilterSettings) -> None:
        super().__init__()
        self.settings = settings

    def matches(self, doc: Document) -> list[tuple[str, FilterMode]]:
        """Return the rules a document matches, with the mode of each."""
        observation, _action, next_observation = section_texts(doc)
        settings = self.settings
        found: list[tuple[str, FilterMode]] = []
        texts = (observation, next_observation)
        if any(not text.strip() for text in texts) or any(
            text.rstrip().endswith(marker)
            for text in texts
            for marker in settings.truncated_markers
        ):
            found.append(("empty_or_truncated", settings.empty_observation))
        if max(len(observation), len(next_observation)) > settings.max_observation_chars:
            found.append(("oversize", settings.oversize_observation))
        action_name = (doc.metadata.get("action") or {}).get("name", "")
        if action_name == INVALID_REPLY:
            found.append(("invalid_reply", settings.invalid_reply))
        if observation == next_observation:
            read_only = action_name in settings.read_only_actions
            found.append(("noop", settings.noop_read_only if read_only else settings.noop))
        return found

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> Iterator:
        """Mark every document by the rules it matches and forward it."""
        for doc in data:
            for rule, mode in self.matches(doc):
                apply_mode(doc, rule, mode)
            yield doc


class EpisodeTally(PipelineStep):
    """Writes ``{episode_id: [rows, action errors, [drop rules]]}`` to ``<folder>/<rank>.json``."""

    type = "🧮 - CURATION"
    name = "🔻 episodes 1"

    def __init__(self, folder: Location) -> None:
        super().__init__()
        self.folder = as_folder(folder)

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> Iterator:
        """Count rows, errors and drop requests per episode, forwarding every document."""
        counts: dict[str, list[Any]] = defaultdict(lambda: [0, 0, []])
        for doc in data:
            entry = counts[str(doc.metadata.get("episode_id"))]
            entry[0] += 1
            entry[1] += 1 if doc.metadata.get("action_error") else 0
            entry[2] += [rule for rule in episode_drops_of(doc) if rule not in entry[2]]
            yield doc
        write_text(self.folder, f"{rank:05d}.json", json.dumps(counts, sort_keys=True))


def read_verdicts(folder: Location) -> dict[str, dict[str, Any]]:
    """The episode verdicts :class:`EpisodeVerdicts` wrote in ``folder`` (empty if none)."""
    return dict(json.loads(read_text(as_folder(folder), VERDICTS_FILE) or "{}"))


def dropped_episodes(folder: Location) -> set[str]:
    """The episodes whose verdict is to drop them."""
    return {episode for episode, v in read_verdicts(folder).items() if v.get("drop")}


class EpisodeVerdicts(PipelineStep):
    """Sums the per-rank tallies and decides each episode's fate (one task).

    An episode is dropped when one of its rows asked for it (a rule in ``drop`` mode,
    decontamination) or when its share of action errors is above ``max_error_fraction`` and
    ``error_episode`` is ``drop``; with ``exclude`` or ``label`` that rule marks all its rows.
    """

    type = "🧮 - CURATION"
    name = "🔻 episodes 2"

    def __init__(self, folder: Location, settings: FilterSettings) -> None:
        super().__init__()
        self.folder = as_folder(folder)
        self.settings = settings

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> Iterator:
        """Aggregate across ranks and write :data:`VERDICTS_FILE`."""
        if world_size != 1:
            raise ValueError("the episode verdicts run as exactly one task")
        yield from data or ()
        totals: dict[str, list[Any]] = defaultdict(lambda: [0, 0, []])
        for name in self.folder.list_files(glob_pattern="[0-9]*.json", recursive=False):
            for episode, (rows, errors, drops) in json.loads(
                read_text(self.folder, name) or "{}"
            ).items():
                total = totals[episode]
                total[0] += rows
                total[1] += errors
                total[2] += [rule for rule in drops if rule not in total[2]]
        verdicts: dict[str, dict[str, Any]] = {}
        mode = self.settings.error_episode
        for episode, (rows, errors, drops) in sorted(totals.items()):
            rules = sorted(drops)
            if rows and errors / rows > self.settings.max_error_fraction and mode != "keep":
                if mode == "drop":
                    rules.append("error_episode")
                else:
                    verdicts[episode] = {"drop": None, mode: ["error_episode"]}
            if rules:
                verdicts[episode] = {"drop": rules[0]}
        write_text(self.folder, VERDICTS_FILE, json.dumps(verdicts, sort_keys=True))


class ApplyEpisodeVerdicts(TallyStep):
    """Drops the rows of dropped episodes and marks the rows of excluded or labelled ones."""

    name = "🔻 episodes 3"
    tally_name = "episodes"

    def __init__(self, folder: Location, tally_folder: Location | None = None) -> None:
        super().__init__(tally_folder)
        self.folder = as_folder(folder)

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> Iterator:
        """Forward the rows of kept episodes, marked by their episode's rules."""
        verdicts = read_verdicts(self.folder)
        for doc in data:
            verdict = verdicts.get(str(doc.metadata.get("episode_id")))
            if verdict is not None:
                if verdict.get("drop"):
                    self.tally(doc, f"dropped:{verdict['drop']}")
                    continue
                for rule in verdict.get("exclude", []):
                    exclude(doc, rule)
                for rule in verdict.get("label", []):
                    add_label(doc, rule)
            yield doc
        self.flush_tallies(rank)
