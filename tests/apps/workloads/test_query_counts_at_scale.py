"""The workload list, the project queue and the API's list make the same number of queries at 100 rows as at
10,000, and those numbers are pinned: work from inside and outside the portal, queued, running and finished, in the
viewers' projects and others."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from apps.org.models import NodePool, PriorityClass, Project
from apps.workloads.models import Kind, Origin, Status, Workload
from tests.api_support import call

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

STATUSES = [Status.QUEUED, Status.RUNNING, Status.SUCCEEDED, Status.SUCCEEDED, Status.FAILED]
KINDS = [Kind.JOB, Kind.JOBSET, Kind.POD_GROUP, Kind.TRAINJOB, Kind.RAYJOB]


def add_rows(count: int, start: int, users: dict) -> None:
    """`count` rows as the watcher and the submit path leave them, spread over the demo's projects and pools."""
    projects = list(Project.objects.order_by("pk"))
    pools = list(NodePool.objects.order_by("pk"))
    train = PriorityClass.objects.get(name="train")
    now = timezone.now()
    rows = []
    for number in range(start, start + count):
        project, pool, status = projects[number % len(projects)], pools[number % len(pools)], STATUSES[number % 5]
        outside = number % 2 == 1
        started = now - timedelta(minutes=number % 300 + 5) if status != Status.QUEUED else None
        rows.append(Workload(
            project=project, node_pool=pool, status=status, gpus=1 + number % 4, pods=1 + number % 2,
            name=f"scale-{number}", image="busybox", created_at=now - timedelta(minutes=number % 600),
            origin=Origin.OUTSIDE if outside else Origin.PORTAL,
            kind=KINDS[number % len(KINDS)] if outside else Kind.TRAINING,
            owner=None if outside and number % 3 else users["alice" if number % 4 < 2 else "bob"],
            priority_class=None if outside else train, object_name=f"scale-{number}",
            kueue_uid=f"0f0e0d0c-0000-4000-9000-{number:012d}", kueue_name=f"job-scale-{number}",
            job_name=f"scale-{number}", cluster_queue=f"proj-{project.slug}-{pool.slug}-elastic",
            queue_position_local=number if status == Status.QUEUED else None,
            queue_position_cluster=number if status == Status.QUEUED else None,
            positions_at=now if status == Status.QUEUED else None,
            admitted_at=started, started_at=started,
            finished_at=now - timedelta(minutes=1) if status in {Status.SUCCEEDED, Status.FAILED} else None,
            pod_sets=[{"name": "main", "count": 1 + number % 2, "gpus": 1 + number % 4, "cpu": "2.000",
                       "memory_gib": "8.00"}],
        ))
    Workload.objects.bulk_create(rows, batch_size=2000)


def queries(fetch) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = fetch()
    assert response.status_code == 200, response.content[:300]
    return len(captured.captured_queries)


def test_lists_and_the_queue_make_as_many_queries_at_10000_rows_as_at_100(client_for, users):
    surfaces = {
        "alice's list": (client_for("alice"), reverse("workloads:list"), {}),
        "lead's list of all": (client_for("lead"), reverse("workloads:list"), {"scope": "all"}),
        "admin's list of all, live": (client_for("admin"), reverse("workloads:list"), {"scope": "all",
                                                                                        "status": "live"}),
        "admin's list, page 2": (client_for("admin"), reverse("workloads:list"), {"scope": "all", "page": "2"}),
        "Vision's queue": (client_for("alice"), reverse("workloads:project_queue", args=["vision"]), {}),
        "the API's list": (client_for("lead"), "/api/v1/workloads/", {"limit": "100"}),
    }

    def measure() -> dict[str, int]:
        counted = {}
        for label, (client, url, params) in surfaces.items():
            if url.startswith("/api/"):
                counted[label] = queries(lambda c=client, u=url, p=params: call(c, "GET", u, data=p))
            else:
                counted[label] = queries(lambda c=client, u=url, p=params: c.get(u, p))
        return counted

    add_rows(100, 0, users)
    measure()  # warm: sessions and first-use stamps are written once
    at_100 = measure()
    add_rows(9_900, 100, users)
    at_10000 = measure()
    assert at_10000 == at_100
    # Pinned: session, user and grants, then each surface's own fixed reads (bench/README.md, "Live-state pages
    # and the watcher"). A change here is a change of the page's floor, to be measured there.
    assert at_100 == {"alice's list": 12, "lead's list of all": 12, "admin's list of all, live": 12,
                      "admin's list, page 2": 12, "Vision's queue": 15, "the API's list": 12}
