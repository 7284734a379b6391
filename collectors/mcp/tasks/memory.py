"""Scripted tasks on ``@modelcontextprotocol/server-memory``: a knowledge graph about the team.

The seeded graph (``/srv/memory/memory.jsonl``, the server's own JSON-lines format) knows six
entities (Maya Chen and Tom Okafor, people; the tidewatch project; the Brest and Newlyn tide
stations; the Harbour Office) with their observations, and six relations between them. The
tasks build on it (new people, stations, meetings), correct it (a release, a role, an outdated
fact) and query it. Each check reads the memory file in the container afterwards, so it sees
exactly what the server wrote; a question's check compares the server's answer with the file.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from worldtrace.collectors.mcp.tasks import (
    CheckContext,
    McpTask,
    all_of,
    last_answer,
    structured,
)
from worldtrace.collectors.tool_calls import tool_call

MEMORY_FILE = "/srv/memory/memory.jsonl"

Relation = tuple[str, str, str]
"""``(from, relationType, to)``."""


@dataclass(frozen=True)
class Graph:
    """The knowledge graph as the memory file holds it."""

    entities: dict[str, tuple[str, tuple[str, ...]]]
    """Entity name → (entity type, observations in order)."""
    relations: frozenset[Relation]
    readable: bool = True
    """False when a line of the file is not an entity or relation in the server's format:
    every check on such a graph fails."""


def read_graph(context: CheckContext) -> Graph:
    """The graph in the container's memory file (empty when the file does not exist)."""
    text = context.run(["sh", "-c", f"cat {MEMORY_FILE} 2>/dev/null || true"])
    entities: dict[str, tuple[str, tuple[str, ...]]] = {}
    relations: set[Relation] = set()
    try:
        for line in text.splitlines():
            if not line.strip():
                continue
            item = json.loads(line)
            if item["type"] == "entity":
                entities[item["name"]] = (item["entityType"], tuple(item["observations"]))
            elif item["type"] == "relation":
                relations.add((item["from"], item["relationType"], item["to"]))
            else:
                raise ValueError(f"unknown item type {item['type']!r}")
    except (ValueError, KeyError, TypeError):
        return Graph({}, frozenset(), readable=False)
    return Graph(entities, frozenset(relations))


def has_entity(
    name: str, entity_type: str, observations: Iterable[str] = ()
) -> Callable[[CheckContext], bool]:
    """The graph has ``name`` of ``entity_type`` with at least ``observations``."""
    wanted = tuple(observations)

    def check(context: CheckContext) -> bool:
        entity = read_graph(context).entities.get(name)
        return entity is not None and entity[0] == entity_type and set(wanted) <= set(entity[1])

    return check


def lacks_observations(name: str, *observations: str) -> Callable[[CheckContext], bool]:
    """The entity ``name`` exists and has none of ``observations``."""

    def check(context: CheckContext) -> bool:
        entity = read_graph(context).entities.get(name)
        return entity is not None and not set(observations) & set(entity[1])

    return check


def has_relations(*relations: Relation) -> Callable[[CheckContext], bool]:
    """The graph holds every one of ``relations``."""
    return lambda context: set(relations) <= read_graph(context).relations


def lacks_relations(*relations: Relation) -> Callable[[CheckContext], bool]:
    """The graph holds none of ``relations``."""

    def check(context: CheckContext) -> bool:
        graph = read_graph(context)
        return graph.readable and not set(relations) & graph.relations

    return check


def entity_gone(name: str) -> Callable[[CheckContext], bool]:
    """Neither the entity ``name`` nor any relation touching it is left."""

    def check(context: CheckContext) -> bool:
        graph = read_graph(context)
        touching = [relation for relation in graph.relations if name in (relation[0], relation[2])]
        return graph.readable and name not in graph.entities and not touching

    return check


def answer_matches_graph(tool: str, names: Iterable[str]) -> Callable[[CheckContext], bool]:
    """The last answer of ``tool`` shows exactly ``names``, as the memory file has them."""
    wanted = sorted(names)

    def check(context: CheckContext) -> bool:
        answer = last_answer(context, tool)
        shown = structured(answer) if answer is not None else None
        if not isinstance(shown, Mapping):
            return False
        graph = read_graph(context)
        entities = {
            item.get("name"): (item.get("entityType"), tuple(item.get("observations", ())))
            for item in shown.get("entities", [])
            if isinstance(item, Mapping)
        }
        # key=str: an entity shown without a name (None) fails the comparison, not the sort.
        return sorted(entities, key=str) == wanted and all(
            graph.entities.get(name) == entities[name] for name in wanted
        )

    return check


def _entity(name: str, entity_type: str, *observations: str) -> dict[str, object]:
    return {"name": name, "entityType": entity_type, "observations": list(observations)}


def _relation(source: str, relation_type: str, target: str) -> dict[str, str]:
    return {"from": source, "to": target, "relationType": relation_type}


INES = ("Inès", "person", "Joined the team in April 2024", "Builds the station list command")
CUXHAVEN = ("Cuxhaven", "tide_station", "Tide gauge on the Elbe estuary, Germany")
BSH = ("BSH", "organization", "German federal maritime agency")
MEETING = (
    "Meeting 2024-03-12",
    "meeting",
    "Decided: convert Newlyn feet on read",
    "Decided: flag spikes instead of dropping them",
)

TASKS: tuple[McpTask, ...] = (
    McpTask(
        name="memory-add-new-teammate",
        instruction=(
            "Inès joined in April 2024 to build the station list command. Add her to the "
            "graph, record that she contributes to tidewatch and works with Maya Chen, then "
            "open her node."
        ),
        category="create",
        server="memory",
        steps=(
            tool_call("create_entities", {"entities": [_entity(*INES)]}),
            tool_call(
                "create_relations",
                {
                    "relations": [
                        _relation("Inès", "contributes_to", "tidewatch"),
                        _relation("Inès", "works_with", "Maya Chen"),
                    ]
                },
            ),
            tool_call("open_nodes", {"names": ["Inès"]}),
        ),
        check=all_of(
            has_entity(*INES[:2], INES[2:]),
            has_relations(
                ("Inès", "contributes_to", "tidewatch"), ("Inès", "works_with", "Maya Chen")
            ),
        ),
    ),
    McpTask(
        name="memory-record-a-release",
        instruction=(
            "tidewatch 0.3.2 is out. Replace the 'Current version 0.3.1' observation of the "
            "project with 'Current version 0.3.2' and check the project's node."
        ),
        category="update",
        server="memory",
        steps=(
            tool_call("open_nodes", {"names": ["tidewatch"]}),
            tool_call(
                "delete_observations",
                {
                    "deletions": [
                        {"entityName": "tidewatch", "observations": ["Current version 0.3.1"]}
                    ]
                },
            ),
            tool_call(
                "add_observations",
                {
                    "observations": [
                        {"entityName": "tidewatch", "contents": ["Current version 0.3.2"]}
                    ]
                },
            ),
            tool_call("open_nodes", {"names": ["tidewatch"]}),
        ),
        check=all_of(
            has_entity("tidewatch", "project", ["Current version 0.3.2", "Written in Python"]),
            lacks_observations("tidewatch", "Current version 0.3.1"),
        ),
    ),
    McpTask(
        name="memory-add-cuxhaven-station",
        instruction=(
            "Add the Cuxhaven tide station (on the Elbe estuary, Germany), operated by the BSH, "
            "and record that tidewatch reads data from it. Then search the graph for Cuxhaven."
        ),
        category="create",
        server="memory",
        steps=(
            tool_call("search_nodes", {"query": "tide_station"}),
            tool_call("create_entities", {"entities": [_entity(*CUXHAVEN), _entity(*BSH)]}),
            tool_call(
                "create_relations",
                {
                    "relations": [
                        _relation("BSH", "operates", "Cuxhaven"),
                        _relation("tidewatch", "reads_data_from", "Cuxhaven"),
                    ]
                },
            ),
            tool_call("search_nodes", {"query": "Cuxhaven"}),
        ),
        check=all_of(
            has_entity(*CUXHAVEN[:2], CUXHAVEN[2:]),
            has_entity(*BSH[:2], BSH[2:]),
            has_relations(
                ("BSH", "operates", "Cuxhaven"), ("tidewatch", "reads_data_from", "Cuxhaven")
            ),
        ),
    ),
    McpTask(
        name="memory-remove-dissolved-office",
        instruction=(
            "The Harbour Office was dissolved. Look at what the graph knows about it, delete "
            "it with its relations, and read the whole graph to confirm."
        ),
        category="delete",
        server="memory",
        steps=(
            tool_call("search_nodes", {"query": "Harbour Office"}),
            tool_call("delete_entities", {"entityNames": ["Harbour Office"]}),
            tool_call("read_graph", {}),
        ),
        check=all_of(entity_gone("Harbour Office"), has_entity("Brest", "tide_station")),
    ),
    McpTask(
        name="memory-tom-becomes-maintainer",
        instruction=(
            "Tom Okafor now maintains tidewatch rather than contributing to it. Update the "
            "relation and add an observation about the change, then open both nodes."
        ),
        category="update",
        server="memory",
        steps=(
            tool_call(
                "delete_relations",
                {"relations": [_relation("Tom Okafor", "contributes_to", "tidewatch")]},
            ),
            tool_call(
                "create_relations",
                {"relations": [_relation("Tom Okafor", "maintains", "tidewatch")]},
            ),
            tool_call(
                "add_observations",
                {
                    "observations": [
                        {"entityName": "Tom Okafor", "contents": ["Co-maintainer since May 2024"]}
                    ]
                },
            ),
            tool_call("open_nodes", {"names": ["Tom Okafor", "tidewatch"]}),
        ),
        check=all_of(
            has_relations(("Tom Okafor", "maintains", "tidewatch")),
            lacks_relations(("Tom Okafor", "contributes_to", "tidewatch")),
            has_entity("Tom Okafor", "person", ["Co-maintainer since May 2024"]),
        ),
    ),
    McpTask(
        name="memory-stations-the-project-reads",
        instruction=(
            "Which tide stations does tidewatch read data from? Search the graph for stations "
            "and open the ones the project reads from."
        ),
        category="question",
        server="memory",
        steps=(
            tool_call("search_nodes", {"query": "tide_station"}),
            tool_call("open_nodes", {"names": ["tidewatch"]}),
            tool_call("open_nodes", {"names": ["Brest", "Newlyn"]}),
        ),
        check=answer_matches_graph("open_nodes", ["Brest", "Newlyn"]),
    ),
    McpTask(
        name="memory-record-meeting-decisions",
        instruction=(
            "Record the 12 March 2024 meeting in the graph with its two decisions, and link "
            "it to the people who attended: Maya Chen, Tom Okafor and Inès (new)."
        ),
        category="create",
        server="memory",
        steps=(
            tool_call(
                "create_entities",
                {"entities": [_entity(*MEETING), _entity("Inès", "person", "Attended 2024-03-12")]},
            ),
            tool_call(
                "create_relations",
                {
                    "relations": [
                        _relation(person, "attended", "Meeting 2024-03-12")
                        for person in ("Maya Chen", "Tom Okafor", "Inès")
                    ]
                },
            ),
            tool_call("search_nodes", {"query": "Decided"}),
        ),
        check=all_of(
            has_entity(*MEETING[:2], MEETING[2:]),
            has_relations(
                *(
                    (person, "attended", "Meeting 2024-03-12")
                    for person in ("Maya Chen", "Tom Okafor", "Inès")
                )
            ),
        ),
    ),
    McpTask(
        name="memory-newlyn-units-fixed",
        instruction=(
            "Newlyn's old exports are now converted to metres on read. Replace the outdated "
            "observation about feet and make sure no node mentions feet any more."
        ),
        category="update",
        server="memory",
        steps=(
            tool_call("search_nodes", {"query": "feet"}),
            tool_call(
                "delete_observations",
                {
                    "deletions": [
                        {"entityName": "Newlyn", "observations": ["Old exports are in feet"]}
                    ]
                },
            ),
            tool_call(
                "add_observations",
                {
                    "observations": [
                        {
                            "entityName": "Newlyn",
                            "contents": ["Exports converted to metres on read"],
                        }
                    ]
                },
            ),
            tool_call("search_nodes", {"query": "feet"}),
        ),
        check=all_of(
            lacks_observations("Newlyn", "Old exports are in feet"),
            has_entity("Newlyn", "tide_station", ["Exports converted to metres on read"]),
        ),
    ),
    McpTask(
        name="memory-notes-for-two-people",
        instruction=(
            "After the retrospective, note that Maya Chen reviews every release and Tom Okafor "
            "owns the CSV reader, in one update, then search for 'release'."
        ),
        category="update",
        server="memory",
        steps=(
            tool_call(
                "add_observations",
                {
                    "observations": [
                        {"entityName": "Maya Chen", "contents": ["Reviews every release"]},
                        {"entityName": "Tom Okafor", "contents": ["Owns the CSV reader"]},
                    ]
                },
            ),
            tool_call("search_nodes", {"query": "release"}),
        ),
        check=all_of(
            has_entity("Maya Chen", "person", ["Reviews every release", "Works from Brest"]),
            has_entity("Tom Okafor", "person", ["Owns the CSV reader"]),
        ),
    ),
)
"""The memory server's tasks."""
