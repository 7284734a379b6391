"""Curation labels carried on documents and written into the observation ``meta`` JSON."""

from __future__ import annotations

from datatrove.data import Document

LABELS_KEY = "__curation_labels"
"""Metadata key under which steps collect labels; never written as a column."""


def add_label(doc: Document, label: str) -> None:
    """Attach ``label`` to a document (once)."""
    labels: list[str] = doc.metadata.setdefault(LABELS_KEY, [])
    if label not in labels:
        labels.append(label)


def labels_of(doc: Document) -> list[str]:
    """Return the labels attached to a document."""
    return list(doc.metadata.get(LABELS_KEY, []))
