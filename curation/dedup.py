"""Exact and near-duplicate removal.

Exact duplicates share environment version, observation, action and next observation text;
the first one (lowest rank, then position) is kept. It runs in datatrove's three-stage shape:
:class:`ExactDedupSignature` (every rank), :class:`ExactDedupFind` (one task),
:class:`ExactDedupFilter` (every rank, same reader and task count as the signature stage).

Near duplicates use datatrove's MinHash stages with :func:`minhash_config` (numbers kept) and
:class:`StateWordTokenizer`, a regex tokenizer that needs no downloads.
"""

from __future__ import annotations

import hashlib
import re
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from datatrove.data import Document, DocumentsPipeline
from datatrove.pipeline.dedup.minhash import (
    MinhashConfig,
    MinhashDedupBuckets,
    MinhashDedupCluster,
    MinhashDedupFilter,
    MinhashDedupSignature,
)
from datatrove.utils.hashing import HashConfig
from datatrove.utils.text import TextNormConfig
from datatrove.utils.word_tokenizers import WordTokenizer

from worldtrace.curation.config import MinhashSettings
from worldtrace.curation.documents import rendered_action, section_texts
from worldtrace.curation.tally import TallyStep

_RECORD = struct.Struct("<QI")
_WORD = re.compile(r"\w+|[^\w\s]", re.UNICODE)
_SENTENCE = re.compile(r"[^\n]+")

EXACT_DUP = "__curation_exact_dup"
"""Metadata flag set on exact duplicates; :class:`DropMarkedDuplicates` removes them."""


def exact_key(doc: Document) -> int:
    """Return a 64-bit hash of (env version, observation, action, next observation)."""
    env = doc.metadata.get("env") or {}
    parts = [str(env.get("version", "")), *section_texts(doc)]
    digest = hashlib.blake2b("\x00".join(parts).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little")


class ExactDedupSignature(TallyStep):
    """Writes ``(key hash, position)`` for each document to ``<folder>/<rank>.exact``."""

    name = "🎯 exact dedup 1"
    tally_name = "exact_signature"

    def __init__(self, folder: Path) -> None:
        super().__init__()
        self.folder = Path(folder)

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> Iterator:
        """Hash every document, forwarding it unchanged."""
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = self.folder / f"{rank:05d}.exact.tmp"
        with tmp.open("wb") as out:
            for index, doc in enumerate(data):
                out.write(_RECORD.pack(exact_key(doc), index))
                yield doc
        tmp.replace(self.folder / f"{rank:05d}.exact")


class ExactDedupFind(TallyStep):
    """Reads every rank's hashes and writes the positions to remove, ``<rank>.remove``."""

    name = "🎯 exact dedup 2"
    tally_name = "exact_find"

    def __init__(self, folder: Path, ranks: int) -> None:
        super().__init__()
        self.folder = Path(folder)
        self.ranks = ranks

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> Iterator:
        """Keep the first occurrence of each key across ranks in rank order."""
        if world_size != 1:
            raise ValueError("exact dedup stage 2 runs as exactly one task")
        yield from data or ()
        seen: set[int] = set()
        for source in range(self.ranks):
            path = self.folder / f"{source:05d}.exact"
            remove: list[int] = []
            payload = path.read_bytes() if path.exists() else b""
            for key, index in _RECORD.iter_unpack(payload):
                if key in seen:
                    remove.append(index)
                else:
                    seen.add(key)
            tmp = self.folder / f"{source:05d}.remove.tmp"
            tmp.write_bytes(b"".join(struct.pack("<I", i) for i in sorted(remove)))
            tmp.replace(self.folder / f"{source:05d}.remove")


class ExactDedupFilter(TallyStep):
    """Marks exact duplicates found by :class:`ExactDedupFind` (positions as in stage 1).

    Duplicates are marked, not dropped, so that the MinHash filter after this step sees the
    same document positions as its signature stage; :class:`DropMarkedDuplicates` drops them.
    """

    name = "🎯 exact dedup 3"
    tally_name = "exact_filter"

    def __init__(self, folder: Path, tally_folder: Path | None = None) -> None:
        super().__init__(tally_folder)
        self.folder = Path(folder)

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> Iterator:
        """Flag every document whose position is listed for removal."""
        path = self.folder / f"{rank:05d}.remove"
        payload = path.read_bytes() if path.exists() else b""
        remove = {index for (index,) in struct.iter_unpack("<I", payload)}
        for index, doc in enumerate(data):
            if index in remove:
                doc.metadata[EXACT_DUP] = True
                self.tally(doc, "exact_duplicates")
            yield doc
        self.flush_tallies(rank)


class DropMarkedDuplicates(TallyStep):
    """Drops documents flagged by :class:`ExactDedupFilter`."""

    name = "🎯 exact dedup drop"
    tally_name = "exact_drop"

    def __init__(self, tally_folder: Path | None = None) -> None:
        super().__init__(tally_folder)

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> Iterator:
        """Forward unflagged documents."""
        for doc in data:
            if doc.metadata.pop(EXACT_DUP, False):
                self.tally(doc, "dropped_after_minhash")
                continue
            yield doc
        self.flush_tallies(rank)


class StateWordTokenizer(WordTokenizer):
    """Offline word tokenizer for state text: runs of word characters and single symbols."""

    def __init__(self) -> None:
        super().__init__("state")

    def word_tokenize(self, text: str) -> list[str]:
        """Split text into words and symbols."""
        return _WORD.findall(text)

    def sent_tokenize(self, text: str) -> list[str]:
        """Split text into lines."""
        return _SENTENCE.findall(text)

    def span_tokenize(self, text: str) -> list[tuple[int, int]]:
        """Return the spans of the lines."""
        return [match.span() for match in _SENTENCE.finditer(text)]


def minhash_config(settings: MinhashSettings) -> MinhashConfig:
    """Return datatrove's MinHash config for ``settings``, keeping numbers and punctuation."""
    return MinhashConfig(
        n_grams=settings.n_grams,
        num_buckets=settings.num_buckets,
        hashes_per_bucket=settings.hashes_per_bucket,
        seed=settings.seed,
        norm_config=TextNormConfig(norm_numbers=False, remove_punctuation=False),
        # the installed xxhash rejects str input (datatrove passes str): sha1 works everywhere
        hash_config=HashConfig(precision=64, hash_fc="sha1"),
    )


class ActionScopedMinhashSignature(MinhashDedupSignature):
    """MinHash stage 1 where only transitions with the same action can be near-duplicates.

    Screens dominate the rendered text and consecutive steps of one episode share most of
    their screen, so plain shingles call ``ls`` and ``cat notes.txt`` on the same screen
    duplicates. Salting every shingle with the action text keeps the comparison to
    transitions that did the same thing to nearly the same state.
    """

    def get_shingles(self, text: str) -> np.ndarray:
        """Return the screens' shingles, each hashed together with the action text."""
        # MinHash stage 1 sees only the text, so the action is read back from the rendering.
        action = rendered_action(text)
        shingles = super().get_shingles(text)
        if not action:
            return shingles
        salt = np.uint64(int.from_bytes(hashlib.sha1(action.encode()).digest()[:8], "little"))
        return shingles ^ salt


def minhash_signature(folder: Path, settings: MinhashSettings) -> MinhashDedupSignature:
    """Return MinHash stage 1 with the offline tokenizer, scoped to the action."""
    return ActionScopedMinhashSignature(
        output_folder=str(folder),
        config=minhash_config(settings),
        language=StateWordTokenizer(),  # type: ignore[arg-type]  # accepted by datatrove
    )


def minhash_buckets(sigs: Path, buckets: Path, settings: MinhashSettings) -> MinhashDedupBuckets:
    """Return MinHash stage 2 (run with ``num_buckets`` tasks)."""
    return MinhashDedupBuckets(
        input_folder=str(sigs), output_folder=str(buckets), config=minhash_config(settings)
    )


def minhash_cluster(buckets: Path, remove: Path, settings: MinhashSettings) -> MinhashDedupCluster:
    """Return MinHash stage 3 (run as one task)."""
    return MinhashDedupCluster(
        input_folder=str(buckets), output_folder=str(remove), config=minhash_config(settings)
    )


def minhash_filter(remove: Path) -> MinhashDedupFilter:
    """Return MinHash stage 4 (same reader and task count as stage 1)."""
    return MinhashDedupFilter(input_folder=str(remove))


def describe(settings: MinhashSettings) -> dict[str, Any]:
    """Return the MinHash settings as recorded in the stats."""
    return settings.model_dump()
