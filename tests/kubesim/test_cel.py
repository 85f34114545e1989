"""The CEL evaluator against the Kueue CRD rules it must enforce, rule by rule, without HTTP."""

from __future__ import annotations

import copy

import pytest

from kubesim.apiserver.validation import cel
from kubesim.apiserver.validation import schema as validation


def _causes(resource: str, obj: dict, old: dict | None = None) -> dict[str, str]:
    obj = copy.deepcopy(obj)
    validation.default_and_prune(resource, obj)
    return {c.field: c.message for c in validation.validate(resource, obj, old)}


def _workload(**spec: object) -> dict:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "wl", "namespace": "ns"},
        "spec": {
            "queueName": "lq",
            "podSets": [{"name": "main", "count": 2, "template": {"spec": {"containers": []}}}],
            **spec,
        },
    }


def _reserved(wl: dict, admitted: bool = False) -> dict:
    wl = copy.deepcopy(wl)
    conds = [
        {
            "type": "QuotaReserved",
            "status": "True",
            "reason": "QuotaReserved",
            "message": "ok",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
    ]
    if admitted:
        conds.append(
            {
                "type": "Admitted",
                "status": "True",
                "reason": "Admitted",
                "message": "ok",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        )
    wl["status"] = {
        "conditions": conds,
        "admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "count": 2}]},
    }
    return wl


@pytest.mark.parametrize(
    ("expr", "env", "expected"),
    [
        ("has(self.a) ? self.a == 1 : true", {"self": {}}, True),
        ("has(self.a) ? self.a == 1 : true", {"self": {"a": 2}}, False),
        ("self.all(x, x.effect in ['NoSchedule', 'NoExecute'])", {"self": [{"effect": "NoSchedule"}]}, True),
        ("self.exists(c, c.type == 'X' && c.status == 'True')", {"self": [{"type": "X", "status": "True"}]}, True),
        ("[has(self.u),has(self.i)].filter(x,x==true).size() == 1", {"self": {"u": 1, "i": 2}}, False),
        ("size(self.l) == 2 && !(self.n <= 1)", {"self": {"l": [1, 2], "n": 3}}, True),
        ("self == oldSelf", {"self": "a", "oldSelf": "b"}, False),
        ("self.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')", {"self": "train-1"}, True),
        ("self.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')", {"self": "Train"}, False),
        ("self == '' || self.matches('^[A-Za-z][A-Za-z0-9+.-]*://.+$')", {"self": "hf://org/model"}, True),
        ("self == '' || self.matches('^[A-Za-z][A-Za-z0-9+.-]*://.+$')", {"self": "org/model"}, False),
    ],
)
def test_evaluator(expr, env, expected):
    assert cel.evaluate(cel.compile_rule(expr), env) is expected


def test_unsupported_constructs_fail_at_compile_time():
    with pytest.raises(cel.CELError):
        cel.compile_rule("self.startsWith('a')")


def test_workload_rules():
    assert _causes("workloads", _workload()) == {}
    ref = {"group": "kueue.x-k8s.io", "kind": "PriorityClass", "name": "p"}
    causes = _causes("workloads", _workload(priorityClassRef=ref, priority=1))
    assert "only the WorkloadPriorityClass kind" in causes["spec.priorityClassRef"]
    causes = _causes("workloads", _workload(priorityClassRef={**ref, "kind": "WorkloadPriorityClass"}))
    assert "priority should not be nil" in causes["spec"]
    bad = _workload()
    bad["spec"]["podSets"][0]["minCount"] = 3
    assert "minCount should be positive" in _causes("workloads", bad)["spec.podSets[0]"]
    mismatch = _reserved(_workload())
    mismatch["spec"]["podSets"].append({"name": "extra", "count": 1, "template": {"spec": {}}})
    assert "podSetAssignments must have the same number" in _causes("workloads", mismatch)["<nil>"]


def test_workload_transition_rules():
    old = _reserved(_workload())
    moved = copy.deepcopy(old)
    moved["spec"]["queueName"] = "other"
    assert "queueName is immutable" in _causes("workloads", moved, old)["<nil>"]
    assert _causes("workloads", moved, None) == {}  # transition rules only run on updates
    before = _workload()
    after = copy.deepcopy(before)
    after["spec"]["queueName"] = "other"
    assert _causes("workloads", after, before) == {}  # not reserved: the queue may change
    admitted = _reserved(_workload(maximumExecutionTimeSeconds=60), admitted=True)
    longer = copy.deepcopy(admitted)
    longer["spec"]["maximumExecutionTimeSeconds"] = 120
    assert "maximumExecutionTimeSeconds is immutable" in _causes("workloads", longer, admitted)["<nil>"]


def test_resource_flavor_rules():
    rf = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": "f"},
        "spec": {"tolerations": [{"operator": "Equal", "value": "x"}]},
    }
    assert "operator must be Exists" in _causes("resourceflavors", rf)["spec.tolerations"]
    rf["spec"]["tolerations"] = [{"key": "k", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5}]
    assert "effect must be 'NoExecute'" in _causes("resourceflavors", rf)["spec.tolerations"]
    rf["spec"] = {"topologyName": "t"}
    assert "at least one nodeLabel" in _causes("resourceflavors", rf)["spec"]
    old = {**rf, "spec": {"topologyName": "t", "nodeLabels": {"a": "b"}}}
    new = {**rf, "spec": {"topologyName": "u", "nodeLabels": {"a": "b"}}}
    assert "topologyName is immutable" in _causes("resourceflavors", new, old)["spec"]
