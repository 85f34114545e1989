"""The move of the audit log (org -> core) and of the Kueue mirror (usage -> cluster) keeps every row, both ways.

org 0004 and usage 0004 rename the tables, core 0001 and cluster 0001 take the models over (state only) and move the
index name and content types. Rows written through the historical models before the move must read back, value for
value, through the models after it, and again after migrating back.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.conf import settings
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

# Before the move: org and usage at their last migration before it, core and cluster not yet there.
BEFORE = [("org", "0003_nodepool_price_per_card_hour"), ("usage", "0003_usageinterval_ended_at"),
          ("core", None), ("cluster", None)]
AUDIT_INDEX = {"before": ("org_auditevent", "org_auditev_object__5c0c8c_idx"),
               "after": ("core_auditevent", "core_audite_object__bbabc4_idx")}
# (model, app before, app after): each model's rows are compared across the move.
MOVED = [("AuditEvent", "org", "core"), ("ClusterQueueState", "usage", "cluster"),
         ("LocalQueueState", "usage", "cluster"), ("CohortState", "usage", "cluster")]
AT = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)

pytestmark = pytest.mark.django_db(transaction=True)


def migrate(targets):
    """Migrate to `targets` (None: the latest) and return the historical apps of that state."""
    executor = MigrationExecutor(connection)
    targets = targets or executor.loader.graph.leaf_nodes()
    executor.migrate(targets)
    executor.loader.build_graph()  # what is applied now
    return executor.loader.project_state([target for target in targets if target[1]]).apps


def rows(apps, app_of) -> dict[str, list[dict]]:
    return {model: list(apps.get_model(app_of[model], model).objects.order_by("pk").values())
            for model, *_ in MOVED}


def index_names(table: str) -> set[str]:
    with connection.cursor() as cursor:
        return set(connection.introspection.get_constraints(cursor, table))


def content_type(model: str):
    from django.contrib.contenttypes.models import ContentType

    return ContentType.objects.filter(model=model.lower()).values_list("pk", "app_label").get()


def seed_before_the_move(apps) -> None:
    """One row of each moved model, through the historical models of the state before the move."""
    user = apps.get_model(settings.AUTH_USER_MODEL).objects.create(username="migration-actor")
    pool = apps.get_model("org", "NodePool").objects.create(slug="mig-h100", name="H100 (migration)",
                                                           gpu_resource="nvidia.com/gpu", capacity=8)
    department = apps.get_model("org", "Department").objects.create(slug="mig-dept", name="Migration dept")
    project = apps.get_model("org", "Project").objects.create(slug="mig-proj", name="Migration project",
                                                             department=department, namespace="proj-mig-proj")
    apps.get_model("org", "AuditEvent").objects.create(
        actor=user, action="quota.update", object_type="quota", object_id="42", object_repr="mig-proj/mig-h100",
        department=department, project=project, before={"deserved": 2}, after={"deserved": 4, "limit": None})
    apps.get_model("usage", "ClusterQueueState").objects.create(
        name="proj-mig-proj-mig-h100-guaranteed", project=project, node_pool=pool, guaranteed=True,
        cohort="proj-mig-proj-mig-h100", nominal=Decimal("4.000"), pending_workloads=3, reserving_workloads=2,
        admitted_workloads=1, reserved=Decimal("2.500"), reserved_borrowed=Decimal("0.500"), used=Decimal("2"),
        used_borrowed=Decimal("1.250"), weighted_share=350, active=False, active_reason="Stopped",
        active_message="held by an admin", observed_at=AT)
    apps.get_model("usage", "LocalQueueState").objects.create(
        namespace="proj-mig-proj", name="guaranteed-mig-h100", project=project,
        cluster_queue="proj-mig-proj-mig-h100-guaranteed", pending_workloads=3, reserving_workloads=2,
        admitted_workloads=1, active=False, active_reason="LocalQueueStopped", active_message="stopped",
        observed_at=AT)
    apps.get_model("usage", "CohortState").objects.create(
        name="proj-mig-proj-mig-h100", node_pool=pool, department=department, project=project,
        parent="dept-mig-dept-mig-h100", weighted_share=120, observed_at=AT)


def test_moved_rows_survive_forwards_and_backwards():
    before_apps = {model: old for model, old, _ in MOVED}
    after_apps = {model: new for model, _, new in MOVED}
    audit_type = content_type("AuditEvent")
    try:
        old = migrate(BEFORE)
        assert AUDIT_INDEX["before"][1] in index_names(AUDIT_INDEX["before"][0])
        assert content_type("AuditEvent") == (audit_type[0], "org")
        seed_before_the_move(old)
        written = rows(old, before_apps)
        assert all(written[model] for model, *_ in MOVED)
        assert written["AuditEvent"][-1]["after"] == {"deserved": 4, "limit": None}
        assert written["ClusterQueueState"][-1]["used_borrowed"] == Decimal("1.250")

        new = migrate(None)
        # Columns added after the move (e.g. a LocalQueue's Admission Fair Sharing usage) are not compared.
        moved = rows(new, after_apps)
        assert {model: [{name: row[name] for name in written[model][0]} for row in moved[model]]
                for model in moved} == written
        assert AUDIT_INDEX["after"][1] in index_names(AUDIT_INDEX["after"][0])
        assert AUDIT_INDEX["before"][1] not in index_names(AUDIT_INDEX["after"][0])
        assert content_type("AuditEvent") == (audit_type[0], "core")
        assert {content_type(model)[1] for model, *_ in MOVED[1:]} == {"cluster"}
        # The app's own models read the same rows.
        from apps.cluster.models import ClusterQueueState
        from apps.core.models import AuditEvent

        event = AuditEvent.objects.get(object_repr="mig-proj/mig-h100")
        assert (event.actor.username, event.project.slug, event.department.slug) == (
            "migration-actor", "mig-proj", "mig-dept")
        queue = ClusterQueueState.objects.get(name="proj-mig-proj-mig-h100-guaranteed")
        assert (queue.node_pool.slug, queue.used, queue.active_reason) == ("mig-h100", Decimal(2), "Stopped")

        again = migrate(BEFORE)
        assert rows(again, before_apps) == written
        assert AUDIT_INDEX["before"][1] in index_names(AUDIT_INDEX["before"][0])
        assert content_type("AuditEvent") == (audit_type[0], "org")
        assert {content_type(model)[1] for model, *_ in MOVED[1:]} == {"usage"}
    finally:
        migrate(None)  # the other tests need the latest schema
    assert content_type("AuditEvent") == (audit_type[0], "core")
