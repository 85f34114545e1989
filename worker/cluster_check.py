"""Is this cluster ready for the portal? One check per thing the portal depends on, each passed, failed or warned
with a one-line reason and, when not passed, how to fix it (`manage.py cluster_check` prints them).

What the portal's own account may not read (CRDs, kueue-system) is a warning, not a failure: the checks that matter
for the portal's account are the access reviews of worker.permissions, which every account may ask.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import urllib3
import yaml
from kubernetes import client

from .gateway import ClusterError, Gateway
from .outside_work import OWNER_KINDS
from .permissions import KUEUE, VISIBILITY, Permission

PASS, FAIL, WARN = "✓", "✗", "!"
KUEUE_VERSION = "v1beta2"  # the API version the portal speaks
MIN_KUEUE = (0, 20)
MIN_KUBERNETES = (1, 29)
KUEUE_NAMESPACE = "kueue-system"
KUEUE_CONFIG_KEY = "controller_manager_config.yaml"
KUEUE_PLURALS = ("resourceflavors", "cohorts", "clusterqueues", "localqueues", "workloadpriorityclasses", "workloads")
INSTALL_KUEUE = ("install Kueue v0.20: kubectl apply --server-side -f "
                 "https://github.com/kubernetes-sigs/kueue/releases/download/v0.20.0/manifests.yaml")
ADMIN_HINT = "run cluster_check with a cluster-admin kubeconfig (KUBECONFIG=...) to see it"


@dataclass(frozen=True)
class Check:
    mark: str
    title: str
    reason: str
    fix: str = ""

    @property
    def failed(self) -> bool:
        return self.mark == FAIL


class Unreachable(Exception):
    """The API server did not answer at all."""


class _Cluster:
    """GETs and access reviews against one API server; an answer that is an error comes back as a ClusterError."""

    def __init__(self, api_client: client.ApiClient) -> None:
        self.gateway = Gateway(api_client)
        self.authorization = client.AuthorizationV1Api(api_client)

    def get(self, path: str) -> Any:
        try:
            return self.gateway.raw_get(path)
        except ClusterError as error:
            if error.status == 0:
                raise Unreachable(error.message) from error
            raise

    def allowed(self, group: str, resource: str, verb: str, *, namespace: str = "", name: str = "") -> bool:
        plural, _, sub = resource.partition("/")
        body = client.V1SelfSubjectAccessReview(spec=client.V1SelfSubjectAccessReviewSpec(
            resource_attributes=client.V1ResourceAttributes(group=group, resource=plural, subresource=sub or None,
                                                            verb=verb, namespace=namespace or None,
                                                            name=name or None)))
        try:
            review = self.authorization.create_self_subject_access_review(body)
        except (OSError, urllib3.exceptions.HTTPError) as exc:
            raise Unreachable(str(exc)) from exc
        return bool(review.status and review.status.allowed)


def run_checks(api_client: client.ApiClient, permissions: Iterable[Permission], *,
               namespaced: Iterable[Permission] = (), namespace: str = "") -> list[Check]:
    """Every check in order; one failed line and nothing more when the API server cannot be reached. `namespaced`
    are asked in `namespace` (leader election's Leases in the portal's namespace)."""
    cluster = _Cluster(api_client)
    url = api_client.configuration.host
    checks: list[Check] = []
    try:
        checks.append(_kubernetes_version(cluster))
        checks += _kueue_api(cluster)
        checks += _kueue_controller(cluster)
        checks += _owner_kinds(cluster)
        checks.append(_visibility(cluster))
        checks += _permissions(cluster, permissions)
        checks += _permissions(cluster, namespaced, namespace=namespace)
        checks.append(_ingress_class(cluster))
    except Unreachable as exc:
        detail = str(exc)  # the gateway may say it in these words already
        reason = detail if detail.startswith("cannot reach") else f"cannot reach the cluster at {url} ({detail})"
        checks.append(Check(FAIL, "API server", reason,
                            "check KUBECONFIG (or the pod's service account), the server address and the network"))
    return checks


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", text)[:2])


def _kubernetes_version(cluster: _Cluster) -> Check:
    info = cluster.get("/version")
    version = info.get("gitVersion", "?")
    if _version(f"{info.get('major')}.{info.get('minor')}") < MIN_KUBERNETES:
        return Check(WARN, "Kubernetes", f"{version} is older than 1.29, which Kueue v0.20 is tested with",
                     "upgrade the cluster")
    return Check(PASS, "Kubernetes", version)


def _kueue_api(cluster: _Cluster) -> list[Check]:
    """The CRDs (where this account may read them) and what discovery says is served."""
    checks = []
    missing, unreadable = [], False
    for plural in KUEUE_PLURALS:
        try:
            crd = cluster.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{plural}.{KUEUE}")
        except ClusterError as error:
            if error.status == 403:
                unreadable = True
                break
            if error.not_found:
                missing.append(plural)
                continue
            raise
        served = [v["name"] for v in crd["spec"].get("versions", []) if v.get("served")]
        if KUEUE_VERSION not in served:
            missing.append(f"{plural} (serves {', '.join(served) or 'nothing'})")
    if unreadable:
        checks.append(Check(WARN, "Kueue CRDs", "this account may not read CustomResourceDefinitions", ADMIN_HINT))
    elif missing:
        checks.append(Check(FAIL, "Kueue CRDs", f"missing or without {KUEUE_VERSION}: {', '.join(missing)}",
                            INSTALL_KUEUE))
    else:
        checks.append(Check(PASS, "Kueue CRDs", f"{len(KUEUE_PLURALS)} CRDs serve {KUEUE}/{KUEUE_VERSION}"))
    try:
        group = cluster.get(f"/apis/{KUEUE}")
        resources = {r["name"] for r in cluster.get(f"/apis/{KUEUE}/{KUEUE_VERSION}").get("resources", [])}
    except ClusterError as error:
        if not error.not_found:
            raise
        return [*checks, Check(FAIL, "Kueue API", f"{KUEUE} is not served", INSTALL_KUEUE)]
    versions = [v["version"] for v in group.get("versions", [])]
    absent = [p for p in KUEUE_PLURALS if p not in resources]
    if absent:
        return [*checks, Check(FAIL, "Kueue API", f"{KUEUE}/{KUEUE_VERSION} lacks {', '.join(absent)}",
                               INSTALL_KUEUE)]
    return [*checks, Check(PASS, "Kueue API", f"{KUEUE} serves {', '.join(versions)}")]


def _kueue_controller(cluster: _Cluster) -> list[Check]:
    """Kueue's controller Deployment (its image tag is the version) and the Configuration it runs with."""
    try:
        deployment = cluster.get(f"/apis/apps/v1/namespaces/{KUEUE_NAMESPACE}/deployments/kueue-controller-manager")
    except ClusterError as error:
        if error.status not in (403, 404):
            raise
        why = "this account may not read it" if error.status == 403 else "not found"
        return [Check(WARN, "Kueue controller", f"kueue-controller-manager in {KUEUE_NAMESPACE}: {why}",
                      ADMIN_HINT if error.status == 403 else "check where Kueue is installed")]
    containers = deployment["spec"]["template"]["spec"]["containers"]
    image = next((c["image"] for c in containers if "kueue" in c.get("image", "")), containers[0]["image"])
    tag = image.rsplit(":", 1)[-1] if ":" in image.rsplit("/", 1)[-1] else "unknown"
    ready = (deployment.get("status") or {}).get("readyReplicas") or 0
    checks = []
    if not ready:
        checks.append(Check(FAIL, "Kueue controller", f"{image}: no ready replica",
                            f"kubectl -n {KUEUE_NAMESPACE} describe deployment kueue-controller-manager"))
    elif tag.startswith("v") and _version(tag) < MIN_KUEUE:
        checks.append(Check(FAIL, "Kueue controller", f"Kueue {tag} is older than v0.20", INSTALL_KUEUE))
    else:
        checks.append(Check(PASS, "Kueue controller", f"Kueue {tag}, {ready} ready"))
    return checks + _configuration(cluster)


def _read_configuration(cluster: _Cluster) -> dict[str, Any] | None:
    """Kueue's Configuration document, or None where this account may not read it or it is absent."""
    try:
        config_map = cluster.get(f"/api/v1/namespaces/{KUEUE_NAMESPACE}/configmaps/kueue-manager-config")
    except ClusterError as error:
        if error.status not in (403, 404):
            raise
        return None
    return yaml.safe_load((config_map.get("data") or {}).get(KUEUE_CONFIG_KEY) or "") or {}


def _configuration(cluster: _Cluster) -> list[Check]:
    try:
        config = _read_configuration(cluster)
    except yaml.YAMLError as exc:
        return [Check(FAIL, "Kueue Configuration", f"{KUEUE_CONFIG_KEY} is not YAML: {exc}", "fix the ConfigMap")]
    if config is None:
        return [Check(WARN, "Kueue Configuration", "kueue-manager-config is not readable or absent", ADMIN_HINT)]
    edit = f"edit kueue-manager-config in {KUEUE_NAMESPACE} and restart kueue-controller-manager"
    checks = []
    fair = config.get("fairSharing") or {}
    if fair.get("enable"):
        checks.append(Check(PASS, "Fair sharing", f"on ({', '.join(fair.get('preemptionStrategies') or [])})"))
    else:
        checks.append(Check(FAIL, "Fair sharing", "off: the portal's cohorts share idle quota by fair sharing",
                            f"set fairSharing.enable: true; {edit}"))
    strategy = (config.get("resources") or {}).get("quotaCheckStrategy")
    if strategy == "IgnoreUndeclared":
        checks.append(Check(PASS, "Quota check strategy", strategy))
    elif strategy is None:
        checks.append(Check(WARN, "Quota check strategy", "not set: Kueue's default applies",
                            f"set resources.quotaCheckStrategy: IgnoreUndeclared; {edit}"))
    else:
        checks.append(Check(FAIL, "Quota check strategy", f"{strategy}: the portal's queues declare GPUs only, so "
                            "CPU and memory requests would keep every workload out",
                            f"set resources.quotaCheckStrategy: IgnoreUndeclared; {edit}"))
    wait = config.get("waitForPodsReady") or {}
    if wait.get("enable"):
        checks.append(Check(PASS, "waitForPodsReady", f"on (timeout {wait.get('timeout', '5m')})"))
    else:
        checks.append(Check(WARN, "waitForPodsReady", "off: a gang whose pods cannot all start holds its quota",
                            f"set waitForPodsReady.enable: true; {edit}"))
    frameworks = (config.get("integrations") or {}).get("frameworks") or []
    if "batch/job" in frameworks:
        checks.append(Check(PASS, "Job integration", f"frameworks: {', '.join(frameworks)}"))
    else:
        checks.append(Check(FAIL, "Job integration", "batch/job is not among integrations.frameworks: Kueue would "
                            "ignore the portal's Jobs", f"add batch/job to integrations.frameworks; {edit}"))
    return checks


def _served_version(cluster: _Cluster, group: str, plural: str) -> str | None:
    """The group version that serves `plural` (discovery, open to every account), None when it is not installed."""
    try:
        if not group:
            resources = cluster.get("/api/v1").get("resources", [])
            return "v1" if any(r.get("name") == plural for r in resources) else None
        version = (cluster.get(f"/apis/{group}").get("preferredVersion") or {}).get("groupVersion", "")
        resources = cluster.get(f"/apis/{version}").get("resources", []) if version else []
    except ClusterError as error:
        if not error.not_found:
            raise
        return None
    return version if any(r.get("name") == plural for r in resources) else None


def _owner_kinds(cluster: _Cluster) -> list[Check]:
    """Each kind whose work the portal mirrors (worker/outside_work.py): installed or not (a cluster without a kind's
    CRD is no failure: there is no such work to watch), and, where Kueue's Configuration is readable, whether Kueue
    manages it (README.md, Running against a real cluster, lists the frameworks)."""
    try:
        config = _read_configuration(cluster)
    except yaml.YAMLError:
        config = None  # said once, on the Kueue Configuration line
    frameworks = None if config is None else (config.get("integrations") or {}).get("frameworks") or []
    checks = []
    for (group, kind), owner in OWNER_KINDS.items():
        title = f"Kind {kind}"
        version = _served_version(cluster, group, owner.plural)
        if version is None:
            what = f"{owner.plural}.{group}" if group else owner.plural
            checks.append(Check(PASS, title, f"not installed ({what} is not served): no such work to watch"))
        elif frameworks is not None and owner.framework not in frameworks:
            checks.append(Check(WARN, title, f"{version} is served but {owner.framework} is not among Kueue's "
                                "integrations.frameworks: its work bypasses Kueue's queues (the portal flags its GPU "
                                "pods as running outside the queue)",
                                f"add {owner.framework} to integrations.frameworks in kueue-manager-config "
                                f"({KUEUE_NAMESPACE}) and restart kueue-controller-manager"))
        else:
            managed = "" if frameworks is None else f", Kueue integration {owner.framework}"
            checks.append(Check(PASS, title, f"{version}{managed}"))
    return checks


def _visibility(cluster: _Cluster) -> Check:
    try:
        group = cluster.get(f"/apis/{VISIBILITY}")
    except ClusterError as error:
        if not error.not_found:
            raise
        return Check(FAIL, "Visibility API", f"{VISIBILITY} is not served: no queue positions",
                     "enable Kueue's visibility API (the VisibilityOnDemand feature gate and its APIService)")
    versions = [v["version"] for v in group.get("versions", [])]
    if KUEUE_VERSION not in versions:
        return Check(FAIL, "Visibility API", f"serves {', '.join(versions)}, not {KUEUE_VERSION}", INSTALL_KUEUE)
    return Check(PASS, "Visibility API", f"{VISIBILITY}/{KUEUE_VERSION}")


def _permissions(cluster: _Cluster, permissions: Iterable[Permission], *, namespace: str = "") -> list[Check]:
    checks = []
    fix = ("apply deploy/base/rbac.yaml (Roles gpu-portal-watcher and gpu-portal-beat in the portal's namespace, "
           "for leader election)" if namespace else "apply deploy/base/rbac.yaml (ClusterRoles gpu-portal-worker "
           "and gpu-portal-watcher)") + " and bind them to the portal's service accounts"
    for permission in permissions:
        what = f"{permission.resource}.{permission.group}" if permission.group else permission.resource
        what += "".join(f" {name}" for name in permission.names) + (f" in {namespace}" if namespace else "")
        names = permission.names or ("",)
        denied = [verb for verb in permission.verbs if not all(
            cluster.allowed(permission.group, permission.resource, verb, namespace=namespace, name=name)
            for name in names)]
        if denied:
            checks.append(Check(FAIL, f"May {', '.join(permission.verbs)} {what}", f"denied: {', '.join(denied)}",
                                fix))
        else:
            checks.append(Check(PASS, f"May {', '.join(permission.verbs)} {what}", "allowed"))
    return checks


def _ingress_class(cluster: _Cluster) -> Check:
    try:
        classes = cluster.get("/apis/networking.k8s.io/v1/ingressclasses").get("items", [])
    except ClusterError as error:
        if error.status not in (403, 404):
            raise
        return Check(WARN, "Ingress class", "IngressClasses are not readable here", ADMIN_HINT)
    if not classes:
        return Check(WARN, "Ingress class", "none: notebooks and the portal's own Ingress need an ingress controller",
                     "install one (e.g. ingress-nginx) and set ingressClassName in your overlay")
    default = "ingressclass.kubernetes.io/is-default-class"
    names = [c["metadata"]["name"] + (" (default)" if (c["metadata"].get("annotations") or {}).get(default) == "true"
                                      else "") for c in classes]
    return Check(PASS, "Ingress class", ", ".join(names))


def union(*groups: Iterable[Permission]) -> list[Permission]:
    """Permissions of several components, one line per (group, resource) with the verbs merged in order."""
    merged: dict[tuple[str, str], list[str]] = {}
    for group in groups:
        for p in group:
            verbs = merged.setdefault((p.group, p.resource), [])
            verbs += [v for v in p.verbs if v not in verbs]
    return [Permission(group, resource, tuple(verbs)) for (group, resource), verbs in merged.items()]


def render(checks: list[Check]) -> str:
    lines = []
    for check in checks:
        lines.append(f"{check.mark} {check.title}: {check.reason}")
        if check.fix and check.mark != PASS:
            lines.append(f"    fix: {check.fix}")
    return "\n".join(lines)

