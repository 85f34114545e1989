"""deploy/: the kustomize base and the example overlay render (kubectl kustomize), every object is accepted by
kubesim's schemas under strict field validation, the ClusterRoles and the leader election Roles hold exactly
worker/permissions.py, and the Deployments keep the security, probes and scheduling rules the install depends on
(two replicas each, rolled one at a time, the watcher and beat under leader election).

kubectl is not a Debian package this CI can install in a usable version (bookworm's kubernetes-client 1.20 bundles
kustomize v2, which cannot render `labels` or `patches`), so the rendering tests skip without a kubectl on PATH;
the raw-file tests below them run everywhere."""

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

import portal.settings as defaults
from kubesim.testing import RequestError, serve
from worker.permissions import COMPONENTS, NAMESPACED

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
BASE = DEPLOY / "base"
NAMESPACE = "gpu-portal"
needs_kubectl = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl (with kustomize v5) not on PATH")


def render(path: Path) -> list[dict]:
    out = subprocess.run(["kubectl", "kustomize", str(path)], check=True, capture_output=True, text=True,
                         timeout=60).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def raw_base() -> list[dict]:
    """The base's resource files as written (what kustomize starts from), in the namespace it sets."""
    kustomization = yaml.safe_load((BASE / "kustomization.yaml").read_text())
    docs = [doc for name in kustomization["resources"] for doc in yaml.safe_load_all((BASE / name).read_text()) if doc]
    return docs


def accepted_by_kubesim(objects: list[dict]) -> None:
    """Create every object in a fresh kubesim (namespaces first); a refusal fails with kubesim's message."""
    refused = []
    with serve(clock="manual") as ks:
        for obj in sorted(objects, key=lambda o: o["kind"] != "Namespace"):
            if obj["kind"] != "Namespace" and obj["kind"] not in CLUSTER_SCOPED:
                obj = {**obj, "metadata": {**obj["metadata"], "namespace": obj["metadata"].get("namespace", NAMESPACE)}}
            try:
                ks.apply(obj)
            except RequestError as error:
                refused.append(f"{obj['kind']}/{obj['metadata']['name']}: {error}")
    assert refused == []


CLUSTER_SCOPED = {"ClusterRole", "ClusterRoleBinding", "Namespace"}


def role_pairs(objects: list[dict], name: str, kind: str = "ClusterRole") -> list[tuple]:
    """(group, resource, verb) per rule and verb; for a Role also the resourceNames it is limited to."""
    role = next(o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name)
    return sorted((group, resource, verb, *([tuple(rule.get("resourceNames", []))] if kind == "Role" else []))
                  for rule in role["rules"] for group in rule["apiGroups"] for resource in rule["resources"]
                  for verb in rule["verbs"])


def queues(command: list[str]) -> list[str]:
    return command[command.index("--queues") + 1].split(",")


def check_objects(objects: list[dict]) -> None:
    kinds = sorted(f"{o['kind']}/{o['metadata']['name']}" for o in objects)
    for expected in ("Deployment/gpu-portal-web", "Deployment/gpu-portal-worker", "Deployment/gpu-portal-beat",
                     "Deployment/gpu-portal-watcher", "Service/gpu-portal-web", "Ingress/gpu-portal",
                     "ConfigMap/gpu-portal", "Secret/gpu-portal", "NetworkPolicy/gpu-portal-web",
                     "ClusterRole/gpu-portal-worker", "ClusterRole/gpu-portal-watcher"):
        assert expected in kinds
    for component, permissions in COMPONENTS.items():
        assert role_pairs(objects, f"gpu-portal-{component}") == sorted(p for perm in permissions for p in perm.pairs)
        binding = next(o for o in objects if o["kind"] == "ClusterRoleBinding"
                       and o["metadata"]["name"] == f"gpu-portal-{component}")
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                      "name": f"gpu-portal-{component}"}
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": f"gpu-portal-{component}",
                                        "namespace": NAMESPACE}]
    for process, permissions in NAMESPACED.items():  # leader election: the Lease, in the portal's namespace
        name = f"gpu-portal-{process}"
        assert role_pairs(objects, name, "Role") == sorted((p.group, p.resource, verb, p.names)
                                                           for p in permissions for verb in p.verbs)
        binding = next(o for o in objects if o["kind"] == "RoleBinding" and o["metadata"]["name"] == name)
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name}
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": name, "namespace": NAMESPACE}]
    config = next(o for o in objects if o["kind"] == "ConfigMap")
    assert config["data"]["LEADER_ELECTION"] == "true"
    deployments = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Deployment"}
    for name in ("gpu-portal-worker", "gpu-portal-notifier", "gpu-portal-beat", "gpu-portal-watcher"):
        spec = deployments[name]["spec"]
        assert spec["replicas"] == 2  # a node lost costs a takeover, never the process
        assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
        spread = spec["template"]["spec"]["topologySpreadConstraints"]
        assert spread[0]["topologyKey"] == "kubernetes.io/hostname"
        assert spread[0]["labelSelector"]["matchLabels"] == spec["selector"]["matchLabels"]
        assert spec["template"]["spec"]["containers"][0]["livenessProbe"]
    for name, deployment in deployments.items():
        pod = deployment["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert pod["serviceAccountName"] == name
        # web and the notifier never talk to the Kubernetes API
        assert pod["automountServiceAccountToken"] is (name not in {"gpu-portal-web", "gpu-portal-notifier"})
        for container in pod["containers"] + pod.get("initContainers", []):
            context = container["securityContext"]
            assert context["readOnlyRootFilesystem"] is True
            assert context["allowPrivilegeEscalation"] is False
            assert context["capabilities"] == {"drop": ["ALL"]}
            assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
            assert set(container["resources"]) == {"requests", "limits"}
        assert {"name": "tmp", "emptyDir": {"sizeLimit": "256Mi"}} in pod["volumes"]
    web = deployments["gpu-portal-web"]["spec"]["template"]["spec"]["containers"][0]
    assert web["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert web["readinessProbe"]["httpGet"]["path"] == "/readyz"
    watcher = deployments["gpu-portal-watcher"]["spec"]["template"]["spec"]["containers"][0]
    assert watcher["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert watcher["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert watcher["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    worker = deployments["gpu-portal-worker"]["spec"]["template"]["spec"]["containers"][0]
    ping = worker["livenessProbe"]["exec"]["command"]
    assert ping[:2] == ["sh", "-c"] and "unset PROMETHEUS_MULTIPROC_DIR;" in ping[2]
    assert 'inspect ping -d "celery@$HOSTNAME" --timeout 10' in ping[2]
    # Each queue its consumer (the names of portal/settings.py): submits never wait behind a slow receiver.
    notifier = deployments["gpu-portal-notifier"]["spec"]["template"]["spec"]["containers"][0]
    assert queues(worker["command"]) == [defaults.CELERY_TASK_DEFAULT_QUEUE]
    assert queues(notifier["command"]) == [defaults.NOTIFICATIONS_QUEUE]
    assert notifier["command"][notifier["command"].index("--hostname") + 1] == "notifier@%h"
    assert 'inspect ping -d "notifier@$HOSTNAME" --timeout 10' in notifier["livenessProbe"]["exec"]["command"][2]
    beat = deployments["gpu-portal-beat"]["spec"]["template"]["spec"]["containers"][0]
    heartbeat = f"{config['data']['PORTAL_RUN_DIR']}/beat-heartbeat"  # settings.BEAT_HEARTBEAT_FILE
    assert beat["livenessProbe"]["exec"]["command"] == ["python", "-m", "portal.container", "check", "--file",
                                                         heartbeat, "--max-age", "60"]


def test_base_files_hold_the_permissions_and_kubesim_accepts_them():
    objects = raw_base()
    check_objects(objects)
    accepted_by_kubesim(objects)


@needs_kubectl
@pytest.mark.parametrize("path", [BASE, DEPLOY / "overlays" / "example"], ids=["base", "example"])
def test_rendered_manifests_are_valid(path):
    objects = render(path)
    assert {o["metadata"].get("namespace", NAMESPACE) for o in objects} == {NAMESPACE}
    check_objects(objects)
    accepted_by_kubesim(objects)


@needs_kubectl
def test_example_overlay_replaces_image_secret_and_ingress_class():
    objects = {f"{o['kind']}/{o['metadata']['name']}": o for o in render(DEPLOY / "overlays" / "example")}
    images = {c["image"] for key, o in objects.items() if key.startswith("Deployment/")
              for c in o["spec"]["template"]["spec"]["containers"]}
    assert images == {"registry.example.com/gpu-portal:1.0.0"}
    assert "stringData" not in objects["Secret/gpu-portal"]
    assert set(objects["Secret/gpu-portal"]["data"]) >= {"SECRET_KEY", "DATABASE_URL", "REDIS_URL"}
    assert objects["Ingress/gpu-portal"]["spec"]["ingressClassName"] == "nginx"


def test_kubesim_refuses_a_typo_in_a_deployment():
    """The validation above can fail: an unknown field in a container is refused under strict validation."""
    deployment = next(o for o in raw_base() if o["kind"] == "Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0]["imagePulPolicy"] = "Always"
    with pytest.raises(AssertionError, match="imagePulPolicy"):
        accepted_by_kubesim([deployment, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}])
