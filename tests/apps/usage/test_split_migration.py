"""usage 0006 backfills the split of a ledger written before it: one deserved period per project quota (today's value,
from the beginning) and the slices of every interval, so reports of old months show within deserved and over quota."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.conf import settings
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from apps.accounts.models import Role
from apps.usage import reports, services, split
from apps.usage.models import DeservedPeriod, UsageSlice
from tests.factories import RoleBindingFactory

BEFORE = [("usage", "0004_move_mirror_to_cluster")]

pytestmark = pytest.mark.django_db(transaction=True)


def at(hour: int) -> datetime:
    return datetime(2026, 3, 2, hour, tzinfo=UTC)


def migrate(targets):
    """Migrate to `targets` (None: the latest), the apps they do not name staying at their latest, and return the
    historical apps of that state (the other apps' newer columns, such as versions, must be in it)."""
    executor = MigrationExecutor(connection)
    named = {app for app, _ in targets or []}
    targets = [*(targets or []), *(leaf for leaf in executor.loader.graph.leaf_nodes() if leaf[0] not in named)]
    executor.migrate(targets)
    executor.loader.build_graph()
    return executor.loader.project_state([target for target in targets if target[1]]).apps


def seed(apps) -> dict[str, int]:
    """A project deserving 4 units, with a guaranteed 3 (10-12 h) and an elastic 3 (10-14 h, still open after 13)."""
    user = apps.get_model(settings.AUTH_USER_MODEL).objects.create(username="ledger-owner")
    pool = apps.get_model("org", "NodePool").objects.create(slug="mig-h100", name="H100", capacity=8,
                                                           gpu_resource="nvidia.com/gpu")
    department = apps.get_model("org", "Department").objects.create(slug="mig-dept", name="Dept")
    project = apps.get_model("org", "Project").objects.create(slug="mig-proj", name="Proj", department=department,
                                                             namespace="proj-mig-proj")
    apps.get_model("org", "Quota").objects.create(node_pool=pool, project=project, deserved=4)
    priority = apps.get_model("org", "PriorityClass").objects.create(name="mig-train", value=50, preemptible=True)
    interval = apps.get_model("usage", "UsageInterval")
    ids = {}
    for name, preemptible, end in (("guaranteed", False, at(12)), ("elastic", True, None)):
        work = apps.get_model("workloads", "Workload").objects.create(
            project=project, owner=user, kind="training", name=name, image="pytorch/pytorch:2.4.0", node_pool=pool,
            gpus=3, priority_class=priority, preemptible=preemptible, model_label="m", data_class="d",
            status="running")
        ids[name] = interval.objects.create(
            workload=work, project=project, department=department, user=user, node_pool=pool, units=3,
            card_fraction_numerator=1, card_fraction_denominator=1, queue="elastic" if preemptible else "guaranteed",
            model_label="m", data_class="d", started_at=at(10), ended_at=end).pk
    return ids


def test_the_backfill_splits_the_existing_ledger():
    try:
        ids = seed(migrate(BEFORE))
        migrate(None)
        assert list(DeservedPeriod.objects.filter(project__slug="mig-proj").values_list(
            "deserved", "started_at", "ended_at")) == [(4, split.BEGINNING, None)]
        backfilled = UsageSlice.objects.filter(project__slug="mig-proj").order_by("interval_id", "started_at")
        assert list(backfilled.values_list("interval_id", "started_at", "ended_at", "share_numerator",
                                           "share_denominator")) == [
            (ids["guaranteed"], at(10), at(12), 1, 1),
            (ids["elastic"], at(10), at(12), 1, 3), (ids["elastic"], at(12), None, 1, 1)]
        admin = RoleBindingFactory(role=Role.ADMIN).user
        window = reports.Window(at(0), at(23))
        (row,) = [row for row in reports.usage_report(user=admin, group=reports.Group.PROJECT, window=window,
                                                      now=at(14)).rows if row.slug == "mig-proj"]
        # 10-12: 6 held against 4 deserved (3 guaranteed + 1 of the elastic 3); 12-14: the elastic 3 within.
        assert (row.gpu_hours, row.within_quota, row.borrowed) == (pytest.approx(18), pytest.approx(14),
                                                                   pytest.approx(4))
        # The ledger writers carry on from the backfilled rows.
        services.usage_interval_close(workload_id=UsageSlice.objects.get(interval_id=ids["elastic"],
                                                                         ended_at__isnull=True).interval.workload_id,
                                      at=at(13), reason="Succeeded")
        assert not UsageSlice.objects.filter(project__slug="mig-proj", ended_at__isnull=True).exists()
    finally:
        migrate(None)
