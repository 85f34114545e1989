"""Server-side dry runs as kube-apiserver answers them, through kubectl (`--dry-run=server`) and the official client.

A dry run is admitted, defaulted, validated (webhooks included) and answered as if done, but nothing is stored: no
resourceVersion bump, no watch event, no controller reaction. kubectl sends `?dryRun=All` on creates, updates and
patches and `dryRun: [All]` in the DeleteOptions body on deletes; kube-apiserver reads a delete's options from its
body when it has one (the query is then ignored), else from the query. An unsupported value is a 422 naming the
options kind (apimachinery's ValidateDryRun).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from kubesim.testing import InProcessKubesim, serve
from tests.kubesim.conftest import raw
from tests.kubesim.test_kubectl import KUBECTL, MIN_MINOR, Kubectl, _kubectl_minor

KUEUE = ("kueue.x-k8s.io", "v1beta2")
NEEDS_KUBECTL = pytest.mark.skipif(
    _kubectl_minor() < MIN_MINOR, reason=f"kubectl 1.{MIN_MINOR} or newer is not on PATH (found: {KUBECTL or 'none'})"
)
QUEUES = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default-flavor}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: dry-cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default-flavor
      resources: [{name: cpu, nominalQuota: "4"}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: team, namespace: dry}
spec: {clusterQueue: dry-cq}
"""


def queued_job(name: str, suspend: bool = False) -> str:
    return f"""
apiVersion: batch/v1
kind: Job
metadata: {{name: {name}, namespace: dry, labels: {{kueue.x-k8s.io/queue-name: team}}}}
spec:
  suspend: {str(suspend).lower()}
  template:
    spec:
      restartPolicy: Never
      containers: [{{name: main, image: busybox, command: [sleep, "600"], resources: {{requests: {{cpu: "8"}}}}}}]
"""


@pytest.fixture(scope="module")
def ks() -> Iterator[InProcessKubesim]:
    with serve(clock="manual") as server:
        yield server


@pytest.fixture(scope="module")
def api(ks: InProcessKubesim) -> Iterator[SimpleNamespace]:
    api_client = ks.api_client()
    client.CoreV1Api(api_client).create_namespace({"metadata": {"name": "dry"}})
    yield SimpleNamespace(
        client=api_client,
        core=client.CoreV1Api(api_client),
        batch=client.BatchV1Api(api_client),
        apps=client.AppsV1Api(api_client),
        custom=client.CustomObjectsApi(api_client),
    )
    api_client.close()


@pytest.fixture(scope="module")
def kubectl(ks: InProcessKubesim, api: SimpleNamespace, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    run = Kubectl(ks.kubeconfig_path, tmp_path_factory.mktemp("kubectl-home"))
    if _kubectl_minor() >= MIN_MINOR:
        run("apply", "-f", "-", stdin=QUEUES)
    return run


def revision(api: SimpleNamespace) -> str:
    """The cluster's resourceVersion (a list answers the store's current one): every stored write moves it."""
    return api.core.list_namespaced_config_map("dry").metadata.resource_version


def config_map(name: str, **data: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "dry"}, "data": data}


def workload_of(api: SimpleNamespace, job: str) -> dict:
    uid = api.batch.read_namespaced_job(job, "dry").metadata.uid
    items = api.custom.list_namespaced_custom_object(
        *KUEUE, "dry", "workloads", label_selector=f"kueue.x-k8s.io/job-uid={uid}"
    )["items"]
    assert len(items) == 1, items
    return items[0]


def status_of(err: ApiException) -> dict:
    return json.loads(err.body)


# -- kubectl ---------------------------------------------------------------------------------------------------


@NEEDS_KUBECTL
def test_kubectl_delete_dry_run_keeps_a_config_map_a_pod_and_a_workload(kubectl: Kubectl, api: SimpleNamespace):
    api.core.create_namespaced_config_map("dry", config_map("keep", a="1"))
    api.core.create_namespaced_pod(
        "dry",
        {
            "metadata": {"name": "keep"},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]},
        },
    )
    kubectl("create", "-f", "-", stdin=queued_job("big"))
    workload = workload_of(api, "big")["metadata"]["name"]
    before = revision(api)

    for kind, name in (("configmap", "keep"), ("pod", "keep"), ("workload", workload)):
        done = kubectl("delete", kind, name, "-n", "dry", "--dry-run=server")
        assert done.stdout.strip().endswith(f'"{name}" deleted (server dry run)'), done.stdout

    assert api.core.read_namespaced_config_map("keep", "dry").data == {"a": "1"}
    assert api.core.read_namespaced_pod("keep", "dry").metadata.deletion_timestamp is None
    kept = api.custom.get_namespaced_custom_object(*KUEUE, "dry", "workloads", workload)
    assert "deletionTimestamp" not in kept["metadata"]
    assert revision(api) == before


@NEEDS_KUBECTL
def test_kubectl_delete_all_dry_run_deletes_nothing(kubectl: Kubectl, api: SimpleNamespace):
    for name in ("many-a", "many-b"):
        api.core.create_namespaced_config_map("dry", config_map(name))
    before = revision(api)
    done = kubectl("delete", "configmap", "--all", "-n", "dry", "--dry-run=server")
    assert 'configmap "many-a" deleted (server dry run)' in done.stdout
    names = {c.metadata.name for c in api.core.list_namespaced_config_map("dry").items}
    assert {"many-a", "many-b"} <= names
    assert revision(api) == before


@NEEDS_KUBECTL
def test_kubectl_create_and_apply_dry_runs_answer_as_the_write_would(
    kubectl: Kubectl, api: SimpleNamespace, tmp_path: Path
):
    live = api.core.create_namespaced_config_map("dry", config_map("applied", a="1"))
    before = revision(api)
    manifest = tmp_path / "cm.yaml"
    manifest.write_text(json.dumps(config_map("never", a="1")))
    created = json.loads(kubectl("create", "-f", str(manifest), "--dry-run=server", "-o", "json").stdout)
    assert created["metadata"]["uid"] and created["metadata"]["creationTimestamp"]
    assert "resourceVersion" not in created["metadata"]
    generated = kubectl("create", "configmap", "gen", "-n", "dry", "--from-literal=k=v", "--dry-run=server")
    assert generated.stdout.strip() == "configmap/gen created (server dry run)"
    # The Job webhook suspends the queued Job in the answer; no Workload, no pods follow.
    job = json.loads(kubectl("create", "-f", "-", "--dry-run=server", "-o", "json", stdin=queued_job("ghost")).stdout)
    assert job["spec"]["suspend"] is True
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team"

    changed = json.dumps(config_map("applied", a="2"))
    fresh = json.dumps(config_map("fresh", a="1"))
    assert kubectl("apply", "-f", "-", "--dry-run=server", stdin=changed).stdout.strip() == (
        "configmap/applied configured (server dry run)"
    )
    assert kubectl("apply", "-f", "-", "--dry-run=server", stdin=fresh).stdout.strip() == (
        "configmap/fresh created (server dry run)"
    )
    # The create's manager owns `data.a` (as kube-apiserver records a create): taking it over needs the force.
    answered = json.loads(kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", "--dry-run=server", "-o",
                                  "json", stdin=changed).stdout)
    assert answered["data"] == {"a": "2"}
    # Answered as the write would store it: the changed content moves the generation, not the resourceVersion.
    assert answered["metadata"]["generation"] == live.metadata.generation + 1
    assert answered["metadata"]["resourceVersion"] == live.metadata.resource_version
    assert kubectl("apply", "--server-side", "-f", "-", "--dry-run=server", stdin=fresh).stdout.strip() == (
        "configmap/fresh serverside-applied (server dry run)"
    )

    assert api.core.read_namespaced_config_map("applied", "dry").data == {"a": "1"}
    for read in (
        lambda: api.core.read_namespaced_config_map("never", "dry"),
        lambda: api.core.read_namespaced_config_map("gen", "dry"),
        lambda: api.core.read_namespaced_config_map("fresh", "dry"),
        lambda: api.batch.read_namespaced_job("ghost", "dry"),
    ):
        with pytest.raises(ApiException) as err:
            read()
        assert err.value.status == 404
    assert revision(api) == before


@NEEDS_KUBECTL
def test_kubectl_replace_patch_label_and_scale_dry_runs(kubectl: Kubectl, api: SimpleNamespace):
    live = api.core.create_namespaced_config_map("dry", config_map("replaced", a="1"))
    kubectl("create", "deployment", "web", "-n", "dry", "--image=nginx", "--replicas=2")
    kubectl("create", "-f", "-", stdin=queued_job("held", suspend=True))
    before = revision(api)

    replaced = json.loads(
        kubectl("replace", "-f", "-", "--dry-run=server", "-o", "json", stdin=json.dumps(config_map("replaced"))).stdout
    )
    assert not replaced.get("data")
    # The answer keeps what the store keeps: the object's uid and creation time.
    assert replaced["metadata"]["uid"] == live.metadata.uid
    assert replaced["metadata"]["creationTimestamp"] == live.metadata.creation_timestamp.strftime("%Y-%m-%dT%H:%M:%SZ")
    patched = kubectl("patch", "configmap", "replaced", "-n", "dry", "--dry-run=server", "-p", '{"data":{"a":"9"}}')
    assert patched.stdout.startswith("configmap/replaced patched")
    kubectl("label", "configmap", "replaced", "-n", "dry", "team=ml", "--dry-run=server")
    kubectl("scale", "deployment", "web", "-n", "dry", "--replicas=5", "--dry-run=server")
    # Unsuspending the Job in a dry run starts nothing.
    kubectl("patch", "job", "held", "-n", "dry", "--dry-run=server", "-p", '{"spec":{"suspend":false}}')

    cm = api.core.read_namespaced_config_map("replaced", "dry")
    assert (cm.data, cm.metadata.labels) == ({"a": "1"}, None)
    assert api.apps.read_namespaced_deployment("web", "dry").spec.replicas == 2
    assert api.batch.read_namespaced_job("held", "dry").spec.suspend is True
    assert not api.core.list_namespaced_pod("dry", label_selector="job-name=held").items
    assert revision(api) == before


# -- the official client ---------------------------------------------------------------------------------------


def test_delete_options_in_the_body_or_the_query(api: SimpleNamespace):
    for name in ("by-body", "by-query", "by-both"):
        api.core.create_namespaced_config_map("dry", config_map(name))
    before = revision(api)
    api.core.delete_namespaced_config_map("by-body", "dry", body=client.V1DeleteOptions(dry_run=["All"]))
    api.core.delete_namespaced_config_map("by-query", "dry", dry_run="All")
    assert api.core.read_namespaced_config_map("by-body", "dry")
    assert api.core.read_namespaced_config_map("by-query", "dry")
    assert revision(api) == before

    # kube-apiserver reads a delete's options from its body when it has one: the query's dryRun is then ignored.
    api.core.delete_namespaced_config_map(
        "by-both", "dry", dry_run="All", body=client.V1DeleteOptions(propagation_policy="Background")
    )
    with pytest.raises(ApiException) as err:
        api.core.read_namespaced_config_map("by-both", "dry")
    assert err.value.status == 404


def test_delete_collection_dry_run_lists_what_it_would_delete(api: SimpleNamespace):
    for name in ("coll-a", "coll-b"):
        api.core.create_namespaced_config_map(
            "dry", {**config_map(name), "metadata": {"name": name, "labels": {"set": "c"}}}
        )
    before = revision(api)
    code, answered = raw(api, "DELETE", "/api/v1/namespaces/dry/configmaps?labelSelector=set%3Dc&dryRun=All")
    assert code == 200
    assert sorted(c["metadata"]["name"] for c in answered["items"]) == ["coll-a", "coll-b"]
    api.core.delete_collection_namespaced_config_map(
        "dry", label_selector="set=c", body=client.V1DeleteOptions(dry_run=["All"])
    )
    assert len(api.core.list_namespaced_config_map("dry", label_selector="set=c").items) == 2
    assert revision(api) == before


def test_dry_run_delete_of_an_object_with_a_finalizer_answers_it_marked(api: SimpleNamespace):
    api.custom.create_cluster_custom_object(
        *KUEUE,
        "clusterqueues",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": "marked"},
            "spec": {"namespaceSelector": {}},
        },
    )
    before = revision(api)
    answered = api.custom.delete_cluster_custom_object(*KUEUE, "clusterqueues", "marked", dry_run="All")
    assert answered["metadata"]["deletionTimestamp"]
    assert answered["metadata"]["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]
    assert (
        answered["metadata"]["resourceVersion"]
        == api.custom.get_cluster_custom_object(*KUEUE, "clusterqueues", "marked")["metadata"]["resourceVersion"]
    )
    stored = api.custom.get_cluster_custom_object(*KUEUE, "clusterqueues", "marked")
    assert "deletionTimestamp" not in stored["metadata"]
    assert revision(api) == before


def test_dry_run_writes_are_answered_and_refused_as_the_writes_would_be(api: SimpleNamespace):
    api.core.create_namespaced_config_map("dry", config_map("base", a="1"))
    live = api.core.read_namespaced_config_map("base", "dry")
    before = revision(api)

    named = api.core.create_namespaced_config_map(
        "dry", {"metadata": {"generateName": "gen-"}, "data": {"x": "1"}}, dry_run="All"
    )
    assert named.metadata.name.startswith("gen-") and len(named.metadata.name) == len("gen-") + 5
    updated = api.core.replace_namespaced_config_map(
        "base",
        "dry",
        {**config_map("base", a="2"), "metadata": {"name": "base", "resourceVersion": live.metadata.resource_version}},
        dry_run="All",
    )
    assert updated.data == {"a": "2"} and updated.metadata.resource_version == live.metadata.resource_version
    # What the store would keep and change: the uid and creation time stay, the changed content moves the generation.
    assert (updated.metadata.uid, updated.metadata.creation_timestamp) == (
        live.metadata.uid,
        live.metadata.creation_timestamp,
    )
    assert updated.metadata.generation == live.metadata.generation + 1
    patched = api.core.patch_namespaced_config_map("base", "dry", {"data": {"b": "3"}}, dry_run="All")
    assert patched.data == {"a": "1", "b": "3"}
    applied = api.core.patch_namespaced_config_map(
        "base",
        "dry",
        config_map("base", c="4"),
        field_manager="tester",
        dry_run="All",
        _content_type="application/apply-patch+yaml",
    )
    assert applied.data == {"a": "1", "c": "4"}
    fresh = api.core.patch_namespaced_config_map(
        "fresh-apply",
        "dry",
        config_map("fresh-apply", c="4"),
        field_manager="tester",
        dry_run="All",
        _content_type="application/apply-patch+yaml",
    )
    assert fresh.metadata.uid and fresh.metadata.managed_fields[0].manager == "tester"
    assert api.core.read_namespaced_config_map("base", "dry").data == {"a": "1"}
    with pytest.raises(ApiException) as err:
        api.core.read_namespaced_config_map(named.metadata.name, "dry")
    assert err.value.status == 404
    assert revision(api) == before

    job = api.batch.create_namespaced_job(
        "dry",
        {
            "metadata": {"name": "dry-status"},
            "spec": {
                "suspend": True,
                "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "m", "image": "busybox"}]}},
            },
        },
    )
    status_before = api.batch.read_namespaced_job_status("dry-status", "dry").status
    before = revision(api)
    answered = api.batch.patch_namespaced_job_status("dry-status", "dry", {"status": {"failed": 7}}, dry_run="All")
    assert answered.status.failed == 7
    assert api.batch.read_namespaced_job_status("dry-status", "dry").status == status_before
    assert job.metadata.uid == answered.metadata.uid
    assert revision(api) == before

    # Refused as the write would be.
    api.core.create_namespaced_config_map("dry", config_map("taken", a="1"))
    with pytest.raises(ApiException) as err:
        api.core.create_namespaced_config_map("dry", config_map("taken"), dry_run="All")
    assert err.value.status == 409 and status_of(err.value)["reason"] == "AlreadyExists"
    stale = {**config_map("taken", a="2"), "metadata": {"name": "taken", "resourceVersion": "1"}}
    with pytest.raises(ApiException) as err:
        api.core.replace_namespaced_config_map("taken", "dry", stale, dry_run="All")
    assert err.value.status == 409 and status_of(err.value)["reason"] == "Conflict"
    # Kueue's validating webhook answers a dry run too.
    lonely = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Cohort",
        "metadata": {"name": "lonely"},
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [
                        {"name": "x86", "resources": [{"name": "cpu", "nominalQuota": "1", "lendingLimit": "1"}]}
                    ],
                }
            ]
        },
    }
    with pytest.raises(ApiException) as err:
        api.custom.create_cluster_custom_object(*KUEUE, "cohorts", lonely, dry_run="All")
    assert err.value.status == 403
    assert status_of(err.value)["message"].startswith('admission webhook "vcohort.kb.io" denied the request')


@pytest.mark.parametrize(
    ("verb", "kind"),
    [
        ("create", "CreateOptions"),
        ("replace", "UpdateOptions"),
        ("patch", "PatchOptions"),
        ("delete", "DeleteOptions"),
        ("delete_collection", "DeleteOptions"),
    ],
)
def test_an_unsupported_dry_run_value_is_invalid(api: SimpleNamespace, verb: str, kind: str):
    api.core.create_namespaced_config_map("dry", config_map(f"opt-{verb.replace('_', '-')}"))
    name = f"opt-{verb.replace('_', '-')}"
    calls = {
        "create": lambda: api.core.create_namespaced_config_map("dry", config_map("opt-new"), dry_run="Some"),
        "replace": lambda: api.core.replace_namespaced_config_map(name, "dry", config_map(name), dry_run="Some"),
        "patch": lambda: api.core.patch_namespaced_config_map(name, "dry", {"data": {}}, dry_run="Some"),
        "delete": lambda: api.core.delete_namespaced_config_map(name, "dry", dry_run="Some"),
        "delete_collection": lambda: api.core.delete_collection_namespaced_config_map("dry", dry_run="Some"),
    }
    with pytest.raises(ApiException) as err:
        calls[verb]()
    status = status_of(err.value)
    message = 'dryRun: Unsupported value: []string{"Some"}: supported values: "All"'
    assert (err.value.status, status["reason"]) == (422, "Invalid")
    assert status["message"] == f'{kind}.meta.k8s.io "" is invalid: {message}'
    assert status["details"] == {
        "group": "meta.k8s.io",
        "kind": kind,
        "causes": [
            {"reason": "FieldValueNotSupported", "message": message.removeprefix("dryRun: "), "field": "dryRun"}
        ],
    }
    assert api.core.read_namespaced_config_map(name, "dry")


def test_a_create_records_its_manager_as_kube_apiserver_does(api):
    """The creator owns every field it wrote (operation Update): kubectl names itself, the client by user agent."""
    created = api.core.create_namespaced_config_map("dry", config_map("owned", a="1"), field_manager="pipeline")
    entries = created.metadata.managed_fields
    assert [(e.manager, e.operation, e.api_version) for e in entries] == [("pipeline", "Update", "v1")]
    assert "f:a" in entries[0].fields_v1["f:data"]
    by_agent = api.core.create_namespaced_config_map("dry", config_map("agent", a="1"))
    assert by_agent.metadata.managed_fields[0].manager == "OpenAPI-Generator"


def test_a_delete_is_answered_as_its_registry_answers_it(api: SimpleNamespace):
    """A Pod's registry answers with the deleted Pod (ReturnDeletedObject), a ConfigMap's or a custom resource's with a
    Success Status naming it (kind = the plural), a dry run as the delete would be."""
    for name in ("answer-dry", "answer"):
        api.core.create_namespaced_config_map("dry", config_map(name))
    cm_uid = api.core.read_namespaced_config_map("answer-dry", "dry").metadata.uid
    code, answered = raw(api, "DELETE", "/api/v1/namespaces/dry/configmaps/answer-dry?dryRun=All")
    assert code == 200
    assert answered == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {"name": "answer-dry", "kind": "configmaps", "uid": cm_uid},
    }
    assert api.core.read_namespaced_config_map("answer-dry", "dry")
    code, answered = raw(api, "DELETE", "/api/v1/namespaces/dry/configmaps/answer")
    assert (code, answered["kind"], answered["details"]["name"]) == (200, "Status", "answer")

    api.core.create_namespaced_pod(
        "dry", {"metadata": {"name": "answer"}, "spec": {"containers": [{"name": "main", "image": "busybox"}]}}
    )
    for query in ("?dryRun=All", ""):
        deleted = api.core.delete_namespaced_pod("answer", "dry", dry_run="All" if query else None)
        assert isinstance(deleted, client.V1Pod) and deleted.metadata.name == "answer"

    priority = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass",
                "metadata": {"name": "answered"}, "value": 10}
    api.custom.create_cluster_custom_object(*KUEUE, "workloadpriorityclasses", priority)
    uid = api.custom.get_cluster_custom_object(*KUEUE, "workloadpriorityclasses", "answered")["metadata"]["uid"]
    answered = api.custom.delete_cluster_custom_object(*KUEUE, "workloadpriorityclasses", "answered", dry_run="All")
    assert answered["details"] == {
        "name": "answered", "group": "kueue.x-k8s.io", "kind": "workloadpriorityclasses", "uid": uid
    }


@NEEDS_KUBECTL
def test_kubectl_every_patch_type_and_the_status_subresource_dry_run(kubectl: Kubectl, api: SimpleNamespace):
    api.core.create_namespaced_config_map("dry", config_map("typed", a="1"))
    kubectl("create", "-f", "-", stdin=queued_job("typed-job", suspend=True))
    before = revision(api)
    for kind, patch in (
        ("json", '[{"op": "replace", "path": "/data/a", "value": "2"}]'),
        ("merge", '{"data": {"a": "3"}}'),
        ("strategic", '{"data": {"a": "4"}}'),
    ):
        answered = json.loads(kubectl("patch", "configmap", "typed", "-n", "dry", f"--type={kind}", "-p", patch,
                                      "--dry-run=server", "-o", "json").stdout)
        assert answered["data"]["a"] != "1"
    status = kubectl("patch", "job", "typed-job", "-n", "dry", "--subresource=status", "--type=merge", "-p",
                     '{"status": {"failed": 3}}', "--dry-run=server", "-o", "json").stdout
    assert json.loads(status)["status"]["failed"] == 3
    assert api.core.read_namespaced_config_map("typed", "dry").data == {"a": "1"}
    assert not api.batch.read_namespaced_job_status("typed-job", "dry").status.failed
    assert revision(api) == before
