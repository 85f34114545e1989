"""JobSet under Kueue end to end, as a user submits it with the official client: Kueue's webhook suspends it, its
Workload has one pod set per replicatedJob, admission unsuspends it with the flavor's node selector in every
replicatedJob's template (and so in the child Jobs and pods the JobSet operator makes), eviction suspends it again
and restores the templates, a finished JobSet finishes its Workload; admission is all or nothing; an owner deleted
with propagationPolicy Orphan leaves its Workload finished with OwnerNotFound (batch Jobs too); and the
Configuration's integrations.frameworks decides whether Kueue acts on JobSets at all."""

from __future__ import annotations

import hashlib
import json

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from kubesim.testing import serve
from tests.kubesim.conftest import JOBSET, jobset_body, replicated_job
from tests.kubesim.kueue.conftest import GPU, KUEUE, Cluster

POOL = "portal.gpu/pool"


TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "training", "effect": "NoSchedule"}


def setup_queue(kc: Cluster, nominal: int = 8, tolerations: list | None = None, **cq: object) -> str:
    kc.flavor(**({"tolerations": tolerations} if tolerations else {}))
    kc.cluster_queue("cq", nominal, **cq)
    ns = kc.namespace()
    kc.local_queue("lq", "cq", ns)
    return ns


def gpus(n: int) -> dict:
    return {GPU: str(n)}


def cond(obj: dict, ctype: str) -> tuple[str, str, str] | None:
    found = next((c for c in obj.get("status", {}).get("conditions", []) if c["type"] == ctype), None)
    return None if found is None else (found["status"], found["reason"], found["message"])


def templates(js: dict) -> list[dict]:
    return [rj["template"]["spec"]["template"] for rj in js["spec"]["replicatedJobs"]]


def child_jobs(kc: Cluster, ns: str, name: str) -> dict:
    jobs = kc.batch.list_namespaced_job(ns, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}").items
    return {j.metadata.name: j for j in jobs}


def running_pods(kc: Cluster, ns: str, name: str) -> list:
    pods = kc.core.list_namespaced_pod(ns, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}").items
    return [p for p in pods if p.status.phase == "Running"]


def usage(kc: Cluster) -> str:
    return kc.get("clusterqueues", "cq")["status"]["flavorsUsage"][0]["resources"][0]["total"]


def test_jobset_lifecycle_from_queued_to_finished(kc: Cluster):
    ns = setup_queue(kc, tolerations=[TOLERATION])
    created = kc.jobset(
        ns,
        "train",
        "lq",
        replicated_job("workers", 2, 2, "sleep 60", gpus(1)),
        replicated_job("launcher", 1, 1, "sleep 60", gpus(1)),
    )
    assert created["spec"]["suspend"] is True  # Kueue's webhook, on create
    uid = created["metadata"]["uid"]
    kc.settle()
    wl = kc.jobset_workload(ns, "train")
    digest = hashlib.sha1(f"JobSet\njobset.x-k8s.io\ntrain\n{uid}".encode(), usedforsecurity=False).hexdigest()
    assert wl["metadata"]["name"] == f"jobset-train-{digest[:5]}"
    [owner] = wl["metadata"]["ownerReferences"]
    assert (owner["apiVersion"], owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "jobset.x-k8s.io/v1alpha2",
        "JobSet",
        "train",
        uid,
        True,
    )
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("workers", 4), ("launcher", 1)]
    assert wl["spec"]["podSets"][0]["topologyRequest"] == {
        "podIndexLabel": "batch.kubernetes.io/job-completion-index",
        "subGroupIndexLabel": "jobset.sigs.k8s.io/job-index",
        "subGroupCount": 2,
    }
    assert wl["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"] == gpus(1)
    assert [a["resourceUsage"] for a in wl["status"]["admission"]["podSetAssignments"]] == [{GPU: "4"}, {GPU: "1"}]
    assert cond(wl, "Admitted")[0] == "True"

    js = kc.read_jobset(ns, "train")
    assert js["spec"]["suspend"] is False
    for template, podset in zip(templates(js), ("workers", "launcher"), strict=True):
        assert template["spec"]["nodeSelector"] == {POOL: "h100"}
        assert template["spec"]["tolerations"] == [TOLERATION]
        assert template["metadata"]["labels"] == {
            "kueue.x-k8s.io/podset": podset,
            "kueue.x-k8s.io/local-queue-name": "lq",
            "kueue.x-k8s.io/cluster-queue-name": "cq",
        }
        assert template["metadata"]["annotations"] == {"kueue.x-k8s.io/workload": wl["metadata"]["name"]}
    jobs = child_jobs(kc, ns, "train")
    assert sorted(jobs) == ["train-launcher-0", "train-workers-0", "train-workers-1"]
    assert all(j.spec.suspend is False and j.spec.template.spec.node_selector == {POOL: "h100"} for j in jobs.values())
    assert all(j.spec.template.spec.tolerations[0].key == "dedicated" for j in jobs.values())
    pods = running_pods(kc, ns, "train")
    assert len(pods) == 5 and {p.metadata.labels["kueue.x-k8s.io/podset"] for p in pods} == {"workers", "launcher"}
    assert {(e[0], e[1]) for e in kc.events(ns, "train")} >= {
        ("CreatedWorkload", f"Created Workload: {ns}/{wl['metadata']['name']}"),
        ("Started", "Admitted by clusterQueue cq"),
    }
    assert usage(kc) == "5"

    kc.settle(60)
    js = kc.read_jobset(ns, "train")
    assert cond(js, "Completed") == ("True", "AllJobsCompleted", "jobset completed successfully")
    wl = kc.jobset_workload(ns, "train")
    assert cond(wl, "Finished") == ("True", "Succeeded", "jobset completed successfully")
    assert not wl["metadata"].get("finalizers")
    assert ("FinishedWorkload", f"Workload '{ns}/{wl['metadata']['name']}' is declared finished") in kc.events(
        ns, "train"
    )
    assert usage(kc) == "0"


def test_preempted_jobset_is_suspended_requeued_and_readmitted(kc: Cluster):
    ns = setup_queue(kc, 4, preemption={"withinClusterQueue": "LowerPriority"})
    kc.priority_class("low", 10)
    kc.priority_class("high", 100)
    kc.jobset(ns, "low", "lq", replicated_job("w", 2, 2, "sleep 600", gpus(1)), priority_class="low")
    kc.settle()
    assert len(running_pods(kc, ns, "low")) == 4
    kc.jobset(ns, "high", "lq", replicated_job("w", 1, 4, "sleep 100", gpus(1)), priority_class="high")
    kc.settle()

    low = kc.read_jobset(ns, "low")
    assert low["spec"]["suspend"] is True
    template = templates(low)[0]
    assert "nodeSelector" not in template["spec"] and "metadata" not in template  # restored as recorded
    assert all(j.spec.suspend for j in child_jobs(kc, ns, "low").values())
    assert running_pods(kc, ns, "low") == []
    wl = kc.jobset_workload(ns, "low")
    assert cond(wl, "Evicted")[:2] == ("True", "Preempted")
    assert cond(wl, "Requeued")[:2] == ("True", "Preempted")
    assert cond(wl, "QuotaReserved")[0] == "False"
    assert ("Stopped", cond(wl, "Evicted")[2]) in kc.events(ns, "low")
    assert low["status"]["replicatedJobsStatus"][0]["suspended"] == 2
    assert len(running_pods(kc, ns, "high")) == 4

    kc.settle(100)
    assert cond(kc.jobset_workload(ns, "high"), "Finished")[0] == "True"
    low = kc.read_jobset(ns, "low")
    assert low["spec"]["suspend"] is False and templates(low)[0]["spec"]["nodeSelector"] == {POOL: "h100"}
    assert cond(kc.jobset_workload(ns, "low"), "Admitted")[0] == "True"
    assert len(running_pods(kc, ns, "low")) == 4
    assert all(j.spec.template.spec.node_selector == {POOL: "h100"} for j in child_jobs(kc, ns, "low").values())


def test_admission_is_all_or_nothing(kc: Cluster):
    """Six GPUs in two replicatedJobs against a quota of four: nothing starts, not even the part that would fit."""
    ns = setup_queue(kc, 4)
    kc.jobset(
        ns, "big", "lq", replicated_job("a", 1, 2, "sleep 60", gpus(1)), replicated_job("b", 1, 4, "sleep 60", gpus(1))
    )
    kc.settle(5)
    js = kc.read_jobset(ns, "big")
    assert js["spec"]["suspend"] is True
    assert all(j.spec.suspend for j in child_jobs(kc, ns, "big").values())
    assert kc.core.list_namespaced_pod(ns).items == []
    assert cond(kc.jobset_workload(ns, "big"), "QuotaReserved") == (
        "False",
        "ExceedsMaxQuota",
        "couldn't assign flavors to pod set b: insufficient quota for nvidia.com/gpu in flavor h100, previously "
        "considered podsets requests (2) + current podset request (4) > maximum capacity (4)",
    )
    assert kc.get("clusterqueues", "cq")["status"]["admittedWorkloads"] == 0


def test_wait_for_pods_ready_counts_every_pod_of_the_jobset(kc_ready: Cluster):
    """One replicatedJob's pods cannot be placed (a node label no node has): the JobSet never becomes PodsReady and
    is evicted after the timeout, although its other pods run."""
    kc = kc_ready
    kc.ks.reset()
    ns = setup_queue(kc)
    kc.jobset(
        ns,
        "half",
        "lq",
        replicated_job("ok", 1, 2, "sleep 600", gpus(1)),
        replicated_job("stuck", 1, 2, "sleep 600", gpus(1), nodeSelector={"zone": "nowhere"}),
    )
    kc.settle(1)
    assert len(running_pods(kc, ns, "half")) == 2
    assert cond(kc.jobset_workload(ns, "half"), "PodsReady") == (
        "False",
        "WaitForStart",
        "Not all pods are ready or succeeded",
    )
    kc.settle(60)
    wl = kc.jobset_workload(ns, "half")
    assert cond(wl, "Evicted")[:2] == ("True", "PodsReadyTimeout")
    assert kc.read_jobset(ns, "half")["spec"]["suspend"] is True
    assert running_pods(kc, ns, "half") == []


def test_wait_for_pods_ready_true_once_all_jobs_are_ready(kc_ready: Cluster):
    kc = kc_ready
    kc.ks.reset()
    ns = setup_queue(kc)
    kc.jobset(
        ns, "ready", "lq", replicated_job("a", 2, 1, "sleep 600", gpus(1)), replicated_job("b", 1, 2, "sleep 600")
    )
    kc.settle(1)
    assert cond(kc.jobset_workload(ns, "ready"), "PodsReady") == (
        "True",
        "Started",
        "All pods reached readiness and the workload is running",
    )


@pytest.mark.parametrize("kind", ["jobset", "job"])
def test_owner_deleted_with_orphan_propagation_finishes_its_workload(kc: Cluster, kind: str):
    """FinishOrphanedWorkloads: the Workload outlives its owner without an owner reference; Kueue finishes it with
    OwnerNotFound, which gives its quota back (the orphaned pods keep running, as in a real cluster)."""
    ns = setup_queue(kc, 4)
    if kind == "jobset":
        kc.jobset(ns, "owner", "lq", replicated_job("w", 1, 4, "sleep 600", gpus(1)))
        kc.settle()
        wl = kc.jobset_workload(ns, "owner")
        assert cond(wl, "Admitted")[0] == "True" and usage(kc) == "4"
        kc.custom.delete_namespaced_custom_object(*JOBSET, ns, "jobsets", "owner", propagation_policy="Orphan")
    else:
        kc.job(ns, "owner", "lq", 4)
        kc.settle()
        wl = kc.workload(ns, "owner")
        assert cond(wl, "Admitted")[0] == "True" and usage(kc) == "4"
        kc.batch.delete_namespaced_job("owner", ns, propagation_policy="Orphan")
    kc.settle()
    wl = kc.get("workloads", wl["metadata"]["name"], ns)
    assert "ownerReferences" not in wl["metadata"]
    assert cond(wl, "Finished") == ("True", "OwnerNotFound", "The workload's owner no longer exists")
    assert not wl["metadata"].get("finalizers")
    assert usage(kc) == "0"
    kc.job(ns, "next", "lq", 4)
    kc.settle()
    assert kc.admitted(ns, "next")


def test_deleting_an_admitted_jobset_removes_its_workload_jobs_and_pods(kc: Cluster):
    ns = setup_queue(kc, 4)
    kc.jobset(ns, "gone", "lq", replicated_job("w", 2, 1, "sleep 600", gpus(1)))
    kc.settle()
    assert len(running_pods(kc, ns, "gone")) == 2
    kc.custom.delete_namespaced_custom_object(*JOBSET, ns, "jobsets", "gone")
    kc.settle()
    assert kc.custom.list_namespaced_custom_object(*KUEUE, ns, "workloads")["items"] == []
    assert kc.batch.list_namespaced_job(ns).items == [] and kc.core.list_namespaced_pod(ns).items == []
    assert usage(kc) == "0"


def test_queue_name_and_priority_class_rules(kc: Cluster):
    ns = setup_queue(kc)
    with pytest.raises(ApiException) as exc:
        kc.jobset(ns, "bad", "indexed_job")
    assert exc.value.status == 403
    assert json.loads(exc.value.body)["message"].startswith(
        'admission webhook "vjobset.kb.io" denied the request: metadata.labels[kueue.x-k8s.io/queue-name]: '
        'Invalid value: "indexed_job": a lowercase RFC 1123 subdomain'
    )
    kc.jobset(ns, "running", "lq", replicated_job("w", 1, 1, "sleep 600", gpus(1)))
    kc.settle()
    for labels, message in (
        ({"kueue.x-k8s.io/queue-name": "other"}, 'Invalid value: "other": field is immutable'),
        ({"kueue.x-k8s.io/priority-class": "low"}, "WorkloadPriorityClass cannot be added to a non-suspended workload"),
    ):
        with pytest.raises(ApiException) as exc:
            kc.custom.patch_namespaced_custom_object(
                *JOBSET, ns, "jobsets", "running", {"metadata": {"labels": labels}}
            )
        body = json.loads(exc.value.body)
        assert exc.value.status == 403 and message in body["message"], body
    elastic = jobset_body("elastic", labels={"kueue.x-k8s.io/queue-name": "lq"})
    elastic["metadata"]["annotations"] = {"kueue.x-k8s.io/elastic-job": "true"}
    with pytest.raises(ApiException) as exc:
        kc.custom.create_namespaced_custom_object(*JOBSET, ns, "jobsets", elastic)
    assert json.loads(exc.value.body)["message"] == (
        'admission webhook "vjobset.kb.io" denied the request: metadata.annotations[kueue.x-k8s.io/elastic-job]: '
        'Forbidden: elastic job is not supported for "jobset.x-k8s.io/v1alpha2, Kind=JobSet"'
    )


def test_default_local_queue_and_priority_class(kc: Cluster):
    ns = setup_queue(kc)
    kc.local_queue("default", "cq", ns)
    kc.priority_class("default", 7)
    js = kc.jobset(ns, "plain", None, replicated_job("w", 1, 1, "sleep 60", gpus(1)))
    assert js["metadata"]["labels"] == {
        "kueue.x-k8s.io/queue-name": "default",
        "kueue.x-k8s.io/priority-class": "default",
    }
    assert js["spec"]["suspend"] is True
    kc.settle()
    wl = kc.jobset_workload(ns, "plain")
    assert (wl["spec"]["queueName"], wl["spec"]["priority"]) == ("default", 7)


def test_a_jobset_without_queue_runs_unmanaged(kc: Cluster):
    ns = setup_queue(kc)
    js = kc.jobset(ns, "free", None, replicated_job("w", 1, 2, "sleep 60"))
    assert js["spec"].get("suspend") is None
    kc.settle()
    assert kc.jobset_workloads(ns, "free") == []
    assert len(running_pods(kc, ns, "free")) == 2


def test_integrations_frameworks_decides_whether_kueue_manages_jobsets():
    config = {"integrations": {"frameworks": ["batch/job"]}}
    with serve(clock="manual", kueue_config=config) as ks:
        api_client = ks.api_client()
        try:
            kc = Cluster(ks, api_client)
            ns = setup_queue(kc)
            js = kc.jobset(ns, "ignored", "lq", replicated_job("w", 1, 1, "sleep 60"))
            assert js["spec"].get("suspend") is None  # no Kueue webhook for JobSets
            kc.settle()
            assert kc.jobset_workloads(ns, "ignored") == []
            assert len(running_pods(kc, ns, "ignored")) == 1
            cm = client.CoreV1Api(api_client).read_namespaced_config_map("kueue-manager-config", "kueue-system")
            assert "frameworks:\n  - batch/job\n" in cm.data["controller_manager_config.yaml"]
        finally:
            api_client.close()


def test_kubesim_enables_the_jobset_integration_by_default(kc: Cluster):
    cm = kc.core.read_namespaced_config_map("kueue-manager-config", "kueue-system")
    assert "frameworks:\n  - batch/job\n  - jobset.x-k8s.io/jobset\n" in cm.data["controller_manager_config.yaml"]
