"""`gpu serve` and `gpu scale` against the served portal with the real worker: an inference service on a serving
pool becomes a Deployment, scaled and rolled to a new image by the next command; the reservation's refusal is one
line and exit code 6."""

from __future__ import annotations

import pytest

from apps.org import services as org_services
from apps.org.models import Project
from apps.workloads.models import Workload
from tests.portal_cli.support import gpu, gpu_json
from tests.worker.conftest import wait_for

pytestmark = pytest.mark.slow


@pytest.fixture
def serving_pool(org):
    pool = org_services.node_pool_create(actor=org["admin"], slug="serve-l4", name="L4 serving",
                                         gpu_resource="nvidia.com/gpu", capacity=8, serving=True,
                                         node_labels={"portal.gpu/pool": "serve-l4"})
    org_services.serving_reservation_create(actor=org["admin"], project=Project.objects.get(slug="vision"),
                                            node_pool=pool, cards=4)
    return pool


def deployment(cluster, workload_id: int) -> dict:
    return cluster.raw_get(f"/apis/apps/v1/namespaces/proj-vision/deployments/wl-{workload_id}")


def test_serve_then_scale_and_roll_the_image(signed_in, serving_pool, kubesim, cluster, celery_worker):
    created = gpu_json("serve", "-p", "vision", "--pool", "serve-l4", "--image", "vllm/vllm-openai:v0.6.3",
                       "--port", "8080", "-g", "1", "--replicas", "2", "--model", "llama-3-8b", "--data-class",
                       "public", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B")
    assert (created["name"], created["node_pool"], created["replicas"], created["serving_port"],
            created["command"]) == ("vllm-openai", "serve-l4", 2, 8080, ["vllm", "serve", "meta-llama/Llama-3.1-8B"])
    wait_for(lambda: Workload.objects.get(pk=created["id"]).k8s_uid,
             describe=lambda: Workload.objects.get(pk=created["id"]).status_message)
    assert deployment(cluster, created["id"])["spec"]["replicas"] == 2

    # More than the reservation holds: the portal's message in one line, exit 6, nothing changed.
    refused = gpu("scale", str(created["id"]), "--replicas", "5")
    assert refused.exit_code == 6, refused.output
    assert "vision reserves 4 units of serve-l4" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    assert gpu("scale", str(created["id"])).exit_code == 2  # nothing to change is a bad command line

    scaled = gpu_json("scale", str(created["id"]), "--replicas", "3", "--image", "vllm/vllm-openai:v0.6.4")
    assert (scaled["replicas"], scaled["image"]) == (3, "vllm/vllm-openai:v0.6.4")
    patched = wait_for(lambda: (found := deployment(cluster, created["id"]))["spec"]["replicas"] == 3 and found)
    assert patched["spec"]["template"]["spec"]["containers"][0]["image"] == "vllm/vllm-openai:v0.6.4"
    table = gpu("scale", str(created["id"]), "--replicas", "1")
    assert table.exit_code == 0 and "vllm-openai" in table.stdout and "serve-l4" in table.stdout


def test_serve_refuses_a_pool_without_a_reservation(signed_in, serving_pool):
    refused = gpu("serve", "-p", "vision", "--pool", "h100", "--image", "vllm/vllm-openai:v0.6.3", "--model", "m",
                  "--data-class", "public")
    assert refused.exit_code == 6 and "h100 is not a serving pool" in refused.stderr
    assert not Workload.objects.filter(kind="inference").exists()


def test_serve_with_pods_per_replica_makes_a_leaderworkerset(signed_in, serving_pool, kubesim, cluster, celery_worker):
    refused = gpu("serve", "-p", "vision", "--pool", "serve-l4", "--image", "vllm/vllm-openai:v0.6.3", "--pods", "3",
                  "-g", "2", "--model", "llama-3-70b", "--data-class", "public")
    assert refused.exit_code == 6 and "(1 replicas x 3 pods x 2 GPUs)" in refused.stderr, refused.output
    created = gpu_json("serve", "-p", "vision", "--pool", "serve-l4", "--image", "vllm/vllm-openai:v0.6.3", "--pods",
                       "2", "-g", "2", "--model", "llama-3-70b", "--data-class", "public")
    assert (created["pods"], created["gpus"], created["replicas"]) == (2, 2, 1)
    wait_for(lambda: Workload.objects.get(pk=created["id"]).k8s_uid,
             describe=lambda: Workload.objects.get(pk=created["id"]).status_message)
    lws = cluster.raw_get(f"/apis/leaderworkerset.x-k8s.io/v1/namespaces/proj-vision/leaderworkersets/"
                          f"wl-{created['id']}")
    assert (lws["spec"]["replicas"], lws["spec"]["leaderWorkerTemplate"]["size"]) == (1, 2)
    assert gpu("scale", str(created["id"]), "--replicas", "2").exit_code == 6  # 2 x 2 x 2 = 8 > 4 reserved
