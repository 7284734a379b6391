"""A UI hierarchy dump as the indexed element list AndroidWorld and AgentWorldBench use.

``uiautomator``'s ``dumpWindowHierarchy`` gives one XML ``node`` per view of every window on
screen. An element is a node a person could see or use: it has a text, a content description,
a hint or a resource id, or it can be clicked, checked, scrolled or typed into, or has the
focus; pure layout containers are left out. Elements are numbered in document order (the
order the windows and views are drawn in), and an action's ``index`` names one of them.

The fields are AndroidWorld's ``UIElement`` (``text``, ``content_description``,
``class_name``, ``bbox``, ``hint_text``, ``is_checked``, ``is_checkable``, ``is_clickable``,
``is_editable``, ``is_enabled``, ``is_focused``, ``is_focusable``, ``is_long_clickable``,
``is_scrollable``, ``is_selected``, ``is_visible``, ``package_name``, ``resource_name``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any
from xml.etree import ElementTree

BOUNDS = re.compile(r"\[(-?\d+),(-?\d+)\]\[(-?\d+),(-?\d+)\]")

EDITABLE_CLASSES = ("EditText", "AutoCompleteTextView", "SearchView$SearchAutoComplete")
"""Class names of views that take typed text (a dump has no ``editable`` attribute)."""


class HierarchyError(ValueError):
    """The dump is not a UI hierarchy."""


@dataclass(frozen=True)
class Element:
    """One element of the screen, with AndroidWorld's field names."""

    index: int
    class_name: str
    text: str
    content_description: str
    hint_text: str
    resource_name: str
    package_name: str
    bbox: tuple[int, int, int, int]
    """Left, top, right, bottom in screen pixels."""
    is_clickable: bool
    is_long_clickable: bool
    is_checkable: bool
    is_checked: bool
    is_enabled: bool
    is_focusable: bool
    is_focused: bool
    is_scrollable: bool
    is_selected: bool
    is_editable: bool
    is_visible: bool

    @property
    def center(self) -> tuple[int, int]:
        """Where a tap on the element lands: the centre of its bounds."""
        left, top, right, bottom = self.bbox
        return (left + right) // 2, (top + bottom) // 2

    def as_dict(self) -> dict[str, Any]:
        """The element as a JSON object."""
        record = asdict(self)
        record["bbox"] = list(self.bbox)
        return record


def parse_hierarchy(xml: str) -> list[Element]:
    """The elements of a ``dumpWindowHierarchy`` dump, numbered in document order."""
    try:
        root = ElementTree.fromstring(xml.encode())
    except ElementTree.ParseError as error:
        raise HierarchyError(f"the UI hierarchy is not XML: {error}") from None
    if root.tag != "hierarchy":
        raise HierarchyError(f"the UI hierarchy's root is <{root.tag}>, not <hierarchy>")
    elements: list[Element] = []
    for node in root.iter("node"):
        element = _element(node.attrib, len(elements))
        if element is not None:
            elements.append(element)
    return elements


def _element(attributes: Mapping[str, str], index: int) -> Element | None:
    def flag(name: str) -> bool:
        return attributes.get(name) == "true"

    match = BOUNDS.fullmatch(attributes.get("bounds", ""))
    if match is None:
        return None
    bbox = (int(match[1]), int(match[2]), int(match[3]), int(match[4]))
    class_name = attributes.get("class", "")
    element = Element(
        index=index,
        class_name=class_name,
        text=attributes.get("text", ""),
        content_description=attributes.get("content-desc", ""),
        hint_text=attributes.get("hint", ""),
        resource_name=attributes.get("resource-id", ""),
        package_name=attributes.get("package", ""),
        bbox=bbox,
        is_clickable=flag("clickable"),
        is_long_clickable=flag("long-clickable"),
        is_checkable=flag("checkable"),
        is_checked=flag("checked"),
        is_enabled=flag("enabled"),
        is_focusable=flag("focusable"),
        is_focused=flag("focused"),
        is_scrollable=flag("scrollable"),
        is_selected=flag("selected"),
        is_editable=class_name.endswith(EDITABLE_CLASSES),
        is_visible=attributes.get("visible-to-user", "true") == "true",
    )
    return element if _shown(element) else None


def _shown(element: Element) -> bool:
    """Whether the element is one a person could see or use (not a bare layout)."""
    left, top, right, bottom = element.bbox
    if not element.is_visible or right <= left or bottom <= top:
        return False
    return bool(
        element.text
        or element.content_description
        or element.hint_text
        or element.resource_name
        or element.is_clickable
        or element.is_long_clickable
        or element.is_checkable
        or element.is_scrollable
        or element.is_editable
        or element.is_focused
    )


def focused_element(elements: list[Element]) -> Element | None:
    """The element that has the input focus (the last one, as the innermost), if any."""
    focused = [element for element in elements if element.is_focused]
    return focused[-1] if focused else None
