"""A pod's QoS class (status.qosClass) as kube-apiserver computes it at creation, for pods created through the API and
by the Job controller; `kubectl describe pod` shows it."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from kubesim.testing import InProcessKubesim
from tests.kubesim.conftest import job_body, pod_body
from tests.kubesim.test_kubectl import KUBECTL, MIN_MINOR, Kubectl, _kubectl_minor


def with_resources(body: dict, *per_container: dict) -> dict:
    spec = body["spec"].get("template", body)["spec"]
    first = spec["containers"][0]
    spec["containers"] = [{**first, "name": f"c{i}", "resources": r} for i, r in enumerate(per_container)]
    return body


BOTH = {"cpu": "1", "memory": "1Gi"}


@pytest.mark.parametrize(
    ("resources", "qos"),
    [
        ([{}], "BestEffort"),
        ([{"limits": {"nvidia.com/gpu": "1"}}], "BestEffort"),  # only cpu and memory count
        ([{"requests": {"cpu": "500m"}}], "Burstable"),
        ([{"limits": {"cpu": "1"}}], "Burstable"),  # requests default to limits, memory is not limited
        ([{"limits": BOTH}], "Guaranteed"),
        ([{"requests": BOTH, "limits": BOTH}, {"limits": {**BOTH, "nvidia.com/gpu": "1"}}], "Guaranteed"),
        ([{"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": BOTH}], "Burstable"),
        ([{"limits": BOTH}, {}], "Burstable"),  # one container without limits
    ],
)
def test_qos_class_of_a_created_pod(api: SimpleNamespace, ns: str, resources: list[dict], qos: str):
    created = api.core.create_namespaced_pod(ns, with_resources(pod_body("p"), *resources))
    assert created.status.qos_class == qos
    assert api.core.read_namespaced_pod("p", ns).status.qos_class == qos


def test_a_job_controllers_pod_gets_its_qos_class_and_defaulted_requests(api: SimpleNamespace, ks, ns: str):
    api.batch.create_namespaced_job(ns, with_resources(job_body("j"), {"limits": BOTH}))
    ks.advance(0)
    [pod] = api.core.list_namespaced_pod(ns, label_selector="job-name=j").items
    assert pod.status.qos_class == "Guaranteed"
    assert pod.spec.containers[0].resources.requests == {"cpu": "1", "memory": "1Gi"}


@pytest.mark.skipif(_kubectl_minor() < MIN_MINOR, reason=f"kubectl 1.{MIN_MINOR}+ not on PATH ({KUBECTL or 'none'})")
def test_kubectl_describe_pod_shows_burstable(api: SimpleNamespace, ks: InProcessKubesim, ns: str, tmp_path: Path):
    api.core.create_namespaced_pod(ns, with_resources(pod_body("burst"), {"requests": {"cpu": "250m"}}))
    described = Kubectl(ks.kubeconfig_path, tmp_path)("describe", "pod", "burst", "-n", ns).stdout
    assert any(line.split() == ["QoS", "Class:", "Burstable"] for line in described.splitlines()), described
