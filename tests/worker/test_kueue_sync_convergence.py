"""The reconcile converges object by object: one object the API server refuses never stalls the others (the run
names it and why), and a reconcile request is done only when a read back shows the cluster as intended (a write
that lost a race to another writer is tried again, or the request stays open for the sweep)."""

from decimal import Decimal

from kubernetes import client as k8s

from apps.core.models import Intent
from apps.org import services
from apps.org.models import KueueSyncRun, NodePool, Quota
from worker import tasks
from worker.gateway import Gateway, reset_gateway
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


class AnotherWriterFirst(Gateway):
    """The worker's gateway, except that just before each of its first `times` PUTs of the Cohort `name` another
    client (the official one, as another tool would) annotates that Cohort: the PUT then carries a stale
    resourceVersion and the API server answers 409 Conflict, as in a real race."""

    def __init__(self, kubesim, name: str, times: int) -> None:
        super().__init__(kubesim.api_client())
        self.other = k8s.CustomObjectsApi(kubesim.api_client())
        self.name, self.times = name, times

    def replace(self, obj: dict) -> dict:
        if obj["kind"] == "Cohort" and obj["metadata"]["name"] == self.name and self.times:
            self.times -= 1
            touch = {"metadata": {"annotations": {"other-tool/touched": str(self.times)}}}
            self.other.patch_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "cohorts", self.name, touch)
        return super().replace(obj)


def grow_vision_on_h100(demo, cluster) -> None:
    """A growing change on h100: Research's Cohort, then Vision's Cohort (its weight), then Vision's guaranteed
    ClusterQueue (its quota), in that order (room made first by lowering NLP's quota, reconciled)."""
    nlp = Quota.objects.get(project__slug="nlp", node_pool__slug="h100")
    services.quota_update(actor=demo["admin"], quota=nlp, deserved=2)
    reconcile(cluster, desired_from_database())
    vision = Quota.objects.get(project__slug="vision", node_pool__slug="h100")
    services.quota_update(actor=demo["admin"], quota=vision, deserved=6, limit=12, over_quota_weight=Decimal("3"))


def vision_on_h100(cluster) -> tuple[str, int]:
    """Vision's Cohort weight and its guaranteed queue's quota on h100, as the cluster holds them."""
    queue = cluster.get("ClusterQueue", "proj-vision-h100-guaranteed")
    return weight(cluster, "proj-vision-h100"), queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0][
        "nominalQuota"]


def open_sync_requests() -> list[Intent]:
    return list(Intent.objects.filter(kind=services.KUEUE_SYNC_INTENT, done_at__isnull=True))


def test_a_write_that_lost_a_race_is_read_again_and_applied_before_the_request_is_done(demo, synced, kubesim):
    grow_vision_on_h100(demo, synced)
    reset_gateway(AnotherWriterFirst(kubesim, "proj-vision-h100", times=1))
    changes = tasks.kueue_sync.apply(throw=True).get()
    assert "updated Cohort proj-vision-h100" in changes
    assert vision_on_h100(synced) == ("3", 6)
    assert open_sync_requests() == []
    assert KueueSyncRun.objects.first().project_errors == []


def test_a_request_stays_open_until_a_read_back_shows_the_cluster_as_intended(demo, synced, kubesim):
    """Another writer wins every try of this pass: the rest is written, the Cohort is named, and the request stays
    open for the sweep; the next pass converges and closes it."""
    grow_vision_on_h100(demo, synced)
    reset_gateway(AnotherWriterFirst(kubesim, "proj-vision-h100", times=10))
    tasks.kueue_sync.apply(throw=True).get()
    assert vision_on_h100(synced) == ("2", 6)
    still_open = open_sync_requests()
    assert still_open and all(intent.claimed_until is None and "Cohort proj-vision-h100: not as intended" in
                              intent.last_error for intent in still_open)
    run = KueueSyncRun.objects.first()
    assert run.ok is True and [line.split(":")[0] for line in run.project_errors] == ["Cohort proj-vision-h100"]
    reset_gateway(synced)
    assert tasks.kueue_sync.apply(throw=True).get() == ["updated Cohort proj-vision-h100"]
    assert vision_on_h100(synced) == ("3", 6)
    assert open_sync_requests() == []
