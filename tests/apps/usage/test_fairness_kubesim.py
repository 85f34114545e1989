"""Fairness over time with Kueue's Admission Fair Sharing, against kubesim's Kueue: a LocalQueue's decayed usage, as
Kueue's LocalQueue controller samples it into status.fairSharing.admissionFairSharingStatus, is mirrored by the
watcher's LocalQueue applier and shown beside the project's weekly share."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.utils import timezone

from apps.cluster.models import ClusterQueueState, LocalQueueState
from apps.cluster.services import local_queues_mirror
from apps.core.kueue_names import PROJECT_LABEL
from apps.core.quantities import quantity
from apps.org.models import NodePool, Project
from apps.usage.reports import fairness
from tests.kubesim.kueue.conftest import _cluster

AFS = {"admissionFairSharing": {"usageHalfLifeTime": "10m", "usageSamplingInterval": "1m"}}


@pytest.fixture
def kc_afs():
    yield from _cluster(kueue_config=AFS)


def test_kueues_decayed_usage_reaches_the_fairness_section(kc_afs, users):
    kc = kc_afs
    kc.flavor()
    kc.cluster_queue("proj-vision-h100-elastic", 4, admissionScope={"admissionMode": "UsageBasedAdmissionFairSharing"})
    namespace = kc.namespace()
    kc.local_queue("h100-elastic", "proj-vision-h100-elastic", namespace)
    kc.job(namespace, "long", "h100-elastic", 4, seconds=600)
    kc.settle(900)  # ran 10 minutes at 4 cards, then decayed for 5
    queue = kc.get("localqueues", "h100-elastic", namespace)
    consumed = queue["status"]["fairSharing"]["admissionFairSharingStatus"]["consumedResources"]["nvidia.com/gpu"]
    assert Decimal("0.5") < quantity(consumed) < 2

    vision, pool = Project.objects.get(slug="vision"), NodePool.objects.get(slug="h100")
    ClusterQueueState.objects.create(name="proj-vision-h100-elastic", project=vision, node_pool=pool,
                                     observed_at=timezone.now())
    queue["metadata"].setdefault("labels", {})[PROJECT_LABEL] = "vision"  # the portal labels its own LocalQueues
    local_queues_mirror(objs=[queue], at=timezone.now())
    assert LocalQueueState.objects.get(namespace=namespace).afs_updated_at is not None
    result = fairness(user=users["lead"])
    row = next(row for row in result.rows if row.project_slug == "vision" and row.pool.slug == "h100")
    assert result.admission_fair_sharing and row.afs_usage == quantity(consumed)
    assert next(row for row in result.rows if row.project_slug == "nlp").afs_usage is None
