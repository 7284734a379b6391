"""Filters, each configurable as ``drop`` / ``keep`` / ``label``.

Row rules (:class:`TransitionFilter`): empty or truncated observations, observations above a
size limit, and no-op transitions (next observation text identical to the observation; a
separate mode applies to read-only actions). The episode rule needs all rows of an episode and
runs in three steps like dedup: :class:`EpisodeErrorTally` (every rank), :class:`EpisodeErrorFind`
(one task), :class:`EpisodeErrorFilter` (every rank).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator

from datatrove.data import Document, DocumentsPipeline

from worldtrace.curation.config import FilterMode, FilterSettings
from worldtrace.curation.documents import section_texts
from worldtrace.curation.labels import add_label
from worldtrace.curation.storage import Location, as_folder, read_text, write_text
from worldtrace.curation.tally import TallyStep


def apply_mode(step: TallyStep, doc: Document, rule: str, mode: FilterMode) -> bool:
    """Apply ``mode`` for a matched ``rule``; return whether the document is kept."""
    if mode == "drop":
        step.tally(doc, f"dropped:{rule}")
        return False
    if mode == "label":
        add_label(doc, rule)
        step.tally(doc, f"labelled:{rule}")
    else:
        step.tally(doc, f"kept:{rule}")
    return True


class TransitionFilter(TallyStep):
    """Row-level rules: empty/truncated, oversize and no-op observations."""

    name = "🔻 transition filters"
    tally_name = "filters"

    def __init__(self, settings: FilterSettings, tally_folder: Location | None = None) -> None:
        super().__init__(tally_folder)
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
        if observation == next_observation:
            action_name = (doc.metadata.get("action") or {}).get("name", "")
            read_only = action_name in settings.read_only_actions
            found.append(("noop", settings.noop_read_only if read_only else settings.noop))
        return found

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> Iterator:
        """Forward the documents no rule drops."""
        for doc in data:
            kept = True
            for rule, mode in self.matches(doc):
                kept = apply_mode(self, doc, rule, mode) and kept
            if kept:
                yield doc
        self.flush_tallies(rank)


class EpisodeErrorTally(TallyStep):
    """Writes ``{episode_id: [rows, rows with an action error]}`` to ``<folder>/<rank>.json``."""

    name = "🔻 episode errors 1"

    def __init__(self, folder: Location) -> None:
        super().__init__()
        self.folder = as_folder(folder)

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> Iterator:
        """Count rows and errors per episode, forwarding every document."""
        counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for doc in data:
            entry = counts[str(doc.metadata.get("episode_id"))]
            entry[0] += 1
            entry[1] += 1 if doc.metadata.get("action_error") else 0
            yield doc
        write_text(self.folder, f"{rank:05d}.json", json.dumps(counts, sort_keys=True))


class EpisodeErrorFind(TallyStep):
    """Sums the per-rank counts and writes the episodes above the error share, ``bad.json``."""

    name = "🔻 episode errors 2"

    def __init__(self, folder: Location, max_error_fraction: float) -> None:
        super().__init__()
        self.folder = as_folder(folder)
        self.max_error_fraction = max_error_fraction

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> Iterator:
        """Aggregate across ranks (one task)."""
        if world_size != 1:
            raise ValueError("episode error stage 2 runs as exactly one task")
        yield from data or ()
        totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for name in self.folder.list_files(glob_pattern="[0-9]*.json", recursive=False):
            for episode, (rows, errors) in json.loads(read_text(self.folder, name) or "{}").items():
                totals[episode][0] += rows
                totals[episode][1] += errors
        bad = sorted(
            episode
            for episode, (rows, errors) in totals.items()
            if rows and errors / rows > self.max_error_fraction
        )
        write_text(self.folder, "bad.json", json.dumps(bad))


class EpisodeErrorFilter(TallyStep):
    """Applies the ``error_episode`` mode to rows of the episodes listed in ``bad.json``."""

    name = "🔻 episode errors 3"
    tally_name = "episode_filter"

    def __init__(
        self, folder: Location, mode: FilterMode, tally_folder: Location | None = None
    ) -> None:
        super().__init__(tally_folder)
        self.folder = as_folder(folder)
        self.mode = mode

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> Iterator:
        """Forward documents, dropping or labelling rows of error-dominated episodes."""
        bad = set(json.loads(read_text(self.folder, "bad.json") or "[]"))
        for doc in data:
            if str(doc.metadata.get("episode_id")) in bad and not apply_mode(
                self, doc, "error_episode", self.mode
            ):
                continue
            yield doc
        self.flush_tallies(rank)
