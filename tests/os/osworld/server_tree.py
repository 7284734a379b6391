"""OSWorld's server-side accessibility tree, read inside the desktop sandbox (a port).

OSWorld's VM server (``desktop_env/server/main.py``, route ``/accessibility``, Linux branch)
walks the AT-SPI registry with pyatspi and serializes the tree as XML, which its agents then
filter and linearize (``mm_agents/agent.py``). The ``desktop-env`` package on the Python
registry does not ship that server, so this file re-does its walk with the same rules, written
for this test: every application under a ``desktop-frame`` root; per node the attribute
``name``, one ``true`` attribute per state in the state namespace (the pyatspi state's name
without ``STATE_``, lower case), the object attributes in the attributes namespace, the screen
position and size in the component namespace as ``(x, y)`` and ``(w, h)`` only for a node both
``visible`` and ``showing``, and as the element's text the whole Text content without U+FFFC
and U+FFFD; the tag is the role name with spaces as dashes (``unknown`` when empty); at most 50
levels deep and 1,024 children per node. (The LibreOffice Calc branch is left out: no such
application here.) Standard library ElementTree stands in for lxml, which the image lacks;
the namespaces and values are the same.

Run with the desktop's Python as the session's user, DISPLAY and the session bus set (the
test does this): ``python3 server_tree.py`` prints ``{"apps": [[name, xml], ...]}`` — each
application's subtree as its own ``desktop-frame`` document, so rows can be told apart per
application — on one line.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from typing import Any

import pyatspi

STATE_NS = "https://accessibility.ubuntu.example.org/ns/state"
ATTRIBUTES_NS = "https://accessibility.ubuntu.example.org/ns/attributes"
COMPONENT_NS = "https://accessibility.ubuntu.example.org/ns/component"
MAX_DEPTH = 50
MAX_WIDTH = 1024


def element(node: Any, depth: int) -> ET.Element:
    """One node and its subtree as OSWorld's server writes it."""
    attributes: dict[str, str] = {"name": node.name}
    for state in node.getState().get_states():
        name = pyatspi.StateType._enum_lookup[state].split("_", 1)[1].lower()
        if name:
            attributes[f"{{{STATE_NS}}}{name}"] = "true"
    for key, value in node.get_attributes().items():
        if key:
            attributes[f"{{{ATTRIBUTES_NS}}}{key}"] = value
    if (
        attributes.get(f"{{{STATE_NS}}}visible") == "true"
        and attributes.get(f"{{{STATE_NS}}}showing") == "true"
    ):
        try:
            component = node.queryComponent()
        except NotImplementedError:
            pass
        else:
            box = component.getExtents(pyatspi.XY_SCREEN)
            attributes[f"{{{COMPONENT_NS}}}screencoord"] = str(tuple(box[0:2]))
            attributes[f"{{{COMPONENT_NS}}}size"] = str(tuple(box[2:]))
    text = ""
    try:
        text_iface = node.queryText()
    except NotImplementedError:
        pass
    else:
        text = text_iface.getText(0, text_iface.characterCount)
        text = text.replace("\ufffc", "").replace("\ufffd", "")
    tag = (node.getRoleName().strip() or "unknown").replace(" ", "-")
    xml_node = ET.Element(tag, attributes)
    if text:
        xml_node.text = text
    if depth == MAX_DEPTH:
        return xml_node
    try:
        for index, child in enumerate(node):
            if index == MAX_WIDTH:
                break
            xml_node.append(element(child, depth + 1))
    except Exception:  # OSWorld ignores a failing child walk the same way
        pass
    return xml_node


def main() -> None:
    """Print every application's tree as a desktop-frame document."""
    apps = []
    for app in pyatspi.Registry.getDesktop(0):
        root = ET.Element("desktop-frame")
        root.append(element(app, 1))
        apps.append([app.name, ET.tostring(root, encoding="unicode")])
    sys.stdout.write(json.dumps({"apps": apps}) + "\n")


if __name__ == "__main__":
    main()
