"""TrainJob under Kueue end to end, as a user submits it with the official client: Kueue's webhook suspends it and
adds its own runtimePatch; the Workload (owned by the TrainJob) takes its pod sets from the JobSet the Trainer builds
from the runtime (numNodes pods for torch-distributed); the Trainer's JobSet and its Jobs get no Workload; admission
reaches the pods through Kueue's runtimePatch, the Trainer's JobSet and the JobSet operator; admission is all or
nothing; eviction suspends the TrainJob, empties Kueue's patch and requeues it; Complete and Failed finish the
Workload; waitForPodsReady counts the JobSet's ready Jobs; without its runtime a TrainJob waits without a Workload."""

from __future__ import annotations

import hashlib

from tests.kubesim.conftest import TRAINER, replicated_job, training_runtime_body, trainjob_body
from tests.kubesim.kueue.conftest import GPU, KUEUE, Cluster

POOL = "portal.gpu/pool"


def setup_queue(kc: Cluster, nominal: int = 8) -> str:
    kc.flavor()
    kc.cluster_queue("cq", nominal)
    ns = kc.namespace()
    kc.local_queue("lq", "cq", ns)
    return ns


def train(name: str, nodes: int = 2, seconds: int = 60, gpus: int = 1) -> dict:
    """A torch-distributed TrainJob of `nodes` nodes with `gpus` GPUs each."""
    per_node = {"requests": {GPU: str(gpus)}, "limits": {GPU: str(gpus)}}
    return trainjob_body(name, numNodes=nodes, command=["sleep", str(seconds)], resourcesPerNode=per_node)


def cond(obj: dict, ctype: str) -> tuple[str, str, str] | None:
    found = next((c for c in obj.get("status", {}).get("conditions", []) if c["type"] == ctype), None)
    return None if found is None else (found["status"], found["reason"], found["message"])


def pods(kc: Cluster, ns: str, name: str) -> list:
    found = kc.core.list_namespaced_pod(ns, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}").items
    return [p for p in found if not p.metadata.deletion_timestamp]


def kueue_patch(tj: dict) -> dict:
    return next(p for p in tj["spec"]["runtimePatches"] if p["manager"] == "kueue.x-k8s.io/manager")


def test_trainjob_lifecycle_from_queued_to_finished(kc: Cluster):
    ns = setup_queue(kc)
    created = kc.submit(ns, train("llm", seconds=30), "lq")
    assert created["spec"]["suspend"] is True  # Kueue's webhook, on create
    assert kueue_patch(created) == {
        "manager": "kueue.x-k8s.io/manager",
        "trainingRuntimeSpec": {"template": {"spec": {}}},
    }
    kc.settle()
    uid = created["metadata"]["uid"]
    wl = kc.owned_workload("TrainJob", ns, "llm")
    digest = hashlib.sha1(f"TrainJob\ntrainer.kubeflow.org\nllm\n{uid}".encode(), usedforsecurity=False).hexdigest()
    assert wl["metadata"]["name"] == f"trainjob-llm-{digest[:5]}"
    [owner] = wl["metadata"]["ownerReferences"]
    assert (owner["apiVersion"], owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "trainer.kubeflow.org/v1alpha1",
        "TrainJob",
        "llm",
        uid,
        True,
    )
    [podset] = wl["spec"]["podSets"]
    assert (podset["name"], podset["count"]) == ("node", 2)
    container = podset["template"]["spec"]["containers"][0]
    assert container["resources"]["requests"] == {GPU: "1"}
    assert {"name": "PET_NNODES", "value": "2"} in container["env"]
    assert cond(wl, "Admitted")[0] == "True"
    # one Workload in the namespace: the Trainer's JobSet (and its Jobs) are the TrainJob's business
    assert len(kc.custom.list_namespaced_custom_object(*KUEUE, ns, "workloads")["items"]) == 1
    tj = kc.read("TrainJob", ns, "llm")
    assert tj["spec"]["suspend"] is False
    [rj] = kueue_patch(tj)["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert rj["name"] == "node"
    assert rj["template"]["spec"]["template"]["spec"]["nodeSelector"] == {POOL: "h100"}
    running = pods(kc, ns, "llm")
    assert len(running) == 2
    assert {p.spec.node_selector[POOL] for p in running} == {"h100"}
    assert {p.metadata.labels["kueue.x-k8s.io/podset"] for p in running} == {"node"}
    assert ("Started", "Admitted by clusterQueue cq") in kc.events(ns, "llm")
    kc.settle(35)
    tj = kc.read("TrainJob", ns, "llm")
    assert cond(tj, "Complete") == ("True", "AllJobsCompleted", "jobset completed successfully")
    wl = kc.owned_workload("TrainJob", ns, "llm")
    assert cond(wl, "Finished") == ("True", "Succeeded", "jobset completed successfully")


def test_admission_is_all_or_nothing(kc: Cluster):
    ns = setup_queue(kc, nominal=4)
    kc.submit(ns, train("big", nodes=3, gpus=2), "lq")  # 6 GPUs
    kc.settle()
    assert kc.read("TrainJob", ns, "big")["spec"]["suspend"] is True
    assert pods(kc, ns, "big") == []
    kc.submit(ns, train("small", nodes=2, gpus=2), "lq")  # 4 GPUs
    kc.settle()
    assert kc.read("TrainJob", ns, "small")["spec"]["suspend"] is False
    assert len(pods(kc, ns, "small")) == 2


def test_eviction_suspends_the_trainjob_empties_kueues_patch_and_requeues_it(kc: Cluster):
    ns = setup_queue(kc)
    kc.submit(ns, train("evicted"), "lq")
    kc.settle()
    assert len(pods(kc, ns, "evicted")) == 2
    kc.custom.patch_cluster_custom_object(*KUEUE, "clusterqueues", "cq", {"spec": {"stopPolicy": "HoldAndDrain"}})
    kc.settle()
    tj = kc.read("TrainJob", ns, "evicted")
    assert tj["spec"]["suspend"] is True
    assert kueue_patch(tj)["trainingRuntimeSpec"]["template"]["spec"] == {}
    assert cond(tj, "Suspended") == ("True", "Suspended", "TrainJob is suspended")
    js = kc.read_jobset(ns, "evicted")
    assert js["spec"]["suspend"] is True
    assert "nodeSelector" not in js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert pods(kc, ns, "evicted") == []
    wl = kc.owned_workload("TrainJob", ns, "evicted")
    assert cond(wl, "QuotaReserved")[0] == "False"
    assert cond(wl, "Evicted")[:2] == ("True", "ClusterQueueStopped")
    kc.custom.patch_cluster_custom_object(*KUEUE, "clusterqueues", "cq", {"spec": {"stopPolicy": "None"}})
    kc.settle()
    tj = kc.read("TrainJob", ns, "evicted")
    assert tj["spec"]["suspend"] is False
    assert cond(tj, "Suspended") == ("False", "Resumed", "TrainJob is resumed")
    assert len(pods(kc, ns, "evicted")) == 2


def test_a_failed_trainjob_finishes_its_workload_as_failed(kc: Cluster):
    ns = setup_queue(kc)
    step = replicated_job("node", 1, 1, "sleep 1; exit 1", {GPU: "1"})
    step["template"]["metadata"] = {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}}
    step["template"]["spec"]["backoffLimit"] = 0
    kc.custom.create_namespaced_custom_object(*TRAINER, ns, "trainingruntimes", training_runtime_body("fails", step))
    kc.submit(ns, trainjob_body("bad", "fails", kind="TrainingRuntime"), "lq")
    kc.settle(5)
    wl = kc.owned_workload("TrainJob", ns, "bad")
    assert cond(wl, "Finished")[:2] == ("True", "Failed")
    assert kc.get("clusterqueues", "cq")["status"]["flavorsUsage"][0]["resources"][0]["total"] == "0"


def test_wait_for_pods_ready_counts_the_jobsets_ready_jobs(kc_ready: Cluster):
    kc = kc_ready
    kc.ks.reset()
    ns = setup_queue(kc)
    kc.submit(ns, train("ready"), "lq")
    kc.settle(1)
    tj = kc.read("TrainJob", ns, "ready")
    assert tj["status"]["jobsStatus"][0]["ready"] == 1
    assert cond(kc.owned_workload("TrainJob", ns, "ready"), "PodsReady") == (
        "True",
        "Started",
        "All pods reached readiness and the workload is running",
    )


def test_a_trainjob_waits_for_its_runtime_without_a_workload(kc: Cluster):
    ns = setup_queue(kc)
    kc.submit(ns, trainjob_body("later", "custom", kind="TrainingRuntime", numNodes=1), "lq")
    kc.settle()
    assert kc.owned_workloads("TrainJob", ns, "later") == []
    step = replicated_job("node", 1, 1, "sleep 5", {GPU: "1"})
    step["template"]["metadata"] = {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}}
    kc.custom.create_namespaced_custom_object(*TRAINER, ns, "trainingruntimes", training_runtime_body("custom", step))
    kc.settle()
    assert cond(kc.owned_workload("TrainJob", ns, "later"), "Admitted")[0] == "True"
