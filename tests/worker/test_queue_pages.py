"""The queue and node pages against kubesim and the real watcher: cluster queues, local queues,
cohorts and resource flavors show Kueue's own figures (usage, borrowing, lending, pending and admitted counts),
scoped by role; each pool's Nodes page shows the nodes' cards, cut and state, and follows a cordon and a taint."""

from __future__ import annotations

import html
import re
from decimal import Decimal

import pytest
from django.urls import reverse
from kubernetes import client as k8s

from apps.cluster.models import ClusterQueueState, CohortState, NodeState
from apps.workloads.models import Status
from tests.worker.conftest import signed_in, wait_for
from tests.worker.test_watcher import positions, status_of, submit

pytestmark = pytest.mark.slow


def _row(page: str, attribute: str, value: str) -> str:
    start = page.index(f'{attribute}="{value}"')
    return page[start : page.index("</tr>", start)]


def _fact(row: str, name: str) -> str:
    match = re.search(rf'data-fact="{name}">(.*?)</td>', row, re.S)
    assert match, f"no {name} in {row}"
    return html.unescape(re.sub(r"<[^>]+>", "", match.group(1))).strip()


def _usage(status: dict, key: str) -> Decimal:
    return sum(
        (
            Decimal(str(resource.get(key, 0)))
            for flavor in status.get("flavorsUsage") or []
            for resource in flavor["resources"]
        ),
        Decimal(0),
    )


def test_queue_pages_show_kueues_figures_scoped_by_role(kubesim, cluster, org, watcher):
    running = [submit(kubesim, org["alice"], name=f"r-{i}") for i in range(2)]  # 8 of vision's 4 deserved: borrows
    waiting = submit(kubesim, org["alice"], name="waits", gpus=4)
    guaranteed = submit(kubesim, org["bob"], project="nlp", preemptible=False, gpus=2, name="g")
    wait_for(lambda: all(status_of(w) == Status.RUNNING for w in [*running, guaranteed]))
    wait_for(lambda: positions([waiting]) == [0])
    elastic, nlp_guaranteed = "proj-vision-h100-elastic", "proj-nlp-h100-guaranteed"

    def mirrored() -> bool:
        want = {
            name: _usage(cluster.get("ClusterQueue", name).get("status") or {}, "total")
            for name in (elastic, nlp_guaranteed)
        }
        have = dict(ClusterQueueState.objects.filter(name__in=want).values_list("name", "used"))
        pending = ClusterQueueState.objects.filter(name=elastic, pending_workloads=1).exists()
        return want == have and pending

    wait_for(mirrored)
    status = cluster.get("ClusterQueue", elastic)["status"]
    lead = signed_in(org["lead"])
    page = lead.get(reverse("usage:queues")).content.decode()
    row = _row(page, "data-queue", elastic)
    assert Decimal(_fact(row, "used")) == _usage(status, "total") == 8
    assert Decimal(_fact(row, "borrowed")) == _usage(status, "borrowed") == 8  # elastic: nominal 0
    assert _fact(row, "pending") == str(status["pendingWorkloads"]) == "1"
    assert _fact(row, "admitted") == str(status["admittedWorkloads"]) == "2"
    # nlp's guaranteed queue holds 2 of its 4: it lends the other 2 to the cohort.
    row = _row(page, "data-queue", nlp_guaranteed)
    assert _fact(row, "used") == "2" and _fact(row, "lending") == "2" and _fact(row, "borrowed") == "0"
    assert "proj-forecasting-h100-guaranteed" not in page  # another department's
    # A researcher sees their own project's queues only; the admin everyone's.
    alice = signed_in(org["alice"]).get(reverse("usage:queues")).content.decode()
    assert elastic in alice and nlp_guaranteed not in alice
    assert "proj-forecasting-h100-guaranteed" in signed_in(org["admin"]).get(reverse("usage:queues")).content.decode()

    local = signed_in(org["alice"]).get(reverse("usage:queues_tab", args=["local-queues"])).content.decode()
    row = _row(local, "data-queue", "proj-vision/elastic-h100")
    lq = cluster.get("LocalQueue", "elastic-h100", namespace="proj-vision")["status"]
    assert (
        _fact(row, "pending") == str(lq["pendingWorkloads"])
        and _fact(row, "admitted") == str(lq["admittedWorkloads"]) == "2"
    )
    assert "proj-nlp/" not in local

    # Cohorts: the department's roll-up counts both projects; the root only for those who see everything.
    wait_for(lambda: CohortState.objects.filter(name="dept-research-h100").exists())
    cohorts = lead.get(reverse("usage:queues_tab", args=["cohorts"])).content.decode()
    row = _row(cohorts, "data-cohort", "dept-research-h100")
    assert _fact(row, "used") == "10" and _fact(row, "admitted") == "3" and _fact(row, "pending") == "1"
    assert _fact(_row(cohorts, "data-cohort", "proj-vision-h100"), "borrowed") == "8"
    assert 'data-cohort="portal-h100"' not in cohorts and 'data-cohort="dept-data-science-h100"' not in cohorts
    mine = signed_in(org["alice"]).get(reverse("usage:queues_tab", args=["cohorts"])).content.decode()
    assert 'data-cohort="dept-research-h100"' in mine and 'data-cohort="proj-vision-h100"' in mine
    assert 'data-cohort="proj-nlp-h100"' not in mine
    everything = signed_in(org["admin"]).get(reverse("usage:queues_tab", args=["cohorts"])).content.decode()
    assert _fact(_row(everything, "data-cohort", "portal-h100"), "used") == "10"

    # Flavors: the nodes' totals for everyone, the pool's use for those who see everything.
    flavors = signed_in(org["admin"]).get(reverse("usage:queues_tab", args=["flavors"])).content.decode()
    row = _row(flavors, "data-flavor", "h100")
    assert _fact(row, "nodes") == "2 (2)" and _fact(row, "allocatable") == "16 (16)"
    assert _fact(row, "used") == "10" and _fact(row, "pending") == "1" and _fact(row, "admitted") == "3"
    researcher = signed_in(org["alice"]).get(reverse("usage:queues_tab", args=["flavors"])).content.decode()
    assert _fact(_row(researcher, "data-flavor", "h100"), "allocatable") == "16 (16)"
    assert 'data-fact="used"' not in researcher


def test_nodes_page_shows_cards_cut_and_state_and_follows_a_cordon(kubesim, cluster, org, watcher):
    wait_for(lambda: NodeState.objects.filter(node_pool__isnull=False).count() == 16)
    client = signed_in(org["alice"])
    h100 = client.get(reverse("usage:nodes", args=["h100"])).content.decode()
    row = _row(h100, "data-node", "h100-node-0")
    assert "NVIDIA-H100-80GB-HBM3" in row and _fact(row, "memory") == "79.6 GiB" and _fact(row, "cards") == "8"
    assert _fact(row, "cut") == "full cards" and _fact(row, "allocatable") == "8" and _fact(row, "state") == "ready"
    mig = client.get(reverse("usage:nodes", args=["a100-mig-3g40gb"])).content.decode()
    assert _fact(_row(mig, "data-node", "a100-mig-3g40gb-node-3"), "cut") == "MIG 2 x 3g.40gb"
    shared = client.get(reverse("usage:nodes", args=["l40s-shared"])).content.decode()
    assert _fact(_row(shared, "data-node", "l40s-shared-node-0"), "cut") == "time-sliced, 8 replicas per card"
    assert 'data-fact="schedulable_allocatable">48<' in shared

    core = k8s.CoreV1Api(kubesim.api_client())
    core.patch_node(
        "h100-node-1",
        {"spec": {"unschedulable": True, "taints": [{"key": "maintenance", "value": "disk", "effect": "NoSchedule"}]}},
    )
    wait_for(lambda: NodeState.objects.filter(name="h100-node-1", unschedulable=True).exclude(taints=[]).exists())
    h100 = client.get(reverse("usage:nodes", args=["h100"])).content.decode()
    row = _row(h100, "data-node", "h100-node-1")
    assert _fact(row, "state") == "cordoned" and _fact(row, "taints") == "maintenance=disk:NoSchedule"
    assert 'data-fact="schedulable_allocatable">8<' in h100 and "1 of 2 nodes taking pods" in h100
    assert client.get(reverse("usage:nodes", args=["no-such-pool"])).status_code == 404
