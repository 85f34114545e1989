"""KAI Scheduler's leaf Queues in the queue mirror (apps.cluster.services.kai_queues_mirror): a project's two rows,
never confused with Kueue's ClusterQueues when either kind is relisted or forgotten."""

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from apps.cluster import services
from apps.cluster.models import ClusterQueueState

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 3, 1, tzinfo=UTC)


def queue(name, *, project="vision", allocated="1500m", non_preemptible="500m"):
    labels = {"portal.gpu/managed-by": "gpu-portal", "portal.gpu/pool": "h100", "portal.gpu/department": "research"}
    if project:
        labels["portal.gpu/project"] = project
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name, "labels": labels},
            "spec": {"parentQueue": "dept-research-h100", "resources": {"gpu": {"quota": 2, "limit": 4}}},
            "status": {"allocated": {"nvidia.com/gpu": allocated},
                       "allocatedNonPreemptible": {"nvidia.com/gpu": non_preemptible}}}


def used():
    return dict(ClusterQueueState.objects.values_list("name", "used"))


def test_a_leaf_queue_is_two_rows_of_what_its_work_holds(demo):
    services.kai_queues_mirror(objs=[queue("proj-vision-h100"), queue("dept-research-h100", project="")], at=NOW)
    rows = {row.name: row for row in ClusterQueueState.objects.filter(name__startswith="proj-vision-h100/")}
    guaranteed, elastic = rows["proj-vision-h100/non-preemptible"], rows["proj-vision-h100/preemptible"]
    assert (guaranteed.used, guaranteed.nominal, guaranteed.guaranteed) == (Decimal("0.5"), 2, True)
    assert (elastic.used, elastic.nominal, elastic.guaranteed) == (Decimal("1"), 0, False)
    assert guaranteed.project.slug == "vision" and guaranteed.node_pool.slug == "h100"
    assert not ClusterQueueState.objects.filter(name__startswith="dept-").exists()  # parents: their projects' sum


def test_relisting_or_forgetting_one_kind_leaves_the_other(demo):
    ClusterQueueState.objects.create(name="proj-vision-h100-elastic", observed_at=NOW)
    services.kai_queues_mirror(objs=[queue("proj-vision-h100"), queue("proj-nlp-h100", project="nlp")], at=NOW)
    services.mirror_keep_only(kind="ClusterQueue", keys={("", "proj-vision-h100-elastic")})
    services.mirror_keep_only(kind="Queue", keys={("", "proj-vision-h100"), ("", "proj-nlp-h100")})
    assert len(used()) == 5
    services.mirror_keep_only(kind="Queue", keys={("", "proj-vision-h100")})
    assert sorted(used()) == ["proj-vision-h100-elastic", "proj-vision-h100/non-preemptible",
                              "proj-vision-h100/preemptible"]
    services.mirror_forget(kind="Queue", name="proj-vision-h100")
    assert sorted(used()) == ["proj-vision-h100-elastic"]
    services.mirror_keep_only(kind="ClusterQueue", keys=set())
    assert used() == {}
