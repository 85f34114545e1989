"""Kueue's webhook and CRD validation cases, ported from upstream (kubernetes-sigs/kueue, v0.20 line):

- pkg/webhooks/clusterqueue_webhook_test.go: TestValidateClusterQueue, TestValidateClusterQueueUpdate,
  TestValidateTotalFlavors, TestValidateTotalCoveredResources, TestValidateFlavorResourceCombinations;
- pkg/webhooks/cohort_webhook_test.go: TestValidateCohort;
- pkg/webhooks/resourceflavor_webhook_test.go: TestValidateResourceFlavor;
- pkg/webhooks/workload_webhook_test.go: TestValidateWorkload, TestValidateWorkloadUpdate;
- test/integration/singlecluster/webhook/core/{clusterqueue,cohort,resourceflavor,localqueue,workload}_test.go.

Upstream's unit tests call the webhook's validation function: here they call the webhook as kubesim's API server
does (`hook.validate(resource, operation, obj, old, store)`), and compare field paths and StatusCause reasons (upstream
ignores details and bad values too). The integration tests create objects over HTTP with the official client
against a served kubesim: refusals are checked for their status and the field paths of their causes.

Where kubesim differs on purpose: a denial by one of Kueue's webhooks is answered 422 Invalid with one cause per
field error (as schema and CEL refusals are), where a real API server relays Kueue's webhook denial as 403 Forbidden
`admission webhook "v....kb.io" denied the request: ...` without causes; upstream's BeForbiddenError cases are
checked here as 422 with the webhook's causes.

Not ported (kubesim does not model them): ConcurrentAdmission (alpha, off in v0.20: only the policy's immutability
is checked), PriorityBoost (alpha, off), TAS (topologyRequest slice sizes, topology assignments beyond their
mutability, delayedTopologyRequest), MultiKueue (clusterName beyond the nominatedClusterNames rule, the
MultiKueueCluster/Config suites), ProvisioningRequest configs, AdmissionCheck parameters, feature-gate-off variants
(kubesim has no gate switches), and job integrations other than batch/v1 Job.
"""

from __future__ import annotations

import json

import pytest
from kubernetes.client.rest import ApiException

from kubesim.kueue import KueueConfig, admission_webhooks

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
