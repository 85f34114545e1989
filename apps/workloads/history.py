"""Reads of a workload's history that need more than its own rows: preemptions with their preemptors, and how long
similar work ran and so how long a workload is expected to hold its quota (the start forecast's expected ends, and
the budgets' projection of running work)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import QuerySet

from apps.core import kueue_conditions as kueue

from .models import ForecastBasis, Status, Workload, WorkloadEvent


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


def preemptor_job_uids(messages: Iterable[str]) -> set[str]:
    """The Job uids of the preemptors Kueue's messages name (its Preempted and Evicted conditions and events)."""
    found = (kueue.PREEMPTOR.search(message or "") for message in messages)
    return {match["job_uid"] for match in found if match}


def kueue_message_scoped(message: str, *, visible_job_uids: set[str] | None) -> str:
    """Kueue's message as it is, except that a preemptor outside `visible_job_uids` (None: all visible) loses its
    UIDs and cohort path, as the preemption sentence names it only to those who may see it."""
    match = kueue.PREEMPTOR.search(message or "")
    if not match or visible_job_uids is None or match["job_uid"] in visible_job_uids:
        return message
    return kueue.PREEMPTOR_PATH.sub("", message.replace(match.group(0),
                                                        f"of a project you cannot see due to {match['why']}"))


def conditions_scoped(workload: Workload, *, visible_job_uids: set[str] | None) -> list[dict[str, Any]]:
    """Kueue's conditions with each message `kueue_message_scoped`."""
    return [{**condition, "message": kueue_message_scoped(condition.get("message") or "",
                                                          visible_job_uids=visible_job_uids)}
            for condition in workload.kueue_conditions or []]


# --- runtimes of finished work, for the start forecast (worker/forecast.py) and budgets (apps/usage/budgets.py) ---

# How far back "similar work" is looked for, and how many of the newest runs of one family count.
RUNTIME_HISTORY_DAYS = 30
RUNTIME_SAMPLES_PER_FAMILY = 50
MIN_SAMPLES = 3  # fewer similar runs than this say too little about the spread
LOW, LIKELY, HIGH = 0.1, 0.5, 0.9  # the quantiles of similar runtimes behind earliest, likely and latest

SimilarWork = tuple[int, str, str]  # (project id, kind, image family)


def image_family(image: str) -> str:
    """The image without its tag or digest: "nvcr.io/nvidia/pytorch:24.01-py3" -> "nvcr.io/nvidia/pytorch" (a
    registry port, "host:5000/x", is not a tag)."""
    name = image.split("@", 1)[0]
    if name.rfind(":") > name.rfind("/"):
        name = name[: name.rfind(":")]
    return name


def similar_work(workload: Workload) -> SimilarWork:
    return (workload.project_id, workload.kind, image_family(workload.image))


def runtime_samples(*, now: datetime, project_ids: Iterable[int] | QuerySet[Any] | None = None,
                    ) -> dict[SimilarWork, list[float]]:
    """Seconds each recent succeeded run held its quota (admission to finish, on the cluster's clock), newest first,
    per family of similar work (of `project_ids` only, when given: ids, or a query of them, which then runs inside
    this one): one query. Failed and stopped runs are left out: they end early for reasons that do not repeat."""
    runs = Workload.objects.filter(status=Status.SUCCEEDED, admitted_at__isnull=False, finished_at__isnull=False,
                                   finished_at__gte=now - timedelta(days=RUNTIME_HISTORY_DAYS))
    if project_ids is not None:
        runs = runs.filter(project_id__in=project_ids)
    rows = runs.order_by("-finished_at", "-id").values_list("project_id", "kind", "image", "admitted_at",
                                                            "finished_at")
    samples: dict[SimilarWork, list[float]] = defaultdict(list)
    for project_id, kind, image, admitted_at, finished_at in rows.iterator(chunk_size=2000):
        family = samples[(project_id, kind, image_family(image))]
        if len(family) < RUNTIME_SAMPLES_PER_FAMILY and admitted_at and finished_at:
            family.append(max(0.0, (finished_at - admitted_at).total_seconds()))
    return dict(samples)


@dataclass(frozen=True)
class Runtime:
    """Seconds a workload holds its quota once admitted, counted from its admission: optimistic, likely and
    pessimistic, and where they come from (a ForecastBasis)."""

    low: float
    likely: float
    high: float
    basis: str


def quantile(ordered: list[float], q: float) -> float:
    """Linear interpolation between the closest ranks of an ascending list."""
    position = (len(ordered) - 1) * q
    below = math.floor(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)


def expected_runtime(*, max_runtime: float | None, samples: Iterable[float], elapsed: float = 0.0) -> Runtime | None:
    """How long a workload holds its quota, having held it `elapsed` seconds already; None when nothing says."""
    ordered = sorted(samples)
    if len(ordered) >= MIN_SAMPLES:
        longer = [s for s in ordered if s > elapsed]
        if longer:
            low, likely, high = (quantile(longer, q) for q in (LOW, LIKELY, HIGH))
        else:  # it ran longer than every similar run: it may end any moment, or run on for about their spread
            spread = max(60.0, quantile(ordered, HIGH) - quantile(ordered, LOW))
            low, likely, high = elapsed, elapsed, elapsed + spread
        if max_runtime is not None:
            low, likely, high = (min(v, max_runtime) for v in (low, likely, high))
        return Runtime(low, likely, high, ForecastBasis.HISTORY)
    if max_runtime is not None:
        return Runtime(max_runtime, max_runtime, max_runtime, ForecastBasis.MAX_RUNTIME)
    return None
