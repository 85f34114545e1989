"""Admission of API writes, as kube-apiserver runs it: the body's identity against the URL, the namespace, decoding
(malformed quantities), defaulting, MutatingAdmissionPolicies, mutating webhooks (the workload operators', then the
Kueue half's), schema + CEL + built-in validation, validating webhooks (the operators', then the Kueue half's)."""

from __future__ import annotations

import uuid
from typing import Any

from kubesim.apiserver import admission_policies, operators
from kubesim.apiserver.auth.rbac import ADMIN_GROUP, ADMIN_USER, User
from kubesim.apiserver.errors import APIError, bad_request, denied, errored, invalid, not_found
from kubesim.apiserver.http.backend import Backend
from kubesim.apiserver.http.common import Query, Target, q
from kubesim.apiserver.registry import conversion
from kubesim.apiserver.registry.resources import RESOURCES
from kubesim.apiserver.validation import builtin, core, schema
from kubesim.kernel.metadata import Cause
from kubesim.kernel.protocols import WebhookErrored
from kubesim.kernel.quantity import QuantityError


class Admission:
    def __init__(self, sim: Backend) -> None:
        self.sim = sim
        self.store = sim.store

    def check_identity(self, t: Target, obj: Any) -> dict:
        """The body must be an object of the URL's kind, namespace and name; fills them in."""
        if not isinstance(obj, dict):
            raise bad_request("the request body must be a JSON object")
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if api_version and api_version != t.res.api_version:
            raise bad_request(
                f"the API version in the data ({api_version}) does not match the expected API version "
                f"({t.res.api_version})"
            )
        if kind and kind != t.res.kind:
            raise bad_request(f"the kind in the data ({kind}) does not match the expected kind ({t.res.kind})")
        md = obj.setdefault("metadata", {})
        if not isinstance(md, dict):
            raise bad_request("metadata must be an object")
        if t.res.namespaced:
            if md.get("namespace") and md["namespace"] != t.namespace:
                raise bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            md["namespace"] = t.namespace
        if t.name and md.get("name") and md["name"] != t.name:
            raise bad_request(f"the name of the object ({md['name']}) does not match the name on the URL ({t.name})")
        if t.name:
            md["name"] = t.name
        obj["apiVersion"], obj["kind"] = t.res.api_version, t.res.kind
        return obj

    def require_namespace(self, t: Target, creating: bool) -> None:
        """A namespaced write needs its namespace; creating in a terminating one is forbidden."""
        if not t.res.namespaced:
            return
        ns = self.store.get("namespaces", None, t.namespace or "")
        if ns is None:
            raise not_found(RESOURCES["namespaces"], t.namespace or "")
        if creating and ns["metadata"].get("deletionTimestamp"):
            raise APIError(
                403,
                f"{t.res.plural} is forbidden: unable to create new content in namespace {t.namespace} "
                "because it is being terminated",
                "Forbidden",
            )

    def admit(self, t: Target, obj: dict, old: dict | None, query: Query, status_only: bool) -> tuple[dict, list[str]]:
        """Defaulting, webhook mutation, schema+CEL+built-in validation, webhook validation. Mutates obj; returns
        the object to store (a webhook may replace it) and the warnings for the response."""
        plural = t.res.plural
        problem = core.decode_error(plural, obj)
        if problem:  # kube fails to decode the body into its Go type: 400 before admission
            kind = t.res.kind
            raise bad_request(f'{kind} in version "{t.res.version}" cannot be handled as a {kind}: {problem}')
        unknown = schema.default_and_prune(plural, obj)
        mode = q(query, "fieldValidation") or "Warn"  # the value itself was checked with the request's options
        if unknown and mode == "Strict":
            fields = ", ".join(f'unknown field "{u}"' for u in unknown)
            raise bad_request(f"strict decoding error: {fields}")
        warnings = [f'unknown field "{u}"' for u in unknown] if mode == "Warn" else []
        operation = "UPDATE" if old is not None else "CREATE"
        hook_resource = f"{plural}/status" if status_only else plural
        if not status_only:
            builtin.apply_defaults(plural, obj, old)
            operators.default(plural, obj, old)
            if plural == "pods" and old is None:
                builtin.resolve_priority(self.store, obj)
        if plural == "jobs" and old is None:
            obj["metadata"]["uid"] = str(uuid.uuid4())
            builtin.label_job(obj)
        if not status_only:
            requester = t.requester or User(ADMIN_USER, (ADMIN_GROUP, "system:authenticated"))
            obj = admission_policies.mutate(self.store, t.res, t.namespace, obj, old, requester)
        hooks = self.sim.webhooks
        try:
            for hook in hooks:
                try:
                    mutated = hook.mutate(hook_resource, operation, obj, old, self.store)
                except QuantityError as exc:  # a webhook that could not read a quantity: its decoding failed
                    raise WebhookErrored(hook.webhook_name(hook_resource) or "webhook", 400, str(exc)) from exc
                obj = obj if mutated is None else mutated
            if t.served_version:  # a deprecated version's request: its own schema and rules judge it
                kind = t.res.kind
                old_form = None if old is None else conversion.from_storage(kind, old)
                causes = schema.validate(
                    plural, conversion.from_storage(kind, obj), old_form, version=t.served_version
                )
            else:
                causes = schema.validate(plural, obj, old)
            if not status_only:
                causes += schema.pod_template_causes(plural, obj)
            if not any(c.reason == "FieldValueTypeInvalid" for c in causes):  # kube fails such bodies at decoding
                causes += builtin.validate(plural, obj, old)
            name = obj["metadata"].get("name") or obj["metadata"].get("generateName", "")
            # A quantity the schema's pattern admits but the parser refuses passes kube-apiserver's validation: a
            # validating webhook that decodes the object refuses it (WebhookErrored below); kubesim refuses what
            # none does, after them, so that it is never stored.
            undecodable = [c for c in causes if isinstance(c, schema.UndecodableQuantity)]
            if undecodable and len(undecodable) == len(causes) and any(h.webhook_name(hook_resource) for h in hooks):
                causes = []
            else:
                undecodable = []
            if causes:
                raise invalid(t.res, name, causes)
            refused_by_operator = None if status_only else operators.refusal(plural, obj, old)
            if refused_by_operator is not None:
                raise refused_by_operator
            for hook in hooks:
                try:
                    errors = hook.validate(hook_resource, operation, obj, old, self.store) or []
                except QuantityError as exc:  # a webhook that could not read a quantity: its decoding failed
                    raise WebhookErrored(hook.webhook_name(hook_resource) or "webhook", 400, str(exc)) from exc
                refused = [Cause(e[0], e[2] if len(e) > 2 else "FieldValueInvalid", e[1]) for e in errors]
                webhook = hook.webhook_name(hook_resource) if refused else ""
                if webhook:
                    raise denied(webhook, refused)
                causes += refused
            causes += undecodable
        except WebhookErrored as exc:  # controller-runtime's Errored, relayed under the webhook's name
            raise errored(exc.webhook, exc.code, exc.message) from exc
        if causes:
            raise invalid(t.res, name, causes)
        return obj, warnings
