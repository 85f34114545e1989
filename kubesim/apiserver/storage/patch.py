"""The three patch flavours kube-apiserver accepts: JSON merge, strategic merge (core/batch only), JSON patch."""

from __future__ import annotations

import copy
from typing import Any


class PatchError(ValueError):
    """A patch that cannot be applied: 422 for JSON patch test/path failures, 400 for malformed documents."""


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, null deletes, anything else (lists too) replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# Lists that strategic merge patch merges element-wise, keyed by the field (Kubernetes' patchMergeKey tags).
MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "imagePullSecrets": "name",
    "conditions": "type",
    "ownerReferences": "uid",
    "hostAliases": "ip",
    "resourceClaims": "name",
    "schedulingGates": "name",
}
# Primitive lists with patchStrategy=merge: union instead of replace.
MERGE_PRIMITIVE = {"finalizers"}


def strategic_merge_patch(target: Any, patch: Any, field: str = "") -> Any:
    """Strategic merge: like JSON merge, but keyed lists merge by their merge key and `$patch` directives apply."""
    if not isinstance(patch, dict):
        if isinstance(patch, list) and isinstance(target, list):
            return _merge_list(target, patch, field)
        return copy.deepcopy(patch)
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return None
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$"):
            if key.startswith("$deleteFromPrimitiveList/"):
                name = key.split("/", 1)[1]
                result[name] = [v for v in result.get(name) or [] if v not in value]
            continue
        if value is None:
            result.pop(key, None)
            continue
        merged = strategic_merge_patch(result.get(key), value, key)
        if merged is None:
            result.pop(key, None)
        else:
            result[key] = merged
    return result


def _merge_list(target: list, patch: list, field: str) -> list:
    if field in MERGE_PRIMITIVE:
        return copy.deepcopy(target) + [v for v in patch if v not in target]
    key = MERGE_KEYS.get(field)
    if key is None:
        return copy.deepcopy(patch)
    result = copy.deepcopy(target)
    for item in patch:
        if not isinstance(item, dict):
            raise PatchError(f"strategic merge list {field} holds a non-object element")
        if item.get("$patch") == "replace":
            return [copy.deepcopy({k: v for k, v in i.items() if k != "$patch"}) for i in patch]
        idx = next((i for i, cur in enumerate(result) if isinstance(cur, dict) and cur.get(key) == item.get(key)), None)
        if item.get("$patch") == "delete":
            if idx is not None:
                result.pop(idx)
        elif idx is None:
            result.append(strategic_merge_patch({}, item))
        else:
            result[idx] = strategic_merge_patch(result[idx], item)
    return result


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _walk(doc: Any, path: str) -> tuple[Any, str | int]:
    """Return (parent container, final key) for a JSON pointer."""
    if not path.startswith("/"):
        raise PatchError(f"invalid JSON pointer {path!r}")
    tokens = [_unescape(t) for t in path[1:].split("/")]
    cur = doc
    for tok in tokens[:-1]:
        cur = _child(cur, tok, path)
    last = tokens[-1]
    if isinstance(cur, list):
        if last == "-":
            return cur, len(cur)
        if not (last.isascii() and last.isdigit()):
            raise PatchError(f"invalid array index {last!r} in {path}")
        return cur, int(last)
    if not isinstance(cur, dict):
        raise PatchError(f"path {path} does not exist")
    return cur, last


def _child(cur: Any, tok: str, path: str) -> Any:
    if isinstance(cur, dict) and tok in cur:
        return cur[tok]
    if isinstance(cur, list) and tok.isascii() and tok.isdigit() and int(tok) < len(cur):
        return cur[int(tok)]
    raise PatchError(f"doc is missing path: {path}")


def _get(doc: Any, path: str) -> Any:
    if path == "":
        return doc
    parent, key = _walk(doc, path)
    if isinstance(parent, list):
        if not isinstance(key, int) or key >= len(parent):
            raise PatchError(f"doc is missing path: {path}")
        return parent[key]
    if key not in parent:
        raise PatchError(f"doc is missing path: {path}")
    return parent[key]


def _remove(doc: Any, path: str) -> Any:
    parent, key = _walk(doc, path)
    value = _get(doc, path)
    if isinstance(parent, list):
        if not isinstance(key, int):  # _get would have refused: a list is indexed by position
            raise PatchError(f"doc is missing path: {path}")
        parent.pop(key)
    else:
        del parent[key]
    return value


def _add(doc: Any, path: str, value: Any) -> Any:
    if path == "":
        return copy.deepcopy(value)
    parent, key = _walk(doc, path)
    if isinstance(parent, list):
        if not isinstance(key, int) or key > len(parent):
            raise PatchError(f"index out of range in {path}")
        parent.insert(key, copy.deepcopy(value))
    else:
        parent[key] = copy.deepcopy(value)
    return doc


def json_patch(target: Any, ops: Any) -> Any:
    """RFC 6902: add, remove, replace, move, copy, test."""
    if not isinstance(ops, list):
        raise PatchError("a JSON patch must be a list of operations")
    doc = copy.deepcopy(target)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError(f"invalid JSON patch operation {op!r}")
        kind, path = op["op"], op["path"]
        if kind == "add":
            doc = _add(doc, path, op.get("value"))
        elif kind == "remove":
            _remove(doc, path)
        elif kind == "replace":
            _get(doc, path)
            if path == "":
                doc = copy.deepcopy(op.get("value"))
            else:
                parent, key = _walk(doc, path)
                parent[key] = copy.deepcopy(op.get("value"))
        elif kind == "move":
            value = _remove(doc, op["from"])
            doc = _add(doc, path, value)
        elif kind == "copy":
            doc = _add(doc, path, _get(doc, op["from"]))
        elif kind == "test":
            if _get(doc, path) != op.get("value"):
                raise PatchError(f"test operation failed at {path}")
        else:
            raise PatchError(f"unknown JSON patch operation {kind!r}")
    return doc
