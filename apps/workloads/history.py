"""Reads of a workload's history that need more than its own rows: preemptions with their preemptors."""

from __future__ import annotations

from typing import Any

from .models import Status, Workload, WorkloadEvent


def preemptions(workload: Workload) -> list[dict[str, Any]]:
    """Each preemption: when, Kueue's reason and message, and the portal workload that took the GPUs.

    The preemptor is resolved here from the Job uid Kueue names, because the watcher may see a preemption before the
    preemptor's own row has recorded its Job uid.
    """
    events = list(WorkloadEvent.objects.filter(workload=workload, to_status=Status.PREEMPTED).order_by("at", "id"))
    job_uids = {event.details.get("preemptor_job_uid") for event in events} - {None, ""}
    preemptors = {w.k8s_uid: w for w in Workload.objects.filter(k8s_uid__in=job_uids).select_related("project")}
    result = []
    for event in events:
        preemptor = preemptors.get(event.details.get("preemptor_job_uid", ""))
        result.append({
            "at": event.cluster_at or event.at, "reason": event.reason, "message": event.message,
            "preemptor": None if preemptor is None else {
                "id": preemptor.pk, "name": preemptor.name, "project": preemptor.project.slug},
        })
    return result
