"""kubectl with default flags on KubeRay's kinds in a served kubesim with the Kueue half: `get rayjobs,rayclusters`
prints the CRDs' printer columns, `describe` the generic describer's dump with the objects' Events, and kubectl's
default (strict) validation refuses unknown fields. Skipped like tests/kubesim/test_kubectl.py without kubectl 1.28+."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from kubesim.testing import InProcessKubesim, serve
from tests.kubesim.test_kubectl import Kubectl, pytestmark  # noqa: F401 - the same skip applies here

SETUP = """
apiVersion: v1
kind: Namespace
metadata: {name: ray}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: ray-flavor}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: ray-cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: ray-flavor
      resources: [{name: cpu, nominalQuota: "4"}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: team, namespace: ray}
spec: {clusterQueue: ray-cq}
"""


def cluster_spec(workers: int, extra: str = "") -> str:
    return f"""
    headGroupSpec:
      rayStartParams: {{}}
      template:
        spec:
          containers: [{{name: ray-head, image: rayproject/ray:2.41.0, resources: {{requests: {{cpu: "1"}}}}{extra}}}]
    workerGroupSpecs:
    - groupName: workers
      replicas: {workers}
      rayStartParams: {{}}
      template:
        spec:
          containers: [{{name: ray-worker, image: rayproject/ray:2.41.0, resources: {{requests: {{cpu: "1"}}}}}}]
"""


def rayjob_manifest(name: str, workers: int, extra: str = "") -> str:
    return f"""
apiVersion: ray.io/v1
kind: RayJob
metadata: {{name: {name}, namespace: ray, labels: {{kueue.x-k8s.io/queue-name: team}}}}
spec:
  entrypoint: python train.py; sleep 60
  shutdownAfterJobFinishes: true
  rayClusterSpec:{cluster_spec(workers, extra)}"""


def raycluster_manifest(name: str, workers: int) -> str:
    return f"""
apiVersion: ray.io/v1
kind: RayCluster
metadata: {{name: {name}, namespace: ray, labels: {{kueue.x-k8s.io/queue-name: team}}}}
spec:{cluster_spec(workers).replace(chr(10) + "    ", chr(10) + "  ")}"""


@pytest.fixture(scope="module")
def ks() -> Iterator[InProcessKubesim]:
    with serve(clock="manual") as server:
        yield server


@pytest.fixture(scope="module")
def kubectl(ks: InProcessKubesim, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(ks.kubeconfig_path, tmp_path_factory.mktemp("kubectl-home"))


def test_rayjobs_and_rayclusters_get_and_describe(kubectl: Kubectl, ks: InProcessKubesim):
    crds = kubectl("get", "crd").stdout
    assert "rayjobs.ray.io" in crds and "rayclusters.ray.io" in crds
    kubectl("apply", "-f", "-", stdin=SETUP)
    kubectl("apply", "-f", "-", stdin=rayjob_manifest("train", 1))  # head 1 + worker 1 + submitter 500m
    kubectl("apply", "-f", "-", stdin=raycluster_manifest("waits", 2))  # 3 CPUs: more than the 1.5 left
    got = kubectl("get", "rayjobs,rayclusters", "-n", "ray").stdout
    job_lines = [line.split() for line in got.split("\n\n")[0].splitlines()]
    assert job_lines[0] == [
        "NAME",
        "JOB",
        "STATUS",
        "DEPLOYMENT",
        "STATUS",
        "RAY",
        "CLUSTER",
        "NAME",
        "START",
        "TIME",
        "END",
        "TIME",
        "AGE",
    ]
    assert job_lines[1][0] == "rayjob.ray.io/train" and job_lines[1][1:3] == ["RUNNING", "Running"]
    assert job_lines[1][3].startswith("train-") and job_lines[1][4] == "2026-01-01T00:00:00Z"
    cluster_lines = [line.split() for line in got.split("\n\n")[1].splitlines()]
    assert cluster_lines[0] == [
        "NAME",
        "DESIRED",
        "WORKERS",
        "AVAILABLE",
        "WORKERS",
        "CPUS",
        "MEMORY",
        "GPUS",
        "STATUS",
        "AGE",
    ]
    rows = {row[0]: row[1:] for row in cluster_lines[1:]}
    assert rows["raycluster.ray.io/waits"][:5] == ["2", "0", "3", "0", "0"]  # queued: no pods, no state yet
    train_cluster = next(name for name in rows if name.startswith("raycluster.ray.io/train-"))
    assert rows[train_cluster][:6] == ["1", "1", "2", "0", "0", "ready"], got
    described = kubectl("describe", "raycluster", "waits", "-n", "ray").stdout
    assert "Kind:         RayCluster" in described and re.search(r"\n  Suspend: +true\n", described), described
    assert re.search(r"Normal +CreatedWorkload .* Created Workload: ray/raycluster-waits-", described)
    ks.advance(60)  # the RayJob ends and its cluster goes: the queued RayCluster gets the quota
    assert kubectl("get", "raycluster", "waits", "-n", "ray", "-o", "jsonpath={.status.state}").stdout == "ready"
    done = kubectl("get", "rayjob", "train", "-n", "ray", "--no-headers").stdout.split()
    assert done[1:3] == ["SUCCEEDED", "Complete"] and done[5] == "2026-01-01T00:01:00Z"
    described = kubectl("describe", "rayjob", "train", "-n", "ray").stdout
    for line in (
        "Name:         train",
        "API Version:  ray.io/v1",
        "Kind:         RayJob",
        "Labels:       kueue.x-k8s.io/queue-name=team",
    ):
        assert line in described, described
    assert re.search(r"\n  Job Deployment Status: +Complete\n", described), described
    assert re.search(r"Normal +CreatedWorkload .* kueue-admission +Created Workload: ray/rayjob-train-", described)
    assert re.search(r"Normal +CreatedRayCluster .* rayjob-controller +Created RayCluster ray/train-", described)
    assert "rayjob-train-" in kubectl("get", "workloads", "-n", "ray").stdout


def test_ray_unknown_fields_are_refused_by_kubectl_default_validation(kubectl: Kubectl):
    kubectl("apply", "-f", "-", stdin=SETUP)
    done = kubectl("apply", "-f", "-", stdin=rayjob_manifest("typo", 1, ", bogus: 1"), ok=False)
    assert 'unknown field "spec.rayClusterSpec.headGroupSpec.template.spec.containers[0].bogus"' in done.stderr
