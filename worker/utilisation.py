"""GPU utilisation from Prometheus' HTTP API (NVIDIA's DCGM exporter, pod mapping on), stored for the pages.

Only the worker talks to Prometheus (beat runs `utilisation_refresh` every minute); pages read what it stored, so
no page waits on Prometheus. Each refresh is two bounded range queries for the whole cluster, not one per workload:
utilisation and framebuffer per (namespace, pod) since the oldest sample not yet counted (at most LOOKBACK back,
at most MAX_POINTS steps), at UTILISATION_STEP_SECONDS resolution, each with a timeout. A workload's pods are the
pods of its Job (`<job name>-...` in its project's namespace); for work from outside the portal, the pods named
after its object (`<JobSet name>-...`, `<RayCluster name>-head-...`), which is how each operator names them.

Utilisation per pod is the mean of its GPUs' `DCGM_FI_DEV_GPU_UTIL`, a workload's the mean over its pods (an
inference service keeps each pod's too: its replicas); a MIG instance has no device utilisation, so
its `DCGM_FI_PROF_GR_ENGINE_ACTIVE` (a ratio) x 100 stands in. A time-sliced replica reports its physical card
(the exporter cannot split a shared card by pod): a pod sharing a busy card looks busy.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import requests
from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from apps.usage import services as usage_services
from apps.workloads import services as workload_services
from apps.workloads.models import HOLDING_STATUSES, IdlePolicy, Kind, Workload, WorkloadUtilisation

logger = logging.getLogger(__name__)

LOOKBACK = timedelta(hours=1)  # how far back a refresh reaches (after an outage, older samples stay uncounted)
MAX_POINTS = 1000  # steps per range query (Prometheus refuses more than 11,000)
CACHE_SECONDS = 60


def utilisation_expr(matchers: str = "") -> str:
    """Percent busy per (namespace, pod): full cards and time-sliced ones by device utilisation, MIG instances by
    their graphics engine activity."""
    extra = f",{matchers}" if matchers else ""
    return (f'avg by (namespace, pod) (DCGM_FI_DEV_GPU_UTIL{{pod!=""{extra}}}) or '
            f'avg by (namespace, pod) (100 * DCGM_FI_PROF_GR_ENGINE_ACTIVE{{GPU_I_ID!="",pod!=""{extra}}})')


def memory_expr(matchers: str = "") -> str:
    extra = f",{matchers}" if matchers else ""
    return f'sum by (namespace, pod) (DCGM_FI_DEV_FB_USED{{pod!=""{extra}}})'


class PrometheusUnavailable(Exception):
    """Prometheus did not answer, or answered an error."""


class Prometheus:
    """A small client of Prometheus' HTTP API (requests, with timeouts); answers are cached for a minute."""

    def __init__(self, url: str, timeout: float) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.session = requests.Session()

    def query_range(self, expr: str, start: datetime, end: datetime, step: float) -> list[dict[str, Any]]:
        params = {"query": expr, "start": f"{start.timestamp():.3f}", "end": f"{end.timestamp():.3f}",
                  "step": f"{step:g}", "timeout": f"{self.timeout:g}s"}
        key = "prometheus:" + hashlib.sha256(repr(sorted(params.items())).encode()).hexdigest()
        cached = cache.get(key)
        if cached is not None:
            return list(cached)
        try:
            response = self.session.get(f"{self.url}/api/v1/query_range", params=params,
                                        timeout=(min(2.0, self.timeout), self.timeout))
            body = response.json()
        except (requests.RequestException, ValueError) as error:
            raise PrometheusUnavailable(f"{self.url}: {error}") from error
        if response.status_code != 200 or body.get("status") != "success":
            raise PrometheusUnavailable(f"{self.url}: {response.status_code} {body.get('error', '')}".strip())
        result = list(body["data"]["result"])
        cache.set(key, result, CACHE_SECONDS)
        return result


def client() -> Prometheus | None:
    """The configured Prometheus, or None (PROMETHEUS_URL empty: utilisation is not available)."""
    return Prometheus(settings.PROMETHEUS_URL, settings.PROMETHEUS_TIMEOUT) if settings.PROMETHEUS_URL else None


@dataclass
class Refresh:
    workloads: int = 0
    samples: int = 0


def _candidates(now: datetime) -> list[Workload]:
    """Workloads holding GPUs now, or that stopped within the lookback (their last samples)."""
    return list(Workload.objects.filter(Q(status__in=HOLDING_STATUSES) | Q(finished_at__gte=now - LOOKBACK))
                .exclude(job_name="", object_name="").exclude(started_at__isnull=True, admitted_at__isnull=True)
                .select_related("project", "node_pool").order_by("pk"))


def _aligned(moment: datetime, step: float, up: bool) -> datetime:
    seconds = moment.timestamp() / step
    return datetime.fromtimestamp((math.ceil(seconds) if up else math.floor(seconds)) * step, tz=UTC)


def refresh(prometheus: Prometheus, now: datetime | None = None) -> Refresh:
    """Fetch the samples not yet counted for every candidate workload and store them (chart, idle flag, hourly
    showback figures), one transaction per workload."""
    now = now or timezone.now()
    result = Refresh()
    workloads = _candidates(now)
    if not workloads:
        return result
    cursors = dict(WorkloadUtilisation.objects.filter(workload__in=workloads).values_list("workload_id",
                                                                                          "sampled_until"))
    step = float(settings.UTILISATION_STEP_SECONDS)
    oldest = min(cursors.get(w.pk) or w.started_at or w.admitted_at or now for w in workloads)
    start = _aligned(max(oldest, now - LOOKBACK), step, up=True)
    end = _aligned(now, step, up=False)
    if end < start:
        return result
    step = max(step, math.ceil((end - start).total_seconds() / MAX_POINTS / step) * step)
    utilisation = prometheus.query_range(utilisation_expr(), start, end, step)
    memory = prometheus.query_range(memory_expr(), start, end, step)

    by_job = {(workload.cluster_namespace, workload.job_name or workload.object_name): workload
              for workload in workloads}

    def owner(series: dict[str, Any]) -> Workload | None:
        """The workload whose Job (or, from outside the portal, whose object) made the pod: the longest
        `<name>-` prefix of the pod's name we know."""
        labels = series.get("metric") or {}
        namespace, parts = labels.get("namespace", ""), labels.get("pod", "").split("-")
        for cut in range(len(parts) - 1, 0, -1):
            if (found := by_job.get((namespace, "-".join(parts[:cut])))) is not None:
                return found
        return None

    util_points: dict[int, dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
    memory_points: dict[int, dict[float, float]] = defaultdict(lambda: defaultdict(float))
    pod_points: dict[int, dict[str, list[tuple[datetime, float]]]] = defaultdict(lambda: defaultdict(list))
    for series in utilisation:
        if (held_by := owner(series)) is not None:
            pod = (series.get("metric") or {}).get("pod", "")
            for moment, value in series.get("values") or []:
                util_points[held_by.pk][float(moment)].append(float(value))
                if held_by.kind == Kind.INFERENCE and math.isfinite(float(value)):
                    pod_points[held_by.pk][pod].append((datetime.fromtimestamp(float(moment), tz=UTC),
                                                        float(value)))
    for series in memory:
        if (held_by := owner(series)) is not None:
            for moment, value in series.get("values") or []:
                memory_points[held_by.pk][float(moment)] += float(value)

    policy = IdlePolicy.current()
    for workload in workloads:
        points = util_points.get(workload.pk)
        if not points:
            continue
        samples = [(datetime.fromtimestamp(moment, tz=UTC), sum(values) / len(values),
                    memory_points[workload.pk].get(moment, 0.0))
                   for moment, values in sorted(points.items()) if all(math.isfinite(v) for v in values)]
        with transaction.atomic():
            accepted = workload_services.workload_utilisation_record(workload=workload, samples=samples,
                                                                     policy=policy, now=now,
                                                                     replicas=pod_points.get(workload.pk))
            usage_services.utilisation_hours_add(workload=workload, samples=accepted, sample_seconds=step,
                                                 threshold_percent=policy.threshold_percent)
        result.workloads += bool(accepted)
        result.samples += len(accepted)
    return result
