"""Decontamination: drop the episodes whose text overlaps user-supplied evaluation sets.

Eval sets are text files (each blank-line separated block is a sample) or JSONL files (string
fields listed in the config, nested lists included). A transition is contaminated when the
share of its word n-grams found in the eval n-grams exceeds the threshold, and then its whole
episode is dropped: every later row of the episode holds the contaminated state in its
history, so removing the row alone would not remove the overlap and would break the episode.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from datatrove.data import DocumentsPipeline
from datatrove.pipeline.base import PipelineStep

from worldtrace.curation.config import DecontamSettings
from worldtrace.curation.documents import section_texts
from worldtrace.curation.labels import drop_episode

_WORD = re.compile(r"\w+", re.UNICODE)


def ngram_hashes(text: str, n: int) -> set[int]:
    """Return 64-bit hashes of the lower-cased word n-grams of ``text``."""
    words = _WORD.findall(text.lower())
    if len(words) < n:
        grams = [" ".join(words)] if words else []
    else:
        grams = [" ".join(words[i : i + n]) for i in range(len(words) - n + 1)]
    return {
        int.from_bytes(hashlib.blake2b(g.encode(), digest_size=8).digest(), "little") for g in grams
    }


def _strings(value: Any, fields: tuple[str, ...], top: bool = True) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item, fields, top=False)
    elif isinstance(value, dict):
        for key, item in value.items():
            if not top or key in fields:
                yield from _strings(item, fields, top=False)


def eval_samples(path: Path, fields: tuple[str, ...]) -> Iterator[str]:
    """Yield the text samples of one eval file."""
    text = Path(path).read_text(encoding="utf-8")
    if path.suffix in (".jsonl", ".json"):
        for line in text.splitlines():
            if line.strip():
                yield from _strings(json.loads(line), fields)
    else:
        yield from (block for block in re.split(r"\n\s*\n", text) if block.strip())


class Decontaminate(PipelineStep):
    """Asks to drop the episode of every document whose overlap is above the threshold."""

    name = "🧪 decontaminate"

    type = "🧮 - CURATION"

    def __init__(self, settings: DecontamSettings) -> None:
        super().__init__()
        self.settings = settings
        self._index: set[int] | None = None

    def index(self) -> set[int]:
        """Return the eval n-gram hashes, built on first use."""
        if self._index is None:
            index: set[int] = set()
            for path in self.settings.eval_files:
                for sample in eval_samples(Path(path), self.settings.jsonl_fields):
                    index |= ngram_hashes(sample, self.settings.n_grams)
            self._index = index
        return self._index

    def overlap(self, text: str) -> float:
        """Return the share of ``text``'s n-grams found in the eval sets."""
        grams = ngram_hashes(text, self.settings.n_grams)
        return len(grams & self.index()) / len(grams) if grams else 0.0

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> Iterator:
        """Forward every document, marking those that overlap the eval sets."""
        active = bool(self.settings.eval_files) and bool(self.index())
        for doc in data:
            if active and self.overlap("\n".join(section_texts(doc))) > self.settings.threshold:
                drop_episode(doc, "decontam")
            yield doc
