"""Notebooks that may be idle: what the culler asks about (beat, worker/tasks.py), all on the portal's clock."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

from django.db.models import Q
from django.utils import timezone

from apps.workloads.models import IdlePolicy, Kind, Status, Workload


def notebooks_running() -> list[Workload]:
    """Notebooks whose server may be up: what the culler asks about its activity."""
    return list(Workload.objects.filter(kind=Kind.NOTEBOOK, status__in=[Status.ADMITTED, Status.RUNNING])
                .select_related("project").only("pk", "project__namespace", "server_activity_mark"))


def _last_sign_of_use(workload: Workload, activity: Mapping[int, datetime]) -> datetime | None:
    """The latest of: start or the owner's keep-alive, the server's own activity, any other signal given."""
    signs = [workload.last_activity_at or workload.submitted_at, workload.server_activity_at,
             activity.get(workload.pk)]
    return max((sign for sign in signs if sign is not None), default=None)


def notebooks_idle(*, now: datetime | None = None, activity: Mapping[int, datetime] | None = None) -> list[Workload]:
    """Running notebooks with no sign of use for longer than their idle timeout, all on the portal's clock.

    Signs of use: the notebook starting, the owner's "keep alive" (an override: it counts whatever the server says),
    the notebook server's own activity (services.notebook_server_activity_record), and `activity`: more signals by
    workload id (e.g. GPU utilisation above a threshold), the latest sign of each.
    """
    now = now or timezone.now()
    activity = activity or {}
    candidates = Workload.objects.filter(kind=Kind.NOTEBOOK, status__in=[Status.ADMITTED, Status.RUNNING])
    idle = []
    for workload in candidates.only("pk", "notebook_idle_timeout_minutes", "last_activity_at", "submitted_at",
                                    "server_activity_at", "status"):
        since = _last_sign_of_use(workload, activity)
        if since and workload.notebook_idle_timeout_minutes and \
                now - since > timedelta(minutes=workload.notebook_idle_timeout_minutes):
            workload.idle_since = since
            idle.append(workload)
    return idle


def notebooks_gpu_idle(*, now: datetime | None = None) -> list[Workload]:
    """Running notebooks whose GPUs have stayed below the idle policy's threshold for its duration, flagged (their
    owner warned) at least the policy's warning time ago, and whose owner showed no activity in that time either
    (the keep-alive, or the notebook server's own activity, overrides)."""
    now = now or timezone.now()
    policy = IdlePolicy.current()
    if not policy.cull_notebooks:
        return []
    quiet_since = now - timedelta(seconds=policy.idle_seconds)
    return list(Workload.objects.filter(
        kind=Kind.NOTEBOOK, status__in=[Status.ADMITTED, Status.RUNNING],
        utilisation__idle_flagged_at__lte=now - policy.warning, utilisation__idle_since__lte=quiet_since,
    ).filter(Q(last_activity_at__isnull=True) | Q(last_activity_at__lte=quiet_since)).order_by("pk"))
