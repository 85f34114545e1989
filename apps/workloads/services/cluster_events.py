"""What the watcher does with the Kubernetes Events of the workloads' objects: find the workload each is about and
keep it with the workload (one row per Event object, its count and times updated as the API server updates them),
at most CLUSTER_EVENTS_KEPT per workload, the most recently seen."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import transaction
from django.db.models import Count

from apps.core.http import parse_id
from apps.core.kueue_names import JOB_PREFIX

from ..models import CLUSTER_EVENTS_KEPT, CLUSTER_NAMESPACE, Origin, Workload, WorkloadClusterEvent
from ..observation import ClusterEvent

# Kueue's Events that name another workload by its UIDs and the cohort paths of both (a preemption, and the Job's
# Stopped that repeats the eviction's message): the timeline tells those in a plain sentence, scoped to what the
# viewer may see, so they are not kept here.
NAMES_ANOTHER_WORKLOAD = frozenset({"Preempted", "EvictedDueToPreempted"})
ANOTHER_WORKLOAD_MARKS = ("(UID: ", "preemptor path:")


def names_another_workload(event: ClusterEvent) -> bool:
    """Whether the Event is one of those the timeline tells instead (never kept: the watcher need not hold it)."""
    return event.reason in NAMES_ANOTHER_WORKLOAD or any(mark in event.message for mark in ANOTHER_WORKLOAD_MARKS)


def _portal_workload_id(kind: str, name: str) -> int | None:
    """The portal workload a Job `wl-<id>` or one of its pods (`wl-<id>-...`) belongs to."""
    if kind not in ("Job", "Pod") or not name.startswith(JOB_PREFIX):
        return None
    head, _, tail = name[len(JOB_PREFIX):].partition("-")
    if kind == "Job" and tail:
        return None
    if kind == "Pod" and not tail:
        return None
    return parse_id(head)


def workload_cluster_events_record(*, events: Sequence[ClusterEvent]) -> int:
    """Keep each Event that is about a workload's object (in the workload's namespace): its Job or pods (portal
    work, by their names), Kueue's Workload (by name), or the object work from outside the portal is (by name);
    the others are dropped. Returns how many were kept. A few queries per batch, whatever its size."""
    events = [event for event in events if not names_another_workload(event)]
    if not events:
        return 0
    by_id = {event.uid: _portal_workload_id(event.object_kind, event.object_name) for event in events}
    found: dict[tuple[str, str, str], int] = {}  # (namespace, kind, name) -> workload
    ids = {pk for pk in by_id.values() if pk is not None}
    if ids:
        for pk, namespace in Workload.objects.filter(pk__in=ids, origin=Origin.PORTAL).annotate(
                cluster_ns=CLUSTER_NAMESPACE).values_list("pk", "cluster_ns"):
            for event in events:
                if by_id[event.uid] == pk and event.namespace == namespace:
                    found[(event.namespace, event.object_kind, event.object_name)] = pk
    kueue_names = {event.object_name for event in events if event.object_kind == "Workload"}
    if kueue_names:
        for pk, name, namespace in Workload.objects.filter(kueue_name__in=kueue_names).annotate(
                cluster_ns=CLUSTER_NAMESPACE).values_list("pk", "kueue_name", "cluster_ns"):
            found[(namespace, "Workload", name)] = pk
    owner_names = {event.object_name for event in events
                   if event.object_kind != "Workload" and by_id[event.uid] is None}
    if owner_names:
        for pk, name, namespace in Workload.objects.filter(origin=Origin.OUTSIDE, object_name__in=owner_names).annotate(
                cluster_ns=CLUSTER_NAMESPACE).values_list("pk", "object_name", "cluster_ns"):
            for event in events:
                if event.object_name == name and event.namespace == namespace and event.object_kind != "Workload":
                    found[(namespace, event.object_kind, name)] = pk
    rows = [WorkloadClusterEvent(
        workload_id=found[key], uid=event.uid, object_kind=event.object_kind, object_name=event.object_name,
        type=event.type[:16], reason=event.reason[:128], message=event.message, source=event.source[:253],
        count=max(1, event.count), first_seen=event.first_seen, last_seen=event.last_seen)
        for event in events if (key := (event.namespace, event.object_kind, event.object_name)) in found]
    if not rows:
        return 0
    with transaction.atomic():
        WorkloadClusterEvent.objects.bulk_create(
            rows, update_conflicts=True, unique_fields=["uid"],
            update_fields=["type", "reason", "message", "source", "count", "last_seen"])
        crowded = WorkloadClusterEvent.objects.filter(workload_id__in={row.workload_id for row in rows}).values(
            "workload_id").annotate(kept=Count("id")).filter(kept__gt=CLUSTER_EVENTS_KEPT).values_list(
            "workload_id", flat=True)
        for workload_id in list(crowded):
            oldest = WorkloadClusterEvent.objects.filter(workload_id=workload_id).order_by(
                "-last_seen", "-id").values_list("pk", flat=True)[CLUSTER_EVENTS_KEPT:]
            WorkloadClusterEvent.objects.filter(pk__in=list(oldest)).delete()
    return len(rows)
