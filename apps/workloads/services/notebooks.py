"""Idle notebooks: the activity their servers report, which of them are idle, and the cull (beat)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from apps.workloads.models import IdlePolicy, Kind, Status, Workload

from .transitions import _record_stop, _transition
from .utilisation import _duration_text


def notebooks_running() -> list[Workload]:
    """Notebooks whose server may be up: what the culler asks about its activity."""
    return list(Workload.objects.filter(kind=Kind.NOTEBOOK, status__in=[Status.ADMITTED, Status.RUNNING])
                .select_related("project").only("pk", "project__namespace", "server_activity_mark"))


def notebook_server_activity_record(*, observed: Mapping[int, Any], now: datetime | None = None) -> None:
    """What notebook servers reported (worker.notebook_activity.ServerStatus by workload id): a `last_activity`
    that changed since the last report, or one past the server's start on the first report, is activity now."""
    now = now or timezone.now()
    marks = dict(Workload.objects.filter(pk__in=list(observed)).values_list("pk", "server_activity_mark"))
    for workload_id, status in observed.items():
        previous = marks.get(workload_id)
        if previous is None or previous == status.last_activity:
            continue
        fields: dict[str, Any] = {"server_activity_mark": status.last_activity[:64]}
        if previous or status.used_since_start:
            fields["server_activity_at"] = now
        Workload.objects.filter(pk=workload_id).update(**fields)


def _last_sign_of_use(workload: Workload, activity: Mapping[int, datetime]) -> datetime | None:
    """The latest of: start or the owner's keep-alive, the server's own activity, any other signal given."""
    signs = [workload.last_activity_at or workload.submitted_at, workload.server_activity_at,
             activity.get(workload.pk)]
    return max((sign for sign in signs if sign is not None), default=None)


def notebooks_idle(*, now: datetime | None = None, activity: Mapping[int, datetime] | None = None) -> list[Workload]:
    """Running notebooks with no sign of use for longer than their idle timeout, all on the portal's clock.

    Signs of use: the notebook starting, the owner's "keep alive" (an override: it counts whatever the server says),
    the notebook server's own activity (notebook_server_activity_record), and `activity`: more signals by workload
    id (e.g. GPU utilisation above a threshold), the latest sign of each.
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


def notebook_cull(*, workload: Workload) -> bool:
    """Stop an idle notebook (beat); the event says why and since when."""
    minutes = workload.notebook_idle_timeout_minutes
    since = getattr(workload, "idle_since", None)
    message = f"Stopped after {minutes} minutes without activity"
    if since is not None:
        message += f" (no sign of use in the notebook or the portal since {since:%Y-%m-%d %H:%M} UTC)"
    with transaction.atomic():
        if not _transition(workload, expected=[Status.ADMITTED, Status.RUNNING], to_status=Status.STOPPING,
                           reason="IdleTimeout", message=message):
            return False
        _record_stop(workload)
    return True


def notebooks_gpu_idle(*, now: datetime | None = None) -> list[Workload]:
    """Running notebooks whose GPUs have stayed below the idle policy's threshold for its duration, and whose owner
    showed no activity in that time either (the keep-alive, or the notebook server's own activity, overrides)."""
    now = now or timezone.now()
    policy = IdlePolicy.current()
    if not policy.cull_notebooks:
        return []
    quiet_since = now - timedelta(seconds=policy.idle_seconds)
    return list(Workload.objects.filter(
        kind=Kind.NOTEBOOK, status__in=[Status.ADMITTED, Status.RUNNING],
        utilisation__idle_flagged_at__isnull=False, utilisation__idle_since__lte=quiet_since,
    ).filter(Q(last_activity_at__isnull=True) | Q(last_activity_at__lte=quiet_since)).order_by("pk"))


def notebook_cull_gpu_idle(*, workload: Workload) -> bool:
    """Stop a notebook whose GPUs stayed idle (beat); the event says why."""
    policy = IdlePolicy.current()
    message = (f"Stopped after its GPUs stayed below {policy.threshold_percent}% for "
               f"{_duration_text(policy.idle_seconds)}")
    with transaction.atomic():
        if not _transition(workload, expected=[Status.ADMITTED, Status.RUNNING], to_status=Status.STOPPING,
                           reason="IdleTimeout", message=message):
            return False
        _record_stop(workload)
    return True
