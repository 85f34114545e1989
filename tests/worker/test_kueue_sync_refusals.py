"""One object the API server refuses never stalls the reconcile: every other object still converges, and the run
names the refused object and why (on the Cluster sync page and on the command's output)."""

from decimal import Decimal

from apps.org import services
from apps.org.models import KueueSyncRun, NodePool, Quota
from worker import tasks
from worker.kueue_sync import desired_from_database, reconcile

NINE_LABELS = {f"portal.gpu/label-{i}": "x" for i in range(9)}


def weight(cluster, cohort: str) -> str:
    return str(cluster.get("Cohort", cohort)["spec"]["fairSharing"]["weight"])


def test_a_refused_flavor_leaves_every_other_object_converging(demo, synced):
    """A pool saved before the label bound (a row the services would refuse now): Kueue refuses its flavor with 422,
    and a quota change elsewhere still reaches the cluster."""
    NodePool.objects.filter(slug="h100").update(node_labels=NINE_LABELS)
    quota = Quota.objects.get(project__slug="vision", node_pool__slug="h100")
    services.quota_update(actor=demo["lead"], quota=quota, over_quota_weight=Decimal("3"))
    result = reconcile(synced, desired_from_database())
    assert result.changes == ["updated Cohort proj-vision-h100"]
    assert weight(synced, "proj-vision-h100") == "3"
    assert len(result.project_errors) == 1
    problem = result.project_errors[0]
    assert problem.startswith("ResourceFlavor h100: the API server refused to update it: 422 Invalid:")
    assert "spec.nodeLabels" in problem and problem.endswith("The other objects were reconciled; this one is tried "
                                                             "again on the next pass.")
    assert synced.get("ResourceFlavor", "h100")["spec"]["nodeLabels"] == {"portal.gpu/pool": "h100"}


def test_the_task_records_a_refused_object_on_the_run_and_keeps_reconciling(demo, synced):
    NodePool.objects.filter(slug="l40s-shared").update(node_labels=NINE_LABELS)
    changes = tasks.kueue_sync.apply(throw=True).get()
    assert changes == []
    run = KueueSyncRun.objects.first()
    assert run.ok is True and run.error == ""
    assert [line.split(":")[0] for line in run.project_errors] == ["ResourceFlavor l40s-shared"]
    quota = Quota.objects.get(project__slug="vision", node_pool__slug="h100")
    services.quota_update(actor=demo["lead"], quota=quota, over_quota_weight=Decimal("2.5"))
    assert tasks.kueue_sync.apply(throw=True).get() == ["updated Cohort proj-vision-h100"]
    assert weight(synced, "proj-vision-h100") == "2.5"
