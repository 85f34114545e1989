"""Reconcile the cluster's Kueue objects with the organisation (docs/architecture.md, The organisation in Kueue), and
KAI Scheduler's Queues for the pools KAI schedules (worker/kai_objects.py), the same way.

Compute the desired objects from the database, read what the portal owns in the cluster, and apply only the
differences in a safe order: shrinking updates first (children before parents), then creates and growing updates
(parents before children), then deletes (children before parents). Nothing without the portal's ownership label
is ever touched, and every write is sent with fieldValidation=Strict. An update that meets a 409 Conflict (another
writer changed the object since it was read) is read again and re-applied; after the pass the owned objects are read
back, and whatever is not as intended is listed (`unsettled`): the worker then keeps the reconcile request open.

Namespaces admins map to a project (apps.org.models.ProjectNamespace) are not the portal's: they get the project's
LocalQueues, labelled as the portal's, and lose them when unmapped; one that does not exist is reported for its
project and its queues wait, the namespace is never created or deleted here.

Project namespaces are the portal's own. A project whose namespace breaks the rule (apps/org/validators.py; rows older
than the rule), or whose namespace exists in the cluster without the portal's label or labelled for another
project, is skipped: none of its objects is created, changed or deleted, nothing in that namespace is touched,
and the run reports it. A project whose write the API server refuses is likewise reported and left for the next
pass; any other object it refuses (a pool's ResourceFlavor, a department's or a pool's Cohort, a priority class) is
reported alone and tried again on the next pass. One bad project or object never stops the others; only a
transient or authorisation failure ends the whole run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from functools import partial
from typing import Any

import yaml
from django.db.models import Prefetch

from apps.core.kueue_names import DEPARTMENT_LABEL, MANAGED_BY, MANAGED_BY_LABEL, PROJECT_LABEL
from apps.core.kueue_names import names as kueue_names
from apps.core.kueue_tree import PoolQuota
from apps.org.models import Department, NodePool, PriorityClass, Project, ProjectNamespace, Quota
from apps.org.selectors import budget_holds
from apps.org.validators import project_namespace_error

from .gateway import ClusterError, Gateway
from .kai_objects import kai_objects
from .kueue_objects import (
    DepartmentSpec,
    OrgSnapshot,
    PoolSpec,
    PriorityClassSpec,
    ProjectSpec,
    desired_objects,
)


def _quotas(quotas: list[Quota]) -> dict[str, PoolQuota]:
    return {
        quota.node_pool.slug: PoolQuota(deserved=quota.deserved, limit=quota.limit, weight=quota.over_quota_weight,
                                        cpu_cores=quota.cpu_cores, memory_gib=quota.memory_gib)
        for quota in quotas
    }


def org_snapshot() -> OrgSnapshot:
    """The organisation as plain data, in five queries whatever its size. Serving pools are left out: inference
    services never go through Kueue, so such a pool has no ResourceFlavor, Cohorts or queues (docs/architecture.md,
    Inference services). KAI pools are in it, marked: they become KAI Queues instead of Kueue objects."""
    held, held_departments = budget_holds()
    quotas = Quota.objects.select_related("node_pool")
    departments = Department.objects.order_by("slug").prefetch_related(
        Prefetch("quotas", queryset=quotas),
        Prefetch("projects", queryset=Project.objects.order_by("slug").prefetch_related(
            Prefetch("quotas", queryset=quotas),
            Prefetch("mapped_namespaces", queryset=ProjectNamespace.objects.order_by("namespace")))),
    )
    return OrgSnapshot(
        pools=tuple(
            PoolSpec(slug=pool.slug, gpu_resource=pool.gpu_resource, capacity=pool.capacity,
                     node_labels=dict(pool.node_labels), node_taints=tuple(pool.node_taints), scheduler=pool.scheduler)
            for pool in NodePool.objects.filter(serving=False).order_by("slug")
        ),
        departments=tuple(
            DepartmentSpec(
                slug=department.slug, quotas=_quotas(list(department.quotas.all())),
                projects=tuple(
                    ProjectSpec(slug=project.slug, namespace=project.namespace, does_not_lend=project.does_not_lend,
                                quotas=_quotas(list(project.quotas.all())),
                                mapped_namespaces=tuple(m.namespace for m in project.mapped_namespaces.all()),
                                hold_preemptible=project.pk in held or department.pk in held_departments)
                    for project in department.projects.all()
                ),
            )
            for department in departments
        ),
        priority_classes=tuple(
            PriorityClassSpec(name=pc.name, value=pc.value, description=pc.description)
            for pc in PriorityClass.objects.order_by("name")
        ),
    )


# --- diff and apply ---------------------------------------------------------------------------------------------

QUANTITY_KEYS = {"nominalQuota", "borrowingLimit", "lendingLimit", "weight"}
# Objects are read and applied in this order; deletes go the other way.
KIND_ORDER = ["WorkloadPriorityClass", "PriorityClass", "ResourceFlavor", "Namespace", "Cohort", "ClusterQueue",
              "LocalQueue", "Queue"]
# Kinds of a scheduler the cluster may not have installed (KAI's Queue): a 404 on their list means the portal owns
# none there, not a failed run. A desired one then fails its create, reported like any refused object.
OPTIONAL_KINDS = {"Queue"}
# Kinds whose whole spec is the portal's: compared exactly, so a field added by hand (a KAI Queue's priority, say)
# counts as drift and is taken away.
EXACT_SPEC_KINDS = {"Queue"}


def _describe(obj: dict[str, Any]) -> str:
    metadata = obj["metadata"]
    where = f"{metadata['namespace']}/" if metadata.get("namespace") else ""
    return f"{obj['kind']} {where}{metadata['name']}"


@dataclass
class SyncResult:
    changes: list[str] = field(default_factory=list)
    # One line per project or single object left out of this pass, and why (shown on the admins' Cluster sync page).
    project_errors: list[str] = field(default_factory=list)
    failed_projects: set[str] = field(default_factory=set)
    refused_objects: set[tuple[str, str, str]] = field(default_factory=set)
    # One line per object that a read back after the pass did not find as intended (another writer won every try):
    # the reconcile request stays open until a pass ends without any.
    unsettled: list[str] = field(default_factory=list)

    @property
    def problems(self) -> list[str]:
        """Every line for the run's record: what was left out, then what is not yet as intended."""
        return self.project_errors + self.unsettled

    def record(self, verb: str, obj: dict[str, Any]) -> None:
        self.changes.append(f"{verb} {_describe(obj)}")

    def refuse(self, project: str, message: str) -> None:
        self.failed_projects.add(project)
        self.project_errors.append(f"Project {project}: {message}")

    def refuse_object(self, obj: dict[str, Any], message: str) -> None:
        self.refused_objects.add(_key(obj))
        self.project_errors.append(f"{_describe(obj)}: {message}")

    def left_out(self, obj: dict[str, Any]) -> bool:
        """Whether the pass gave up on `obj` with a refusal (reported already; a read back cannot expect it)."""
        return _project_of(obj) in self.failed_projects or _key(obj) in self.refused_objects


def _key(obj: dict[str, Any]) -> tuple[str, str, str]:
    return obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"]


def _normalize(value: Any, key: str = "") -> Any:
    if isinstance(value, dict):
        return {k: _normalize(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalize(item) for item in value]
    if key in QUANTITY_KEYS and isinstance(value, int | str):
        try:
            return format(Decimal(str(value)).normalize(), "f")
        except ArithmeticError:
            return value
    return value


def _covers(desired: Any, actual: Any, key: str = "") -> bool:
    """Whether `actual` holds everything `desired` says; quota groups must match exactly (no server defaults)."""
    if key == "resourceGroups":
        return _normalize(desired) == _normalize(actual)
    if isinstance(desired, dict):
        return isinstance(actual, dict) and all(_covers(v, actual.get(k), k) for k, v in desired.items())
    if isinstance(desired, list):
        return isinstance(actual, list) and len(desired) == len(actual) and all(
            _covers(d, a) for d, a in zip(desired, actual, strict=True))
    return _normalize(desired, key) == _normalize(actual, key)


def _content(obj: dict[str, Any]) -> dict[str, Any]:
    """What the portal manages on an object: labels and spec (or a priority class's value and description)."""
    content: dict[str, Any] = {"labels": obj["metadata"].get("labels", {})}
    for field_name in ("spec", "value", "description"):
        if field_name in obj:
            content[field_name] = obj[field_name]
    return content


def _holds(desired: dict[str, Any], actual: dict[str, Any]) -> bool:
    """Whether the cluster's `actual` object is as the portal wants `desired`."""
    if desired["kind"] in EXACT_SPEC_KINDS and desired.get("spec") != actual.get("spec"):
        return False
    return _covers(_content(desired), _content(actual))


def _limits(obj: dict[str, Any]) -> dict[tuple[str, str, str], Decimal | None]:
    limits: dict[tuple[str, str, str], Decimal | None] = {}
    for group in (obj.get("spec") or {}).get("resourceGroups") or []:
        for flavor in group.get("flavors", []):
            for resource in flavor.get("resources", []):
                for limit in ("nominalQuota", "borrowingLimit", "lendingLimit"):
                    value = resource.get(limit)
                    limits[(flavor["name"], resource["name"], limit)] = (
                        None if value is None else Decimal(str(value)))
    return limits


def _shrinks(desired: dict[str, Any], actual: dict[str, Any]) -> bool:
    """Whether applying `desired` takes quota away: such updates go first, so the tree never over-commits."""
    before, after = _limits(actual), _limits(desired)
    for key, new in after.items():
        old = before.get(key)
        if key[2] == "nominalQuota":
            if new is not None and old is not None and new < old:
                return True
        elif new is not None and (old is None or new < old):  # a limit appears or tightens
            return True
    return any(key[2] == "nominalQuota" and key not in after for key in before)


def _delete_rank(obj: dict[str, Any]) -> tuple[int, int]:
    labels = obj["metadata"].get("labels", {})
    depth = 0 if PROJECT_LABEL in labels else 1 if DEPARTMENT_LABEL in labels else 2
    return -KIND_ORDER.index(obj["kind"]), depth


def _list_owned(gw: Gateway, kind: str) -> list[dict[str, Any]]:
    try:
        return gw.list(kind, label_selector=f"{MANAGED_BY_LABEL}={MANAGED_BY}")
    except ClusterError as error:
        if error.not_found and kind in OPTIONAL_KINDS:
            return []
        raise


def read_owned(gw: Gateway) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {_key(obj): obj for kind in KIND_ORDER for obj in _list_owned(gw, kind)}


def _project_of(obj: dict[str, Any]) -> str | None:
    return (obj["metadata"].get("labels") or {}).get(PROJECT_LABEL)


@dataclass(frozen=True)
class SkippedProject:
    project: str
    namespace: str
    reason: str


def namespace_rule_skips(desired: list[dict[str, Any]]) -> list[SkippedProject]:
    """Projects whose namespace breaks the rule (rows saved before it): the cluster is never asked about them."""
    skips = []
    for obj in desired:
        if obj["kind"] == "Namespace" and (error := project_namespace_error(obj["metadata"]["name"])):
            skips.append(SkippedProject(
                project=_project_of(obj) or "", namespace=obj["metadata"]["name"],
                reason=f"{error} The reconcile leaves this project out; delete it and create it again with a "
                       "namespace that follows the rule."))
    return skips


def namespace_owner_skips(gw: Gateway, desired: list[dict[str, Any]],
                          actual: dict[tuple[str, str, str], dict[str, Any]]) -> list[SkippedProject]:
    """Projects whose namespace exists in the cluster but is not the portal's for them: without the ownership
    label (someone else's, never adopted), or labelled for another project. One GET per namespace the portal does
    not own yet (new projects); owned ones are in `actual` already."""
    skips = []
    for obj in desired:
        if obj["kind"] != "Namespace":
            continue
        name, project = obj["metadata"]["name"], _project_of(obj) or ""
        current = actual.get(_key(obj))
        if current is None:
            try:
                current = gw.get("Namespace", name)
            except ClusterError as error:
                if error.not_found:
                    continue  # free: the portal creates it
                raise
        labels = current["metadata"].get("labels") or {}
        if labels.get(MANAGED_BY_LABEL) != MANAGED_BY:
            reason = (f"namespace {name} exists in the cluster without the portal's label "
                      f"{MANAGED_BY_LABEL}={MANAGED_BY}; the portal does not adopt namespaces it did not create, so "
                      "it leaves the namespace and this project's queues alone. Delete that namespace in the cluster "
                      "if it is unused, or recreate the project with another namespace.")
        elif labels.get(PROJECT_LABEL) != project:
            reason = (f"namespace {name} is labelled for project {labels.get(PROJECT_LABEL) or '(none)'} "
                      f"({PROJECT_LABEL}); the portal leaves it and this project's queues alone. Delete that "
                      "namespace in the cluster once it is unused, or recreate the project with another namespace.")
        else:
            continue
        skips.append(SkippedProject(project=project, namespace=name, reason=reason))
    return skips


def missing_mapped_namespaces(gw: Gateway, desired: list[dict[str, Any]]) -> dict[str, str]:
    """Namespaces mapped to a project (they hold its LocalQueues but are no Namespace the portal writes) that do
    not exist in the cluster: namespace -> project. One GET per mapped namespace; the portal never creates them."""
    own = {obj["metadata"]["name"] for obj in desired if obj["kind"] == "Namespace"}
    mapped = {obj["metadata"]["namespace"]: _project_of(obj) or "" for obj in desired
              if obj["kind"] == "LocalQueue" and obj["metadata"]["namespace"] not in own}
    missing = {}
    for name, project in sorted(mapped.items()):
        try:
            gw.get("Namespace", name)
        except ClusterError as error:
            if not error.not_found:
                raise
            missing[name] = project
    return missing


def _without(objects: dict[tuple[str, str, str], dict[str, Any]],
             skips: list[SkippedProject]) -> dict[tuple[str, str, str], dict[str, Any]]:
    """`objects` minus everything of a skipped project: labelled for it, inside its namespace, or the namespace."""
    projects = {skip.project for skip in skips}
    namespaces = {skip.namespace for skip in skips}
    return {key: obj for key, obj in objects.items()
            if _project_of(obj) not in projects and key[1] not in namespaces
            and not (key[0] == "Namespace" and key[2] in namespaces)}


def without_skipped(desired: list[dict[str, Any]], skips: list[SkippedProject]) -> list[dict[str, Any]]:
    kept = _without({_key(obj): obj for obj in desired}, skips)
    return [obj for obj in desired if _key(obj) in kept]


def reconcile(gw: Gateway, desired: list[dict[str, Any]]) -> SyncResult:
    """Make the cluster's portal-owned objects equal `desired`, writing only what differs; projects whose namespace
    is not the portal's are left out and reported (see the module docstring)."""
    result = SyncResult()
    actual = read_owned(gw)
    skips = namespace_rule_skips(desired)
    skips += namespace_owner_skips(gw, without_skipped(desired, skips), actual)
    for skip in skips:
        result.refuse(skip.project, skip.reason)
    desired = without_skipped(desired, skips)
    actual = _without(actual, skips)
    for name, project in missing_mapped_namespaces(gw, desired).items():
        result.project_errors.append(
            f"Project {project}: namespace {name} is mapped to it but does not exist in the cluster; the portal "
            "never creates a mapped namespace, so its queues there wait until someone creates it (or an admin "
            "unmaps it).")
        desired = [obj for obj in desired if obj["metadata"].get("namespace") != name]
    wanted = {_key(obj): obj for obj in desired}
    updates = [(obj, actual[key]) for key, obj in wanted.items()
               if key in actual and not _holds(obj, actual[key])]
    shrinking = [(obj, current) for obj, current in updates if _shrinks(obj, current)]
    growing = {id(obj) for obj, current in updates if not _shrinks(obj, current)}
    for obj, current in reversed(shrinking):  # children first
        _guarded(result, "update", obj, partial(_update, gw, obj, current, result))
    for obj in desired:  # parents first
        key = _key(obj)
        if key not in actual:
            _guarded(result, "create", obj, partial(_create, gw, obj, result))
        elif id(obj) in growing:
            _guarded(result, "update", obj, partial(_update, gw, obj, actual[key], result))
    for obj in sorted((obj for key, obj in actual.items() if key not in wanted), key=_delete_rank):
        _guarded(result, "delete", obj, partial(_delete, gw, obj, result))
    result.unsettled = _read_back(gw, wanted, skips, result)
    return result


def _read_back(gw: Gateway, wanted: dict[tuple[str, str, str], dict[str, Any]], skips: list[SkippedProject],
               result: SyncResult) -> list[str]:
    """What the cluster, read again after the pass, does not hold as intended: a wanted object missing or different,
    an unwanted one still there (one being deleted counts as gone). Objects the pass left out are reported already."""
    actual = _without(read_owned(gw), skips)
    again = "the next pass tries again."
    lines = [f"{_describe(obj)}: not as intended when read back after the pass (changed by another writer "
             f"meanwhile); {again}"
             for key, obj in wanted.items()
             if not result.left_out(obj) and (key not in actual or not _holds(obj, actual[key]))]
    lines += [f"{_describe(obj)}: still in the cluster when read back after the pass; {again}"
              for key, obj in actual.items()
              if key not in wanted and not result.left_out(obj) and not obj["metadata"].get("deletionTimestamp")]
    return lines


# How often an update is read again and re-applied after a 409 Conflict (another writer changed the object) before
# the pass leaves it to the next one.
CONFLICT_TRIES = 3

# Refusals that are about the whole run, not one project's objects: end the run (transient ones are retried). A
# webhook's denial is a 403 too, but about the object written: its project fails, the run goes on.
RUN_LEVEL_STATUS = {401, 403}


def _guarded(result: SyncResult, verb: str, obj: dict[str, Any], write: Callable[[], None]) -> None:
    """Run one write; a project's refused write is recorded on the project, which sits out the rest of the pass, and
    any other refused object is recorded alone (the objects that name it are written anyway: Kueue takes a queue
    whose flavor is missing and keeps it inactive until the flavor exists)."""
    project = _project_of(obj)
    if project is not None and project in result.failed_projects:
        return
    try:
        write()
    except ClusterError as error:
        if error.transient or (error.status in RUN_LEVEL_STATUS and not error.denied_by_webhook):
            raise
        if error.conflict:
            return  # another writer won every try: no refusal, the read back after the pass names it
        answer = f"{error.status} {error.reason}: {error.message}."
        if project is None:
            result.refuse_object(obj, f"the API server refused to {verb} it: {answer} The other objects were "
                                      "reconciled; this one is tried again on the next pass.")
        else:
            result.refuse(project, f"the API server refused to {verb} {_describe(obj)}: {answer} Its other objects "
                                   "wait for the next pass.")


def _create(gw: Gateway, obj: dict[str, Any], result: SyncResult) -> None:
    try:
        gw.create(obj)
    except ClusterError as error:
        if not (error.already_exists and obj["kind"] == "PriorityClass"):
            raise
        _foreign_priority_class(gw, obj, result)
        return
    result.record("created", obj)


def _foreign_priority_class(gw: Gateway, obj: dict[str, Any], result: SyncResult) -> None:
    """A PriorityClass of the organisation's name that is not the portal's (KAI's installation creates train, build
    and inference, say): never adopted or changed. Of the same value it serves as it is (nothing to report); of
    another value the pods of that class get the cluster's, so the admins are told."""
    existing = gw.get("PriorityClass", obj["metadata"]["name"])
    if existing.get("value") == obj["value"]:
        result.refused_objects.add(_key(obj))  # left out of the read back: it is not the portal's to hold
        return
    result.refuse_object(obj, f"a PriorityClass of this name exists in the cluster without the portal's label "
                              f"{MANAGED_BY_LABEL}={MANAGED_BY}, with value {existing.get('value')} where the "
                              f"organisation's class has {obj['value']}; the portal leaves it alone, so KAI Scheduler "
                              "orders this class's work on KAI pools by the cluster's value. Rename the class in the "
                              "portal, or give it the same value.")


def _delete(gw: Gateway, obj: dict[str, Any], result: SyncResult) -> None:
    gw.delete(obj["kind"], obj["metadata"]["name"], namespace=obj["metadata"].get("namespace"))
    result.record("deleted", obj)


def _update(gw: Gateway, desired: dict[str, Any], current: dict[str, Any], result: SyncResult) -> None:
    if (desired["kind"] == "LocalQueue" and desired["spec"] != current.get("spec", {}) and (
        desired["spec"]["clusterQueue"] != current.get("spec", {}).get("clusterQueue")
    )) or (desired["kind"] == "PriorityClass" and desired["value"] != current.get("value")):
        # A LocalQueue's clusterQueue and a PriorityClass's value are immutable: replace the object (pods created
        # before keep the priority they were given).
        gw.delete(desired["kind"], current["metadata"]["name"], namespace=current["metadata"].get("namespace"))
        gw.create(desired)
        result.record("recreated", desired)
        return
    metadata = desired["metadata"]
    for attempt in range(1, CONFLICT_TRIES + 1):
        body = {**current, **{k: v for k, v in desired.items() if k != "metadata"}}
        body["metadata"] = {**current["metadata"],
                            "labels": {**current["metadata"].get("labels", {}), **metadata.get("labels", {})}}
        body.pop("status", None)
        try:
            gw.replace(body)
        except ClusterError as error:
            if not error.conflict or attempt == CONFLICT_TRIES:
                raise
            # Another writer changed it since it was read: read it again and apply on top of theirs.
            current = gw.get(desired["kind"], metadata["name"], namespace=metadata.get("namespace"))
            if _holds(desired, current):
                return
            continue
        result.record("updated", desired)
        return


def desired_from_database() -> list[dict[str, Any]]:
    """Kueue's objects for the Kueue pools, then KAI Scheduler's Queues for the KAI pools (one snapshot)."""
    org, naming = org_snapshot(), kueue_names()
    return desired_objects(org, naming) + kai_objects(org, naming)


def as_yaml(objects: list[dict[str, Any]]) -> str:
    return yaml.safe_dump_all(objects, sort_keys=False, default_flow_style=False)
