"""Curation's marks on documents, and the ``curation`` column they become.

Curation keeps or drops whole episodes (see :mod:`worldtrace.curation.pipeline`). While a
document passes the steps, they mark it here: the rules it matched (labels), the rules that
exclude it as a training target, the row it duplicates, and (first pass only) the rules that
ask for its whole episode to be dropped. :func:`curation_column` turns the marks into the
row's :class:`~worldtrace.schemas.Curation` value; nothing else is written.
"""

from __future__ import annotations

from typing import Any

from datatrove.data import Document

LABELS_KEY = "__curation_labels"
"""Rules the document matched, in the order they matched."""
EXCLUDED_KEY = "__curation_excluded"
"""Rules that exclude the document as a training target (it stays in its episode)."""
DUPLICATE_KEY = "__curation_duplicate"
"""``(id of the row it duplicates, rule)``."""
DROP_EPISODE_KEY = "__curation_drop_episode"
"""Rules asking for the document's whole episode to be dropped (read by the first pass)."""


def _add(doc: Document, key: str, value: str) -> None:
    values: list[str] = doc.metadata.setdefault(key, [])
    if value not in values:
        values.append(value)


def add_label(doc: Document, rule: str) -> None:
    """Record that the document matched ``rule`` (once)."""
    _add(doc, LABELS_KEY, rule)


def exclude(doc: Document, rule: str) -> None:
    """Label the document with ``rule`` and exclude it as a training target."""
    add_label(doc, rule)
    _add(doc, EXCLUDED_KEY, rule)


def drop_episode(doc: Document, rule: str) -> None:
    """Ask for the document's whole episode to be dropped because of ``rule``."""
    add_label(doc, rule)
    _add(doc, DROP_EPISODE_KEY, rule)


def mark_duplicate(doc: Document, duplicate_of: str, rule: str) -> None:
    """Mark the document as a duplicate of row ``duplicate_of`` found by ``rule``."""
    doc.metadata[DUPLICATE_KEY] = (duplicate_of, rule)


def labels_of(doc: Document) -> list[str]:
    """Return the rules the document matched."""
    return list(doc.metadata.get(LABELS_KEY, []))


def episode_drops_of(doc: Document) -> list[str]:
    """Return the rules asking for the document's episode to be dropped."""
    return list(doc.metadata.get(DROP_EPISODE_KEY, []))


def is_target(doc: Document) -> bool:
    """Whether the document is still a training target (no duplicate, no excluding rule)."""
    return DUPLICATE_KEY not in doc.metadata and not doc.metadata.get(EXCLUDED_KEY)


def curation_column(doc: Document) -> dict[str, Any]:
    """Return the ``curation`` column value of a document (see ``schemas.Curation``)."""
    duplicate_of, rule = doc.metadata.get(DUPLICATE_KEY) or (None, None)
    return {
        "target": is_target(doc),
        "duplicate_of": duplicate_of,
        "duplicate_rule": rule,
        "labels": labels_of(doc),
    }
