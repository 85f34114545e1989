"""workloads 0005: queued rows whose last transition was the requeue after a preemption become `requeued`; other
queued rows stay queued."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.conf import settings
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from apps.workloads.models import Status, Workload

# usage 0012 reads the workloads' gpu_fraction (workloads 0021), so it goes back too.
BEFORE = [("workloads", "0004_outbox_intents"), ("usage", "0011_usage_day")]

pytestmark = pytest.mark.django_db(transaction=True)


def migrate(targets):
    """Migrate to `targets` (None: everything); the other apps stay at their newest, so the state matches the
    database."""
    executor = MigrationExecutor(connection)
    leaves = executor.loader.graph.leaf_nodes()
    targets = [*targets, *(leaf for leaf in leaves if leaf[0] not in {t[0] for t in targets})] if targets else leaves
    executor.migrate(targets)
    executor.loader.build_graph()
    return executor.loader.project_state([target for target in targets if target[1]]).apps


def test_requeued_rows_get_their_own_status():
    try:
        apps = migrate(BEFORE)
        user = apps.get_model(settings.AUTH_USER_MODEL).objects.create(username="requeue-owner")
        pool = apps.get_model("org", "NodePool").objects.create(slug="rq-h100", name="H100", capacity=8,
                                                               gpu_resource="nvidia.com/gpu")
        department = apps.get_model("org", "Department").objects.create(slug="rq-dept", name="Dept")
        project = apps.get_model("org", "Project").objects.create(slug="rq-proj", name="Proj", department=department,
                                                                 namespace="proj-rq-proj")
        priority = apps.get_model("org", "PriorityClass").objects.create(name="rq-train", value=50, preemptible=True)
        workload_model = apps.get_model("workloads", "Workload")
        event_model = apps.get_model("workloads", "WorkloadEvent")
        ids = {}
        at = datetime(2026, 3, 2, 10, tzinfo=UTC)
        for name, transitions in (("requeued", [("running", "preempted", "InCohortReclamation"),
                                                ("preempted", "queued", "Requeued")]),
                                  ("fresh", [("submitting", "queued", "Created")]),
                                  ("readmitted", [("preempted", "queued", "Requeued"),
                                                  ("queued", "admitted", "Admitted")])):
            work = workload_model.objects.create(
                project=project, owner=user, kind="training", name=name, image="pytorch/pytorch:2.4.0",
                node_pool=pool, gpus=1, priority_class=priority, model_label="m", data_class="d",
                status=transitions[-1][1])
            for minute, (source, target, reason) in enumerate(transitions):
                event_model.objects.create(workload=work, at=at.replace(minute=minute), from_status=source,
                                           to_status=target, reason=reason)
            ids[name] = work.pk
        migrate(None)
        statuses = dict(Workload.objects.filter(pk__in=ids.values()).values_list("name", "status"))
        assert statuses == {"requeued": Status.REQUEUED, "fresh": Status.QUEUED, "readmitted": Status.ADMITTED}
        back = migrate(BEFORE)  # and back
        assert back.get_model("workloads", "Workload").objects.get(pk=ids["requeued"]).status == Status.QUEUED
    finally:
        migrate(None)
