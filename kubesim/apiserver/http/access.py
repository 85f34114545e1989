"""Who may do what: TokenRequests (a bearer token for a ServiceAccount) and SelfSubjectAccessReviews, both answered
from kubesim.apiserver.auth.rbac, the same rules that authorize every request."""

from __future__ import annotations

from datetime import timedelta

from kubesim.apiserver.auth.rbac import ADMIN_GROUP, ADMIN_USER, Attributes, User
from kubesim.apiserver.errors import bad_request
from kubesim.apiserver.http.backend import Backend
from kubesim.apiserver.http.common import Response, Target, existing, read_json
from kubesim.apiserver.registry.resources import AUTHENTICATION_GROUP, AUTHORIZATION_GROUP
from kubesim.kernel.clock import rfc3339

TOKEN_SECONDS = 3600


class Access:
    def __init__(self, sim: Backend) -> None:
        self.sim = sim
        self.store = sim.store

    def token_request(self, t: Target, body: bytes) -> Response:
        """POST .../serviceaccounts/<name>/token: an authentication.k8s.io/v1 TokenRequest with a fresh token."""
        request = read_json(body) if body else {}
        if not isinstance(request, dict):
            raise bad_request("the request body must be a TokenRequest object")
        existing(self.store, t)  # 404 for a ServiceAccount that does not exist
        seconds = int((request.get("spec") or {}).get("expirationSeconds") or TOKEN_SECONDS)
        token = self.sim.rbac.mint(t.namespace or "", t.name or "")
        expires = self.sim.clock.now() + timedelta(seconds=seconds)
        return Response(
            201,
            {
                "kind": "TokenRequest",
                "apiVersion": "authentication.k8s.io/v1",
                "metadata": {"name": t.name, "namespace": t.namespace},
                "spec": {"audiences": (request.get("spec") or {}).get("audiences") or [], "expirationSeconds": seconds},
                "status": {"token": token, "expirationTimestamp": rfc3339(expires)},
            },
        )

    def review(self, user: User | None, body: bytes) -> Response:
        """POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews: may the caller do this?"""
        review = read_json(body)
        spec = review.get("spec") if isinstance(review, dict) else None
        if not isinstance(spec, dict):
            raise bad_request("a SelfSubjectAccessReview needs a spec")
        attrs = _attributes(spec)
        if user is None:
            status = {"allowed": True, "reason": "kubesim runs without RBAC: every request is allowed"}
        else:
            with self.store.lock:
                allowed = self.sim.rbac.allowed(self.store, user, attrs, record=False)
            status = {"allowed": allowed}
            if not allowed:
                status["reason"] = "no RBAC rule bound to the user allows this"
        return Response(
            201,
            {
                "kind": "SelfSubjectAccessReview",
                "apiVersion": f"{AUTHORIZATION_GROUP}/v1",
                "metadata": {"creationTimestamp": None},
                "spec": spec,
                "status": status,
            },
        )

    def rules_review(self, user: User | None, body: bytes) -> Response:
        """POST /apis/authorization.k8s.io/v1/selfsubjectrulesreviews (`kubectl auth can-i --list`)."""
        review = read_json(body)
        spec = review.get("spec") if isinstance(review, dict) else None
        namespace = str((spec or {}).get("namespace") or "")
        who = user or User(ADMIN_USER, (ADMIN_GROUP, "system:authenticated"))
        with self.store.lock:
            resource_rules, other_rules = self.sim.rbac.rules(self.store, who, namespace)
        return Response(
            201,
            {
                "kind": "SelfSubjectRulesReview",
                "apiVersion": f"{AUTHORIZATION_GROUP}/v1",
                "metadata": {"creationTimestamp": None},
                "spec": {"namespace": namespace} if namespace else {},
                "status": {"resourceRules": resource_rules, "nonResourceRules": other_rules, "incomplete": False},
            },
        )

    def whoami(self, user: User | None) -> Response:
        """POST /apis/authentication.k8s.io/v1/selfsubjectreviews: who the caller is authenticated as. Without RBAC
        every caller is the kubeconfig's admin, as the kubeconfig kubesim writes says."""
        who = user or User(ADMIN_USER, (ADMIN_GROUP, "system:authenticated"))
        return Response(
            201,
            {
                "kind": "SelfSubjectReview",
                "apiVersion": f"{AUTHENTICATION_GROUP}/v1",
                "metadata": {"creationTimestamp": rfc3339(self.sim.clock.now())},
                "status": {"userInfo": {"username": who.name, "groups": list(who.groups)}},
            },
        )


def _attributes(spec: dict) -> Attributes:
    resource = spec.get("resourceAttributes")
    if isinstance(resource, dict):
        name = str(resource.get("resource") or "")
        if resource.get("subresource"):
            name = f"{name}/{resource['subresource']}"
        if not name or not resource.get("verb"):
            raise bad_request("spec.resourceAttributes needs verb and resource")
        return Attributes(
            str(resource["verb"]),
            str(resource.get("group") or ""),
            name,
            str(resource.get("namespace") or ""),
            str(resource.get("name") or ""),
        )
    other = spec.get("nonResourceAttributes")
    if isinstance(other, dict) and other.get("path") and other.get("verb"):
        return Attributes(str(other["verb"]), path=str(other["path"]))
    raise bad_request("spec needs resourceAttributes or nonResourceAttributes")
