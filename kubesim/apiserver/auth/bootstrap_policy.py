"""The default user-facing ClusterRoles a Kubernetes API server creates at start (its bootstrap RBAC policy):
`cluster-admin` (bound to the group system:masters), and `admin`, `edit` and `view`, which hold no rules of their
own but aggregate every ClusterRole labelled `rbac.authorization.k8s.io/aggregate-to-admin|edit|view: "true"`
(kubesim.apiserver.controllers.clusterrole_aggregation fills them). `edit` is labelled to aggregate into `admin`
and `view` into `edit`, so each includes the next; the `system:aggregate-to-*` roles carry the rules Kubernetes
gives them (plugin/pkg/auth/authorizer/rbac/bootstrappolicy in kubernetes/kubernetes), for the kinds of those
groups. Only these roles are installed, not the system: roles of the cluster's own components.
"""

from __future__ import annotations

READ = ["get", "list", "watch"]
WRITE = ["create", "delete", "deletecollection", "patch", "update"]
READ_WRITE = ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]
AGGREGATE = "rbac.authorization.k8s.io/aggregate-to-"
BOOTSTRAP_LABELS = {"kubernetes.io/bootstrapping": "rbac-defaults"}
AUTOUPDATE = {"rbac.authorization.kubernetes.io/autoupdate": "true"}
API_VERSION = "rbac.authorization.k8s.io/v1"


def _rule(verbs: list[str], group: str, *resources: str) -> dict:
    return {"verbs": list(verbs), "apiGroups": [group], "resources": list(resources)}


def _role(name: str, rules: list[dict] | None, labels: dict[str, str], aggregate_from: str | None = None) -> dict:
    role: dict = {
        "apiVersion": API_VERSION,
        "kind": "ClusterRole",
        "metadata": {"name": name, "labels": {**BOOTSTRAP_LABELS, **labels}, "annotations": dict(AUTOUPDATE)},
    }
    if aggregate_from is not None:
        role["aggregationRule"] = {"clusterRoleSelectors": [{"matchLabels": {AGGREGATE + aggregate_from: "true"}}]}
    if rules is not None:
        role["rules"] = rules
    return role


def _aggregate_to_view() -> list[dict]:
    return [
        _rule(
            READ,
            "",
            "pods",
            "replicationcontrollers",
            "replicationcontrollers/scale",
            "serviceaccounts",
            "services",
            "services/status",
            "endpoints",
            "persistentvolumeclaims",
            "persistentvolumeclaims/status",
            "configmaps",
        ),
        _rule(
            READ,
            "",
            "limitranges",
            "resourcequotas",
            "bindings",
            "events",
            "pods/status",
            "resourcequotas/status",
            "namespaces/status",
            "replicationcontrollers/status",
            "pods/log",
        ),
        _rule(READ, "", "namespaces"),
        _rule(READ, "discovery.k8s.io", "endpointslices"),
        _rule(
            READ,
            "apps",
            "controllerrevisions",
            "statefulsets",
            "statefulsets/status",
            "statefulsets/scale",
            "daemonsets",
            "daemonsets/status",
            "deployments",
            "deployments/status",
            "deployments/scale",
            "replicasets",
            "replicasets/status",
            "replicasets/scale",
        ),
        _rule(READ, "autoscaling", "horizontalpodautoscalers", "horizontalpodautoscalers/status"),
        _rule(READ, "batch", "jobs", "cronjobs", "cronjobs/status", "jobs/status"),
        _rule(
            READ,
            "extensions",
            "daemonsets",
            "daemonsets/status",
            "deployments",
            "deployments/scale",
            "deployments/status",
            "ingresses",
            "ingresses/status",
            "replicasets",
            "replicasets/scale",
            "replicasets/status",
            "replicationcontrollers/scale",
            "networkpolicies",
        ),
        _rule(READ, "policy", "poddisruptionbudgets", "poddisruptionbudgets/status"),
        _rule(READ, "networking.k8s.io", "networkpolicies", "ingresses", "ingresses/status"),
    ]


def _aggregate_to_edit() -> list[dict]:
    return [
        _rule(READ, "", "pods/attach", "pods/proxy", "pods/exec", "pods/portforward", "secrets", "services/proxy"),
        _rule(["impersonate"], "", "serviceaccounts"),
        _rule(WRITE, "", "pods", "pods/attach", "pods/proxy", "pods/exec", "pods/portforward"),
        _rule(["create"], "", "pods/eviction"),
        _rule(
            WRITE,
            "",
            "replicationcontrollers",
            "replicationcontrollers/scale",
            "serviceaccounts",
            "services",
            "services/proxy",
            "persistentvolumeclaims",
            "configmaps",
            "secrets",
            "events",
        ),
        _rule(["create"], "", "serviceaccounts/token"),
        _rule(
            WRITE,
            "apps",
            "statefulsets",
            "statefulsets/scale",
            "daemonsets",
            "deployments",
            "deployments/scale",
            "deployments/rollback",
            "replicasets",
            "replicasets/scale",
        ),
        _rule(WRITE, "autoscaling", "horizontalpodautoscalers"),
        _rule(WRITE, "batch", "jobs", "cronjobs"),
        _rule(
            WRITE,
            "extensions",
            "daemonsets",
            "deployments",
            "deployments/scale",
            "deployments/rollback",
            "ingresses",
            "replicasets",
            "replicasets/scale",
            "replicationcontrollers/scale",
            "networkpolicies",
        ),
        _rule(WRITE, "policy", "poddisruptionbudgets"),
        _rule(WRITE, "networking.k8s.io", "networkpolicies", "ingresses"),
        _rule(WRITE, "coordination.k8s.io", "leases"),
    ]


def _aggregate_to_admin() -> list[dict]:
    return [
        _rule(["create"], "authorization.k8s.io", "localsubjectaccessreviews"),
        _rule(READ_WRITE, "rbac.authorization.k8s.io", "roles", "rolebindings"),
    ]


def installation() -> list[tuple[str, dict]]:
    """(resource, object) of the default ClusterRoles and the cluster-admin binding, in creation order."""
    cluster_admin = _role(
        "cluster-admin",
        [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}, {"verbs": ["*"], "nonResourceURLs": ["*"]}],
        {},
    )
    roles = [
        cluster_admin,
        _role("admin", None, {}, aggregate_from="admin"),
        _role("edit", None, {AGGREGATE + "admin": "true"}, aggregate_from="edit"),
        _role("view", None, {AGGREGATE + "edit": "true"}, aggregate_from="view"),
        _role("system:aggregate-to-admin", _aggregate_to_admin(), {AGGREGATE + "admin": "true"}),
        _role("system:aggregate-to-edit", _aggregate_to_edit(), {AGGREGATE + "edit": "true"}),
        _role("system:aggregate-to-view", _aggregate_to_view(), {AGGREGATE + "view": "true"}),
    ]
    binding = {
        "apiVersion": API_VERSION,
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "cluster-admin", "labels": dict(BOOTSTRAP_LABELS), "annotations": dict(AUTOUPDATE)},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:masters"}],
    }
    return [*(("clusterroles", r) for r in roles), ("clusterrolebindings", binding)]
