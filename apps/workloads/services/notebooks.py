"""Idle notebooks: the activity their servers report, and the cull (beat) of those the selectors find idle
(apps.workloads.selectors.notebooks)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from apps.workloads.models import IdlePolicy, Status, Workload

from .transitions import _record_stop, _transition
from .utilisation import _duration_text


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
