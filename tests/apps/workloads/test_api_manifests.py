"""Manifests through the API: one that passes is recorded like any submission (row, history, outbox intent, audit,
once per key); every malformed or hostile one is a 400 naming the field path, with nothing recorded."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from django.utils import timezone

from apps.cluster import services as mirror
from apps.core.models import AuditEvent, Intent
from apps.workloads.models import Kind, Origin, Status, Workload
from tests.api_support import call
from tests.worker.manifest_kinds import CASES

GPU = "nvidia.com/gpu"


def container(gpus: int = 1, **extra: Any) -> dict[str, Any]:
    return {"name": "main", "image": "pytorch/pytorch:2.4.0", "command": ["sleep", "60"],
            "resources": {"requests": {"cpu": "1", "memory": "1Gi", GPU: gpus}, "limits": {GPU: gpus}}, **extra}


def job(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "my-job"},
            "spec": {"parallelism": 2, "completions": 2, "template": {"spec": {
                "restartPolicy": "Never", "containers": [container()]}}, **spec}}


def jobset() -> dict[str, Any]:
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "my-jobset"},
            "spec": {"replicatedJobs": [{"name": "workers", "replicas": 2, "template": {"spec": {
                "parallelism": 1, "completions": 1, "template": {"spec": {
                    "restartPolicy": "Never", "containers": [container()]}}}}}]}}


def body(manifest: Any, **extra: Any) -> dict[str, Any]:
    text = manifest if isinstance(manifest, str) else yaml.safe_dump(manifest)
    return {"project": "vision", "kind": "manifest", "manifest": text, "node_pool": "h100",
            "labels": {"model": "resnet", "data_class": "public"}, **extra}


def nothing_recorded() -> None:
    assert not Workload.objects.exists()
    assert not Intent.objects.filter(kind="workload.submit").exists()
    assert not AuditEvent.objects.filter(action="workload.submit").exists()


def test_a_jobset_manifest_is_recorded_like_any_submission(client_for):
    response = call(client_for("alice"), "POST", "workloads/", body(jobset(), preemptible=False),
                    HTTP_IDEMPOTENCY_KEY="k-1")
    assert response.status_code == 201, response.content
    workload = Workload.objects.get()
    assert (workload.kind, workload.origin, workload.name) == (Kind.JOBSET, Origin.PORTAL, "my-jobset")
    assert workload.status == Status.SUBMITTING and workload.gpu_units == 2 and workload.pod_count == 2
    assert workload.owner.username == "alice" and not workload.preemptible
    manifest = workload.manifest
    assert manifest["metadata"]["name"] == workload.job_name == f"wl-{workload.pk}"
    assert manifest["metadata"]["namespace"] == "proj-vision" and manifest["spec"]["suspend"] is True
    labels = manifest["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == "guaranteed-h100"
    assert labels["kueue.x-k8s.io/priority-class"] == workload.priority_class.name
    assert labels["portal.gpu/workload-id"] == str(workload.pk) and labels["portal.gpu/project"] == "vision"
    assert labels["portal.gpu/owner-id"] == str(workload.owner_id)
    pod_labels = manifest["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"]["labels"]
    assert pod_labels["portal.gpu/workload-id"] == str(workload.pk)
    assert Intent.objects.filter(target_id=workload.pk, kind="workload.submit").count() == 1
    audit = AuditEvent.objects.get(action="workload.submit")
    assert audit.after["manifest"] is True and audit.after["kind"] == "jobset"
    again = call(client_for("alice"), "POST", "workloads/", body(jobset(), preemptible=False),
                 HTTP_IDEMPOTENCY_KEY="k-1")
    assert again.status_code == 201 and again["Idempotent-Replayed"] == "true"
    assert Workload.objects.count() == 1 and Intent.objects.filter(kind="workload.submit").count() == 1


def test_json_text_and_a_json_object_are_taken_too(client_for):
    first = call(client_for("alice"), "POST", "workloads/", body(json.dumps(job())))
    assert first.status_code == 201, first.content
    second = call(client_for("alice"), "POST", "workloads/", {**body(job()), "manifest": job()})
    assert second.status_code == 201, second.content
    assert Workload.objects.filter(kind=Kind.JOB).count() == 2


def test_every_refusal_comes_at_once(client_for):
    manifest = job()
    manifest["metadata"]["namespace"] = "proj-nlp"
    pod = manifest["spec"]["template"]["spec"]
    pod["hostNetwork"] = True
    pod["containers"][0]["securityContext"] = {"privileged": True}
    pod["containers"][0]["env"] = [{"name": "RANK", "value": "0"}]
    response = call(client_for("alice"), "POST", "workloads/", body(manifest))
    assert response.status_code == 400
    messages = response.json()["manifest"]
    for path in ("metadata.namespace", "spec.template.spec.hostNetwork",
                 "spec.template.spec.containers[0].securityContext.privileged",
                 "spec.template.spec.containers[0].env[0].name"):
        assert any(message.startswith(path) for message in messages), (path, messages)
    nothing_recorded()


def _parts(path: str) -> list[str]:
    """A dotted path; the GPU resource name is one part."""
    return [part.replace("GPU", GPU) for part in path.replace(GPU, "GPU").split(".")]


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """A change to the base manifest: set the dotted path (list indexes as numbers) to value."""

    def change(obj: dict[str, Any]) -> None:
        parts = _parts(path)
        node: Any = obj
        for part in parts[:-1]:
            node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
        last = parts[-1]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value

    return change


def _drop(path: str) -> Callable[[dict[str, Any]], None]:
    def change(obj: dict[str, Any]) -> None:
        parts = _parts(path)
        node: Any = obj
        for part in parts[:-1]:
            node = node[int(part)] if isinstance(node, list) else node[part]
        del node[parts[-1]]

    return change


POD = "spec.template.spec"
C0 = f"{POD}.containers.0"
JS_POD = "spec.replicatedJobs.0.template.spec.template.spec"
BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: [*b, *b, *b, *b, *b]\n"

# (id, base, change or text, the path the message names)
HOSTILE: list[tuple[str, Callable[[], dict[str, Any]], Any, str]] = [
    # parsing
    ("two-documents", job, yaml.safe_dump(job()) + "---\n" + yaml.safe_dump(job()), "manifest"),
    ("document-then-empty", job, yaml.safe_dump(job()) + "---\n", "manifest"),
    ("alias-bomb", job, BOMB, "manifest"),
    ("anchor-alone", job, "apiVersion: &v batch/v1\nkind: Job\n", "manifest"),
    ("merge-key", job, "base: &b {x: 1}\nother:\n  <<: *b\n", "manifest"),
    ("two-mib", job, "a: " + "x" * (2 * 1024 * 1024), "manifest"),
    ("just-over-limit", job, "a: " + "x" * (1024 * 1024), "manifest"),
    ("deep-nesting", job, "[" * 5000 + "]" * 5000, "manifest"),
    ("deep-mapping", job, "".join(f"{' ' * i}k:\n" for i in range(200)), "manifest"),
    ("not-yaml", job, "kind: Job\n  bad: [", "manifest"),
    ("a-list", job, "- 1\n- 2\n", "manifest"),
    ("a-scalar", job, "hello", "manifest"),
    ("empty", job, "   ", "manifest"),
    ("nul", job, "kind: Job\x00", "manifest"),
    ("duplicate-key", job, "kind: Job\nkind: Pod\n", "manifest"),
    ("binary", job, "apiVersion: batch/v1\nkind: Job\nx: !!binary aGVsbG8=\n", "x"),
    ("python-object", job, "kind: !!python/object:os.system {}\n", "manifest"),
    ("non-string-key", job, "1: a\nkind: Job\n", "manifest"),
    ("nan", job, "apiVersion: batch/v1\nkind: Job\nx: .nan\n", "x"),
    # kinds and versions
    ("unknown-kind", job, _set("kind", "Deployment"), "kind"),
    ("no-kind", job, _drop("kind"), "kind"),
    ("kind-not-a-string", job, _set("kind", 3), "kind"),
    ("wrong-api-version", job, _set("apiVersion", "batch/v2"), "apiVersion"),
    ("jobset-old-version", jobset, _set("apiVersion", "jobset.x-k8s.io/v1alpha1"), "apiVersion"),
    ("no-api-version", job, _drop("apiVersion"), "apiVersion"),
    # metadata
    ("other-namespace", job, _set("metadata.namespace", "proj-nlp"), "metadata.namespace"),
    ("kube-system", jobset, _set("metadata.namespace", "kube-system"), "metadata.namespace"),
    ("no-name", job, _drop("metadata.name"), "metadata.name"),
    ("bad-name", job, _set("metadata.name", "Not_A_Label"), "metadata.name"),
    ("long-name", job, _set("metadata.name", "a" * 41), "metadata.name"),
    ("generate-name", job, _set("metadata.generateName", "x-"), "metadata.generateName"),
    ("owner-references", job, _set("metadata.ownerReferences", []), "metadata.ownerReferences"),
    ("finalizers", job, _set("metadata.finalizers", ["x"]), "metadata.finalizers"),
    ("queue-label", job, _set("metadata.labels", {"kueue.x-k8s.io/queue-name": "guaranteed-h100"}),
     "metadata.labels.kueue.x-k8s.io/queue-name"),
    ("portal-label", job, _set("metadata.labels", {"portal.gpu/project": "nlp"}), "metadata.labels.portal.gpu/project"),
    ("managed-by", job, _set("metadata.labels", {"app.kubernetes.io/managed-by": "x"}), "metadata.labels"),
    ("owner-annotation", job, _set("metadata.annotations", {"portal.gpu/owner": "bob"}), "metadata.annotations"),
    ("label-number", job, _set("metadata.labels", {"a": 1}), "metadata.labels"),
    ("huge-annotations", job, _set("metadata.annotations", {"a": "x" * (300 * 1024)}), "metadata.annotations"),
    ("status", job, _set("status", {"active": 1}), "status"),
    ("metadata-unknown", job, _set("metadata.colour", "red"), "metadata.colour"),
    ("template-namespace", job, _set(f"{POD.rsplit('.', 1)[0]}.metadata", {"namespace": "proj-nlp"}),
     "spec.template.metadata.namespace"),
    ("template-queue-label", jobset, _set("spec.replicatedJobs.0.template.spec.template.metadata",
                                          {"labels": {"kueue.x-k8s.io/podset": "x"}}),
     "spec.replicatedJobs[0].template.spec.template.metadata.labels"),
    # schema (strict)
    ("unknown-spec-field", job, _set("spec.colour", "red"), "spec.colour"),
    ("unknown-container-field", job, _set(f"{C0}.colour", "red"), "spec.template.spec.containers[0].colour"),
    ("wrong-type", job, _set("spec.parallelism", "two"), "spec.parallelism"),
    ("jobset-unknown", jobset, _set("spec.replicatedJobs.0.colour", "red"), "spec.replicatedJobs[0].colour"),
    ("jobset-deep-unknown", jobset, _set(f"{JS_POD}.containers.0.colour", "red"),
     "spec.replicatedJobs[0].template.spec.template.spec.containers[0].colour"),
    ("jobset-wrong-type", jobset, _set("spec.replicatedJobs.0.replicas", "two"), "spec.replicatedJobs[0].replicas"),
    ("top-level-unknown", jobset, _set("extra", 1), "extra"),
    # pods
    ("no-containers", job, _set(f"{POD}.containers", []), "spec.template.spec.containers"),
    ("containers-missing", job, _drop(f"{POD}.containers"), "spec.template.spec.containers"),
    ("jobset-no-jobs", jobset, _set("spec.replicatedJobs", []), "spec.replicatedJobs"),
    ("no-image", job, _drop(f"{C0}.image"), "spec.template.spec.containers[0].image"),
    ("gpu-limit-only", job, _drop(f"{C0}.resources.requests.{GPU}"),
     f"spec.template.spec.containers[0].resources.requests.{GPU}"),
    ("gpu-request-only", job, _drop(f"{C0}.resources.limits"), "spec.template.spec.containers[0].resources.limits"),
    ("gpu-request-differs", job, _set(f"{C0}.resources.limits", {GPU: 2}),
     f"spec.template.spec.containers[0].resources.requests.{GPU}"),
    ("fractional-gpu", job, _set(f"{C0}.resources", {"requests": {GPU: "500m"}, "limits": {GPU: "500m"}}),
     "spec.template.spec.containers[0].resources.requests"),
    ("other-gpu-resource", job, _set(f"{C0}.resources", {"requests": {"amd.com/gpu": 1}, "limits": {"amd.com/gpu": 1}}),
     "spec.template.spec.containers[0].resources.limits.amd.com/gpu"),
    ("no-gpus", job, _set(f"{C0}.resources", {"requests": {"cpu": "1"}}), "manifest"),
    ("cpu-zero", job, _set(f"{C0}.resources.requests.cpu", "0"),
     "spec.template.spec.containers[0].resources.requests.cpu"),
    ("cpu-negative", job, _set(f"{C0}.resources.requests.cpu", "-1"),
     "spec.template.spec.containers[0].resources.requests.cpu"),
    ("memory-zero", job, _set(f"{C0}.resources.requests.memory", 0),
     "spec.template.spec.containers[0].resources.requests.memory"),
    ("memory-negative", job, _set(f"{C0}.resources.requests.memory", "-1Gi"),
     "spec.template.spec.containers[0].resources.requests.memory"),
    ("memory-limit-zero", job, _set(f"{C0}.resources.limits.memory", "0Mi"),
     "spec.template.spec.containers[0].resources.limits.memory"),
    ("cpu-garbage", job, _set(f"{C0}.resources.requests.cpu", "lots"),
     "spec.template.spec.containers[0].resources.requests.cpu"),
    ("init-cpu-zero", job, _set(f"{POD}.initContainers", [{"name": "i", "image": "busybox",
                                                           "resources": {"requests": {"cpu": "0"}}}]),
     "spec.template.spec.initContainers[0].resources.requests.cpu"),
    ("jobset-gpu-limit-only", jobset, _drop(f"{JS_POD}.containers.0.resources.requests.{GPU}"),
     "spec.replicatedJobs[0].template.spec.template.spec.containers[0].resources.requests"),
    # env names of the portal's own
    *[(f"env-{name}", job, _set(f"{C0}.env", [{"name": name, "value": "x"}]),
       "spec.template.spec.containers[0].env[0].name")
      for name in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "NODE_RANK", "JUPYTER_TOKEN",
                   "PORTAL_WORKLOAD_ID")],
    ("jobset-env", jobset, _set(f"{JS_POD}.containers.0.env", [{"name": "RANK", "value": "1"}]),
     "spec.replicatedJobs[0].template.spec.template.spec.containers[0].env[0].name"),
    # quota
    ("over-limit", job, lambda obj: obj["spec"].update(parallelism=9, completions=9), "manifest"),  # > limit 8
    ("too-many-pods", job, lambda obj: obj["spec"].update(parallelism=600, completions=600), "manifest"),
    # size
    ("object-over-api-limit", job, _set(f"{C0}.args", ["\U0001F600" * 150_000]), "manifest"),
    # service account and secrets
    ("service-account", job, _set(f"{POD}.serviceAccountName", "admin"), "spec.template.spec.serviceAccountName"),
    ("other-credential", job, _set(f"{C0}.envFrom", [{"secretRef": {"name": "portal-cred-99999"}}]),
     "spec.template.spec.containers[0].envFrom[0].secretRef.name"),
    ("notebook-token", job, _set(f"{POD}.volumes", [{"name": "t", "secret": {"secretName": "wl-7-token"}}]),
     "spec.template.spec.volumes[0].secret.secretName"),
    ("cross-namespace-ref", jobset, _set("spec.network", {"namespace": "kube-system"}), "spec.network"),
    # text no UTF-8 or JSON column takes, written as YAML escapes in a text that holds no such character
    ("nul-escape", job, 'apiVersion: batch/v1\nkind: Job\nmetadata: {name: a, annotations: {x: "a\\0b"}}\n',
     "metadata.annotations.x"),
    ("nul-escape-in-json", job, json.dumps({**job(), "metadata": {"name": "a", "labels": {"x": "\x00"}}}),
     "metadata.labels.x"),
    ("surrogate-escape", job, 'apiVersion: batch/v1\nkind: Job\nmetadata: {name: a, labels: {x: "\\ud800"}}\n',
     "metadata.labels.x"),
    ("nul-in-key", job, 'apiVersion: batch/v1\nkind: Job\n"a\\0": 1\n', "manifest"),
    # more documents, bombs and sizes
    ("explicit-documents", job, "---\n" + yaml.safe_dump(job()) + "---\n" + yaml.safe_dump(jobset()), "manifest"),
    ("billion-laughs", job, 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8)), "manifest"),
    ("two-mib-json", job, json.dumps({**job(), "x": "y" * (2 * 1024 * 1024)}), "manifest"),
    # kinds the portal does not submit, however they are spelt
    ("deployment", job, yaml.safe_dump({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                                        "spec": {}}), "kind"),
    ("namespace-object", job, "apiVersion: v1\nkind: Namespace\nmetadata: {name: mine}\n", "kind"),
    ("secret-object", job, "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {a: b}\n", "kind"),
    ("cluster-role-binding", job, "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\n"
                                  "metadata: {name: me}\nroleRef: {kind: ClusterRole, name: cluster-admin}\n", "kind"),
    ("kueue-workload", job, "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Workload\nmetadata: {name: w}\n", "kind"),
    ("lowercase-kind", job, _set("kind", "job"), "kind"),
    # kinds the portal submits, at a version it does not
    ("rayjob-old-version", lambda: CASES[Kind.RAYJOB].build(60), _set("apiVersion", "ray.io/v1alpha1"), "apiVersion"),
    ("lws-old-version", lambda: CASES[Kind.LEADERWORKERSET].build(60),
     _set("apiVersion", "leaderworkerset.x-k8s.io/v1alpha1"), "apiVersion"),
    ("trainjob-kubeflow-group", lambda: CASES[Kind.TRAINJOB].build(60), _set("apiVersion", "kubeflow.org/v1"),
     "apiVersion"),
    ("pod-batch-version", lambda: CASES[Kind.POD].build(60), _set("apiVersion", "batch/v1"), "apiVersion"),
    # other kinds' pods: containers, GPU requests, CPU and memory, env names
    ("pod-no-containers", lambda: CASES[Kind.POD].build(60), _set("spec.containers", []), "spec.containers"),
    ("lws-worker-no-containers", lambda: CASES[Kind.LEADERWORKERSET].build(60),
     _set("spec.leaderWorkerTemplate.workerTemplate.spec.containers", []),
     "spec.leaderWorkerTemplate.workerTemplate.spec.containers"),
    ("raycluster-no-head", lambda: CASES[Kind.RAYCLUSTER].build(60), _drop("spec.headGroupSpec"),
     "spec.headGroupSpec"),
    ("pytorchjob-no-replicas", lambda: CASES[Kind.PYTORCHJOB].build(60), _set("spec.pytorchReplicaSpecs", {}),
     "spec.pytorchReplicaSpecs"),
    ("pod-gpu-limit-only", lambda: CASES[Kind.POD].build(60), _drop(f"spec.containers.0.resources.requests.{GPU}"),
     f"spec.containers[0].resources.requests.{GPU}"),
    ("trainjob-gpu-limit-only", lambda: CASES[Kind.TRAINJOB].build(60),
     _drop(f"spec.trainer.resourcesPerNode.requests.{GPU}"),
     f"spec.trainer.containers[0].resources.requests.{GPU}"),
    ("ray-worker-gpu-limit-only", lambda: CASES[Kind.RAYCLUSTER].build(60),
     _drop(f"spec.workerGroupSpecs.0.template.spec.containers.0.resources.requests.{GPU}"),
     f"spec.workerGroupSpecs[0].template.spec.containers[0].resources.requests.{GPU}"),
    ("pod-cpu-limit-negative", lambda: CASES[Kind.POD].build(60), _set("spec.containers.0.resources.limits.cpu", "-2"),
     "spec.containers[0].resources.limits.cpu"),
    ("trainjob-memory-zero", lambda: CASES[Kind.TRAINJOB].build(60),
     _set("spec.trainer.resourcesPerNode.requests.memory", "0"), "resources.requests.memory"),
    ("lws-cpu-zero", lambda: CASES[Kind.LEADERWORKERSET].build(60),
     _set("spec.leaderWorkerTemplate.leaderTemplate.spec.containers.0.resources.requests.cpu", "0m"),
     "spec.leaderWorkerTemplate.leaderTemplate.spec.containers[0].resources.requests.cpu"),
    ("trainjob-env-master-addr", lambda: CASES[Kind.TRAINJOB].build(60),
     _set("spec.trainer.env", [{"name": "MASTER_ADDR", "value": "evil"}]), "env[0].name"),
    ("pytorchjob-env-world-size", lambda: CASES[Kind.PYTORCHJOB].build(60),
     _set("spec.pytorchReplicaSpecs.Worker.template.spec.containers.0.env", [{"name": "WORLD_SIZE", "value": "1"}]),
     "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].env[0].name"),
    ("rayjob-env-jupyter-token", lambda: CASES[Kind.RAYJOB].build(60),
     _set("spec.rayClusterSpec.headGroupSpec.template.spec.containers.0.env", [{"name": "JUPYTER_TOKEN",
                                                                                "value": "x"}]),
     "spec.rayClusterSpec.headGroupSpec.template.spec.containers[0].env[0].name"),
    ("init-container-env-rank", job, _set(f"{POD}.initContainers", [{"name": "i", "image": "busybox", "env": [
        {"name": "RANK", "value": "0"}]}]), "spec.template.spec.initContainers[0].env[0].name"),
    ("env-portal-prefix", job, _set(f"{C0}.env", [{"name": "PORTAL_OWNER", "value": "bob"}]),
     "spec.template.spec.containers[0].env[0].name"),
    # a value of the wrong type or size where the checks look (a 400 from the schema check, never a 500)
    ("init-containers-a-number", job, _set(f"{POD}.initContainers", 5), "spec.template.spec.initContainers"),
    ("volumes-a-number", job, _set(f"{POD}.volumes", 3), "spec.template.spec.volumes"),
    ("env-a-number", job, _set(f"{C0}.env", 5), "spec.template.spec.containers[0].env"),
    ("capabilities-add-a-list-of-lists", job, _set(f"{C0}.securityContext", {"capabilities": {"add": [["SYS_ADMIN"]]}}),
     "spec.template.spec.containers[0].securityContext.capabilities.add[0]"),
    ("selinux-type-a-list", job, _set(f"{POD}.securityContext", {"seLinuxOptions": {"type": ["spc_t"]}}),
     "spec.template.spec.securityContext.seLinuxOptions.type"),
    ("cpu-1e999", job, _set(f"{C0}.resources.requests.cpu", "1e999"),
     "spec.template.spec.containers[0].resources.requests.cpu"),
    ("memory-1e308", lambda: CASES[Kind.RAYCLUSTER].build(60),
     _set("spec.headGroupSpec.template.spec.containers.0.resources.requests.memory", 1e308),
     "spec.headGroupSpec.template.spec.containers[0].resources.requests.memory"),
    # over what an API server stores, though the text is under the portal's limit
    ("annotations-over-api-limit", lambda: CASES[Kind.RAYCLUSTER].build(60),
     _set("metadata.annotations", {f"a{i}": "x" * 60_000 for i in range(5)}), "metadata.annotations"),
]


@pytest.mark.parametrize(("base", "change", "path"), [case[1:] for case in HOSTILE], ids=[case[0] for case in HOSTILE])
def test_a_hostile_manifest_is_a_400_naming_the_path_and_records_nothing(client_for, base, change, path):
    if isinstance(change, str):
        text: Any = change
    else:
        manifest = copy.deepcopy(base())
        change(manifest)
        text = yaml.safe_dump(manifest, allow_unicode=True)
    response = call(client_for("alice"), "POST", "workloads/", body(text), HTTP_IDEMPOTENCY_KEY="hostile")
    assert response.status_code == 400, response.content
    errors = response.json()
    messages = [message for value in errors.values() for message in (value if isinstance(value, list) else
                                                                      [str(value)])]
    assert any(path in message or name == path for name in errors for message in
               (errors[name] if isinstance(errors[name], list) else [str(errors[name])])), (path, errors)
    assert messages
    nothing_recorded()


def test_a_kind_the_cluster_does_not_serve_is_refused(client_for):
    mirror.watcher_served_kinds(kinds=["job", "pod"], at=timezone.now())
    response = call(client_for("alice"), "POST", "workloads/", body(jobset()))
    assert response.status_code == 400
    assert any(m.startswith("kind: this cluster does not serve JobSet") for m in response.json()["manifest"])
    nothing_recorded()
    assert call(client_for("alice"), "POST", "workloads/", body(job())).status_code == 201


SERVED_ELSEWHERE = [kind for kind in CASES if kind not in (Kind.JOB, Kind.POD)]


@pytest.mark.parametrize("kind", SERVED_ELSEWHERE)
def test_each_kind_the_cluster_does_not_serve_is_refused(client_for, kind):
    mirror.watcher_served_kinds(kinds=["job", "pod"], at=timezone.now())
    response = call(client_for("alice"), "POST", "workloads/", body(CASES[kind].build(60)))
    assert response.status_code == 400, response.content
    assert any(m.startswith("kind: this cluster does not serve") for m in response.json()["manifest"])
    nothing_recorded()


@pytest.mark.parametrize("kind", list(CASES))
def test_each_kind_as_written_for_the_cluster_is_recorded(client_for, kind):
    """What a user writes for the cluster passes as it is: fields the API server defaults may be left out (a Ray
    worker group's minReplicas and maxReplicas are required by the CRD and defaulted by it)."""
    manifest = CASES[kind].build(60)
    response = call(client_for("alice"), "POST", "workloads/", body(manifest))
    assert response.status_code == 201, response.content
    workload = Workload.objects.get()
    assert workload.kind == kind and workload.gpu_units == CASES[kind].units


def test_non_preemptible_work_must_fit_the_deserved_quota(client_for):
    manifest = job(parallelism=3, completions=3)
    manifest["spec"]["template"]["spec"]["containers"][0] = container(gpus=2)  # 6 units > vision's 4 deserved
    response = call(client_for("alice"), "POST", "workloads/", body(manifest, preemptible=False))
    assert response.status_code == 400
    assert "deserved quota" in " ".join(response.json()["preemptible"])
    nothing_recorded()


def test_a_pool_the_project_has_no_quota_on_is_refused(client_for, demo):
    from apps.org.models import NodePool, Quota

    pool = NodePool.objects.get(slug="l40s-shared")
    Quota.objects.filter(node_pool=pool, project__slug="vision").delete()
    response = call(client_for("alice"), "POST", "workloads/", body(job(), node_pool="l40s-shared"))
    assert response.status_code == 400 and "node_pool" in response.json()
    nothing_recorded()


def test_a_project_the_user_may_not_submit_to_is_403(client_for):
    response = call(client_for("alice"), "POST", "workloads/", body(job(), project="forecasting"))
    assert response.status_code in (400, 403)
    nothing_recorded()


def test_unknown_request_fields_are_refused(client_for):
    response = call(client_for("alice"), "POST", "workloads/", {**body(job()), "gpus": 2})
    assert response.status_code == 400 and response.json()["gpus"] == ["Unknown field."]
    nothing_recorded()


# --- dry run --------------------------------------------------------------------------------------------------------


def test_a_dry_run_answers_what_would_be_submitted_and_records_nothing(client_for):
    response = call(client_for("alice"), "POST", "workloads/?dry_run=true", body(jobset(), preemptible=False),
                    HTTP_IDEMPOTENCY_KEY="k-dry")
    assert response.status_code == 200, response.content
    assert response.json() == {
        "dry_run": True, "kind": "jobset", "api_version": "jobset.x-k8s.io/v1alpha2", "name": "my-jobset",
        "project": "vision", "node_pool": "h100", "queue": "guaranteed-h100", "priority_class": "build",
        "preemptible": False, "gpu_units": 2, "gpu_fraction": None, "pods": 2, "image": "pytorch/pytorch:2.4.0"}
    nothing_recorded()
    # The key was not used up: the real submission with it records the workload.
    real = call(client_for("alice"), "POST", "workloads/", body(jobset(), preemptible=False),
                HTTP_IDEMPOTENCY_KEY="k-dry")
    assert real.status_code == 201 and "Idempotent-Replayed" not in real
    assert Workload.objects.count() == 1


def test_a_dry_run_refuses_as_the_submission_would(client_for):
    manifest = job()
    manifest["spec"]["template"]["spec"]["hostNetwork"] = True
    manifest["metadata"]["namespace"] = "proj-nlp"
    dry = call(client_for("alice"), "POST", "workloads/?dry_run=true", body(manifest))
    real = call(client_for("alice"), "POST", "workloads/", body(manifest))
    assert dry.status_code == real.status_code == 400
    assert dry.json() == real.json() and len(dry.json()["manifest"]) >= 2
    forbidden = call(client_for("alice"), "POST", "workloads/?dry_run=true", body(job(), project="nlp"))
    assert forbidden.status_code in (400, 403)  # as without dry_run: bob's project is not alice's to see
    nothing_recorded()


def test_a_dry_run_of_a_form_kind_answers_its_draft_too(client_for):
    submission = {"project": "vision", "kind": "training", "name": "run", "image": "pytorch/pytorch:2.4.0",
                  "node_pool": "h100", "gpus": 2, "pods": 2, "labels": {"model": "resnet", "data_class": "public"}}
    response = call(client_for("alice"), "POST", "workloads/?dry_run=1", submission)
    assert response.status_code == 200, response.content
    answer = response.json()
    assert (answer["kind"], answer["gpu_units"], answer["pods"], answer["api_version"]) == ("training", 4, 2, "")
    refused = call(client_for("alice"), "POST", "workloads/?dry_run=true", {**submission, "gpus": 9})
    assert refused.status_code == 400 and "gpus" in refused.json()
    nothing_recorded()


@pytest.mark.parametrize("value", ["yes", "All", "", "TRUE1"])
def test_dry_run_takes_true_or_false_only(client_for, value):
    response = call(client_for("alice"), "POST", f"workloads/?dry_run={value}", body(job()))
    assert response.status_code == 400 and response.json() == {"dry_run": ["Use true or false."]}
    nothing_recorded()


def test_dry_run_false_submits(client_for):
    assert call(client_for("alice"), "POST", "workloads/?dry_run=false", body(job())).status_code == 201
    assert Workload.objects.count() == 1


def test_a_manifest_submission_submitted_again_records_where_it_came_from(client_for):
    alice = client_for("alice")
    first = call(alice, "POST", "workloads/", body(jobset(), preemptible=False, max_runtime_seconds=3600))
    assert first.status_code == 201, first.content
    source = Workload.objects.get()
    # The resubmit action repeats the manifest as given, how it ran, and records the source.
    again = call(alice, "POST", f"workloads/{source.pk}/resubmit/", {"preemptible": True})
    assert again.status_code == 201, again.content
    second = Workload.objects.exclude(pk=source.pk).get()
    assert (second.kind, second.name, second.pod_sets, second.max_runtime_seconds, second.preemptible) == (
        Kind.JOBSET, "my-jobset", source.pod_sets, 3600, True)
    assert second.resubmitted_from == source and again.json()["resubmitted_from"] == source.pk
    assert AuditEvent.objects.get(action="workload.resubmit").after["resubmitted_from_id"] == source.pk
    # A manifest body names its source too, a workload the caller sees only.
    named = call(alice, "POST", "workloads/", body(jobset(), resubmitted_from=source.pk))
    assert named.status_code == 201 and Workload.objects.get(pk=named.json()["id"]).resubmitted_from == source
    carols = call(client_for("carol"), "POST", "workloads/", body(jobset(), project="forecasting",
                                                                     resubmitted_from=source.pk))
    assert carols.status_code == 400 and "resubmitted_from" in carols.json()
