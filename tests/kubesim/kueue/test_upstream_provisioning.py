"""Kueue's ProvisioningRequest admission check integration cases, re-told through the official client against a
served kubesim (manual clock) whose cluster-autoscaler stand-in is off, so the tests write the requests' conditions
as upstream's do.

Source: test/integration/singlecluster/controller/admissionchecks/provisioning/provisioning_test.go ("Provisioning"
and "Provisioning with scheduling"), plus the AdmissionCheck reconciler of pkg/controller/admissionchecks/provisioning
for the Active condition and the pod-template cases of its controller_test.go (TestReconcile). Upstream's
"Provisioning" sets the quota reservation by hand (its manager runs no scheduler); here kubesim's scheduler reserves
it, so the admitted counts are the pod sets' own. Upstream waits with Eventually; here each write settles.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import pytest
from kubernetes.client.rest import ApiException

from kubesim.kueue.controllers.provisioning import limit_name
from tests.kubesim.kueue.conftest import KUEUE, Cluster, _cluster
from tests.kubesim.kueue.test_upstream_controllers import cond, reserve
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


def test_capacity_revoked_after_admission_deactivates(kc: Cluster):
    # "Should set AdmissionCheck status to Rejected, deactivate Workload, emit an event, and bump metrics when
    # workloads is not Finished, and the ProvisioningRequest's condition is set to CapacityRevoked" (the metric,
    # labelled by reason and underlying cause upstream, is not asserted: kubesim labels evictions by reason only)
    ns = _setup(kc)
    _submit(kc, ns)
    _set(kc, ns, "Provisioned")
    assert _is(_wl(kc, ns), "Admitted")
    _set(kc, ns, "CapacityRevoked")
    wl = _wl(kc, ns)
    assert wl["spec"]["active"] is False
    check = _check(kc, ns)
    assert (check["state"], check["message"]) == ("Pending", "Reset to Pending after eviction. Previously: Rejected")
    assert cond(wl, "Evicted")[1] == "DeactivatedDueToAdmissionCheck"
    assert ("AdmissionCheckRejected", f'Deactivated due to AdmissionCheck in Rejected state: "{CHECK}"') in kc.events(
        ns, "wl"
    )


def test_running_workload_continues_after_its_request_is_deleted(kc: Cluster):
    # "Should let a running workload to continue after the provisioning request deleted"
    ns = _setup(kc)
    _submit(kc, ns)
    _set(kc, ns, "Provisioned")
    annotations = {CONSUME: f"wl-{CHECK}-1", CLASS: "provisioning-class"}
    check = _check(kc, ns)
    assert check["state"] == "Ready"
    assert check["podSetUpdates"] == [
        {"name": "ps1", "annotations": annotations},
        {"name": "ps2", "annotations": annotations},
    ]
    assert _is(_wl(kc, ns), "Admitted")
    kc.custom.delete_namespaced_custom_object(*AUTOSCALING, ns, "provisioningrequests", f"wl-{CHECK}-1")
    kc.settle(5)
    assert _gone(kc, ns)
    assert _requests(kc, ns) == []  # no new attempt either
    assert _check(kc, ns)["state"] == "Ready"
    wl = _wl(kc, ns)
    assert _is(wl, "Admitted")
    assert not _is(wl, "Evicted")


def test_checks_of_an_evicted_workload_stay_pending(kc: Cluster):
    # "Admission checks for an evicted workload are Pending" (BackoffLimitCount=1, BaseBackoff 2): after the
    # Failed request's Retry evicts the workload, its check is Pending and stays so while the eviction is not
    # finished (no Job owns the Workload, so nothing clears its reservation), with no second request
    ns = _setup(kc, limit=1)
    kc.custom.patch_cluster_custom_object(
        *KUEUE, "provisioningrequestconfigs", "prov-config", {"spec": {"retryStrategy": {"backoffBaseSeconds": 2}}}
    )
    _submit(kc, ns)
    _set(kc, ns, "Failed")
    wl = _wl(kc, ns)
    assert cond(wl, "Evicted")[1] == "AdmissionCheck"
    for _ in range(3):
        kc.settle(1)
        check = _check(kc, ns)
        assert check["state"] == "Pending", check
        assert _is(_wl(kc, ns), "QuotaReserved")
        assert _requests(kc, ns) == []


# -- "Provisioning with scheduling": When "A workload is preempted from a flavor which uses an admission check" ------
# Upstream runs its scheduler and Job controller here, as kubesim always does: Jobs are submitted, the scheduler
# reserves and preempts, the Job integration suspends the preempted Job and releases its reservation.


def _scheduling_setup(kc: Cluster, rules: list[tuple[str, str]], memory: bool = False) -> str:
    """The JustBeforeEach plus the case's queues: flavors flavor-1 (ns1=ns1v, 0.75 cpu) and flavor-2 (ns2=ns2v,
    0.5 cpu), with 5G memory each when `memory`; a priority class of 1000; one config with BackoffLimitCount=1; two
    provisioning checks; a ClusterQueue preempting lower priority within itself whose check rules are `rules`
    (check, the one flavor it is on)."""
    for name, label in (("flavor-1", "ns1"), ("flavor-2", "ns2")):
        body = {"kind": "ResourceFlavor", "metadata": {"name": name}, "spec": {"nodeLabels": {label: f"{label}v"}}}
        kc.create("resourceflavors", body)
    kc.priority_class("priority-class", 1000)
    _config(kc, limit=1)
    ref = {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "prov-config"}
    for name in ("ac-prov1", "ac-prov2"):
        body = {"kind": "AdmissionCheck", "metadata": {"name": name}, "spec": {"controllerName": CONTROLLER}}
        body["spec"]["parameters"] = ref
        kc.create("admissionchecks", body)
    covered = ["cpu", "memory"] if memory else ["cpu"]

    def quotas(cpu: str) -> list[dict]:
        return [{"name": "cpu", "nominalQuota": cpu}] + ([{"name": "memory", "nominalQuota": "5G"}] if memory else [])

    flavors = [{"name": "flavor-1", "resources": quotas("0.75")}, {"name": "flavor-2", "resources": quotas("0.5")}]
    spec = {
        "namespaceSelector": {},
        "preemption": {"withinClusterQueue": "LowerPriority"},
        "resourceGroups": [{"coveredResources": covered, "flavors": flavors}],
        "admissionChecksStrategy": {"admissionChecks": [{"name": c, "onFlavors": [f]} for c, f in rules]},
    }
    kc.create("clusterqueues", {"kind": "ClusterQueue", "metadata": {"name": "cluster-queue"}, "spec": spec})
    ns = kc.namespace()
    kc.local_queue("queue", "cluster-queue", ns)
    kc.settle()
    assert cond(kc.get("clusterqueues", "cluster-queue"), "Active")[0] == "True"
    return ns


def _cpu_job(kc: Cluster, ns: str, name: str, cpu: str, memory: str | None = None, priority: str | None = None) -> None:
    """testingjob.MakeJob(...).Queue("queue").Request(cpu[, memory])[.WorkloadPriorityClass(priority)]."""
    labels = {"kueue.x-k8s.io/queue-name": "queue"}
    if priority:
        labels["kueue.x-k8s.io/priority-class"] = priority
    requests = {"cpu": cpu, **({"memory": memory} if memory else {})}
    container = {"name": "c", "image": "busybox:1.36", "command": ["sleep", "600"], "resources": {"requests": requests}}
    body = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": labels},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [container]}}},
    }
    kc.batch.create_namespaced_job(ns, body)
    kc.settle()


def _status(wl: dict) -> str:
    """workload.Status: the furthest of Finished, Admitted, QuotaReserved, else Pending."""
    for ctype in ("Finished", "Admitted", "QuotaReserved"):
        if _is(wl, ctype):
            return ctype
    return "Pending"


def _flavors(wl: dict) -> dict:
    [psa] = wl["status"]["admission"]["podSetAssignments"]
    return psa["flavors"]


def _provision(kc: Cluster, ns: str, name: str) -> None:
    pr = kc.custom.get_namespaced_custom_object(*AUTOSCALING, ns, "provisioningrequests", name)
    cond_ = {"type": "Provisioned", "status": "True", "reason": "Provisioned", "message": "", "lastTransitionTime": ""}
    cond_["lastTransitionTime"] = kc.ks.advance(0)
    kc.custom.patch_namespaced_custom_object_status(
        *AUTOSCALING, ns, "provisioningrequests", pr["metadata"]["name"], {"status": {"conditions": [cond_]}}
    )
    kc.settle()


def _check_names(wl: dict) -> list[str]:
    return [c["name"] for c in (wl.get("status") or {}).get("admissionChecks") or []]


def _admit_job1_on_flavor_1(kc: Cluster, ns: str, memory: str | None = None) -> str:
    """job1 (500m cpu, submitted) reserves on flavor-1, which asks for ac-prov1; its request provisioned, it is
    admitted."""
    wl = kc.workload(ns, "job1")
    assert _status(wl) == "QuotaReserved"
    want = {"cpu": "flavor-1", **({"memory": "flavor-1"} if memory else {})}
    assert _flavors(wl) == want
    name = wl["metadata"]["name"]
    request = f"{name}-ac-prov1-1"
    assert _requests(kc, ns) == [request]
    _provision(kc, ns, request)
    assert _status(kc.workload(ns, "job1")) == "Admitted"
    return name


def test_preempted_workload_readmitted_on_another_flavor_without_a_check(kc: Cluster):
    # "Provisioning with scheduling": "Should be successfully re-admitted on another flavor without an admission
    # check"
    ns = _scheduling_setup(kc, [("ac-prov1", "flavor-1")])
    _cpu_job(kc, ns, "job1", "500m")
    wl1 = kc.workload(ns, "job1")
    assert wl1["spec"]["podSets"][0]["template"]["metadata"]["labels"] == {"batch.kubernetes.io/job-name": "job1"}
    _admit_job1_on_flavor_1(kc, ns)
    _cpu_job(kc, ns, "job2", "750m", priority="priority-class")
    assert _status(kc.workload(ns, "job2")) == "QuotaReserved"
    wl1 = kc.workload(ns, "job1")
    assert _status(wl1) == "Admitted"
    assert _flavors(wl1) == {"cpu": "flavor-2"}
    assert "ac-prov1" not in _check_names(wl1)


def test_preempted_workload_readmitted_on_another_flavor_with_another_check(kc: Cluster):
    # "Provisioning with scheduling": "Should be successfully re-admitted on another flavor with another admission
    # check"
    ns = _scheduling_setup(kc, [("ac-prov1", "flavor-1"), ("ac-prov2", "flavor-2")])
    _cpu_job(kc, ns, "job1", "500m")
    name = _admit_job1_on_flavor_1(kc, ns)
    _cpu_job(kc, ns, "job2", "750m", priority="priority-class")
    assert _status(kc.workload(ns, "job2")) == "QuotaReserved"
    request = f"{name}-ac-prov2-1"
    assert request in _requests(kc, ns)
    wl1 = kc.workload(ns, "job1")
    assert (_status(wl1), _flavors(wl1)) == ("QuotaReserved", {"cpu": "flavor-2"})
    _provision(kc, ns, request)
    wl1 = kc.workload(ns, "job1")
    assert _status(wl1) == "Admitted"
    states = {c["name"]: c["state"] for c in wl1["status"]["admissionChecks"]}
    assert states == {"ac-prov2": "Ready"}


def test_preempted_workload_readmitted_on_another_flavor_with_a_decimal_memory_request(kc: Cluster):
    # "Provisioning with scheduling": "Should be successfully re-admitted on another flavor with a decimal memory
    # request" (220M fits 5G on either flavor; the memory request's decimal form must not stop the re-admission)
    ns = _scheduling_setup(kc, [("ac-prov1", "flavor-1")], memory=True)
    _cpu_job(kc, ns, "job1", "500m", "220M")
    _admit_job1_on_flavor_1(kc, ns, memory="220M")
    _cpu_job(kc, ns, "job2", "750m", priority="priority-class")
    wl1 = kc.workload(ns, "job1")
    assert _status(wl1) == "Admitted"
    assert _flavors(wl1) == {"cpu": "flavor-2", "memory": "flavor-2"}


# -- When "A workload is using a provision request with enabled PodSetMergePolicy", and the pod templates of the
# unit cases (pkg/controller/admissionchecks/provisioning/controller_test.go, TestReconcile) -------------------------


def _merge_setup(kc: Cluster, policy: str | None, groups: list[dict], flavors: list[dict]) -> str:
    """A config with this podSetMergePolicy (retry limit 0), its check, the flavors and a ClusterQueue of these
    resource groups asking for the check, a LocalQueue."""
    spec: dict = {"provisioningClassName": "provisioning-class", "retryStrategy": {"backoffLimitCount": 0}}
    if policy:
        spec["podSetMergePolicy"] = policy
    kc.create(
        "provisioningrequestconfigs",
        {"kind": "ProvisioningRequestConfig", "metadata": {"name": "prov-config"}, "spec": spec},
    )
    ref = {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "prov-config"}
    kc.create(
        "admissionchecks",
        {
            "kind": "AdmissionCheck",
            "metadata": {"name": CHECK},
            "spec": {"controllerName": CONTROLLER, "parameters": ref},
        },
    )
    for rf in flavors:
        kc.create("resourceflavors", {"kind": "ResourceFlavor", **rf})
    cq = {
        "namespaceSelector": {},
        "resourceGroups": groups,
        "admissionChecksStrategy": {"admissionChecks": [{"name": CHECK}]},
    }
    kc.create("clusterqueues", {"kind": "ClusterQueue", "metadata": {"name": "cluster-queue"}, "spec": cq})
    ns = kc.namespace()
    kc.local_queue("queue", "cluster-queue", ns)
    kc.settle()
    return ns


def _podset(name: str, count: int, requests: dict, **spec: object) -> dict:
    labels = spec.pop("labels", None)
    container = {"name": "c", "image": "image", "resources": {"requests": requests}}
    template: dict = {"spec": {"containers": [container], **spec}}
    if labels:
        template["metadata"] = {"labels": labels}
    return {"name": name, "count": count, "template": template}


def _templates(kc: Cluster, ns: str) -> dict[str, dict]:
    """The request's PodTemplates by name, as the API serves them."""
    items = kc.core.list_namespaced_pod_template(ns).items
    return {t.metadata.name: kc.client.sanitize_for_serialization(t) for t in items}


def test_merge_policy_identical_scheduling_requirements_merges_like_pod_sets(kc: Cluster):
    # "Should merge similar PodSets into one PodTemplate, PodSetMergePolicy is IdenticalWorkloadSchedulingRequirements":
    # master (1) and worker (4, of which 2 admitted) differ only in their labels, so the request has one pod set of 3
    # on the master's template. Upstream sets the admission by hand with 2 workers; here the scheduler admits 2 of
    # them (partial admission: worker minCount 2, quota for 3 pods).
    groups = [
        {
            "coveredResources": ["cpu", "memory"],
            "flavors": [
                {
                    "name": "on-demand",
                    "resources": [{"name": "cpu", "nominalQuota": "3"}, {"name": "memory", "nominalQuota": "6Gi"}],
                }
            ],
        }
    ]
    rf = {"metadata": {"name": "on-demand"}, "spec": {"nodeLabels": {"ns1": "ns1v"}}}
    ns = _merge_setup(kc, "IdenticalWorkloadSchedulingRequirements", groups, [rf])
    requests = {"cpu": "1", "memory": "2Gi"}
    worker = _podset("worker", 4, requests, labels={"role": "worker"})
    worker["minCount"] = 2
    body = {
        "kind": "Workload",
        "metadata": {"name": "wl"},
        "spec": {"queueName": "queue", "podSets": [_podset("master", 1, requests, labels={"role": "master"}), worker]},
    }
    kc.create("workloads", body, ns)
    kc.settle()
    wl = _wl(kc, ns)
    assert [a["count"] for a in wl["status"]["admission"]["podSetAssignments"]] == [1, 2]
    pr = _request(kc, ns)
    assert pr["metadata"]["labels"] == {"kueue.x-k8s.io/managed": "true"}
    assert [(p["podTemplateRef"]["name"], p["count"]) for p in pr["spec"]["podSets"]] == [
        (f"ppt-wl-{CHECK}-1-master", 3)
    ]
    [template] = _templates(kc, ns).values()
    assert template["metadata"]["labels"] == {"kueue.x-k8s.io/managed": "true"}
    [container] = template["template"]["spec"]["containers"]
    want = wl["spec"]["podSets"][0]["template"]["spec"]["containers"][0]
    assert (container["name"], container["image"], container["resources"]) == (
        want["name"],
        want["image"],
        want["resources"],
    )
    assert template["template"]["spec"]["nodeSelector"] == {"ns1": "ns1v"}
    assert template["template"]["metadata"]["labels"] == {"role": "master"}
    # a merged pod set gets no podSetUpdate of its own: the request names the first pod set's template only
    _set(kc, ns, "Provisioned")
    updates = _check(kc, ns)["podSetUpdates"]
    assert [u["name"] for u in updates] == ["master"]


def _five_pod_sets(kc: Cluster, policy: str | None, podsets: list[dict]) -> str:
    """TestReconcile's merge cases: flv1 (node label f1l1=v1, a NoSchedule toleration) holds cpu, flv2 (f2l1=v1)
    memory, so ps1 and ps2 (cpu) get flv1 and ps3-ps5 (memory) flv2; counts as upstream's admitted counts."""
    toleration = {"key": "f1t1k", "operator": "Equal", "value": "f1t1v", "effect": "NoSchedule"}
    flavors = [
        {"metadata": {"name": "flv1"}, "spec": {"nodeLabels": {"f1l1": "v1"}, "tolerations": [toleration]}},
        {"metadata": {"name": "flv2"}, "spec": {"nodeLabels": {"f2l1": "v1"}}},
    ]
    groups = [
        {
            "coveredResources": ["cpu"],
            "flavors": [{"name": "flv1", "resources": [{"name": "cpu", "nominalQuota": "10"}]}],
        },
        {
            "coveredResources": ["memory"],
            "flavors": [{"name": "flv2", "resources": [{"name": "memory", "nominalQuota": "1G"}]}],
        },
    ]
    ns = _merge_setup(kc, policy, groups, flavors)
    kc.create(
        "workloads",
        {"kind": "Workload", "metadata": {"name": "wl"}, "spec": {"queueName": "queue", "podSets": podsets}},
        ns,
    )
    kc.settle()
    assert _is(_wl(kc, ns), "QuotaReserved")
    return ns


FLV1_TOLERATION = {"key": "f1t1k", "operator": "Equal", "value": "f1t1v", "effect": "NoSchedule"}
AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "type", "operator": "In", "values": ["two"]}]}]
        }
    }
}


def test_merge_policy_identical_pod_templates(kc: Cluster):
    # TestReconcile "with podSetMergePolicy IdenticalPodTemplates": ps1 = ps2 and ps3 = ps4 merge; ps5 differs from
    # them by its priority class alone and stays apart. Each template has its flavor's node label, flv1's
    # toleration, and its pod set's priority class.
    cpu, mem = {"cpu": "1"}, {"memory": "1M"}
    podsets = [
        _podset("ps1", 1, cpu),
        _podset("ps2", 2, cpu),
        _podset("ps3", 2, mem, priorityClassName="pc-100"),
        _podset("ps4", 1, mem, priorityClassName="pc-100"),
        _podset("ps5", 1, mem, priorityClassName="pc-200"),
    ]
    ns = _five_pod_sets(kc, "IdenticalPodTemplates", podsets)
    pr = _request(kc, ns)
    assert [(p["podTemplateRef"]["name"], p["count"]) for p in pr["spec"]["podSets"]] == [
        (f"ppt-wl-{CHECK}-1-ps1", 3),
        (f"ppt-wl-{CHECK}-1-ps3", 3),
        (f"ppt-wl-{CHECK}-1-ps5", 1),
    ]
    templates = _templates(kc, ns)
    assert sorted(templates) == [f"ppt-wl-{CHECK}-1-{ps}" for ps in ("ps1", "ps3", "ps5")]
    ps1, ps3, ps5 = (templates[f"ppt-wl-{CHECK}-1-{ps}"]["template"]["spec"] for ps in ("ps1", "ps3", "ps5"))
    assert (ps1["nodeSelector"], ps1["tolerations"], ps1.get("priorityClassName")) == (
        {"f1l1": "v1"},
        [FLV1_TOLERATION],
        None,
    )
    assert (ps3["nodeSelector"], ps3.get("tolerations"), ps3["priorityClassName"]) == ({"f2l1": "v1"}, None, "pc-100")
    assert (ps5["nodeSelector"], ps5["priorityClassName"]) == ({"f2l1": "v1"}, "pc-200")
    for t in templates.values():
        [owner] = t["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"]) == ("ProvisioningRequest", f"wl-{CHECK}-1")


def test_merge_policy_identical_scheduling_requirements_ignores_priority_but_not_affinity(kc: Cluster):
    # TestReconcile "with podSetMergePolicy IdenticalWorkloadSchedulingRequirements": priority classes do not keep
    # ps1 from ps2 nor ps3 from ps4; ps5's node affinity keeps it apart, and its template carries that affinity.
    # (Upstream's ps3 and ps4 also differ in topology requests, which need Topology Aware Scheduling: left out.)
    cpu, mem = {"cpu": "1"}, {"memory": "1M"}
    podsets = [
        _podset("ps1", 1, cpu, priorityClassName="pc-100"),
        _podset("ps2", 2, cpu, priorityClassName="pc-200"),
        _podset("ps3", 2, mem, priorityClassName="pc-100"),
        _podset("ps4", 1, mem, priorityClassName="pc-200"),
        _podset("ps5", 1, mem, priorityClassName="pc-300", affinity=AFFINITY),
    ]
    ns = _five_pod_sets(kc, "IdenticalWorkloadSchedulingRequirements", podsets)
    pr = _request(kc, ns)
    assert [(p["podTemplateRef"]["name"], p["count"]) for p in pr["spec"]["podSets"]] == [
        (f"ppt-wl-{CHECK}-1-ps1", 3),
        (f"ppt-wl-{CHECK}-1-ps3", 3),
        (f"ppt-wl-{CHECK}-1-ps5", 1),
    ]
    templates = _templates(kc, ns)
    ps1 = templates[f"ppt-wl-{CHECK}-1-ps1"]["template"]["spec"]
    assert (ps1["priorityClassName"], ps1["tolerations"]) == ("pc-100", [FLV1_TOLERATION])
    ps5 = templates[f"ppt-wl-{CHECK}-1-ps5"]["template"]["spec"]
    assert (ps5["priorityClassName"], ps5["affinity"], ps5["nodeSelector"]) == ("pc-300", AFFINITY, {"f2l1": "v1"})


def test_without_merge_policy_each_pod_set_has_its_template(kc: Cluster):
    # TestReconcile "with config": no podSetMergePolicy, so even identical pod sets keep a template each; the cpu
    # pod set's template has flv1's node label and toleration, the memory one flv2's node label only
    cpu, mem = {"cpu": "1"}, {"memory": "1M"}
    ns = _five_pod_sets(kc, None, [_podset("ps1", 1, cpu), _podset("ps2", 2, cpu), _podset("ps3", 2, mem)])
    pr = _request(kc, ns)
    assert [(p["podTemplateRef"]["name"], p["count"]) for p in pr["spec"]["podSets"]] == [
        (f"ppt-wl-{CHECK}-1-ps1", 1),
        (f"ppt-wl-{CHECK}-1-ps2", 2),
        (f"ppt-wl-{CHECK}-1-ps3", 2),
    ]
    templates = _templates(kc, ns)
    ps2 = templates[f"ppt-wl-{CHECK}-1-ps2"]["template"]["spec"]
    ps3 = templates[f"ppt-wl-{CHECK}-1-ps3"]["template"]["spec"]
    assert (ps2["nodeSelector"], ps2["tolerations"]) == ({"f1l1": "v1"}, [FLV1_TOLERATION])
    assert (ps3["nodeSelector"], ps3.get("tolerations")) == ({"f2l1": "v1"}, None)


def test_template_clashing_with_its_flavor_makes_no_request(kc: Cluster):
    # TestReconcile "when pod template creation error", through the clash Kueue's podset merge refuses: a pod set
    # whose nodeSelector gives the flavor's node label another value. The scheduler never assigns such a flavor,
    # so the reservation is written by hand (util.SetQuotaReservation) on a Workload no LocalQueue holds.
    ns = _setup(kc)
    c = {"name": "c", "image": "image", "resources": {"requests": {"cpu": "1"}}}
    podsets = [{"name": "ps1", "count": 1, "template": {"spec": {"containers": [c], "nodeSelector": {"ns1": "other"}}}}]
    kc.create("workloads", {"kind": "Workload", "metadata": {"name": "wl"}, "spec": {"podSets": podsets}}, ns)
    reserve(kc, ns, "wl", "cluster-queue", [("ps1", {"cpu": "on-demand"}, {"cpu": "1"}, 1)])
    assert _requests(kc, ns) == []
    assert kc.core.list_namespaced_pod_template(ns).items == []
    template = f"ppt-wl-{CHECK}-1-ps1"
    message = (
        f'Error creating PodTemplate "{template}": invalid admission check PodSetUpdate: conflict for nodeSelector: '
        "conflict for key=ns1, value1=other, value2=ns1v"
    )
    check = _check(kc, ns)
    assert (check["state"], check["message"]) == ("Pending", message)
    assert ("FailedCreate", message) in kc.events(ns, "wl")


def test_pod_templates_changed_or_deleted_by_another_client_are_left_so(kc: Cluster):
    # Kueue's provisioning controller watches Workloads, their requests, AdmissionChecks and configs, never
    # PodTemplates (SetupWithManager): a template deleted or edited by someone else is not put back, and the
    # request it belongs to stands, also through later reconciles of the workload
    ns = _setup(kc)
    _submit(kc, ns)
    uid = _request(kc, ns)["metadata"]["uid"]
    kc.core.delete_namespaced_pod_template(f"ppt-wl-{CHECK}-1-ps1", ns)
    kc.core.patch_namespaced_pod_template(f"ppt-wl-{CHECK}-1-ps2", ns, {"metadata": {"labels": {"edited": "yes"}}})
    kc.settle(5)
    _set(kc, ns, "Accepted")  # the request changes: the workload is reconciled again
    assert _requests(kc, ns) == [f"wl-{CHECK}-1"]
    assert _request(kc, ns)["metadata"]["uid"] == uid
    names = [pt.metadata.name for pt in kc.core.list_namespaced_pod_template(ns).items]
    assert names == [f"ppt-wl-{CHECK}-1-ps2"]
    assert kc.core.read_namespaced_pod_template(names[0], ns).metadata.labels["edited"] == "yes"
    _set(kc, ns, "Provisioned")
    assert _check(kc, ns)["state"] == "Ready"
    assert _is(_wl(kc, ns), "Admitted")


def test_an_admission_missing_a_pod_set_is_refused_so_kueues_inconsistent_assignments_cannot_arise(kc: Cluster):
    # controller.go's errInconsistentPodSetAssignments (a covered pod set without an assignment) is not emulated:
    # the Workload CRD refuses such an admission while QuotaReserved is True, as kube-apiserver does
    ns = _setup(kc)
    _submit(kc, ns, cpu="20")  # more cpu than the queue has: kubesim's scheduler leaves it
    with pytest.raises(ApiException) as refused:
        reserve(kc, ns, "wl", "cluster-queue", [("ps1", {"cpu": "on-demand"}, {"cpu": "60"}, 3)])
    assert refused.value.status == 422
    assert "podSetAssignments must have the same number of podSets as the spec" in refused.value.body
    assert _requests(kc, ns) == []


@pytest.mark.parametrize(("length", "cut"), [(247, False), (248, True), (300, True)])
def test_long_names_are_cut_as_kueues_limit_object_name_cuts_them(length: int, cut: bool):
    # limitObjectName: more than 247 characters keep their first 247, then "-" and five hex digits of the SHA-1
    name = "w" * (length - 2) + "-1"
    if not cut:
        assert limit_name(name) == name
        return
    assert limit_name(name) == name[:247] + "-" + hashlib.sha1(name.encode()).hexdigest()[:5]  # noqa: S324
    assert len(limit_name(name)) == 253


# -- controller_test.go: TestReconcile (the cases an API client can see) ---------------------------------------------
# Upstream calls the reconciler on objects it seeds; here they are made through the API and the reservation is written
# by hand (util.SetQuotaReservation) on a Workload no LocalQueue holds, or the scheduler reserves it.


def _unqueued(kc: Cluster, ns: str, ps2: dict | None = None) -> dict:
    """A Workload `wl` of pod sets ps1 (1 cpu) and ps2 (1 cpu unless given), in no LocalQueue (so reserved by
    hand), as created."""
    c = {"name": "c", "image": "image", "resources": {"requests": {"cpu": "1"}}}
    podsets = [
        {"name": "ps1", "count": 1, "template": {"spec": {"containers": [c]}}},
        {"name": "ps2", "count": 1, "template": ps2 or {"spec": {"containers": [c]}}},
    ]
    return kc.create("workloads", {"kind": "Workload", "metadata": {"name": "wl"}, "spec": {"podSets": podsets}}, ns)


def _reserve_both(kc: Cluster, ns: str) -> None:
    reserve(
        kc,
        ns,
        "wl",
        "cluster-queue",
        [(ps, {"cpu": "on-demand"}, {"cpu": "1"}, 1) for ps in ("ps1", "ps2")],
    )


def _template_owners(kc: Cluster, ns: str) -> dict[str, list[tuple[str, str, bool]]]:
    return {
        pt.metadata.name: [(o.kind, o.name, bool(o.controller)) for o in pt.metadata.owner_references or []]
        for pt in kc.core.list_namespaced_pod_template(ns).items
    }


def test_templates_made_before_a_clashing_one_stay_the_workloads(kc: Cluster):
    # "when pod template creation error": templates are made one by one, each owned by the Workload until the
    # request exists; the one whose flavor clashes with its nodeSelector is not made, nor is the request, and the
    # template made before it stays (the Workload's, so it goes with it)
    ns = _setup(kc)
    c = {"name": "c", "image": "image", "resources": {"requests": {"cpu": "1"}}}
    _unqueued(kc, ns, ps2={"spec": {"containers": [c], "nodeSelector": {"ns1": "other"}}})
    _reserve_both(kc, ns)
    assert _requests(kc, ns) == []
    assert _template_owners(kc, ns) == {f"ppt-wl-{CHECK}-1-ps1": [("Workload", "wl", True)]}
    message = (
        f'Error creating PodTemplate "ppt-wl-{CHECK}-1-ps2": invalid admission check PodSetUpdate: conflict for '
        "nodeSelector: conflict for key=ns1, value1=other, value2=ns1v"
    )
    assert _check(kc, ns)["message"] == message
    assert ("FailedCreate", message) in kc.events(ns, "wl")


def test_a_template_already_made_passes_to_the_request(kc: Cluster):
    # "one template already created": a template of the request's name owned by the Workload is kept as it is
    # (not made again) and passes to the request; the other is made, owned by the request
    ns = _setup(kc)
    wl = _unqueued(kc, ns)
    owner = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "name": "wl",
        "uid": wl["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    made = {
        "metadata": {"name": f"ppt-wl-{CHECK}-1-ps1", "labels": {"made": "before"}, "ownerReferences": [owner]},
        "template": {"spec": {"containers": [{"name": "c", "image": "earlier"}]}},
    }
    kc.core.create_namespaced_pod_template(ns, made)
    _reserve_both(kc, ns)
    assert _requests(kc, ns) == [f"wl-{CHECK}-1"]
    request = ("ProvisioningRequest", f"wl-{CHECK}-1", True)
    assert _template_owners(kc, ns) == {f"ppt-wl-{CHECK}-1-ps1": [request], f"ppt-wl-{CHECK}-1-ps2": [request]}
    kept = kc.core.read_namespaced_pod_template(f"ppt-wl-{CHECK}-1-ps1", ns)
    assert (kept.metadata.labels, kept.template.spec.containers[0].image) == ({"made": "before"}, "earlier")


def test_a_request_of_that_name_not_the_workloads_is_not_replaced(kc: Cluster):
    # "when the existing request is already visible in the cache": a request of the attempt's name that the
    # Workload does not own stays; the check's message and a FailedCreate event say why, the templates stay the
    # Workload's. Then "when the request has no conditions yet the previous check message is cleared": once that
    # request is gone, the Workload's next reconcile (kubesim: its next change; Kueue retries on its error backoff)
    # makes its own, and with no condition on it yet the message goes
    ns = _setup(kc)
    podsets = [{"podTemplateRef": {"name": "someone-elses"}, "count": 1}]
    foreign = {"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest"}
    foreign["metadata"] = {"name": f"wl-{CHECK}-1"}
    foreign["spec"] = {"provisioningClassName": "other", "podSets": podsets}
    kc.custom.create_namespaced_custom_object(*AUTOSCALING, ns, "provisioningrequests", foreign)
    _submit(kc, ns)  # the scheduler reserves (a reservation written by hand would go at the next change)
    message = (
        f'Error creating ProvisioningRequest "wl-{CHECK}-1": provisioningrequests.autoscaling.x-k8s.io '
        f'"wl-{CHECK}-1" already exists'
    )
    assert (_check(kc, ns)["state"], _check(kc, ns)["message"]) == ("Pending", message)
    assert ("FailedCreate", message) in kc.events(ns, "wl")
    assert _request(kc, ns)["spec"]["provisioningClassName"] == "other"
    workload = ("Workload", "wl", True)
    assert _template_owners(kc, ns) == {f"ppt-wl-{CHECK}-1-ps1": [workload], f"ppt-wl-{CHECK}-1-ps2": [workload]}
    kc.custom.delete_namespaced_custom_object(*AUTOSCALING, ns, "provisioningrequests", f"wl-{CHECK}-1")
    kc.custom.patch_namespaced_custom_object(*KUEUE, ns, "workloads", "wl", {"metadata": {"labels": {"touch": "1"}}})
    kc.settle()
    assert _request(kc, ns)["spec"]["provisioningClassName"] == "provisioning-class"
    assert (_check(kc, ns)["state"], _check(kc, ns).get("message", "")) == ("Pending", "")
    request = ("ProvisioningRequest", f"wl-{CHECK}-1", True)
    assert _template_owners(kc, ns) == {f"ppt-wl-{CHECK}-1-ps1": [request], f"ppt-wl-{CHECK}-1-ps2": [request]}


def test_requests_the_workload_no_longer_needs_are_deleted(kc: Cluster):
    # "remove unnecessary requests": a request the Workload owns that is not its check's current one goes
    ns = _setup(kc)
    _submit(kc, ns)
    owner = _request(kc, ns)["metadata"]["ownerReferences"]
    stray = {"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest"}
    stray["metadata"] = {"name": "wl-check2", "ownerReferences": owner}
    stray["spec"] = {"provisioningClassName": "other", "podSets": [{"podTemplateRef": {"name": "x"}, "count": 1}]}
    kc.custom.create_namespaced_custom_object(*AUTOSCALING, ns, "provisioningrequests", stray)
    kc.settle()
    assert _requests(kc, ns) == [f"wl-{CHECK}-1"]


def _managing(kc: Cluster, *resources: str) -> None:
    kc.custom.patch_cluster_custom_object(
        *KUEUE, "provisioningrequestconfigs", "prov-config", {"spec": {"managedResources": list(resources)}}
    )


def test_no_request_when_no_pod_set_uses_a_managed_resource(kc: Cluster):
    # "when no request is needed": the config manages a resource no pod set asks for
    ns = _setup(kc)
    _managing(kc, "example.org/gpu")
    _submit(kc, ns)
    check = _check(kc, ns)
    assert (check["state"], check["message"]) == ("Ready", "the provisioning request is not needed")
    assert _requests(kc, ns) == []
    assert (
        "AdmissionCheckUpdated",
        f"Admission check {CHECK} updated state from Pending to Ready with message: the "
        "provisioning request is not needed",
    ) in kc.events(ns, "wl")


@pytest.mark.parametrize("limit_only", [False, True], ids=["resource request", "resource limit"])
def test_a_request_covers_only_the_pod_sets_using_a_managed_resource(kc: Cluster, limit_only: bool):
    # "when request is needed for one PodSet (resource request)" and "(resource limit)": only ps2 asks for the
    # managed GPU; a container giving only its limit has the limit as its request in the template
    ns = _setup(kc)
    _managing(kc, GPU)
    c1 = {"name": "c", "image": "image", "resources": {"requests": {"cpu": "1"}}}
    resources = {"limits": {GPU: "1"}} if limit_only else {"requests": {"cpu": "500m", GPU: "1"}}
    c2 = {"name": "c", "image": "image", "resources": resources}
    podsets = [
        {"name": "ps1", "count": 2, "template": {"spec": {"containers": [c1]}}},
        {"name": "ps2", "count": 3, "template": {"spec": {"containers": [c2]}}},
    ]
    body = {"kind": "Workload", "metadata": {"name": "wl"}, "spec": {"queueName": "queue", "podSets": podsets}}
    kc.create("workloads", body, ns)
    kc.settle()
    pr = _request(kc, ns)
    assert pr["spec"]["podSets"] == [{"podTemplateRef": {"name": f"ppt-wl-{CHECK}-1-ps2"}, "count": 3}]
    template = kc.core.read_namespaced_pod_template(f"ppt-wl-{CHECK}-1-ps2", ns)
    want = {GPU: "1"} if limit_only else {"cpu": "500m", GPU: "1"}
    assert template.template.spec.containers[0].resources.requests == want


@pytest.mark.parametrize("detail", [True, False], ids=["detail given", "detail missing"])
def test_node_selectors_from_the_class_details(kc: Cluster, detail: bool):
    # "when request is provisioned and has NodeSelector specified via ProvisioningClassDetail" / "... missing in
    # the ProvisioningClassDetail": the config's podSetUpdates take a node selector's value from the request's
    # provisioningClassDetails; a missing detail adds no selector (and no empty nodeSelector either)
    ns = _setup(kc)
    selector = [{"key": "node-selector-key", "valueFromProvisioningClassDetail": "node-selector-value"}]
    kc.custom.patch_cluster_custom_object(
        *KUEUE, "provisioningrequestconfigs", "prov-config", {"spec": {"podSetUpdates": {"nodeSelector": selector}}}
    )
    _submit(kc, ns)
    details = {"node-selector-value": "nodes-selector-xyz"} if detail else {"some-detail": "xyz"}
    _set(kc, ns, "Provisioned", message="By test", provisioningClassDetails=details)
    annotations = {CONSUME: f"wl-{CHECK}-1", CLASS: "provisioning-class"}
    update: dict = {"annotations": annotations}
    if detail:
        update["nodeSelector"] = {"node-selector-key": "nodes-selector-xyz"}
    check = _check(kc, ns)
    assert (check["state"], check["message"]) == ("Ready", "By test")
    assert check["podSetUpdates"] == [{"name": "ps1", **update}, {"name": "ps2", **update}]


def test_a_provisioned_request_without_a_message_clears_the_checks_message(kc: Cluster):
    # "when the request is provisioned the previous check message is cleared": the check's earlier message (the
    # ETA) goes when the request is Provisioned without one, and the event says so without a message
    ns = _setup(kc)
    _submit(kc, ns)
    _set(kc, ns, "Accepted")
    _set(kc, ns, "Provisioned", "False", "Not provisioned, ETA: 2024-02-22T10:36:40Z.")
    assert _check(kc, ns)["message"] == "Not provisioned, ETA: 2024-02-22T10:36:40Z."
    _set(kc, ns, "Provisioned")
    check = _check(kc, ns)
    assert (check["state"], check.get("message", "")) == ("Ready", "")
    assert ("AdmissionCheckUpdated", f"Admission check {CHECK} updated state from Pending to Ready") in kc.events(
        ns, "wl"
    )


@pytest.fixture(scope="module")
def cluster_keep() -> Iterator[Cluster]:
    yield from _cluster(
        kueue_config={
            "featureGates": {"CleanupProvisioningRequestsOnEviction": False},
            "kubesim": {"provisioningRequestAutoscaler": False},
        }
    )


def test_with_the_cleanup_gate_off_an_eviction_keeps_the_requests(cluster_keep: Cluster):
    # "request preserved on workload evicted when cleanup is disabled" (CleanupProvisioningRequestsOnEviction, beta
    # and on, switched off)
    kc = cluster_keep
    kc.ks.reset()
    ns = _setup(kc)
    _submit(kc, ns)
    kc.custom.patch_namespaced_custom_object(*KUEUE, ns, "workloads", "wl", {"spec": {"active": False}})
    kc.settle()
    assert _is(_wl(kc, ns), "Evicted")
    assert _requests(kc, ns) == [f"wl-{CHECK}-1"]
    assert len(kc.core.list_namespaced_pod_template(ns).items) == 2


# -- admissioncheck_reconciler_test.go: TestReconcileAdmissionCheck ---------------------------------------------------


@pytest.mark.parametrize(
    ("ref", "config", "want"),
    [
        pytest.param(
            {"apiGroup": "bad.group", "kind": "ProvisioningRequestConfig", "name": "config1"},
            False,
            (
                "False",
                "BadParametersRef",
                'wrong group "bad.group", expecting "kueue.x-k8s.io": bad parameters reference',
            ),
            id="bad ref group",
        ),
        pytest.param(
            {"apiGroup": "kueue.x-k8s.io", "kind": "BadKind", "name": "config1"},
            False,
            (
                "False",
                "BadParametersRef",
                'wrong kind "BadKind", expecting "ProvisioningRequestConfig": bad parameters reference',
            ),
            id="bad ref kind",
        ),
        pytest.param(
            {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "config1"},
            False,
            ("False", "BadParametersRef", 'provisioningrequestconfigs.kueue.x-k8s.io "config1" not found'),
            id="config missing",
        ),
        pytest.param(
            {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "config1"},
            True,
            ("True", "Active", "The admission check is active"),
            id="config found",
        ),
    ],
)
def test_the_check_is_active_only_with_a_good_parameters_reference(
    kc: Cluster, ref: dict, config: bool, want: tuple[str, str, str]
):
    if config:
        _config(kc, name="config1")
    body = {"kind": "AdmissionCheck", "metadata": {"name": "check1"}}
    body["spec"] = {"controllerName": CONTROLLER, "parameters": ref}
    kc.create("admissionchecks", body)
    kc.settle()
    ac = kc.get("admissionchecks", "check1")
    [active] = ac["status"]["conditions"]
    assert (active["status"], active["reason"], active["message"]) == want
    assert active["observedGeneration"] == ac["metadata"]["generation"]


def test_an_unrelated_check_gets_no_condition_from_the_provisioning_controller(kc: Cluster):
    # "unrelated check": another controller's check is left to that controller
    kc.create(
        "admissionchecks", {"kind": "AdmissionCheck", "metadata": {"name": "check1"}, "spec": {"controllerName": "x"}}
    )
    kc.settle()
    assert not (kc.get("admissionchecks", "check1").get("status") or {}).get("conditions")


def test_a_new_reason_under_the_same_status_is_written(kc: Cluster):
    # the condition follows the reference as it changes, also while it stays False (SetStatusCondition)
    ref = {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "config1"}
    body = {"kind": "AdmissionCheck", "metadata": {"name": "check1"}, "spec": {"controllerName": CONTROLLER}}
    kc.create("admissionchecks", body)
    kc.settle()
    kc.custom.patch_cluster_custom_object(*KUEUE, "admissionchecks", "check1", {"spec": {"parameters": ref}})
    kc.settle()
    [active] = kc.get("admissionchecks", "check1")["status"]["conditions"]
    assert (active["status"], active["message"]) == (
        "False",
        'provisioningrequestconfigs.kueue.x-k8s.io "config1" not found',
    )
