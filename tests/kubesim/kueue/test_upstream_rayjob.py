"""Kueue's RayJob integration cases (kubernetes-sigs/kueue v0.20 line: pkg/controller/jobs/rayjob/
{rayjob_controller_test.go,rayjob_webhook_test.go}, test/integration/singlecluster/controller/jobs/rayjob/ and the
RayJob cases of test/e2e/singlecluster/extended/kuberay_test.go), each test named after its upstream case and re-told
against a served kubesim through the official client; nothing is carried over. How the re-telling differs from
upstream, and what is left out: tests/kubesim/kueue/test_upstream_raycluster.py.
"""

from __future__ import annotations

import pytest
from kubernetes.client.rest import ApiException

from tests.kubesim import ray as R
from tests.kubesim.kueue.conftest import KUEUE, Cluster
from tests.kubesim.kueue.test_upstream_controllers import cluster_queue, cond, flavor, fq
from tests.kubesim.kueue.test_upstream_raycluster import (
    MULTIKUEUE,
    POOL,
    default_flavor_queue,
    podsets,
    rayjob,
    read,
    refusal,
    selectors,
    two_flavor_queue,
    workload,
)

# -- pkg/controller/jobs/rayjob/rayjob_controller_test.go ------------------------------------------------------------


def test_pod_sets_with_default_job_submitter(kc: Cluster):
    ns = kc.namespace()
    rayjob(kc, ns, "rayjob", "nowhere", R.worker_group("group1", 2))
    kc.settle()
    wl = workload(kc, ns, "rayjobs", "rayjob")
    assert podsets(wl) == [("head", 1), ("group1", 2), ("submitter", 1)]
    assert wl["spec"]["podSets"][2]["template"] == {
        "spec": {
            "containers": [
                {
                    "name": "ray-job-submitter",
                    "image": R.IMAGE,
                    "resources": {
                        "limits": {"cpu": "1", "memory": "1Gi"},
                        "requests": {"cpu": "500m", "memory": "200Mi"},
                    },
                }
            ],
            "restartPolicy": "Never",
        }
    }


def test_pod_sets_with_submitter_job_pod_template_override(kc: Cluster):
    ns = kc.namespace()
    submitter = {"spec": {"restartPolicy": "Never", "containers": [{"name": "mine", "image": "busybox:1.36"}]}}
    rayjob(kc, ns, "rayjob", "nowhere", submitterPodTemplate=submitter)
    kc.settle()
    assert workload(kc, ns, "rayjobs", "rayjob")["spec"]["podSets"][2]["template"] == submitter


def test_pod_sets_with_sidecar_submission_mode_accounts_for_the_injected_submitter_on_the_head_pod_set(kc: Cluster):
    ns = kc.namespace()
    rayjob(kc, ns, "rayjob", "nowhere", submissionMode="SidecarMode")
    kc.settle()
    wl = workload(kc, ns, "rayjobs", "rayjob")
    assert podsets(wl) == [("head", 1), ("workers-group-0", 1)]
    assert [c["name"] for c in wl["spec"]["podSets"][0]["template"]["spec"]["containers"]] == [
        "ray-head",
        "ray-job-submitter",
    ]


def test_pod_sets_with_num_of_hosts_greater_than_1(kc: Cluster):
    ns = kc.namespace()
    rayjob(kc, ns, "rayjob", "nowhere", R.worker_group("group1", 2, numOfHosts=3))
    kc.settle()
    assert podsets(workload(kc, ns, "rayjobs", "rayjob")) == [("head", 1), ("group1", 6), ("submitter", 1)]


@pytest.mark.parametrize(
    ("case", "job_status", "deployment", "finished", "reason"),
    [
        ("jobStatus=Running, jobDeploymentStatus=Running", "RUNNING", "Running", False, None),
        ("jobStatus=Succeeded, jobDeploymentStatus=Complete", "SUCCEEDED", "Complete", True, "Succeeded"),
        ("jobStatus=Failed, jobDeploymentStatus=Complete", "FAILED", "Complete", True, "Failed"),
        ("jobStatus=Failed, jobDeploymentStatus=Failed", "FAILED", "Failed", True, "Failed"),
        (
            "jobStatus=Running, jobDeploymentStatus=Failed (when activeDeadlineSeconds is exceeded)",
            "RUNNING",
            "Failed",
            True,
            "Failed",
        ),
    ],
)
def test_ray_job_finished(kc: Cluster, case: str, job_status: str, deployment: str, finished: bool, reason):
    """Test_RayJobFinished: the RayJob is KubeRay-free (managedBy MultiKueue) and admitted; the test writes status."""
    two_flavor_queue(kc)
    ns = kc.namespace()
    kc.local_queue("queue", "cluster-queue", ns)
    rayjob(kc, ns, "rayjob", "queue", managedBy=MULTIKUEUE)
    kc.settle()
    status = {"jobStatus": job_status, "jobDeploymentStatus": deployment, "message": "the message"}
    kc.custom.patch_namespaced_custom_object_status(*R.RAY, ns, "rayjobs", "rayjob", {"status": status})
    kc.settle()
    finish = cond(workload(kc, ns, "rayjobs", "rayjob"), "Finished")
    assert (finish is not None) is finished
    if finished:
        assert finish == ("True", reason, "the message")


# -- pkg/controller/jobs/rayjob/rayjob_webhook_test.go ----------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "extra", "workers", "want"),
    [
        (
            "invalid managed - has cluster selector and RayClusterSpec",
            {"clusterSelector": {"ray.io/cluster": "existing"}},
            None,
            "spec.clusterSelector: Forbidden: a kueue managed job should not use an existing cluster",
        ),
        (
            "invalid managed - by queue",
            {"shutdownAfterJobFinishes": False},
            None,
            "spec.shutdownAfterJobFinishes: Invalid value: false: a kueue managed job should delete the cluster after "
            "finishing",
        ),
        (
            "invalid managed - has auto scaler",
            {"rayClusterSpec": {**R.cluster_spec(R.worker_group("w")), "enableInTreeAutoscaling": True}},
            None,
            "spec.rayClusterSpec.enableInTreeAutoscaling: Invalid value: true: a kueue managed job should only use "
            "autoscaling when workload slicing is enabled",
        ),
        (
            "invalid managed - too many worker groups",
            {},
            [R.worker_group(f"group-{i}") for i in range(18)],
            "spec.rayClusterSpec.workerGroupSpecs: Too many: 18: must have at most 17 items",
        ),
        (
            "worker group uses head name",
            {},
            [R.worker_group("head")],
            'spec.rayClusterSpec.workerGroupSpecs[0].groupName: Forbidden: "head" is reserved for the head group',
        ),
    ],
)
def test_validate_create_rayjob(kc: Cluster, case: str, extra: dict, workers, want: str):
    """Upstream: rayjob_webhook_test.go TestValidateCreate."""
    ns = kc.namespace()
    with pytest.raises(ApiException) as exc:
        rayjob(kc, ns, "job", "queue", *(workers or ()), **extra)
    status, message = refusal(exc)
    assert status == 403
    assert message.startswith('admission webhook "vrayjob.kb.io" denied the request: ')
    assert want in message


def test_validate_create_invalid_managed_no_cluster_selector_and_no_ray_cluster_spec(kc: Cluster):
    ns = kc.namespace()
    body = R.rayjob_body("job", labels=R.queued("queue"))
    del body["spec"]["rayClusterSpec"]
    with pytest.raises(ApiException) as exc:
        R.create(kc.custom, ns, body)
    assert (
        "spec.rayClusterSpec: Forbidden: rayClusterSpec is required for Kueue-managed jobs that don't use "
        "clusterSelector" in refusal(exc)[1]
    )


def test_validate_update_queue_name_removal_is_rejected_when_the_job_is_unsuspended(kc: Cluster):
    """Upstream: "queue name removal is rejected when the job is unsuspended and ValidateRayAndSparkJobUpdates is
    enabled" (on in v0.20)."""
    two_flavor_queue(kc)
    ns = kc.namespace()
    kc.local_queue("queue", "cluster-queue", ns)
    rayjob(kc, ns, "job", "queue", entrypoint="sleep 600")
    kc.settle()
    with pytest.raises(ApiException) as exc:
        R.patch(kc.custom, ns, "rayjobs", "job", {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": None}}})
    assert exc.value.status == 403 and "field is immutable" in refusal(exc)[1]


def test_validate_update_invalid_unmanaged(kc: Cluster):
    """An unmanaged RayJob's updates are not Kueue's to judge."""
    ns = kc.namespace()
    rayjob(kc, ns, "job", None, suspend=True, shutdownAfterJobFinishes=False)
    R.patch(kc.custom, ns, "rayjobs", "job", {"spec": {"entrypoint": "sleep 1"}})
    assert read(kc, ns, "rayjobs", "job")["spec"]["entrypoint"] == "sleep 1"


# -- test/integration/singlecluster/controller/jobs/rayjob/rayjob_controller_test.go -----------------------------


def test_should_reconcile_rayjobs(kc: Cluster):
    ns = kc.namespace()
    created = rayjob(kc, ns, "test-job", "queue", suspend=False, entrypoint="sleep 30")
    assert created["spec"]["suspend"] is True
    kc.settle()
    assert read(kc, ns, "rayjobs", "test-job")["status"]["jobDeploymentStatus"] == "Suspended"
    wl = workload(kc, ns, "rayjobs", "test-job")
    ref = wl["metadata"]["ownerReferences"][0]
    assert (ref["kind"], ref["uid"], ref["controller"]) == ("RayJob", created["metadata"]["uid"], True)
    assert wl["metadata"]["name"].startswith("rayjob-test-job-")
    assert podsets(wl) == [("head", 1), ("workers-group-0", 1), ("submitter", 1)]

    R.patch(kc.custom, ns, "rayjobs", "test-job", {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "test-queue"}}})
    kc.settle()
    assert workload(kc, ns, "rayjobs", "test-job")["spec"]["queueName"] == "test-queue"

    two_flavor_queue(kc)
    kc.local_queue("test-queue", "cluster-queue", ns)
    kc.settle()
    job = read(kc, ns, "rayjobs", "test-job")
    assert job["spec"]["suspend"] is False
    assert selectors(job) == [{POOL: "h100"}, {POOL: "l40s-shared"}]
    assert job["spec"]["submitterPodTemplate"]["spec"]["nodeSelector"] == {POOL: "l40s-shared"}
    assert job["status"]["jobDeploymentStatus"] == "Running"
    assert R.workloads(kc.custom, ns, "rayclusters", job["status"]["rayClusterName"]) == []

    kc.settle(30)
    assert cond(workload(kc, ns, "rayjobs", "test-job"), "Finished") == (
        "True",
        "Succeeded",
        "Job finished successfully.",
    )


def test_a_rayjob_created_in_an_unmanaged_namespace_is_not_suspended_and_a_workload_is_not_created(kc: Cluster):
    rayjob(kc, "kube-system", "test-job", None, suspend=False, entrypoint="sleep 600")
    kc.settle()
    assert read(kc, "kube-system", "rayjobs", "test-job")["spec"]["suspend"] is False
    assert R.workloads(kc.custom, "kube-system", "rayjobs", "test-job") == []
    kc.custom.delete_namespaced_custom_object(*R.RAY, "kube-system", "rayjobs", "test-job")
    kc.settle()


def test_should_reconcile_rayjobs_only_when_queue_is_set(kc: Cluster):
    """Upstream: "Should reconcile jobs only when queue is set" (RayJob suite)."""
    ns = kc.namespace()
    rayjob(kc, ns, "test-job", None, suspend=True)
    kc.settle()
    assert R.workloads(kc.custom, ns, "rayjobs", "test-job") == []
    R.patch(kc.custom, ns, "rayjobs", "test-job", {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "test-queue"}}})
    kc.settle()
    assert len(R.workloads(kc.custom, ns, "rayjobs", "test-job")) == 1


def test_should_schedule_rayjobs_as_they_fit_in_their_cluster_queue(kc: Cluster):
    """Upstream: "Should schedule jobs as they fit in their ClusterQueue" (RayJob suite)."""
    flavor(kc, "on-demand", **{POOL: "h100"})
    flavor(kc, "spot-untainted", **{POOL: "l40s-shared"})
    cluster_queue(kc, "dev-clusterqueue", [("cpu", [fq("spot-untainted", "cpu", "1"), fq("on-demand", "cpu", "5")])])
    ns = kc.namespace()
    kc.local_queue("local-queue", "dev-clusterqueue", ns)
    rayjob(kc, ns, "dev-job", "local-queue", R.worker_group("workers-group-0", 1, {"cpu": "1"}), entrypoint="sleep 60")
    kc.settle()
    job = read(kc, ns, "rayjobs", "dev-job")
    assert job["spec"]["suspend"] is False
    assert selectors(job) == [{POOL: "l40s-shared"}, {POOL: "h100"}]
    assert job["status"]["jobDeploymentStatus"] == "Running"


def test_should_persist_admission_constraints_on_default_submitter_pod_template(kc: Cluster):
    """Also TestNodeSelectors' "K8sJobMode with nil SubmitterPodTemplate persists admission constraints" and
    TestRestorePodSetsInfo's "K8sJobMode with matching length restores pod sets including the submitter"."""
    two_flavor_queue(kc)
    ns = kc.namespace()
    kc.local_queue("queue", "cluster-queue", ns)
    created = rayjob(kc, ns, "rayjob", "queue", entrypoint="sleep 600")
    assert "submitterPodTemplate" not in created["spec"]
    kc.settle()
    job = read(kc, ns, "rayjobs", "rayjob")
    template = job["spec"]["submitterPodTemplate"]
    assert template["spec"]["nodeSelector"] == {POOL: "l40s-shared"}
    assert template["metadata"]["labels"]["kueue.x-k8s.io/podset"] == "submitter"
    submitter = kc.batch.read_namespaced_job("rayjob", ns)
    assert submitter.spec.template.spec.node_selector == {POOL: "l40s-shared"}
    wl = workload(kc, ns, "rayjobs", "rayjob")
    kc.custom.patch_namespaced_custom_object(
        *KUEUE, ns, "workloads", wl["metadata"]["name"], {"spec": {"active": False}}
    )
    kc.settle()
    job = read(kc, ns, "rayjobs", "rayjob")
    assert job["spec"]["suspend"] is True
    assert "nodeSelector" not in job["spec"]["submitterPodTemplate"]["spec"]
    assert selectors(job) == [None, None]


def test_should_preempt_lower_priority_rayjobs_when_resource_insufficient(kc: Cluster):
    flavor(kc, "default", **{POOL: "h100"})
    cluster_queue(
        kc, "cluster-queue", [("cpu", [fq("default", "cpu", "3")])], preemption={"withinClusterQueue": "LowerPriority"}
    )
    kc.priority_class("low", 100)
    kc.priority_class("high", 1000)
    ns = kc.namespace()
    kc.local_queue("queue", "cluster-queue", ns)
    rayjob(
        kc,
        ns,
        "rayjob-with-low-priority",
        "queue",
        R.worker_group("w", 1, {"cpu": "1"}),
        entrypoint="sleep 600",
        labels={"kueue.x-k8s.io/priority-class": "low"},
    )
    kc.settle()
    low = read(kc, ns, "rayjobs", "rayjob-with-low-priority")
    assert low["status"]["jobDeploymentStatus"] == "Running"
    low_cluster = low["status"]["rayClusterName"]
    rayjob(
        kc,
        ns,
        "rayjob-with-high-priority",
        "queue",
        R.worker_group("w", 1, {"cpu": "1"}),
        entrypoint="sleep 600",
        labels={"kueue.x-k8s.io/priority-class": "high"},
    )
    kc.settle()
    low = read(kc, ns, "rayjobs", "rayjob-with-low-priority")
    assert (low["spec"]["suspend"], low["status"]["jobDeploymentStatus"]) == (True, "Suspended")
    assert R.cluster_pods(kc.core, ns, low_cluster) == []
    assert cond(workload(kc, ns, "rayjobs", "rayjob-with-low-priority"), "Evicted")[:2] == ("True", "Preempted")
    assert read(kc, ns, "rayjobs", "rayjob-with-high-priority")["status"]["jobDeploymentStatus"] == "Running"


def test_should_skip_reconciliation_for_rayjobs_with_cluster_selector(kc: Cluster):
    ns = kc.namespace()
    body = R.rayjob_body("rayjob", labels=R.queued("queue"), clusterSelector={"ray.io/cluster": "existing"})
    del body["spec"]["rayClusterSpec"]
    R.create(kc.custom, ns, body)
    kc.settle()
    assert R.workloads(kc.custom, ns, "rayjobs", "rayjob") == []


# -- test/e2e/singlecluster/extended/kuberay_test.go -------------------------------------------------------------


def test_should_run_a_rayjob_if_admitted(kc: Cluster):
    ns = default_flavor_queue(kc)
    rayjob(
        kc,
        ns,
        "rayjob",
        "main",
        R.worker_group("workers-group-0", 1, {"cpu": "300m", "memory": "300Mi"}),
        entrypoint='python -c "import ray; ray.init(); print(ray.cluster_resources())"',
    )
    kc.settle()
    job = read(kc, ns, "rayjobs", "rayjob")
    assert job["status"]["jobDeploymentStatus"] == "Running"
    assert cond(workload(kc, ns, "rayjobs", "rayjob"), "Admitted")[0] == "True"
    kc.settle(60)  # an entrypoint without `sleep` runs the kubelet's default time
    job = read(kc, ns, "rayjobs", "rayjob")
    assert (job["status"]["jobDeploymentStatus"], job["status"]["jobStatus"]) == ("Complete", "SUCCEEDED")
    assert cond(workload(kc, ns, "rayjobs", "rayjob"), "Finished")[:2] == ("True", "Succeeded")


def test_should_account_for_the_sidecar_mode_submitter_in_the_head_pod_set_quota(kc: Cluster):
    """The head (1 CPU) and the sidecar submitter (500m) need 1500m; a queue of 1 CPU cannot admit them."""
    ns = default_flavor_queue(kc, cpu="1")
    rayjob(kc, ns, "rayjob", "main", R.worker_group("workers-group-0", 0), submissionMode="SidecarMode")
    kc.settle()
    wl = workload(kc, ns, "rayjobs", "rayjob")
    assert cond(wl, "QuotaReserved")[0] == "False"
    kc.custom.patch_cluster_custom_object(
        *KUEUE,
        "clusterqueues",
        "cluster-queue",
        {
            "spec": {
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory"],
                        "flavors": [
                            {
                                "name": "default-flavor",
                                "resources": [
                                    {"name": "cpu", "nominalQuota": "1500m"},
                                    {"name": "memory", "nominalQuota": "8Gi"},
                                ],
                            }
                        ],
                    }
                ]
            }
        },
    )
    kc.settle()
    usage = read_cq_usage(kc)
    assert usage == "1500m"


def read_cq_usage(kc: Cluster) -> str:
    cq = kc.get("clusterqueues", "cluster-queue")
    [flavor_usage] = cq["status"]["flavorsReservation"]
    return next(r["total"] for r in flavor_usage["resources"] if r["name"] == "cpu")
