"""KAI Scheduler's behaviour on the nodes of KAI pools, in the cases KAI's docs describe: GPU fractions packed on one
card, over-quota shares by weight, reclaim that stops at the victim's fair share, preemption by priority in a queue,
non-preemptible work kept in quota, limits, gangs, and the scheduling conditions of what waits."""

from __future__ import annotations

from tests.crd_schemas import validate_kai_object
from tests.kubesim.kai.conftest import bound, kai_nodes, make_pod, make_queue, pod_group_of, queue_status


def condition(api, pod: str) -> dict:
    (cond,) = pod_group_of(api, pod)["status"]["schedulingConditions"]
    return cond


def test_two_halves_share_one_card_and_a_third_half_waits_until_one_leaves(cluster):
    api = cluster(kai_nodes("kai", 1, 1, sharing=True))
    make_queue(api, "notebooks", quota=1)
    for name in ("nb-1", "nb-2", "nb-3"):
        make_pod(api, name, "notebooks", fraction="0.5")
    assert set(bound(api)) == {"nb-1", "nb-2"}
    pods = {p.metadata.name: p for p in api.core.list_namespaced_pod("team").items}
    assert pods["nb-1"].metadata.labels["runai-gpu-group"] == pods["nb-2"].metadata.labels["runai-gpu-group"]
    cond = condition(api, "nb-3")
    assert (cond["type"], cond["nodePool"], cond["reason"]) == ("UnschedulableOnNodePool", "kai", "Unschedulable")
    assert cond["message"] == "0/1 nodes are available, 1 node(s) didn't have enough resources: GPUs."
    assert pods["nb-3"].status.conditions[0].reason == "Unschedulable"
    assert queue_status(api, "notebooks")["allocated"]["nvidia.com/gpu"] == "1"
    assert queue_status(api, "notebooks")["requested"]["nvidia.com/gpu"] == "1500m"
    validate_kai_object(pod_group_of(api, "nb-3"))

    api.core.delete_namespaced_pod("nb-1", "team")
    assert set(bound(api)) == {"nb-2", "nb-3"}
    assert "schedulingConditions" not in pod_group_of(api, "nb-3")["status"]


def test_a_fraction_is_not_placed_where_the_pool_does_not_share_gpus(cluster):
    api = cluster(kai_nodes("kai", 1, 1))
    make_queue(api, "notebooks", quota=1)
    make_pod(api, "nb", "notebooks", fraction="0.5")
    assert bound(api) == {}
    assert condition(api, "nb")["message"] == (
        "0/1 nodes are available, 1 node(s) didn't have enough resources: GPU sharing.")


def test_the_pod_grouper_makes_a_valid_podgroup_per_pod(cluster):
    api = cluster(kai_nodes("kai", 1, 2))
    make_queue(api, "q", quota=1)
    make_pod(api, "solo", "q", priority_class="build")
    pg = pod_group_of(api, "solo")
    validate_kai_object(pg)
    assert pg["spec"] == {"minMember": 1, "queue": "q", "priorityClassName": "build"}
    assert pg["status"]["phase"] == "Running"
    assert pg["status"]["resourcesStatus"]["allocatedNonPreemptible"]["nvidia.com/gpu"] == "1"


def test_reclaim_takes_back_over_quota_gpus_down_to_the_victims_quota_and_no_further(cluster):
    api = cluster(kai_nodes("kai", 2, 4))
    make_queue(api, "a", quota=4)
    make_queue(api, "b", quota=4)
    for i in range(8):
        make_pod(api, f"a-{i}", "a")
        api.ks.sim.advance(1)
    assert len(bound(api)) == 8  # b asks for nothing: a borrows all of it
    for i in range(5):
        make_pod(api, f"b-{i}", "b")
    held = bound(api)
    assert sum(n.startswith("a-") for n in held) == 4 and sum(n.startswith("b-") for n in held) == 4
    assert set(held) >= {"a-0", "a-1", "a-2", "a-3"}  # the newest are reclaimed first
    # KAI records each eviction on the victim's PodGroup (the pod's own, here), not on the pod
    evictions = {e.involved_object.name: e.message for e in api.core.list_namespaced_event("team").items
                 if e.reason == "Evict"}
    (group,) = [name for name in evictions if name.startswith("pg-a-7-")]
    preemptor = pod_group_of(api, "b-0")["metadata"]["name"]
    assert evictions[group] == f"Pod team/a-7 was preempted by workload team/{preemptor}."
    assert condition(api, "b-4")["message"].startswith("0/2 nodes are available")
    assert queue_status(api, "a")["allocated"]["nvidia.com/gpu"] == "4"


def test_over_quota_gpus_are_split_by_weight(cluster):
    api = cluster(kai_nodes("kai", 2, 4))
    make_queue(api, "light", weight=1)
    make_queue(api, "heavy", weight=3)
    for i in range(8):
        make_pod(api, f"light-{i}", "light")
    for i in range(8):
        make_pod(api, f"heavy-{i}", "heavy")
    held = bound(api)
    assert (sum(n.startswith("light-") for n in held), sum(n.startswith("heavy-") for n in held)) == (2, 6)


def test_surplus_goes_to_the_higher_priority_queue_whatever_the_weights(cluster):
    api = cluster(kai_nodes("kai", 1, 4))
    make_queue(api, "low", priority=1, weight=100)
    make_queue(api, "high", priority=2, weight=1)
    for i in range(4):
        make_pod(api, f"low-{i}", "low")
    for i in range(4):
        make_pod(api, f"high-{i}", "high")
    held = bound(api)
    assert sum(n.startswith("high-") for n in held) == 4 and not any(n.startswith("low-") for n in held)


def test_a_higher_priority_workload_preempts_lower_priority_work_of_its_own_queue(cluster):
    api = cluster(kai_nodes("kai", 1, 2))
    make_queue(api, "q", quota=2)
    make_pod(api, "train-1", "q", priority_class="train")
    api.ks.sim.advance(1)
    make_pod(api, "train-2", "q", priority_class="train")
    make_pod(api, "serve", "q", priority_class="inference")
    assert set(bound(api)) == {"train-1", "serve"}
    events = [e for e in api.core.list_namespaced_event("team").items if e.reason == "Evict"]
    (event,) = [e for e in events if e.involved_object.name.startswith("pg-train-2-")]  # on its PodGroup, as KAI
    assert event.involved_object.kind == "PodGroup"
    assert event.message.startswith("Pod team/train-2 was preempted by higher priority workload team/pg-serve-")


def test_non_preemptible_work_stays_within_quota(cluster):
    api = cluster(kai_nodes("kai", 1, 4))
    make_queue(api, "q", quota=1)
    make_pod(api, "build", "q", gpus=2, priority_class="build")
    make_pod(api, "train", "q", gpus=2, priority_class="train")
    make_pod(api, "pinned", "q", gpus=2, priority_class="train", preemptibility="non-preemptible")
    assert set(bound(api)) == {"train"}
    assert [r["reason"] for r in condition(api, "pinned")["reasons"]] == ["NonPreemptibleOverQuota"]
    cond = condition(api, "build")
    assert cond["message"] == (
        "Non-preemptible workload is over quota. Workload requested 2 GPUs, but q quota is 1 GPUs, while 0 GPUs are "
        "already allocated for non-preemptible pods. Use a preemptible workload to go over quota.")
    (reason,) = cond["reasons"]
    assert reason["reason"] == "NonPreemptibleOverQuota"
    assert reason["details"]["queueDetails"]["queueDeservedResources"] == {"nvidia.com/gpu": "1"}


def test_a_limit_caps_the_queue_and_a_missing_queue_is_named(cluster):
    api = cluster(kai_nodes("kai", 1, 4))
    make_queue(api, "capped", quota=1, limit=2)
    make_queue(api, "quota-only", quota=1, limit=0)
    make_pod(api, "c-1", "capped", gpus=2)
    make_pod(api, "c-2", "capped")
    make_pod(api, "qo-1", "quota-only", gpus=2)
    make_pod(api, "lost", "nowhere")
    assert set(bound(api)) == {"c-1"}
    assert condition(api, "c-2")["message"] == (
        "capped quota has reached the allowable limit of GPUs. Limit is 2 GPUs, currently 2 GPUs allocated and "
        "workload requested 1 GPUs")
    assert [r["reason"] for r in condition(api, "qo-1")["reasons"]] == ["OverLimit"]
    assert [r["reason"] for r in condition(api, "lost")["reasons"]] == ["QueueDoesNotExist"]


def test_a_gang_starts_whole_or_not_at_all(cluster):
    api = cluster(kai_nodes("kai", 1, 2))
    make_queue(api, "q", quota=2)
    pg = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
          "metadata": {"name": "gang", "labels": {"kai.scheduler/node-pool": "kai"}},
          "spec": {"minMember": 3, "queue": "q"}}
    api.custom.create_namespaced_custom_object("scheduling.run.ai", "v2alpha2", "team", "podgroups", pg)
    for i in range(3):
        make_pod(api, f"w-{i}", "q", group="gang")
    assert bound(api) == {}
    assert pod_group_of(api, "w-0")["status"]["phase"] == "Pending"
    make_pod(api, "small", "q")
    assert set(bound(api)) == {"small"}


def test_kube_scheduler_leaves_kai_pods_alone_and_nodes_outside_kai_pools_unused(cluster):
    api = cluster([{"name": "plain", "allocatable": {"nvidia.com/gpu": "8", "cpu": "64", "memory": "512Gi"}}])
    make_queue(api, "q", quota=1)
    make_pod(api, "p", "q")
    assert bound(api) == {}
    assert condition(api, "p")["message"] == "0/0 nodes are available."


def test_a_gang_binds_once_min_member_pods_exist(cluster):
    api = cluster(kai_nodes("kai", 1, 4))
    make_queue(api, "q", quota=4)
    pg = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
          "metadata": {"name": "pair", "labels": {"kai.scheduler/node-pool": "kai"}},
          "spec": {"minMember": 2, "queue": "q"}}
    api.custom.create_namespaced_custom_object("scheduling.run.ai", "v2alpha2", "team", "podgroups", pg)
    make_pod(api, "w-0", "q", group="pair")
    assert bound(api) == {}
    make_pod(api, "w-1", "q", group="pair")
    assert set(bound(api)) == {"w-0", "w-1"}
    status = pod_group_of(api, "w-0")["status"]
    assert (status["phase"], status["running"], status["resourcesStatus"]["allocated"]["nvidia.com/gpu"]) == (
        "Running", 2, "2")


def test_a_parent_queues_limit_caps_its_children(cluster):
    api = cluster(kai_nodes("kai", 1, 4))
    make_queue(api, "dept", quota=0, limit=2)
    make_queue(api, "proj", parent="dept", quota=0, limit=-1)
    make_pod(api, "p-1", "proj", gpus=2)
    make_pod(api, "p-2", "proj")
    assert set(bound(api)) == {"p-1"}
    assert condition(api, "p-2")["message"].startswith("dept quota has reached the allowable limit of GPUs.")
    assert queue_status(api, "dept")["childQueues"] == ["proj"]
    assert queue_status(api, "dept")["allocated"]["nvidia.com/gpu"] == "2"
