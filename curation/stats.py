"""Statistics per domain and environment version, written as ``stats.json`` next to the output.

Counts come from the tallies the curation steps write per rank (see
:mod:`worldtrace.curation.tally`);
text lengths are measured on the written transitions with polars.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from datatrove.io import DataFolder

from worldtrace.curation.storage import scan_parquet, write_json
from worldtrace.curation.tally import ALL, read_tallies

QUANTILES = (0.5, 0.9, 0.99)


def _rate(part: int, whole: int) -> float:
    return round(part / whole, 6) if whole else 0.0


def _group_counts(tallies: dict[str, Counter[str]]) -> dict[str, Counter[str]]:
    """Fold every tally into ``{"domain|env": Counter(event -> n)}``."""
    groups: dict[str, Counter[str]] = defaultdict(Counter)
    for counter in tallies.values():
        for key, value in counter.items():
            domain, env, event = key.split("|", 2)
            groups[f"{domain}|{env}"][event] += value
    return groups


def _by_rule(counts: Counter[str], prefix: str) -> dict[str, int]:
    found = {k.removeprefix(prefix): v for k, v in counts.items() if k.startswith(prefix)}
    return dict(sorted(found.items()))


def _summary(counts: Counter[str]) -> dict[str, Any]:
    """The counts of one group: rows read and written, targets, and why the others are not.

    ``rows_out`` are the rows of kept episodes, all written; ``targets`` those of them that are
    training targets. ``dropped`` counts the rows of dropped episodes by the rule that dropped
    them; ``copies`` rows two inputs both held, written once.
    """
    read, written, targets = counts["read"], counts["written"], counts["targets"]
    exact, near = counts["duplicates:exact"], counts["duplicates:near"]
    dropped = _by_rule(counts, "dropped:")
    return {
        "rows_in": read,
        "rows_out": written,
        "targets": targets,
        "copies": counts["copies"],
        "exact_duplicates": exact,
        "near_duplicates": near,
        "dropped": dropped,
        "excluded": _by_rule(counts, "excluded:"),
        "labelled": _by_rule(counts, "labelled:"),
        "scrubbed": _by_rule(counts, "scrubbed:"),
        "scrubbed_rows": counts["scrubbed_rows"],
        "rates": {
            "exact_dedup": _rate(exact, written),
            "near_dedup": _rate(near, written),
            "dropped": _rate(sum(dropped.values()), read),
            "decontam": _rate(dropped.get("decontam", 0), read),
            "scrub": _rate(counts["scrubbed_rows"], written),
            "kept": _rate(written, read),
            "targets": _rate(targets, written),
        },
    }


def _lengths(transitions: DataFolder) -> dict[str, dict[str, Any]]:
    """Return text length quantiles per ``domain|env`` of the written shards."""
    import polars as pl

    files = transitions.list_files(glob_pattern="*/*.parquet")
    if not files:
        return {}
    frame = (
        scan_parquet(transitions, files)
        .select(
            pl.col("domain"),
            pl.col("env").struct.field("version").alias("env_version"),
            pl.col("observation").struct.field("text").str.len_chars().alias("observation"),
            pl.col("action").struct.field("text").str.len_chars().alias("action"),
            pl.col("next_observation").struct.field("text").str.len_chars().alias("next"),
        )
        .collect()
    )
    result: dict[str, dict[str, Any]] = {}
    for (domain, env), part in frame.group_by(["domain", "env_version"], maintain_order=True):
        entry: dict[str, Any] = {}
        for column, label in (
            ("observation", "observation_chars"),
            ("action", "action_chars"),
            ("next", "next_observation_chars"),
        ):
            series = part[column]
            entry[label] = {
                **{f"p{int(q * 100)}": float(series.quantile(q) or 0) for q in QUANTILES},
                "mean": float(series.mean() or 0),
                "max": int(series.max() or 0),
            }
        result[f"{domain}|{env}"] = entry
    return result


def build_stats(
    transitions: DataFolder, tally_folder: DataFolder, extra: dict[str, Any]
) -> dict[str, Any]:
    """Return the statistics of a finished curation whose shards are in ``transitions``."""
    groups = _group_counts(read_tallies(tally_folder))
    global_counts = groups.pop(f"{ALL}|{ALL}", Counter())
    lengths = _lengths(transitions)
    domains: dict[str, Any] = {}
    domain_totals: dict[str, Counter[str]] = defaultdict(Counter)
    for key in sorted(groups):
        domain, env = key.split("|", 1)
        domain_totals[domain].update(groups[key])
        entry = domains.setdefault(domain, {"env_versions": {}})
        entry["env_versions"][env] = {**_summary(groups[key]), "lengths": lengths.get(key, {})}
    for domain, counts in domain_totals.items():
        domains[domain] = {**_summary(counts), "env_versions": domains[domain]["env_versions"]}
    total: Counter[str] = Counter()
    for counts in domain_totals.values():
        total.update(counts)
    return {
        "total": _summary(total),
        "quarantine": {
            "files": global_counts["quarantined_files"],
            "rows": global_counts["quarantined_rows"],
        },
        "domains": domains,
        **extra,
    }


def write_stats(folder: DataFolder, name: str, stats: dict[str, Any]) -> None:
    """Write ``stats`` as indented JSON to ``name`` in ``folder`` (atomically on a local disk)."""
    write_json(folder, name, stats)
