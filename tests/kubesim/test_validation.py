"""Validation as a real API server with Kueue's CRDs: unknown fields, schema types, CEL rules, names,
built-in Job rules, and the webhook calls of CONTRACT.md."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from kubesim.apiserver.registry.resources import KUEUE as KUEUE_RESOURCES
from kubesim.apiserver.registry.resources import crd_schema
from kubesim.apiserver.validation import cel
from kubesim.apiserver.validation import schema as validation
from kubesim.testing import serve
from tests.kubesim.conftest import KUEUE, cluster_queue, http, job_body, local_queue_body, pod_body, raw

CRDS = Path(__file__).resolve().parents[3] / "shared" / "reference" / "kueue-crds"  # ../shared beside the repo


def _status(exc: ApiException) -> dict:
    return json.loads(exc.body)


def _causes(exc: ApiException) -> dict[str, str]:
    return {c["field"]: c["message"] for c in _status(exc)["details"]["causes"]}


def test_every_cel_rule_in_the_vendored_schemas_compiles():
    rules = [r for res in KUEUE_RESOURCES for r in validation.known_rules(crd_schema(res.plural))]
    assert len(rules) == 38
    for rule in rules:
        cel.compile_rule(rule)  # raises CELError on any construct the evaluator does not implement


@pytest.mark.skipif(not CRDS.exists(), reason="reference CRDs not on this machine")
def test_vendored_schemas_are_current(tmp_path, monkeypatch):
    from kubesim.apiserver.registry.crds import regenerate

    monkeypatch.setattr(regenerate, "HERE", tmp_path)
    regenerate.main(str(CRDS))
    for res in KUEUE_RESOURCES:
        if res.plural in regenerate.WRITTEN_BY_HAND:
            continue
        fresh = json.loads((tmp_path / f"{res.plural}.json").read_text())
        assert fresh["schema"] == crd_schema(res.plural), res.plural
        old = json.loads((tmp_path / f"{res.plural}.v1beta1.json").read_text())
        assert old["schema"] == crd_schema(res.plural, "v1beta1"), res.plural


def test_every_cel_rule_of_the_vendored_v1beta1_schemas_compiles():
    """v1beta1 requests are validated against the CRDs' v1beta1 schemas: their rules must compile too."""
    rules = [r for res in KUEUE_RESOURCES for r in validation.known_rules(crd_schema(res.plural, "v1beta1"))]
    assert len(rules) == 29  # AdmissionCheck's is v1beta2's (no v1beta1 schema vendored); no TopologyAssignment rules
    for rule in rules:
        cel.compile_rule(rule)


def test_strict_unknown_field_is_400(api, ns):
    body = job_body("strict")
    body["spec"]["foo"] = 1
    code, status = raw(api, "POST", f"/apis/batch/v1/namespaces/{ns}/jobs?fieldValidation=Strict", body)
    assert code == 400 and status["reason"] == "BadRequest"
    assert 'unknown field "spec.foo"' in status["message"]
    cq = cluster_queue("strict-cq")
    cq["spec"]["bogus"] = True
    with pytest.raises(ApiException) as err:
        api.custom.create_cluster_custom_object(*KUEUE, "clusterqueues", cq, field_validation="Strict")
    assert err.value.status == 400 and 'unknown field "spec.bogus"' in _status(err.value)["message"]


def test_unknown_field_warns_by_default_and_is_dropped(api, ns):
    body = job_body("warned")
    body["spec"]["foo"] = 1
    resp = http(api, "POST", f"/apis/batch/v1/namespaces/{ns}/jobs", body)
    assert resp.status == 201
    assert resp.headers["Warning"] == '299 - "unknown field \\"spec.foo\\""'
    assert "foo" not in json.loads(resp.data)["spec"]
    cq = cluster_queue("warn-cq")
    cq["spec"]["bogus"] = True
    _, _, headers = api.custom.create_cluster_custom_object_with_http_info(*KUEUE, "clusterqueues", cq)
    assert 'unknown field \\"spec.bogus\\"' in headers["Warning"]
    cq = cluster_queue("ignore-cq")
    cq["spec"]["bogus"] = True
    made, _, headers = api.custom.create_cluster_custom_object_with_http_info(
        *KUEUE, "clusterqueues", cq, field_validation="Ignore"
    )
    assert "Warning" not in headers and "bogus" not in made["spec"]


def test_schema_type_error_is_422_naming_the_field(api, ns):
    body = job_body("typed")
    body["spec"]["parallelism"] = "many"
    code, status = raw(api, "POST", f"/apis/batch/v1/namespaces/{ns}/jobs", body)
    assert code == 422 and status["reason"] == "Invalid"
    assert status["details"]["causes"][0]["field"] == "spec.parallelism"
    assert status["details"]["causes"][0]["reason"] == "FieldValueTypeInvalid"
    cq = cluster_queue("typed-cq", queueingStrategy="Sometimes")
    with pytest.raises(ApiException) as err:
        api.custom.create_cluster_custom_object(*KUEUE, "clusterqueues", cq)
    cause = _status(err.value)["details"]["causes"][0]
    assert cause["field"] == "spec.queueingStrategy" and cause["reason"] == "FieldValueNotSupported"
    assert _status(err.value)["message"].startswith('ClusterQueue.kueue.x-k8s.io "typed-cq" is invalid: ')


def test_required_fields_and_quantities(api, ns):
    body = job_body("noimage")
    del body["spec"]["template"]["spec"]["containers"][0]["image"]
    with pytest.raises(ApiException) as err:
        api.batch.create_namespaced_job(ns, body)
    assert _causes(err.value) == {"spec.template.spec.containers[0].image": "Required value"}
    cq = cluster_queue("qty-cq")
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "8 GPUs"
    with pytest.raises(ApiException) as err:
        api.custom.create_cluster_custom_object(*KUEUE, "clusterqueues", cq)
    assert "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota" in _causes(err.value)
    cq = cluster_queue("many-rg")
    cq["spec"]["resourceGroups"] = cq["spec"]["resourceGroups"] * 17
    with pytest.raises(ApiException) as err:
        api.custom.create_cluster_custom_object(*KUEUE, "clusterqueues", cq)
    assert any(c["reason"] == "FieldValueTooMany" for c in _status(err.value)["details"]["causes"])


def test_cel_rules(api, ns):
    cq = cluster_queue("cel-cq")
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["borrowingLimit"] = 4
    with pytest.raises(ApiException) as err:
        api.custom.create_cluster_custom_object(*KUEUE, "clusterqueues", cq)
    assert err.value.status == 422
    assert "borrowingLimit must be nil when cohort is empty" in _causes(err.value)["spec"]
    cq["spec"]["cohortName"] = "pool"
    api.custom.create_cluster_custom_object(*KUEUE, "clusterqueues", cq)  # fine with a cohort
    cq = cluster_queue(
        "cel-cq2", preemption={"reclaimWithinCohort": "Never", "borrowWithinCohort": {"policy": "LowerPriority"}}
    )
    with pytest.raises(ApiException) as err:
        api.custom.create_cluster_custom_object(*KUEUE, "clusterqueues", cq)
    assert "spec.preemption" in _causes(err.value)
    cq = cluster_queue("cel-cq3")
    cq["spec"]["resourceGroups"][0]["coveredResources"].append("cpu")
    with pytest.raises(ApiException) as err:
        api.custom.create_cluster_custom_object(*KUEUE, "clusterqueues", cq)
    assert "flavors must have the same number of resources" in _causes(err.value)["spec.resourceGroups[0]"]


def test_transition_rule_localqueue_cluster_queue_is_immutable(api, ns):
    lq = local_queue_body("lq", "a")
    api.custom.create_namespaced_custom_object(*KUEUE, ns, "localqueues", lq)
    with pytest.raises(ApiException) as err:
        api.custom.patch_namespaced_custom_object(*KUEUE, ns, "localqueues", "lq", {"spec": {"clusterQueue": "b"}})
    assert err.value.status == 422 and "field is immutable" in _causes(err.value)["spec.clusterQueue"]


def test_workload_fields_stay_strict_while_its_pod_template_is_open(api, ns):
    wl = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "strict-wl"},
        "spec": {
            "queueName": "lq",
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {"spec": {"containers": [{"name": "c", "image": "busybox", "anyPodField": 1}]}},
                }
            ],
        },
    }
    made = api.custom.create_namespaced_custom_object(*KUEUE, ns, "workloads", wl, field_validation="Strict")
    assert made["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["anyPodField"] == 1
    wl["metadata"]["name"] = "strict-wl2"
    wl["spec"]["podSets"][0]["countt"] = 2
    with pytest.raises(ApiException) as err:
        api.custom.create_namespaced_custom_object(*KUEUE, ns, "workloads", wl, field_validation="Strict")
    assert err.value.status == 400 and 'unknown field "spec.podSets[0].countt"' in _status(err.value)["message"]


def test_invalid_names_are_422(api, ns):
    with pytest.raises(ApiException) as err:
        api.core.create_namespaced_pod(ns, pod_body("Bad_Name"))
    assert err.value.status == 422 and "metadata.name" in _causes(err.value)
    with pytest.raises(ApiException) as err:
        api.custom.create_cluster_custom_object(*KUEUE, "clusterqueues", cluster_queue("UPPER"))
    assert err.value.status == 422 and "metadata.name" in _causes(err.value)
    with pytest.raises(ApiException) as err:
        api.core.create_namespace({"metadata": {"name": "a.b"}})  # namespaces are RFC 1123 labels
    assert err.value.status == 422


def test_dry_run_validates_without_storing(api, ns):
    made = api.custom.create_cluster_custom_object(*KUEUE, "clusterqueues", cluster_queue("dry"), dry_run="All")
    assert made["spec"]["queueingStrategy"] == "BestEffortFIFO" and made["metadata"]["uid"]
    with pytest.raises(ApiException) as err:
        api.custom.get_cluster_custom_object(*KUEUE, "clusterqueues", "dry")
    assert err.value.status == 404
    bad = cluster_queue("dry-bad", queueingStrategy="Nope")
    with pytest.raises(ApiException) as err:
        api.custom.create_cluster_custom_object(*KUEUE, "clusterqueues", bad, dry_run="All")
    assert err.value.status == 422
    api.core.create_namespaced_pod(ns, pod_body("keep-me"))
    api.core.delete_namespaced_pod("keep-me", ns, dry_run="All")
    assert api.core.read_namespaced_pod("keep-me", ns).metadata.deletion_timestamp is None


def test_job_rules(api, ks, ns):
    body = job_body("always")
    body["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    with pytest.raises(ApiException) as err:
        api.batch.create_namespaced_job(ns, body)
    assert "spec.template.spec.restartPolicy" in _causes(err.value)
    api.batch.create_namespaced_job(ns, job_body("susp", suspend=True))
    api.batch.patch_namespaced_job("susp", ns, {"spec": {"template": {"spec": {"nodeSelector": {"a": "b"}}}}})
    api.batch.create_namespaced_job(ns, job_body("running"))
    with pytest.raises(ApiException) as err:
        api.batch.patch_namespaced_job("running", ns, {"spec": {"template": {"spec": {"nodeSelector": {"a": "b"}}}}})
    assert err.value.status == 422 and "spec.template" in _causes(err.value)


class _RecordingWebhook:
    """A stand-in for the Kueue half's webhooks: labels what it sees and refuses one name."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def mutate(self, resource, operation, obj, old, store):
        self.calls.append((resource, operation))
        obj.setdefault("metadata", {}).setdefault("labels", {})["mutated-by"] = "fake"
        return obj

    def webhook_name(self, resource):
        return "vfake.kb.io"

    def validate(self, resource, operation, obj, old, store):
        if obj["metadata"]["name"] == "refused":
            return [("spec.resourceGroups[0].flavors[0].resources[0].lendingLimit", "must be less than nominal")]
        if obj["metadata"]["name"] == "refused-twice":  # the aggregate prints a repeated error once
            return [("spec.cohortName", "Invalid value: 1: bad"), ("spec.stopPolicy", "Required value"),
                    ("spec.cohortName", "Invalid value: 1: bad")]
        return []


def _fake_kueue(hook: _RecordingWebhook) -> SimpleNamespace:
    class Config:
        @classmethod
        def default(cls):
            return cls()

        @classmethod
        def from_dict(cls, data):
            return cls()

    def visibility(store, *, cluster_queue=None, namespace=None, local_queue=None, limit=1000, offset=0):
        items = [{"metadata": {"name": f"wl-{i}"}, "positionInClusterQueue": i} for i in range(5)]
        return {
            "kind": "PendingWorkloadsSummary",
            "apiVersion": "visibility.kueue.x-k8s.io/v1beta2",
            "metadata": {},
            "items": items[offset : offset + limit],
        }

    def kueue(config):  # one simulator's Kueue half (kubesim.kernel.protocols.KueueHalf)
        return SimpleNamespace(controllers=lambda: [], admission_webhooks=lambda: [hook], visibility=visibility)

    return SimpleNamespace(KueueConfig=Config, Kueue=kueue)


def test_webhooks_are_called_per_contract_and_visibility_delegates():
    hook = _RecordingWebhook()
    with serve(kueue=_fake_kueue(hook)) as ks:
        api = ks.api_client()
        custom = client.CustomObjectsApi(api)
        made = custom.create_cluster_custom_object(*KUEUE, "clusterqueues", cluster_queue("hooked"))
        assert made["metadata"]["labels"] == {"mutated-by": "fake"}
        assert ("clusterqueues", "CREATE") in hook.calls
        custom.patch_cluster_custom_object(*KUEUE, "clusterqueues", "hooked", {"spec": {"stopPolicy": "Hold"}})
        assert ("clusterqueues", "UPDATE") in hook.calls
        custom.patch_cluster_custom_object_status(
            *KUEUE, "clusterqueues", "hooked", {"status": {"pendingWorkloads": 1}}
        )
        assert hook.calls[-1] == ("clusterqueues/status", "UPDATE")
        with pytest.raises(ApiException) as err:
            custom.create_cluster_custom_object(*KUEUE, "clusterqueues", cluster_queue("refused"))
        assert err.value.status == 403
        body = json.loads(err.value.body)
        assert body["reason"] == "Forbidden" and "details" not in body
        assert body["message"] == (
            'admission webhook "vfake.kb.io" denied the request: '
            "spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: must be less than nominal"
        )
        with pytest.raises(ApiException) as err:
            custom.create_cluster_custom_object(*KUEUE, "clusterqueues", cluster_queue("refused-twice"))
        assert err.value.status == 403
        assert json.loads(err.value.body)["message"] == (
            'admission webhook "vfake.kb.io" denied the request: '
            "[spec.cohortName: Invalid value: 1: bad, spec.stopPolicy: Required value]"
        )
        resp = api.rest_client.pool_manager.request(
            "GET",
            ks.url + "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/hooked/pendingworkloads?limit=2&offset=1",
        )
        data = json.loads(resp.data)
        assert [i["metadata"]["name"] for i in data["items"]] == ["wl-1", "wl-2"]
        api.close()
