"""Kueue's JobSet integration cases (kubernetes-sigs/kueue v0.20 line: pkg/controller/jobs/jobset/
jobset_controller_test.go and jobset_webhook_test.go, test/integration/singlecluster/controller/jobs/jobset/
jobset_controller_test.go, test/integration/singlecluster/webhook/jobs/jobset_webhook_test.go and
test/e2e/singlecluster/extended/jobset_test.go), each test named after its upstream case and re-told against a
served kubesim through the official client; nothing is carried over.

How the re-telling differs, and why:
- Upstream's integration suites run Kueue without the JobSet operator and write JobSet status by hand. kubesim runs
  the operator, so where a case needs a status the operator would not reach on its own (exact ready or succeeded
  counts, a JobSet that stays active while suspended) the JobSet names another controller in spec.managedBy, which
  the operator leaves alone (as it does for MultiKueue), and the test writes the status as upstream does.
- Upstream sets quota reservations by hand; kubesim's scheduler reserves, so the queues are shaped to make it choose
  what upstream chose (two flavors for two replicatedJobs), and evictions come from a stopped ClusterQueue.
- Upstream manages jobs without a queue name in some suites; kubesim's Kueue manages only jobs that name a queue
  (manageJobsWithoutQueueName is not emulated), so those steps start from a queue label.
- Changing a replicatedJob's replicas, which upstream's "Should reconcile JobSets" does to a running JobSet, is refused
  by the JobSet operator's webhook in a real cluster (replicatedJobs are immutable); kubesim refuses it too.
Left out: TopologyAwareScheduling (annotations, slices, pod-set groups; TAS is not emulated), MultiKueue and managedBy
defaulting, the pod-level PriorityClass (kubesim ignores pod priorityClassName, as for Jobs), TestRestorePodSetsInfo's
length mismatches (the operator keeps replicatedJobs and pod sets the same length), and the TAS-disabled variants
(TopologyAwareScheduling is on in v0.20).
"""

from __future__ import annotations

import json
import urllib.request

import pytest
from kubernetes.client.rest import ApiException

from tests.kubesim.conftest import JOBSET, jobset_body, replicated_job
from tests.kubesim.kueue.conftest import KUEUE, Cluster
from tests.kubesim.kueue.test_upstream_controllers import (
    check,
    checks,
    cluster_queue,
    cond,
    flavor,
    fq,
    now,
)

POOL = "portal.gpu/pool"  # upstream's instance label; kubesim's nodes carry pools, so pods can run
MANUAL = "example.com/manual"  # a managedBy the JobSet operator leaves alone: the test plays it


def rj(
    name: str,
    replicas: int = 1,
    parallelism: int = 1,
    completions: int | None = None,
    cpu: str = "1",
    seconds: int = 600,
    **pod_spec: object,
) -> dict:
    """testingjobset.ReplicatedJobRequirements: replicas Jobs of parallelism pods (completions default parallelism)."""
    out = replicated_job(name, replicas, parallelism, f"sleep {seconds}", {"cpu": cpu}, **pod_spec)
    if completions is not None:
        out["template"]["spec"]["completions"] = completions
    return out


def jobset_status(kc: Cluster, ns: str, name: str, *statuses: dict) -> None:
    """What upstream's JobsStatus wrapper writes: replicatedJobsStatus entries (missing counts 0)."""
    full = [{"ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 0, **s} for s in statuses]
    kc.custom.patch_namespaced_custom_object_status(
        *JOBSET, ns, "jobsets", name, {"status": {"replicatedJobsStatus": full, "restarts": 0}}
    )
    kc.settle()


def two_flavor_queue(kc: Cluster, name: str = "cluster-queue", on_demand: str = "5", spot: str = "5") -> None:
    flavor(kc, "on-demand", **{POOL: "h100"})
    flavor(kc, "spot", **{POOL: "l40s-shared"})
    cluster_queue(kc, name, [("cpu", [fq("on-demand", "cpu", on_demand), fq("spot", "cpu", spot)])])


def hold_and_drain(kc: Cluster, cq: str) -> None:
    kc.custom.patch_cluster_custom_object(*KUEUE, "clusterqueues", cq, {"spec": {"stopPolicy": "HoldAndDrain"}})
    kc.settle()


def pod_template(js: dict, index: int) -> dict:
    return js["spec"]["replicatedJobs"][index]["template"]["spec"]["template"]


# -- pkg/controller/jobs/jobset/jobset_controller_test.go ---------------------------------------------------------


def test_pod_sets_no_annotations(kc: Cluster):
    ns = kc.namespace()
    kc.jobset(ns, "jobset", "nowhere", rj("job1", 2, 1, 1), rj("job2", 3, 2, 3))
    kc.settle()
    js, wl = kc.read_jobset(ns, "jobset"), kc.jobset_workload(ns, "jobset")
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("job1", 2), ("job2", 6)]
    assert [p["template"] for p in wl["spec"]["podSets"]] == [pod_template(js, 0), pod_template(js, 1)]
    assert [p["topologyRequest"] for p in wl["spec"]["podSets"]] == [
        {
            "podIndexLabel": "batch.kubernetes.io/job-completion-index",
            "subGroupIndexLabel": "jobset.sigs.k8s.io/job-index",
            "subGroupCount": replicas,
        }
        for replicas in (2, 3)
    ]


@pytest.mark.parametrize(
    ("case", "annotation", "key"),
    [
        ("with required topology annotation", "kueue.x-k8s.io/podset-required-topology", "required"),
        ("with preferred topology annotation", "kueue.x-k8s.io/podset-preferred-topology", "preferred"),
    ],
)
def test_pod_sets_with_topology_annotation(kc: Cluster, case: str, annotation: str, key: str):
    ns = kc.namespace()
    first = rj("job1", 2, 1, 1)
    first["template"]["spec"]["template"]["metadata"] = {"annotations": {annotation: "cloud.com/block"}}
    kc.jobset(ns, "jobset", "nowhere", first, rj("job2", 3, 2, 3))
    kc.settle()
    podsets = kc.jobset_workload(ns, "jobset")["spec"]["podSets"]
    assert podsets[0]["topologyRequest"] == {
        key: "cloud.com/block",
        "podIndexLabel": "batch.kubernetes.io/job-completion-index",
        "subGroupIndexLabel": "jobset.sigs.k8s.io/job-index",
        "subGroupCount": 2,
    }
    assert podsets[0]["template"]["metadata"]["annotations"] == {annotation: "cloud.com/block"}
    assert key not in podsets[1]["topologyRequest"]


def _manual_jobset(kc: Cluster, ns: str, name: str, queue: str, *rjobs: dict) -> None:
    kc.jobset(ns, name, queue, *rjobs, managedBy=MANUAL)
    kc.settle()


@pytest.mark.parametrize(
    ("case", "statuses", "want"),
    [
        ("no status", None, []),
        ("empty jobs status", [], []),
        ("single job done", [{"name": "replicated-job-1", "succeeded": 1}], [("replicated-job-1", 2)]),
        ("single job partial done", [{"name": "replicated-job-2", "succeeded": 1}], [("replicated-job-2", 3)]),
        (
            "all done",
            [{"name": "replicated-job-1", "succeeded": 1}, {"name": "replicated-job-2", "succeeded": 2}],
            [("replicated-job-1", 2), ("replicated-job-2", 6)],
        ),
    ],
)
def test_reclaimable_pods(kc: Cluster, case: str, statuses: list | None, want: list):
    two_flavor_queue(kc, on_demand="20")
    ns = kc.namespace()
    kc.local_queue("queue", "cluster-queue", ns)
    _manual_jobset(
        kc, ns, "jobset", "queue", rj("replicated-job-1", 1, 2, 2, "250m"), rj("replicated-job-2", 2, 3, 6, "250m")
    )
    if statuses is not None:
        jobset_status(kc, ns, "jobset", *statuses)
    wl = kc.jobset_workload(ns, "jobset")
    got = [(r["name"], r["count"]) for r in wl.get("status", {}).get("reclaimablePods", [])]
    assert got == want


@pytest.mark.parametrize(
    ("case", "statuses", "ready"),
    [
        (
            "all jobs are ready",
            [{"name": "replicated-job-1", "ready": 1, "succeeded": 1}, {"name": "replicated-job-2", "ready": 3}],
            True,
        ),
        (
            "not all jobs are ready",
            [{"name": "replicated-job-1", "ready": 1}, {"name": "replicated-job-2", "ready": 1, "succeeded": 2}],
            False,
        ),
    ],
)
def test_pods_ready(kc_ready: Cluster, case: str, statuses: list, ready: bool):
    kc = kc_ready
    kc.ks.reset()
    two_flavor_queue(kc, on_demand="20")
    ns = kc.namespace()
    kc.local_queue("queue", "cluster-queue", ns)
    _manual_jobset(kc, ns, "jobset", "queue", rj("replicated-job-1", 2), rj("replicated-job-2", 3))
    jobset_status(kc, ns, "jobset", *statuses)
    assert cond(kc.jobset_workload(ns, "jobset"), "PodsReady")[0] == ("True" if ready else "False")


def test_reconciler_workload_is_created_with_podsets_and_a_prov_req_annotation(kc: Cluster):
    ns = kc.namespace()
    body = jobset_body("jobset", rj("replicated-job-1"), labels={"kueue.x-k8s.io/queue-name": "queue"})
    body["metadata"]["annotations"] = {
        "provreq.kueue.x-k8s.io/ValidUntilSeconds": "0",
        "invalid-provreq-prefix/Foo": "Bar",
    }
    kc.custom.create_namespaced_custom_object(*JOBSET, ns, "jobsets", body)
    kc.settle()
    wl = kc.jobset_workload(ns, "jobset")
    assert wl["metadata"]["annotations"] == {"provreq.kueue.x-k8s.io/ValidUntilSeconds": "0"}
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("replicated-job-1", 1)]


def test_reconciler_workload_is_created_with_podsets_and_workload_priority_class(kc: Cluster):
    ns = kc.namespace()
    kc.priority_class("test-wpc", 100)
    kc.jobset(ns, "jobset", "queue", rj("replicated-job-1"), priority_class="test-wpc")
    kc.settle()
    spec = kc.jobset_workload(ns, "jobset")["spec"]
    assert spec["priorityClassRef"] == {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "test-wpc"}
    assert spec["priority"] == 100


# -- pkg/controller/jobs/jobset/jobset_webhook_test.go and the webhook integration suite -----------------------------


def _status(exc: pytest.ExceptionInfo[ApiException]) -> dict:
    return json.loads(exc.value.body)


def test_validate_create_simple_and_with_prebuilt_workload(kc: Cluster):
    ns = kc.namespace()
    kc.jobset(ns, "simple", "queue")
    kc.jobset(ns, "prebuilt", "queue", labels={"kueue.x-k8s.io/prebuilt-workload-name": "workload-name"})
    body = kc.read_jobset(ns, "prebuilt")
    assert body["metadata"]["labels"]["kueue.x-k8s.io/prebuilt-workload-name"] == "workload-name"


def test_validate_create_invalid_queue_name_label(kc: Cluster):
    """Also the webhook suite's "the creation doesn't succeed if the queue name is invalid" (Forbidden)."""
    ns = kc.namespace()
    with pytest.raises(ApiException) as exc:
        kc.jobset(ns, "jobset", "queue_name")
    assert exc.value.status == 403
    assert _status(exc)["message"] == (
        'admission webhook "vjobset.kb.io" denied the request: metadata.labels[kueue.x-k8s.io/queue-name]: '
        'Invalid value: "queue_name": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric '
        "characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex "
        r"used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
    )


@pytest.mark.parametrize(
    ("case", "default_lq", "queue", "want_queue"),
    [
        ("TestDefault_WithQueueLabel", False, "queue", "queue"),
        ("TestDefault_WithoutQueueLabel", False, None, None),
        ("default lq is created, job doesn't have queue label", True, None, "default"),
        ("default lq is created, job has queue label", True, "queue", "queue"),
        ("default lq isn't created, job doesn't have queue label", False, None, None),
    ],
)
def test_default(kc: Cluster, case: str, default_lq: bool, queue: str | None, want_queue: str | None):
    ns = kc.namespace()
    if default_lq:
        kc.local_queue("default", "cluster-queue", ns)
    js = kc.jobset(ns, "jobset", queue)
    assert (js["metadata"].get("labels") or {}).get("kueue.x-k8s.io/queue-name") == want_queue
    assert js["spec"].get("suspend") is (True if want_queue else None)


# -- test/integration/singlecluster/controller/jobs/jobset/jobset_controller_test.go --------------------------------


def test_should_reconcile_jobsets(kc: Cluster):
    ns = kc.namespace()
    kc.priority_class("test-priority-class", 10)
    created = kc.jobset(
        ns,
        "test-job",
        "queue",
        rj("replicated-job-1", 1, seconds=30),
        rj("replicated-job-2", 3, seconds=30),
        priority_class="test-priority-class",
        suspend=False,
    )
    assert created["spec"]["suspend"] is True
    kc.settle()
    wl = kc.jobset_workload(ns, "test-job")
    assert wl["metadata"]["ownerReferences"][0]["uid"] == created["metadata"]["uid"]
    assert (wl["spec"]["queueName"], wl["spec"]["priority"]) == ("queue", 10)

    # the Workload follows the queue name while the JobSet is suspended
    labels = {"kueue.x-k8s.io/queue-name": "test-queue"}
    kc.custom.patch_namespaced_custom_object(*JOBSET, ns, "jobsets", "test-job", {"metadata": {"labels": labels}})
    kc.settle()
    assert kc.jobset_workload(ns, "test-job")["spec"]["queueName"] == "test-queue"

    # a second Workload the JobSet controls that does not match it is deleted
    second = {
        "kind": "Workload",
        "metadata": {"name": "second-workload", "ownerReferences": wl["metadata"]["ownerReferences"]},
        "spec": {**wl["spec"], "podSets": [{**wl["spec"]["podSets"][0], "count": 2}, wl["spec"]["podSets"][1]]},
    }
    kc.create("workloads", second, ns)
    kc.settle()
    assert [
        w["metadata"]["name"] for w in kc.custom.list_namespaced_custom_object(*KUEUE, ns, "workloads")["items"]
    ] == [wl["metadata"]["name"]]
    assert ("DeletedWorkload", f"Deleted not matching Workload: {ns}/second-workload") in kc.events(ns, "test-job")

    # admitted with a flavor per replicatedJob: on-demand holds only the first one
    two_flavor_queue(kc, on_demand="1")
    kc.local_queue("test-queue", "cluster-queue", ns)
    kc.settle()
    js = kc.read_jobset(ns, "test-job")
    assert js["spec"]["suspend"] is False
    assert ("Started", "Admitted by clusterQueue cluster-queue") in kc.events(ns, "test-job")
    assert pod_template(js, 0)["spec"]["nodeSelector"] == {POOL: "h100"}
    assert pod_template(js, 1)["spec"]["nodeSelector"] == {POOL: "l40s-shared"}

    # the JobSet operator refuses a replicas change of a running JobSet
    js["spec"]["replicatedJobs"][0]["replicas"] = 2
    with pytest.raises(ApiException) as exc:
        kc.custom.replace_namespaced_custom_object(*JOBSET, ns, "jobsets", "test-job", js)
    assert exc.value.status == 422 and _status(exc)["details"]["causes"][0]["field"] == "spec.replicatedJobs"

    kc.settle(30)
    assert cond(kc.jobset_workload(ns, "test-job"), "Finished") == (
        "True",
        "Succeeded",
        "jobset completed successfully",
    )


def test_a_jobset_created_in_an_unmanaged_namespace_is_not_suspended_and_a_workload_is_not_created(kc: Cluster):
    """kube-system is outside the default managedJobsNamespaceSelector. Upstream's JobSet has no queue name; one with a
    queue name is suspended by the webhook (which does not look at the namespace then) but still gets no Workload."""
    kc.jobset("kube-system", "test-job", None, rj("replicated-job-1", 1), rj("replicated-job-2", 3), suspend=False)
    queued = kc.jobset("kube-system", "queued", "queue", rj("replicated-job-1", 1))
    kc.settle()
    assert kc.read_jobset("kube-system", "test-job")["spec"]["suspend"] is False
    assert queued["spec"]["suspend"] is True
    assert kc.jobset_workloads("kube-system", "test-job") == [] and kc.jobset_workloads("kube-system", "queued") == []


def test_should_finish_the_preemption_when_the_jobset_becomes_inactive(kc: Cluster):
    two_flavor_queue(kc)
    ns = kc.namespace()
    kc.local_queue("queue", "cluster-queue", ns)
    _manual_jobset(kc, ns, "test-job", "queue", rj("replicated-job-1"))
    assert kc.read_jobset(ns, "test-job")["spec"]["suspend"] is False
    jobset_status(kc, ns, "test-job", {"name": "replicated-job-1", "active": 1})
    kc.custom.patch_cluster_custom_object(*KUEUE, "clusterqueues", "cluster-queue", {"spec": {"stopPolicy": "Hold"}})
    wl = kc.jobset_workload(ns, "test-job")
    evicted = {
        "type": "Evicted",
        "status": "True",
        "reason": "Preempted",
        "message": "By test",
        "lastTransitionTime": now(kc),
    }
    kc.custom.patch_namespaced_custom_object_status(
        *KUEUE,
        ns,
        "workloads",
        wl["metadata"]["name"],
        {"status": {"conditions": [*wl["status"]["conditions"], evicted]}},
    )
    kc.settle()
    assert kc.read_jobset(ns, "test-job")["spec"]["suspend"] is True
    kc.settle(5)
    assert cond(kc.jobset_workload(ns, "test-job"), "QuotaReserved")[0] == "True"  # still active
    jobset_status(kc, ns, "test-job", {"name": "replicated-job-1", "active": 0})
    wl = kc.jobset_workload(ns, "test-job")
    assert cond(wl, "QuotaReserved")[0] == "False"
    assert cond(wl, "Requeued") == ("True", "Preempted", "By test")


def test_should_allow_to_create_jobset_with_one_replicated_job_replica_count_0(kc: Cluster):
    two_flavor_queue(kc)
    ns = kc.namespace()
    kc.local_queue("queue", "cluster-queue", ns)
    kc.jobset(
        ns,
        "mix-jobset",
        "queue",
        rj("replicated-job-1", 2, 2, 2, "250m"),
        rj("replicated-job-2-empty", 0, 0, 0, "250m"),
    )
    kc.settle()
    wl = kc.jobset_workload(ns, "mix-jobset")
    assert [(p["name"], p["count"], p["topologyRequest"]["subGroupCount"]) for p in wl["spec"]["podSets"]] == [
        ("replicated-job-1", 4, 2),
        ("replicated-job-2-empty", 0, 0),
    ]
    assert cond(wl, "Admitted")[0] == "True"
    assert kc.read_jobset(ns, "mix-jobset")["spec"]["suspend"] is False


def test_labels_and_annotations_should_be_propagated_from_admission_check_to_job(kc: Cluster):
    check(kc, "check", active=True)
    flavor(kc, "test-flavor", **{POOL: "h100"})
    cluster_queue(kc, "prod-cq-with-checks", [("cpu", [fq("test-flavor", "cpu", "5")])], **checks("check"))
    ns = kc.namespace()
    kc.local_queue("queue", "prod-cq-with-checks", ns)
    first = rj("replicated-job-1", 1)
    first["template"]["spec"]["template"]["metadata"] = {
        "annotations": {"old-ann-key": "old-ann-value"},
        "labels": {"old-label-key": "old-label-value"},
    }
    kc.jobset(ns, "test-job", "queue", first, rj("replicated-job-2", 3))
    kc.settle()
    assert kc.read_jobset(ns, "test-job")["spec"]["suspend"] is True
    wl = kc.jobset_workload(ns, "test-job")
    toleration = {"key": "selector1", "value": "selector-value1", "operator": "Equal", "effect": "NoSchedule"}
    updates = [
        {
            "name": "replicated-job-1",
            "annotations": {"ann1": "ann-value1"},
            "labels": {"label1": "label-value1"},
            "nodeSelector": {"selector1": "selector-value1"},
            "tolerations": [toleration],
        },
        {
            "name": "replicated-job-2",
            "annotations": {"ann1": "ann-value2"},
            "labels": {"label1": "label-value2"},
            "nodeSelector": {"selector1": "selector-value2"},
        },
    ]
    state = {"name": "check", "state": "Ready", "message": "", "lastTransitionTime": now(kc), "podSetUpdates": updates}
    kc.custom.patch_namespaced_custom_object_status(
        *KUEUE, ns, "workloads", wl["metadata"]["name"], {"status": {"admissionChecks": [state]}}
    )
    kc.settle()
    js = kc.read_jobset(ns, "test-job")
    assert js["spec"]["suspend"] is False
    first, second = pod_template(js, 0), pod_template(js, 1)
    assert {"ann1": "ann-value1", "old-ann-key": "old-ann-value"}.items() <= first["metadata"]["annotations"].items()
    assert {"label1": "label-value1", "old-label-key": "old-label-value"}.items() <= first["metadata"]["labels"].items()
    assert first["spec"]["nodeSelector"]["selector1"] == "selector-value1"
    assert first["spec"]["tolerations"] == [toleration]
    assert second["spec"]["nodeSelector"]["selector1"] == "selector-value2"
    assert second["metadata"]["annotations"]["ann1"] == "ann-value2"
    assert second["metadata"]["labels"]["label1"] == "label-value2"

    kc.custom.delete_namespaced_custom_object(*KUEUE, ns, "localqueues", "queue")
    hold_and_drain(kc, "prod-cq-with-checks")
    js = kc.read_jobset(ns, "test-job")
    assert js["spec"]["suspend"] is True
    first, second = pod_template(js, 0), pod_template(js, 1)
    assert first["metadata"] == {
        "annotations": {"old-ann-key": "old-ann-value"},
        "labels": {"old-label-key": "old-label-value"},
    }
    assert "nodeSelector" not in first["spec"] and "nodeSelector" not in second["spec"]
    assert "metadata" not in second


def test_should_reconcile_jobs_only_when_queue_is_set(kc: Cluster):
    """A JobSet that runs may not gain a queue name (Kueue's webhook), so this one waits suspended by its user."""
    ns = kc.namespace()
    kc.jobset(ns, "test-job", None, rj("replicated-job-1", 1), rj("replicated-job-2", 3), suspend=True)
    kc.settle()
    assert kc.jobset_workloads(ns, "test-job") == []
    labels = {"kueue.x-k8s.io/queue-name": "test-queue"}
    kc.custom.patch_namespaced_custom_object(*JOBSET, ns, "jobsets", "test-job", {"metadata": {"labels": labels}})
    kc.settle()
    assert kc.jobset_workload(ns, "test-job")["spec"]["queueName"] == "test-queue"


WAIT = ("False", "WaitForStart", "Not all pods are ready or succeeded")
STARTED = ("True", "Started", "All pods reached readiness and the workload is running")
PROGRESS = [{"name": "replicated-job-1", "ready": 1}, {"name": "replicated-job-2", "ready": 2, "succeeded": 1}]


@pytest.mark.parametrize(
    ("entry", "before_status", "before", "status", "suspended", "want"),
    [
        ("No progress", None, None, [], False, WAIT),
        ("Running JobSet", None, None, PROGRESS, False, STARTED),
        ("Running JobSet; PodsReady=False before", None, WAIT, PROGRESS, False, STARTED),
        ("JobSet suspended; PodsReady=True before", PROGRESS, STARTED, PROGRESS, True, WAIT),
    ],
)
def test_single_job_at_different_stages_of_progress_towards_completion(
    kc_ready: Cluster,
    entry: str,
    before_status: list | None,
    before: tuple | None,
    status: list,
    suspended: bool,
    want: tuple,
):
    kc = kc_ready
    kc.ks.reset()
    flavor(kc, "default", **{POOL: "h100"})
    cluster_queue(kc, "cq", [("cpu", [fq("default", "cpu", "10")])])
    ns = kc.namespace()
    kc.local_queue("test-queue", "cq", ns)
    _manual_jobset(kc, ns, "test-job", "test-queue", rj("replicated-job-1", 1), rj("replicated-job-2", 3))
    assert kc.read_jobset(ns, "test-job")["spec"]["suspend"] is False
    if before_status is not None:
        jobset_status(kc, ns, "test-job", *before_status)
    if before is not None:
        assert cond(kc.jobset_workload(ns, "test-job"), "PodsReady") == before
    jobset_status(kc, ns, "test-job", *status)
    if suspended:
        hold_and_drain(kc, "cq")
    assert cond(kc.jobset_workload(ns, "test-job"), "PodsReady") == want


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


def test_should_schedule_jobsets_as_they_fit_in_their_cluster_queue(kc: Cluster):
    ns = _dev_queue(kc)
    kc.jobset(ns, "dev-job", "local-queue", rj("replicated-job-1", 1), rj("replicated-job-2", 3))
    kc.settle()
    js = kc.read_jobset(ns, "dev-job")
    assert js["spec"]["suspend"] is False
    assert pod_template(js, 0)["spec"]["nodeSelector"] == {POOL: "l40s-shared"}
    assert pod_template(js, 1)["spec"]["nodeSelector"] == {POOL: "h100"}
    metrics = _metrics(kc)
    assert ('kueue_pending_workloads{cluster_queue="dev-clusterqueue",status="active"'
            ',replica_role="standalone"} 0') in metrics
    assert 'kueue_admitted_workloads_total{cluster_queue="dev-clusterqueue",replica_role="standalone"} 1' in metrics


def test_should_allow_reclaim_of_resources_that_are_no_longer_needed(kc: Cluster):
    ns = _dev_queue(kc)
    kc.jobset(
        ns,
        "dev-jobset1",
        "local-queue",
        rj("replicated-job-1", 2, 4, 8, "250m"),
        rj("replicated-job-2", 3, 4, 4, "250m"),
        managedBy=MANUAL,
    )
    kc.settle()
    assert kc.read_jobset(ns, "dev-jobset1")["spec"]["suspend"] is False
    kc.jobset(ns, "dev-jobset2", "local-queue", rj("replicated-job-1", 2), rj("replicated-job-2", 1))
    kc.settle()
    assert kc.read_jobset(ns, "dev-jobset2")["spec"]["suspend"] is True
    assert ('kueue_pending_workloads{cluster_queue="dev-clusterqueue",status="inadmissible"'
            ',replica_role="standalone"} 1') in _metrics(kc)
    jobset_status(
        kc,
        ns,
        "dev-jobset1",
        {"name": "replicated-job-1", "succeeded": 2},
        {"name": "replicated-job-2", "succeeded": 1},
    )
    wl = kc.jobset_workload(ns, "dev-jobset1")
    assert wl["status"]["reclaimablePods"] == [
        {"name": "replicated-job-1", "count": 8},
        {"name": "replicated-job-2", "count": 4},
    ]
    assert kc.read_jobset(ns, "dev-jobset2")["spec"]["suspend"] is False
    assert ('kueue_reserving_active_workloads{cluster_queue="dev-clusterqueue"'
            ',replica_role="standalone"} 2') in _metrics(kc)


# -- test/e2e/singlecluster/extended/jobset_test.go ------------------------------------------------------------------


def test_should_run_a_jobset_if_admitted(kc: Cluster):
    kc.create("resourceflavors", {"kind": "ResourceFlavor", "metadata": {"name": "default-flavor"}, "spec": {}})
    group = {
        "coveredResources": ["cpu", "memory"],
        "flavors": [
            {
                "name": "default-flavor",
                "resources": [{"name": "cpu", "nominalQuota": "2"}, {"name": "memory", "nominalQuota": "2G"}],
            }
        ],
    }
    kc.create(
        "clusterqueues",
        {
            "kind": "ClusterQueue",
            "metadata": {"name": "cluster-queue"},
            "spec": {"namespaceSelector": {}, "resourceGroups": [group]},
        },
    )
    ns = kc.namespace()
    kc.local_queue("main", "cluster-queue", ns)
    job = rj("replicated-job-1", 2, 2, 2, "500m", seconds=1)
    job["template"]["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "500m", "memory": "200M"},
        "limits": {"cpu": "500m", "memory": "200M"},
    }
    kc.jobset(ns, "job-set", "main", job)
    kc.settle(5)
    assert cond(kc.jobset_workload(ns, "job-set"), "Finished")[:2] == ("True", "Succeeded")


def test_should_allow_to_suspend_a_jobset_when_injected_node_selector(kc: Cluster):
    """Also TestRestorePodSetsInfo's "matching length restores pod sets": the template is back as submitted."""
    flavor(kc, "on-demand", **{"instance-type": "on-demand"})
    flavor(kc, "spot", **{"instance-type": "spot"})
    cluster_queue(
        kc,
        "cluster-queue",
        [("cpu", [fq("on-demand", "cpu", "1"), fq("spot", "cpu", "1")])],
        preemption={"withinClusterQueue": "LowerPriority"},
    )
    ns = kc.namespace()
    kc.local_queue("main", "cluster-queue", ns)
    kc.jobset(ns, "job-set-suspend", "main", rj("replicated-job-1", 1, 1, 1, "500m"))
    kc.settle()
    js = kc.read_jobset(ns, "job-set-suspend")
    assert js["spec"]["suspend"] is False
    assert pod_template(js, 0)["spec"]["nodeSelector"] == {"instance-type": "on-demand"}
    hold_and_drain(kc, "cluster-queue")
    js = kc.read_jobset(ns, "job-set-suspend")
    assert js["spec"]["suspend"] is True
    assert pod_template(js, 0) == rj("replicated-job-1", 1, 1, 1, "500m")["template"]["spec"]["template"]
