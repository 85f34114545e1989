"""kubectl's everyday commands, with default flags, against a served kubesim (with the Kueue half).

Skipped, saying why, where kubectl 1.28+ is absent (Debian's `kubernetes-client` is older; the machines have
kubectl 1.32 at /usr/bin/kubectl). Each test asserts what kubectl prints
and, where it wrote, what the cluster holds through the official client.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from kubesim.testing import InProcessKubesim, KubesimProcess, serve

KUBECTL = shutil.which("kubectl")
MIN_MINOR = 28  # `events --for` and `auth whoami` (GA) need kubectl 1.28 or newer


def _kubectl_minor() -> int:
    if KUBECTL is None:
        return 0
    done = subprocess.run([KUBECTL, "version", "--client", "-o", "json"], capture_output=True, text=True, check=False)
    try:
        return int(json.loads(done.stdout)["clientVersion"]["minor"].rstrip("+"))
    except (ValueError, KeyError):
        return 0


pytestmark = pytest.mark.skipif(
    _kubectl_minor() < MIN_MINOR,
    reason=f"kubectl 1.{MIN_MINOR} or newer is not on PATH (found: {KUBECTL or 'none'}) - kubectl tests skipped",
)

KUEUE_SETUP = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default-flavor}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default-flavor
      resources: [{name: cpu, nominalQuota: "2"}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: team, namespace: default}
spec: {clusterQueue: team-cq}
"""


def queued_job(name: str) -> str:
    return f"""
apiVersion: batch/v1
kind: Job
metadata: {{name: {name}, namespace: default, labels: {{kueue.x-k8s.io/queue-name: team}}}}
spec:
  suspend: true
  template:
    spec:
      restartPolicy: Never
      containers: [{{name: main, image: busybox, command: [sleep, "600"], resources: {{requests: {{cpu: "1"}}}}}}]
"""


class Kubectl:
    """Runs kubectl against one kubesim with a private cache dir (discovery and OpenAPI are cached per host)."""

    def __init__(self, kubeconfig: str, home: Path) -> None:
        self.env = {**os.environ, "KUBECONFIG": kubeconfig, "HOME": str(home), "KUBECACHEDIR": str(home / "cache")}

    def __call__(
        self, *args: str, stdin: str | None = None, ok: bool = True, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        assert KUBECTL is not None
        done = subprocess.run(
            [KUBECTL, *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
            env={**self.env, **(env or {})},
            check=False,
        )
        if ok:
            assert done.returncode == 0, f"kubectl {' '.join(args)} failed: {done.stderr}"
        else:
            assert done.returncode != 0, f"kubectl {' '.join(args)} should have failed: {done.stdout}"
        return done


@pytest.fixture(scope="module")
def ks() -> Iterator[InProcessKubesim]:
    with serve(clock="manual") as server:
        yield server


@pytest.fixture(scope="module")
def kubectl(ks: InProcessKubesim, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(ks.kubeconfig_path, tmp_path_factory.mktemp("kubectl-home"))


@pytest.fixture(scope="module")
def core(ks: InProcessKubesim) -> Iterator[client.CoreV1Api]:
    api_client = ks.api_client()
    yield client.CoreV1Api(api_client)
    api_client.close()


def _get(url: str) -> tuple[str, str]:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return resp.headers.get("Content-Type", ""), resp.read().decode()


def test_apply_create_and_edit_with_default_validation(kubectl: Kubectl, core: client.CoreV1Api, tmp_path: Path):
    manifest = tmp_path / "cm.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: default}\ndata: {a: '1'}\n"
    )
    assert kubectl("apply", "-f", str(manifest)).stdout.strip() == "configmap/settings created"
    assert kubectl("apply", "-f", str(manifest)).stdout.strip() == "configmap/settings unchanged"
    manifest.write_text(manifest.read_text().replace("'1'", "'2'"))
    assert kubectl("apply", "-f", str(manifest)).stdout.strip() == "configmap/settings configured"
    assert core.read_namespaced_config_map("settings", "default").data == {"a": "2"}

    refused = kubectl("create", "-f", str(manifest), ok=False)
    assert 'configmaps "settings" already exists' in refused.stderr

    editor = tmp_path / "editor.sh"
    editor.write_text('#!/bin/sh\nsed -i \'s/a: "2"/a: "3"/\' "$1"\n')
    editor.chmod(0o755)
    edited = kubectl("edit", "configmap", "settings", env={"KUBE_EDITOR": str(editor)})
    assert edited.stdout.strip() == "configmap/settings edited"
    assert core.read_namespaced_config_map("settings", "default").data == {"a": "3"}


def test_create_from_file_is_validated_by_the_server(kubectl: Kubectl, tmp_path: Path):
    manifest = tmp_path / "bad.yaml"
    manifest.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bad, namespace: default}\ndatta: {}\n")
    refused = kubectl("create", "-f", str(manifest), ok=False)
    assert 'unknown field "datta"' in refused.stderr
    assert kubectl("create", "-f", str(manifest), "--validate=false").stdout.strip() == "configmap/bad created"


def test_explain_built_in_and_kueue_kinds(kubectl: Kubectl):
    pods = kubectl("explain", "pods.spec.containers").stdout
    assert "KIND:       Pod" in pods
    assert "VERSION:    v1" in pods
    assert "image\t<string>" in pods
    queues = kubectl("explain", "clusterqueues.spec").stdout
    assert "GROUP:      kueue.x-k8s.io" in queues
    assert "KIND:       ClusterQueue" in queues
    assert "resourceGroups\t<[]Object>" in queues


TEMPLATE_FINALIZERS = """
apiVersion: batch/v1
kind: Job
metadata: {name: held, namespace: held}
spec:
  template:
    metadata:
      creationTimestamp: null
      labels: {app: held-job}
      finalizers: [example.com/hold]
    spec:
      restartPolicy: Never
      containers: [{name: main, image: busybox, command: [sleep, "600"]}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: held, namespace: held}
spec:
  replicas: 2
  selector: {matchLabels: {app: held-web}}
  template:
    metadata:
      creationTimestamp: null
      labels: {app: held-web}
      finalizers: [example.com/hold]
    spec:
      containers: [{name: main, image: nginx}]
"""


def test_pod_templates_take_a_whole_object_meta_and_pass_their_finalizers_on(
    kubectl: Kubectl, core: client.CoreV1Api, tmp_path: Path
):
    """A PodTemplateSpec's metadata is an ObjectMeta (Kubernetes' OpenAPI, as the official client models it): every
    field of it is known to the template schemas, and kubectl's default (Strict) validation lets a Job and a Deployment
    with template finalizers and `creationTimestamp: null` through; their pods carry the finalizers, so a deleted one
    stays terminating until they are lifted."""
    from kubesim.apiserver.registry import coreschemas, workloadschemas

    object_meta = set(client.V1ObjectMeta.attribute_map.values())
    for template in (coreschemas.POD_TEMPLATE, workloadschemas.POD_TEMPLATE):
        assert object_meta <= set(template["properties"]["metadata"]["properties"])

    kubectl("create", "namespace", "held")
    manifest = tmp_path / "held.yaml"
    manifest.write_text(TEMPLATE_FINALIZERS)
    assert kubectl("apply", "-f", str(manifest)).stdout.split("\n")[:2] == [
        "job.batch/held created", "deployment.apps/held created"]
    for app, count in (("held-job", 1), ("held-web", 2)):
        pods = core.list_namespaced_pod("held", label_selector=f"app={app}").items
        assert len(pods) == count and all(pod.metadata.finalizers == ["example.com/hold"] for pod in pods)

    kubectl("delete", "deployment", "held", "-n", "held", "--wait=false")
    kubectl("delete", "job", "held", "-n", "held", "--wait=false")
    pods = core.list_namespaced_pod("held").items
    assert len(pods) == 3 and all(pod.metadata.deletion_timestamp for pod in pods)  # held by their finalizer
    for pod in pods:
        core.patch_namespaced_pod(pod.metadata.name, "held", {"metadata": {"finalizers": None}})
    assert core.list_namespaced_pod("held").items == []


def test_server_side_apply_conflicts_and_force(kubectl: Kubectl, core: client.CoreV1Api, tmp_path: Path):
    manifest = tmp_path / "ssa.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: shared, namespace: default}\ndata: {a: '1', b: '2'}\n"
    )
    applied = kubectl("apply", "--server-side", "-f", str(manifest))
    assert applied.stdout.strip() == "configmap/shared serverside-applied"
    other = tmp_path / "other.yaml"
    other.write_text(manifest.read_text().replace("a: '1'", "a: '9'"))

    refused = kubectl("apply", "--server-side", "--field-manager=ops", "-f", str(other), ok=False)
    assert 'Apply failed with 1 conflict: conflict with "kubectl": .data.a' in refused.stderr
    assert core.read_namespaced_config_map("shared", "default").data == {"a": "1", "b": "2"}

    forced = kubectl("apply", "--server-side", "--field-manager=ops", "--force-conflicts", "-f", str(other))
    assert forced.stdout.strip() == "configmap/shared serverside-applied"
    live = core.read_namespaced_config_map("shared", "default")
    assert live.data == {"a": "9", "b": "2"}
    owners = {m.manager: json.dumps(m.fields_v1, sort_keys=True) for m in live.metadata.managed_fields}
    assert '"f:a"' not in owners["kubectl"] and '"f:b"' in owners["kubectl"]
    assert '"f:a"' in owners["ops"]

    # kubectl drops b from its configuration: ops still applies b, so it stays.
    manifest.write_text(manifest.read_text().replace(", b: '2'", ""))
    kubectl("apply", "--server-side", "--force-conflicts", "-f", str(manifest))
    assert core.read_namespaced_config_map("shared", "default").data == {"a": "1", "b": "2"}


def test_generator_commands_send_protobuf(kubectl: Kubectl, core: client.CoreV1Api, ks: InProcessKubesim):
    assert kubectl("create", "namespace", "gen").stdout.strip() == "namespace/gen created"
    assert kubectl("create", "configmap", "cfg", "-n", "gen", "--from-literal=k=v").stdout.strip() == (
        "configmap/cfg created"
    )
    assert kubectl("create", "secret", "generic", "pw", "-n", "gen", "--from-literal=p=s3cret").stdout.strip() == (
        "secret/pw created"
    )
    assert kubectl("create", "serviceaccount", "bot", "-n", "gen").stdout.strip() == "serviceaccount/bot created"
    created = kubectl("create", "job", "once", "-n", "gen", "--image=busybox", "--", "sleep", "5")
    assert created.stdout.strip() == "job.batch/once created"
    deployed = kubectl("create", "deployment", "web", "-n", "gen", "--image=nginx", "--replicas=2")
    assert deployed.stdout.strip() == "deployment.apps/web created"

    assert core.read_namespaced_config_map("cfg", "gen").data == {"k": "v"}
    assert core.read_namespaced_secret("pw", "gen").data == {"p": "czNjcmV0"}
    api_client = ks.api_client()
    job = client.BatchV1Api(api_client).read_namespaced_job("once", "gen")
    container = job.spec.template.spec.containers[0]
    assert (container.name, container.image, container.command) == ("once", "busybox", ["sleep", "5"])
    assert job.spec.template.spec.restart_policy == "Never"
    assert client.AppsV1Api(api_client).read_namespaced_deployment("web", "gen").spec.replicas == 2
    assert (
        kubectl("scale", "deployment", "web", "-n", "gen", "--replicas=4").stdout.strip()
        == "deployment.apps/web scaled"
    )
    assert client.AppsV1Api(api_client).read_namespaced_deployment("web", "gen").spec.replicas == 4
    api_client.close()


def test_auth_can_i_and_whoami(kubectl: Kubectl):
    assert kubectl("auth", "can-i", "create", "pods").stdout.strip() == "yes"
    listed = kubectl("auth", "can-i", "--list").stdout.splitlines()
    assert listed[0].split() == ["Resources", "Non-Resource", "URLs", "Resource", "Names", "Verbs"]
    assert listed[1].split() == ["*.*", "[]", "[]", "[*]"]
    whoami = kubectl("auth", "whoami").stdout
    assert "kubesim-admin" in whoami
    assert "system:masters" in whoami


def test_events_for_an_object(kubectl: Kubectl, ks: InProcessKubesim):
    kubectl("create", "namespace", "ev")
    kubectl("create", "job", "traced", "-n", "ev", "--image=busybox", "--", "sleep", "1")
    events = kubectl("events", "-n", "ev", "--for", "job/traced").stdout
    assert "SuccessfulCreate" in events
    assert "Job/traced" in events
    assert "Pod/" not in events


def test_kueue_is_installed_and_queues_work(kubectl: Kubectl, ks: InProcessKubesim):
    crds = kubectl("get", "crd").stdout
    for plural in ("clusterqueues", "localqueues", "workloads", "resourceflavors"):
        assert f"{plural}.kueue.x-k8s.io" in crds
    assert "kueue-controller-manager" in kubectl("get", "deploy", "-n", "kueue-system").stdout

    kubectl("apply", "-f", "-", stdin=KUEUE_SETUP)
    for name in ("first", "second", "third"):
        kubectl("create", "-f", "-", stdin=queued_job(name))
    queues = kubectl("get", "clusterqueues").stdout.splitlines()
    assert queues[0].split() == ["NAME", "COHORT", "PENDING", "WORKLOADS"]
    assert queues[1].split() == ["team-cq", "1"]
    workloads = kubectl("get", "workloads", "-n", "default", "--no-headers").stdout.splitlines()
    assert len(workloads) == 3
    assert sorted(line.split()[2:4] for line in workloads if "team-cq" in line) == [["team-cq", "True"]] * 2

    content_type, metrics = _get(f"{ks.url}/metrics")
    assert content_type.startswith("text/plain")
    assert 'kueue_admitted_workloads_total{cluster_queue="team-cq",replica_role="standalone"} 2' in metrics
    assert ('kueue_pending_workloads{cluster_queue="team-cq",status="inadmissible"'
            ',replica_role="standalone"} 1') in metrics
    assert 'kueue_reserving_active_workloads{cluster_queue="team-cq",replica_role="standalone"} 2' in metrics
    assert "# TYPE kueue_evicted_workloads_total counter" in metrics


def test_openapi_documents(ks: InProcessKubesim):
    _, index = _get(f"{ks.url}/openapi/v3")
    paths = json.loads(index)["paths"]
    assert {"api/v1", "apis/batch/v1", "apis/kueue.x-k8s.io/v1beta2"} <= set(paths)
    _, core_doc = _get(ks.url + paths["api/v1"]["serverRelativeURL"])
    schema = json.loads(core_doc)["components"]["schemas"]["io.k8s.api.core.v1.ConfigMap"]
    assert schema["x-kubernetes-group-version-kind"] == [{"group": "", "version": "v1", "kind": "ConfigMap"}]
    patch = json.loads(core_doc)["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"]["patch"]
    assert "fieldValidation" in [p["name"] for p in patch["parameters"]]
    assert "application/apply-patch+yaml" in patch["requestBody"]["content"]

    _, v2 = _get(f"{ks.url}/openapi/v2")
    swagger = json.loads(v2)
    assert swagger["swagger"] == "2.0"
    assert "io.x-k8s.kueue.v1beta2.ClusterQueue" in swagger["definitions"]


def test_cli_help_version_and_start_line(tmp_path: Path):
    version = subprocess.run(
        [sys.executable, "-m", "kubesim", "--version"], capture_output=True, text=True, check=True, timeout=60
    )
    assert version.stdout.startswith("kubesim ") and "Kueue v0." in version.stdout
    help_text = subprocess.run(
        [sys.executable, "-m", "kubesim", "serve", "--help"], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert "(default: 8001)" in help_text
    assert "(default: 5000)" in help_text
    assert "/kubesim/v1/clock/advance" in help_text

    with KubesimProcess(str(tmp_path)) as proc:
        assert proc.proc is not None and proc.proc.stdout is not None
        second = proc.proc.stdout.readline()
        assert "over plain HTTP" in second
        assert f"kubeconfig: {tmp_path / 'kubeconfig'}" in second
        assert Kubectl(proc.kubeconfig_path, tmp_path)("get", "ns", "kueue-system", "-o", "name").stdout.strip() == (
            "namespace/kueue-system"
        )


def test_persistent_volume_claims_and_tokens(kubectl: Kubectl):
    claim = (
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: scratch, namespace: default}\n"
        "spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 10Gi}}, storageClassName: fast}\n"
    )
    assert kubectl("apply", "-f", "-", stdin=claim).stdout.strip() == "persistentvolumeclaim/scratch created"
    header, row = kubectl("get", "pvc", "scratch").stdout.splitlines()
    assert header.split()[:6] == ["NAME", "STATUS", "VOLUME", "CAPACITY", "ACCESS", "MODES"]
    # unbound: no volume, capacity or access modes yet (those come from the bound volume), as kube prints it
    assert row.split() == ["scratch", "Pending", "fast", "<unset>", "0s"]

    kubectl("create", "serviceaccount", "runner")
    assert len(kubectl("create", "token", "runner").stdout.strip()) > 20


def test_kueue_v1beta1_is_served_with_a_deprecation_warning(kubectl: Kubectl):
    legacy = (
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: legacy-cq}\n"
        "spec: {cohort: research, namespaceSelector: {}, resourceGroups: [{coveredResources: [cpu], "
        "flavors: [{name: default-flavor, resources: [{name: cpu, nominalQuota: '1'}]}]}]}\n"
    )
    applied = kubectl("apply", "-f", "-", stdin=legacy)
    assert applied.stdout.strip() == "clusterqueue.kueue.x-k8s.io/legacy-cq created"
    assert "Warning: This version is deprecated. Use v1beta2 instead." in applied.stderr
    path = "{.apiVersion} {.spec.cohort}"
    old = kubectl("get", "clusterqueues.v1beta1.kueue.x-k8s.io", "legacy-cq", "-o", f"jsonpath={path}")
    assert old.stdout == "kueue.x-k8s.io/v1beta1 research"
    new = kubectl("get", "clusterqueues.v1beta2.kueue.x-k8s.io", "legacy-cq", "-o", "jsonpath={.spec.cohortName}")
    assert new.stdout == "research"
    assert "kueue.x-k8s.io/v1beta1" in kubectl("api-versions").stdout.split()


JOBSET_SETUP = """
apiVersion: v1
kind: Namespace
metadata: {name: js}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: js-flavor}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: js-cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: js-flavor
      resources: [{name: cpu, nominalQuota: "2"}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: team, namespace: js}
spec: {clusterQueue: js-cq}
"""


def jobset_manifest(name: str, cpu: str, extra: str = "") -> str:
    return f"""
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {{name: {name}, namespace: js, labels: {{kueue.x-k8s.io/queue-name: team}}}}
spec:
  replicatedJobs:
  - name: workers
    replicas: 2
    template:
      spec:
        parallelism: 1
        completions: 1
        template:
          spec:
            restartPolicy: Never
            containers:
            - {{name: main, image: busybox, command: [sleep, "60"], resources: {{requests: {{cpu: "{cpu}"}}}}{extra}}}
"""


def test_jobsets_get_and_describe(kubectl: Kubectl, ks: InProcessKubesim):
    assert "jobsets.jobset.x-k8s.io" in kubectl("get", "crd").stdout
    kubectl("apply", "-f", "-", stdin=JOBSET_SETUP)
    kubectl("apply", "-f", "-", stdin=jobset_manifest("fits", "500m"))
    kubectl("apply", "-f", "-", stdin=jobset_manifest("waits", "2"))  # 4 CPUs: more than the queue's 2
    lines = kubectl("get", "jobsets", "-n", "js").stdout.splitlines()
    assert lines[0].split() == ["NAME", "TERMINALSTATE", "RESTARTS", "COMPLETED", "SUSPENDED", "AGE"]
    assert lines[1].split() == ["fits", "0", "false", "0s"]
    assert lines[2].split() == ["waits", "0", "true", "0s"]
    ks.advance(60)
    assert kubectl("get", "jobset", "fits", "-n", "js", "--no-headers").stdout.split() == [
        "fits",
        "Completed",
        "0",
        "True",
        "false",
        "60s",
    ]
    described = kubectl("describe", "jobset", "waits", "-n", "js").stdout
    for line in (
        "Name:         waits",
        "API Version:  jobset.x-k8s.io/v1alpha2",
        "Kind:         JobSet",
        "Labels:       kueue.x-k8s.io/queue-name=team",
        "Replicated Jobs Status:",
    ):
        assert line in described, described
    assert re.search(r"\n  Suspend: +true\n", described) and re.search(r"\n    Suspended: +2\n", described)
    assert re.search(r"Normal +CreatedWorkload .* kueue-admission +Created Workload: js/jobset-waits-", described)
    assert re.search(r"Normal +SuspendedJobs .* jobset-controller +jobset is suspended", described)
    assert "jobset-waits-" in kubectl("get", "workloads", "-n", "js").stdout
    assert "jobset-controller-manager" in kubectl("get", "deploy", "-n", "jobset-system").stdout


def test_jobset_unknown_fields_are_refused_by_kubectl_default_validation(kubectl: Kubectl):
    kubectl("apply", "-f", "-", stdin=JOBSET_SETUP)
    done = kubectl("apply", "-f", "-", stdin=jobset_manifest("typo", "1", ", bogus: 1"), ok=False)
    assert 'unknown field "spec.replicatedJobs[0].template.spec.template.spec.containers[0].bogus"' in done.stderr


def test_get_pods_shows_scheduling_gated(kubectl: Kubectl, ks: InProcessKubesim):
    manifest = """
apiVersion: v1
kind: Pod
metadata: {name: gated, namespace: default}
spec:
  schedulingGates: [{name: example.com/hold}]
  containers: [{name: main, image: busybox, command: [sleep, "600"]}]
"""
    kubectl("apply", "-f", "-", stdin=manifest)
    ks.settle()
    assert kubectl("get", "pod", "gated", "--no-headers").stdout.split()[:3] == ["gated", "0/1", "SchedulingGated"]
    kubectl("patch", "pod", "gated", "--type=json", "-p", '[{"op": "remove", "path": "/spec/schedulingGates"}]')
    ks.settle()
    assert kubectl("get", "pod", "gated", "--no-headers").stdout.split()[:3] == ["gated", "1/1", "Running"]
    kubectl("delete", "pod", "gated", "--wait=false")


LWS_MANIFEST = """
apiVersion: v1
kind: Namespace
metadata: {name: serving}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: serving-cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default-flavor
      resources: [{name: cpu, nominalQuota: "2"}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: serving, namespace: serving}
spec: {clusterQueue: serving-cq}
---
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: serve, namespace: serving, labels: {kueue.x-k8s.io/queue-name: serving}}
spec:
  replicas: 1
  leaderWorkerTemplate:
    size: 2
    workerTemplate:
      spec:
        containers: [{name: main, image: vllm, command: [sleep, "3600"], resources: {requests: {cpu: "1"}}}]
"""


def test_leaderworkersets_get_scale_and_describe(kubectl: Kubectl, ks: InProcessKubesim):
    kubectl("apply", "-f", "-", stdin=KUEUE_SETUP)  # the flavor
    kubectl("apply", "-f", "-", stdin=LWS_MANIFEST)
    ks.advance(1)
    lines = kubectl("get", "lws", "-n", "serving").stdout.splitlines()
    assert lines[0].split() == ["NAME", "READY", "DESIRED", "UP-TO-DATE", "AGE"]
    assert lines[1].split() == ["serve", "1", "1", "1", "1s"]
    assert kubectl("get", "leaderworkersets", "-n", "serving", "--no-headers").stdout.split()[:2] == ["serve", "1"]
    pods = kubectl(
        "get", "pods", "-l", "leaderworkerset.sigs.k8s.io/name=serve", "-n", "serving", "--no-headers"
    ).stdout
    assert [line.split()[:3] for line in pods.splitlines()] == [
        ["serve-0", "1/1", "Running"],
        ["serve-0-1", "1/1", "Running"],
    ]
    kubectl(
        "scale", "lws", "serve", "-n", "serving", "--replicas=2"
    )  # 2 more CPUs than the queue's 2: the new group waits
    ks.settle()
    waiting = kubectl("get", "pod", "serve-1", "-n", "serving", "--no-headers").stdout.split()
    assert waiting[:3] == ["serve-1", "0/1", "SchedulingGated"]
    assert kubectl("get", "lws", "serve", "-n", "serving", "--no-headers").stdout.split()[1:3] == ["1", "2"]
    described = kubectl("describe", "lws", "serve", "-n", "serving").stdout
    for line in (
        "Name:         serve",
        "API Version:  leaderworkerset.x-k8s.io/v1",
        "Kind:         LeaderWorkerSet",
        "Hpa Pod Selector:",
    ):
        assert line in described, described
    assert re.search(
        r"Normal +CreatedWorkload .* kueue-admission +Created Workload: serving/leaderworkerset-serve-0-", described
    )
    assert "lws-controller-manager" in kubectl("get", "deploy", "-n", "lws-system").stdout
    kubectl("delete", "lws", "serve", "-n", "serving")


KUBEFLOW_SETUP = JOBSET_SETUP.replace("js", "kf")


def trainjob_manifest(name: str, cpu: str, extra: str = "") -> str:
    return f"""
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {{name: {name}, namespace: kf, labels: {{kueue.x-k8s.io/queue-name: team}}}}
spec:
  runtimeRef: {{name: torch-distributed}}
  trainer: {{numNodes: 2, command: [sleep, "30"], resourcesPerNode: {{requests: {{cpu: "{cpu}"}}}}{extra}}}
"""


def pytorchjob_manifest(name: str, cpu: str) -> str:
    replica = (
        f'{{replicas: 1, restartPolicy: Never, template: {{spec: {{containers: [{{name: pytorch, image: busybox, '
        f'command: [sleep, "30"], resources: {{requests: {{cpu: "{cpu}"}}}}}}]}}}}}}'
    )
    return f"""
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {{name: {name}, namespace: kf, labels: {{kueue.x-k8s.io/queue-name: team}}}}
spec:
  pytorchReplicaSpecs:
    Master: {replica}
    Worker: {replica}
"""


def test_trainjobs_and_pytorchjobs_get_and_describe(kubectl: Kubectl, ks: InProcessKubesim):
    crds = kubectl("get", "crd").stdout
    for crd in ("trainjobs.trainer.kubeflow.org", "clustertrainingruntimes.trainer.kubeflow.org",
                "trainingruntimes.trainer.kubeflow.org", "pytorchjobs.kubeflow.org"):
        assert crd in crds
    runtimes = kubectl("get", "clustertrainingruntimes").stdout.splitlines()
    assert runtimes[0].split() == ["NAME", "AGE"] and runtimes[1].split()[0] == "torch-distributed"
    kubectl("apply", "-f", "-", stdin=KUBEFLOW_SETUP)
    kubectl("apply", "-f", "-", stdin=trainjob_manifest("fits", "500m"))
    kubectl("apply", "-f", "-", stdin=pytorchjob_manifest("waits", "1"))  # 2 CPUs: more than the 1 left
    lines = kubectl("get", "trainjobs,pytorchjobs", "-n", "kf").stdout.splitlines()
    assert [line.split() for line in lines if line] == [
        ["NAME", "STATE", "AGE"],
        ["trainjob.trainer.kubeflow.org/fits", "Suspended", "0s"],  # the last condition: Suspended, now False
        ["NAME", "STATE", "AGE"],
        ["pytorchjob.kubeflow.org/waits", "Suspended", "0s"],
    ]
    ks.advance(40)
    assert kubectl("get", "trainjob", "fits", "-n", "kf", "--no-headers").stdout.split() == ["fits", "Complete", "40s"]
    assert kubectl("get", "pytorchjob", "waits", "-n", "kf", "--no-headers").stdout.split()[1] == "Running"
    described = kubectl("describe", "trainjob", "fits", "-n", "kf").stdout
    for line in (
        "Name:         fits",
        "API Version:  trainer.kubeflow.org/v1alpha1",
        "Kind:         TrainJob",
        "Jobs Status:",
        "Runtime Patches:",
    ):
        assert line in described, described
    assert re.search(r"Normal +CreatedWorkload .* kueue-admission +Created Workload: kf/trainjob-fits-", described)
    assert re.search(r"Normal +FinishedWorkload .* kueue-admission +Workload 'kf/trainjob-fits-", described)
    described = kubectl("describe", "pytorchjob", "waits", "-n", "kf").stdout
    assert "Replica Statuses:" in described and "Kind:         PyTorchJob" in described
    assert re.search(r"Normal +SuccessfulCreatePod .* pytorchjob-controller +Created pod: waits-master-0", described)
    workloads = kubectl("get", "workloads", "-n", "kf").stdout
    assert "trainjob-fits-" in workloads and "pytorchjob-waits-" in workloads
    assert "kubeflow-trainer-controller-manager" in kubectl("get", "deploy", "-n", "kubeflow-system").stdout
    assert "training-operator" in kubectl("get", "deploy", "-n", "kubeflow").stdout


def test_trainjob_unknown_fields_are_refused_by_kubectl_default_validation(kubectl: Kubectl):
    kubectl("apply", "-f", "-", stdin=KUBEFLOW_SETUP)
    done = kubectl("apply", "-f", "-", stdin=trainjob_manifest("typo", "1", ", bogus: 1"), ok=False)
    assert 'unknown field "spec.trainer.bogus"' in done.stderr


# ---- everyday invocations: what kubectl prints against kube-apiserver, column for column ----------------------------

DAILY = """
apiVersion: v1
kind: Namespace
metadata: {name: daily}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: daily}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: nginx, image: nginx:1.27}]}
---
apiVersion: batch/v1
kind: Job
metadata: {name: once, namespace: daily}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: main, image: busybox, command: [sleep, "600"]}]
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: daily}
spec: {selector: {app: web}, ports: [{port: 80}]}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: daily}
data: {a: "1", b: "2"}
---
apiVersion: v1
kind: Secret
metadata: {name: pw, namespace: daily}
stringData: {password: s3cret}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: viewer, namespace: daily}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: viewer-view, namespace: daily}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}
subjects: [{kind: ServiceAccount, name: viewer, namespace: daily}, {kind: Group, name: auditors}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: reader, namespace: daily}
rules: [{apiGroups: [""], resources: [pods], verbs: [get]}]
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: scratch, namespace: daily}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 10Gi}}, storageClassName: fast}
---
apiVersion: v1
kind: Pod
metadata: {name: nb, namespace: daily, labels: {app: nb}}
spec:
  containers:
  - name: notebook
    image: quay.io/jupyter/base-notebook
    env: [{name: JUPYTER_TOKEN, value: t0ken}]
    ports: [{containerPort: 8888}]
---
apiVersion: v1
kind: Service
metadata: {name: nb, namespace: daily}
spec: {selector: {app: nb}, ports: [{port: 8888}]}
"""

_AGE = r"\d+[smhdy]\S*"


@pytest.fixture(scope="module")
def daily(kubectl: Kubectl, ks: InProcessKubesim) -> Kubectl:
    kubectl("apply", "-f", "-", stdin=KUEUE_SETUP)
    kubectl("apply", "-f", "-", stdin=DAILY)
    ks.settle()
    return kubectl


def _columns(line: str) -> list[str]:
    """A header line's column names (kubectl pads columns with at least three spaces; names hold single ones)."""
    return re.split(r"\s{2,}", line.strip())


EVERYDAY = [
    # (arguments, the header kubectl prints, a line of output (regex), or for a refusal: what stderr says)
    (["get", "nodes"], "NAME STATUS ROLES AGE VERSION", rf"^h100-node-0 +Ready +<none> +{_AGE} +v1\.34\.0$"),
    (
        ["get", "nodes", "-o", "wide"],
        "NAME STATUS ROLES AGE VERSION INTERNAL-IP EXTERNAL-IP OS-IMAGE KERNEL-VERSION CONTAINER-RUNTIME",
        rf"^h100-node-0 +Ready +<none> +{_AGE} +v1\.34\.0 +10\.0\.\d+\.\d+ +<none> +kubesim +6\.8\.0-kubesim +"
        r"containerd://2\.0\.0$",
    ),
    (
        ["get", "pods", "-n", "daily", "-l", "app=nb"],
        "NAME READY STATUS RESTARTS AGE",
        rf"^nb +1/1 +Running +0 +{_AGE}$",
    ),
    (
        ["get", "pods", "-n", "daily", "-l", "app=nb", "-o", "wide"],
        "NAME READY STATUS RESTARTS AGE IP NODE NOMINATED_NODE READINESS_GATES",
        rf"^nb +1/1 +Running +0 +{_AGE} +10\.244\.\d+\.\d+ +\S+-node-\d+ +<none> +<none>$",
    ),
    (["get", "jobs", "-n", "daily"], "NAME STATUS COMPLETIONS DURATION AGE", rf"^once +Running +0/1 +{_AGE} +{_AGE}$"),
    (
        ["get", "jobs", "-n", "daily", "-o", "wide"],
        "NAME STATUS COMPLETIONS DURATION AGE CONTAINERS IMAGES SELECTOR",
        rf"^once +Running +0/1 +{_AGE} +{_AGE} +main +busybox +batch\.kubernetes\.io/controller-uid=[0-9a-f-]+$",
    ),
    (["get", "deploy", "-n", "daily"], "NAME READY UP-TO-DATE AVAILABLE AGE", rf"^web +2/2 +2 +2 +{_AGE}$"),
    (
        ["get", "deploy", "-n", "daily", "-o", "wide"],
        "NAME READY UP-TO-DATE AVAILABLE AGE CONTAINERS IMAGES SELECTOR",
        rf"^web +2/2 +2 +2 +{_AGE} +nginx +nginx:1\.27 +app=web$",
    ),
    (
        ["get", "deploy", "-n", "kueue-system"],
        "NAME READY UP-TO-DATE AVAILABLE AGE",
        rf"^kueue-controller-manager +1/1 +1 +1 +{_AGE}$",
    ),
    (["rollout", "status", "deployment/web", "-n", "daily"], None, r'^deployment "web" successfully rolled out$'),
    (
        ["get", "svc", "web", "-n", "daily"],
        "NAME TYPE CLUSTER-IP EXTERNAL-IP PORT(S) AGE",
        r"^web +ClusterIP +\S+ +<none> +80/TCP +",
    ),
    (
        ["get", "svc", "web", "-n", "daily", "-o", "wide"],
        "NAME TYPE CLUSTER-IP EXTERNAL-IP PORT(S) AGE SELECTOR",
        r" app=web$",
    ),
    (["get", "cm", "settings", "-n", "daily"], "NAME DATA AGE", rf"^settings +2 +{_AGE}$"),
    (["get", "secrets", "-n", "daily"], "NAME TYPE DATA AGE", rf"^pw +Opaque +1 +{_AGE}$"),
    (["get", "sa", "viewer", "-n", "daily"], "NAME SECRETS AGE", rf"^viewer +0 +{_AGE}$"),
    (["get", "ns", "daily"], "NAME STATUS AGE", rf"^daily +Active +{_AGE}$"),
    (
        ["get", "pvc", "-n", "daily"],
        "NAME STATUS VOLUME CAPACITY ACCESS_MODES STORAGECLASS VOLUMEATTRIBUTESCLASS AGE",
        rf"^scratch +Pending +fast +<unset> +{_AGE}$",
    ),
    (["get", "events", "-n", "daily"], "LAST_SEEN TYPE REASON OBJECT MESSAGE", r" +Normal +Scheduled +pod/nb +"),
    (
        ["get", "events", "-n", "daily", "-o", "wide"],
        "LAST_SEEN TYPE REASON OBJECT SUBOBJECT SOURCE MESSAGE FIRST_SEEN COUNT NAME",
        r" +Normal +Scheduled +pod/nb +default-scheduler +Successfully assigned daily/nb to \S+ +\S+ +1 +nb\.",
    ),
    (["get", "leases", "-n", "kube-node-lease"], "NAME HOLDER AGE", rf"^h100-node-0 +h100-node-0 +{_AGE}$"),
    (["get", "roles", "-n", "daily"], "NAME CREATED_AT", r"^reader +\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$"),
    (
        ["get", "rolebindings", "-n", "daily", "-o", "wide"],
        "NAME ROLE AGE USERS GROUPS SERVICEACCOUNTS",
        rf"^viewer-view +ClusterRole/view +{_AGE} +auditors +daily/viewer$",
    ),
    (["get", "clusterroles", "view"], "NAME CREATED_AT", r"^view +\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$"),
    (
        ["get", "clusterrolebindings", "cluster-admin", "-o", "wide"],
        "NAME ROLE AGE USERS GROUPS SERVICEACCOUNTS",
        rf"^cluster-admin +ClusterRole/cluster-admin +{_AGE} +system:masters$",
    ),
    (["get", "crd", "workloads.kueue.x-k8s.io"], "NAME CREATED_AT", r"^workloads\.kueue\.x-k8s\.io +\d{4}-"),
    (["get", "clusterqueues", "team-cq"], "NAME COHORT PENDING_WORKLOADS", r"^team-cq +\d+$"),
    (  # the Deployment's two ready pods, on the Service's port
        ["get", "ep", "web", "-n", "daily"],
        "NAME ENDPOINTS AGE",
        rf"^web +10\.244\.\d+\.\d+:80,10\.244\.\d+\.\d+:80 +{_AGE}$",
    ),
    (
        ["exec", "nb", "-n", "daily", "--", "ls"],
        "refused",
        r'^Error from server \(BadRequest\): kubesim emulates the containers of pod "daily/nb" without running them',
    ),
    (["cp", "daily/nb:/etc/hosts", "hosts"], "refused", r"^Error from server \(BadRequest\): kubesim emulates"),
    (
        ["exec", "gone", "-n", "daily", "--", "ls"],
        "refused",
        r'^Error from server \(NotFound\): pods "gone" not found$',
    ),
    # port-forward to a pod's emulated notebook works: tests/kubesim/test_port_forward.py
    (
        ["port-forward", "pod/gone", "-n", "daily", "18888:8888"],
        "refused",
        r'^Error from server \(NotFound\): pods "gone" not found$',
    ),
]


@pytest.mark.parametrize(("args", "header", "line"), EVERYDAY, ids=[" ".join(case[0]) for case in EVERYDAY])
def test_everyday_invocations_print_as_against_kubernetes(
    daily: Kubectl, tmp_path: Path, args: list[str], header: str | None, line: str
):
    """The header exactly as kubectl prints it against kube-apiserver (a two-word column written with "_" here), and
    a line of the output; a refusal: kubectl's exit status 1 and what it prints on stderr."""
    if header == "refused":
        done = subprocess.run(
            [KUBECTL or "kubectl", *args],
            capture_output=True,
            text=True,
            timeout=60,
            env=daily.env,
            cwd=tmp_path,
            check=False,
        )
        assert done.returncode == 1, done.stdout
        assert re.search(line, done.stderr, re.M), done.stderr
        return
    lines = [text.rstrip() for text in daily(*args).stdout.splitlines()]
    out = "\n".join(lines)
    if header is not None:
        assert _columns(lines[0]) == [name.replace("_", " ") for name in header.split()], out
    assert re.search(line, out, re.M), out


def test_rollout_status_follows_the_deployments_generation(daily: Kubectl, ks: InProcessKubesim):
    assert (
        daily("scale", "deployment", "web", "-n", "daily", "--replicas=3").stdout.strip()
        == "deployment.apps/web scaled"
    )
    assert daily("rollout", "status", "deployment/web", "-n", "daily", "--timeout=20s").stdout.strip() == (
        'deployment "web" successfully rolled out'
    )
    assert daily("get", "deploy", "web", "-n", "daily", "--no-headers").stdout.split()[1:4] == ["3/3", "3", "3"]
    daily("set", "image", "deployment/web", "nginx=nginx:1.28", "-n", "daily")
    api_client = ks.api_client()
    web = client.AppsV1Api(api_client).read_namespaced_deployment("web", "daily")
    api_client.close()
    assert web.status.observed_generation == web.metadata.generation == 3
    assert (web.status.replicas, web.status.updated_replicas, web.status.ready_replicas) == (3, 3, 3)
    conditions = {c.type: (c.status, c.reason) for c in web.status.conditions}
    assert conditions == {
        "Available": ("True", "MinimumReplicasAvailable"),
        "Progressing": ("True", "NewReplicaSetAvailable"),
    }
    daily("scale", "deployment", "web", "-n", "daily", "--replicas=2")


def test_clusterrole_aggregation_through_kubectl(daily: Kubectl):
    daily(
        "apply",
        "-f",
        "-",
        stdin=(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: queues-view\n"
            "  labels: {rbac.authorization.k8s.io/aggregate-to-view: 'true'}\n"
            "rules: [{apiGroups: [kueue.x-k8s.io], resources: [localqueues], verbs: [get, list, watch]}]\n"
        ),
    )
    path = "{.rules[*].resources}"
    for role in ("view", "edit", "admin"):
        assert '["localqueues"]' in daily("get", "clusterrole", role, "-o", f"jsonpath={path}").stdout, role
    # without RBAC kubesim allows everything: the view binding's effect is tested with tokens in test_rbac.py
    assert (
        daily(
            "auth",
            "can-i",
            "list",
            "localqueues.kueue.x-k8s.io",
            "-n",
            "daily",
            "--as=system:serviceaccount:daily:viewer",
        ).stdout.strip()
        == "yes"
    )
    daily("delete", "clusterrole", "queues-view")
    assert '["localqueues"]' not in daily("get", "clusterrole", "view", "-o", f"jsonpath={path}").stdout


def test_visibility_api_answers_in_the_version_asked(daily: Kubectl):
    versions = daily("api-versions").stdout.split()
    assert {"visibility.kueue.x-k8s.io/v1beta1", "visibility.kueue.x-k8s.io/v1beta2"} <= set(versions)
    for version in ("v1beta1", "v1beta2"):
        raw = daily("get", "--raw", f"/apis/visibility.kueue.x-k8s.io/{version}/clusterqueues/team-cq/pendingworkloads")
        summary = json.loads(raw.stdout)
        assert (summary["kind"], summary["apiVersion"]) == (
            "PendingWorkloadsSummary",
            f"visibility.kueue.x-k8s.io/{version}",
        )
        local = daily(
            "get",
            "--raw",
            f"/apis/visibility.kueue.x-k8s.io/{version}/namespaces/default/localqueues/team/pendingworkloads",
        )
        assert json.loads(local.stdout)["apiVersion"] == f"visibility.kueue.x-k8s.io/{version}"
    refused = daily(
        "get", "--raw", "/apis/visibility.kueue.x-k8s.io/v1/clusterqueues/team-cq/pendingworkloads", ok=False
    )
    assert "NotFound" in refused.stderr
