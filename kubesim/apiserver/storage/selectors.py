"""Label and field selectors with the syntax kube-apiserver accepts."""

from __future__ import annotations

import re
from collections.abc import Callable

Matcher = Callable[[dict], bool]


class SelectorError(ValueError):
    """An unparseable selector: the API answers 400 BadRequest."""


_SET = re.compile(r"^\s*(!?)\s*([A-Za-z0-9._/-]+)\s*(?:(notin|in)\s*\(([^)]*)\))?\s*$")
_EQ = re.compile(r"^\s*([A-Za-z0-9._/-]+)\s*(==|=|!=)\s*([A-Za-z0-9._-]*)\s*$")


def _split(selector: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    parts, depth, cur = [], 0, ""
    for ch in selector:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return [p for p in parts if p.strip()]


def _label_equals(key: str, value: str, equal: bool) -> Matcher:
    """key=value (equal) or key!=value on a labels dict; a missing label is never equal."""

    def check(labels: dict) -> bool:
        return (labels.get(key) == value) == equal

    return check


def _label_in(key: str, values: set[str], inside: bool) -> Matcher:
    def check(labels: dict) -> bool:
        return (labels.get(key) in values) == inside

    return check


def _label_exists(key: str, exists: bool) -> Matcher:
    def check(labels: dict) -> bool:
        return (key in labels) == exists

    return check


def parse_label_selector(selector: str | None) -> Matcher:
    """Requirements joined by AND: =, ==, !=, in, notin, key (exists), !key (does not exist)."""
    reqs: list[Matcher] = []
    for part in _split(selector or ""):
        eq = _EQ.match(part)
        if eq:
            key, op, value = eq.groups()
            reqs.append(_label_equals(key, value, op != "!="))
            continue
        st = _SET.match(part)
        if not st:
            raise SelectorError(f"unable to parse requirement: {part.strip()!r}")
        neg, key, op, values = st.groups()
        if op and neg:
            raise SelectorError(f"unable to parse requirement: {part.strip()!r}")
        if op:
            vals = {v.strip() for v in values.split(",") if v.strip()}
            reqs.append(_label_in(key, vals, op == "in"))
        else:
            reqs.append(_label_exists(key, not neg))

    def match(obj: dict) -> bool:
        labels = obj.get("metadata", {}).get("labels") or {}
        return all(r(labels) for r in reqs)

    return match


def _field(obj: dict, path: str) -> str:
    cur: object = obj
    for part in path.split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


FIELDS = {
    "metadata.name",
    "metadata.namespace",
    "status.phase",
    "spec.nodeName",
    "involvedObject.name",
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "source",
    "reason",
    "type",
}


def parse_field_selector(selector: str | None) -> Matcher:
    """metadata.name / metadata.namespace (and a few kind-specific fields) with =, ==, !=."""
    reqs: list[Matcher] = []
    for part in _split(selector or ""):
        m = re.match(r"^\s*([A-Za-z.]+)\s*(==|=|!=)\s*(.*?)\s*$", part)
        if not m:
            raise SelectorError(f"invalid selector: {part.strip()!r}")
        path, op, value = m.groups()
        if path not in FIELDS:
            raise SelectorError(f'field label not supported: "{path}"')
        reqs.append(_field_equals(path, value, op != "!="))

    def match(obj: dict) -> bool:
        return all(r(obj) for r in reqs)

    return match


def _field_equals(path: str, value: str, equal: bool) -> Matcher:
    def check(obj: dict) -> bool:
        return (_field(obj, path) == value) == equal

    return check
