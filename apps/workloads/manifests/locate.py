"""Where in a manifest's text each refusal points: the line of the field its path names, or of the nearest field
that is there when the path names a missing one (`spec.template.spec.containers[0].image: required.` points at the
container). The manifest page shows each message beside its line. Pure: the text and the messages in, no ORM.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import yaml

from .errors import ManifestErrors
from .parsing import parse_manifest

# "<field path>: <message>", the form of every message the checks give (apps.workloads.manifests.checks).
MESSAGE = re.compile(r"^(?P<path>[A-Za-z0-9_$.\-/\[\]]+|\(the object\)): (?P<text>.*)$", re.DOTALL)
# The parser's own position in a message ("at line 3, column 5").
POSITION = re.compile(r"\bline (\d+), column \d+")
INDEX = re.compile(r"\[(\d+)\]")


@dataclass(frozen=True)
class Located:
    """One refusal: its line in the text (1-based; None when it is about the whole text), its field path and what
    it says."""

    line: int | None
    path: str
    text: str

    def __str__(self) -> str:
        return f"{self.path}: {self.text}" if self.path else self.text


def _node_line(root: yaml.Node, path: str) -> int | None:
    """The line of the deepest node `path` reaches from `root` (a key's line for a mapping's value)."""
    node, line, rest = root, root.start_mark.line, path
    while rest:
        if isinstance(node, yaml.SequenceNode) and (index := INDEX.match(rest)):
            position = int(index.group(1))
            if position >= len(node.value):
                break
            node = node.value[position]
            line, rest = node.start_mark.line, rest[index.end():].lstrip(".")
            continue
        if not isinstance(node, yaml.MappingNode):
            break
        # Keys may hold dots (nvidia.com/gpu): the longest key the path goes on with.
        found = None
        for key, value in node.value:
            name = key.value if isinstance(key, yaml.ScalarNode) else None
            if isinstance(name, str) and rest.startswith(name) and (
                    len(rest) == len(name) or rest[len(name)] in ".[") and (
                    found is None or len(name) > len(found[0].value)):
                found = (key, value)
        if found is None:
            break
        key, node = found
        line, rest = key.start_mark.line, rest[len(key.value):].lstrip(".")
    return line + 1


def locate_errors(text: str, messages: list[str]) -> list[Located]:
    """Every message of `messages` with its line in `text` where one can be told, in their order."""
    root = None
    if any(MESSAGE.match(message) for message in messages):
        try:
            parse_manifest(text)  # bounded first: depth, size, aliases
            root = yaml.compose(text, Loader=yaml.SafeLoader)
        except (ManifestErrors, yaml.YAMLError):
            root = None
    found = []
    for message in messages:
        match = MESSAGE.match(message)
        path, rest = (match.group("path"), match.group("text")) if match else ("", message)
        position = POSITION.search(message)
        if position:
            line: int | None = int(position.group(1))
        elif root is not None and path not in ("", "manifest", "(the object)"):
            line = _node_line(root, path)
        else:
            line = None
        found.append(Located(line=line, path="" if path == "manifest" else path, text=rest))
    return found
