"""Kueue's TrainJob integration cases (kubernetes-sigs/kueue v0.20 line: pkg/controller/jobs/trainjob/
trainjob_controller_test.go and trainjob_webhook_test.go, test/integration/singlecluster/controller/jobs/trainjob/
trainjob_controller_test.go and test/e2e/singlecluster/extended/trainjob_test.go), each test named after its upstream
case and re-told against a served kubesim through the official client; nothing is carried over.

How the re-telling differs, and why:
- Upstream's integration suites run Kueue without the Trainer and write TrainJob status by hand. kubesim runs the
  Trainer (and the JobSet operator), so where a case needs a status the Trainer would not reach on its own (an
  active Job while suspended, exact succeeded counts) the TrainJob names kueue.x-k8s.io/multikueue in
  spec.managedBy, which the Trainer leaves alone (kubesim has no MultiKueue: its Kueue treats the TrainJob as a local
  one), and the test writes the status as upstream does.
- Upstream sets quota reservations by hand and checks what RunWithPodSetsInfo writes; kubesim's scheduler reserves,
  so queues are shaped to make it choose what upstream chose, and admission checks' podSetUpdates stand for the pod
  set infos the unit cases hand in.
- kubesim's Kueue manages only jobs that name a queue (manageJobsWithoutQueueName is not emulated).
Left out: TopologyAwareScheduling (TAS is not emulated), MultiKueue and managedBy defaulting,
manageJobsWithoutQueueName, and RunWithPodSetsInfo given a wrong number of pod set infos (an admission always has one
per pod set).
"""

from __future__ import annotations

import json
import urllib.request

import pytest
from kubernetes.client.rest import ApiException

from tests.kubesim.conftest import TRAINER, training_runtime_body, trainjob_body
from tests.kubesim.kueue.conftest import KUEUE, Cluster
from tests.kubesim.kueue.test_upstream_controllers import check, checks, cluster_queue, cond, flavor, fq
from tests.kubesim.kueue.test_upstream_jobset import hold_and_drain, rj, two_flavor_queue

POOL = "portal.gpu/pool"
KUEUE_MANAGER = "kueue.x-k8s.io/manager"
MULTIKUEUE = "kueue.x-k8s.io/multikueue"  # a managedBy the Trainer leaves alone: the test plays it
ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"


def trainer_step(name: str = "node", cpu: str = "1", seconds: int = 30) -> dict:
    """A replicatedJob labelled as the trainer step (testingjobset's Labels: ancestor-step trainer)."""
    out = rj(name, 1, cpu=cpu, seconds=seconds)
    out["template"]["metadata"] = {"labels": {ANCESTOR: "trainer"}}
    return out


def runtime(kc: Cluster, name: str, *rjobs: dict, ns: str | None = None) -> None:
    """testingtrainjob.MakeClusterTrainingRuntime / MakeTrainingRuntime: a runtime of a JobSet spec, no mlPolicy."""
    if ns is None:
        body = training_runtime_body(name, *rjobs, kind="ClusterTrainingRuntime")
        kc.custom.create_cluster_custom_object(*TRAINER, "clustertrainingruntimes", body)
    else:
        kc.custom.create_namespaced_custom_object(*TRAINER, ns, "trainingruntimes", training_runtime_body(name, *rjobs))


def train(name: str, runtime_name: str, kind: str = "ClusterTrainingRuntime", **trainer: object) -> dict:
    return trainjob_body(name, runtime_name, kind=kind, **trainer)


def one_cpu_node(name: str) -> dict:
    """A torch-distributed TrainJob of one node asking for a CPU (so its admission names a flavor)."""
    return train(name, "torch-distributed", command=["sleep", "60"], resourcesPerNode={"requests": {"cpu": "1"}})


def patches(tj: dict, manager: str = KUEUE_MANAGER) -> list[dict]:
    """The replicatedJobs a manager's runtimePatch lists."""
    found = next(p for p in tj["spec"]["runtimePatches"] if p["manager"] == manager)
    return found["trainingRuntimeSpec"]["template"]["spec"].get("replicatedJobs", [])


def rjob_patch(name: str, metadata: dict | None = None, **spec: object) -> dict:
    """testingtrainjob.MakeReplicatedJobPatch: one replicatedJob's pod template fields."""
    template: dict = {"spec": dict(spec)}
    if metadata is not None:
        template["metadata"] = metadata
    return {"name": name, "template": {"spec": {"template": template}}}


def runtime_patch(manager: str, *rjobs: dict) -> dict:
    return {"manager": manager, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": list(rjobs)}}}}


def pod_spec(rjob_patch: dict) -> dict:
    return rjob_patch["template"]["spec"]["template"].get("spec", {})


def suspended(kc: Cluster, ns: str, name: str) -> bool:
    return kc.read("TrainJob", ns, name)["spec"]["suspend"]


# -- pkg/controller/jobs/trainjob/trainjob_controller_test.go ---------------------------------------------------


TOLERATION = {"key": "t", "operator": "Equal", "value": "v", "effect": "NoSchedule"}


def _admit_with_updates(kc: Cluster, ns: str, name: str, update: dict) -> dict:
    """Admission through a Ready admission check whose podSetUpdates carry a pod set info's extra fields."""
    wl = kc.owned_workload("TrainJob", ns, name)
    state = {"name": "check", "state": "Ready", "message": "", "lastTransitionTime": _now(kc),
             "podSetUpdates": [{"name": "node", **update}]}
    kc.custom.patch_namespaced_custom_object_status(
        *KUEUE, ns, "workloads", wl["metadata"]["name"], {"status": {"admissionChecks": [state]}}
    )
    kc.settle()
    return kc.read("TrainJob", ns, name)


def _now(kc: Cluster) -> str:
    return kc.ks.sim.store.clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")


def _checked_queue(kc: Cluster) -> str:
    check(kc, "check", active=True)
    flavor(kc, "default", **{POOL: "h100"})
    cluster_queue(kc, "cq", [("cpu", [fq("default", "cpu", "10")])], **checks("check"))
    ns = kc.namespace()
    kc.local_queue("queue", "cq", ns)
    return ns


def test_run_with_podsets_info_should_add_to_the_trainjob_the_config_specified_in_the_podset_info(kc: Cluster):
    ns = _checked_queue(kc)
    kc.submit(ns, one_cpu_node("tj"), "queue")
    kc.settle()
    tj = _admit_with_updates(
        kc,
        ns,
        "tj",
        {"annotations": {"test-annotation": "test"}, "labels": {"test-label": "label"},
         "nodeSelector": {"disktype": "ssd"}, "tolerations": [TOLERATION]},
    )
    assert tj["spec"]["suspend"] is False
    [node] = patches(tj)
    assert node["name"] == "node"
    metadata = node["template"]["spec"]["template"]["metadata"]
    assert metadata["annotations"]["test-annotation"] == "test"
    assert metadata["labels"]["kueue.x-k8s.io/podset"] == "node" and metadata["labels"]["test-label"] == "label"
    assert pod_spec(node) == {"nodeSelector": {POOL: "h100", "disktype": "ssd"}, "tolerations": [TOLERATION]}


def test_run_with_podsets_info_should_respect_user_provided_runtime_patches_when_adding_podset_info(kc: Cluster):
    """...when adding PodSet info config to the trainjob: the user's patch stays as written, Kueue's comes after
    it, and the Trainer merges both into the JobSet."""
    ns = _checked_queue(kc)
    body = one_cpu_node("tj")
    user = rjob_patch("node", nodeSelector={"disktype": "sdd"}, tolerations=[TOLERATION])
    body["spec"]["runtimePatches"] = [runtime_patch("example.com/user-manager", user)]
    kc.submit(ns, body, "queue")
    kc.settle()
    tj = _admit_with_updates(kc, ns, "tj", {"nodeSelector": {"gpu": "nvidia"}})
    assert [p["manager"] for p in tj["spec"]["runtimePatches"]] == ["example.com/user-manager", KUEUE_MANAGER]
    assert patches(tj, "example.com/user-manager") == [user]
    assert pod_spec(patches(tj)[0]) == {"nodeSelector": {POOL: "h100", "gpu": "nvidia"}}
    js = kc.read_jobset(ns, "tj")
    merged = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert merged["nodeSelector"] == {"disktype": "sdd", POOL: "h100", "gpu": "nvidia"}
    assert merged["tolerations"] == [TOLERATION]


def test_run_with_podsets_info_should_return_an_error_if_the_trainjob_references_an_unknown_training_runtime(
    kc: Cluster,
):
    """Without its runtime Kueue cannot build the pod sets: no Workload, the TrainJob stays suspended."""
    two_flavor_queue(kc)
    ns = kc.namespace()
    kc.local_queue("queue", "cluster-queue", ns)
    kc.submit(ns, train("tj", "unknown-runtime"), "queue")
    kc.settle()
    assert kc.owned_workloads("TrainJob", ns, "tj") == [] and suspended(kc, ns, "tj")


def test_run_with_podsets_info_should_replace_existing_kueue_overrides_idempotency(kc: Cluster):
    two_flavor_queue(kc)
    ns = kc.namespace()
    kc.local_queue("queue", "cluster-queue", ns)
    body = one_cpu_node("tj")
    old = rjob_patch("node", {"annotations": {"test-annotation": "old-value"}}, nodeSelector={"old-selector": "value"})
    body["spec"]["suspend"] = True
    body["spec"]["runtimePatches"] = [runtime_patch(KUEUE_MANAGER, old)]
    kc.submit(ns, body, "queue")
    kc.settle()
    tj = kc.read("TrainJob", ns, "tj")
    assert tj["spec"]["suspend"] is False
    [node] = patches(tj)
    assert pod_spec(node) == {"nodeSelector": {POOL: "h100"}}
    assert "test-annotation" not in node["template"]["spec"]["template"]["metadata"]["annotations"]


def test_restore_podsets_info_should_clear_replicated_job_patches_from_the_kueue_runtime_patch(kc: Cluster):
    two_flavor_queue(kc)
    ns = kc.namespace()
    kc.local_queue("queue", "cluster-queue", ns)
    kc.submit(ns, one_cpu_node("tj"), "queue")
    kc.settle()
    assert len(patches(kc.read("TrainJob", ns, "tj"))) == 1
    hold_and_drain(kc, "cluster-queue")
    tj = kc.read("TrainJob", ns, "tj")
    assert tj["spec"]["suspend"] is True
    kueue = next(p for p in tj["spec"]["runtimePatches"] if p["manager"] == KUEUE_MANAGER)
    assert kueue == {"manager": KUEUE_MANAGER, "trainingRuntimeSpec": {"template": {"spec": {}}}}


def test_reconciler_workload_is_created_with_the_corresponding_podsets(kc: Cluster):
    ns = kc.namespace()
    runtime(kc, "test", trainer_step(), rj("foo", 1), ns=ns)
    kc.submit(ns, train("tj", "test", kind="TrainingRuntime"), "nowhere")
    kc.settle()
    wl = kc.owned_workload("TrainJob", ns, "tj")
    js_templates = [r["template"]["spec"]["template"] for r in (trainer_step(), rj("foo", 1))]
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("node", 1), ("foo", 1)]
    assert [p["template"] for p in wl["spec"]["podSets"]] == js_templates
    assert wl["metadata"]["ownerReferences"][0]["kind"] == "TrainJob"


def test_reconciler_podset_count_for_the_trainer_job_is_set_to_spec_trainer_num_nodes(kc: Cluster):
    ns = kc.namespace()
    runtime(kc, "test", trainer_step(), rj("foo", 1), ns=ns)
    kc.submit(ns, train("tj", "test", kind="TrainingRuntime", numNodes=4), "nowhere")
    kc.settle()
    wl = kc.owned_workload("TrainJob", ns, "tj")
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("node", 4), ("foo", 1)]


# -- pkg/controller/jobs/trainjob/trainjob_webhook_test.go -------------------------------------------------------


def _status(exc: pytest.ExceptionInfo[ApiException]) -> dict:
    return json.loads(exc.value.body)


@pytest.mark.parametrize(
    ("case", "default_lq", "queue", "want_queue"),
    [
        ("should suspend a TrainJob with a queue label", False, "queue", "queue"),
        (
            "should not suspend a TrainJob without a queue label if manageJobsWithoutQueueName is not enabled",
            False,
            None,
            None,
        ),
        ("should set the default local queue if enabled and the user didn't specify any", True, None, "default"),
        ("should not set the default local queue if doesn't exists", False, None, None),
    ],
)
def test_default(kc: Cluster, case: str, default_lq: bool, queue: str | None, want_queue: str | None):
    ns = kc.namespace()
    if default_lq:
        kc.local_queue("default", "cluster-queue", ns)
    tj = kc.submit(ns, train("tj", "torch-distributed"), queue)
    assert (tj["metadata"].get("labels") or {}).get("kueue.x-k8s.io/queue-name") == want_queue, case
    assert tj["spec"]["suspend"] is bool(want_queue)
    assert [p["manager"] for p in tj["spec"]["runtimePatches"]] == [KUEUE_MANAGER]


def test_validate_create_base_and_with_prebuilt_workload(kc: Cluster):
    ns = kc.namespace()
    kc.submit(ns, train("base", "torch-distributed"), "queue")
    body = train("prebuilt", "torch-distributed")
    body["metadata"]["annotations"] = {"kueue.x-k8s.io/prebuilt-workload-name": "workload-name"}
    created = kc.submit(ns, body, "queue")
    assert created["metadata"]["annotations"]["kueue.x-k8s.io/prebuilt-workload-name"] == "workload-name"


def test_validate_create_invalid_queue_name_label(kc: Cluster):
    ns = kc.namespace()
    with pytest.raises(ApiException) as exc:
        kc.submit(ns, train("tj", "torch-distributed"), "queue_name")
    assert exc.value.status == 403
    assert _status(exc)["message"].startswith(
        'admission webhook "vtrainjob.kb.io" denied the request: metadata.labels[kueue.x-k8s.io/queue-name]: '
        'Invalid value: "queue_name": a lowercase RFC 1123 subdomain'
    )


# -- test/integration/singlecluster/controller/jobs/trainjob/trainjob_controller_test.go ------------------------------


def test_should_reconcile_trainjobs(kc: Cluster):
    two_flavor_queue(kc)
    ns = kc.namespace()
    kc.local_queue("local-queue", "cluster-queue", ns)
    runtime(kc, "test", trainer_step(), rj("foo", 1, seconds=30))
    created = kc.submit(ns, train("trainjob-test", "test", numNodes=2), "local-queue")
    assert created["spec"]["suspend"] is True
    kc.settle()
    wl = kc.owned_workload("TrainJob", ns, "trainjob-test")
    assert wl["spec"]["queueName"] == "local-queue"
    assert [p["count"] for p in wl["spec"]["podSets"]] == [2, 1]
    assert suspended(kc, ns, "trainjob-test") is False
    assert ("Started", "Admitted by clusterQueue cluster-queue") in kc.events(ns, "trainjob-test")
    assert cond(kc.owned_workload("TrainJob", ns, "trainjob-test"), "QuotaReserved")[0] == "True"
    kc.settle(35)
    assert cond(kc.owned_workload("TrainJob", ns, "trainjob-test"), "Finished")[:2] == ("True", "Succeeded")


def test_a_trainjob_created_in_an_unmanaged_namespace_is_not_suspended_and_a_workload_is_not_created(kc: Cluster):
    kc.submit("kube-system", train("trainjob-test", "torch-distributed", command=["sleep", "60"]))
    kc.settle()
    assert suspended(kc, "kube-system", "trainjob-test") is False
    assert kc.owned_workloads("TrainJob", "kube-system", "trainjob-test") == []


def test_should_finish_the_preemption_when_the_trainjob_becomes_inactive(kc: Cluster):
    two_flavor_queue(kc)
    ns = kc.namespace()
    kc.local_queue("local-queue", "cluster-queue", ns)
    runtime(kc, "test", trainer_step(), rj("foo", 1))
    body = train("trainjob-test", "test")
    body["spec"]["managedBy"] = MULTIKUEUE
    kc.submit(ns, body, "local-queue")
    kc.settle()
    assert suspended(kc, ns, "trainjob-test") is False
    active = {"name": "node", "ready": 0, "succeeded": 0, "failed": 0, "active": 1, "suspended": 0}
    kc.patch_status("TrainJob", ns, "trainjob-test", {"jobsStatus": [active]})
    kc.custom.patch_cluster_custom_object(*KUEUE, "clusterqueues", "cluster-queue", {"spec": {"stopPolicy": "Hold"}})
    wl = kc.owned_workload("TrainJob", ns, "trainjob-test")
    evicted = {"type": "Evicted", "status": "True", "reason": "Preempted", "message": "By test",
               "lastTransitionTime": _now(kc)}
    conditions = {"status": {"conditions": [*wl["status"]["conditions"], evicted]}}
    kc.custom.patch_namespaced_custom_object_status(*KUEUE, ns, "workloads", wl["metadata"]["name"], conditions)
    kc.settle()
    assert suspended(kc, ns, "trainjob-test") is True
    kc.settle(5)
    assert cond(kc.owned_workload("TrainJob", ns, "trainjob-test"), "QuotaReserved")[0] == "True"  # still active
    kc.patch_status("TrainJob", ns, "trainjob-test", {"jobsStatus": [{**active, "active": 0}]})
    wl = kc.owned_workload("TrainJob", ns, "trainjob-test")
    assert cond(wl, "QuotaReserved")[0] == "False"
    assert cond(wl, "Requeued") == ("True", "Preempted", "By test")


def test_should_reconcile_jobs_only_when_queue_is_set(kc: Cluster):
    ns = kc.namespace()
    runtime(kc, "test", rj("node", 1), ns=ns)
    kc.submit(ns, train("trainjob-test", "test", kind="TrainingRuntime"))
    kc.settle()
    assert kc.owned_workloads("TrainJob", ns, "trainjob-test") == []
    labels = {"kueue.x-k8s.io/queue-name": "test-queue"}
    kc.patch("TrainJob", ns, "trainjob-test", {"metadata": {"labels": labels}, "spec": {"suspend": True}})
    kc.settle()
    assert kc.owned_workload("TrainJob", ns, "trainjob-test")["spec"]["queueName"] == "test-queue"


def _dev_queue(kc: Cluster) -> str:
    flavor(kc, "on-demand", **{POOL: "h100"})
    flavor(kc, "spot-untainted", **{POOL: "l40s-shared"})
    cluster_queue(kc, "dev-clusterqueue", [("cpu", [fq("spot-untainted", "cpu", "1"), fq("on-demand", "cpu", "5")])])
    ns = kc.namespace()
    kc.local_queue("local-queue", "dev-clusterqueue", ns)
    return ns


def _metrics(kc: Cluster) -> str:
    with urllib.request.urlopen(f"{kc.ks.url}/metrics", timeout=10) as resp:
        return resp.read().decode()


def test_should_schedule_trainjobs_as_they_fit_in_their_cluster_queue(kc: Cluster):
    ns = _dev_queue(kc)
    runtime(kc, "test", rj("node-1", 1), rj("node-2", 3), ns=ns)
    kc.submit(ns, train("trainjob-test", "test", kind="TrainingRuntime"), "local-queue")
    kc.settle()
    tj = kc.read("TrainJob", ns, "trainjob-test")
    assert tj["spec"]["suspend"] is False
    node_1, node_2 = patches(tj)
    assert (node_1["name"], node_2["name"]) == ("node-1", "node-2")
    assert pod_spec(node_1)["nodeSelector"][POOL] == "l40s-shared"
    assert pod_spec(node_2)["nodeSelector"][POOL] == "h100"
    metrics = _metrics(kc)
    assert ('kueue_pending_workloads{cluster_queue="dev-clusterqueue",status="active"'
            ',replica_role="standalone"} 0') in metrics
    assert 'kueue_admitted_workloads_total{cluster_queue="dev-clusterqueue",replica_role="standalone"} 1' in metrics


def test_should_allow_reclaim_of_resources_that_are_no_longer_needed(kc: Cluster):
    ns = _dev_queue(kc)
    runtime(kc, "tr-1", rj("node-1", 2, 4, 8, "250m"), rj("node-2", 3, 4, 4, "250m"), ns=ns)
    first = train("trainjob-test", "tr-1", kind="TrainingRuntime")
    first["spec"]["managedBy"] = MULTIKUEUE
    kc.submit(ns, first, "local-queue")
    kc.settle()
    assert suspended(kc, ns, "trainjob-test") is False
    runtime(kc, "tr-2", rj("node-1", 2), rj("node-2", 1), ns=ns)
    kc.submit(ns, train("trainjob-test-2", "tr-2", kind="TrainingRuntime"), "local-queue")
    kc.settle()
    assert suspended(kc, ns, "trainjob-test-2") is True
    assert ('kueue_pending_workloads{cluster_queue="dev-clusterqueue",status="inadmissible"'
            ',replica_role="standalone"} 1') in _metrics(kc)
    done = {"ready": 0, "failed": 0, "active": 0, "suspended": 0}
    kc.patch_status(
        "TrainJob",
        ns,
        "trainjob-test",
        {"jobsStatus": [{"name": "node-1", "succeeded": 2, **done}, {"name": "node-2", "succeeded": 1, **done}]},
    )
    wl = kc.owned_workload("TrainJob", ns, "trainjob-test")
    assert wl["status"]["reclaimablePods"] == [{"name": "node-1", "count": 8}, {"name": "node-2", "count": 4}]
    assert suspended(kc, ns, "trainjob-test-2") is False
    assert ('kueue_reserving_active_workloads{cluster_queue="dev-clusterqueue"'
            ',replica_role="standalone"} 2') in _metrics(kc)


# -- test/e2e/singlecluster/extended/trainjob_test.go ----------------------------------------------------------------


def _cpu_memory_queue(kc: Cluster, *flavors: tuple[str, dict], cpu: str = "2", memory: str = "2G", **spec) -> str:
    for name, labels in flavors:
        flavor(kc, name, **labels)
    quotas = [
        {"name": name, "resources": [{"name": "cpu", "nominalQuota": cpu}, {"name": "memory", "nominalQuota": memory}]}
        for name, _ in flavors
    ]
    group = {"coveredResources": ["cpu", "memory"], "flavors": quotas}
    body = {"namespaceSelector": {}, "resourceGroups": [group], **spec}
    kc.create("clusterqueues", {"kind": "ClusterQueue", "metadata": {"name": "cluster-queue"}, "spec": body})
    ns = kc.namespace()
    kc.local_queue("main", "cluster-queue", ns)
    return ns


def _agnhost(name: str, seconds: int) -> dict:
    """The e2e TrainJob: torch-distributed, the trainer asking for 500m CPU and 200Mi of memory."""
    return train(name, "torch-distributed", command=["sleep", str(seconds)],
                 resourcesPerNode={"requests": {"cpu": "500m", "memory": "200Mi"}})


def test_should_run_a_trainjob_if_admitted(kc: Cluster):
    ns = _cpu_memory_queue(kc, ("default", {}))
    kc.submit(ns, _agnhost("trainjob-test", 1), "main")
    kc.settle()
    assert cond(kc.owned_workload("TrainJob", ns, "trainjob-test"), "Admitted")[0] == "True"
    assert suspended(kc, ns, "trainjob-test") is False
    kc.settle(5)
    assert cond(kc.read("TrainJob", ns, "trainjob-test"), "Complete")[0] == "True"
    assert cond(kc.owned_workload("TrainJob", ns, "trainjob-test"), "Finished")[:2] == ("True", "Succeeded")


def test_should_allow_to_suspend_a_trainjob_when_injected_node_selector(kc: Cluster):
    ns = _cpu_memory_queue(
        kc,
        ("on-demand", {"instance-type": "on-demand"}),
        ("spot", {"instance-type": "spot"}),
        cpu="1",
        memory="1Gi",
        preemption={"withinClusterQueue": "LowerPriority"},
    )
    kc.submit(ns, _agnhost("trainjob-test", 600), "main")
    kc.settle()
    tj = kc.read("TrainJob", ns, "trainjob-test")
    assert tj["spec"]["suspend"] is False
    [node] = patches(tj)
    assert pod_spec(node)["nodeSelector"] == {"instance-type": "on-demand"}
    hold_and_drain(kc, "cluster-queue")
    assert suspended(kc, ns, "trainjob-test") is True
