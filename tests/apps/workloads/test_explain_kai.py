"""Why work waits on a KAI pool (apps/workloads/explain/kai.py), from a hand-written mirror of KAI's scheduling
conditions (the kubesim tests in tests/worker/test_watcher_kai.py check the same words against KAI's own)."""

from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from apps.accounts import access
from apps.cluster.models import ClusterQueueState
from apps.org import services as org_services
from apps.org.models import Department, PriorityClass, Project
from apps.workloads.explain import explain_probe, explain_workloads, forecast
from apps.workloads.models import Kind, Status, Workload
from tests.api_support import personal_token
from tests.apps.workloads.test_api_schema import conforming
from tests.factories import WorkloadFactory

pytestmark = pytest.mark.django_db

NO_SHARING = {"type": "UnschedulableOnNodePool", "status": "True", "reason": "Unschedulable", "reasons": [],
              "message": "0/4 nodes are available, 4 node(s) didn't have enough resources: GPU sharing."}


@pytest.fixture
def rtx(demo):
    admin = demo["admin"]
    pool = org_services.node_pool_create(actor=admin, slug="rtx", name="RTX", gpu_resource="nvidia.com/gpu",
                                         capacity=16, scheduler="kai", gpu_fractions=True)
    org_services.quota_set(actor=admin, node_pool=pool, department=Department.objects.get(slug="research"),
                           deserved=8, limit=None)
    org_services.quota_set(actor=admin, node_pool=pool, project=Project.objects.get(slug="vision"), deserved=4,
                           limit=6)
    return pool


def waiting(demo, pool, *, project="vision", owner="alice", conditions=(), **values):
    fields = {"gpus": 1, "preemptible": True, "status": Status.QUEUED, "status_reason": "Unschedulable",
              "cluster_queue": f"proj-{project}-rtx", "kueue_conditions": list(conditions)}
    fields.update(values)
    return WorkloadFactory(project=Project.objects.get(slug=project), owner=demo[owner], node_pool=pool,
                           priority_class=PriorityClass.objects.get(name="train" if fields["preemptible"] else "build"),
                           **fields)


def explained(*workloads, viewer=None):
    rows = list(Workload.objects.select_related("project__department", "node_pool").filter(
        pk__in=[w.pk for w in workloads]).order_by("pk"))
    return [explain_workloads(rows, viewer=viewer)[row.pk] for row in rows]


def test_a_fraction_asks_its_share_of_a_card(demo, rtx):
    (said,) = explained(waiting(demo, rtx, gpu_fraction=Decimal("0.5"), conditions=[NO_SHARING]))
    assert said.sentence.startswith("Waiting for 0.5 x RTX: it is within Vision's quota and limits, but no node of "
                                    "RTX has room for it now")
    assert said.headline == "No room on RTX: the nodes lack GPU sharing"
    assert said.numbers["requested"] == 0.5 and said.numbers["kai_queue"] == "proj-vision-rtx"


def test_the_api_gives_the_share_a_fraction_asks_as_its_schema_says(demo, rtx, api_schema):
    """The API's waiting numbers keep the share, and its OpenAPI schema allows it (it declared an integer)."""
    workload = waiting(demo, rtx, gpus=0, gpu_fraction=Decimal("0.5"), conditions=[NO_SHARING])
    data = conforming(api_schema, personal_token(demo["alice"]), "GET", "/api/v1/workloads/{id}/",
                      path_parameters={"id": workload.pk}).json()
    assert data["waiting"]["numbers"]["requested"] == 0.5


def test_before_kai_says_anything_without_quota_and_never(demo, rtx):
    pending, elsewhere, too_big = explained(
        waiting(demo, rtx, status_reason="Pending"),
        waiting(demo, rtx, project="forecasting", owner="carol"),
        waiting(demo, rtx, gpus=8))
    assert (pending.reason, pending.headline) == ("admitting", "Waiting for KAI Scheduler")
    assert pending.sentence.endswith("KAI Scheduler keeps no place in line, so none is shown.")
    assert elsewhere.reason == "no_quota" and "KAI Scheduler has no queue for it there" in elsewhere.sentence
    assert (too_big.reason, too_big.numbers["change"]) == ("never_fits", "project_limit")
    assert too_big.headline == "Can never start: Vision may use at most 6 there"


def test_the_departments_limit_when_kai_names_its_queue(demo, rtx):
    over = {**NO_SHARING, "reasons": [{"reason": "OverLimit", "message": "dept-research-rtx quota has reached ...",
                                       "details": {"queueDetails": {
                                           "name": "dept-research-rtx",
                                           "queueAllocatedResources": {"nvidia.com/gpu": "7500m"},
                                           "queueResourceLimits": {"nvidia.com/gpu": "8"},
                                           "podGroupRequestedResources": {"nvidia.com/gpu": "1"}}}}]}
    (said,) = explained(waiting(demo, rtx, status_reason="OverLimit", conditions=[over]))
    assert (said.reason, said.numbers["department_limit"], said.numbers["department_used"]) == (
        "department_limit", 8, 7.5)
    assert said.headline == "0.5 more RTX needed: Research would go over its limit (7.5 of 8 in use, asks 1)"


def test_kai_waits_cost_no_query_of_their_own(demo, rtx, django_assert_num_queries):
    rows = [waiting(demo, rtx, conditions=[NO_SHARING]) for _ in range(5)]
    access.grants_for(demo["alice"])
    workloads = list(Workload.objects.select_related("project__department", "node_pool").filter(
        pk__in=[w.pk for w in rows]))
    with django_assert_num_queries(3):  # as for Kueue work: quotas, the queue mirror, stopped LocalQueues
        explain_workloads(workloads, viewer=demo["alice"])


def held_by_vision(pool, preemptible, non_preemptible=0):
    """The mirror of Vision's KAI queue on the pool (apps.cluster.services.kai_queues_mirror)."""
    project = Project.objects.get(slug="vision")
    for guaranteed, used in ((False, preemptible), (True, non_preemptible)):
        ClusterQueueState.objects.create(name=f"proj-vision-rtx/{'non-' if guaranteed else ''}preemptible",
                                         project=project, node_pool=pool, guaranteed=guaranteed, used=used,
                                         observed_at=timezone.now())


def test_before_kai_speaks_the_mirror_of_its_queues_says_what_is_in_the_way(demo, rtx):
    held_by_vision(rtx, preemptible=4, non_preemptible=2)
    guaranteed = waiting(demo, rtx, status_reason="Pending", preemptible=False)
    limit, first = explained(waiting(demo, rtx, status_reason="Pending"), guaranteed)
    assert (limit.reason, limit.headline) == ("project_limit", "1 more RTX needed: Vision is at its limit (6 of 6)")
    assert first.reason == "project_limit"  # the limit comes first, as KAI checks it first
    ClusterQueueState.objects.filter(name="proj-vision-rtx/preemptible").update(used=0)
    ClusterQueueState.objects.filter(name="proj-vision-rtx/non-preemptible").update(used=4)
    (deserved,) = explained(guaranteed)
    assert (deserved.reason, deserved.numbers["queue_used"], deserved.numbers["deserved"]) == (
        "project_deserved", 4, 4)


def test_the_submit_forms_probe_on_a_kai_pool(demo, rtx):
    held_by_vision(rtx, preemptible=6)
    probe = Workload(project=Project.objects.select_related("department").get(slug="vision"), node_pool=rtx,
                     kind=Kind.TRAINING, gpus=1, pods=1, preemptible=True,
                     priority_class=PriorityClass.objects.get(name="train"))
    said = explain_probe(probe, viewer=demo["alice"])
    assert forecast(probe, said).sentence == "Would wait: Vision is at its limit (6 of 6 RTX); 1 more RTX needed."


def test_the_detail_page_names_kai_scheduler_for_work_on_a_kai_pool(demo, rtx, page_client):
    """The conditions are KAI's PodGroup's, KAI gives no positions and its own message is KAI's: nothing on the page
    names Kueue for work on a KAI pool."""
    work = waiting(demo, rtx, gpus=0, gpu_fraction=Decimal("0.5"), conditions=[NO_SHARING],
                   status_message=NO_SHARING["message"])
    page = page_client("alice").get(reverse("workloads:detail", args=[work.pk])).content.decode()
    assert 'aria-label="KAI Scheduler conditions"' in page and 'data-condition="UnschedulableOnNodePool"' in page
    assert "KAI Scheduler gives no queue positions." in page
    assert "<summary>KAI Scheduler's own message</summary>" in page
    assert "Kueue" not in page
