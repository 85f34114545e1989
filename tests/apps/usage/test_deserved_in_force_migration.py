"""usage 0010 dates each existing deserved period from when its quota really came into force: a project's first
period on a pool from the quota's creation in the audit log (else the project's or the pool's creation), every later
period from its own start; the split's periods keep starting where they did."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from apps.usage import split
from apps.usage.models import DeservedPeriod

from .test_split_migration import migrate

BEFORE = [("usage", "0009_pending_recompute")]


def at(day: int, hour: int = 0) -> datetime:
    return datetime(2026, 3, day, hour, tzinfo=UTC)


@pytest.mark.django_db(transaction=True)
def test_the_backfill_dates_periods_from_their_quotas_creation():
    try:
        apps = migrate(BEFORE)
        pool = apps.get_model("org", "NodePool").objects.create(slug="mig-h100", name="H100", capacity=8,
                                                               gpu_resource="nvidia.com/gpu")
        department = apps.get_model("org", "Department").objects.create(slug="mig-dept", name="Dept")
        audited, unaudited = (apps.get_model("org", "Project").objects.create(
            slug=slug, name=slug, department=department, namespace=f"proj-{slug}") for slug in ("audited", "plain"))
        apps.get_model("org", "NodePool").objects.filter(pk=pool.pk).update(created_at=at(1))
        apps.get_model("org", "Project").objects.filter(pk=unaudited.pk).update(created_at=at(3))
        periods = apps.get_model("usage", "DeservedPeriod").objects
        for project in (audited, unaudited):
            periods.create(project=project, department=department, node_pool=pool, deserved=4,
                           started_at=split.BEGINNING, ended_at=at(20))
            periods.create(project=project, department=department, node_pool=pool, deserved=2, started_at=at(20))
        events = apps.get_model("core", "AuditEvent").objects
        for moment, project_id in ((at(9), audited.pk), (at(12), audited.pk), (at(5), unaudited.pk + 1000)):
            event = events.create(action="quota.create", object_type="quota", object_id="1", object_repr="q",
                                  project_id=project_id if project_id == audited.pk else None,
                                  after={"project_id": project_id, "node_pool_id": pool.pk, "deserved": 4})
            events.filter(pk=event.pk).update(at=moment)
        migrate(None)
        rows = {(period.project.slug, period.started_at): period for period in DeservedPeriod.objects.filter(
            project__slug__in=["audited", "plain"]).select_related("project", "node_pool")}
        # The first quota.create of the project on the pool (a later one is a re-creation).
        assert rows[("audited", split.BEGINNING)].in_force_from == at(9)
        # No audit row: the later of the project's and the pool's creation.
        assert rows[("plain", split.BEGINNING)].in_force_from == at(3)
        for slug in ("audited", "plain"):
            assert rows[(slug, at(20))].in_force_from == at(20)
    finally:
        migrate(None)
