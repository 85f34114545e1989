"""A multi-node inference service (pods > 1 per replica) end to end in kubesim with the real watcher: a
LeaderWorkerSet checked against its vendored CRD, never queued, its endpoint reaching the groups' leaders only,
scaled and rolled to a new image, its GPU-hours those of the ready groups (ready x pods x GPUs) on the
cluster's clock until it is stopped."""

import json

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from apps.org.models import Project
from apps.usage.models import UsageInterval
from apps.workloads import services
from apps.workloads.models import Status, Workload
from tests.worker.conftest import serving_pool, signed_in, wait_for
from worker import tasks
from worker.frameworks import framework_schema_errors
from worker.manifests import LWS_WORKER_INDEX_LABEL, inference_leaderworkerset
from worker.watcher import ready_changed_at, ready_groups

GPU = "nvidia.com/gpu"


@pytest.fixture
def serving(kubesim, org):
    return serving_pool(kubesim, org, cards=4)


def _row(workload: Workload) -> Workload:
    return Workload.objects.get(pk=workload.pk)


def _intervals(workload: Workload) -> list[tuple[int, bool]]:
    return [(units, ended is not None) for units, ended in UsageInterval.objects.filter(
        workload=workload).order_by("started_at").values_list("units", "ended_at")]


def test_a_multi_node_service_runs_as_a_leaderworkerset_scales_and_counts_its_ready_groups(
        kubesim, cluster, org, watcher, serving, web_reaches_kubesim):
    vision = Project.objects.get(slug="vision")
    values = {"project": vision, "node_pool": serving, "name": "llama-70b", "image": "vllm/vllm-openai:v0.6.3",
              "gpus": 1, "pods": 2, "args": ["--model", "meta-llama/Llama-3.1-70B"], "model_label": "llama-3-70b",
              "data_class": "public"}
    with pytest.raises(ValidationError) as caught:  # 3 groups x 2 pods x 1 GPU: more than the 4 reserved
        services.inference_submit(actor=org["alice"], replicas=3, **values)
    assert caught.value.message_dict == {"replicas": [
        "vision reserves 4 units of serve-l4 for serving and its other services hold 0, so this one can have at most "
        "4; it asks for 6 (3 replicas x 2 pods x 1 GPUs)."]}
    workload = services.inference_submit(actor=org["alice"], replicas=1, **values)
    assert workload.object_api_version == "leaderworkerset.x-k8s.io/v1"
    assert tasks.workload_submit.apply(args=[workload.pk]).get() == "submitted"

    path = f"/apis/leaderworkerset.x-k8s.io/v1/namespaces/{vision.namespace}/leaderworkersets/wl-{workload.pk}"
    lws = cluster.raw_get(path)
    assert lws["metadata"]["uid"] == _row(workload).k8s_uid
    assert "kueue.x-k8s.io/queue-name" not in lws["metadata"]["labels"]
    assert (lws["spec"]["replicas"], lws["spec"]["leaderWorkerTemplate"]["size"]) == (1, 2)
    template = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
    assert template["nodeSelector"] == {"portal.gpu/pool": "serve-l4"}
    assert template["containers"][0]["resources"]["limits"][GPU] == "1"
    service = cluster.get("Service", f"wl-{workload.pk}", namespace=vision.namespace)
    assert service["spec"]["selector"][LWS_WORKER_INDEX_LABEL] == "0"  # the leaders serve, their workers do not
    assert service["metadata"]["ownerReferences"][0]["kind"] == "LeaderWorkerSet"

    kubesim.advance(1)
    wait_for(lambda: _row(workload).status == Status.RUNNING and _row(workload).ready_replicas == 1,
             describe=lambda: (_row(workload).status, _row(workload).status_message))
    assert not cluster.list("Workload", namespace=vision.namespace)  # never queued: Kueue has nothing of it
    pods = cluster.list("Pod", namespace=vision.namespace, label_selector=f"portal.gpu/workload-id={workload.pk}")
    assert sorted(pod["metadata"]["name"] for pod in pods) == [f"wl-{workload.pk}-0", f"wl-{workload.pk}-0-1"]
    wait_for(lambda: _intervals(workload) == [(2, False)], describe=lambda: _intervals(workload))

    alice = signed_in(org["alice"])  # the endpoint reaches a leader through the Service
    answer = alice.get(reverse("workloads:endpoint", args=[workload.pk, "v1/models"]))
    assert answer.status_code == 200, answer.content
    assert [model["id"] for model in json.loads(answer.content)["data"]] == ["meta-llama/Llama-3.1-70B"]
    assert signed_in(org["bob"]).get(reverse("workloads:endpoint", args=[workload.pk, "v1/models"])).status_code == 404

    kubesim.advance(3600)  # an hour with one group of two ready
    services.inference_update(actor=org["alice"], workload=_row(workload), replicas=2)
    assert tasks.inference_patch.apply(args=[workload.pk]).get() == "patched"
    wait_for(lambda: _row(workload).ready_replicas == 2, describe=lambda: _row(workload).status_message)
    wait_for(lambda: _intervals(workload) == [(2, True), (4, False)], describe=lambda: _intervals(workload))
    assert _row(workload).status_message == "2 of 2 replicas ready"

    kubesim.advance(1800)  # half an hour with two groups
    services.workload_stop(actor=org["alice"], workload=_row(workload))
    assert tasks.workload_stop.apply(args=[workload.pk]).get() == "stopped"
    wait_for(lambda: _row(workload).status == Status.STOPPED, describe=lambda: _row(workload).status)
    wait_for(lambda: _intervals(workload) == [(2, True), (4, True)], describe=lambda: _intervals(workload))
    first, second = UsageInterval.objects.filter(workload=workload).order_by("started_at")
    assert first.ended_at == second.started_at  # one stretch after the other, nothing counted twice
    assert second.ended_at == _row(workload).finished_at  # the cluster's time of the deletion
    hours = [(i.ended_at - i.started_at).total_seconds() / 3600 for i in (first, second)]
    assert hours == [pytest.approx(1.0, abs=0.01), pytest.approx(0.5, abs=0.01)]  # 2 x 1 h + 4 x 0.5 h: 4 GPU-hours


def test_a_new_image_replaces_the_groups_and_the_service_stays_ready(kubesim, cluster, org, watcher, serving):
    """kubesim's LWS replaces the groups at once on its manual clock: the patch reaches the worker template and
    every pod runs the new image, the row ready again. (GPU-hours across changes at one instant:
    tests/apps/usage/test_ledger_units.py.)"""
    vision = Project.objects.get(slug="vision")
    workload = services.inference_submit(
        actor=org["alice"], project=vision, node_pool=serving, name="llama-70b", image="vllm/vllm-openai:v0.6.3",
        gpus=1, pods=2, replicas=2, model_label="llama-3-70b", data_class="public")
    assert tasks.workload_submit.apply(args=[workload.pk]).get() == "submitted"
    path = f"/apis/leaderworkerset.x-k8s.io/v1/namespaces/{vision.namespace}/leaderworkersets/wl-{workload.pk}"
    lws = cluster.raw_get(path)
    kubesim.advance(1)
    wait_for(lambda: _row(workload).ready_replicas == 2, describe=lambda: _row(workload).status_message)

    services.inference_update(actor=org["alice"], workload=_row(workload), image="vllm/vllm-openai:v0.6.4")
    assert tasks.inference_patch.apply(args=[workload.pk]).get() == "patched"
    patched = cluster.raw_get(path)["spec"]
    assert (patched["replicas"], patched["leaderWorkerTemplate"]["size"]) == (2, 2)
    container = patched["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
    assert container["image"] == "vllm/vllm-openai:v0.6.4" and container["resources"]["limits"][GPU] == "1"
    wait_for(lambda: sorted(pod["spec"]["containers"][0]["image"] for pod in cluster.list(
        "Pod", namespace=vision.namespace, label_selector=f"portal.gpu/workload-id={workload.pk}")) == [
        "vllm/vllm-openai:v0.6.4"] * 4)
    settled = cluster.raw_get(path)["metadata"]["resourceVersion"]
    wait_for(lambda: watcher.deployments[lws["metadata"]["uid"]]["metadata"]["resourceVersion"] == settled
             and not watcher.work.dirty and not watcher.work.processing)  # the watcher has applied the rollout
    assert _row(workload).status_message == "2 of 2 replicas ready"

    services.workload_stop(actor=org["alice"], workload=_row(workload))
    assert tasks.workload_stop.apply(args=[workload.pk]).get() == "stopped"
    wait_for(lambda: _row(workload).status == Status.STOPPED, describe=lambda: _row(workload).status)


def test_the_leaderworkerset_is_checked_against_its_crd(kubesim, org, serving):
    workload = services.inference_submit(
        actor=org["alice"], project=Project.objects.get(slug="vision"), node_pool=serving, name="big",
        image="vllm/vllm-openai:v0.6.3", gpus=1, pods=2, model_label="m", data_class="public")
    manifest = inference_leaderworkerset(workload)
    assert framework_schema_errors(manifest) == []
    manifest["spec"]["leaderWorkerTemplate"]["groupSize"] = 2  # a field LWS does not have
    manifest["spec"]["rolloutStrategy"]["type"] = "Recreate"
    assert framework_schema_errors(manifest) == [
        "spec.leaderWorkerTemplate.groupSize: unknown field.",
        "spec.rolloutStrategy.type: 'Recreate' is not one of ['RollingUpdate'].",
    ]


def _pod(group: str, worker: str, *, ready: str, at: str) -> dict:
    return {"metadata": {"labels": {"leaderworkerset.sigs.k8s.io/group-index": group, LWS_WORKER_INDEX_LABEL: worker}},
            "status": {"conditions": [{"type": "Ready", "status": ready, "lastTransitionTime": at}]}}


def test_a_group_counts_as_ready_once_all_its_pods_are():
    """A rise in a LeaderWorkerSet's ready groups is dated by the last pod of a fully ready group, never by a ready
    leader whose workers are still starting."""
    pods = [_pod("0", "0", ready="True", at="2026-12-07T10:00:00Z"), _pod("0", "1", ready="True",
                                                                          at="2026-12-07T10:05:00Z"),
            _pod("1", "0", ready="True", at="2026-12-07T11:00:00Z"), _pod("1", "1", ready="False",
                                                                          at="2026-12-07T11:00:00Z")]
    assert ready_groups(pods) == pods[:2]
    assert ready_changed_at(ready_groups(pods), rising=True).isoformat() == "2026-12-07T10:05:00+00:00"
    assert ready_changed_at(pods, rising=True).isoformat() == "2026-12-07T11:00:00+00:00"  # what the filter avoids
