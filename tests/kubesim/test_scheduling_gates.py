"""Pod scheduling gates (Kubernetes' PodSchedulingReadiness, GA in 1.30) against a served kubesim without Kueue:
a gated pod is not scheduled and says why; the API server lets gates be removed, never added, and a gated pod's
nodeSelector grow but not change."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from kubernetes.client.rest import ApiException

from tests.kubesim.conftest import pod_body


def gated_pod(name: str, *gates: str) -> dict:
    body = pod_body(name)
    body["spec"]["schedulingGates"] = [{"name": g} for g in gates]
    return body


def scheduled(api: SimpleNamespace, ns: str, name: str) -> tuple[str, str, str | None]:
    pod = api.core.read_namespaced_pod(name, ns)
    cond = next(c for c in pod.status.conditions or [] if c.type == "PodScheduled")
    return pod.status.phase, cond.status, cond.reason


def test_gated_pod_stays_pending_until_every_gate_is_removed(api: SimpleNamespace, ks, ns: str):
    api.core.create_namespaced_pod(ns, gated_pod("p", "example.com/a", "example.com/b"))
    ks.advance(5)
    assert scheduled(api, ns, "p") == ("Pending", "False", "SchedulingGated")
    pod = api.core.read_namespaced_pod("p", ns)
    cond = next(c for c in pod.status.conditions if c.type == "PodScheduled")
    assert cond.message == "Scheduling is blocked due to non-empty scheduling gates"
    assert pod.spec.node_name is None

    api.core.patch_namespaced_pod("p", ns, {"spec": {"schedulingGates": [{"name": "example.com/b"}]}})
    ks.advance(5)
    assert scheduled(api, ns, "p") == ("Pending", "False", "SchedulingGated")

    api.core.patch_namespaced_pod("p", ns, {"spec": {"schedulingGates": None}})
    ks.advance(1)
    assert scheduled(api, ns, "p") == ("Running", "True", None)
    assert api.core.read_namespaced_pod("p", ns).spec.node_name


def test_gates_may_only_be_removed(api: SimpleNamespace, ns: str):
    api.core.create_namespaced_pod(ns, gated_pod("p", "example.com/a"))
    with pytest.raises(ApiException) as exc:
        api.core.patch_namespaced_pod(
            "p", ns, {"spec": {"schedulingGates": [{"name": "example.com/a"}, {"name": "example.com/new"}]}}
        )
    assert exc.value.status == 422
    assert (
        "spec.schedulingGates[1].name: Forbidden: only deletion is allowed, but found new scheduling gate "
        "'example.com/new'" in exc.value.body
    )
    api.core.create_namespaced_pod(ns, pod_body("ungated"))
    with pytest.raises(ApiException) as exc:
        api.core.patch_namespaced_pod("ungated", ns, {"spec": {"schedulingGates": [{"name": "example.com/a"}]}})
    assert exc.value.status == 422
    assert "found new scheduling gate 'example.com/a'" in exc.value.body
    assert api.core.read_namespaced_pod("p", ns).spec.scheduling_gates[0].name == "example.com/a"


def test_gated_pod_node_selector_may_only_grow(api: SimpleNamespace, ks, ns: str):
    body = gated_pod("p", "example.com/a")
    body["spec"]["nodeSelector"] = {"portal.gpu/pool": "h100"}
    api.core.create_namespaced_pod(ns, body)
    added = {"spec": {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}}
    api.core.patch_namespaced_pod("p", ns, added)
    assert api.core.read_namespaced_pod("p", ns).spec.node_selector == {
        "portal.gpu/pool": "h100",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
    }
    with pytest.raises(ApiException) as exc:
        api.core.patch_namespaced_pod("p", ns, {"spec": {"nodeSelector": {"portal.gpu/pool": "l40s-shared"}}})
    assert exc.value.status == 422
    assert (
        "spec.nodeSelector[portal.gpu/pool]: Forbidden: only additions to spec.nodeSelector are allowed"
        in exc.value.body
    )
    api.core.patch_namespaced_pod("p", ns, {"spec": {"schedulingGates": None}})
    with pytest.raises(ApiException) as exc:  # ungated: the node selector is fixed again
        api.core.patch_namespaced_pod("p", ns, {"spec": {"nodeSelector": {"extra": "x"}}})
    assert exc.value.status == 422


def test_gate_names_are_qualified_names_and_unique(api: SimpleNamespace, ns: str):
    with pytest.raises(ApiException) as exc:
        api.core.create_namespaced_pod(ns, gated_pod("p", "bad gate", "x.io/g", "x.io/g"))
    assert exc.value.status == 422
    causes = {(c["field"], c["reason"]) for c in json.loads(exc.value.body)["details"]["causes"]}
    assert ("spec.schedulingGates[0]", "FieldValueInvalid") in causes
    assert ("spec.schedulingGates[2]", "FieldValueDuplicate") in causes
    assert ("spec.schedulingGates[1]", "FieldValueDuplicate") not in causes
    body = gated_pod("q", "x.io/g")
    body["spec"]["nodeName"] = "h100-0"
    with pytest.raises(ApiException) as exc:
        api.core.create_namespaced_pod(ns, body)
    assert "spec.nodeName: Forbidden: cannot be set until all schedulingGates have been cleared" in exc.value.body
