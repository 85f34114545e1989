"""GPU utilisation (stored by the worker from Prometheus; pages never query Prometheus)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db.models import QuerySet

from apps.core.actors import Actor
from apps.workloads.models import HOLDING_STATUSES, Workload, WorkloadUtilisation

from .lookups import workloads_for


@dataclass(frozen=True)
class UtilisationChart:
    """The detail page's sparkline: SVG polyline points in a CHART_WIDTH x CHART_HEIGHT box (0 % at the bottom), and
    an inference service's figures per replica (WorkloadUtilisation.replicas, `last_at` a datetime)."""

    row: WorkloadUtilisation | None
    util_points: str = ""
    memory_points: str = ""
    memory_scale_mib: float = 0.0
    started: Any = None
    ended: Any = None
    replicas: tuple[dict[str, Any], ...] = ()


CHART_WIDTH, CHART_HEIGHT = 300, 60


def utilisation_available() -> bool:
    return bool(settings.PROMETHEUS_URL)


def workload_utilisation_chart(*, workload: Workload) -> UtilisationChart:
    """The stored series as two polylines (GPU util %, framebuffer used relative to its peak); one query."""
    row = WorkloadUtilisation.objects.filter(workload=workload).first()
    series = row.series if row else []
    if not series:
        return UtilisationChart(row=row)
    replicas = tuple({**replica, "last_at": datetime.fromtimestamp(replica["last_at"], tz=UTC)}
                     for replica in (row.replicas if row else []))
    first, last = series[0][0], series[-1][0]
    span = (last - first) or 1.0
    peak = max(point[2] for point in series) or 1.0

    def x(moment: float) -> str:
        return f"{(moment - first) / span * CHART_WIDTH:.1f}"

    def y(fraction: float) -> str:
        return f"{CHART_HEIGHT - min(max(fraction, 0.0), 1.0) * CHART_HEIGHT:.1f}"

    util = " ".join(f"{x(p[0])},{y(p[1] / 100)}" for p in series)
    memory = " ".join(f"{x(p[0])},{y(p[2] / peak)}" for p in series)
    return UtilisationChart(row=row, util_points=util, memory_points=memory, memory_scale_mib=peak,
                            started=datetime.fromtimestamp(first, tz=UTC), ended=datetime.fromtimestamp(last, tz=UTC),
                            replicas=replicas)


def workloads_held_idle(*, user: Actor) -> QuerySet[Workload]:
    """Workloads holding GPUs now that the idle policy flagged (GPUs below its threshold for its duration), longest
    idle first, scoped to what the user may see."""
    return workloads_for(user).filter(
        status__in=HOLDING_STATUSES, utilisation__idle_flagged_at__isnull=False).select_related(
        "project__department", "node_pool", "owner", "utilisation").order_by("utilisation__idle_since", "pk")
