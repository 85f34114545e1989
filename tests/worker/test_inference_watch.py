"""An inference service followed by the real watcher in kubesim: never queued, running once a replica is ready,
scaled (kubectl rollout status answering), and its GPU-hours those of its ready replicas until it is stopped."""

import shutil
import subprocess

import pytest
from django.core.exceptions import ValidationError

from apps.org.models import Project
from apps.usage.models import UsageInterval
from apps.workloads import services
from apps.workloads.models import Status, Workload
from tests.worker.conftest import serving_pool, wait_for
from worker import tasks

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
