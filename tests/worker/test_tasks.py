"""Tasks run by a real Celery worker on the configured broker (Redis in CI) against a served kubesim."""

from decimal import Decimal

import pytest

from apps.org import services
from apps.org.demo import seed_demo
from apps.org.models import KueueSyncRun, KueueSyncState, Quota
from tests.worker.conftest import wait_for
from worker.gateway import ClusterError


def cohort_weight(cluster, name):
    try:
        return str(cluster.get("Cohort", name)["spec"]["fairSharing"]["weight"])
    except ClusterError:
        return None


@pytest.mark.slow
def test_org_changes_reach_the_cluster_through_the_worker(cluster, celery_worker):
    seed_demo()  # every service call enqueues a reconcile after commit
    # When the session seeded the demo organisation already, its reconciles were queued before this worker's queue
    # was purged: ask again, as the beat does every minute.
    services.kueue_sync_request()
    wait_for(lambda: cohort_weight(cluster, "proj-vision-h100") == "2", timeout=60)
    wait_for(lambda: KueueSyncRun.objects.filter(ok=True).exists())
    lead = Quota.objects.get(project__slug="vision", node_pool__slug="h100")
    from django.contrib.auth import get_user_model

    services.quota_update(actor=get_user_model().objects.get(username="lead"), quota=lead,
                          over_quota_weight=Decimal("4"))
    wait_for(lambda: cohort_weight(cluster, "proj-vision-h100") == "4", timeout=10)
    wait_for(lambda: KueueSyncState.objects.get(pk=1).running_since is None)
    last = KueueSyncRun.objects.filter(ok=True).exclude(changes=[]).first()
    assert last.changes == ["updated Cohort proj-vision-h100"]


def test_claim_keeps_a_second_reconcile_out(db):
    first = services.kueue_sync_claim()
    assert first is not None
    assert services.kueue_sync_claim() is None
    services.kueue_sync_request()
    assert services.kueue_sync_finish(run=first, changes=["created Cohort x"]) is True
    second = services.kueue_sync_claim()
    assert second is not None
    assert services.kueue_sync_finish(run=second, changes=[]) is False


def test_api_outage_is_recorded_and_retried(demo, cluster, kubesim):
    from celery.exceptions import Retry

    from worker import tasks

    kubesim.faults(error_rate=1.0, verbs=["create"], resources=["cohorts"])
    try:
        with pytest.raises((Retry, tasks.TransientClusterError)):
            tasks.kueue_sync.apply(throw=True)
    finally:
        kubesim.clear_faults()
    failed = KueueSyncRun.objects.first()
    assert failed.ok is False and failed.error.startswith("500 ")
    assert KueueSyncState.objects.get(pk=1).running_since is None
    changes = tasks.kueue_sync.apply(throw=True).get()
    assert "created Cohort portal-h100" in changes
    assert KueueSyncRun.objects.first().ok is True
