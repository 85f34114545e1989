"""PyTorchJob under Kueue end to end, as a user submits it with the official client: Kueue's webhook suspends it
(spec.runPolicy.suspend), its Workload (owned by the PyTorchJob) has one pod set per replica type, Master first;
admission unsuspends it with the flavor's node selector in every replica template (so the training-operator's pods
land on the flavor's nodes); admission is all or nothing; eviction suspends it (the operator deletes its pods),
restores the templates and requeues it; Succeeded and Failed finish the Workload; waitForPodsReady follows Running."""

from __future__ import annotations

import hashlib

from tests.kubesim.conftest import pytorch_replica, pytorchjob_body
from tests.kubesim.kueue.conftest import GPU, KUEUE, Cluster

POOL = "portal.gpu/pool"


def setup_queue(kc: Cluster, nominal: int = 8) -> str:
    kc.flavor()
    kc.cluster_queue("cq", nominal)
    ns = kc.namespace()
    kc.local_queue("lq", "cq", ns)
    return ns


def job(name: str, workers: int = 2, command: str = "sleep 60", gpus: int = 1, **run_policy: object) -> dict:
    requests = {GPU: str(gpus)}
    return pytorchjob_body(
        name, pytorch_replica(1, command, requests), pytorch_replica(workers, command, requests), **run_policy
    )


def cond(obj: dict, ctype: str) -> tuple[str, str, str] | None:
    found = next((c for c in obj.get("status", {}).get("conditions", []) if c["type"] == ctype), None)
    return None if found is None else (found["status"], found["reason"], found["message"])


def pods(kc: Cluster, ns: str, name: str) -> list:
    return kc.core.list_namespaced_pod(ns, label_selector=f"training.kubeflow.org/job-name={name}").items


def templates(pj: dict) -> list[dict]:
    specs = pj["spec"]["pytorchReplicaSpecs"]
    return [specs[t]["template"] for t in ("Master", "Worker")]


def test_pytorchjob_lifecycle_from_queued_to_finished(kc: Cluster):
    ns = setup_queue(kc)
    created = kc.submit(ns, job("train", command="sleep 30"), "lq")
    assert created["spec"]["runPolicy"]["suspend"] is True  # Kueue's webhook, on create
    kc.settle()
    wl = kc.owned_workload("PyTorchJob", ns, "train")
    uid = created["metadata"]["uid"]
    digest = hashlib.sha1(f"PyTorchJob\nkubeflow.org\ntrain\n{uid}".encode(), usedforsecurity=False).hexdigest()
    assert wl["metadata"]["name"] == f"pytorchjob-train-{digest[:5]}"
    [owner] = wl["metadata"]["ownerReferences"]
    assert (owner["apiVersion"], owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "kubeflow.org/v1",
        "PyTorchJob",
        "train",
        uid,
        True,
    )
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("master", 1), ("worker", 2)]
    assert [p["topologyRequest"] for p in wl["spec"]["podSets"]] == [
        {"podIndexLabel": "training.kubeflow.org/replica-index"}
    ] * 2
    assert cond(wl, "Admitted")[0] == "True"
    pj = kc.read("PyTorchJob", ns, "train")
    assert pj["spec"]["runPolicy"]["suspend"] is False
    for template in templates(pj):
        assert template["spec"]["nodeSelector"] == {POOL: "h100"}
        assert template["metadata"]["labels"]["kueue.x-k8s.io/podset"] in ("master", "worker")
    running = pods(kc, ns, "train")
    assert len(running) == 3
    assert {p.spec.node_selector[POOL] for p in running} == {"h100"}
    assert {p.metadata.labels["kueue.x-k8s.io/podset"] for p in running} == {"master", "worker"}
    assert ("Started", "Admitted by clusterQueue cq") in kc.events(ns, "train")
    kc.settle(35)
    wl = kc.owned_workload("PyTorchJob", ns, "train")
    assert cond(wl, "Finished") == ("True", "Succeeded", "PyTorchJob train is successfully completed.")


def test_admission_is_all_or_nothing(kc: Cluster):
    ns = setup_queue(kc, nominal=4)
    kc.submit(ns, job("big", workers=4), "lq")  # 5 GPUs
    kc.settle()
    assert kc.read("PyTorchJob", ns, "big")["spec"]["runPolicy"]["suspend"] is True
    assert pods(kc, ns, "big") == []
    kc.submit(ns, job("small", workers=3), "lq")  # 4 GPUs
    kc.settle()
    assert kc.read("PyTorchJob", ns, "small")["spec"]["runPolicy"]["suspend"] is False
    assert len(pods(kc, ns, "small")) == 4


def test_eviction_suspends_restores_and_requeues(kc: Cluster):
    ns = setup_queue(kc)
    kc.submit(ns, job("evicted"), "lq")
    kc.settle()
    assert len(pods(kc, ns, "evicted")) == 3
    kc.custom.patch_cluster_custom_object(*KUEUE, "clusterqueues", "cq", {"spec": {"stopPolicy": "HoldAndDrain"}})
    kc.settle()
    pj = kc.read("PyTorchJob", ns, "evicted")
    assert pj["spec"]["runPolicy"]["suspend"] is True
    assert templates(pj) == templates(job("evicted"))  # the templates as submitted
    assert [p for p in pods(kc, ns, "evicted") if not p.metadata.deletion_timestamp] == []
    assert cond(pj, "Suspended")[:2] == ("True", "PyTorchJobSuspended")
    wl = kc.owned_workload("PyTorchJob", ns, "evicted")
    assert cond(wl, "QuotaReserved")[0] == "False"
    assert cond(wl, "Evicted")[:2] == ("True", "ClusterQueueStopped")
    kc.custom.patch_cluster_custom_object(*KUEUE, "clusterqueues", "cq", {"spec": {"stopPolicy": "None"}})
    kc.settle()
    pj = kc.read("PyTorchJob", ns, "evicted")
    assert pj["spec"]["runPolicy"]["suspend"] is False
    assert cond(pj, "Suspended")[:2] == ("False", "PyTorchJobResumed")
    assert len(pods(kc, ns, "evicted")) == 3


def test_a_failed_pytorchjob_finishes_its_workload_as_failed(kc: Cluster):
    ns = setup_queue(kc)
    body = job("fails", workers=1, command="sleep 60")
    body["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] = "Never"
    body["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["command"] = [
        "sh",
        "-c",
        "sleep 2; exit 1",
    ]
    kc.submit(ns, body, "lq")
    kc.settle(5)
    wl = kc.owned_workload("PyTorchJob", ns, "fails")
    assert cond(wl, "Finished") == ("True", "Failed", "PyTorchJob fails is failed because 1 Worker replica(s) failed.")
    assert kc.get("clusterqueues", "cq")["status"]["flavorsUsage"][0]["resources"][0]["total"] == "0"


def test_wait_for_pods_ready_follows_the_running_condition(kc_ready: Cluster):
    kc = kc_ready
    kc.ks.reset()
    ns = setup_queue(kc)
    kc.submit(ns, job("ready"), "lq")
    kc.settle(1)
    assert cond(kc.owned_workload("PyTorchJob", ns, "ready"), "PodsReady") == (
        "True",
        "Started",
        "All pods reached readiness and the workload is running",
    )


def test_a_pytorchjob_without_a_queue_is_left_alone(kc: Cluster):
    ns = setup_queue(kc)
    created = kc.submit(ns, job("free", workers=1))
    assert created["spec"].get("runPolicy", {}).get("suspend") is None
    kc.settle()
    assert kc.owned_workloads("PyTorchJob", ns, "free") == []
    assert len(pods(kc, ns, "free")) == 2
