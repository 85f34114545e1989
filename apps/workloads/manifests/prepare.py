"""What the portal writes into a checked manifest before the worker sends it: its deterministic name, the
project's namespace, Kueue's queue, priority and runtime labels, and the portal's own labels on the object and on
every pod template (so the watcher, the log reader and the GPU-hour ledger find it as they find the portal's Jobs)."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from apps.core.kueue_names import (
    DATA_CLASS_LABEL,
    DEPARTMENT_LABEL,
    KIND_LABEL,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    MAX_EXEC_TIME_LABEL,
    MODEL_LABEL,
    NAME_ANNOTATION,
    OWNER_ANNOTATION,
    OWNER_ID_LABEL,
    POOL_LABEL,
    PRIORITY_CLASS_LABEL,
    PROJECT_LABEL,
    QUEUE_NAME_LABEL,
    WORKLOAD_ID_LABEL,
)
from apps.workloads.models import Kind

from .checks import pod_templates, reserved_key
from .schemas import manifest_kind_of

if TYPE_CHECKING:
    from apps.workloads.models import Workload

# Kinds whose object has a suspend switch, by where it is: created suspended, Kueue starts them on admission (as its
# webhooks would set it anyway).
SUSPEND_PATHS: dict[str, tuple[str, ...]] = {
    Kind.JOB: ("spec", "suspend"), Kind.JOBSET: ("spec", "suspend"), Kind.RAYJOB: ("spec", "suspend"),
    Kind.RAYCLUSTER: ("spec", "suspend"), Kind.TRAINJOB: ("spec", "suspend"),
    Kind.PYTORCHJOB: ("spec", "runPolicy", "suspend"),
}


def portal_labels(workload: Workload) -> dict[str, str]:
    """Who and what the work is: for selectors, audits and the GPU-hour ledger."""
    return {
        MANAGED_BY_LABEL: MANAGED_BY,
        WORKLOAD_ID_LABEL: str(workload.pk),
        PROJECT_LABEL: workload.project.slug,
        DEPARTMENT_LABEL: workload.project.department.slug,
        POOL_LABEL: workload.node_pool.slug,
        OWNER_ID_LABEL: str(workload.owner_id),
        KIND_LABEL: workload.kind,
        MODEL_LABEL: workload.model_label,
        DATA_CLASS_LABEL: workload.data_class,
    }


def prepared_manifest(workload: Workload, obj: dict[str, Any]) -> dict[str, Any]:
    """The object as the worker creates it for `workload` (saved: its id names it)."""
    entry = manifest_kind_of(workload.kind)
    if entry is None or workload.owner is None or workload.priority_class is None:
        raise ValueError("only the portal's own manifest submissions are prepared")
    obj = copy.deepcopy(obj)
    labels = portal_labels(workload)
    metadata = obj.setdefault("metadata", {})
    metadata["name"] = workload.job_name
    metadata["namespace"] = workload.project.namespace
    metadata["labels"] = {**(metadata.get("labels") or {}), **labels, QUEUE_NAME_LABEL: workload.queue_name,
                          PRIORITY_CLASS_LABEL: workload.priority_class.name,
                          **({MAX_EXEC_TIME_LABEL: str(workload.max_runtime_seconds)}
                             if workload.max_runtime_seconds else {})}
    metadata["annotations"] = {**(metadata.get("annotations") or {}),
                               OWNER_ANNOTATION: workload.owner.get_username(), NAME_ANNOTATION: workload.name}
    suspend = SUSPEND_PATHS.get(workload.kind)
    if suspend:
        node = obj
        for key in suspend[:-1]:
            node = node.setdefault(key, {})
        node[suspend[-1]] = True
    templates, _ = pod_templates(entry, obj)
    for template in templates:
        if template.metadata is not None and template.metadata_path != "metadata" and template.path != "spec.trainer":
            holder: Any = obj
            for part in template.metadata_path.replace("]", "").replace("[", ".").split(".")[:-1]:
                holder = holder[int(part)] if isinstance(holder, list) else holder[part]
            template_metadata = holder.setdefault("metadata", {})
            template_metadata["labels"] = {**(template_metadata.get("labels") or {}), **labels}
    return obj


def submitted_manifest(workload: Workload) -> dict[str, Any]:
    """The manifest as its submitter gave it, from the object the portal stored: what `prepared_manifest` wrote taken
    back out (the name it gave, the namespace, the portal's and Kueue's labels and annotations, which a submitter may
    not set, and the suspend switch), the submitter's name put back. "Submit again" on the manifest page starts
    from it, and the service prepares it again for the new workload."""
    entry = manifest_kind_of(workload.kind)
    if entry is None or not workload.manifest:
        raise ValueError("only a manifest submission has a manifest to submit again")
    obj = copy.deepcopy(workload.manifest)
    metadata = obj.setdefault("metadata", {})
    metadata["name"] = workload.name
    metadata.pop("namespace", None)
    _without_reserved(metadata)
    suspend = SUSPEND_PATHS.get(workload.kind)
    if suspend:
        _pop_path(obj, suspend)
    templates, _ = pod_templates(entry, obj)
    for template in templates:
        if template.metadata is not None and template.metadata_path != "metadata":
            _without_reserved(template.metadata)
            if not template.metadata:
                _pop_path(obj, tuple(template.metadata_path.replace("]", "").replace("[", ".").split(".")))
    return obj


def _without_reserved(metadata: dict[str, Any]) -> None:
    for what in ("labels", "annotations"):
        values = metadata.get(what)
        if isinstance(values, dict):
            kept = {key: value for key, value in values.items() if not reserved_key(key)}
            if kept:
                metadata[what] = kept
            else:
                metadata.pop(what)


def _pop_path(obj: dict[str, Any], path: tuple[str, ...]) -> None:
    """Remove the value at `path` (list indexes as digits), and the mappings left empty on the way (the stored
    object has every path `prepared_manifest` wrote)."""
    holders: list[tuple[Any, Any]] = []
    node: Any = obj
    for part in path[:-1]:
        key: Any = int(part) if isinstance(node, list) else part
        holders.append((node, key))
        node = node[key]
    node.pop(path[-1], None)
    for holder, key in reversed(holders):
        if isinstance(holder, dict) and holder[key] == {}:
            holder.pop(key)
