"""Kueue's ProvisioningRequest admission check integration cases, re-told through the official client against a
served kubesim (manual clock) whose cluster-autoscaler stand-in is off, so the tests write the requests' conditions
as upstream's do.

Source: test/integration/singlecluster/controller/admissionchecks/provisioning/provisioning_test.go ("Provisioning"),
plus the AdmissionCheck reconciler of pkg/controller/admissionchecks/provisioning for the Active condition. Upstream
sets the quota reservation by hand (its manager runs no scheduler); here kubesim's scheduler reserves it, so the
admitted counts are the pod sets' own. Upstream waits with Eventually; here each write settles.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes.client.rest import ApiException

from tests.kubesim.kueue.conftest import KUEUE, Cluster, _cluster
from tests.kubesim.kueue.test_upstream_controllers import cond
from tests.kubesim.kueue.test_upstream_queue_metrics import finish_evictions

AUTOSCALING = ("autoscaling.x-k8s.io", "v1")
CONTROLLER = "kueue.x-k8s.io/provisioning-request"
CHECK = "ac-prov"
GPU = "example.com/gpu"
CONSUME = "autoscaling.x-k8s.io/consume-provisioning-request"
CLASS = "autoscaling.x-k8s.io/provisioning-class-name"


@pytest.fixture(scope="module")
def cluster_prov() -> Iterator[Cluster]:
    yield from _cluster(kueue_config={"kubesim": {"provisioningRequestAutoscaler": False}})


@pytest.fixture
def kc(cluster_prov: Cluster) -> Cluster:
    cluster_prov.ks.reset()
    return cluster_prov


def _config(kc: Cluster, name: str = "prov-config", cls: str = "provisioning-class", limit: int | None = 0) -> None:
    spec: dict = {"provisioningClassName": cls, "parameters": {"p1": "v1", "p2": "v2"}}
    if limit is not None:
        spec["retryStrategy"] = {"backoffLimitCount": limit, "backoffBaseSeconds": 1, "backoffMaxSeconds": 4}
    kc.create(
        "provisioningrequestconfigs", {"kind": "ProvisioningRequestConfig", "metadata": {"name": name}, "spec": spec}
    )


def _setup(kc: Cluster, limit: int | None = 0, config: bool = True, ps2_count: int = 6) -> str:
    """Upstream's JustBeforeEach: a config, the check naming it, an on-demand flavor (node label ns1=ns1v), a
    ClusterQueue asking for the check, a LocalQueue and Workload `wl` of two pod sets, annotated with a parameter."""
    if config:
        _config(kc, limit=limit)
    ref = {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "prov-config"}
    body = {
        "kind": "AdmissionCheck",
        "metadata": {"name": CHECK},
        "spec": {"controllerName": CONTROLLER, "parameters": ref},
    }
    kc.create("admissionchecks", body)
    kc.create(
        "resourceflavors",
        {"kind": "ResourceFlavor", "metadata": {"name": "on-demand"}, "spec": {"nodeLabels": {"ns1": "ns1v"}}},
    )
    quotas = [{"name": "cpu", "nominalQuota": "10"}, {"name": GPU, "nominalQuota": "10"}]
    spec = {
        "namespaceSelector": {},
        "resourceGroups": [{"coveredResources": ["cpu", GPU], "flavors": [{"name": "on-demand", "resources": quotas}]}],
        "admissionChecksStrategy": {"admissionChecks": [{"name": CHECK}]},
    }
    kc.create("clusterqueues", {"kind": "ClusterQueue", "metadata": {"name": "cluster-queue"}, "spec": spec})
    ns = kc.namespace()
    kc.create(
        "localqueues",
        {"kind": "LocalQueue", "metadata": {"name": "queue"}, "spec": {"clusterQueue": "cluster-queue"}},
        ns,
    )
    kc.settle()
    return ns


def _submit(kc: Cluster, ns: str, ps2_count: int = 6, cpu: str = "1") -> None:
    c1 = {"name": "c", "image": "image", "resources": {"requests": {"cpu": cpu}}}
    c2 = {"name": "c", "image": "image", "resources": {"requests": {"cpu": "500m", GPU: "1"}, "limits": {GPU: "1"}}}
    podsets = [
        {"name": "ps1", "count": 3, "template": {"spec": {"containers": [c1]}}},
        {"name": "ps2", "count": ps2_count, "template": {"spec": {"containers": [c2]}}},
    ]
    annotations = {"provreq.kueue.x-k8s.io/ValidUntilSeconds": "0", "invalid-provreq-prefix/Foo": "Bar"}
    body = {
        "kind": "Workload",
        "metadata": {"name": "wl", "annotations": annotations},
        "spec": {"queueName": "queue", "podSets": podsets},
    }
    kc.create("workloads", body, ns)
    kc.settle()


def _request(kc: Cluster, ns: str, attempt: int = 1) -> dict:
    return kc.custom.get_namespaced_custom_object(*AUTOSCALING, ns, "provisioningrequests", f"wl-{CHECK}-{attempt}")


def _requests(kc: Cluster, ns: str) -> list[str]:
    items = kc.custom.list_namespaced_custom_object(*AUTOSCALING, ns, "provisioningrequests")["items"]
    return sorted(i["metadata"]["name"] for i in items)


def _set(
    kc: Cluster, ns: str, ctype: str, status: str = "True", message: str = "", attempt: int = 1, **extra: object
) -> None:
    """What the cluster autoscaler does: set one condition of the request."""
    pr = _request(kc, ns, attempt)
    now = kc.ks.advance(0)
    conds = [c for c in (pr.get("status") or {}).get("conditions") or [] if c["type"] != ctype]
    conds.append({"type": ctype, "status": status, "reason": ctype, "message": message, "lastTransitionTime": now})
    status_body = {"conditions": conds, **extra}
    kc.custom.patch_namespaced_custom_object_status(
        *AUTOSCALING, ns, "provisioningrequests", pr["metadata"]["name"], {"status": status_body}
    )
    kc.settle()


def _requeue(kc: Cluster, seconds: int) -> None:
    """Upstream's "Simulating job controller clearing quota reservation" (no Job owns the Workload), then the
    backoff passes and the scheduler reserves quota again."""
    finish_evictions(kc, "cluster-queue", 1)
    kc.settle(seconds)


def _check(kc: Cluster, ns: str) -> dict:
    wl = kc.get("workloads", "wl", ns)
    return next(c for c in wl["status"]["admissionChecks"] if c["name"] == CHECK)


def _wl(kc: Cluster, ns: str) -> dict:
    return kc.get("workloads", "wl", ns)


def _is(obj: dict, ctype: str) -> bool:
    return (cond(obj, ctype) or ("",))[0] == "True"


def _gone(kc: Cluster, ns: str, attempt: int = 1) -> bool:
    try:
        _request(kc, ns, attempt)
    except ApiException as exc:
        if exc.status == 404:
            return True
        raise
    return False


# -- When "A workload is using a provision admission check" ---------------------------------------------------


def test_no_request_before_quota_is_reserved(kc: Cluster):
    # "Should not create provisioning requests before quota is reserved" (the workload does not fit the quota)
    ns = _setup(kc)
    _submit(kc, ns, cpu="20")
    assert not _is(_wl(kc, ns), "QuotaReserved")
    assert _requests(kc, ns) == []


def test_request_created_on_quota_reservation_with_its_pod_templates(kc: Cluster):
    # "Should create provisioning requests after quota is reserved and preserve it when reservation is lost"
    ns = _setup(kc)
    _submit(kc, ns)
    assert _is(_wl(kc, ns), "QuotaReserved")
    assert not _is(_wl(kc, ns), "Admitted")
    pr = _request(kc, ns)
    assert pr["spec"]["provisioningClassName"] == "provisioning-class"
    assert pr["spec"]["parameters"] == {"p1": "v1", "p2": "v2", "ValidUntilSeconds": "0"}
    assert pr["metadata"]["labels"] == {"kueue.x-k8s.io/managed": "true"}
    [owner] = pr["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("Workload", "wl", True)
    assert [(p["podTemplateRef"]["name"], p["count"]) for p in pr["spec"]["podSets"]] == [
        (f"ppt-wl-{CHECK}-1-ps1", 3),
        (f"ppt-wl-{CHECK}-1-ps2", 6),
    ]
    wl = _wl(kc, ns)
    for i, ps in enumerate(pr["spec"]["podSets"]):
        pt = kc.core.read_namespaced_pod_template(ps["podTemplateRef"]["name"], ns)
        assert pt.metadata.labels == {"kueue.x-k8s.io/managed": "true"}
        assert pt.template.spec.node_selector == {"ns1": "ns1v"}
        want = wl["spec"]["podSets"][i]["template"]["spec"]["containers"][0]
        assert pt.template.spec.containers[0].image == want["image"]
        assert pt.template.spec.containers[0].resources.requests == want["resources"]["requests"]
        assert pt.metadata.owner_references[0].kind == "ProvisioningRequest"
    assert ("ProvisioningRequestCreated", f'Created ProvisioningRequest: "wl-{CHECK}-1"') in kc.events(ns, "wl")
    # the reservation lost (upstream clears it by hand; here the workload is deactivated, which evicts it)
    # is covered by test_eviction_deletes_the_requests; with the cleanup gate on the request goes.


def test_no_request_when_no_pod_set_needs_one(kc: Cluster):
    # "Should not create a provisioning request when all admitted PodSet counts are zero": a pod set of count 0
    # needs nothing, so a workload whose pod sets all count 0 has its check Ready without a request
    ns = _setup(kc)
    c = {"name": "c", "image": "image", "resources": {"requests": {"cpu": "1"}}}
    podsets = [{"name": "ps1", "count": 0, "template": {"spec": {"containers": [c]}}}]
    kc.create(
        "workloads",
        {"kind": "Workload", "metadata": {"name": "wl"}, "spec": {"queueName": "queue", "podSets": podsets}},
        ns,
    )
    kc.settle()
    check = _check(kc, ns)
    assert (check["state"], check["message"]) == ("Ready", "the provisioning request is not needed")
    assert _requests(kc, ns) == []
    assert _is(_wl(kc, ns), "Admitted")


def test_eviction_deletes_the_requests(kc: Cluster):
    # "Should delete provisioning requests when workload is evicted"
    ns = _setup(kc)
    _submit(kc, ns)
    assert not _gone(kc, ns)
    kc.custom.patch_namespaced_custom_object(*KUEUE, ns, "workloads", "wl", {"spec": {"active": False}})
    kc.settle()
    assert _is(_wl(kc, ns), "Evicted")
    assert _gone(kc, ns)
    assert kc.core.list_namespaced_pod_template(ns).items == []


def test_provisioned_request_readies_the_check_and_admits(kc: Cluster):
    # "Should set the condition ready when the provision succeed"
    ns = _setup(kc)
    _submit(kc, ns)
    _set(kc, ns, "Accepted")
    _set(kc, ns, "Provisioned", "False", "Not provisioned, ETA: 2024-02-22T10:36:40Z.")
    check = _check(kc, ns)
    assert (check["state"], check["message"]) == ("Pending", "Not provisioned, ETA: 2024-02-22T10:36:40Z.")
    assert not _is(_wl(kc, ns), "Admitted")
    _set(kc, ns, "Provisioned")
    check = _check(kc, ns)
    assert check["state"] == "Ready"
    annotations = {CONSUME: f"wl-{CHECK}-1", CLASS: "provisioning-class"}
    assert check["podSetUpdates"] == [
        {"name": "ps1", "annotations": annotations},
        {"name": "ps2", "annotations": annotations},
    ]
    assert _is(_wl(kc, ns), "Admitted")


def test_failed_request_rejects_the_check_and_deactivates(kc: Cluster):
    # "Should set the condition rejected when the provision fails" (retry limit 0)
    ns = _setup(kc)
    _submit(kc, ns)
    _set(kc, ns, "Failed")
    wl = _wl(kc, ns)
    assert wl["spec"]["active"] is False
    check = _check(kc, ns)
    assert (check["state"], check["message"]) == ("Pending", "Reset to Pending after eviction. Previously: Rejected")
    assert ("AdmissionCheckRejected", f'Deactivated due to AdmissionCheck in Rejected state: "{CHECK}"') in kc.events(
        ns, "wl"
    )
    assert cond(wl, "Evicted")[1] == "DeactivatedDueToAdmissionCheck"


def test_capacity_revoked_before_admission_rejects(kc: Cluster):
    # "Should set AdmissionCheck status to Rejected, deactivate Workload, emit an event, and bump metrics when
    # workloads is not Admitted, and the ProvisioningRequest's condition is set to CapacityRevoked"
    ns = _setup(kc)
    _submit(kc, ns)
    _set(kc, ns, "CapacityRevoked", message="Capacity revoked")
    wl = _wl(kc, ns)
    assert wl["spec"]["active"] is False
    assert cond(wl, "Evicted")[1] == "DeactivatedDueToAdmissionCheck"
    assert (
        "AdmissionCheckRejected",
        f'Deactivated due to AdmissionCheck in Rejected state: "{CHECK}" (Capacity revoked)',
    ) in kc.events(ns, "wl")


def test_booking_expired_after_admission_is_ignored(kc: Cluster):
    # "Should ignore the change if Workload is Admitted and the ProvisioningRequest's condition is set to
    # BookingExpired"
    ns = _setup(kc, limit=1)
    _submit(kc, ns)
    _set(kc, ns, "Provisioned")
    assert _is(_wl(kc, ns), "Admitted")
    _set(kc, ns, "BookingExpired", message="booking expired")
    assert _check(kc, ns)["state"] == "Ready"
    assert _is(_wl(kc, ns), "Admitted")
    assert _requests(kc, ns) == [f"wl-{CHECK}-1"]


def test_finished_workload_loses_its_request(kc: Cluster):
    # "Should delete the ProvisioningRequest when workload is Finished"
    ns = _setup(kc)
    _submit(kc, ns)
    _set(kc, ns, "Provisioned")
    now = kc.ks.advance(0)
    finished = {
        "type": "Finished",
        "status": "True",
        "reason": "Succeeded",
        "message": "done",
        "lastTransitionTime": now,
    }
    kc.custom.patch_namespaced_custom_object_status(
        *KUEUE, ns, "workloads", "wl", {"status": {"conditions": [finished]}}
    )
    kc.settle()
    assert _gone(kc, ns)


def test_request_follows_its_config(kc: Cluster):
    # "Should keep the provisioning config in sync"
    ns = _setup(kc)
    _config(kc, name="prov-config2", cls="provisioning-class2", limit=None)
    kc.custom.patch_cluster_custom_object(
        *KUEUE, "provisioningrequestconfigs", "prov-config2", {"spec": {"parameters": {"p1": "v1.2", "p2": "v2.2"}}}
    )
    _submit(kc, ns)
    assert _request(kc, ns)["spec"]["provisioningClassName"] == "provisioning-class"
    update = {
        "spec": {
            "provisioningClassName": "provisioning-class-updated",
            "parameters": {"p1": "v1updated", "p2": None, "p3": "v3"},
        }
    }
    kc.custom.patch_cluster_custom_object(*KUEUE, "provisioningrequestconfigs", "prov-config", update)
    kc.settle()
    pr = _request(kc, ns)
    assert pr["spec"]["provisioningClassName"] == "provisioning-class-updated"
    assert pr["spec"]["parameters"] == {"p1": "v1updated", "p3": "v3", "ValidUntilSeconds": "0"}
    templates = {t.metadata.name: t for t in kc.core.list_namespaced_pod_template(ns).items}
    assert sorted(templates) == [f"ppt-wl-{CHECK}-1-ps1", f"ppt-wl-{CHECK}-1-ps2"]
    assert {t.metadata.owner_references[0].uid for t in templates.values()} == {pr["metadata"]["uid"]}
    ref = {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "prov-config2"}
    kc.custom.patch_cluster_custom_object(*KUEUE, "admissionchecks", CHECK, {"spec": {"parameters": ref}})
    kc.settle()
    pr = _request(kc, ns)
    assert pr["spec"]["provisioningClassName"] == "provisioning-class2"
    assert pr["spec"]["parameters"] == {"p1": "v1.2", "p2": "v2.2", "ValidUntilSeconds": "0"}
    ref["name"] = "prov-config-missing"
    kc.custom.patch_cluster_custom_object(*KUEUE, "admissionchecks", CHECK, {"spec": {"parameters": ref}})
    kc.settle()
    assert _gone(kc, ns)
    check = _check(kc, ns)
    assert (check["state"], check["message"]) == ("Pending", "the check is not active")


# -- When "Workload uses a provision admission check with BackoffLimitCount=1" ------------------------------------


def test_failure_retries_with_a_new_attempt_that_then_succeeds(kc: Cluster):
    # "Should retry if a ProvisioningRequest fails, then succeed if the second Provisioning request succeeds"
    ns = _setup(kc, limit=1)
    _submit(kc, ns)
    _set(kc, ns, "Failed", message="Failed")
    wl = _wl(kc, ns)
    check = _check(kc, ns)
    # Retry evicted the workload: the check is back to Pending with one retry counted and its backoff kept
    assert (check["state"], check["retryCount"], check["requeueAfterSeconds"]) == ("Pending", 1, 1)
    assert check["message"] == "Reset to Pending after eviction. Previously: Retry"
    assert cond(wl, "Evicted")[1] == "AdmissionCheck"
    assert _gone(kc, ns, 1)
    _requeue(kc, 1)  # reserved again after the backoff: the second attempt's request
    assert _is(_wl(kc, ns), "QuotaReserved")
    assert _requests(kc, ns) == [f"wl-{CHECK}-2"]
    _set(kc, ns, "Provisioned", attempt=2)
    check = _check(kc, ns)
    assert check["state"] == "Ready"
    assert check["podSetUpdates"][0]["annotations"][CONSUME] == f"wl-{CHECK}-2"
    assert _is(_wl(kc, ns), "Admitted")


def test_failure_retries_then_the_second_failure_rejects(kc: Cluster):
    # "Should retry if a ProvisioningRequest fails, then reject AdmissionCheck if the second ProvisioningRequest
    # fails"
    ns = _setup(kc, limit=1)
    _submit(kc, ns)
    _set(kc, ns, "Failed", message="Failed")
    _requeue(kc, 1)
    _set(kc, ns, "Failed", message="Failed again", attempt=2)
    wl = _wl(kc, ns)
    assert wl["spec"]["active"] is False
    assert cond(wl, "Evicted")[1] == "DeactivatedDueToAdmissionCheck"
    assert (
        "AdmissionCheckRejected",
        f'Deactivated due to AdmissionCheck in Rejected state: "{CHECK}" (Failed again)',
    ) in kc.events(ns, "wl")


def test_booking_expired_before_admission_retries(kc: Cluster):
    # "Should retry when a ProvisioningRequest is in BookingExpired stated, then succeed if the second
    # Provisioning request succeeds" (the booking expires while another check keeps the workload from admission;
    # here: before the workload's Admitted write, i.e. with Provisioned never set)
    ns = _setup(kc, limit=1)
    _submit(kc, ns)
    _set(kc, ns, "BookingExpired", message="expired")
    check = _check(kc, ns)
    assert (check["state"], check["retryCount"]) == ("Pending", 1)
    assert cond(_wl(kc, ns), "Evicted")[1] == "AdmissionCheck"
    _requeue(kc, 1)
    assert _requests(kc, ns) == [f"wl-{CHECK}-2"]
    _set(kc, ns, "Provisioned", attempt=2)
    assert _is(_wl(kc, ns), "Admitted")


def test_retry_message_before_eviction_names_the_failure(kc: Cluster):
    # the Retry state upstream's BackoffLimitCount=1 cases observe ("Retrying after failure: <message>"), seen
    # through the workload's eviction event
    ns = _setup(kc, limit=1)
    _submit(kc, ns)
    _set(kc, ns, "Failed", message="Failed")
    message = f'Evicted due to AdmissionCheck in Retry state: "{CHECK}" (Retrying after failure: Failed)'
    assert ("EvictedDueToAdmissionCheck", message) in kc.events(ns, "wl")


# -- When "Workload uses a provision admission check with BackoffLimitCount=2" ------------------------------------


def test_two_failures_retry_twice(kc: Cluster):
    # "Should retry twice if a ProvisioningRequest fails twice"
    ns = _setup(kc, limit=2)
    _submit(kc, ns)
    _set(kc, ns, "Failed", message="Failed")
    _requeue(kc, 1)
    _set(kc, ns, "Failed", message="Failed", attempt=2)
    check = _check(kc, ns)
    assert (check["state"], check["retryCount"], check["requeueAfterSeconds"]) == ("Pending", 2, 2)
    _requeue(kc, 2)
    assert _requests(kc, ns) == [f"wl-{CHECK}-3"]
    _set(kc, ns, "Provisioned", attempt=3)
    assert _is(_wl(kc, ns), "Admitted")


# -- the AdmissionCheck's Active condition (admissioncheck_reconciler.go and its unit test) ------------------------


def test_check_inactive_while_its_config_is_missing(kc: Cluster):
    ns = _setup(kc, config=False)
    active = kc.get("admissionchecks", CHECK)["status"]["conditions"][0]
    assert (active["type"], active["status"], active["reason"]) == ("Active", "False", "BadParametersRef")
    assert active["message"] == 'provisioningrequestconfigs.kueue.x-k8s.io "prov-config" not found'
    cq = cond(kc.get("clusterqueues", "cluster-queue"), "Active")
    assert (cq[0], cq[1]) == ("False", "AdmissionCheckInactive")
    _submit(kc, ns)
    assert not _is(_wl(kc, ns), "QuotaReserved")
    _config(kc)
    kc.settle()
    active = kc.get("admissionchecks", CHECK)["status"]["conditions"][0]
    assert (active["status"], active["reason"]) == ("True", "Active")
    assert _is(_wl(kc, ns), "QuotaReserved")
    assert _requests(kc, ns) == [f"wl-{CHECK}-1"]


def test_check_without_parameters_is_inactive(kc: Cluster):
    body = {"kind": "AdmissionCheck", "metadata": {"name": "bare"}, "spec": {"controllerName": CONTROLLER}}
    kc.create("admissionchecks", body)
    kc.settle()
    active = kc.get("admissionchecks", "bare")["status"]["conditions"][0]
    assert (active["status"], active["reason"], active["message"]) == (
        "False",
        "BadParametersRef",
        "missing parameters reference",
    )
