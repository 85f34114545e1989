"""Kueue's webhooks called directly, as the API server calls them."""

from __future__ import annotations

from kubesim.kueue import KueueConfig, admission_webhooks


class FakeStore:
    def __init__(self, local_queues: dict | None = None) -> None:
        self.local_queues = local_queues or {}

    def get(self, resource: str, namespace: str | None, name: str) -> dict | None:
        return self.local_queues.get((namespace, name)) if resource == "localqueues" else None


def run(resource: str, operation: str, obj: dict, old: dict | None = None, store=None) -> list[tuple[str, str]]:
    errors = []
    for hook in admission_webhooks(KueueConfig.default()):
        obj = hook.mutate(resource, operation, obj, old, store or FakeStore()) or obj
        errors += [(e[0], e[1]) for e in hook.validate(resource, operation, obj, old, store or FakeStore())]
    return errors


def cq(resources: list[dict], cohort: str | None = None) -> dict:
    spec: dict = {
        "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": "f", "resources": resources}]}]
    }
    if cohort:
        spec["cohortName"] = cohort
    return {"metadata": {"name": "cq"}, "spec": spec}


def test_cluster_queue_rules():
    path = "spec.resourceGroups[0].flavors[0].resources[0]"
    assert run("clusterqueues", "CREATE", cq([{"name": "nvidia.com/gpu", "nominalQuota": "-1"}])) == [
        (f"{path}.nominalQuota", 'Invalid value: "-1": must be greater than or equal to 0')
    ]
    assert run(
        "clusterqueues", "CREATE", cq([{"name": "nvidia.com/gpu", "nominalQuota": "2", "borrowingLimit": "1"}])
    ) == [(f"{path}.borrowingLimit", 'Invalid value: "1": must be nil when cohort is empty')]
    bad_lend = cq([{"name": "nvidia.com/gpu", "nominalQuota": "2", "lendingLimit": "3"}], cohort="co")
    assert run("clusterqueues", "CREATE", bad_lend) == [
        (f"{path}.lendingLimit", 'Invalid value: "3": must be less than or equal to the nominalQuota')
    ]
    ok = cq([{"name": "nvidia.com/gpu", "nominalQuota": "2", "borrowingLimit": "0", "lendingLimit": "0"}], "co")
    assert run("clusterqueues", "CREATE", ok) == []


def test_cohort_rules():
    root = {
        "metadata": {"name": "root"},
        "spec": cq([{"name": "nvidia.com/gpu", "nominalQuota": "1", "lendingLimit": "1"}])["spec"],
    }
    assert run("cohorts", "CREATE", root)[0][1] == 'Invalid value: "1": must be nil when parent is empty'
    child = {"metadata": {"name": "child"}, "spec": {**root["spec"], "parentName": "root"}}
    child["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["lendingLimit"] = "5"
    assert run("cohorts", "CREATE", child) == []  # a Cohort's lendingLimit is not checked against its nominal


def test_local_queue_cluster_queue_is_immutable():
    old = {"metadata": {"name": "lq", "namespace": "ns"}, "spec": {"clusterQueue": "a"}}
    new = {"metadata": {"name": "lq", "namespace": "ns"}, "spec": {"clusterQueue": "b"}}
    assert run("localqueues", "UPDATE", new, old) == [("spec.clusterQueue", 'Invalid value: "b": field is immutable')]


def test_job_webhook_suspends_and_defaults_queue():
    job = {"metadata": {"name": "j", "namespace": "ns", "labels": {"kueue.x-k8s.io/queue-name": "lq"}}, "spec": {}}
    run("jobs", "CREATE", job)
    assert job["spec"]["suspend"] is True
    plain = {"metadata": {"name": "p", "namespace": "ns"}, "spec": {}}
    run("jobs", "CREATE", plain)
    assert "suspend" not in plain["spec"]
    store = FakeStore({("ns", "default"): {"spec": {"clusterQueue": "cq"}}})
    defaulted = {"metadata": {"name": "d", "namespace": "ns"}, "spec": {}}
    run("jobs", "CREATE", defaulted, store=store)
    assert defaulted["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "default"
    assert defaulted["spec"]["suspend"] is True


def test_workload_podsets_immutable_while_reserved():
    old = {
        "metadata": {"name": "w"},
        "spec": {"podSets": [{"name": "main", "count": 1, "template": {}}]},
        "status": {"conditions": [{"type": "QuotaReserved", "status": "True"}]},
    }
    new = {**old, "spec": {"podSets": [{"name": "main", "count": 1, "template": {"spec": {"x": 1}}}]}}
    assert [f for f, _ in run("workloads", "UPDATE", new, old)] == ["spec.podSets.0"]  # Kueue: Child(strconv.Itoa(i))
