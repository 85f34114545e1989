"""workloads 0026: the tallies kept in whole units (0025, where a share of a card counted 0) are counted afresh in
hundredths of a unit, a share as its share, and the new triggers keep them so; backwards, 0025's whole units and
triggers come back. Each tally's count of changes only grows through both."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.conf import settings

from apps.workloads.models import Status, Workload, WorkloadTally
from apps.workloads.services import workload_tallies_fold

from ..usage.test_split_migration import migrate

BEFORE = [("workloads", "0025_workload_tallies")]

pytestmark = pytest.mark.django_db(transaction=True)


def test_tallies_count_shares_of_a_card_after_the_migration_and_whole_units_before():
    try:
        apps = migrate(BEFORE)
        user = apps.get_model(settings.AUTH_USER_MODEL).objects.create(username="tally-owner")
        pool = apps.get_model("org", "NodePool").objects.create(
            slug="tally-rtx", name="RTX", capacity=16, gpu_resource="nvidia.com/gpu", scheduler="kai",
            gpu_fractions=True)
        department = apps.get_model("org", "Department").objects.create(slug="tally-dept", name="Dept")
        project = apps.get_model("org", "Project").objects.create(
            slug="tally-proj", name="Proj", department=department, namespace="proj-tally-proj")
        workloads = apps.get_model("workloads", "Workload").objects
        for name, kind, gpus, fraction in (("half", "notebook", 0, Decimal("0.5")),
                                           ("quarter", "notebook", 0, Decimal("0.25")),
                                           ("whole", "training", 2, None)):
            workloads.create(project=project, owner=user, kind=kind, name=name, image="busybox", node_pool=pool,
                             gpus=gpus, gpu_fraction=fraction, status="queued")
        tallies = apps.get_model("workloads", "WorkloadTally").objects
        key = {"project_id": project.pk, "node_pool_id": pool.pk, "status": "queued"}
        with_changes = apps.get_model("workloads", "WorkloadTallyChange").objects.filter(
            project_id=project.pk).count()
        assert with_changes == 3  # appended by 0025's triggers, not folded yet: the migration takes them in
        assert not tallies.filter(**key).exists()

        migrate(None)
        tally = WorkloadTally.objects.get(**key)
        assert (tally.workloads, tally.unit_hundredths, tally.changes) == (3, 50 + 25 + 200, 3 + 1)
        Workload.objects.filter(name="quarter", project_id=project.pk).update(status=Status.ADMITTED)
        workload_tallies_fold()
        tally.refresh_from_db()
        assert (tally.workloads, tally.unit_hundredths, tally.changes) == (2, 250, 5)

        old = migrate(BEFORE)
        before = old.get_model("workloads", "WorkloadTally").objects.get(**key)
        assert (before.workloads, before.units, before.changes) == (2, 2, 6)  # 0025's whole units: the half is 0
    finally:
        migrate(None)  # the other tests need the latest schema
    assert WorkloadTally.objects.get(**key).unit_hundredths == 250
