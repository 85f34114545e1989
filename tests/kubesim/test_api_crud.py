"""CRUD, selectors, pagination, patches, cascade delete and finalizers through the official client."""

from __future__ import annotations

import json

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.kubesim.conftest import KUEUE, cluster_queue, job_body, local_queue_body, pod_body, raw, workload_body


def _status(exc: ApiException) -> dict:
    return json.loads(exc.body)


def test_discovery_lists_groups_and_resources(api):
    groups = {g.name for g in client.ApisApi(api.client).get_api_versions().groups}
    assert {"batch", "kueue.x-k8s.io", "visibility.kueue.x-k8s.io"} <= groups
    core = {r.name: r for r in api.core.get_api_resources().resources}
    assert core["pods"].namespaced and "watch" in core["pods"].verbs
    assert "pods/log" in core and "nodes" in core
    _, body = raw(api, "GET", "/apis/kueue.x-k8s.io/v1beta2")
    resources = {r["name"]: r for r in body["resources"]}
    assert resources["workloads"]["shortNames"] == ["kwl", "kueueworkload", "kueueworkloads"]
    assert resources["clusterqueues"]["namespaced"] is False
    assert "workloads/status" in resources
    assert client.VersionApi(api.client).get_code().major == "1"


def test_demo_cluster_nodes(api):
    nodes = api.core.list_node().items
    pools = {}
    for n in nodes:
        pool = n.metadata.labels["portal.gpu/pool"]
        pools.setdefault(pool, []).append(n)
    assert {p: len(v) for p, v in pools.items()} == {"h100": 2, "a100-mig-3g40gb": 8, "l40s-shared": 6}
    mig = sum(int(n.status.allocatable["nvidia.com/mig-3g.40gb"]) for n in pools["a100-mig-3g40gb"])
    assert mig == 16
    assert pools["h100"][0].metadata.labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"


def test_pod_crud_and_metadata(api, ns):
    created = api.core.create_namespaced_pod(ns, pod_body("p1", labels={"app": "x"}))
    md = created.metadata
    assert md.uid and md.resource_version.isdigit() and md.generation == 1
    assert md.creation_timestamp is not None
    got = api.core.read_namespaced_pod("p1", ns)
    assert got.metadata.uid == md.uid and got.spec.containers[0].image == "busybox:1.36"
    assert [p.metadata.name for p in api.core.list_namespaced_pod(ns).items] == ["p1"]
    api.core.delete_namespaced_pod("p1", ns)
    with pytest.raises(ApiException) as err:
        api.core.read_namespaced_pod("p1", ns)
    assert err.value.status == 404
    status = _status(err.value)
    assert status["reason"] == "NotFound" and status["message"] == 'pods "p1" not found'
    assert status["details"] == {"name": "p1", "kind": "pods"}


def test_create_twice_is_already_exists(api, ns):
    api.core.create_namespaced_service(ns, {"metadata": {"name": "svc"}, "spec": {"ports": [{"port": 80}]}})
    with pytest.raises(ApiException) as err:
        api.core.create_namespaced_service(ns, {"metadata": {"name": "svc"}, "spec": {"ports": [{"port": 80}]}})
    assert err.value.status == 409 and _status(err.value)["reason"] == "AlreadyExists"
    assert api.core.read_namespaced_service("svc", ns).spec.type == "ClusterIP"


def test_missing_namespace_is_404(api):
    with pytest.raises(ApiException) as err:
        api.core.create_namespaced_pod("nope", pod_body("p"))
    assert err.value.status == 404 and _status(err.value)["message"] == 'namespaces "nope" not found'


def test_generate_name(api, ns):
    body = pod_body("")
    del body["metadata"]["name"]
    body["metadata"]["generateName"] = "gen-"
    a = api.core.create_namespaced_pod(ns, body).metadata.name
    b = api.core.create_namespaced_pod(ns, body).metadata.name
    assert a != b and a.startswith("gen-") and len(a) == len("gen-") + 5


def test_label_selectors(api, ns):
    for name, labels in [("a", {"tier": "gpu", "team": "x"}), ("b", {"tier": "cpu"}), ("c", {"team": "y"})]:
        api.core.create_namespaced_pod(ns, pod_body(name, labels=labels))

    def names(selector: str) -> list[str]:
        return sorted(p.metadata.name for p in api.core.list_namespaced_pod(ns, label_selector=selector).items)

    assert names("tier=gpu") == ["a"]
    assert names("tier==gpu") == ["a"]
    assert names("tier!=gpu") == ["b", "c"]
    assert names("tier in (gpu,cpu)") == ["a", "b"]
    assert names("tier notin (gpu)") == ["b", "c"]
    assert names("team") == ["a", "c"]
    assert names("!team") == ["b"]
    assert names("team,tier=gpu") == ["a"]
    with pytest.raises(ApiException) as err:
        names("tier in gpu")
    assert err.value.status == 400


def test_field_selectors_and_all_namespaces(api, ns):
    api.core.create_namespaced_pod(ns, pod_body("f1"))
    api.core.create_namespaced_pod(ns, pod_body("f2"))
    got = api.core.list_namespaced_pod(ns, field_selector="metadata.name=f2").items
    assert [p.metadata.name for p in got] == ["f2"]
    everywhere = api.core.list_pod_for_all_namespaces(field_selector=f"metadata.namespace={ns}").items
    assert sorted(p.metadata.name for p in everywhere) == ["f1", "f2"]
    assert api.core.list_pod_for_all_namespaces(field_selector="metadata.name!=f1,metadata.name=f2").items


def test_pagination_with_continue(api, ns):
    for i in range(7):
        api.core.create_namespaced_pod(ns, pod_body(f"pg-{i}"))
    seen, token, pages = [], None, 0
    while True:
        page = api.core.list_namespaced_pod(ns, limit=3, _continue=token)
        seen += [p.metadata.name for p in page.items]
        pages += 1
        token = page.metadata._continue
        if not token:
            break
        assert page.metadata.remaining_item_count == 7 - len(seen)
    assert pages == 3 and seen == [f"pg-{i}" for i in range(7)]


def test_pagination_with_a_selector(api, ns):
    """A filtered list pages through the matching objects only; as kube-apiserver, it gives no remainingItemCount
    (it would have to read the whole collection to count)."""
    for i in range(7):
        body = pod_body(f"sel-{i}")
        body["metadata"]["labels"] = {"parity": "even" if i % 2 == 0 else "odd"}
        api.core.create_namespaced_pod(ns, body)
    seen, token = [], None
    while True:
        page = api.core.list_namespaced_pod(ns, limit=2, label_selector="parity=even", _continue=token)
        seen += [p.metadata.name for p in page.items]
        assert page.metadata.remaining_item_count is None
        token = page.metadata._continue
        if not token:
            break
    assert seen == ["sel-0", "sel-2", "sel-4", "sel-6"]


def test_optimistic_concurrency(api, ns):
    api.core.create_namespaced_pod(ns, pod_body("occ"))
    pod = api.core.read_namespaced_pod("occ", ns)  # the kubelet already moved it to Running
    stale = pod.metadata.resource_version
    pod.metadata.labels = {"v": "1"}
    api.core.replace_namespaced_pod("occ", ns, pod)
    pod.metadata.labels = {"v": "2"}
    pod.metadata.resource_version = stale
    with pytest.raises(ApiException) as err:
        api.core.replace_namespaced_pod("occ", ns, pod)
    assert err.value.status == 409
    assert _status(err.value)["reason"] == "Conflict"
    assert "the object has been modified" in _status(err.value)["message"]
    assert api.core.read_namespaced_pod("occ", ns).metadata.labels == {"v": "1"}


def test_patches_merge_strategic_json(api, ns):
    job = job_body("pj", suspend=True)
    job["spec"]["template"]["spec"]["containers"].append({"name": "side", "image": "busybox:1.36"})
    job["spec"]["template"]["spec"]["containers"][0]["env"] = [{"name": "A", "value": "1"}]
    api.batch.create_namespaced_job(ns, job)
    # strategic merge (the client's default for a dict body on core/batch kinds): containers merge by name
    api.batch.patch_namespaced_job(
        "pj",
        ns,
        {"spec": {"template": {"spec": {"containers": [{"name": "main", "env": [{"name": "B", "value": "2"}]}]}}}},
    )
    got = api.batch.read_namespaced_job("pj", ns)
    containers = {c.name: c for c in got.spec.template.spec.containers}
    assert set(containers) == {"main", "side"}
    assert {e.name: e.value for e in containers["main"].env} == {"A": "1", "B": "2"}
    # JSON patch (list body)
    api.batch.patch_namespaced_job("pj", ns, [{"op": "add", "path": "/metadata/labels", "value": {"k": "v"}}])
    assert api.batch.read_namespaced_job("pj", ns).metadata.labels == {"k": "v"}
    with pytest.raises(ApiException) as err:
        api.batch.patch_namespaced_job("pj", ns, [{"op": "test", "path": "/metadata/labels/k", "value": "other"}])
    assert err.value.status == 422
    # merge patch on a CRD replaces lists and deletes with null
    api.custom.create_cluster_custom_object(*KUEUE, "clusterqueues", cluster_queue("patch-cq"))
    api.custom.patch_cluster_custom_object(*KUEUE, "clusterqueues", "patch-cq", {"spec": {"stopPolicy": "Hold"}})
    got = api.custom.get_cluster_custom_object(*KUEUE, "clusterqueues", "patch-cq")
    assert got["spec"]["stopPolicy"] == "Hold" and got["metadata"]["generation"] == 2


def test_strategic_merge_on_crd_is_415(api):
    api.custom.create_cluster_custom_object(
        *KUEUE,
        "resourceflavors",
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "smp"}, "spec": {}},
    )
    code, body = raw(
        api,
        "PATCH",
        "/apis/kueue.x-k8s.io/v1beta2/resourceflavors/smp",
        {"metadata": {"labels": {"a": "b"}}},
        "application/strategic-merge-patch+json",
    )
    assert code == 415 and body["reason"] == "UnsupportedMediaType"


def test_kueue_objects_crud(api, ns):
    co = api.custom
    co.create_cluster_custom_object(
        *KUEUE,
        "resourceflavors",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": "h100"},
            "spec": {"nodeLabels": {"portal.gpu/pool": "h100"}},
        },
    )
    co.create_cluster_custom_object(
        *KUEUE,
        "cohorts",
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": "root"}, "spec": {}},
    )
    co.create_cluster_custom_object(*KUEUE, "clusterqueues", cluster_queue("crud-cq", cohortName="root"))
    co.create_namespaced_custom_object(
        *KUEUE,
        ns,
        "localqueues",
        local_queue_body("lq", "crud-cq"),
    )
    co.create_cluster_custom_object(
        *KUEUE,
        "workloadpriorityclasses",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": "high"},
            "value": 1000,
            "description": "important",
        },
    )
    wl = co.create_namespaced_custom_object(
        *KUEUE,
        ns,
        "workloads",
        workload_body("wl"),
    )
    assert wl["spec"]["active"] is True  # schema default
    cq = co.get_cluster_custom_object(*KUEUE, "clusterqueues", "crud-cq")
    assert cq["spec"]["queueingStrategy"] == "BestEffortFIFO" and cq["spec"]["cohortName"] == "root"
    assert co.get_cluster_custom_object(*KUEUE, "workloadpriorityclasses", "high")["value"] == 1000
    # status subresource: main writes ignore status, /status writes only status
    wl["status"] = {
        "conditions": [
            {
                "type": "QuotaReserved",
                "status": "False",
                "reason": "Pending",
                "message": "waiting",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ]
    }
    wl["spec"]["queueName"] = "lq"
    after = co.replace_namespaced_custom_object(*KUEUE, ns, "workloads", "wl", wl)
    assert "status" not in after
    after["status"] = wl["status"]
    after["spec"]["active"] = False
    st = co.replace_namespaced_custom_object_status(*KUEUE, ns, "workloads", "wl", after)
    assert st["status"]["conditions"][0]["reason"] == "Pending" and st["spec"]["active"] is True
    listed = co.list_cluster_custom_object(*KUEUE, "workloads")["items"]
    assert any(w["metadata"]["name"] == "wl" and w["metadata"]["namespace"] == ns for w in listed)
    co.delete_namespaced_custom_object(*KUEUE, ns, "workloads", "wl")
    assert co.list_namespaced_custom_object(*KUEUE, ns, "workloads")["items"] == []


def test_cascade_delete_background_orphan_and_default(api, ns):
    api.batch.create_namespaced_job(ns, job_body("bg"))
    api.batch.create_namespaced_job(ns, job_body("orph"))
    api.batch.create_namespaced_job(ns, job_body("dflt"))

    def pods(job: str) -> list:
        return api.core.list_namespaced_pod(ns, label_selector=f"job-name={job}").items

    assert len(pods("bg")) == len(pods("orph")) == len(pods("dflt")) == 1
    api.batch.delete_namespaced_job("bg", ns, propagation_policy="Background")
    assert pods("bg") == []
    api.batch.delete_namespaced_job("orph", ns, propagation_policy="Orphan")
    orphan = pods("orph")
    assert len(orphan) == 1 and not orphan[0].metadata.owner_references
    _, _, headers = api.batch.delete_namespaced_job_with_http_info("dflt", ns)
    assert "child pods are preserved by default" in headers.get("Warning", "")
    assert len(pods("dflt")) == 1


def test_finalizers_and_foreground(api, ns):
    api.core.create_namespaced_pod(ns, pod_body("fin", finalizers=["example.com/hold"]))
    api.core.delete_namespaced_pod("fin", ns)
    held = api.core.read_namespaced_pod("fin", ns)
    assert held.metadata.deletion_timestamp is not None
    api.core.patch_namespaced_pod("fin", ns, [{"op": "remove", "path": "/metadata/finalizers"}])
    with pytest.raises(ApiException):
        api.core.read_namespaced_pod("fin", ns)
    job = api.batch.create_namespaced_job(ns, job_body("fg"))
    pod = api.core.list_namespaced_pod(ns, label_selector="job-name=fg").items[0]
    api.core.patch_namespaced_pod(pod.metadata.name, ns, {"metadata": {"finalizers": ["example.com/hold"]}})
    api.batch.delete_namespaced_job("fg", ns, propagation_policy="Foreground")
    waiting = api.batch.read_namespaced_job("fg", ns)
    assert "foregroundDeletion" in waiting.metadata.finalizers and waiting.metadata.uid == job.metadata.uid
    api.core.patch_namespaced_pod(pod.metadata.name, ns, [{"op": "remove", "path": "/metadata/finalizers"}])
    with pytest.raises(ApiException) as err:
        api.batch.read_namespaced_job("fg", ns)
    assert err.value.status == 404


def test_a_running_pod_is_deleted_gracefully(api, ks, ns):
    """As kube-apiserver and the kubelet: a bound, running pod stays Terminating (deletionTimestamp its deletion plus
    the grace period, deletionGracePeriodSeconds that period) until its containers stop on SIGTERM, which an emulated
    one does at once unless `kubesim.io/stop-seconds` says otherwise, never later than the grace period; a shorter
    grace period brings the end forward, 0 deletes at once, and an unscheduled pod has none."""
    from kubesim.kernel.clock import parse_rfc3339

    def gone(name: str) -> bool:
        try:
            api.core.read_namespaced_pod(name, ns)
        except ApiException as exc:
            return exc.status == 404
        return False

    for name, stop in (("quick", None), ("slow", "5"), ("stubborn", "600"), ("forced", "600")):
        body = pod_body(name, **({"annotations": {"kubesim.io/stop-seconds": stop}} if stop else {}))
        body["spec"]["terminationGracePeriodSeconds"] = 20
        api.core.create_namespaced_pod(ns, body)
    ks.advance(0)
    assert {api.core.read_namespaced_pod(n, ns).status.phase for n in ("quick", "slow", "stubborn")} == {"Running"}

    answer = api.core.delete_namespaced_pod("quick", ns)  # the pod as the deletion left it
    assert answer.metadata.deletion_grace_period_seconds == 20 and answer.metadata.deletion_timestamp is not None
    assert gone("quick")  # its containers stopped at once: the kubelet ended it before the answer

    deleted_at = parse_rfc3339(ks.advance(0))
    api.core.delete_namespaced_pod("slow", ns)
    api.core.delete_namespaced_pod("stubborn", ns)
    slow = api.core.read_namespaced_pod("slow", ns)
    assert slow.metadata.deletion_grace_period_seconds == 20
    assert (slow.metadata.deletion_timestamp - deleted_at).total_seconds() == 20  # by when it will be gone
    ks.advance(4)
    assert not gone("slow")  # terminating: its container takes 5 s to stop
    ks.advance(1)
    assert gone("slow") and not gone("stubborn")
    api.core.delete_namespaced_pod("stubborn", ns, grace_period_seconds=10)  # sooner: 10 s from now, not 20
    ks.advance(9)
    assert not gone("stubborn")
    ks.advance(1)
    assert gone("stubborn")  # killed at the end of its grace period
    api.core.delete_namespaced_pod("forced", ns, grace_period_seconds=0)
    assert gone("forced")

    unscheduled = pod_body("nowhere")
    unscheduled["spec"]["nodeSelector"] = {"no-such": "node"}
    api.core.create_namespaced_pod(ns, unscheduled)
    ks.advance(0)
    answer = api.core.delete_namespaced_pod("nowhere", ns)
    assert answer.metadata.deletion_timestamp is None and gone("nowhere")  # never ran: no grace period

    held = pod_body("held", finalizers=["example.com/hold"])  # terminated, then held by its finalizer
    held["metadata"]["annotations"] = {"kubesim.io/stop-seconds": "3"}
    api.core.create_namespaced_pod(ns, held)
    ks.advance(0)
    api.core.delete_namespaced_pod("held", ns)
    api.core.patch_namespaced_pod("held", ns, [{"op": "remove", "path": "/metadata/finalizers"}])
    assert not gone("held")  # its finalizer lifted, its containers still stopping
    ks.advance(3)
    assert gone("held")
    api.core.create_namespaced_pod(ns, pod_body("held2", finalizers=["example.com/hold"]))
    ks.advance(0)
    api.core.delete_namespaced_pod("held2", ns)
    stopped_at = parse_rfc3339(ks.advance(0))
    waiting = api.core.read_namespaced_pod("held2", ns)
    assert waiting.metadata.deletion_grace_period_seconds == 0 and waiting.metadata.deletion_timestamp == stopped_at
    api.core.patch_namespaced_pod("held2", ns, [{"op": "remove", "path": "/metadata/finalizers"}])
    assert gone("held2")


def test_namespace_delete_removes_content(api):
    api.core.create_namespace({"metadata": {"name": "doomed"}})
    api.core.create_namespaced_pod("doomed", pod_body("p"))
    api.core.delete_namespace("doomed")
    with pytest.raises(ApiException):
        api.core.read_namespace("doomed")
    assert api.core.list_pod_for_all_namespaces(field_selector="metadata.namespace=doomed").items == []


def test_events_written_and_deduplicated(api, ns, ks):
    pod = api.core.create_namespaced_pod(ns, pod_body("ev"))
    with ks.sim.store.lock:
        obj = ks.sim.store.get("pods", ns, "ev")
        ks.sim.store.record_event(obj, "Warning", "Custom", "same message", "tester")
        ks.sim.store.record_event(obj, "Warning", "Custom", "same message", "tester")
    events = api.core.list_namespaced_event(ns, field_selector="reason=Custom").items
    assert len(events) == 1 and events[0].count == 2
    assert events[0].involved_object.uid == pod.metadata.uid and events[0].source.component == "tester"
    reasons = {e.reason for e in api.core.list_namespaced_event(ns).items}
    assert {"Scheduled", "Started"} <= reasons


def test_method_not_allowed(api):
    code, body = raw(api, "POST", "/api/v1/namespaces/default/pods/some-pod", {})
    assert code == 405 and body["reason"] == "MethodNotAllowed"


def test_table_for_kubectl(api, ks, ns):
    api.custom.create_namespaced_custom_object(
        *KUEUE,
        ns,
        "workloads",
        workload_body("tbl"),
    )
    ks.advance(150)
    resp = api.client.rest_client.pool_manager.request(
        "GET",
        f"{ks.url}/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads",
        headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"},
    )
    table = json.loads(resp.data)
    assert table["kind"] == "Table"
    assert [c["name"] for c in table["columnDefinitions"]] == [
        "Name",
        "Queue",
        "Reserved in",
        "Admitted",
        "Finished",
        "Age",
    ]
    assert table["rows"][0]["cells"] == ["tbl", "lq", None, None, None, "2m30s"]
    assert table["rows"][0]["object"]["metadata"]["namespace"] == ns
