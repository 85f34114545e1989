"""The quota figures of a KAI pool against kubesim's KAI Scheduler and the real watcher: a share of a card counts as
that share wherever quota is weighed (the guard on lowering a deserved quota, the within/over-deserved split of the
GPU-hours), and a KAI queue's two rows count the portal's waiting work as pending, which KAI's Queue status does not."""

from datetime import UTC, datetime

import pytest
from django.core.exceptions import ValidationError

from apps.cluster.models import ClusterQueueState
from apps.cluster.pages.queues import cluster_queues
from apps.org import services as org_services
from apps.org.models import Project
from apps.usage import reports
from apps.usage.selectors import quota_dashboard
from apps.workloads.models import Status
from tests.worker.conftest import wait_for
from tests.worker.test_watcher_kai import kubesim, row, rtx, status_of, submit, watcher  # noqa: F401 - fixtures

pytestmark = pytest.mark.slow


def within_and_held(admin, workloads) -> tuple[float, float]:
    window = reports.Window(datetime(2000, 1, 1, tzinfo=UTC), datetime(2100, 1, 1, tzinfo=UTC))
    mine = [item for item in reports.holders(user=admin, window=window, filters=reports.HolderFilters())
            if item.workload_id in {w.pk for w in workloads}]
    return (sum(reports.held_split(item.held_hours, item.within_hours)[0] for item in mine),
            sum(item.held_hours for item in mine))


def test_shares_of_cards_in_the_quota_figures_and_the_waiting_work_as_pending(
        kubesim, cluster, org, rtx, watcher):  # noqa: F811 - the fixtures
    # NLP may hold 2 (its limit): with 2 running, one more waits on its queue (OverLimit).
    full = submit(kubesim, cluster, org["bob"], project="nlp", gpus=2, name="full")
    over = submit(kubesim, cluster, org["bob"], project="nlp", gpus=1, name="over")
    # Vision (deserved 2) runs four halves on two cards: one non-preemptible, three preemptible.
    guaranteed = submit(kubesim, cluster, org["alice"], project="vision", fraction="0.5", preemptible=False,
                        seconds=3600, name="np")
    halves = [submit(kubesim, cluster, org["alice"], project="vision", fraction="0.5", seconds=3600, name=f"p-{i}")
              for i in range(3)]
    wait_for(lambda: all(status_of(w) == Status.RUNNING for w in (full, guaranteed, *halves)),
             describe=lambda: [(status_of(w), row(w).status_message) for w in (full, guaranteed, *halves)])
    wait_for(lambda: row(over).status_reason == "OverLimit")
    wait_for(lambda: ClusterQueueState.objects.filter(name__startswith="proj-nlp-rtx/").count() == 2)

    # KAI's Queue counts GPUs only; the rows count NLP's waiting work, on the dashboard and the queue page alike.
    (pool,) = [board for board in quota_dashboard(user=org["admin"]) if board.pool.slug == "rtx"]
    (nlp,) = [p for d in pool.departments for p in d.children if p.slug == "nlp"]
    assert {q["name"]: q["pending_workloads"] for q in nlp.queues} == {"proj-nlp-rtx/non-preemptible": 0,
                                                                       "proj-nlp-rtx/preemptible": 1}
    shown = {q.name: q.pending_workloads for q in cluster_queues(user=org["admin"])
             if q.name.startswith("proj-nlp-rtx/")}
    assert shown == {"proj-nlp-rtx/non-preemptible": 0, "proj-nlp-rtx/preemptible": 1}

    # The running non-preemptible half holds a whole deserved unit: Vision's deserved quota cannot go to 0.
    vision = Project.objects.get(slug="vision")
    with pytest.raises(ValidationError) as caught:
        org_services.quota_set(actor=org["admin"], node_pool=rtx, project=vision, deserved=0, limit=4)
    assert "holds 1 rtx units" in caught.value.message_dict["deserved"][0]

    kubesim.advance(3600)
    wait_for(lambda: all(status_of(w) == Status.SUCCEEDED for w in (guaranteed, *halves)))
    # Two cards' worth in halves for an hour, all within Vision's 2 deserved units.
    within, held = within_and_held(org["admin"], [guaranteed, *halves])
    assert held == pytest.approx(2.0) and within == pytest.approx(2.0)
