"""Server-side apply: field ownership (metadata.managedFields, FieldsV1) and the apply merge, as kube-apiserver does
it for `application/apply-patch+yaml`.

A field is a path of FieldsV1 elements: `f:<name>` into an object, `k:{"key":...}` into a keyed list (merged by the
strategic-merge keys of kubesim.apiserver.storage.patch), `v:<json>` into a set list (finalizers); other lists are
atomic leaves.
An apply takes every field its configuration sets; a field another manager owns with a different value is a
conflict (409, kube's message) unless `force=true`, which moves it. Fields the manager applied before and no longer
applies are removed unless someone else still owns them. Ordinary writes to an object that carries managedFields
give the fields they change to their manager (operation Update), so later applies see them.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from kubesim.apiserver.errors import APIError
from kubesim.apiserver.storage.patch import MERGE_KEYS, MERGE_PRIMITIVE

Path = tuple[str, ...]
_UNTRACKED_METADATA = {
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "managedFields",
    "selfLink",
}

_SERVER_METADATA = _UNTRACKED_METADATA - {"name", "namespace"}


class ApplyConflict(APIError):
    """409 Conflict naming every (manager, field) the apply would take over."""

    def __init__(self, conflicts: list[tuple[str, str]]) -> None:
        count = len(conflicts)
        managers: dict[str, list[str]] = {}
        for manager, field in conflicts:
            managers.setdefault(manager, []).append(field)
        if count == 1:
            detail = f"conflict with {conflicts[0][0]}: {conflicts[0][1]}"
        elif len(managers) == 1:
            manager, fields = next(iter(managers.items()))
            detail = f"conflicts with {manager}" + "".join(f"\n- {f}" for f in fields)
        else:
            detail = "conflicts with" + "".join(
                f"\n- {m}:" + "".join(f"\n  - {f}" for f in fields) for m, fields in managers.items()
            )
        message = f"Apply failed with {count} conflict{'s' if count > 1 else ''}: {detail}"
        causes = [{"reason": "FieldManagerConflict", "message": f"conflict with {m}", "field": f} for m, f in conflicts]
        super().__init__(409, message, "Conflict", {"causes": causes})


def fields(obj: Any, status: bool = False) -> set[Path]:
    """The fields an object (or an applied configuration) sets; status only for the status subresource."""
    out: set[Path] = set()
    for key, value in (obj or {}).items():
        if key in ("apiVersion", "kind") or (key == "status") != status:
            continue
        if key == "metadata" and isinstance(value, dict):
            value = {k: v for k, v in value.items() if k not in _UNTRACKED_METADATA}
            if not value:
                continue
        _collect(value, (f"f:{key}",), key, out)
    return out


def _collect(value: Any, path: Path, name: str, out: set[Path]) -> None:
    if isinstance(value, dict) and value:
        for key, child in value.items():
            _collect(child, (*path, f"f:{key}"), key, out)
    elif isinstance(value, list) and value and name in MERGE_KEYS and all(isinstance(i, dict) for i in value):
        key = MERGE_KEYS[name]
        for item in value:
            element = (*path, "k:" + json.dumps({key: item.get(key)}, separators=(",", ":")))
            out.add((*element, "."))
            _collect({k: v for k, v in item.items() if k != key}, element, "", out)
    elif isinstance(value, list) and value and name in MERGE_PRIMITIVE:
        for item in value:
            out.add((*path, "v:" + json.dumps(item)))
    else:
        out.add(path)


def _get(obj: Any, path: Path) -> tuple[bool, Any]:
    cur = obj
    for element in path:
        if element == ".":
            break
        kind, _, rest = element.partition(":")
        if kind == "f" and isinstance(cur, dict) and rest in cur:
            cur = cur[rest]
        elif kind == "k" and isinstance(cur, list):
            key, want = next(iter(json.loads(rest).items()))
            cur = next((i for i in cur if isinstance(i, dict) and i.get(key) == want), None)
            if cur is None:
                return False, None
        elif kind == "v" and isinstance(cur, list):
            return json.loads(rest) in cur, json.loads(rest)
        else:
            return False, None
    return True, cur


def _remove(obj: Any, path: Path) -> None:
    if path[-1] == ".":
        path = path[:-1]
    found, parent = _get(obj, path[:-1])
    if not found:
        return
    kind, _, rest = path[-1].partition(":")
    if kind == "f" and isinstance(parent, dict):
        parent.pop(rest, None)
    elif kind == "k" and isinstance(parent, list):
        key, want = next(iter(json.loads(rest).items()))
        parent[:] = [i for i in parent if not (isinstance(i, dict) and i.get(key) == want)]
    elif kind == "v" and isinstance(parent, list):
        parent[:] = [i for i in parent if i != json.loads(rest)]


def _merge(live: Any, applied: Any, name: str = "") -> Any:
    """The applied configuration laid over the live object: objects merge, keyed and set lists merge by item."""
    if isinstance(live, dict) and isinstance(applied, dict):
        out = copy.deepcopy(live)
        for key, value in applied.items():
            out[key] = _merge(live.get(key), value, key)
        return out
    if isinstance(live, list) and isinstance(applied, list):
        if name in MERGE_PRIMITIVE:
            return copy.deepcopy(live) + [copy.deepcopy(i) for i in applied if i not in live]
        key = MERGE_KEYS.get(name)
        if key and all(isinstance(i, dict) for i in live + applied):
            items = copy.deepcopy(live)
            for item in applied:
                idx = next((n for n, cur in enumerate(items) if cur.get(key) == item.get(key)), None)
                if idx is None:
                    items.append(copy.deepcopy(item))
                else:
                    items[idx] = _merge(items[idx], item, "")
            return items
    return copy.deepcopy(applied)


def to_fields_v1(paths: set[Path]) -> dict:
    tree: dict = {}
    for path in sorted(paths):
        node = tree
        for element in path:
            node = node.setdefault(element, {})
    return tree


def from_fields_v1(tree: dict, prefix: Path = ()) -> set[Path]:
    out: set[Path] = set()
    for element, child in tree.items():
        if child:
            out |= from_fields_v1(child, (*prefix, element))
        else:
            out.add((*prefix, element))
    return out


def render_path(path: Path) -> str:
    """A field as kube names it in conflicts: .spec.containers[name="c"].image."""
    out = ""
    for element in path:
        kind, _, rest = element.partition(":")
        if kind == "f":
            out += f".{rest}"
        elif kind == "k":
            out += "[" + ",".join(f"{k}={json.dumps(v)}" for k, v in json.loads(rest).items()) + "]"
        elif kind == "v":
            out += f"[={rest}]"
    return out


def _entries(obj: dict) -> list[dict]:
    return list((obj.get("metadata") or {}).get("managedFields") or [])


def _entry_fields(entry: dict) -> set[Path]:
    return from_fields_v1(entry.get("fieldsV1") or {})


def _label(entry: dict) -> str:
    if entry.get("operation") == "Update":
        return f'"{entry.get("manager")}" using {entry.get("apiVersion")}'
    return f'"{entry.get("manager")}"'


def _entry(manager: str, operation: str, api_version: str, now: str, owned: set[Path], sub: str | None) -> dict:
    entry = {
        "manager": manager,
        "operation": operation,
        "apiVersion": api_version,
        "time": now,
        "fieldsType": "FieldsV1",
        "fieldsV1": to_fields_v1(owned),
    }
    if sub:
        entry["subresource"] = sub
    return entry


def _same(entry: dict, manager: str, operation: str, sub: str | None) -> bool:
    return entry.get("manager") == manager and entry.get("operation") == operation and entry.get("subresource") == sub


def apply(live: dict | None, applied: dict, manager: str, force: bool, now: str, sub: str | None = None) -> dict:
    """The object after `manager` applies `applied` to `live` (None: it does not exist yet), managedFields updated.
    Raises ApplyConflict."""
    status = sub == "status"
    base = copy.deepcopy(live) if live is not None else {"metadata": {}}
    mine = fields(applied, status)
    others = [e for e in _entries(base) if not _same(e, manager, "Apply", sub)]
    previous = next((e for e in _entries(base) if _same(e, manager, "Apply", sub)), None)
    conflicts: list[tuple[str, str]] = []
    for entry in others:
        for path in sorted(mine & _entry_fields(entry)):
            if path[-1] == ".":
                continue
            if _get(base, path) != _get(applied, path):
                conflicts.append((_label(entry), render_path(path)))
    if conflicts and not force:
        raise ApplyConflict(conflicts)
    taken = {p for p in mine if any(p in _entry_fields(e) for e in others)} if force else set()
    result = _merge(base, {k: v for k, v in applied.items() if k != "metadata"})
    applied_md = {k: v for k, v in (applied.get("metadata") or {}).items() if k not in _SERVER_METADATA}
    result["metadata"] = _merge(base.get("metadata") or {}, applied_md)
    kept: list[dict] = []
    still_owned: set[Path] = set()
    for entry in others:
        owned = _entry_fields(entry)
        if force:
            owned -= {p for p in taken if _get(base, p) != _get(applied, p)}
        if owned:
            still_owned |= owned
            kept.append({**entry, "fieldsV1": to_fields_v1(owned)})
    for path in sorted(_entry_fields(previous) - mine if previous else (), key=len, reverse=True):
        if path not in still_owned and not any(p[: len(path)] == path for p in still_owned | mine):
            _remove(result, path)
    api_version = applied.get("apiVersion") or base.get("apiVersion") or ""
    result["metadata"]["managedFields"] = [*kept, _entry(manager, "Apply", api_version, now, mine, sub)]
    return result


def created(obj: dict, manager: str, now: str) -> dict:
    """The managedFields entry of a create: its manager owns every field the object was created with."""
    return _entry(manager, "Update", obj.get("apiVersion") or "", now, fields(obj), None)


def track_update(old: dict, new: dict, manager: str, now: str, sub: str | None = None) -> None:
    """An ordinary write (create/update/patch) on an object whose fields are managed: `manager` takes the fields
    it changed. Objects without managedFields stay without (kubesim tracks ownership from the first apply on)."""
    entries = _entries(old)
    if not entries:
        new.get("metadata", {}).pop("managedFields", None)
        return
    status = sub == "status"
    changed = {p for p in fields(new, status) | fields(old, status) if _get(old, p) != _get(new, p)}
    present = fields(new, status)
    kept: list[dict] = []
    mine: set[Path] = set()
    for entry in entries:
        owned = _entry_fields(entry) & present  # fields the write removed are nobody's any more
        if _same(entry, manager, "Update", sub):
            mine |= owned
            continue
        owned -= changed
        if owned:
            kept.append({**entry, "fieldsV1": to_fields_v1(owned)})
    mine |= changed & present
    if mine:
        kept.append(_entry(manager, "Update", new.get("apiVersion") or "", now, mine, sub))
    new["metadata"]["managedFields"] = kept


def manager_from(query_value: str | None, user_agent: str) -> str:
    """The fieldManager of a write: the query parameter, else the client's user agent up to its first '/'."""
    return query_value or (user_agent.split("/", 1)[0] if user_agent else "unknown")
