"""Authentication (bearer tokens) and RBAC authorization, as kube-apiserver's token and RBAC authorizers decide.

Off by default (every request is allowed, as before). On (`--rbac`, `Simulator(rbac=True)`): the kubeconfig's
token is the cluster admin (group system:masters, allowed everything), a ServiceAccount's token comes from a
TokenRequest (POST .../serviceaccounts/<name>/token), anything else is 401. Requests are authorized from the stored
Roles, ClusterRoles, RoleBindings and ClusterRoleBindings (no aggregation); resourceNames and subresources such as
pods/log are honoured, non-resource URLs match nonResourceURLs (discovery and health paths are open to every
authenticated user, as kube's bootstrap roles make them). Every denial and every (role, rule, verb, resource) that
allowed a request is recorded, so a test can prove a role holds exactly what a run used.
"""

from __future__ import annotations

import secrets
import threading
from dataclasses import dataclass, field

from kubesim.apiserver.errors import APIError
from kubesim.apiserver.storage.store import ObjectStore

ADMIN_GROUP = "system:masters"
ADMIN_USER = "kubesim-admin"


@dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...]


@dataclass(frozen=True)
class Attributes:
    """What one request asks for, as kube's authorizer attributes."""

    verb: str
    group: str = ""
    resource: str = ""  # "pods/log" for a subresource
    namespace: str = ""
    name: str = ""
    path: str = ""  # non-resource requests only

    @property
    def resource_request(self) -> bool:
        return bool(self.resource)


@dataclass(frozen=True)
class Grant:
    """One rule of one role that allowed one request: role ("ClusterRole/x" or "Role/ns/x"), rule index, request."""

    role: str
    rule: int
    verb: str
    group: str
    resource: str


@dataclass
class Rbac:
    enabled: bool = False
    admin_token: str = ""
    tokens: dict[str, tuple[str, str]] = field(default_factory=dict)  # token -> (namespace, service account)
    denials: list[str] = field(default_factory=list)
    grants: set[Grant] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def authenticate(self, headers: dict[str, str]) -> User | None:
        """The request's user; None when RBAC is off (no identity needed). 401 for a missing or unknown token."""
        if not self.enabled:
            return None
        auth = headers.get("authorization", "")
        token = auth[7:].strip() if auth.lower().startswith("bearer ") else ""
        if token and token == self.admin_token:
            return User(ADMIN_USER, (ADMIN_GROUP, "system:authenticated"))
        with self.lock:
            sa = self.tokens.get(token)
        if sa is None:
            raise APIError(401, "Unauthorized", "Unauthorized")
        return service_account_user(*sa)

    def mint(self, namespace: str, name: str) -> str:
        """A new bearer token bound to the ServiceAccount namespace/name."""
        token = secrets.token_urlsafe(24)
        with self.lock:
            self.tokens[token] = (namespace, name)
        return token

    def allowed(self, store: ObjectStore, user: User, attrs: Attributes, *, record: bool = True) -> bool:
        """Decide, recording the rule that allowed it or the denial (not for an access review: asking is no use)."""
        if ADMIN_GROUP in user.groups:
            return True
        if not attrs.resource_request and public(attrs.path):
            return True
        for role, index, rule in _rules(store, user, attrs.namespace):
            if _matches(rule, attrs):
                if record and attrs.resource_request:
                    with self.lock:
                        self.grants.add(Grant(role, index, attrs.verb, attrs.group, attrs.resource))
                return True
        if record:
            with self.lock:
                self.denials.append(forbidden_message(user, attrs))
        return False

    def rules(self, store: ObjectStore, user: User, namespace: str) -> tuple[list[dict], list[dict]]:
        """(resource rules, non-resource rules) the user holds in `namespace`, as a SelfSubjectRulesReview lists
        them: the bound roles' rules plus the discovery paths every authenticated user may read."""
        if ADMIN_GROUP in user.groups:
            return [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}], [
                {"verbs": ["*"], "nonResourceURLs": ["*"]}
            ]
        resource_rules: list[dict] = []
        other = [
            {
                "verbs": ["get"],
                "nonResourceURLs": [
                    "/api",
                    "/api/*",
                    "/apis",
                    "/apis/*",
                    "/healthz",
                    "/livez",
                    "/openapi",
                    "/openapi/*",
                    "/readyz",
                    "/version",
                ],
            }
        ]
        for _, _, rule in _rules(store, user, namespace):
            if rule.get("nonResourceURLs"):
                other.append({"verbs": rule.get("verbs") or [], "nonResourceURLs": rule["nonResourceURLs"]})
                continue
            entry = {k: rule[k] for k in ("verbs", "apiGroups", "resources", "resourceNames") if rule.get(k)}
            resource_rules.append(entry)
        return resource_rules, other

    def authorize(self, store: ObjectStore, user: User | None, attrs: Attributes) -> None:
        """403 Forbidden unless allowed (nothing to check while RBAC is off)."""
        if user is not None and not self.allowed(store, user, attrs):
            raise forbidden(user, attrs)

    def report(self) -> dict:
        with self.lock:
            return {
                "enabled": self.enabled,
                "denials": list(self.denials),
                "grants": [vars(g) for g in sorted(self.grants, key=lambda g: (g.role, g.rule, g.resource, g.verb))],
            }

    def clear_records(self) -> None:
        with self.lock:
            self.denials.clear()
            self.grants.clear()

    def reset(self) -> None:
        """An emptied cluster: its ServiceAccounts' tokens and the records go too."""
        with self.lock:
            self.tokens.clear()
            self.denials.clear()
            self.grants.clear()


def public(path: str) -> bool:
    """Discovery, version and health: what kube's bootstrap roles system:discovery and system:public-info-viewer
    grant every authenticated user."""
    return path in ("/version", "/healthz", "/readyz", "/livez", "/api", "/apis") or path.startswith(
        ("/api/", "/apis/", "/openapi/")
    )


def service_account_user(namespace: str, name: str) -> User:
    return User(
        f"system:serviceaccount:{namespace}:{name}",
        ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"),
    )


def _bound(subjects: list[dict], user: User, binding_namespace: str) -> bool:
    for s in subjects or []:
        kind = s.get("kind")
        if kind == "ServiceAccount":
            if f"system:serviceaccount:{s.get('namespace') or binding_namespace}:{s.get('name')}" == user.name:
                return True
        elif (kind == "User" and s.get("name") == user.name) or (kind == "Group" and s.get("name") in user.groups):
            return True
    return False


def _rules(store: ObjectStore, user: User, namespace: str) -> list[tuple[str, int, dict]]:
    """(role, rule index, rule) of every rule bound to the user that applies in `namespace` ("" cluster-wide)."""
    out: list[tuple[str, int, dict]] = []
    bindings = [(b, "") for b in store.list("clusterrolebindings", copy=False)]
    if namespace:
        bindings += [(b, namespace) for b in store.list("rolebindings", namespace, copy=False)]
    for binding, ns in bindings:
        if not _bound(binding.get("subjects") or [], user, ns):
            continue
        ref = binding.get("roleRef") or {}
        name = ref.get("name", "")
        if ref.get("kind") == "ClusterRole":
            role, label = store.get("clusterroles", None, name, copy=False), f"ClusterRole/{name}"
        else:
            role, label = store.get("roles", ns, name, copy=False), f"Role/{ns}/{name}"
        for index, rule in enumerate((role or {}).get("rules") or []):
            out.append((label, index, rule))
    return out


def _has(values: list[str] | None, value: str) -> bool:
    return bool(values) and ("*" in values or value in values)  # type: ignore[operator]


def _matches(rule: dict, a: Attributes) -> bool:
    if not _has(rule.get("verbs"), a.verb):
        return False
    if not a.resource_request:
        urls = rule.get("nonResourceURLs") or []
        return any(u == a.path or u == "*" or (u.endswith("*") and a.path.startswith(u[:-1])) for u in urls)
    if not _has(rule.get("apiGroups"), a.group):
        return False
    resources = rule.get("resources") or []
    base, _, sub = a.resource.partition("/")
    wildcards = {"*", f"{base}/*", f"*/{sub}"} if sub else {"*"}
    if a.resource not in resources and not wildcards & set(resources):
        return False
    names = rule.get("resourceNames") or []
    return not names or a.name in names


def forbidden_message(user: User, a: Attributes) -> str:
    if not a.resource_request:
        return f'forbidden: User "{user.name}" cannot {a.verb} path "{a.path}"'
    base = a.resource.split("/", 1)[0]
    what = f"{base}.{a.group}" if a.group else base
    subject = f'{what} "{a.name}"' if a.name else what
    scope = f'in the namespace "{a.namespace}"' if a.namespace else "at the cluster scope"
    return (
        f'{subject} is forbidden: User "{user.name}" cannot {a.verb} resource "{a.resource}" '
        f'in API group "{a.group}" {scope}'
    )


def forbidden(user: User, a: Attributes) -> APIError:
    details = {"name": a.name, "group": a.group, "kind": a.resource.split("/", 1)[0]} if a.resource_request else {}
    return APIError(403, forbidden_message(user, a), "Forbidden", details=details)
