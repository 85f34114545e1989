"""Kueue's webhook and CRD validation cases, ported from upstream (kubernetes-sigs/kueue, v0.20 line), each test
or parametrized case named after its upstream case:

- pkg/webhooks/clusterqueue_webhook_test.go: TestValidateClusterQueue, TestValidateClusterQueueUpdate,
  TestValidateTotalFlavors, TestValidateTotalCoveredResources, TestValidateFlavorResourceCombinations;
- pkg/webhooks/cohort_webhook_test.go: TestValidateCohort;
- pkg/webhooks/resourceflavor_webhook_test.go: TestValidateResourceFlavor;
- pkg/webhooks/workload_webhook_test.go: TestValidateWorkload, TestValidateWorkloadUpdate;
- pkg/controller/jobs/job/job_webhook_test.go: TestValidateCreate, TestValidateUpdate, TestDefault;
  pkg/controller/jobframework/defaults_test.go: TestApplyDefaultWorkloadPriorityClass;
- test/integration/singlecluster/webhook/core/{clusterqueue,cohort,resourceflavor,localqueue,admissioncheck,
  workload}_test.go and test/integration/singlecluster/webhook/jobs/job_webhook_test.go;
- apis/kueue/v1beta1 conversions (Borrow/Preempt to MayStopSearch, MayStopSearch kept) and the v1beta1 CEL table
  of workload_test.go.

Upstream's unit tests call the webhook's function: here they call the webhook as kubesim's API server does
(`hook.validate(resource, operation, obj, old, store)` / `hook.mutate(...)`), and compare field paths and
StatusCause reasons (upstream ignores details and bad values too). The integration tests create and update objects
over HTTP with the official client against a served kubesim: refusals are checked for their status and the field
paths they name.

A denial by one of Kueue's webhooks is answered as a real API server relays it: Kueue's validators return a
field.ErrorList aggregate, controller-runtime answers Denied(err.Error()), and the API server says 403 Forbidden
`admission webhook "v....kb.io" denied the request: <errors>` without causes (upstream's BeForbiddenError cases);
the field paths are read from the message. The CRD schema and CEL refusals stay 422 Invalid with causes. Go's typed
client omits empty strings: upstream's `QueueingStrategy("")` is sent here as no queueingStrategy at all.

Not ported (kubesim does not model them, or has no switch for them): feature-gate-off and gate-on-alpha variants
(kubesim runs v0.20's defaults: ConcurrentAdmission's validation and PriorityBoost are off, only the
ConcurrentAdmissionPolicy's immutability is checked); TAS (topologyRequest slice sizes and the Job webhook's
topology annotations; topology assignments only for the CRD's rules and their mutability); MultiKueue (managedBy
defaulting, the MultiKueueCluster/Config suites, the Incremental dispatcher's clusterName cases beyond the CRD
rules); ProvisioningRequest configs; manageJobsWithoutQueueName=true (kubesim runs with it off); owners of other
integrations (MPIJob, JobSet: kubesim knows batch/v1 Job only); the elastic-job scheduling gate; and the other job
integrations' webhook suites (JobSet, Ray, Kubeflow, pods, Deployments, StatefulSets, LeaderWorkerSets, AppWrapper).
"""

from __future__ import annotations

import json
import re

import pytest
from kubernetes.client.rest import ApiException

from kubesim.kueue import KueueConfig, admission_webhooks
from tests.kubesim.kueue.conftest import KUEUE, Cluster

# -- builders in the shape of upstream's utiltestingapi --------------------------------------------------------------


def fq(name: str, *resources: tuple) -> dict:
    """MakeFlavorQuotas(name).Resource(name, nominal="", borrowing="", lending="")..."""
    out = []
    for r in resources:
        name_, nominal, borrowing, lending = (*r, "", "", "")[:4] if isinstance(r, tuple) else (r, "", "", "")
        quota: dict = {"name": name_, "nominalQuota": nominal or "0"}
        if borrowing:
            quota["borrowingLimit"] = borrowing
        if lending:
            quota["lendingLimit"] = lending
        out.append(quota)
    return {"name": name, "resources": out}


def rg(*flavors: dict) -> dict:
    """ResourceGroup(flavors...): covered resources are the first flavor's, in its order."""
    covered = [r["name"] for r in flavors[0]["resources"]] if flavors else []
    return {"coveredResources": covered, "flavors": list(flavors)}


def cq(*groups: dict, name: str = "cluster-queue", **spec: object) -> dict:
    body: dict = dict(spec)
    if groups:
        body["resourceGroups"] = list(groups)
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name}, "spec": body}


def cohort(*groups: dict, name: str = "cohort", **spec: object) -> dict:
    body: dict = dict(spec)
    if groups:
        body["resourceGroups"] = list(groups)
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": name}, "spec": body}


def rf(name: str = "resource-flavor", **spec: object) -> dict:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def ac_rule(name: str, *flavors: str) -> dict:
    return {"admissionChecks": [{"name": name, "onFlavors": list(flavors)}]}


# -- the webhook entry point ----------------------------------------------------------------------------------------


class NoStore:
    def get(self, resource: str, namespace: str | None, name: str) -> dict | None:
        return None


def hook_errors(resource: str, obj: dict, old: dict | None = None) -> list[tuple[str, str]]:
    """(field, reason) of every error Kueue's webhooks report, called as the API server calls them."""
    operation = "UPDATE" if old is not None else "CREATE"
    errors: list[tuple[str, str]] = []
    for hook in admission_webhooks(KueueConfig.default()):
        obj = hook.mutate(resource, operation, obj, old, NoStore()) or obj
        for err in hook.validate(resource, operation, obj, old, NoStore()):
            errors.append((err[0], err[2] if len(err) > 2 else "FieldValueInvalid"))
    return errors


def hook_messages(resource: str, obj: dict, old: dict | None = None) -> list[str]:
    operation = "UPDATE" if old is not None else "CREATE"
    return [
        err[1]
        for hook in admission_webhooks(KueueConfig.default())
        for err in hook.validate(resource, operation, obj, old, NoStore())
    ]


INV, DUP, UNSUP, REQ, FORB, NOTFOUND = (
    "FieldValueInvalid",
    "FieldValueDuplicate",
    "FieldValueNotSupported",
    "FieldValueRequired",
    "FieldValueForbidden",
    "FieldValueNotFound",
)
RGS = "spec.resourceGroups"
RES0 = f"{RGS}[0].flavors[0].resources[0]"


# -- TestValidateClusterQueue ---------------------------------------------------------------------------------------

TFF = {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"}
CLUSTER_QUEUE_CASES = {
    "built-in resources with qualified names": (cq(rg(fq("default", "cpu"))), []),
    "invalid resource name": (cq(rg(fq("default", "@cpu"))), [(f"{RGS}[0].coveredResources[0]", INV)]),
    "admissionChecks defined": (cq(admissionChecksStrategy=ac_rule("ac1")), []),
    "admissionCheckStrategy defined with a valid flavor": (
        cq(rg(fq("flavor1", "cpu")), admissionChecksStrategy=ac_rule("ac1", "flavor1")),
        [],
    ),
    "admissionCheckStrategy refers to a flavor that is not in quota": (
        cq(admissionChecksStrategy=ac_rule("ac1", "flavor1")),
        [("spec.admissionChecksStrategy.admissionChecks[0].onFlavors[0]", UNSUP)],
    ),
    "in cohort": (cq(cohortName="prod"), []),
    "extended resources with qualified names": (cq(rg(fq("default", "example.com/gpu"))), []),
    "flavor with qualified names": (cq(rg(fq("x86", "cpu"))), []),
    "flavor quota with negative value": (cq(rg(fq("x86", ("cpu", "-1")))), [(f"{RES0}.nominalQuota", INV)]),
    "flavor quota with zero value": (cq(rg(fq("x86", ("cpu", "0")))), []),
    "flavor quota with borrowingLimit 0": (cq(rg(fq("x86", ("cpu", "1", "0"))), cohortName="cohort"), []),
    "flavor quota with negative borrowingLimit": (
        cq(rg(fq("x86", ("cpu", "1", "-1"))), cohortName="cohort"),
        [(f"{RES0}.borrowingLimit", INV)],
    ),
    "flavor quota with lendingLimit 0": (cq(rg(fq("x86", ("cpu", "1", "", "0"))), cohortName="cohort"), []),
    "flavor quota with negative lendingLimit": (
        cq(rg(fq("x86", ("cpu", "1", "", "-1"))), cohortName="cohort"),
        [(f"{RES0}.lendingLimit", INV)],
    ),
    "flavor quota with lendingLimit and empty cohort": (
        cq(rg(fq("x86", ("cpu", "1", "", "1")))),
        [(f"{RES0}.lendingLimit", INV)],
    ),
    "flavor quota with lendingLimit greater than nominalQuota": (
        cq(rg(fq("x86", ("cpu", "1", "", "2"))), cohortName="cohort"),
        [(f"{RES0}.lendingLimit", INV)],
    ),
    "empty queueing strategy is supported": (cq(queueingStrategy=""), []),
    "namespaceSelector with invalid labels": (
        cq(namespaceSelector={"matchLabels": {"nospecialchars^=@": "bar"}}),
        [("spec.namespaceSelector.matchLabels", INV)],
    ),
    "namespaceSelector with invalid expressions": (
        cq(namespaceSelector={"matchExpressions": [{"key": "key", "operator": "In"}]}),
        [("spec.namespaceSelector.matchExpressions[0].values", REQ)],
    ),
    "multiple resource groups": (
        cq(
            rg(fq("alpha", ("cpu", "0"), ("memory", "0")), fq("beta", ("cpu", "0"), ("memory", "0"))),
            rg(fq("gamma", ("example.com/gpu", "0")), fq("omega", ("example.com/gpu", "0"))),
        ),
        [],
    ),
    "resources in a flavor in different order": (
        cq(
            {
                "coveredResources": ["cpu", "memory"],
                "flavors": [fq("alpha", ("cpu", "0"), ("memory", "0")), fq("beta", ("memory", "0"), ("cpu", "0"))],
            }
        ),
        [(f"{RGS}[0].flavors[1].resources[0].name", INV), (f"{RGS}[0].flavors[1].resources[1].name", INV)],
    ),
    "resource in more than one resource group": (
        cq(rg(fq("alpha", ("cpu", "0"), ("memory", "0"))), rg(fq("beta", ("memory", "0")))),
        [(f"{RGS}[1].coveredResources[0]", DUP)],
    ),
    "flavor in more than one resource group": (
        cq(rg(fq("alpha", "cpu"), fq("beta", "cpu")), rg(fq("beta", "memory"))),
        [(f"{RGS}[1].flavors[0].name", DUP)],
    ),
    "valid preemption with borrowWithinCohort": (
        cq(
            preemption={
                "reclaimWithinCohort": "LowerPriority",
                "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 10},
            }
        ),
        [],
    ),
    "existing cluster queue created with older Kueue version that has a nil borrowWithinCohort field": (
        cq(preemption={"reclaimWithinCohort": "Never"}),
        [],
    ),
    "flavorFungibility preference set but whenCanPreempt != TryNextFlavor": (
        cq(flavorFungibility={**TFF, "whenCanPreempt": "MayStopSearch", "preference": "BorrowingOverPreemption"}),
        [("spec.flavorFungibility.preference", INV)],
    ),
    "flavorFungibility preference set but whenCanBorrow != TryNextFlavor": (
        cq(
            flavorFungibility={
                "whenCanBorrow": "MayStopSearch",
                "whenCanPreempt": "MayStopSearch",
                "preference": "BorrowingOverPreemption",
            }
        ),
        [("spec.flavorFungibility.preference", INV)],
    ),
    "flavorFungibility preference BorrowingOverPreemption with both TryNextFlavor is valid": (
        cq(flavorFungibility={**TFF, "preference": "BorrowingOverPreemption"}),
        [],
    ),
    "flavorFungibility preference PreemptionOverBorrowing with both TryNextFlavor is valid": (
        cq(flavorFungibility={**TFF, "preference": "PreemptionOverBorrowing"}),
        [],
    ),
    "flavorFungibility preference PreemptionOverBorrowing but whenCanBorrow != TryNextFlavor": (
        cq(flavorFungibility={**TFF, "whenCanBorrow": "MayStopSearch", "preference": "PreemptionOverBorrowing"}),
        [("spec.flavorFungibility.preference", INV)],
    ),
}


@pytest.mark.parametrize("case", CLUSTER_QUEUE_CASES, ids=list(CLUSTER_QUEUE_CASES))
def test_validate_cluster_queue(case: str) -> None:
    obj, want = CLUSTER_QUEUE_CASES[case]
    assert hook_errors("clusterqueues", json.loads(json.dumps(obj))) == want


def test_validate_cluster_queue_details() -> None:
    """The details upstream pins: the preference message and bad value, the unsupported flavor's allowed list."""
    obj = cq(flavorFungibility={**TFF, "whenCanPreempt": "MayStopSearch", "preference": "BorrowingOverPreemption"})
    assert hook_messages("clusterqueues", obj) == [
        'Invalid value: "BorrowingOverPreemption": preference "BorrowingOverPreemption" requires both '
        "whenCanBorrow and whenCanPreempt to be TryNextFlavor"
    ]
    obj = cq(rg(fq("alpha", ("cpu", "1"))), admissionChecksStrategy=ac_rule("ac1", "ghost"))
    assert hook_messages("clusterqueues", obj) == ['Unsupported value: "ghost": supported values: "alpha"']
    assert hook_messages("clusterqueues", cq(rg(fq("x86", ("cpu", "1", "", "2"))), cohortName="c")) == [
        'Invalid value: "2": must be less than or equal to the nominalQuota'
    ]


# -- TestValidateClusterQueueUpdate ---------------------------------------------------------------------------------

ON_FLAVOR0 = "spec.admissionChecksStrategy.admissionChecks[0].onFlavors[0]"
ALPHA = rg(fq("alpha", ("cpu", "1")))
CLUSTER_QUEUE_UPDATE_CASES = {
    "queueingStrategy can be updated": (cq(queueingStrategy="StrictFIFO"), cq(queueingStrategy="BestEffortFIFO"), []),
    "same queueingStrategy": (cq(queueingStrategy="BestEffortFIFO"), cq(queueingStrategy="BestEffortFIFO"), []),
    # RejectUpdatesToCQWithInvalidOnFlavors is off in v0.20 (alpha): the "gate disabled" case.
    "legacy cluster queue with invalid onFlavors allows unrelated updates when the feature gate is disabled": (
        cq(ALPHA, queueingStrategy="StrictFIFO", admissionChecksStrategy=ac_rule("ac1", "ghost")),
        cq(ALPHA, queueingStrategy="BestEffortFIFO", admissionChecksStrategy=ac_rule("ac1", "ghost")),
        [],
    ),
    "valid admissionCheckStrategy can be added when the old cluster queue has no strategy": (
        cq(ALPHA),
        cq(ALPHA, admissionChecksStrategy=ac_rule("ac1", "alpha")),
        [],
    ),
    "invalid admissionCheckStrategy is rejected when the old cluster queue has no strategy": (
        cq(ALPHA),
        cq(ALPHA, admissionChecksStrategy=ac_rule("ac1", "ghost")),
        [(ON_FLAVOR0, UNSUP)],
    ),
    "resourceGroup flavor change revalidates admissionCheck onFlavors for legacy cluster queue": (
        cq(ALPHA, admissionChecksStrategy=ac_rule("ac1", "ghost")),
        cq(rg(fq("beta", ("cpu", "1"))), admissionChecksStrategy=ac_rule("ac1", "ghost")),
        [(ON_FLAVOR0, UNSUP)],
    ),
    "changing invalid onFlavors for a legacy cluster queue revalidates the new ref": (
        cq(ALPHA, admissionChecksStrategy=ac_rule("ac1", "ghost")),
        cq(ALPHA, admissionChecksStrategy=ac_rule("ac1", "phantom")),
        [(ON_FLAVOR0, UNSUP)],
    ),
    "changing admissionCheck name revalidates onFlavors for the new rule": (
        cq(ALPHA, admissionChecksStrategy=ac_rule("ac1", "ghost")),
        cq(ALPHA, admissionChecksStrategy=ac_rule("ac2", "ghost")),
        [(ON_FLAVOR0, UNSUP)],
    ),
    "ConcurrentAdmissionPolicy cannot be added": (
        cq(ALPHA),
        cq(ALPHA, concurrentAdmissionPolicy={"migration": {"mode": "TryPreferredFlavors"}}),
        [("spec.concurrentAdmissionPolicy", INV)],
    ),
    "ConcurrentAdmissionPolicy cannot be removed": (
        cq(ALPHA, concurrentAdmissionPolicy={"migration": {"mode": "TryPreferredFlavors"}}),
        cq(ALPHA),
        [("spec.concurrentAdmissionPolicy", INV)],
    ),
}


@pytest.mark.parametrize("case", CLUSTER_QUEUE_UPDATE_CASES, ids=list(CLUSTER_QUEUE_UPDATE_CASES))
def test_validate_cluster_queue_update(case: str) -> None:
    old, new, want = CLUSTER_QUEUE_UPDATE_CASES[case]
    assert hook_errors("clusterqueues", json.loads(json.dumps(new)), json.loads(json.dumps(old))) == want


def make_flavors(n: int) -> list[dict]:
    return [fq(f"f{i:03d}", ("cpu", "1")) for i in range(n)]


@pytest.mark.parametrize(("n", "want_err"), [(10, False), (256, False), (257, True)])
def test_validate_total_flavors(n: int, want_err: bool) -> None:
    """TestValidateTotalFlavors: within limit (10), at limit (256), over limit (257)."""
    errors = hook_errors("clusterqueues", cq(rg(*make_flavors(n))))  # the webhook alone: the CRD bounds one group
    assert bool(errors) is want_err
    if want_err:
        assert errors == [(RGS, INV)]


@pytest.mark.parametrize(("n", "want_err"), [(10, False), (256, False), (257, True)])
def test_validate_total_covered_resources(n: int, want_err: bool) -> None:
    """TestValidateTotalCoveredResources."""
    errors = hook_errors("clusterqueues", cq(rg(fq("default", *[(f"res{i:03d}", "1") for i in range(n)]))))
    assert bool(errors) is want_err
    if want_err:
        assert errors == [(RGS, INV)]


@pytest.mark.parametrize(("flavors", "resources", "want_err"), [(1, 10, False), (8, 64, False), (9, 64, True)])
def test_validate_flavor_resource_combinations(flavors: int, resources: int, want_err: bool) -> None:
    """TestValidateFlavorResourceCombinations: 1x10, 8x64 = 512 (at limit), 9x64 = 576 (over)."""
    names = [f"res{j:03d}" for j in range(resources)]
    group = rg(*[fq(f"f{i:03d}", *[(r, "1") for r in names]) for i in range(flavors)])
    errors = hook_errors("clusterqueues", cq(group))
    assert errors == ([(f"{RGS}[0]", INV)] if want_err else [])


# -- TestValidateCohort, TestValidateResourceFlavor -----------------------------------------------------------------


def test_validate_cohort() -> None:
    """flavor quota with lendingLimit and empty parent."""
    obj = cohort(rg(fq("x86", ("cpu", "1", "", "1"))))
    assert hook_errors("cohorts", obj) == [(f"{RES0}.lendingLimit", INV)]
    assert hook_messages("cohorts", obj) == ['Invalid value: "1": must be nil when parent is empty']


RESOURCE_FLAVOR_CASES = {
    "empty": (rf(), []),
    "valid": (rf(nodeLabels={"foo": "bar"}, nodeTaints=[{"key": "spot", "value": "true", "effect": "NoSchedule"}]), []),
    "invalid label name": (rf(nodeLabels={"@abc": "foo"}), [("spec.nodeLabels", INV)]),
    "invalid label value": (rf(nodeLabels={"foo": "@abc"}), [("spec.nodeLabels", INV)]),
}


@pytest.mark.parametrize("case", RESOURCE_FLAVOR_CASES, ids=list(RESOURCE_FLAVOR_CASES))
def test_validate_resource_flavor(case: str) -> None:
    obj, want = RESOURCE_FLAVOR_CASES[case]
    assert hook_errors("resourceflavors", json.loads(json.dumps(obj))) == want


# -- TestValidateWorkload -------------------------------------------------------------------------------------------

NOW = "2026-01-01T00:00:00Z"


def container(requests: dict | None = None, limits: dict | None = None) -> dict:
    resources: dict = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    return {"name": "c", "image": "pause", "resources": resources}


def ps(name: str = "main", count: int = 1, **extra: object) -> dict:
    """MakePodSet(name, count): one container; extra keys: requests, limits, init (a container), pod_requests,
    pod_limits, labels, annotations, minCount."""
    spec: dict = {
        "restartPolicy": "Never",
        "containers": [container(extra.pop("requests", None), extra.pop("limits", None))],
    }
    if "init" in extra:
        spec["initContainers"] = [extra.pop("init")]
    pod_resources = {k: extra.pop(f"pod_{k}") for k in ("requests", "limits") if f"pod_{k}" in extra}
    if pod_resources:
        spec["resources"] = pod_resources
    meta = {k: extra.pop(k) for k in ("labels", "annotations") if k in extra}
    out: dict = {"name": name, "count": count, "template": {"spec": spec}}
    if meta:
        out["template"]["metadata"] = meta
    out.update(extra)
    return out


def wl(*podsets: dict, annotations: dict | None = None, **status: object) -> dict:
    """MakeWorkload("test-workload", "test-ns").PodSets(...): one podSet "main" by default."""
    md: dict = {"name": "test-workload", "namespace": "test-ns"}
    if annotations:
        md["annotations"] = annotations
    out: dict = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": md,
        "spec": {"podSets": list(podsets) or [ps()]},
    }
    if status:
        out["status"] = dict(status)
    return out


def psa(name: str = "main", count: int | None = None, **usage: str) -> dict:
    out: dict = {"name": name, "flavors": dict.fromkeys(usage, "flv"), "resourceUsage": dict(usage)}
    if count is not None:
        out["count"] = count
    return out


def reserve(w: dict, *assignments: dict, admission: bool = True) -> dict:
    """ReserveQuotaAt(MakeAdmission("cluster-queue").PodSets(...)): QuotaReserved=True and status.admission."""
    status = w.setdefault("status", {})
    status["conditions"] = [
        {
            "type": "QuotaReserved",
            "status": "True",
            "reason": "AdmittedByTest",
            "message": "admitted",
            "lastTransitionTime": NOW,
        }
    ]
    if admission:
        status["admission"] = {"clusterQueue": "cluster-queue", "podSetAssignments": list(assignments) or [psa()]}
    return w


def quota_reserved_without_admission() -> dict:
    return reserve(wl(ps("driver")), admission=False)


FIRST = "spec.podSets[0].template.spec"
GATE = "metadata.annotations[kueue.x-k8s.io/admission-gated-by]"
PSU = "status.admissionChecks[0].podSetUpdates"


def checks(*updates: dict, **state: object) -> list[dict]:
    return [
        {
            "name": "ac1",
            "state": "Pending",
            "message": "",
            "lastTransitionTime": NOW,
            **state,
            "podSetUpdates": list(updates),
        }
    ]


WORKLOAD_CASES = {
    "valid": (wl(ps("driver", 1), ps("workers", 100)), []),
    "quota reserved without an admission is refused, not a panic": (
        quota_reserved_without_admission(),
        [("status.admission", REQ)],
    ),
    "should have a valid podSet name in status assignment": (
        reserve(wl(), psa("@invalid")),
        [("status.admission.podSetAssignments[0].name", NOTFOUND)],
    ),
    "assignment usage should be divisible by count": (
        reserve(wl(ps("main", 3, requests={"cpu": "1"})), psa("main", 3, cpu="1")),
        [("status.admission.podSetAssignments[0].resourceUsage[cpu]", INV)],
    ),
    "should not request num-pods resource": (
        wl(ps("bad", init=container({"pods": "1"}), requests={"pods": "1"})),
        [
            (f"{FIRST}.initContainers[0].resources.requests[pods]", INV),
            (f"{FIRST}.containers[0].resources.requests[pods]", INV),
        ],
    ),
    "should reject reserved pods resource key in limits": (
        wl(ps("bad", init=container(limits={"pods": "1"}), limits={"pods": "1"})),
        [
            (f"{FIRST}.initContainers[0].resources.limits[pods]", INV),
            (f"{FIRST}.containers[0].resources.limits[pods]", INV),
        ],
    ),
    "should reject negative container resource request": (
        wl(ps("bad", requests={"cpu": "-1"})),
        [(f"{FIRST}.containers[0].resources.requests[cpu]", INV)],
    ),
    "should reject negative initContainer resource request": (
        wl(ps("bad", init=container({"cpu": "-1"}))),
        [(f"{FIRST}.initContainers[0].resources.requests[cpu]", INV)],
    ),
    "should reject invalid podSet template label value": (
        wl(ps("bad-metadata", labels={"valid": "invalid value with spaces"})),
        [("spec.podSets[0].template.metadata.labels", INV)],
    ),
    "should reject invalid podSet template annotation key": (
        wl(ps("bad-metadata", annotations={"invalid/annotation/key/too/long/invalid": "val"})),
        [("spec.podSets[0].template.metadata.annotations", INV)],
    ),
    "should reject negative container resource limit": (
        wl(ps("bad", limits={"cpu": "-1"})),
        [(f"{FIRST}.containers[0].resources.limits[cpu]", INV)],
    ),
    "should reject negative resource among multiple valid requests and limits": (
        wl(ps("bad", requests={"cpu": "1", "memory": "-1Gi"}, limits={"cpu": "2", "memory": "-2Gi"})),
        [
            (f"{FIRST}.containers[0].resources.requests[memory]", INV),
            (f"{FIRST}.containers[0].resources.limits[memory]", INV),
        ],
    ),
    "should reject negative pod-level resource request": (
        wl(ps("bad", pod_requests={"cpu": "-1"})),
        [(f"{FIRST}.resources.requests[cpu]", INV)],
    ),
    "should reject negative pod-level resource limit": (
        wl(ps("bad", pod_limits={"memory": "-1Gi"})),
        [(f"{FIRST}.resources.limits[memory]", INV)],
    ),
    "should accept zero container resource request": (wl(ps("ok", requests={"cpu": "0"})), []),
    "empty podSetUpdates": (wl(admissionChecks=checks()), []),
    "should accept podSetUpdates for only a subset of podSets": (
        wl(ps("first"), ps("second"), admissionChecks=checks({"name": "first"})),
        [],
    ),
    "mismatched names in podSetUpdates with names in podSets": (
        wl(ps("first"), ps("second"), admissionChecks=checks({"name": "first"}, {"name": "third"})),
        [(f"{PSU}[1].name", UNSUP)],
    ),
    "matched names in podSetUpdates with names in podSets": (
        wl(
            ps("first"),
            ps("second"),
            admissionChecks=checks(
                {
                    "name": "first",
                    "labels": {"l1": "first"},
                    "annotations": {"foo": "bar"},
                    "tolerations": [
                        {
                            "key": "t1",
                            "operator": "Equal",
                            "value": "t1v",
                            "effect": "NoExecute",
                            "tolerationSeconds": 5,
                        }
                    ],
                    "nodeSelector": {"type": "first"},
                },
                {
                    "name": "second",
                    "labels": {"l2": "second"},
                    "annotations": {"foo": "baz"},
                    "tolerations": [
                        {
                            "key": "t2",
                            "operator": "Equal",
                            "value": "t2v",
                            "effect": "NoExecute",
                            "tolerationSeconds": 10,
                        }
                    ],
                    "nodeSelector": {"type": "second"},
                },
            ),
        ),
        [],
    ),
    "invalid label name of podSetUpdate": (
        wl(admissionChecks=checks({"name": "main", "labels": {"@abc": "foo"}})),
        [(f"{PSU}[0].labels", INV)],
    ),
    "invalid node selector name of podSetUpdate": (
        wl(admissionChecks=checks({"name": "main", "nodeSelector": {"@abc": "foo"}})),
        [(f"{PSU}[0].nodeSelector", INV)],
    ),
    "invalid label value of podSetUpdate": (
        wl(admissionChecks=checks({"name": "main", "labels": {"foo": "@abc"}})),
        [(f"{PSU}[0].labels", INV)],
    ),
    "invalid reclaimablePods": (
        wl(ps("ps1", 3), reclaimablePods=[{"name": "ps1", "count": 4}, {"name": "ps2", "count": 1}]),
        [("status.reclaimablePods[ps1].count", INV), ("status.reclaimablePods[ps2].name", UNSUP)],
    ),
    "too many variable count podSets": (
        wl(ps("ps1", 3, minCount=2), ps("ps2", 3, minCount=1)),
        [("spec.podSets", INV)],
    ),
    "valid AdmissionGatedBy annotation with single gate": (
        wl(annotations={"kueue.x-k8s.io/admission-gated-by": "example.com/controller"}),
        [],
    ),
    "valid AdmissionGatedBy annotation with multiple gates": (
        wl(annotations={"kueue.x-k8s.io/admission-gated-by": "example.com/a,not.example.com/b"}),
        [],
    ),
    "AdmissionGatedBy annotation - leading space": (
        wl(annotations={"kueue.x-k8s.io/admission-gated-by": " example.com/gate"}),
        [],
    ),
    "AdmissionGatedBy annotation - space before comma": (
        wl(annotations={"kueue.x-k8s.io/admission-gated-by": "example.com/gate ,example.com/gate2"}),
        [],
    ),
    "AdmissionGatedBy annotation - space after comma": (
        wl(annotations={"kueue.x-k8s.io/admission-gated-by": "example.com/gate, example.com/gate2"}),
        [],
    ),
    "AdmissionGatedBy annotation - trailing space": (
        wl(annotations={"kueue.x-k8s.io/admission-gated-by": "example.com/gate "}),
        [],
    ),
    "invalid AdmissionGatedBy annotation - not in subdomain/path format": (
        wl(annotations={"kueue.x-k8s.io/admission-gated-by": "this is an invalid value"}),
        [(GATE, INV)],
    ),
    "invalid AdmissionGatedBy annotation - duplicate gates": (
        wl(annotations={"kueue.x-k8s.io/admission-gated-by": "duplicates.are/invalid,duplicates.are/invalid"}),
        [(GATE, INV)],
    ),
    "invalid AdmissionGatedBy annotation - space in path component": (
        wl(annotations={"kueue.x-k8s.io/admission-gated-by": "example.com/gate name"}),
        [(GATE, INV)],
    ),
    "invalid AdmissionGatedBy annotation - space in domain component": (
        wl(annotations={"kueue.x-k8s.io/admission-gated-by": "example .com/gate"}),
        [(GATE, INV)],
    ),
    "invalid AdmissionGatedBy annotation - multiple gates with one containing space": (
        wl(annotations={"kueue.x-k8s.io/admission-gated-by": "valid.com/gate,invalid gate.com/controller"}),
        [(GATE, INV)],
    ),
    "partial admission and elastic job cannot be used together": (
        wl(ps("main", 10, minCount=5), annotations={"kueue.x-k8s.io/elastic-job": "true"}),
        [("spec.podSets", INV)],
    ),
    "non-negative subGroupCount is accepted without warning": (wl(ps("main", 1, subGroupCount=0)), []),
}


@pytest.mark.parametrize("case", WORKLOAD_CASES, ids=list(WORKLOAD_CASES))
def test_validate_workload(case: str) -> None:
    obj, want = WORKLOAD_CASES[case]
    assert hook_errors("workloads", json.loads(json.dumps(obj))) == want


# -- TestValidateWorkloadUpdate -------------------------------------------------------------------------------------

ELASTIC = {"kueue.x-k8s.io/elastic-job": "true"}
RECLAIM_PS1 = "status.reclaimablePods[ps1]"


def two_podsets(*reclaimable: tuple[str, int], reserved: bool = True) -> dict:
    w = wl(ps("ps1", 3), ps("ps2", 3))
    if reserved:
        reserve(w, psa("ps1"), psa("ps2"))
    if reclaimable:
        w.setdefault("status", {})["reclaimablePods"] = [{"name": n, "count": c} for n, c in reclaimable]
    return w


def elastic(count: int, reclaim: int | None, admitted: int | None = None, annotate: bool = True) -> dict:
    w = wl(ps("ps1", count), annotations=ELASTIC if annotate else None)
    reserve(w, psa("ps1", admitted))
    if reclaim is not None:
        w["status"]["reclaimablePods"] = [{"name": "ps1", "count": reclaim}]
    return w


def gated(value: str | None) -> dict:
    return wl(annotations=None if value is None else {"kueue.x-k8s.io/admission-gated-by": value})


def ready_checks(labels: dict, **extra: object) -> dict:
    return wl(
        ps("first"),
        ps("second"),
        admissionChecks=checks({"name": "first", "labels": labels}, {"name": "second"}, state="Ready", **extra),
    )


def topology(count: int) -> dict:
    return {
        "levels": ["level"],
        "slices": [{"domainCount": 1, "podCounts": {"universal": count}, "valuesPerLevel": [{"universal": "abc"}]}],
    }


def finalized(w: dict) -> dict:
    w["metadata"]["finalizers"] = ["kueue.x-k8s.io/resource-in-use"]
    return w


WORKLOAD_UPDATE_CASES = {
    "an update may not put a workload in quota reserved with no admission": (
        wl(ps("driver")),
        quota_reserved_without_admission(),
        [("status.admission", REQ)],
    ),
    "a workload already in that state stays updatable so it can be removed": (
        quota_reserved_without_admission(),
        quota_reserved_without_admission(),
        [],
    ),
    "reclaimable pod count can change up": (two_podsets(("ps1", 1)), two_podsets(("ps1", 2), ("ps2", 1)), []),
    "should reject invalid podSet template label value on update": (
        wl(ps("driver")),
        wl(ps("driver", labels={"valid": "invalid value with spaces"})),
        [("spec.podSets[0].template.metadata.labels", INV)],
    ),
    "reclaimable pod count cannot change down": (
        two_podsets(("ps1", 2), ("ps2", 1)),
        two_podsets(("ps1", 1)),
        [(f"{RECLAIM_PS1}.count", INV), ("status.reclaimablePods[ps2]", REQ)],
    ),
    "elastic workload: unchanged reclaimable pod count is tolerated while its podSet scales down below it": (
        elastic(8, 4),
        elastic(3, 4),
        [],
    ),
    "elastic workload: changed reclaimable pod count above the podSet count is rejected": (
        elastic(8, 4),
        elastic(3, 5),
        [(f"{RECLAIM_PS1}.count", INV)],
    ),
    "elastic workload: reclaimable pod count can decrease after its podSet scaled down below the admitted count": (
        elastic(3, 4, admitted=8),
        elastic(3, 3, admitted=8),
        [],
    ),
    "elastic workload: reclaimable pod count can decrease when scaled down below the admitted count even if the "
    "podSet still exceeds it": (elastic(10, 9, admitted=20), elastic(10, 0, admitted=20), []),
    "elastic workload: reclaimable pod count cannot decrease without a podSet scale-down": (
        elastic(8, 4),
        elastic(8, 2),
        [(f"{RECLAIM_PS1}.count", INV)],
    ),
    "elastic workload: reclaimable pod entry can be removed after its podSet scaled down below the admitted count": (
        elastic(8, 4, admitted=8),
        elastic(1, None, admitted=8),
        [],
    ),
    "elastic workload: reclaimable pod entry cannot be removed without a podSet scale-down": (
        elastic(8, 4),
        elastic(8, None),
        [(RECLAIM_PS1, REQ)],
    ),
    "non-elastic workload: stale reclaimable pod count is still rejected when its podSet scales down": (
        elastic(8, 4, annotate=False),
        elastic(3, 4, annotate=False),
        [(f"{RECLAIM_PS1}.count", INV)],
    ),
    "reclaimable pod count can go to 0 if the job is suspended": (
        two_podsets(("ps1", 2), ("ps2", 1)),
        {
            **two_podsets(("ps1", 0), ("ps2", 1), reserved=False),
            "status": {
                "reclaimablePods": [{"name": "ps1", "count": 0}, {"name": "ps2", "count": 1}],
                "admissionChecks": checks({"name": "ps1"}, {"name": "ps2"}, state="Ready"),
            },
        },
        [],
    ),
    "podSetUpdates should be immutable when state is ready": (
        ready_checks({"foo": "bar"}),
        ready_checks({"foo": "baz"}),
        [("status.admissionChecks[0].podSetUpdates", INV)],
    ),
    "should change other fields of admissionchecks when podSetUpdates is immutable": (
        ready_checks({"foo": "bar"}, message="old"),
        ready_checks({"foo": "bar"}, message="new", lastTransitionTime="2026-01-01T00:01:00Z"),
        [],
    ),
    "TopologyAssignment can be mutated": (
        reserve(wl(ps("ps1", 3)), {"name": "ps1", "topologyAssignment": topology(2)}),
        reserve(wl(ps("ps1", 3)), {"name": "ps1", "topologyAssignment": topology(3)}),
        [],
    ),
    "PodSets cannot be removed from admission": (
        reserve(wl(ps("ps1", 3), ps("ps2", 3)), psa("ps1"), psa("ps2")),
        reserve(wl(ps("ps1", 3), ps("ps2", 3)), psa("ps1")),
        [("status.admission", INV)],
    ),
    "PodSets cannot be added to admission": (
        reserve(wl(ps("ps1", 3), ps("ps2", 3)), psa("ps1")),
        reserve(wl(ps("ps1", 3), ps("ps2", 3)), psa("ps1"), psa("ps2")),
        [("status.admission", INV)],
    ),
    # ElasticJobsViaWorkloadSlices is on in v0.20: a smaller count goes through while quota is reserved.
    "workload.podSets[].count is mutable with ElasticJobs feature gate": (
        reserve(wl(ps("ps1", 3), ps("ps2", 4)), psa("ps1"), psa("ps2")),
        reserve(wl(ps("ps1", 3), ps("ps2", 3)), psa("ps1"), psa("ps2")),
        [],
    ),
    "ClusterName doesn't have to be one of the nominatedClusterNames with ElasticJobs feature gate": (
        wl(ps("ps1", 3), ps("ps2", 4)),
        {
            **reserve(
                wl(
                    ps("ps1", 3),
                    ps("ps2", 4),
                    annotations={"kueue.x-k8s.io/workload-slice-replacement-for": "test-ns/test-workload"},
                ),
                psa("ps1"),
                psa("ps2"),
            ),
        },
        [],
    ),
    "reject adding AdmissionGatedBy annotation after workload creation": (
        gated(None),
        gated("example.com/controller"),
        [(GATE, FORB)],
    ),
    "allow removing AdmissionGatedBy annotation with single gate": (gated("example.com/controller1"), gated(None), []),
    "allow removing AdmissionGatedBy annotation with multiple gates": (
        gated("example.com/controller1,example.com/controller2"),
        gated(None),
        [],
    ),
    "allow removing one gate from AdmissionGatedBy annotation": (
        gated("example.com/controller1,example.com/controller2"),
        gated("example.com/controller2"),
        [],
    ),
    "reject injecting new gate in AdmissionGatedBy annotation": (
        gated("example.com/controller1,example.com/controller2"),
        gated("example.com/controller3"),
        [(GATE, FORB)],
    ),
    "allow reordering gates in AdmissionGatedBy annotation": (
        gated("example.com/controller1,example.com/controller2"),
        gated("example.com/controller2,example.com/controller1"),
        [],
    ),
    "a workload whose quota reservation lost its admission can still drop its finalizer": (
        finalized(quota_reserved_without_admission()),
        quota_reserved_without_admission(),
        [],
    ),
}


@pytest.mark.parametrize("case", WORKLOAD_UPDATE_CASES, ids=list(WORKLOAD_UPDATE_CASES))
def test_validate_workload_update(case: str) -> None:
    before, after, want = WORKLOAD_UPDATE_CASES[case]
    assert hook_errors("workloads", json.loads(json.dumps(after)), json.loads(json.dumps(before))) == want


def test_validate_workload_update_count_is_immutable_but_down() -> None:
    """workload.podSets[].count is immutable: with ElasticJobsViaWorkloadSlices on (v0.20) only a larger count is
    refused, at Kueue's path `spec.podSets.<index>`."""
    before = reserve(wl(ps("ps1", 3), ps("ps2", 4)), psa("ps1"), psa("ps2"))
    after = reserve(wl(ps("ps1", 3), ps("ps2", 5)), psa("ps1"), psa("ps2"))
    assert hook_errors("workloads", after, before) == [("spec.podSets.1", INV)]


# == Served: test/integration/singlecluster/webhook/core ============================================================

PLURALS = {
    "ClusterQueue": "clusterqueues",
    "Cohort": "cohorts",
    "ResourceFlavor": "resourceflavors",
    "LocalQueue": "localqueues",
    "Workload": "workloads",
    "WorkloadPriorityClass": "workloadpriorityclasses",
}


def served_create(kc: Cluster, body: dict, namespace: str | None = None) -> dict:
    return kc.create(PLURALS[body["kind"]], json.loads(json.dumps(body)), namespace)


WEBHOOK_DENIAL = re.compile(r'admission webhook "v[a-z]+\.kb\.io" denied the request: (.+)', re.DOTALL)
FIELD_ERROR = re.compile(
    r"(?:^|\[|, )([^\s,\[][^\s]*?): (?:Invalid value|Required value|Forbidden|Duplicate value|Unsupported value"
    r"|Not found|Too long|Too many|Internal error)"
)


def denial_fields(message: str) -> list[str]:
    """The field paths of a webhook denial's message: Kueue's field.ErrorList aggregate, one error bare, several as
    "[a, b]" (`spec.foo: Invalid value: 1: must be ...`)."""
    found = WEBHOOK_DENIAL.fullmatch(message)
    assert found, message
    fields = FIELD_ERROR.findall(found.group(1))
    assert fields, message
    return fields


def refusal(call, *, webhook: bool | None = None) -> list[str]:
    """The fields a refusal names: a 422 Invalid answer's causes (the CRD schema and CEL, every cause names one), or
    a 403 Forbidden webhook denial's field errors, read from its message (a real API server relays Kueue's denial
    without causes). webhook True/False insists on the one form."""
    with pytest.raises(ApiException) as err:
        call()
    status = json.loads(err.value.body)
    if err.value.status == 403:
        assert webhook is not False, err.value.body
        assert status["reason"] == "Forbidden" and "details" not in status, status
        return denial_fields(status["message"])
    assert webhook is not True, err.value.body
    assert err.value.status == 422, err.value.body
    assert status["reason"] == "Invalid"
    causes = status["details"]["causes"]
    assert causes and all(c.get("field") for c in causes), causes
    return [c["field"] for c in causes]


def refused_create(kc: Cluster, body: dict, namespace: str | None = None) -> list[str]:
    return refusal(lambda: served_create(kc, body, namespace))


def replace(kc: Cluster, obj: dict, namespace: str | None = None, *, status: bool = False) -> dict:
    plural, name = PLURALS[obj["kind"]], obj["metadata"]["name"]
    if namespace:
        call = (
            kc.custom.replace_namespaced_custom_object_status if status else kc.custom.replace_namespaced_custom_object
        )
        return call(*KUEUE, namespace, plural, name, obj)
    call = kc.custom.replace_cluster_custom_object_status if status else kc.custom.replace_cluster_custom_object
    return call(*KUEUE, plural, name, obj)


def check_outcome(kc: Cluster, body: dict, want: str | None, namespace: str | None = None) -> None:
    """want None: accepted; else a field path that the refusal (a 422's causes or a 403 denial's errors) names (or
    starts with)."""
    if want is None:
        served_create(kc, body, namespace)
        return
    fields = refused_create(kc, body, namespace)
    assert any(f == want or f.startswith(want) for f in fields), (want, fields)


# -- clusterqueue_test.go -------------------------------------------------------------------------------------------

DEFAULT_FUNGIBILITY = {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"}
DEFAULT_PREEMPTION = {
    "withinClusterQueue": "Never",
    "reclaimWithinCohort": "Never",
    "borrowWithinCohort": {"policy": "Never"},
}
CQ_DEFAULTS = {"queueingStrategy": "BestEffortFIFO", "stopPolicy": "None", "flavorFungibility": DEFAULT_FUNGIBILITY}

CQ_DEFAULTING = {
    "All defaults": (cq(name="foo"), {**CQ_DEFAULTS, "preemption": DEFAULT_PREEMPTION}),
    "Preemption overridden": (
        cq(
            name="foo",
            flavorFungibility=DEFAULT_FUNGIBILITY,
            preemption={
                "withinClusterQueue": "LowerPriority",
                "reclaimWithinCohort": "Any",
                "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100},
            },
        ),
        {
            **CQ_DEFAULTS,
            "preemption": {
                "withinClusterQueue": "LowerPriority",
                "reclaimWithinCohort": "Any",
                "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100},
            },
        },
    ),
    "Default fair sharing": (
        cq(name="foo", fairSharing={}),
        {**CQ_DEFAULTS, "preemption": DEFAULT_PREEMPTION, "fairSharing": {"weight": 1}},
    ),
}


@pytest.mark.parametrize("case", CQ_DEFAULTING, ids=list(CQ_DEFAULTING))
def test_cluster_queue_defaulting_on_creation(kc: Cluster, case: str) -> None:
    body, want_spec = CQ_DEFAULTING[case]
    created = served_create(kc, body)
    assert created["spec"] == want_spec
    assert created["metadata"]["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]


def test_cluster_queue_should_have_qualified_flavor_names_when_updating(kc: Cluster) -> None:
    served_create(kc, cq(rg(fq("x86", "memory"))))
    created = kc.get("clusterqueues", "cluster-queue")
    created["spec"]["resourceGroups"][0]["flavors"][0]["name"] = "@x86"
    assert refusal(lambda: replace(kc, created)) == ["spec.resourceGroups[0].flavors[0].name"]


def test_cluster_queue_should_allow_to_update_queueing_strategy_with_different_value(kc: Cluster) -> None:
    served_create(kc, cq(rg(fq("x86", "memory")), queueingStrategy="StrictFIFO"))
    created = kc.get("clusterqueues", "cluster-queue")  # after the controllers wrote its status
    created["spec"]["queueingStrategy"] = "BestEffortFIFO"
    assert replace(kc, created)["spec"]["queueingStrategy"] == "BestEffortFIFO"


def _many(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{i}" for i in range(n)]


# The typed Go client omits empty strings: upstream's `QueueingStrategy("")` sends no queueingStrategy at all.
CQ_CREATION = {
    "Should have non-negative borrowing limit": (
        cq(rg(fq("x86", ("cpu", "2", "-1"))), cohortName="cohort"),
        f"{RES0}.borrowingLimit",
    ),
    "Should have non-negative quota value": (cq(rg(fq("x86", ("cpu", "-1")))), f"{RES0}.nominalQuota"),
    "Should have at least one flavor": (cq({"coveredResources": [], "flavors": []}), f"{RGS}[0]"),
    "Should have at least one resource": (cq({"coveredResources": [], "flavors": [fq("foo")]}), f"{RGS}[0]"),
    "Should have qualified flavor name": (cq(rg(fq("invalid_name", ("cpu", "5")))), f"{RGS}[0].flavors[0].name"),
    "Should have qualified resource name": (cq(rg(fq("x86", ("@cpu", "5")))), f"{RGS}[0].coveredResources[0]"),
    "Should have valid resources quantity": (cq(rg(fq("flavor", *_many("r", 65)))), f"{RGS}[0]"),
    "Should have valid flavors quantity": (cq(rg(*[fq(f, "cpu") for f in _many("f", 65)])), f"{RGS}[0].flavors"),
    "Should forbid clusterQueue creation with unqualified labelSelector": (
        cq(namespaceSelector={"matchLabels": {"nospecialchars^=@": "bar"}}),
        "spec.namespaceSelector.matchLabels",
    ),
    "Should forbid to create clusterQueue with unknown clusterQueueingStrategy": (
        cq(queueingStrategy="unknown"),
        "spec.queueingStrategy",
    ),
    "Should allow to create clusterQueue with empty clusterQueueingStrategy": (cq(), None),
    "Should allow to create clusterQueue with empty preemption": (cq(preemption={}), None),
    "Should allow to create clusterQueue with preemption policies": (
        cq(
            preemption={"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
            flavorFungibility=DEFAULT_FUNGIBILITY,
        ),
        None,
    ),
    "Should forbid to create clusterQueue with unknown preemption.withinCohort": (
        cq(preemption={"reclaimWithinCohort": "unknown"}),
        "spec.preemption.reclaimWithinCohort",
    ),
    "Should forbid to create clusterQueue with unknown preemption.withinClusterQueue": (
        cq(preemption={"withinClusterQueue": "unknown"}),
        "spec.preemption.withinClusterQueue",
    ),
    "Should allow to create clusterQueue with built-in resources with qualified names": (
        cq(rg(fq("default", "cpu"))),
        None,
    ),
    "Should forbid to create clusterQueue with invalid resource name": (
        cq(rg(fq("default", "@cpu"))),
        f"{RGS}[0].coveredResources[0]",
    ),
    "Should allow to create clusterQueue with valid cohort": (cq(cohortName="prod"), None),
    "Should forbid to create clusterQueue with invalid cohort": (cq(cohortName="@prod"), "spec.cohortName"),
    "Should allow to create clusterQueue with extended resources with qualified names": (
        cq(rg(fq("default", "example.com/gpu"))),
        None,
    ),
    "Should allow to create clusterQueue with flavor with qualified names": (cq(rg(fq("x86", "cpu"))), None),
    "Should forbid to create clusterQueue with flavor with unqualified names": (
        cq({"coveredResources": [], "flavors": [fq("invalid_name")]}),
        f"{RGS}[0]",
    ),
    "Should forbid to create clusterQueue with flavor quota with negative value": (
        cq(rg(fq("x86", ("cpu", "-1")))),
        f"{RES0}.nominalQuota",
    ),
    "Should allow to create clusterQueue with flavor quota with zero values": (cq(rg(fq("x86", ("cpu", "0")))), None),
    "Should allow to create clusterQueue with flavor quota with borrowingLimit 0": (
        cq(rg(fq("x86", ("cpu", "1", "0"))), cohortName="cohort"),
        None,
    ),
    "Should forbid to create clusterQueue with flavor quota with negative borrowingLimit": (
        cq(rg(fq("x86", ("cpu", "1", "-1"))), cohortName="cohort"),
        f"{RES0}.borrowingLimit",
    ),
    "Should forbid to create clusterQueue with flavor quota with borrowingLimit and empty cohort": (
        cq(rg(fq("x86", ("cpu", "1", "1")))),
        "spec",
    ),
    "Should allow to create clusterQueue with empty queueing strategy": (cq(), None),
    "Should forbid to create clusterQueue with namespaceSelector with invalid labels": (
        cq(namespaceSelector={"matchLabels": {"nospecialchars^=@": "bar"}}),
        "spec.namespaceSelector.matchLabels",
    ),
    "Should forbid to create clusterQueue with namespaceSelector with invalid expressions": (
        cq(namespaceSelector={"matchExpressions": [{"key": "key", "operator": "In"}]}),
        "spec.namespaceSelector.matchExpressions[0].values",
    ),
    "Should allow to create clusterQueue with multiple resource groups": (
        cq(
            rg(fq("alpha", ("cpu", "0"), ("memory", "0")), fq("beta", ("cpu", "0"), ("memory", "0"))),
            rg(fq("gamma", ("example.com/gpu", "0")), fq("omega", ("example.com/gpu", "0"))),
        ),
        None,
    ),
    "Should forbid to create clusterQueue with resources in a flavor in different order": (
        cq(
            {
                "coveredResources": ["cpu", "memory"],
                "flavors": [fq("alpha", ("cpu", "0"), ("memory", "0")), fq("beta", ("memory", "0"), ("cpu", "0"))],
            }
        ),
        f"{RGS}[0].flavors[1].resources[0].name",
    ),
    "Should forbid to create clusterQueue missing resources in a flavor": (
        cq({"coveredResources": ["cpu", "memory"], "flavors": [fq("alpha", ("cpu", "0"))]}),
        f"{RGS}[0]",
    ),
    "Should forbid to create clusterQueue missing resources in a flavor (more resources than covered)": (
        cq({"coveredResources": ["cpu"], "flavors": [fq("alpha", ("cpu", "0"), ("memory", "0"))]}),
        f"{RGS}[0]",
    ),
    "Should forbid to create clusterQueue missing resources in a flavor and mismatch": (
        cq({"coveredResources": ["blah"], "flavors": [fq("alpha", ("cpu", "0"), ("memory", "0"))]}),
        f"{RGS}[0]",
    ),
    "Should forbid to create clusterQueue with resource in more than one resource group": (
        cq(rg(fq("alpha", ("cpu", "0"), ("memory", "0"))), rg(fq("beta", ("memory", "0")))),
        f"{RGS}[1].coveredResources[0]",
    ),
    "Should forbid to create clusterQueue with flavor in more than one resource group": (
        cq(rg(fq("alpha", "cpu"), fq("beta", "cpu")), rg(fq("beta", "memory"))),
        f"{RGS}[1].flavors[0].name",
    ),
    "Should forbid to create clusterQueue missing with invalid preemption due to reclaimWithinCohort=Never, while "
    "borrowWithinCohort!=nil": (
        cq(preemption={"reclaimWithinCohort": "Never", "borrowWithinCohort": {"policy": "LowerPriority"}}),
        "spec.preemption",
    ),
    "Should allow to create clusterQueue with valid preemption with borrowWithinCohort": (
        cq(
            preemption={
                "reclaimWithinCohort": "LowerPriority",
                "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 10},
            }
        ),
        None,
    ),
    "Should allow to create clusterQueue with existing cluster queue created with older Kueue version that has a nil "
    "borrowWithinCohort field": (cq(preemption={"reclaimWithinCohort": "Never"}), None),
    "Should allow zero FairSharing weight": (cq(fairSharing={"weight": "0"}), None),
    "Should allow fractional FairSharing weight": (cq(fairSharing={"weight": "0.1"}), None),
    "Should allow small FairSharing weight": (cq(fairSharing={"weight": "1m"}), None),
    "Should allow even smaller FairSharing weight": (cq(fairSharing={"weight": "1u"}), None),
    "Should allow smallest FairSharing weight": (cq(fairSharing={"weight": "2n"}), None),
    "Should forbid threshold FairSharing weight": (cq(fairSharing={"weight": "1n"}), "spec.fairSharing"),
    "Should forbid collapsed FairSharing weight": (cq(fairSharing={"weight": "0.0000000001"}), "spec.fairSharing"),
    "Should forbid negative FairSharing weight": (cq(fairSharing={"weight": "-1"}), "spec.fairSharing"),
}


@pytest.mark.parametrize("case", CQ_CREATION, ids=list(CQ_CREATION))
def test_validate_cluster_queue_on_creation(kc: Cluster, case: str) -> None:
    body, want = CQ_CREATION[case]
    check_outcome(kc, body, want)


# -- cohort_test.go -------------------------------------------------------------------------------------------------

COHORT_CREATION = {
    "Should disallow empty name": (cohort(name=""), "metadata.name"),
    "Should allow default Cohort": (cohort(), None),
    "Should allow valid parent name": (cohort(parentName="prod"), None),
    "Should reject invalid parent name": (cohort(parentName="@prod"), "spec.parentName"),
    "ResourceGroup should have at least one flavor": (cohort({"coveredResources": [], "flavors": []}), f"{RGS}[0]"),
    "FlavorQuota should have at least one resource": (
        cohort({"coveredResources": [], "flavors": [fq("foo")]}),
        f"{RGS}[0]",
    ),
    "Should reject invalid flavor name": (cohort(rg(fq("@x86", ("cpu", "5")))), f"{RGS}[0].flavors[0].name"),
    "Should allow valid resource name": (cohort(rg(fq("x86", ("@cpu", "5")))), f"{RGS}[0].coveredResources[0]"),
    "Should reject too many flavors in resource group": (
        cohort(rg(*[fq(f, "cpu") for f in _many("f", 65)])),
        f"{RGS}[0].flavors",
    ),
    "Should reject too many resources in resource group": (cohort(rg(fq("flavor", *_many("cpu", 65)))), f"{RGS}[0]"),
    "Should allow resource with valid name": (cohort(rg(fq("default", "cpu"))), None),
    "Should reject resource with invalid name": (cohort(rg(fq("default", "@cpu"))), f"{RGS}[0].coveredResources[0]"),
    "Should allow extended resources with valid name": (cohort(rg(fq("default", "example.com/gpu"))), None),
    "Should allow flavor with valid name": (cohort(rg(fq("x86", "cpu"))), None),
    "Should reject flavor with invalid name": (cohort(rg(fq("x_86", "cpu"))), f"{RGS}[0].flavors[0].name"),
    "Should reject negative nominal quota": (cohort(rg(fq("x86", ("cpu", "-1")))), f"{RES0}.nominalQuota"),
    "Should reject negative borrowing limit": (cohort(rg(fq("x86", ("cpu", "1", "-1")))), f"{RES0}.borrowingLimit"),
    "Should reject negative lending limit": (cohort(rg(fq("x86", ("cpu", "1", "", "-1")))), f"{RES0}.lendingLimit"),
    "Should reject borrowingLimit when no parent": (cohort(rg(fq("x86", ("cpu", "1", "1")))), f"{RES0}.borrowingLimit"),
    "Should allow borrowingLimit 0 when parent exists": (
        cohort(rg(fq("x86", ("cpu", "1", "0"))), parentName="parent"),
        None,
    ),
    "Should allow borrowingLimit when parent exists": (
        cohort(rg(fq("x86", ("cpu", "1", "1"))), parentName="parent"),
        None,
    ),
    "Should reject lendingLimit when no parent": (cohort(rg(fq("x86", ("cpu", "1", "", "1")))), f"{RES0}.lendingLimit"),
    "Should allow lendingLimit when parent exists": (
        cohort(rg(fq("x86", ("cpu", "1", "", "1"))), parentName="parent"),
        None,
    ),
    "Should allow lendingLimit 0 when parent exists": (
        cohort(rg(fq("x86", ("cpu", "0", "", "0"))), parentName="parent"),
        None,
    ),
    "Should allow lending limit to exceed nominal quota": (
        cohort(rg(fq("x86", ("cpu", "1", "", "2"))), parentName="parent"),
        None,
    ),
    "Should allow multiple resource groups": (
        cohort(
            rg(fq("alpha", ("cpu", "0"), ("memory", "0")), fq("beta", ("cpu", "0"), ("memory", "0"))),
            rg(fq("gamma", ("example.com/gpu", "0")), fq("omega", ("example.com/gpu", "0"))),
        ),
        None,
    ),
    "Should reject resources in a flavor in different order": (
        cohort(
            {
                "coveredResources": ["cpu", "memory"],
                "flavors": [fq("alpha", ("cpu", "0"), ("memory", "0")), fq("beta", ("memory", "0"), ("cpu", "0"))],
            }
        ),
        f"{RGS}[0].flavors[1].resources[0].name",
    ),
    "Should reject missing resources in a flavor": (
        cohort({"coveredResources": ["cpu", "memory"], "flavors": [fq("alpha", ("cpu", "0"))]}),
        f"{RGS}[0]",
    ),
    "Should reject resource not defined in resource group": (
        cohort({"coveredResources": ["cpu"], "flavors": [fq("alpha", ("cpu", "0"), ("memory", "0"))]}),
        f"{RGS}[0]",
    ),
    "Should reject resource in more than one resource group": (
        cohort(rg(fq("alpha", ("cpu", "0"), ("memory", "0"))), rg(fq("beta", ("memory", "0")))),
        f"{RGS}[1].coveredResources[0]",
    ),
    "Should reject flavor in more than one resource group": (
        cohort(rg(fq("alpha", "cpu"), fq("beta", "cpu")), rg(fq("beta", "memory"))),
        f"{RGS}[1].flavors[0].name",
    ),
    "Should allow FairSharing weight": (cohort(fairSharing={"weight": "1"}), None),
    "Should allow zero FairSharing weight": (cohort(fairSharing={"weight": "0"}), None),
    "Should forbid negative FairSharing weight": (cohort(fairSharing={"weight": "-1"}), "spec.fairSharing"),
    "Should allow fractional FairSharing weight": (cohort(fairSharing={"weight": "0.5"}), None),
    "Should allow small FairSharing weight": (cohort(fairSharing={"weight": "1m"}), None),
    "Should allow even smaller FairSharing weight": (cohort(fairSharing={"weight": "1u"}), None),
    "Should allow smallest FairSharing weight": (cohort(fairSharing={"weight": "2n"}), None),
    "Should forbid threshold FairSharing weight": (cohort(fairSharing={"weight": "1n"}), "spec.fairSharing"),
    "Should forbid collapsed FairSharing weight": (cohort(fairSharing={"weight": "0.0000000001"}), "spec.fairSharing"),
}


@pytest.mark.parametrize("case", COHORT_CREATION, ids=list(COHORT_CREATION))
def test_validate_cohort_on_creation(kc: Cluster, case: str) -> None:
    body, want = COHORT_CREATION[case]
    check_outcome(kc, body, want)


def test_cohort_should_update_parent(kc: Cluster) -> None:
    served_create(kc, cohort())
    current = kc.get("cohorts", "cohort")
    current["spec"]["parentName"] = "cohort2"
    assert replace(kc, current)["spec"]["parentName"] == "cohort2"


def test_cohort_should_reject_invalid_parent(kc: Cluster) -> None:
    served_create(kc, cohort())
    current = kc.get("cohorts", "cohort")
    current["spec"]["parentName"] = "@cohort2"
    assert refusal(lambda: replace(kc, current)) == ["spec.parentName"]


def test_cohort_should_reject_negative_borrowing_limit(kc: Cluster) -> None:
    """Upstream's "Updating a Cohort / Should reject negative borrowing limit" creates one with a negative quota."""
    assert refused_create(kc, cohort(rg(fq("x86", ("cpu", "-1"))))) == [f"{RES0}.nominalQuota"]


# -- resourceflavor_test.go -----------------------------------------------------------------------------------------


def test_resource_flavor_should_be_valid(kc: Cluster) -> None:
    spec = {"nodeLabels": {"foo": "bar"}, "nodeTaints": [{"key": "spot", "value": "true", "effect": "NoSchedule"}]}
    assert served_create(kc, rf(**spec))["spec"] == spec


def test_resource_flavor_should_have_a_finalizer(kc: Cluster) -> None:
    """The defaulting webhook adds it: the create's answer carries it already."""
    assert served_create(kc, rf())["metadata"]["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]
    assert kc.get("resourceflavors", "resource-flavor")["metadata"]["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]


@pytest.mark.parametrize(
    ("taints", "labels", "want"),
    [(9, 0, "spec.nodeTaints"), (0, 9, "spec.nodeLabels"), (8, 8, None)],
    ids=["invalid number of taint", "invalid number of nodeSelector", "valid number of nodeSelector and taint"],
)
def test_resource_flavor_invalid_number_of_properties(kc: Cluster, taints: int, labels: int, want: str | None) -> None:
    body = rf(
        nodeTaints=[{"key": f"t{i}", "effect": "NoExecute"} for i in range(taints)],
        nodeLabels={f"l{i}": "" for i in range(labels)},
    )
    check_outcome(kc, body, want)


def test_resource_flavor_updating_with_invalid_taints_should_fail_to_update(kc: Cluster) -> None:
    served_create(kc, rf())
    current = kc.get("resourceflavors", "resource-flavor")
    current["spec"]["nodeTaints"] = [{"key": "foo", "value": "bar", "effect": "Invalid"}]
    assert any(f.startswith("spec.nodeTaints") for f in refusal(lambda: replace(kc, current)))


RF_CREATION = {
    "Should fail to create with invalid taints": (
        rf(nodeTaints=[{"key": "skdajf"}, {"key": "@foo", "value": "bar", "effect": "NoSchedule"}]),
        "spec.nodeTaints",
    ),
    "Should fail to create with invalid label name": (rf(nodeLabels={"@abc": "foo"}), "spec.nodeLabels"),
    "Should fail to create with invalid tolerations": (
        rf(
            tolerations=[
                {"key": "@abc", "operator": "Equal", "value": "v", "effect": "NoSchedule"},
                {"key": "abc", "operator": "Exists", "value": "v", "effect": "NoSchedule"},
                {"key": "abc", "operator": "Equal", "value": "v", "effect": "not-valid"},
                {"key": "abc", "operator": "Equal", "value": "v", "effect": "NoSchedule"},
            ]
        ),
        "spec.tolerations",
    ),
}


@pytest.mark.parametrize("case", RF_CREATION, ids=list(RF_CREATION))
def test_validate_resource_flavor_on_creation(kc: Cluster, case: str) -> None:
    body, want = RF_CREATION[case]
    check_outcome(kc, body, want)


def test_resource_flavor_invalid_toleration_key_is_the_webhooks(kc: Cluster) -> None:
    """A toleration key that is no qualified name passes the CRD's rules and is the webhook's to refuse."""
    body = rf(tolerations=[{"key": "@abc", "operator": "Equal", "value": "v", "effect": "NoSchedule"}])
    assert refused_create(kc, body) == ["spec.tolerations[0].key"]


# -- localqueue_test.go ---------------------------------------------------------------------------------------------


def lq(cluster_queue: str, name: str = "queue") -> dict:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": name},
        "spec": {"clusterQueue": cluster_queue},
    }


def test_local_queue_should_reject_bad_value_for_spec_cluster_queue(kc: Cluster) -> None:
    assert refused_create(kc, lq("invalid_name"), kc.namespace()) == ["spec.clusterQueue"]


def test_local_queue_should_reject_the_change_of_spec_cluster_queue(kc: Cluster) -> None:
    ns = kc.namespace()
    served_create(kc, lq("foo"), ns)
    current = kc.get("localqueues", "queue", ns)
    current["spec"]["clusterQueue"] = "bar"
    assert refusal(lambda: replace(kc, current, ns)) == ["spec.clusterQueue"]


def flavor_usage(n: int) -> list[dict]:
    return [{"name": f"f{i}", "resources": [{"name": "cpu", "total": "0"}]} for i in range(n)]


@pytest.mark.parametrize(
    ("field", "n", "ok"),
    [("both", 64, True), ("flavorsReservation", 65, False), ("flavorsUsage", 65, False)],
    ids=[
        "Should allow flavors quantity up to the limit in flavorsReservation and flavorsUsage",
        "Should reject flavors quantity over the limit in flavorsReservation",
        "Should reject flavors quantity over the limit in flavorsUsage",
    ],
)
def test_local_queue_status_flavors(kc: Cluster, field: str, n: int, ok: bool) -> None:
    ns = kc.namespace()
    served_create(kc, lq("foo"), ns)
    current = kc.get("localqueues", "queue", ns)
    fields = ["flavorsReservation", "flavorsUsage"] if field == "both" else [field]
    for f in fields:
        current.setdefault("status", {})[f] = flavor_usage(n)
    if ok:
        replace(kc, current, ns, status=True)
    else:
        # too many items blocks the CRD's rules: kube adds that they were not checked, at <nil>
        assert refusal(lambda: replace(kc, current, ns, status=True)) == [f"status.{field}", "<nil>"]


# -- workload_test.go -----------------------------------------------------------------------------------------------


def served_wl(*podsets: dict, **spec: object) -> dict:
    """A Workload to create over HTTP (status is the status subresource's: not sent on create)."""
    body = wl(*podsets)
    body["metadata"] = {"name": "test-workload"}
    body["spec"].update(spec)
    return body


def test_workload_should_set_default_podset_name(kc: Cluster) -> None:
    ns = kc.namespace()
    body = served_wl({"count": 1, "template": {"spec": {"containers": [{"name": "c", "image": "pause"}]}}})
    served_create(kc, body, ns)
    assert kc.get("workloads", "test-workload", ns)["spec"]["podSets"][0]["name"] == "main"


def test_workload_shouldnt_set_podset_name_if_multiple(kc: Cluster) -> None:
    """Both unnamed podSets default to "main": the list-map key repeats."""
    unnamed = {"count": 1, "template": {"spec": {"containers": [{"name": "c", "image": "pause"}]}}}
    fields = refused_create(kc, served_wl(unnamed, unnamed), kc.namespace())
    assert any(f.startswith("spec.podSets") for f in fields), fields


@pytest.mark.parametrize(
    ("capacity", "count", "invalid"),
    [(0, 1, True), (18, 1, False), (19, 1, True), (3, 0, False), (3, 3, False)],
    ids=[
        "podSets count less than 1",
        "podSets count at the maximum",
        "podSets count more than the maximum",
        "valid podSet, count can be 0",
        "valid podSet",
    ],
)
def test_workload_should_have_valid_podset_when_creating(kc: Cluster, capacity: int, count: int, invalid: bool) -> None:
    body = served_wl(ps("main", 1))
    body["spec"]["podSets"] = [ps(f"ps{i}", count) for i in range(capacity)]
    check_outcome(kc, body, "spec.podSets" if invalid else None, kc.namespace())


def _pod_ref(name: str, group: str = "scheduling.k8s.io", kind: str = "PriorityClass") -> dict:
    return {"group": group, "kind": kind, "name": name}


TOLERATING_UPDATES = [
    {
        "name": "first",
        "labels": {"l1": "first"},
        "annotations": {"foo": "bar"},
        "nodeSelector": {"type": "first"},
        "tolerations": [
            {"key": "t1", "operator": "Equal", "value": "t1v", "effect": "NoExecute", "tolerationSeconds": 5}
        ],
    },
    {
        "name": "second",
        "labels": {"l2": "second"},
        "annotations": {"foo": "baz"},
        "nodeSelector": {"type": "second"},
        "tolerations": [
            {"key": "t2", "operator": "Equal", "value": "t2v", "effect": "NoExecute", "tolerationSeconds": 10}
        ],
    },
]
WL_CREATION = {
    "valid workload": (served_wl(ps("driver", 1), ps("workers", 100)), None),
    "invalid podSet name": (served_wl(ps("@driver", 1)), "spec.podSets[0].name"),
    "invalid priorityClassRef.name": (
        served_wl(priorityClassRef=_pod_ref("invalid_class"), priority=0),
        "spec.priorityClassRef.name",
    ),
    "invalid priorityClassRef.group": (
        served_wl(priorityClassRef=_pod_ref("low", group="test"), priority=100),
        "spec.priorityClassRef.group",
    ),
    "invalid priorityClassRef.kind": (
        served_wl(priorityClassRef=_pod_ref("low", kind="test"), priority=100),
        "spec.priorityClassRef.kind",
    ),
    "incompatible priorityClassRef.kind (scheduling.k8s.io)": (
        served_wl(priorityClassRef=_pod_ref("low", kind="WorkloadPriorityClass"), priority=100),
        "spec.priorityClassRef",
    ),
    "incompatible priorityClassRef.kind (kueue.x-k8s.io)": (
        served_wl(priorityClassRef=_pod_ref("low", group="kueue.x-k8s.io"), priority=100),
        "spec.priorityClassRef",
    ),
    "omitted priorityClassRef is valid": (served_wl(priority=0), None),
    "priority should not be nil when priorityClassRef is set": (
        served_wl(priorityClassRef=_pod_ref("priority")),
        "spec",
    ),
    "invalid queueName": (served_wl(queueName="@invalid"), "spec.queueName"),
    "should not request num-pods resource": (
        served_wl(ps("bad", init=container({"pods": "1"}), requests={"pods": "1"})),
        f"{FIRST}.initContainers[0].resources.requests[pods]",
    ),
    "should not limit num-pods resource": (
        served_wl(ps("bad", limits={"pods": "1"})),
        f"{FIRST}.containers[0].resources.limits[pods]",
    ),
    "should not allow negative resource requests": (
        served_wl(ps("bad", requests={"cpu": "-1"})),
        f"{FIRST}.containers[0].resources.requests[cpu]",
    ),
    "should not allow negative pod-level resource requests": (
        served_wl(ps("bad", pod_requests={"cpu": "-1"})),
        f"{FIRST}.resources.requests[cpu]",
    ),
    "empty podSetUpdates should be valid since it is optional": (served_wl(), None),
    "invalid podSet minCount (negative)": (served_wl(ps("ps1", 3, minCount=-1)), "spec.podSets[0].minCount"),
    "invalid podSet minCount (too big)": (served_wl(ps("ps1", 3, minCount=4)), "spec.podSets[0]"),
    "too many variable count podSets": (served_wl(ps("ps1", 3, minCount=2), ps("ps2", 3, minCount=1)), "spec.podSets"),
    "invalid maximumExexcutionTimeSeconds": (
        served_wl(maximumExecutionTimeSeconds=0),
        "spec.maximumExecutionTimeSeconds",
    ),
    "valid maximumExexcutionTimeSeconds": (served_wl(maximumExecutionTimeSeconds=1), None),
}


@pytest.mark.parametrize("case", WL_CREATION, ids=list(WL_CREATION))
def test_workload_should_have_valid_values_when_creating(kc: Cluster, case: str) -> None:
    body, want = WL_CREATION[case]
    check_outcome(kc, body, want, kc.namespace())


def _created_workload(kc: Cluster, body: dict) -> tuple[str, dict]:
    ns = kc.namespace()
    served_create(kc, body, ns)
    return ns, kc.get("workloads", "test-workload", ns)


def _reserving(current: dict, admission: dict, now: str = NOW) -> dict:
    status = current.setdefault("status", {})
    status["admission"] = admission
    status["conditions"] = [c for c in status.get("conditions", []) if c["type"] != "QuotaReserved"] + [
        {
            "type": "QuotaReserved",
            "status": "True",
            "reason": "AdmittedByTest",
            "message": "admitted",
            "lastTransitionTime": now,
        }
    ]
    return current


def admission(cluster_queue: str, *assignments: dict) -> dict:
    return {"clusterQueue": cluster_queue, "podSetAssignments": list(assignments) or [psa()]}


WL_SETTING_ADMISSION = {
    "invalid clusterQueue name": (served_wl(), admission("@invalid"), "status.admission.clusterQueue"),
    "invalid podSet name in status assignment": (
        served_wl(),
        admission("cluster-queue", psa("@invalid")),
        "status.admission.podSetAssignments[0].name",
    ),
    "mismatched names in admission with names in podSets": (
        served_wl(ps("main2"), ps("main1")),
        admission("cluster-queue", psa("main1"), psa("main2"), psa("main3")),
        "",
    ),
    "assignment usage should be divisible by count": (
        served_wl(ps("main", 3, requests={"cpu": "1"})),
        admission("cluster-queue", psa("main", 3, cpu="1")),
        "status.admission.podSetAssignments[0].resourceUsage[cpu]",
    ),
}


@pytest.mark.parametrize("case", WL_SETTING_ADMISSION, ids=list(WL_SETTING_ADMISSION))
def test_workload_should_have_valid_values_when_setting_admission(kc: Cluster, case: str) -> None:
    body, adm, want = WL_SETTING_ADMISSION[case]
    ns, current = _created_workload(kc, body)
    fields = refusal(lambda: replace(kc, _reserving(current, adm), ns, status=True))
    assert any(f.startswith(want) for f in fields), fields


WL_SETTING_CHECK_STATE = {
    "mismatched names in podSetUpdates with names in podSets": (
        served_wl(ps("first"), ps("second")),
        [{"name": "first"}, {"name": "third"}],
        f"{PSU}[1].name",
    ),
    "invalid label name of podSetUpdate": (
        served_wl(),
        [{"name": "main", "labels": {"@abc": "foo"}}],
        f"{PSU}[0].labels",
    ),
    "invalid node selector name of podSetUpdate": (
        served_wl(),
        [{"name": "main", "nodeSelector": {"@abc": "foo"}}],
        f"{PSU}[0].nodeSelector",
    ),
    "invalid label value of podSetUpdate": (
        served_wl(),
        [{"name": "main", "labels": {"foo": "@abc"}}],
        f"{PSU}[0].labels",
    ),
}


@pytest.mark.parametrize("case", WL_SETTING_CHECK_STATE, ids=list(WL_SETTING_CHECK_STATE))
def test_workload_should_have_valid_values_when_setting_admission_check_state(kc: Cluster, case: str) -> None:
    body, updates, want = WL_SETTING_CHECK_STATE[case]
    ns, current = _created_workload(kc, body)
    current.setdefault("status", {})["admissionChecks"] = [
        {"name": "check", "state": "Ready", "message": "", "lastTransitionTime": NOW, "podSetUpdates": updates}
    ]
    assert refusal(lambda: replace(kc, current, ns, status=True)) == [want]


def test_workload_invalid_reclaimable_pods(kc: Cluster) -> None:
    ns, current = _created_workload(kc, served_wl(ps("ps1", 3)))
    current.setdefault("status", {})["reclaimablePods"] = [{"name": "ps1", "count": 4}, {"name": "ps2", "count": 1}]
    fields = refusal(lambda: replace(kc, current, ns, status=True))
    assert fields == ["status.reclaimablePods[ps1].count", "status.reclaimablePods[ps2].name"]


def test_workload_should_refuse_a_status_update_reserving_quota_with_no_admission(kc: Cluster) -> None:
    ns, current = _created_workload(kc, served_wl())
    current.setdefault("status", {})["conditions"] = [
        {
            "type": "QuotaReserved",
            "status": "True",
            "reason": "Admitted",
            "message": "admitted",
            "lastTransitionTime": NOW,
        }
    ]
    assert refusal(lambda: replace(kc, current, ns, status=True)) == ["status.admission"]


def set_quota_reservation(kc: Cluster, ns: str, cluster_queue: str = "cq") -> dict:
    """util.SetQuotaReservation + util.SyncAdmittedConditionForWorkloads: QuotaReserved and Admitted through the
    status subresource, an admission of every podSet."""
    current = kc.get("workloads", "test-workload", ns)
    assignments = [psa(p["name"]) for p in current["spec"]["podSets"]]
    _reserving(current, admission(cluster_queue, *assignments))
    current["status"]["conditions"] = [c for c in current["status"]["conditions"] if c["type"] != "Admitted"] + [
        {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "admitted", "lastTransitionTime": NOW}
    ]
    replace(kc, current, ns, status=True)
    after = kc.get("workloads", "test-workload", ns)
    assert any(c["type"] == "QuotaReserved" and c["status"] == "True" for c in after["status"]["conditions"]), after
    return after


def _set(path: str, value: object):
    def apply(w: dict) -> None:
        *parents, last = path.split(".")
        node = w
        for p in parents:
            node = node[int(p)] if p.isdigit() else node.setdefault(p, {})
        if value is None:
            node.pop(last, None)
        else:
            node[last] = value

    return apply


def _both(*changes):
    def apply(w: dict) -> None:
        for change in changes:
            change(w)

    return apply


C_AFTER = {"name": "c-after", "image": "pause", "resources": {"requests": {}}}
WPC = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass"}
PPC = {"group": "scheduling.k8s.io", "kind": "PriorityClass"}
# Rules at the Workload's root (queueName, maximumExecutionTimeSeconds and priorityClassRef while quota is reserved)
# have no field path: kube reports them at `<nil>`.
ROOT = "<nil>"
WL_UPDATE = {
    "podSets should not be updated when has quota reservation: count": (
        served_wl(),
        True,
        _set("spec.podSets", [ps("main", 2)]),
        "spec.podSets.0",
    ),
    "podSets should not be updated: podSpec": (
        served_wl(),
        True,
        _set("spec.podSets", [{"name": "main", "count": 1, "template": {"spec": {"containers": [C_AFTER]}}}]),
        "spec.podSets.0",
    ),
    "queueName can be updated when not admitted": (
        served_wl(queueName="q1"),
        False,
        _set("spec.queueName", "q2"),
        None,
    ),
    "queueName can be updated when admitting": (served_wl(), False, _set("spec.queueName", "q"), None),
    "queueName should not be updated once admitted": (
        served_wl(queueName="q1"),
        True,
        _set("spec.queueName", "q2"),
        ROOT,
    ),
    "updating podSets before setting reserve quota for workload": (
        served_wl(),
        False,
        _set("spec.podSets", [{"name": "main", "count": 1, "template": {"spec": {"containers": [C_AFTER]}}}]),
        None,
    ),
    "Should forbid the change of spec.podSet": (served_wl(), True, _set("spec.podSets.0.count", 10), "spec.podSets.0"),
    "can add maximum execution time when not admitted": (
        served_wl(),
        False,
        _set("spec.maximumExecutionTimeSeconds", 1),
        None,
    ),
    "can update maximum execution time when not admitted": (
        served_wl(maximumExecutionTimeSeconds=1),
        False,
        _set("spec.maximumExecutionTimeSeconds", 2),
        None,
    ),
    "cannot add maximum execution time when admitted": (
        served_wl(),
        True,
        _set("spec.maximumExecutionTimeSeconds", 1),
        ROOT,
    ),
    "cannot update maximum execution time when admitted": (
        served_wl(maximumExecutionTimeSeconds=1),
        True,
        _set("spec.maximumExecutionTimeSeconds", 2),
        ROOT,
    ),
    "Should allow to change priority when QuotaReserved=false": (served_wl(), False, _set("spec.priority", 10), None),
    "Should allow to change priority with priorityClassRef when QuotaReserved=false": (
        served_wl(priority=0, priorityClassRef={**PPC, "name": "low"}),
        False,
        _set("spec.priority", 10),
        None,
    ),
    "can set workload priorityClassRef when QuotaReserved=false": (
        served_wl(),
        False,
        _both(_set("spec.priorityClassRef", {**WPC, "name": "low"}), _set("spec.priority", 100)),
        None,
    ),
    "can't set workload priority class when QuotaReserved=true": (
        served_wl(),
        True,
        _both(_set("spec.priorityClassRef", {**WPC, "name": "low"}), _set("spec.priority", 100)),
        ROOT,
    ),
    "can update workload priority class when QuotaReserved=false": (
        served_wl(priorityClassRef={**WPC, "name": "high"}, priority=1000),
        False,
        _both(_set("spec.priorityClassRef.name", "low"), _set("spec.priority", 100)),
        None,
    ),
    "can update workload priority class when QuotaReserved=true": (
        served_wl(priorityClassRef={**WPC, "name": "high"}, priority=1000),
        True,
        _both(_set("spec.priorityClassRef.name", "low"), _set("spec.priority", 100)),
        None,
    ),
    "can delete workload priority class when QuotaReserved=false": (
        served_wl(priorityClassRef={**WPC, "name": "high"}, priority=1000),
        False,
        _both(_set("spec.priorityClassRef", None), _set("spec.priority", None)),
        None,
    ),
    "can't delete workload priority class when quota reserved when QuotaReserved=true": (
        served_wl(priorityClassRef={**WPC, "name": "high"}, priority=1000),
        True,
        _both(_set("spec.priorityClassRef", None), _set("spec.priority", None)),
        ROOT,
    ),
    "can set pod priority class QuotaReserved=false": (
        served_wl(),
        False,
        _both(_set("spec.priorityClassRef", {**PPC, "name": "low"}), _set("spec.priority", 100)),
        None,
    ),
    "can't set pod priority class when QuotaReserved=true": (
        served_wl(),
        True,
        _both(_set("spec.priorityClassRef", {**PPC, "name": "low"}), _set("spec.priority", 100)),
        ROOT,
    ),
    "can update pod priority class when QuotaReserved=false": (
        served_wl(priorityClassRef={**PPC, "name": "high"}, priority=1000),
        False,
        _both(_set("spec.priorityClassRef.name", "low"), _set("spec.priority", 100)),
        None,
    ),
    "can't update pod priority class when QuotaReserved=true": (
        served_wl(priorityClassRef={**PPC, "name": "high"}, priority=1000),
        True,
        _both(_set("spec.priorityClassRef.name", "low"), _set("spec.priority", 100)),
        ROOT,
    ),
    "can delete pod priority class when QuotaReserved=false": (
        served_wl(priorityClassRef={**PPC, "name": "high"}, priority=1000),
        False,
        _both(_set("spec.priorityClassRef", None), _set("spec.priority", None)),
        None,
    ),
    "can't delete pod priority class when QuotaReserved=true": (
        served_wl(priorityClassRef={**PPC, "name": "high"}, priority=1000),
        True,
        _both(_set("spec.priorityClassRef", None), _set("spec.priority", None)),
        ROOT,
    ),
}


@pytest.mark.parametrize("case", WL_UPDATE, ids=list(WL_UPDATE))
def test_validate_workload_on_update(kc: Cluster, case: str) -> None:
    body, reserved, change, want = WL_UPDATE[case]
    ns = kc.namespace()
    served_create(kc, body, ns)
    if reserved:
        set_quota_reservation(kc, ns)
    current = kc.get("workloads", "test-workload", ns)
    change(current)
    if want is None:
        replace(kc, current, ns)
        return
    fields = refusal(lambda: replace(kc, current, ns))
    assert any(f == want or f.startswith(want) for f in fields), (want, fields)


def test_workload_should_forbid_the_change_of_spec_queue_name_of_an_admitted_workload(kc: Cluster) -> None:
    ns = kc.namespace()
    served_create(kc, served_wl(queueName="queue1"), ns)
    current = set_quota_reservation(kc, ns)
    current["spec"]["queueName"] = "queue2"
    assert refusal(lambda: replace(kc, current, ns)) == [ROOT]


def test_workload_should_prevent_removing_queue_name_on_admitted_workload_issue_12552(kc: Cluster) -> None:
    ns = kc.namespace()
    served_create(kc, served_wl(queueName="queue1"), ns)
    current = set_quota_reservation(kc, ns)
    del current["spec"]["queueName"]
    assert refusal(lambda: replace(kc, current, ns)) == [ROOT]


def test_workload_should_forbid_the_change_of_status_admission(kc: Cluster) -> None:
    ns = kc.namespace()
    served_create(kc, served_wl(), ns)
    current = set_quota_reservation(kc, ns, "cluster-queue")
    current["status"]["admission"]["clusterQueue"] = "foo-cluster-queue"
    assert refusal(lambda: replace(kc, current, ns, status=True)) == ["status.admission"]


# -- test/integration/singlecluster/webhook/jobs/job_webhook_test.go (manageJobsWithoutQueueName off, kubesim's
# only mode: the cases of the "enabled" suite that need it are not ported) ------------------------------------------


def job_body(
    name: str,
    queue: str | None = None,
    *,
    suspend: bool | None = None,
    parallelism: int = 1,
    completions: int = 1,
    annotations: dict | None = None,
    labels: dict | None = None,
) -> dict:
    """testingjob.MakeJob(name, ns): one pod, `Never` restarts."""
    all_labels = dict(labels or {})
    if queue:
        all_labels["kueue.x-k8s.io/queue-name"] = queue
    spec: dict = {
        "parallelism": parallelism,
        "completions": completions,
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "pause", "command": ["sleep", "60"]}],
            }
        },
    }
    if suspend is not None:
        spec["suspend"] = suspend
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": all_labels, "annotations": annotations or {}},
        "spec": spec,
    }


def read_job(kc: Cluster, ns: str, name: str) -> dict:
    return kc.client.sanitize_for_serialization(kc.batch.read_namespaced_job(name, ns))


def test_job_checking_the_workload_is_not_created_when_job_min_parallelism_annotation_is_invalid(kc: Cluster) -> None:
    ns = kc.namespace()
    body = job_body("job-with-queue-name", "foo", annotations={"kueue.x-k8s.io/job-min-parallelism": "a"})
    assert refusal(lambda: kc.batch.create_namespaced_job(ns, body)) == [
        "metadata.annotations[kueue.x-k8s.io/job-min-parallelism]"
    ]


def test_job_should_suspend_a_job_when_created_in_unsuspend_state(kc: Cluster) -> None:
    ns = kc.namespace()
    kc.batch.create_namespaced_job(ns, job_body("job-with-queue-name", "default", suspend=False))
    assert read_job(kc, ns, "job-with-queue-name")["spec"]["suspend"] is True


def test_job_should_not_suspend_a_job_when_no_queue_name_specified(kc: Cluster) -> None:
    ns = kc.namespace()
    kc.batch.create_namespaced_job(ns, job_body("job-without-queue-name", suspend=False))
    assert read_job(kc, ns, "job-without-queue-name")["spec"]["suspend"] is False


def test_job_should_not_update_unsuspend_job_successfully_when_adding_queue_name(kc: Cluster) -> None:
    ns = kc.namespace()
    kc.batch.create_namespaced_job(ns, job_body("job-without-queue-name", suspend=False))
    job = read_job(kc, ns, "job-without-queue-name")
    job["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "queue"}
    job["spec"]["suspend"] = False
    assert refusal(lambda: kc.batch.replace_namespaced_job("job-without-queue-name", ns, job)) == [
        "metadata.labels[kueue.x-k8s.io/queue-name]"
    ]


def test_job_should_not_update_unsuspend_job_successfully_when_changing_queue_name(kc: Cluster) -> None:
    ns = kc.namespace()
    kc.batch.create_namespaced_job(ns, job_body("job-with-queue-name", "queue"))
    job = read_job(kc, ns, "job-with-queue-name")
    job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "queue2"
    job["spec"]["suspend"] = False
    assert refusal(lambda: kc.batch.replace_namespaced_job("job-with-queue-name", ns, job)) == [
        "metadata.labels[kueue.x-k8s.io/queue-name]"
    ]


@pytest.mark.parametrize(
    "parallelism",
    [4, 3],
    ids=[
        "should allow unsuspending a partially admissible job with its minimum parallelism",
        "should allow unsuspending a partially admissible job with a parallelism lower then minimum",
    ],
)
def test_job_partial_admission_unsuspend(kc: Cluster, parallelism: int) -> None:
    ns = kc.namespace()
    body = job_body(
        "job-with-queue-name",
        "queue",
        parallelism=6,
        completions=6,
        annotations={"kueue.x-k8s.io/job-min-parallelism": "4"},
    )
    kc.batch.create_namespaced_job(ns, body)
    job = read_job(kc, ns, "job-with-queue-name")
    job["spec"]["parallelism"] = parallelism
    job["spec"]["suspend"] = False
    kc.batch.replace_namespaced_job("job-with-queue-name", ns, job)


def test_job_should_allow_restoring_parallelism(kc: Cluster) -> None:
    ns = kc.namespace()
    body = job_body(
        "job-with-queue-name",
        "queue",
        parallelism=3,
        completions=6,
        annotations={"kueue.x-k8s.io/stopping": "true", "kueue.x-k8s.io/job-min-parallelism": "2"},
    )
    kc.batch.create_namespaced_job(ns, body)
    job = read_job(kc, ns, "job-with-queue-name")
    job["spec"]["parallelism"] = 6
    del job["metadata"]["annotations"]["kueue.x-k8s.io/stopping"]
    kc.batch.replace_namespaced_job("job-with-queue-name", ns, job)


def test_job_should_refuse_changing_parallelism_of_a_running_partially_admissible_job(kc: Cluster) -> None:
    """validatePartialAdmissionUpdate: while spec.suspend is false, parallelism is fixed."""
    ns = kc.namespace()
    body = job_body(
        "job-with-queue-name", parallelism=3, completions=6, annotations={"kueue.x-k8s.io/job-min-parallelism": "2"}
    )
    kc.batch.create_namespaced_job(ns, body)
    job = read_job(kc, ns, "job-with-queue-name")
    job["spec"]["parallelism"] = 4
    assert refusal(lambda: kc.batch.replace_namespaced_job("job-with-queue-name", ns, job)) == ["spec.parallelism"]


def test_job_should_set_the_default_workload_priority_class_label_when_the_default_wpc_exists(kc: Cluster) -> None:
    kc.priority_class("default", 100)
    ns = kc.namespace()
    kc.batch.create_namespaced_job(ns, job_body("job-without-wpc", "test-queue"))
    assert read_job(kc, ns, "job-without-wpc")["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "default"


def test_job_should_not_override_an_existing_workload_priority_class_label(kc: Cluster) -> None:
    kc.priority_class("default", 100)
    kc.priority_class("high", 1000)
    ns = kc.namespace()
    kc.batch.create_namespaced_job(
        ns, job_body("job-with-wpc", "test-queue", labels={"kueue.x-k8s.io/priority-class": "high"})
    )
    assert read_job(kc, ns, "job-with-wpc")["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "high"


def test_job_should_not_set_the_label_when_the_default_wpc_does_not_exist(kc: Cluster) -> None:
    ns = kc.namespace()
    kc.batch.create_namespaced_job(ns, job_body("job-no-default-wpc", "test-queue"))
    assert "kueue.x-k8s.io/priority-class" not in read_job(kc, ns, "job-no-default-wpc")["metadata"]["labels"]


JOB_CREATE_REFUSALS = {
    "queue-name label that names no object": (
        job_body("j", "Queue_1"),  # a valid label value, no object name
        "metadata.labels[kueue.x-k8s.io/queue-name]",
    ),
    "max-exec-time label not an integer": (
        job_body("j", "q", labels={"kueue.x-k8s.io/max-exec-time-seconds": "ten"}),
        "metadata.labels[kueue.x-k8s.io/max-exec-time-seconds]",
    ),
    "max-exec-time label not positive": (
        job_body("j", "q", labels={"kueue.x-k8s.io/max-exec-time-seconds": "0"}),
        "metadata.labels[kueue.x-k8s.io/max-exec-time-seconds]",
    ),
    "job-min-parallelism not below the pods count": (
        job_body("j", "q", parallelism=4, completions=4, annotations={"kueue.x-k8s.io/job-min-parallelism": "4"}),
        "metadata.annotations[kueue.x-k8s.io/job-min-parallelism]",
    ),
    "job-completions-equal-parallelism on a NonIndexed Job": (
        job_body("j", "q", annotations={"kueue.x-k8s.io/job-completions-equal-parallelism": "true"}),
        "metadata.annotations[kueue.x-k8s.io/job-completions-equal-parallelism]",
    ),
    "admission-gated-by not a domain-prefixed path": (
        job_body("j", "q", annotations={"kueue.x-k8s.io/admission-gated-by": "no gate"}),
        "metadata.annotations[kueue.x-k8s.io/admission-gated-by]",
    ),
}


@pytest.mark.parametrize("case", JOB_CREATE_REFUSALS, ids=list(JOB_CREATE_REFUSALS))
def test_job_validate_on_create(kc: Cluster, case: str) -> None:
    """jobframework.ValidateJobOnCreate and the Job webhook's annotations (pkg/controller/jobs/job)."""
    body, want = JOB_CREATE_REFUSALS[case]
    ns = kc.namespace()
    assert want in refusal(lambda: kc.batch.create_namespaced_job(ns, body))


def test_job_workload_priority_class_cannot_be_added_to_a_running_job_nor_removed(kc: Cluster) -> None:
    """jobframework.ValidateUpdateForWorkloadPriorityClassName."""
    kc.priority_class("high", 1000)
    ns = kc.namespace()
    kc.batch.create_namespaced_job(ns, job_body("plain", suspend=False))
    job = read_job(kc, ns, "plain")
    job["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "high"
    assert refusal(lambda: kc.batch.replace_namespaced_job("plain", ns, job)) == [
        "metadata.labels[kueue.x-k8s.io/priority-class]"
    ]
    kc.batch.create_namespaced_job(ns, job_body("queued", "q", labels={"kueue.x-k8s.io/priority-class": "high"}))
    job = read_job(kc, ns, "queued")
    del job["metadata"]["labels"]["kueue.x-k8s.io/priority-class"]
    assert refusal(lambda: kc.batch.replace_namespaced_job("queued", ns, job)) == [
        "metadata.labels[kueue.x-k8s.io/priority-class]"
    ]


# -- admissioncheck_test.go (named here: upstream's refused objects have no name either, which kube reports too) ---


def ac(parameters: dict | None = None, controller: str | None = "controller-name", name: str = "foo") -> dict:
    spec: dict = {}
    if controller is not None:
        spec["controllerName"] = controller
    if parameters is not None:
        spec["parameters"] = parameters
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck", "metadata": {"name": name}, "spec": spec}


PARAMS = {"apiGroup": "ref.api.group", "kind": "RefKind", "name": "ref-name"}


def test_admission_check_defaulting_on_creating_all_defaults(kc: Cluster) -> None:
    created = kc.create("admissionchecks", ac(controller="ac-controller"))
    assert created["spec"] == {"controllerName": "ac-controller"}


AC_CREATION = {
    "Should fail to create AdmissionCheck with no controller name": (
        ac(PARAMS, controller=None),
        "spec.controllerName",
    ),
    "Should fail to create AdmissionCheck with bad ref api group": (
        ac({**PARAMS, "apiGroup": "ref.api.group/Bad"}),
        "spec.parameters.apiGroup",
    ),
    "Should fail to create AdmissionCheck with no ref api group": (
        ac({k: v for k, v in PARAMS.items() if k != "apiGroup"}),
        "spec.parameters.apiGroup",
    ),
    "Should fail to create AdmissionCheck with bad ref kind": (
        ac({**PARAMS, "kind": "RefKind/Bad"}),
        "spec.parameters.kind",
    ),
    "Should fail to create AdmissionCheck with no ref kind": (
        ac({k: v for k, v in PARAMS.items() if k != "kind"}),
        "spec.parameters.kind",
    ),
    "Should fail to create AdmissionCheck with bad ref name": (
        ac({**PARAMS, "name": "ref-name/Bad"}),
        "spec.parameters.name",
    ),
    "Should fail to create AdmissionCheck with no ref name": (
        ac({k: v for k, v in PARAMS.items() if k != "name"}),
        "spec.parameters.name",
    ),
    "Should allow to create AdmissionCheck with no parameters": (ac(), None),
    "Should allow to create AdmissionCheck with valid spec": (ac(PARAMS), None),
}


@pytest.mark.parametrize("case", AC_CREATION, ids=list(AC_CREATION))
def test_validate_admission_check_on_creation(kc: Cluster, case: str) -> None:
    body, want = AC_CREATION[case]
    if want is None:
        kc.create("admissionchecks", body)
        return
    assert want in refusal(lambda: kc.create("admissionchecks", body))


def _ac_update(kc: Cluster, change) -> dict:
    kc.create("admissionchecks", ac(PARAMS, name="admission-check"))
    current = kc.get("admissionchecks", "admission-check")
    change(current)
    return current


def _replace_ac(kc: Cluster, obj: dict) -> dict:
    return kc.custom.replace_cluster_custom_object(*KUEUE, "admissionchecks", obj["metadata"]["name"], obj)


def test_admission_check_should_allow_to_update_when_changing_parameters(kc: Cluster) -> None:
    current = _ac_update(kc, lambda a: a["spec"].pop("parameters"))
    assert "parameters" not in _replace_ac(kc, current)["spec"]


def test_admission_check_should_fail_to_update_when_breaking_parameters(kc: Cluster) -> None:
    current = _ac_update(kc, lambda a: a["spec"]["parameters"].pop("name"))
    assert refusal(lambda: _replace_ac(kc, current)) == ["spec.parameters.name", "<nil>"]  # rules not checked


def test_admission_check_should_fail_to_update_when_changing_controller_name(kc: Cluster) -> None:
    current = _ac_update(kc, lambda a: a["spec"].update(controllerName="controller-name2"))
    assert refusal(lambda: _replace_ac(kc, current)) == ["spec.controllerName"]


# -- the served v1beta1 (apis/kueue/v1beta1 conversions, the CRDs' v1beta1 schemas) -------------------------------

V1BETA1 = ("kueue.x-k8s.io", "v1beta1")


def test_v1beta1_cluster_queue_all_defaults(kc: Cluster) -> None:
    """v1beta1's flavorFungibility defaults are v1beta2's: MayStopSearch is a v1beta1 value too, kept by the
    conversion (TestConvertFrom "FlavorFungibility MayStopSearch preserved")."""
    body = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "foo"}, "spec": {}}
    created = kc.custom.create_cluster_custom_object(*V1BETA1, "clusterqueues", body)
    assert created["apiVersion"] == "kueue.x-k8s.io/v1beta1"
    assert created["spec"]["flavorFungibility"] == DEFAULT_FUNGIBILITY
    assert created["metadata"]["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]


def test_v1beta1_flavor_fungibility_borrow_to_may_stop_search(kc: Cluster) -> None:
    """TestConvertTo "FlavorFungibility Borrow to MayStopSearch" / "Preempt to MayStopSearch"."""
    spec = {"flavorFungibility": {"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"}}
    body = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "foo"}, "spec": spec}
    kc.custom.create_cluster_custom_object(*V1BETA1, "clusterqueues", body)
    stored = kc.get("clusterqueues", "foo")["spec"]["flavorFungibility"]
    assert (stored["whenCanBorrow"], stored["whenCanPreempt"]) == ("MayStopSearch", "MayStopSearch")


def test_v1beta1_should_forbid_to_create_cluster_queue_with_invalid_cohort(kc: Cluster) -> None:
    """A v1beta1 request is validated against v1beta1's schema: the refusal names spec.cohort."""
    body = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": "foo"},
        "spec": {"cohort": "@prod"},
    }
    assert refusal(lambda: kc.custom.create_cluster_custom_object(*V1BETA1, "clusterqueues", body)) == ["spec.cohort"]


def test_v1beta1_webhook_refusals_name_the_same_fields(kc: Cluster) -> None:
    body = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": "foo"},
        "spec": cq(rg(fq("x86", ("cpu", "-1"))))["spec"],
    }
    fields = refusal(lambda: kc.custom.create_cluster_custom_object(*V1BETA1, "clusterqueues", body))
    assert fields == [f"{RES0}.nominalQuota"]


# -- workload_test.go: status updates, the ClusterName tables, v1beta1 CEL ------------------------------------------


def _status_update(kc: Cluster, ns: str, change) -> dict:
    current = kc.get("workloads", "test-workload", ns)
    change(current.setdefault("status", {}))
    return replace(kc, current, ns, status=True)


def test_workload_admission_should_not_be_updated_once_set(kc: Cluster) -> None:
    ns = kc.namespace()
    served_create(kc, served_wl(), ns)
    set_quota_reservation(kc, ns, "cluster-queue")
    current = kc.get("workloads", "test-workload", ns)
    current["status"]["admission"]["podSetAssignments"][0]["flavors"] = {"cpu": "other"}
    assert refusal(lambda: replace(kc, current, ns, status=True)) == ["status.admission"]


def test_workload_podset_updates_should_be_immutable_when_state_is_ready(kc: Cluster) -> None:
    ns = kc.namespace()
    served_create(kc, served_wl(ps("first"), ps("second")), ns)

    def ready(labels: dict):
        return lambda st: st.update(
            admissionChecks=checks({"name": "first", "labels": labels}, {"name": "second"}, state="Ready")
        )

    _status_update(kc, ns, ready({"foo": "bar"}))
    current = kc.get("workloads", "test-workload", ns)
    ready({"foo": "baz"})(current["status"])
    assert refusal(lambda: replace(kc, current, ns, status=True)) == ["status.admissionChecks[0].podSetUpdates"]


def test_workload_should_not_allow_podsets_count_increase_even_when_elastic_jobs_via_workload_slices_is_enabled(
    kc: Cluster,
) -> None:
    ns = kc.namespace()
    served_create(kc, served_wl(ps("main", 3)), ns)
    current = set_quota_reservation(kc, ns)
    current["spec"]["podSets"][0]["count"] = 4
    assert refusal(lambda: replace(kc, current, ns)) == ["spec.podSets.0"]


def test_workload_should_allow_podsets_count_decrease_when_elastic_jobs_via_workload_slices_is_enabled(
    kc: Cluster,
) -> None:
    ns = kc.namespace()
    served_create(kc, served_wl(ps("main", 3)), ns)
    current = set_quota_reservation(kc, ns)
    current["spec"]["podSets"][0]["count"] = 2
    assert replace(kc, current, ns)["spec"]["podSets"][0]["count"] == 2


def _cluster_names(nominated: list[str] | None, name: str | None):
    def apply(status: dict) -> None:
        for key, value in (("nominatedClusterNames", nominated), ("clusterName", name)):
            if value is None:
                status.pop(key, None)
            else:
                status[key] = value

    return apply


CLUSTER_NAME_CASES = {
    "Valid: ClusterName is in NominatedClusters": (
        _cluster_names(["worker1", "worker2"], None),
        _cluster_names(None, "worker2"),
        None,
    ),
    "Invalid: ClusterName is not in NominatedClusters": (
        _cluster_names(["worker1", "worker2"], None),
        _cluster_names(None, "worker3"),
        "status.clusterName",
    ),
    "Invalid: ClusterName is set when NominatedClusters is empty": (
        _cluster_names(None, None),
        _cluster_names(None, "worker1"),
        "status.clusterName",
    ),
    "Invalid: ClusterName and NominatedClusters are mutually exclusive": (
        lambda status: None,
        _cluster_names(["worker1", "worker2"], "worker1"),
        "status",
    ),
    "Valid: neither ClusterName nor NominatedClusters is set": (lambda status: None, _cluster_names(None, None), None),
}


@pytest.mark.parametrize("case", CLUSTER_NAME_CASES, ids=list(CLUSTER_NAME_CASES))
def test_validate_workload_status_on_update_cluster_name(kc: Cluster, case: str) -> None:
    """ "Workload validating webhook ClusterName - Dispatcher AllAtOnce" (the CRD's and the webhook's rules only)."""
    setup, update, want = CLUSTER_NAME_CASES[case]
    ns = kc.namespace()
    served_create(kc, served_wl(), ns)
    _status_update(kc, ns, setup)
    current = kc.get("workloads", "test-workload", ns)
    update(current.setdefault("status", {}))
    if want is None:
        replace(kc, current, ns, status=True)
    else:
        assert want in refusal(lambda: replace(kc, current, ns, status=True))


def test_workload_invalid_cluster_name_is_changed(kc: Cluster) -> None:
    """ "Dispatcher Incremental / Invalid: ClusterName is changed": once set, clusterName is immutable (CRD rule)."""
    ns = kc.namespace()
    served_create(kc, served_wl(), ns)
    _status_update(kc, ns, _cluster_names(["worker1"], None))
    _status_update(kc, ns, _cluster_names(None, "worker1"))
    current = kc.get("workloads", "test-workload", ns)
    current["status"]["clusterName"] = "worker2"
    assert "status" in refusal(lambda: replace(kc, current, ns, status=True))


V1BETA1_WL_CASES = {
    "can toggle active on workload without priorityClassRef when QuotaReserved=true": (
        {},
        True,
        {"active": False},
        None,
    ),
    "can toggle active on workload without priorityClassRef when QuotaReserved=false": (
        {},
        False,
        {"active": False},
        None,
    ),
    "can toggle active on workload with pod priorityClassRef when QuotaReserved=true": (
        {"priorityClassRef": {**PPC, "name": "default"}, "priority": 0},
        True,
        {"active": False},
        None,
    ),
    "can't change priorityClassSource via v1beta1 when QuotaReserved=true": (
        {"priorityClassRef": {**PPC, "name": "default"}, "priority": 0},
        True,
        {"priorityClassSource": "kueue.x-k8s.io/workloadpriorityclass"},
        ROOT,
    ),
    "can change priorityClassSource via v1beta1 when QuotaReserved=false": (
        {"priorityClassRef": {**PPC, "name": "default"}, "priority": 0},
        False,
        {"priorityClassSource": "kueue.x-k8s.io/workloadpriorityclass"},
        None,
    ),
    "can toggle active on workload with workload priorityClassRef when QuotaReserved=true": (
        {"priorityClassRef": {**WPC, "name": "default"}, "priority": 0},
        True,
        {"active": False},
        None,
    ),
    "can't change priorityClassName via v1beta1 when QuotaReserved=true and source is pod priorityClass": (
        {"priorityClassRef": {**PPC, "name": "default"}, "priority": 0},
        True,
        {"priorityClassName": "other"},
        ROOT,
    ),
    "can change priorityClassName via v1beta1 when QuotaReserved=true and source is workloadpriorityclass": (
        {"priorityClassRef": {**WPC, "name": "default"}, "priority": 0},
        True,
        {"priorityClassName": "other"},
        None,
    ),
}


@pytest.mark.parametrize("case", V1BETA1_WL_CASES, ids=list(V1BETA1_WL_CASES))
def test_validate_v1beta1_cel_rules_for_priority_class_source(kc: Cluster, case: str) -> None:
    spec, reserved, change, want = V1BETA1_WL_CASES[case]
    ns = kc.namespace()
    served_create(kc, served_wl(**spec), ns)
    if reserved:
        set_quota_reservation(kc, ns)
    old = kc.custom.get_namespaced_custom_object(*V1BETA1, ns, "workloads", "test-workload")
    old["spec"].update(change)

    def update() -> dict:
        return kc.custom.replace_namespaced_custom_object(*V1BETA1, ns, "workloads", "test-workload", old)

    if want is None:
        update()
    else:  # v1beta1's own rules judge a v1beta1 request: one rule, v1beta1's message
        assert refusal(update) == [want]
        with pytest.raises(ApiException) as err:
            update()
        assert "priorityClass" in json.loads(err.value.body)["details"]["causes"][0]["message"]
        assert "priorityClassRef" not in err.value.body


# -- workload_test.go "TopologyAssignment validation": the CRD's rules on a topology assignment (kubesim keeps them
# though it schedules no topology) ---------------------------------------------------------------------------------


def _slice(domains: int, values: list[dict], pods: dict) -> dict:
    return {"domainCount": domains, "valuesPerLevel": values, "podCounts": pods}


def _valid_slice(suffix: int) -> dict:
    return _slice(1, [{"universal": f"block-{suffix}"}, {"universal": f"rack-{suffix}"}], {"universal": 1})


TOPOLOGY_CASES = {
    "accepts a TopologyAssignment combining various item counts & patterns of subfield presence": (
        [
            _slice(
                3,
                [{"universal": "block-1"}, {"individual": {"prefix": "rack-1-", "roots": ["1", "2", "3"]}}],
                {"universal": 1},
            ),
            _slice(
                4,
                [
                    {"individual": {"prefix": "block", "roots": ["-", "-", "-", "-"], "suffix": "2"}},
                    {"individual": {"roots": ["r1", "r2", "r3", "r4"]}},
                ],
                {"individual": [10, 20, 30, 40]},
            ),
            _valid_slice(3),
            _valid_slice(4),
            _valid_slice(5),
        ],
        None,
    ),
    "rejects a slice with wrong number of levels": (
        [_valid_slice(1), _slice(1, [{"universal": "block-2"}], {"universal": 1}), _valid_slice(3)],
        "valuesPerLevel must have the same length as the number of levels in this TopologyAssignment",
    ),
    "rejects a slice with wrong number of individual pod counts": (
        [
            _valid_slice(1),
            _slice(3, [{"universal": "block-2"}, {"universal": "rack-2"}], {"individual": [10, 20]}),
            _valid_slice(3),
        ],
        "podCounts.individual must have length equal to domainCount",
    ),
    "rejects a slice has wrong number of individual assignment values": (
        [
            _valid_slice(1),
            _slice(
                3,
                [{"universal": "block-2"}, {"individual": {"roots": ["rack2-1", "rack2-2"]}}],
                {"individual": [10, 20, 30]},
            ),
            _valid_slice(3),
        ],
        "valuesPerLevel.individual, if set, must have roots of length equal to domainCount of this "
        "TopologyAssignmentSlice",
    ),
}


@pytest.mark.parametrize("case", TOPOLOGY_CASES, ids=list(TOPOLOGY_CASES))
def test_topology_assignment_kubebuilder_x_validation_rule_set(kc: Cluster, case: str) -> None:
    slices, message = TOPOLOGY_CASES[case]
    ns = kc.namespace()
    served_create(kc, served_wl(ps("ps1", 3, requests={"cpu": "1"}), queueName="lq1"), ns)
    current = kc.get("workloads", "test-workload", ns)
    assignment = {"name": "ps1", "topologyAssignment": {"levels": ["block", "rack"], "slices": slices}}
    current["status"] = {"admission": {"clusterQueue": "cq1", "podSetAssignments": [assignment]}}
    if message is None:
        replace(kc, current, ns, status=True)
        return
    with pytest.raises(ApiException) as err:
        replace(kc, current, ns, status=True)
    assert err.value.status == 422 and message in json.loads(err.value.body)["message"]


@pytest.mark.parametrize(
    ("state", "ok"),
    [("Pending", True), ("Ready", True), ("invalid", False)],
    ids=["Pending delayedTopologyRequest", "Ready delayedTopologyRequest", "invalid delayedTopologyRequest"],
)
def test_workload_setting_admission_delayed_topology_request(kc: Cluster, state: str, ok: bool) -> None:
    """ "Should have valid values when setting Admission": the delayedTopologyRequest enum."""
    ns, current = _created_workload(kc, served_wl(ps("main", 3, requests={"cpu": "1"})))
    assignment = {**psa("main", 3, cpu="3"), "delayedTopologyRequest": state}
    _reserving(current, admission("cluster-queue", assignment))
    if ok:
        replace(kc, current, ns, status=True)
    else:
        fields = refusal(lambda: replace(kc, current, ns, status=True))
        assert fields == ["status.admission.podSetAssignments[0].delayedTopologyRequest", "<nil>"]  # rules not checked


# -- CRD defaults of the other kinds (config/components/crd/bases) -------------------------------------------------


def test_crd_defaults_of_local_queue_cohort_workload_flavor_and_priority_class(kc: Cluster) -> None:
    ns = kc.namespace()
    local = served_create(kc, {**lq("cq"), "spec": {"clusterQueue": "cq", "fairSharing": {}}}, ns)
    assert local["spec"] == {"clusterQueue": "cq", "stopPolicy": "None", "fairSharing": {"weight": 1}}
    assert "finalizers" not in local["metadata"]
    co = served_create(kc, cohort(fairSharing={}))
    assert co["spec"] == {"fairSharing": {"weight": 1}} and "finalizers" not in co["metadata"]
    w = served_create(kc, served_wl({"template": {"spec": {"containers": [{"name": "c", "image": "pause"}]}}}), ns)
    assert w["spec"]["active"] is True
    assert (w["spec"]["podSets"][0]["name"], w["spec"]["podSets"][0]["count"]) == ("main", 1)
    flavor = served_create(kc, rf())
    assert flavor["spec"] == {} and flavor["metadata"]["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]
    wpc = kc.priority_class("high", 1000)
    assert wpc["value"] == 1000 and "finalizers" not in wpc["metadata"]


# -- pkg/controller/jobs/job/job_webhook_test.go: TestValidateCreate, TestValidateUpdate (but TAS) --------------------

QUEUE_LABEL = "metadata.labels[kueue.x-k8s.io/queue-name]"
MIN_PAR = "metadata.annotations[kueue.x-k8s.io/job-min-parallelism]"
SYNC = "metadata.annotations[kueue.x-k8s.io/job-completions-equal-parallelism]"
MAX_EXEC = "metadata.labels[kueue.x-k8s.io/max-exec-time-seconds]"
WPC_LABEL = "metadata.labels[kueue.x-k8s.io/priority-class]"


def mj(
    *,
    queue: str | None = None,
    suspend: bool = True,
    parallelism: int = 1,
    completions: int | None = None,
    indexed: bool | None = None,
    labels: dict | None = None,
    annotations: dict | None = None,
) -> dict:
    """testingjob.MakeJob("job", "default"): suspended, parallelism 1, completions unset."""
    all_labels = dict(labels or {})
    if queue is not None:
        all_labels["kueue.x-k8s.io/queue-name"] = queue
    spec: dict = {
        "parallelism": parallelism,
        "suspend": suspend,
        "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "pause"}]}},
    }
    if completions is not None:
        spec["completions"] = completions
    if indexed is not None:
        spec["completionMode"] = "Indexed" if indexed else "NonIndexed"
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "job",
            "namespace": "default",
            "labels": all_labels,
            "annotations": dict(annotations or {}),
        },
        "spec": spec,
    }


def job_hook_errors(new: dict, old: dict | None = None) -> list[tuple[str, str]]:
    return hook_errors("jobs", json.loads(json.dumps(new)), None if old is None else json.loads(json.dumps(old)))


GATE_ANN = "kueue.x-k8s.io/admission-gated-by"
JOB_VALIDATE_CREATE = {
    "simple": (mj(queue="queue"), []),
    "invalid queue-name label": (mj(queue="queue name"), [(QUEUE_LABEL, INV)]),
    "invalid partial admission annotation (format)": (
        mj(parallelism=4, completions=6, annotations={"kueue.x-k8s.io/job-min-parallelism": "NaN"}),
        [(MIN_PAR, INV)],
    ),
    "invalid partial admission annotation (badValue)": (
        mj(parallelism=4, completions=6, annotations={"kueue.x-k8s.io/job-min-parallelism": "5"}),
        [(MIN_PAR, INV)],
    ),
    "valid partial admission annotation": (
        mj(parallelism=4, completions=6, annotations={"kueue.x-k8s.io/job-min-parallelism": "3"}),
        [],
    ),
    "invalid sync completions annotation (format)": (
        mj(
            parallelism=4,
            completions=6,
            indexed=True,
            annotations={"kueue.x-k8s.io/job-completions-equal-parallelism": "-"},
        ),
        [(SYNC, INV)],
    ),
    "valid sync completions annotation, wrong completions count": (
        mj(
            parallelism=4,
            completions=6,
            indexed=True,
            annotations={"kueue.x-k8s.io/job-completions-equal-parallelism": "true"},
        ),
        [("spec.completions", INV)],
    ),
    "valid sync completions annotation, wrong job completions type (default)": (
        mj(parallelism=4, completions=4, annotations={"kueue.x-k8s.io/job-completions-equal-parallelism": "true"}),
        [(SYNC, INV)],
    ),
    "valid sync completions annotation, wrong job completions type": (
        mj(
            parallelism=4,
            completions=4,
            indexed=False,
            annotations={"kueue.x-k8s.io/job-completions-equal-parallelism": "true"},
        ),
        [(SYNC, INV)],
    ),
    "valid sync completions annotation": (
        mj(
            parallelism=4,
            completions=4,
            indexed=True,
            annotations={"kueue.x-k8s.io/job-completions-equal-parallelism": "true"},
        ),
        [],
    ),
    "invalid prebuilt workload": (
        mj(
            parallelism=4,
            completions=4,
            indexed=True,
            labels={"kueue.x-k8s.io/prebuilt-workload-name": "workload name"},
        ),
        [("metadata.labels[kueue.x-k8s.io/prebuilt-workload-name]", INV)],
    ),
    "valid prebuilt workload": (
        mj(
            parallelism=4,
            completions=4,
            indexed=True,
            labels={"kueue.x-k8s.io/prebuilt-workload-name": "workload-name"},
        ),
        [],
    ),
    "invalid prebuilt workload annotation, WorkloadIdentifierAnnotations enabled": (
        mj(
            parallelism=4,
            completions=4,
            indexed=True,
            annotations={"kueue.x-k8s.io/prebuilt-workload-name": "workload name"},
        ),
        [("metadata.annotations[kueue.x-k8s.io/prebuilt-workload-name]", INV)],
    ),
    "valid prebuilt workload annotation, WorkloadIdentifierAnnotations enabled": (
        mj(
            parallelism=4,
            completions=4,
            indexed=True,
            annotations={"kueue.x-k8s.io/prebuilt-workload-name": "workload-name"},
        ),
        [],
    ),
    "different prebuilt workload label and annotation, label ignored, WorkloadIdentifierAnnotations enabled": (
        mj(
            labels={"kueue.x-k8s.io/prebuilt-workload-name": "workload-label"},
            annotations={"kueue.x-k8s.io/prebuilt-workload-name": "workload-annotation"},
        ),
        [],
    ),
    "invalid maximum execution time": (
        mj(parallelism=4, completions=4, indexed=True, labels={"kueue.x-k8s.io/max-exec-time-seconds": "NaN"}),
        [(MAX_EXEC, INV)],
    ),
    "zero maximum execution time": (
        mj(parallelism=4, completions=4, indexed=True, labels={"kueue.x-k8s.io/max-exec-time-seconds": "0"}),
        [(MAX_EXEC, INV)],
    ),
    "negative maximum execution time": (
        mj(parallelism=4, completions=4, indexed=True, labels={"kueue.x-k8s.io/max-exec-time-seconds": "-10"}),
        [(MAX_EXEC, INV)],
    ),
    "valid maximum execution time": (
        mj(parallelism=4, completions=4, indexed=True, labels={"kueue.x-k8s.io/max-exec-time-seconds": "10"}),
        [],
    ),
    "valid AdmissionGatedBy annotation with single gate": (mj(annotations={GATE_ANN: "example.com/controller"}), []),
    "AdmissionGatedBy annotation - trailing space": (mj(annotations={GATE_ANN: "example.com/gate "}), []),
    "AdmissionGatedBy annotation - space before comma": (
        mj(annotations={GATE_ANN: "example.com/gate ,example.com/gate2"}),
        [],
    ),
    "AdmissionGatedBy annotation - space after comma": (
        mj(annotations={GATE_ANN: "example.com/gate, example.com/gate2"}),
        [],
    ),
    "AdmissionGatedBy annotation - leading space": (mj(annotations={GATE_ANN: " example.com/gate"}), []),
    "valid AdmissionGatedBy annotation with multiple gates": (
        mj(annotations={GATE_ANN: "example.com/a,not.example.com/b"}),
        [],
    ),
    "invalid AdmissionGatedBy annotation - not in subdomain/path format": (
        mj(annotations={GATE_ANN: "this is an invalid value"}),
        [(GATE, INV)],
    ),
    "invalid AdmissionGatedBy annotation - duplicate gates": (
        mj(annotations={GATE_ANN: "duplicates.are/invalid,duplicates.are/invalid"}),
        [(GATE, INV)],
    ),
    "invalid AdmissionGatedBy annotation - gate name too long": (
        mj(annotations={GATE_ANN: "example.com/" + "a" * 60}),
        [(GATE, "FieldValueTooLong")],
    ),
    "invalid AdmissionGatedBy annotation - space in path component": (
        mj(annotations={GATE_ANN: "example.com/gate name"}),
        [(GATE, INV)],
    ),
    "invalid AdmissionGatedBy annotation - space in domain component": (
        mj(annotations={GATE_ANN: "example .com/gate"}),
        [(GATE, INV)],
    ),
    "invalid AdmissionGatedBy annotation - multiple gates with one containing space": (
        mj(annotations={GATE_ANN: "valid.com/gate,invalid gate.com/controller"}),
        [(GATE, INV)],
    ),
    "AdmissionGatedBy annotation with feature gate enabled - empty string": (mj(annotations={GATE_ANN: ""}), []),
    "partial admission and elastic job cannot be used together": (
        mj(
            parallelism=4,
            completions=6,
            annotations={"kueue.x-k8s.io/job-min-parallelism": "3", "kueue.x-k8s.io/elastic-job": "true"},
        ),
        [(MIN_PAR, INV)],
    ),
}


@pytest.mark.parametrize("case", JOB_VALIDATE_CREATE, ids=list(JOB_VALIDATE_CREATE))
def test_job_validate_create(case: str) -> None:
    job, want = JOB_VALIDATE_CREATE[case]
    assert job_hook_errors(job) == want


def _with(job: dict, *, labels: dict | None = None, annotations: dict | None = None, **spec: object) -> dict:
    out = json.loads(json.dumps(job))
    out["metadata"]["labels"].update(labels or {})
    out["metadata"]["annotations"].update(annotations or {})
    out["spec"].update(spec)
    return out


MIN3 = {"kueue.x-k8s.io/job-min-parallelism": "3"}
JOB_VALIDATE_UPDATE = {
    "normal update": (mj(queue="queue"), _with(mj(queue="queue"), suspend=False), []),
    "add queue name with suspend is false": (mj(suspend=False), mj(queue="queue", suspend=False), [(QUEUE_LABEL, INV)]),
    "add queue name with suspend is true": (mj(), mj(queue="queue"), []),
    "change queue name with suspend is false": (
        mj(queue="queue", suspend=False),
        mj(queue="queue2", suspend=False),
        [(QUEUE_LABEL, INV)],
    ),
    "change queue name with suspend is true": (mj(queue="queue"), mj(queue="queue2"), []),
    "change queue name with suspend is true, but invalid value": (
        mj(queue="queue"),
        mj(queue="queue name"),
        [(QUEUE_LABEL, INV)],
    ),
    "immutable parallelism while unsuspended with partial admission enabled": (
        mj(suspend=False, parallelism=4, completions=6, annotations=MIN3),
        mj(suspend=False, parallelism=5, completions=6, annotations=MIN3),
        [("spec.parallelism", FORB)],
    ),
    "mutable parallelism while suspended with partial admission enabled": (
        mj(parallelism=4, completions=6, annotations={**MIN3, "kueue.x-k8s.io/stopping": "true"}),
        mj(parallelism=5, completions=6, annotations=MIN3),
        [],
    ),
    "immutable sync completion annotation while unsuspended": (
        mj(
            suspend=False,
            parallelism=4,
            completions=6,
            annotations={"kueue.x-k8s.io/job-completions-equal-parallelism": "true"},
        ),
        mj(
            suspend=False,
            parallelism=5,
            completions=6,
            annotations={"kueue.x-k8s.io/job-completions-equal-parallelism": "false"},
        ),
        [(SYNC, FORB)],
    ),
    "mutable sync completion annotation while suspended": (
        mj(parallelism=4, completions=6, annotations={"kueue.x-k8s.io/job-completions-equal-parallelism": "true"}),
        mj(
            suspend=False,
            parallelism=5,
            completions=6,
            annotations={"kueue.x-k8s.io/job-completions-equal-parallelism": "false"},
        ),
        [],
    ),
    "set priority-class when job not suspend": (
        mj(queue="queue", suspend=False),
        mj(queue="queue", suspend=False, labels={"kueue.x-k8s.io/priority-class": "test"}),
        [(WPC_LABEL, INV)],
    ),
    "update priority-class when job not suspend": (
        mj(queue="queue", suspend=False, labels={"kueue.x-k8s.io/priority-class": "test"}),
        mj(queue="queue", suspend=False, labels={"kueue.x-k8s.io/priority-class": "new-test"}),
        [],
    ),
    "delete priority-class when job not suspend": (
        mj(queue="queue", suspend=False, labels={"kueue.x-k8s.io/priority-class": "test"}),
        mj(queue="queue", suspend=False),
        [(WPC_LABEL, INV)],
    ),
    "set priority-class when job suspend": (
        mj(queue="queue"),
        mj(queue="queue", labels={"kueue.x-k8s.io/priority-class": "test"}),
        [],
    ),
    "update priority-class when job suspend": (
        mj(queue="queue", labels={"kueue.x-k8s.io/priority-class": "test"}),
        mj(queue="queue", labels={"kueue.x-k8s.io/priority-class": "new-test"}),
        [],
    ),
    "delete priority-class when job suspend": (
        mj(queue="queue", labels={"kueue.x-k8s.io/priority-class": "test"}),
        mj(queue="queue"),
        [(WPC_LABEL, INV)],
    ),
    "immutable prebuilt workload ": (
        mj(labels={"kueue.x-k8s.io/prebuilt-workload-name": "old-workload"}),
        mj(suspend=False, labels={"kueue.x-k8s.io/prebuilt-workload-name": "new-workload"}),
        [("metadata.labels[kueue.x-k8s.io/prebuilt-workload-name]", INV)],
    ),
    "immutable prebuilt workload annotation, WorkloadIdentifierAnnotations enabled": (
        mj(annotations={"kueue.x-k8s.io/prebuilt-workload-name": "old-workload"}),
        mj(suspend=False, annotations={"kueue.x-k8s.io/prebuilt-workload-name": "new-workload"}),
        [("metadata.annotations[kueue.x-k8s.io/prebuilt-workload-name]", INV)],
    ),
    "migrate from label to annotation, WorkloadIdentifierAnnotations enabled": (
        mj(labels={"kueue.x-k8s.io/prebuilt-workload-name": "workload-name"}),
        mj(suspend=False, annotations={"kueue.x-k8s.io/prebuilt-workload-name": "workload-name"}),
        [],
    ),
    "immutable queue name not suspend": (
        mj(suspend=False, queue="old-queue"),
        mj(suspend=False, queue="new-queue"),
        [(QUEUE_LABEL, INV)],
    ),
    "queue name can changes when it is  suspend": (mj(queue="old-queue"), mj(queue="new-queue"), []),
    "can update the kueue.x-k8s.io/job-min-parallelism  annotation": (
        mj(parallelism=4, completions=6, annotations=MIN3),
        mj(parallelism=4, completions=6, annotations={"kueue.x-k8s.io/job-min-parallelism": "2"}),
        [],
    ),
    "validates kueue.x-k8s.io/job-min-parallelism annotation value (bad format)": (
        mj(parallelism=4, completions=6, annotations=MIN3),
        mj(parallelism=4, completions=6, annotations={"kueue.x-k8s.io/job-min-parallelism": "NaN"}),
        [(MIN_PAR, INV)],
    ),
    "immutable max exec time while unsuspended": (
        mj(suspend=False, labels={"kueue.x-k8s.io/max-exec-time-seconds": "10"}),
        mj(suspend=False, labels={"kueue.x-k8s.io/max-exec-time-seconds": "20"}),
        [(MAX_EXEC, INV)],
    ),
    "immutable max exec time while transitioning to unsuspended": (
        mj(labels={"kueue.x-k8s.io/max-exec-time-seconds": "10"}),
        mj(suspend=False, labels={"kueue.x-k8s.io/max-exec-time-seconds": "20"}),
        [(MAX_EXEC, INV)],
    ),
    "mutable max exec time while suspended": (
        mj(labels={"kueue.x-k8s.io/max-exec-time-seconds": "10"}),
        mj(labels={"kueue.x-k8s.io/max-exec-time-seconds": "20"}),
        [],
    ),
    "reject adding AdmissionGatedBy annotation after Job creation": (
        mj(queue="queue"),
        mj(queue="queue", annotations={GATE_ANN: "example.com/controller1"}),
        [(GATE, FORB)],
    ),
    "allow removing AdmissionGatedBy annotation with single gate": (
        mj(queue="queue", annotations={GATE_ANN: "example.com/controller1"}),
        mj(queue="queue"),
        [],
    ),
    "allow removing AdmissionGatedBy annotation with multiple gates": (
        mj(queue="queue", annotations={GATE_ANN: "example.com/controller1,example.com/controller2"}),
        mj(queue="queue"),
        [],
    ),
    "allow removing one gate from AdmissionGatedBy annotation": (
        mj(queue="queue", annotations={GATE_ANN: "example.com/controller1,example.com/controller2"}),
        mj(queue="queue", annotations={GATE_ANN: "example.com/controller2"}),
        [],
    ),
    "reject injecting new gate in AdmissionGatedBy annotation": (
        mj(queue="queue", annotations={GATE_ANN: "example.com/controller1"}),
        mj(queue="queue", annotations={GATE_ANN: "example.com/controller1,example.com/controller2"}),
        [(GATE, FORB)],
    ),
    "allow reordering gates in AdmissionGatedBy annotation": (
        mj(queue="queue", annotations={GATE_ANN: "example.com/controller1,example.com/controller2"}),
        mj(queue="queue", annotations={GATE_ANN: "example.com/controller2,example.com/controller1"}),
        [],
    ),
}


@pytest.mark.parametrize("case", JOB_VALIDATE_UPDATE, ids=list(JOB_VALIDATE_UPDATE))
def test_job_validate_update(case: str) -> None:
    old, new, want = JOB_VALIDATE_UPDATE[case]
    assert job_hook_errors(new, old) == want


class LocalQueues:
    """A store holding the namespace "default"'s `default` LocalQueue (TestDefault's defaultLqExist)."""

    def __init__(self, default_lq: bool) -> None:
        self.default_lq = default_lq

    def get(self, resource: str, namespace: str | None, name: str) -> dict | None:
        if resource == "localqueues" and self.default_lq and (namespace, name) == ("default", "default"):
            return {"spec": {"clusterQueue": "cluster-queue"}}
        return None


def _owned_by_jobset(job: dict) -> dict:
    job["metadata"]["ownerReferences"] = [
        {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "owner", "uid": "owner"}
    ]
    return job


JOB_DEFAULT = {
    "update the suspend field with 'manageJobsWithoutQueueName=false'": (
        mj(queue="queue", suspend=False),
        False,
        mj(queue="queue"),
    ),
    "invalid queue name": (mj(queue="invalid-local-queue", suspend=False), False, mj(queue="invalid-local-queue")),
    "default lq is created, job doesn't have queue label": (mj(), True, mj(queue="default")),
    "default lq is created, job has queue label": (mj(queue="test-queue"), True, mj(queue="test-queue")),
    "default lq isn't created, job doesn't have queue label": (mj(), False, mj()),
    "job is managed by non Kueue managed owner, job has queue label": (
        _owned_by_jobset(mj()),
        True,
        _owned_by_jobset(mj(queue="default")),
    ),
}


@pytest.mark.parametrize("case", JOB_DEFAULT, ids=list(JOB_DEFAULT))
def test_job_default(case: str) -> None:
    """pkg/controller/jobs/job/job_webhook_test.go TestDefault (manageJobsWithoutQueueName off, no MultiKueue)."""
    job, default_lq, want = (json.loads(json.dumps(x)) if isinstance(x, dict) else x for x in JOB_DEFAULT[case])
    for hook in admission_webhooks(KueueConfig.default()):
        job = hook.mutate("jobs", "CREATE", job, None, LocalQueues(default_lq)) or job
    assert job == want


class PriorityClasses:
    def __init__(self, default_wpc: bool) -> None:
        self.default_wpc = default_wpc

    def get(self, resource: str, namespace: str | None, name: str) -> dict | None:
        if resource == "workloadpriorityclasses" and self.default_wpc and name == "default":
            return {"value": 100}
        return None


def _owned_by_a_job(job: dict) -> dict:
    job["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "parent", "uid": "parent", "controller": True}
    ]
    return job


APPLY_DEFAULT_WPC = {
    "feature gate enabled, no label, default WPC exists": (mj(), True, "default"),
    "feature gate enabled, label already set": (mj(labels={"kueue.x-k8s.io/priority-class": "high"}), True, "high"),
    "feature gate enabled, no label, default WPC does not exist": (mj(), False, None),
    "feature gate enabled, owner managed by kueue": (_owned_by_a_job(mj()), True, None),
}


@pytest.mark.parametrize("case", APPLY_DEFAULT_WPC, ids=list(APPLY_DEFAULT_WPC))
def test_apply_default_workload_priority_class(case: str) -> None:
    """pkg/controller/jobframework/defaults_test.go TestApplyDefaultWorkloadPriorityClass (the gate is on in v0.20)."""
    job, default_wpc, want = APPLY_DEFAULT_WPC[case]
    job = json.loads(json.dumps(job))
    for hook in admission_webhooks(KueueConfig.default()):
        job = hook.mutate("jobs", "CREATE", job, None, PriorityClasses(default_wpc)) or job
    assert job["metadata"]["labels"].get("kueue.x-k8s.io/priority-class") == want


def test_job_should_not_inject_default_queue_label_for_a_job_in_an_unmanaged_namespace(kc: Cluster) -> None:
    """Upstream excludes a namespace of its own; Kueue's default managedJobsNamespaceSelector excludes kube-system."""
    try:
        kc.core.create_namespace({"metadata": {"name": "kube-system"}})
    except ApiException as exc:
        assert exc.status == 409
    served_create(kc, lq("cluster-queue", name="default"), "kube-system")
    kc.batch.create_namespaced_job("kube-system", job_body("job-default-lq-unmanaged", suspend=False))
    job = read_job(kc, "kube-system", "job-default-lq-unmanaged")
    assert job["spec"]["suspend"] is False
    assert "kueue.x-k8s.io/queue-name" not in (job["metadata"].get("labels") or {})


def test_job_default_local_queue_in_a_managed_namespace(kc: Cluster) -> None:
    ns = kc.namespace()
    served_create(kc, lq("cluster-queue", name="default"), ns)
    kc.batch.create_namespaced_job(ns, job_body("job-default-lq", suspend=False))
    job = read_job(kc, ns, "job-default-lq")
    assert job["spec"]["suspend"] is True
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "default"


# -- WorkloadPriorityClass: no webhook, the CRD alone --------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "want"),
    [
        ({}, "value"),
        ({"value": 2**31}, "value"),
        ({"value": "high"}, "value"),
        ({"value": 100, "description": "batch work"}, None),
        ({"value": -(2**31)}, None),
    ],
    ids=["value is required", "value is an int32", "value is an integer", "valid", "lowest int32"],
)
def test_workload_priority_class_crd(kc: Cluster, body: dict, want: str | None) -> None:
    obj = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass", "metadata": {"name": "p"}, **body}
    check_outcome(kc, obj, want)


def test_v1beta1_request_with_a_v1beta2_only_field(kc: Cluster) -> None:
    """spec.cohortName is no v1beta1 field: kube decodes a v1beta1 body with v1beta1's schema, so it is refused
    under fieldValidation=Strict and dropped (with a warning) by default."""
    body = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": "foo"},
        "spec": {"cohortName": "research"},
    }
    with pytest.raises(ApiException) as err:
        kc.custom.create_cluster_custom_object(*V1BETA1, "clusterqueues", body, field_validation="Strict")
    assert err.value.status == 400 and 'unknown field "spec.cohortName"' in json.loads(err.value.body)["message"]
    kc.custom.create_cluster_custom_object(*V1BETA1, "clusterqueues", body)
    assert "cohortName" not in kc.get("clusterqueues", "foo")["spec"]


def test_schema_errors_that_block_the_crd_rules(kc: Cluster) -> None:
    """customresource strategy's hasBlockingErr: a type, required, enum or size error skips every CEL rule of the
    CRD, and kube says so once at <nil>; other schema errors (a pattern) leave the rules to run."""
    body = cq(
        queueingStrategy="unknown",
        preemption={"reclaimWithinCohort": "Never", "borrowWithinCohort": {"policy": "LowerPriority"}},
    )
    with pytest.raises(ApiException) as err:
        served_create(kc, body)
    causes = json.loads(err.value.body)["details"]["causes"]
    assert [c["field"] for c in causes] == ["spec.queueingStrategy", "<nil>"]
    assert causes[1]["message"] == (
        'Invalid value: "null": some validation rules were not checked because the object was invalid; correct the '
        "existing errors to complete validation"
    )
    body = cq(
        cohortName="@prod",
        preemption={"reclaimWithinCohort": "Never", "borrowWithinCohort": {"policy": "LowerPriority"}},
    )
    assert refused_create(kc, body) == ["spec.cohortName", "spec.preemption"]


def test_list_map_duplicates_are_reported_at_the_repeated_item(kc: Cluster) -> None:
    """kube's validateListMap: a repeated key is a Duplicate at the index of its second appearance (once)."""
    body = cq(
        {"coveredResources": ["cpu"], "flavors": [fq("a", ("cpu", "1")), fq("a", ("cpu", "1")), fq("a", ("cpu", "1"))]}
    )
    with pytest.raises(ApiException) as err:
        served_create(kc, body)
    causes = json.loads(err.value.body)["details"]["causes"]
    assert [(c["field"], c["reason"]) for c in causes] == [(f"{RGS}[0].flavors[1]", DUP)]
    assert causes[0]["message"] == 'Duplicate value: map[string]interface {}{"name":"a"}'
    unnamed = {"count": 1, "template": {"spec": {"containers": [{"name": "c", "image": "pause"}]}}}
    assert refused_create(kc, served_wl(unnamed, unnamed), kc.namespace()) == ["spec.podSets[1]"]


def test_a_cel_refusal_shows_the_schema_type_as_its_value(kc: Cluster) -> None:
    """kube's CEL validator reports a rule's failure with the schema type as the bad value."""
    ns = kc.namespace()
    served_create(kc, lq("foo"), ns)
    current = kc.get("localqueues", "queue", ns)
    current["spec"]["clusterQueue"] = "bar"
    with pytest.raises(ApiException) as err:
        replace(kc, current, ns)
    cause = json.loads(err.value.body)["details"]["causes"][0]
    assert cause == {
        "reason": "FieldValueInvalid",
        "message": 'Invalid value: "string": field is immutable',
        "field": "spec.clusterQueue",
    }
    with pytest.raises(ApiException) as err:
        served_create(kc, cq(rg(fq("x86", ("cpu", "1", "1")))))
    assert json.loads(err.value.body)["details"]["causes"][0]["message"] == (
        'Invalid value: "object": borrowingLimit must be nil when cohort is empty'
    )
