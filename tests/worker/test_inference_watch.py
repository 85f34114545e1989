"""An inference service followed by the real watcher in kubesim: never queued, running once a replica is ready,
scaled (kubectl rollout status answering), and its GPU-hours those of its ready replicas until it is stopped."""

import shutil
import subprocess
from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError

from apps.org.models import Project
from apps.usage.models import UsageInterval
from apps.workloads import services
from apps.workloads.models import Status, Workload
from tests.worker.conftest import serving_pool, wait_for
from worker import tasks
from worker.status_map import parse_time
from worker.watcher import ready_changed_at

GPU = "nvidia.com/gpu"
KUBECTL = shutil.which("kubectl")


@pytest.fixture
def serving(kubesim, org):
    return serving_pool(kubesim, org, cards=3)


def _row(workload: Workload) -> Workload:
    return Workload.objects.get(pk=workload.pk)


def _intervals(workload: Workload) -> list[tuple[int, bool]]:
    return [(units, ended is not None) for units, ended in UsageInterval.objects.filter(
        workload=workload).order_by("started_at").values_list("units", "ended_at")]


def test_a_service_runs_unqueued_scales_and_counts_its_ready_gpus(kubesim, cluster, org, watcher, serving):
    vision = Project.objects.get(slug="vision")
    values = {"project": vision, "node_pool": serving, "name": "llama", "image": "vllm/vllm-openai:v0.6.3", "gpus": 1,
              "model_label": "llama-3-8b", "data_class": "public"}
    with pytest.raises(ValidationError) as caught:
        services.inference_submit(actor=org["alice"], replicas=4, **values)
    assert list(caught.value.message_dict) == ["replicas"]
    workload = services.inference_submit(actor=org["alice"], replicas=2, **values)
    assert tasks.workload_submit.apply(args=[workload.pk]).get() == "submitted"
    wait_for(lambda: _row(workload).status == Status.RUNNING and _row(workload).ready_replicas == 2,
             describe=lambda: (_row(workload).status, _row(workload).ready_replicas))
    assert not cluster.list("Workload", namespace=vision.namespace)  # never queued: Kueue has nothing of it
    wait_for(lambda: _intervals(workload) == [(2, False)], describe=lambda: _intervals(workload))

    kubesim.advance(3600)  # an hour with two ready replicas
    services.inference_update(actor=org["alice"], workload=_row(workload), replicas=3)
    assert tasks.inference_patch.apply(args=[workload.pk]).get() == "patched"
    wait_for(lambda: _row(workload).ready_replicas == 3, describe=lambda: _row(workload).ready_replicas)
    wait_for(lambda: _intervals(workload) == [(2, True), (3, False)], describe=lambda: _intervals(workload))
    if KUBECTL is not None:
        done = subprocess.run([KUBECTL, "--kubeconfig", kubesim.kubeconfig_path, "rollout", "status",
                               f"deployment/wl-{workload.pk}", "-n", vision.namespace, "--timeout=30s"],
                              capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0 and "successfully rolled out" in done.stdout, done.stderr

    kubesim.advance(1800)  # half an hour with three
    services.workload_stop(actor=org["alice"], workload=_row(workload))
    assert tasks.workload_stop.apply(args=[workload.pk]).get()
    wait_for(lambda: _row(workload).status == Status.STOPPED, describe=lambda: _row(workload).status)
    wait_for(lambda: _intervals(workload) == [(2, True), (3, True)], describe=lambda: _intervals(workload))
    first, second = UsageInterval.objects.filter(workload=workload).order_by("started_at")
    assert first.ended_at == second.started_at  # one stretch after the other, nothing counted twice
    assert second.ended_at == _row(workload).finished_at  # the cluster's time of the deletion
    hours = [(i.ended_at - i.started_at).total_seconds() / 3600 for i in (first, second)]
    assert hours == [pytest.approx(1.0, abs=0.01), pytest.approx(0.5, abs=0.01)]  # 2 x 1 h + 3 x 0.5 h: 3.5 GPU-hours


def _by_type(deployment: dict) -> dict[str, dict]:
    return {condition["type"]: condition for condition in deployment["status"]["conditions"]}


def _ready_times(pods: list[dict]) -> list[str]:
    return sorted(condition["lastTransitionTime"] for pod in pods for condition in pod["status"]["conditions"]
                  if condition["type"] == "Ready")


def test_a_change_of_ready_replicas_is_dated_from_the_pods_on_the_clusters_clock(kubesim, cluster):
    """A pure scale within maxUnavailable stamps none of the Deployment's conditions: a rise is dated by the newest
    pod's Ready, a fall by the deletion of a pod still terminating, and pods already gone say nothing."""
    cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "dating"}})
    cluster.create({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "dating"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "strategy": {  # the portal's strategy
            "type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}, "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "main", "image": "server:1"}]}}}})
    created = cluster.get("Deployment", "web", namespace="dating")
    assert _ready_times(cluster.list("Pod", namespace="dating", label_selector="app=web")) == [
        created["metadata"]["creationTimestamp"]] * 2  # Ready on the cluster's (manual) clock
    conditions = _by_type(created)

    scaled_at = parse_time(kubesim.advance(3600))  # an hour later, 2 -> 3
    cluster.patch("Deployment", "web", {"spec": {"replicas": 3}}, namespace="dating", subresource="scale")
    deployment = cluster.get("Deployment", "web", namespace="dating")
    assert deployment["status"]["readyReplicas"] == 3
    assert _by_type(deployment) == conditions  # nothing stamped: the conditions' time is an hour old
    pods = cluster.list("Pod", namespace="dating", label_selector="app=web")
    assert ready_changed_at(pods, rising=True) == scaled_at
    assert ready_changed_at(pods, rising=False) is None  # no pod went

    for pod in pods:  # held by a finalizer: the pod the scale-down deletes stays, terminating
        cluster.patch("Pod", pod["metadata"]["name"], {"metadata": {"finalizers": ["example.com/hold"]}},
                      namespace="dating")
    shrunk_at = parse_time(kubesim.advance(1800))  # 3 -> 2
    cluster.patch("Deployment", "web", {"spec": {"replicas": 2}}, namespace="dating", subresource="scale")
    assert cluster.get("Deployment", "web", namespace="dating")["status"]["readyReplicas"] == 2
    pods = cluster.list("Pod", namespace="dating", label_selector="app=web")
    assert len(pods) == 3 and sum(bool(pod["metadata"].get("deletionTimestamp")) for pod in pods) == 1
    assert ready_changed_at(pods, rising=False) == shrunk_at

    kubesim.advance(60)  # the finalizers lifted: the pod is gone and the pods left say nothing of the fall
    for pod in pods:
        cluster.patch("Pod", pod["metadata"]["name"], {"metadata": {"finalizers": None}}, namespace="dating")
    pods = cluster.list("Pod", namespace="dating", label_selector="app=web")
    assert len(pods) == 2 and not any(pod["metadata"].get("deletionTimestamp") for pod in pods)
    assert ready_changed_at(pods, rising=False) is None


def test_a_fall_is_dated_by_the_deletion_not_by_the_end_of_the_grace_period(kubesim, cluster):
    """A pod a scale-down deletes terminates gracefully: the API server dates it by when its grace period ends
    (deletion + 30 s), so the fall is its deletionTimestamp less its deletionGracePeriodSeconds."""
    cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "grace"}})
    cluster.create({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "grace"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": {
            "metadata": {"labels": {"app": "web"}, "annotations": {"kubesim.io/stop-seconds": "10"}},
            "spec": {"containers": [{"name": "main", "image": "server:1"}]}}}})
    shrunk_at = parse_time(kubesim.advance(600))
    cluster.patch("Deployment", "web", {"spec": {"replicas": 1}}, namespace="grace", subresource="scale")
    pods = cluster.list("Pod", namespace="grace", label_selector="app=web")
    (terminating,) = [pod for pod in pods if pod["metadata"].get("deletionTimestamp")]  # its server stops in 10 s
    assert parse_time(terminating["metadata"]["deletionTimestamp"]) == shrunk_at + timedelta(seconds=30)
    assert ready_changed_at(pods, rising=False) == shrunk_at
    kubesim.advance(10)
    assert len(cluster.list("Pod", namespace="grace", label_selector="app=web")) == 1
