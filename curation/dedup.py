"""Exact and near duplicates: found across every input, marked, never removed.

A duplicate stays in its episode (a world model reads it as history) and is marked
``curation.duplicate_of`` the row kept as the training target, with the rule that found it
(``exact`` or ``near``); the kept row is the first by rank and position whose episode is kept.
Rows of one transition that two inputs both hold (a run and a corpus curated from it: the
same id and content) are one row, written once.

* **Exact** duplicates share environment version, observation, action (name, arguments and
  text), next observation, action error, reward and termination (:func:`exact_key`). Their
  keys are hashed on datatrove's bounded-memory exact dedup stage 1
  (:class:`ExactDedupSignature`, every rank: sorted signature files).
* **Near** duplicates are found by datatrove's MinHash stages with :func:`minhash_config`
  (numbers kept) and :class:`StateWordTokenizer` (no downloads). Only transitions with the same
  outcome key (action name, arguments and text, error, reward, termination) and the same change
  (the lines the action removed from and added to the observation) can be near duplicates
  (:class:`OutcomeScopedMinhashSignature`): the same action making the same change to a nearly
  identical state. A submit with other values, or a key press that changed other lines, is a
  different transition.
* :class:`FindDuplicates` (one task) merges the exact signature files (a heap merge holding a
  buffer per file) and MinHash's clusters into groups, and writes for every rank the positions
  of its duplicates with the id they duplicate; memory grows with the duplicates, not the
  corpus. :class:`MarkDuplicates` (every rank, same reader and task count as the signature
  stage) marks them.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import re
from collections import Counter
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from datatrove.data import Document, DocumentsPipeline
from datatrove.io import DataFolder
from datatrove.pipeline.base import PipelineStep
from datatrove.pipeline.dedup.exact_dedup import ExactDedupConfig, read_sigs
from datatrove.pipeline.dedup.exact_dedup import (
    ExactDedupSignature as DatatroveExactDedupSignature,
)
from datatrove.pipeline.dedup.minhash import (
    MinhashConfig,
    MinhashDedupBuckets,
    MinhashDedupCluster,
    MinhashDedupSignature,
)
from datatrove.utils.hashing import HashConfig
from datatrove.utils.text import TextNormConfig
from datatrove.utils.typeshelper import ExtensionHelperSD
from datatrove.utils.word_tokenizers import WordTokenizer

from worldtrace.curation.config import MinhashSettings
from worldtrace.curation.documents import row_texts
from worldtrace.curation.filters import dropped_episodes
from worldtrace.curation.labels import mark_duplicate
from worldtrace.curation.storage import Location, as_folder
from worldtrace.curation.tally import TallyStep

_WORD = re.compile(r"\w+|[^\w\s]", re.UNICODE)
_SENTENCE = re.compile(r"[^\n]+")

EXACT_HASH = HashConfig(precision=64, hash_fc="sha1")
"""64-bit keys (sha1 needs no optional dependency; the installed xxhash rejects str)."""
MAX_TASKS = 65535
"""datatrove's priorities are 16 bits; curation keeps a rank's documents with priority
``65535 - rank``, so no more tasks than this can be told apart."""
COPY = "copy"
"""The rule of a row that another input already holds (same id): written once."""


def outcome_key(row: dict[str, Any]) -> str:
    """What a row's action was and how it ended: name, arguments, text, error, reward, end."""
    action = row.get("action") or {}
    return "\x00".join(
        [
            str(action.get("name", "")),
            str(action.get("arguments", "")),
            str(action.get("text", "")),
            str(row.get("action_error") or ""),
            repr(float(row.get("reward") or 0.0)),
            str(bool(row.get("terminated"))),
        ]
    )


def exact_key(doc: Document) -> str:
    """Return what makes transitions exact duplicates: env version, texts and outcome."""
    env = doc.metadata.get("env") or {}
    row = doc.metadata
    return "\x00".join([str(env.get("version", "")), *row_texts(row), outcome_key(row)])


def change_key(row: dict[str, Any]) -> str:
    """The lines a row's action removed from the observation and added to it, sorted."""
    observation, _action, next_observation = row_texts(row)
    before, after = Counter(observation.splitlines()), Counter(next_observation.splitlines())
    removed = sorted((before - after).elements())
    added = sorted((after - before).elements())
    return "\n".join(["-" + line for line in removed] + ["+" + line for line in added])


def exact_dedup_config() -> ExactDedupConfig:
    """Datatrove's exact-dedup config for :func:`exact_key` (priorities set per rank)."""
    return ExactDedupConfig(content_getter=exact_key, hash_config=EXACT_HASH)


class RecordIds(PipelineStep):
    """Writes the id of every document it forwards, one JSON string a line, per rank.

    The dedup stages name documents by rank and position; these files turn a position back
    into the transition id (and its episode) for :class:`FindDuplicates`.
    """

    type = "🧮 - CURATION"
    name = "🪪 ids"

    def __init__(self, folder: Location) -> None:
        super().__init__()
        self.folder = as_folder(folder)

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> Iterator:
        """Forward every document, writing its id."""
        with self.folder.open(f"{rank:05d}.jsonl", "w", encoding="utf-8") as handle:
            for doc in data:
                handle.write(json.dumps(doc.id) + "\n")
                yield doc


class ExactDedupSignature(DatatroveExactDedupSignature):
    """datatrove's exact-dedup stage 1 that forwards the documents it signs.

    Each rank writes its signatures sorted to ``<folder>/0000/<rank>.c4_sig`` (datatrove's
    layout). A document's priority is ``65535 - rank``, so the heap merge meets a group's
    members by rank and then position; positions count the documents reaching this step.
    """

    name = "🎯 exact dedup 1"

    def __init__(self, folder: Location) -> None:
        super().__init__(as_folder(folder), exact_dedup_config())
        self._priority = MAX_TASKS

    def get_hashes(self, doc: Document, doc_idx: int) -> list[tuple[int, int, int]]:
        """One signature per document: its key's hash, its rank's priority, its position."""
        return [(self.hash_fc(exact_key(doc)), self._priority, doc_idx)]

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


def _salt(text: str) -> np.uint64:
    return np.uint64(int.from_bytes(hashlib.sha1(text.encode()).digest()[:8], "little"))


class OutcomeScopedMinhashSignature(MinhashDedupSignature):
    """MinHash stage 1 where only transitions with the same outcome and change can match.

    Screens dominate the rendered text and consecutive steps of one episode share most of
    their screen, so plain shingles call ``ls`` and ``cat notes.txt`` on the same screen
    duplicates, and a form submitted with other values a duplicate of the first submit.
    Every shingle is hashed together with :func:`outcome_key` and :func:`change_key`, so
    documents differing in either share no shingle.
    """

    _doc_salt = np.uint64(0)

    def get_shingles(self, text: str) -> np.ndarray:
        """Return the text's shingles, each hashed with the current document's salt."""
        return super().get_shingles(text) ^ self._doc_salt

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> Any:
        """Run datatrove's stage 1 with each document's salt set just before it is shingled."""

        def salted(docs: DocumentsPipeline) -> Iterator[Document]:
            for doc in docs:
                self._doc_salt = _salt(
                    outcome_key(doc.metadata) + "\x01" + change_key(doc.metadata)
                )
                yield doc

        return super().run(salted(data), rank, world_size)


def minhash_signature(folder: Location, settings: MinhashSettings) -> MinhashDedupSignature:
    """Return MinHash stage 1 with the offline tokenizer, scoped to outcome and change."""
    return OutcomeScopedMinhashSignature(
        output_folder=as_folder(folder),
        config=minhash_config(settings),
        language=StateWordTokenizer(),
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
    buckets: Location, clusters: Location, settings: MinhashSettings
) -> MinhashDedupCluster:
    """Return MinHash stage 3 (run as one task); it writes every clustered document's id."""
    return MinhashDedupCluster(
        input_folder=as_folder(buckets),
        output_folder=as_folder(clusters),
        config=minhash_config(settings),
        save_cluster_id=True,
    )


Node = tuple[int, int]
"""A document by ``(rank, position)``."""


class _Groups:
    """Union-find over documents; a group's members are later sorted by rank and position."""

    def __init__(self) -> None:
        self.parent: dict[Node, Node] = {}

    def find(self, node: Node) -> Node:
        root = node
        while self.parent.setdefault(root, root) != root:
            root = self.parent[root]
        while self.parent[node] != root:  # path compression
            self.parent[node], node = root, self.parent[node]
        return root

    def union(self, a: Node, b: Node) -> None:
        root_a, root_b = self.find(a), self.find(b)
        if root_a != root_b:
            self.parent[max(root_a, root_b)] = min(root_a, root_b)

    def members(self) -> dict[Node, list[Node]]:
        groups: dict[Node, list[Node]] = {}
        for node in self.parent:
            groups.setdefault(self.find(node), []).append(node)
        return {root: sorted(nodes) for root, nodes in groups.items()}


def _exact_groups(signatures: DataFolder, groups: _Groups) -> dict[Node, int]:
    """Join documents with equal exact keys; return each joined document's key group."""
    files = signatures.list_files(glob_pattern=f"*/*{ExtensionHelperSD.stage_1_signature}")
    readers = [
        read_sigs(handle, index, EXACT_HASH, lines_to_buffer=4096)
        for index, handle in enumerate(signatures.open_files(files))
    ]
    heap = [first for first in (next(reader, None) for reader in readers) if first is not None]
    heapq.heapify(heap)
    key_of: dict[Node, int] = {}
    last = None
    while heap:
        sig = heapq.heappop(heap)
        node = (MAX_TASKS - sig.priority, sig.doc_id)
        if last is not None and last[0] == sig.hash_value:
            groups.union(last[1], node)
            key_of[last[1]] = key_of[node] = sig.hash_value
        else:
            last = (sig.hash_value, node)
        following = next(readers[sig.file_id], None)
        if following is not None:
            heapq.heappush(heap, following)
    return key_of


def _near_groups(clusters: DataFolder, groups: _Groups) -> None:
    """Join the documents MinHash's stage 3 put in one cluster."""
    first_of: dict[int, Node] = {}
    for name in clusters.list_files(glob_pattern="*.clusters"):
        rank = int(name.rsplit("/", 1)[-1].removesuffix(".clusters"))
        with clusters.open(name, "rb") as handle:
            pairs = np.frombuffer(handle.read(), dtype="<u4").reshape(-1, 2)
        for position, cluster in pairs.tolist():
            node = (rank, position)
            groups.union(first_of.setdefault(cluster, node), node)


def _ids_at(ids: DataFolder, wanted: dict[int, set[int]]) -> dict[Node, str]:
    """The transition ids of the wanted positions of each rank."""
    found: dict[Node, str] = {}
    for rank, positions in wanted.items():
        with ids.open(f"{rank:05d}.jsonl", "r", encoding="utf-8") as handle:
            for position, line in enumerate(handle):
                if position in positions:
                    found[(rank, position)] = json.loads(line)
    return found


def _episode_of(transition_id: str) -> str:
    return transition_id.rsplit(":", 1)[0]


DUPLICATES_SCHEMA = pa.schema(
    [("position", pa.uint32()), ("duplicate_of", pa.string()), ("rule", pa.string())]
)


class FindDuplicates(PipelineStep):
    """Groups exact and near duplicates and writes each rank's duplicates (one task).

    In a group, members are taken by rank and position: a member whose id an earlier member
    has is a copy of that row; of the others, the first whose episode is kept stays the
    training target and the rest duplicate it, ``exact`` when their exact key is the target's,
    else ``near``. Members of episodes the verdicts in ``verdicts`` drop are passed over. Writes
    ``<output>/<rank>.parquet`` (position, duplicate_of, rule) for every rank with duplicates.
    """

    type = "🫂 - DEDUP"
    name = "🎯 find duplicates"

    def __init__(
        self,
        ids: Location,
        output: Location,
        exact_signatures: Location | None,
        clusters: Location | None,
        verdicts: Location,
    ) -> None:
        super().__init__()
        self.ids = as_folder(ids)
        self.output = as_folder(output)
        self.exact_signatures = as_folder(exact_signatures) if exact_signatures else None
        self.clusters = as_folder(clusters) if clusters else None
        self.verdicts = as_folder(verdicts)

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> Iterator:
        """Group, pick each group's target, and write the duplicates of every rank."""
        if world_size != 1:
            raise ValueError("finding duplicates runs as exactly one task")
        yield from data or ()
        groups = _Groups()
        key_of = _exact_groups(self.exact_signatures, groups) if self.exact_signatures else {}
        if self.clusters is not None:
            _near_groups(self.clusters, groups)
        members = groups.members()
        wanted: dict[int, set[int]] = {}
        for node in groups.parent:
            wanted.setdefault(node[0], set()).add(node[1])
        ids = _ids_at(self.ids, wanted)
        dropped = dropped_episodes(self.verdicts)
        found: dict[int, list[tuple[int, str, str]]] = {}
        for nodes in members.values():
            seen: set[str] = set()
            target: Node | None = None
            for node in nodes:
                transition = ids[node]
                if transition in seen:
                    found.setdefault(node[0], []).append((node[1], transition, COPY))
                    continue
                seen.add(transition)
                if _episode_of(transition) in dropped:
                    continue
                if target is None:
                    target = node
                    continue
                exact = node in key_of and key_of.get(target) == key_of[node]
                rule = "exact" if exact else "near"
                found.setdefault(node[0], []).append((node[1], ids[target], rule))
        for old in self.output.list_files(glob_pattern="*.parquet"):
            self.output.rm(old)
        for dup_rank, entries in found.items():
            entries.sort()
            table = pa.Table.from_pylist(
                [{"position": p, "duplicate_of": of, "rule": rule} for p, of, rule in entries],
                schema=DUPLICATES_SCHEMA,
            )
            with self.output.open(f"{dup_rank:05d}.parquet", "wb") as handle:
                pq.write_table(table, handle)


class MarkDuplicates(TallyStep):
    """Marks the duplicates :class:`FindDuplicates` listed for this rank; drops copies.

    Positions count the documents reaching this step, as they reached the signature steps.
    """

    name = "🎯 mark duplicates"
    tally_name = "duplicates"

    def __init__(self, folder: Location, tally_folder: Location | None = None) -> None:
        super().__init__(tally_folder)
        self.folder = as_folder(folder)

    def _listed(self, rank: int) -> dict[int, tuple[str, str]]:
        name = f"{rank:05d}.parquet"
        if not self.folder.exists(name):
            return {}
        with self.folder.open(name, "rb") as handle:
            table = pq.read_table(handle)
        return {row["position"]: (row["duplicate_of"], row["rule"]) for row in table.to_pylist()}

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> Iterator:
        """Mark every listed document; forward all but copies of rows already forwarded."""
        listed = self._listed(rank)
        matched = 0
        for index, doc in enumerate(data):
            entry = listed.get(index)
            if entry is not None:
                matched += 1
                duplicate_of, rule = entry
                if rule == COPY:
                    self.tally(doc, "copies")
                    continue
                mark_duplicate(doc, duplicate_of, rule)
            yield doc
        if matched != len(listed):
            raise RuntimeError(
                f"dedup: rank {rank} has {len(listed)} duplicates listed but only {matched} "
                "documents at their positions (the input changed?)"
            )
        self.flush_tallies(rank)


def describe(settings: MinhashSettings) -> dict[str, Any]:
    """Return the MinHash settings as recorded in the stats."""
    return settings.model_dump()


__all__ = [
    "ExactDedupSignature",
    "FindDuplicates",
    "MarkDuplicates",
    "RecordIds",
    "StateWordTokenizer",
    "change_key",
    "exact_key",
    "minhash_buckets",
    "minhash_cluster",
    "minhash_config",
    "minhash_signature",
    "outcome_key",
]
