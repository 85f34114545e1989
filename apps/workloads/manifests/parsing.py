"""A manifest's text -> one JSON object, refusing what a hostile text could do to the portal or hide from its checks.

The text is YAML or JSON (JSON is YAML). It is read as YAML's safe subset, after a first pass over its events that
refuses what an API server would refuse or what costs the portal without bound: several documents, anchors and
aliases (the "billion laughs" expansion), nesting deeper than any Kubernetes object, more nodes than a manifest
needs, and a text over MAX_MANIFEST_BYTES. Keys must be strings and appear once per mapping (Kubernetes' strict
decoding refuses duplicate fields); YAML's timestamps stay the strings they were written as, as Kubernetes' own
YAML-to-JSON conversion keeps them.
"""

from __future__ import annotations

from typing import Any

import yaml

from .errors import ManifestErrors

# An API server refuses a request body over 3 MiB and etcd an object over 1.5 MiB; a manifest's text is at most
# 1 MiB (what the portal adds stays far below the rest).
MAX_MANIFEST_BYTES = 1024 * 1024
MAX_DEPTH = 64  # a pod template inside a JobSet is about 15 deep
MAX_NODES = 100_000


class _Loader(yaml.SafeLoader):
    """Safe YAML, with timestamps kept as text and duplicate keys refused."""


def _timestamp_as_text(loader: _Loader, node: yaml.ScalarNode) -> str:
    return str(loader.construct_scalar(node))


def _mapping(loader: _Loader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, str):
            raise yaml.constructor.ConstructorError(None, None, f"a key must be a string, not {key!r}",
                                                    key_node.start_mark)
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate field {key!r}", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=True)


_Loader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp_as_text)
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def _where(mark: Any) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "the text"


def _screen(text: str) -> None:
    """The event pass: one document, no anchor or alias, bounded depth and size."""
    depth = documents = nodes = 0
    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, yaml.DocumentStartEvent):
            documents += 1
            if documents > 1:
                raise ManifestErrors({"manifest": [
                    f"manifest: several YAML documents ({_where(event.start_mark)} starts another); submit one object "
                    "per request."]})
        elif isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise ManifestErrors({"manifest": [
                f"manifest: YAML anchors and aliases are not accepted ({_where(event.start_mark)}); write the values "
                "out."]})
        elif isinstance(event, yaml.MappingStartEvent | yaml.SequenceStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise ManifestErrors({"manifest": [
                    f"manifest: nested more than {MAX_DEPTH} levels deep ({_where(event.start_mark)})."]})
        elif isinstance(event, yaml.MappingEndEvent | yaml.SequenceEndEvent):
            depth -= 1
        if isinstance(event, yaml.NodeEvent):
            nodes += 1
            if nodes > MAX_NODES:
                raise ManifestErrors({"manifest": [f"manifest: more than {MAX_NODES} values; no manifest needs that "
                                                   "many."]})


def parse_manifest(text: Any) -> dict[str, Any]:
    """The object a manifest's text holds; ManifestErrors (keyed "manifest") when it is not one readable object."""
    if not isinstance(text, str) or not text.strip():
        raise ManifestErrors({"manifest": ["manifest: give the manifest's YAML or JSON text."]})
    size = len(text.encode(errors="surrogatepass"))
    if size > MAX_MANIFEST_BYTES:
        raise ManifestErrors({"manifest": [
            f"manifest: {-(-size // 1024)} KiB of text; at most {MAX_MANIFEST_BYTES // 1024} KiB (an API server "
            "keeps objects under 1.5 MiB)."]})
    if "\x00" in text:
        raise ManifestErrors({"manifest": ["manifest: the text contains a NUL character."]})
    try:
        _screen(text)
        value = yaml.load(text, Loader=_Loader)  # noqa: S506 - _Loader is a SafeLoader
    except yaml.MarkedYAMLError as error:
        raise ManifestErrors({"manifest": [
            f"manifest: not valid YAML or JSON at {_where(error.problem_mark or error.context_mark)}: "
            f"{error.problem or error.context}."]}) from error
    except yaml.YAMLError as error:
        raise ManifestErrors({"manifest": [f"manifest: not valid YAML or JSON: {error}."]}) from error
    if not isinstance(value, dict):
        raise ManifestErrors({"manifest": ["manifest: the text must hold one object (a mapping with apiVersion, kind, "
                                           "metadata and spec)."]})
    bad = _unrepresentable(value, "")
    if bad:
        raise ManifestErrors({"manifest": bad})
    return value


def _bad_text(text: str) -> str:
    """Why a string cannot be stored or sent as it is: a NUL or a lone surrogate (both can be written as YAML escapes,
    "\\0" and "\\ud800", in a text that holds neither character), which neither UTF-8 nor a JSON column takes."""
    if "\x00" in text:
        return "contains a NUL character"
    if any("\ud800" <= character <= "\udfff" for character in text):
        return "contains a lone UTF-16 surrogate"
    return ""


def _unrepresentable(value: Any, path: str) -> list[str]:
    """Values JSON cannot carry (YAML's binary, sets, non-finite numbers, text no UTF-8 encodes), by path."""
    if isinstance(value, dict):
        found = []
        for key, item in value.items():
            if problem := _bad_text(key):
                found.append(f"{path.lstrip('.') or 'manifest'}: a key {problem}.")
                continue
            found += _unrepresentable(item, f"{path}.{key}")
        return found
    if isinstance(value, list):
        return [problem for index, item in enumerate(value) for problem in _unrepresentable(item, f"{path}[{index}]")]
    if isinstance(value, str):
        return [f"{path.lstrip('.')}: the text {problem}."] if (problem := _bad_text(value)) else []
    if (isinstance(value, float) and value != value) or value in (float("inf"), float("-inf")):
        return [f"{path.lstrip('.')}: {value!r} is not a number JSON can carry."]
    if value is None or isinstance(value, bool | int | float):
        return []
    return [f"{path.lstrip('.')}: a {type(value).__name__} value is not accepted; use a string."]
