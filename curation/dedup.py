"""Exact and near-duplicate removal.

Exact duplicates share environment version, observation, action and next observation text;
the first one (lowest rank, then position) is kept. It runs on datatrove's bounded-memory
exact dedup: :class:`ExactDedupSignature` (every rank: sorted signature files),
:func:`exact_dedup_find` (datatrove's stage 2, one task: a heap merge of those files that
never holds more than a buffer per file) and :class:`ExactDedupFilter` (every rank, same
reader and task count as the signature stage), which marks what stage 2 found. A task keeps
only its own share's signatures (sorted before they are written, as datatrove does), so more
tasks mean less memory each; nothing holds every key of the corpus at once.

Near duplicates use datatrove's MinHash stages with :func:`minhash_config` (numbers kept) and
:class:`StateWordTokenizer`, a regex tokenizer that needs no downloads.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from typing import Any

import numpy as np
from datatrove.data import Document, DocumentsPipeline
from datatrove.io import DataFolder
from datatrove.pipeline.dedup.exact_dedup import ExactDedupConfig, ExactFindDedups
from datatrove.pipeline.dedup.exact_dedup import (
    ExactDedupSignature as DatatroveExactDedupSignature,
)
from datatrove.pipeline.dedup.minhash import (
    MinhashConfig,
    MinhashDedupBuckets,
    MinhashDedupCluster,
    MinhashDedupFilter,
    MinhashDedupSignature,
)
from datatrove.utils.hashing import HashConfig
from datatrove.utils.text import TextNormConfig
from datatrove.utils.typeshelper import ExtensionHelperSD
from datatrove.utils.word_tokenizers import WordTokenizer

from worldtrace.curation.config import MinhashSettings
from worldtrace.curation.documents import rendered_action, section_texts
from worldtrace.curation.storage import Location, as_folder
from worldtrace.curation.tally import TallyStep

DUPLICATES_SUFFIX = ExtensionHelperSD.stage_2_duplicates
_WORD = re.compile(r"\w+|[^\w\s]", re.UNICODE)
_SENTENCE = re.compile(r"[^\n]+")

EXACT_DUP = "__curation_exact_dup"
"""Metadata flag set on exact duplicates; :class:`DropMarkedDuplicates` removes them."""


def exact_key(doc: Document) -> str:
    """Return what makes transitions exact duplicates: env version and the three texts."""
    env = doc.metadata.get("env") or {}
    return "\x00".join([str(env.get("version", "")), *section_texts(doc)])


EXACT_HASH = HashConfig(precision=64, hash_fc="sha1")
"""64-bit keys (sha1 needs no optional dependency; the installed xxhash rejects str)."""
MAX_TASKS = 65535
"""datatrove's priorities are 16 bits; curation keeps a rank's documents with priority
``65535 - rank``, so no more tasks than this can be told apart."""


def exact_dedup_config() -> ExactDedupConfig:
    """Datatrove's exact-dedup config for :func:`exact_key` (priorities set per rank)."""
    return ExactDedupConfig(content_getter=exact_key, hash_config=EXACT_HASH)


class ExactDedupSignature(DatatroveExactDedupSignature):
    """datatrove's exact-dedup stage 1 that forwards the documents it signs.

    Each rank writes its signatures sorted to ``<folder>/0000/<rank>.c4_sig`` (datatrove's
    layout). Of identical transitions the first one is kept, by rank and then position as
    they are read: a document's priority is ``65535 - rank`` (datatrove keeps the highest
    priority, then the lowest position), and positions count the documents reaching this step.
    """

    name = "🎯 exact dedup 1"

    def __init__(self, folder: Location) -> None:
        super().__init__(as_folder(folder), exact_dedup_config())
        self._priority = MAX_TASKS

    def get_hashes(self, doc: Document, doc_idx: int) -> list[tuple[int, int, int]]:
        """One signature per document: its key's hash, its rank's priority, its position."""
        return [(self.hash_fc(exact_key(doc)), self._priority, doc_idx)]  # type: ignore[arg-type]

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> Iterator:
        """Sign every document, forwarding it unchanged; write the signatures at the end."""
        if world_size > MAX_TASKS:
            raise ValueError(f"exact dedup tells at most {MAX_TASKS} tasks apart")
        self._priority = MAX_TASKS - rank
        signatures: list[tuple[int, int, int]] = []
        for index, doc in enumerate(data):
            signatures.extend(self.get_hashes(doc, index))
            yield doc
        self.save_hashes(rank, signatures)


def exact_dedup_find(signatures: Location, duplicates: Location) -> ExactFindDedups:
    """Datatrove's exact-dedup stage 2 (one task): a heap merge of the sorted signature files.

    It writes the positions of every duplicate but the kept one to
    ``<duplicates>/00000/<rank>.c4_dup``; its memory does not grow with the corpus.
    """
    return ExactFindDedups(
        as_folder(signatures), as_folder(duplicates), exact_dedup_config(), lines_to_buffer=4096
    )


def duplicate_positions(folder: DataFolder, rank: int) -> np.ndarray:
    """The sorted positions of rank ``rank``'s documents that datatrove's stage 2 found."""
    files = folder.list_files(glob_pattern=f"*/{rank:05d}{DUPLICATES_SUFFIX}")
    parts = []
    for name in files:
        with folder.open(name, "rb") as handle:
            parts.append(np.frombuffer(handle.read(), dtype="<u4"))
    return np.sort(np.concatenate(parts)) if parts else np.empty(0, dtype="<u4")


class ExactDedupFilter(TallyStep):
    """Marks the exact duplicates datatrove's stage 2 found (positions as in stage 1).

    Duplicates are marked, not dropped, so that the MinHash filter after this step sees the
    same document positions as its signature stage; :class:`DropMarkedDuplicates` drops them.
    """

    name = "🎯 exact dedup 3"
    tally_name = "exact_filter"

    def __init__(self, folder: Location, tally_folder: Location | None = None) -> None:
        super().__init__(tally_folder)
        self.folder = as_folder(folder)

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> Iterator:
        """Flag every document whose position is listed as a duplicate."""
        remove = duplicate_positions(self.folder, rank)
        marked = 0
        for index, doc in enumerate(data):
            if marked < len(remove) and remove[marked] == index:
                marked += 1
                doc.metadata[EXACT_DUP] = True
                self.tally(doc, "exact_duplicates")
            yield doc
        if marked != len(remove):
            raise RuntimeError(
                f"exact dedup: rank {rank} has {len(remove)} duplicates listed but only "
                f"{marked} documents matched their positions (the input changed?)"
            )
        self.flush_tallies(rank)


class DropMarkedDuplicates(TallyStep):
    """Drops documents flagged by :class:`ExactDedupFilter`."""

    name = "🎯 exact dedup drop"
    tally_name = "exact_drop"

    def __init__(self, tally_folder: Location | None = None) -> None:
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


def minhash_signature(folder: Location, settings: MinhashSettings) -> MinhashDedupSignature:
    """Return MinHash stage 1 with the offline tokenizer, scoped to the action."""
    return ActionScopedMinhashSignature(
        output_folder=as_folder(folder),
        config=minhash_config(settings),
        language=StateWordTokenizer(),  # type: ignore[arg-type]  # accepted by datatrove
    )


def minhash_buckets(
    sigs: Location, buckets: Location, settings: MinhashSettings
) -> MinhashDedupBuckets:
    """Return MinHash stage 2 (run with ``num_buckets`` tasks)."""
    return MinhashDedupBuckets(
        input_folder=as_folder(sigs),
        output_folder=as_folder(buckets),
        config=minhash_config(settings),
    )


def minhash_cluster(
    buckets: Location, remove: Location, settings: MinhashSettings
) -> MinhashDedupCluster:
    """Return MinHash stage 3 (run as one task)."""
    return MinhashDedupCluster(
        input_folder=as_folder(buckets),
        output_folder=as_folder(remove),
        config=minhash_config(settings),
    )


def minhash_filter(remove: Location) -> MinhashDedupFilter:
    """Return MinHash stage 4 (same reader and task count as stage 1)."""
    return MinhashDedupFilter(input_folder=as_folder(remove))


def describe(settings: MinhashSettings) -> dict[str, Any]:
    """Return the MinHash settings as recorded in the stats."""
    return settings.model_dump()
