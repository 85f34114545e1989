"""The Kubernetes API verbs on stored objects: get, list, create, update (replace), patch, delete,
deletecollection. Writes go through Admission and return once the simulator settled (Simulator.after_write)."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import yaml

from kubesim.apiserver.errors import APIError, already_exists, bad_request, conflict, not_found
from kubesim.apiserver.http.admission import Admission
from kubesim.apiserver.http.backend import Backend
from kubesim.apiserver.http.common import (
    Query,
    Response,
    Target,
    dry_run_problems,
    existing,
    matchers,
    method_not_allowed,
    options_invalid,
    q,
    read_json,
    truthy,
    write_options,
)
from kubesim.apiserver.registry import tables
from kubesim.apiserver.storage import fieldmanager
from kubesim.apiserver.storage.patch import PatchError, json_patch, merge_patch, strategic_merge_patch
from kubesim.apiserver.storage.store import AlreadyExists, Conflict, NotFound
from kubesim.kernel.clock import rfc3339
from kubesim.kernel.metadata import Cause

JOB_ORPHAN_WARNING = (
    "child pods are preserved by default when jobs are deleted; set propagationPolicy=Background to remove them "
    "or set propagationPolicy=Orphan to suppress this warning"
)
APPLY_PATCH = "application/apply-patch+yaml"
# The registries that answer a delete with the deleted object (ReturnDeletedObject); the others answer a Success Status
# once the object is gone. An object its finalizers keep is answered as marked for deletion either way.
RETURNS_DELETED_OBJECT = frozenset({"pods", "services", "serviceaccounts", "persistentvolumeclaims"})
PATCH_TYPES = ("application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json")


class Verbs:
    def __init__(self, sim: Backend, admission: Admission) -> None:
        self.sim = sim
        self.store = sim.store
        self.admission = admission

    def _settled(self, code: int, obj: dict, warnings: list[str], dry: bool = False) -> Response:
        """The answer to a write; a stored one after the simulator settled (a dry run stored nothing to settle)."""
        if not dry:
            self.sim.after_write()
        return Response(code, obj, warnings=warnings)

    # ---- reads -------------------------------------------------------------------------------------------
    def get(self, t: Target, query: Query, headers: dict[str, str], body: bytes) -> Response:
        obj = existing(self.store, t)
        if t.sub is None and tables.wants_table(headers.get("accept", "")):
            meta = {"resourceVersion": obj["metadata"]["resourceVersion"]}
            include = q(query, "includeObject", "") or ""
            return Response(200, tables.table(t.res, [obj], self.sim.clock.now(), meta, include, t.served_version))
        return Response(200, obj)

    def list(self, t: Target, query: Query, headers: dict[str, str], body: bytes) -> Response:
        labels, fields = matchers(query)
        after = None
        token = q(query, "continue")
        if token:
            try:
                start = json.loads(base64.urlsafe_b64decode(token.encode()))
                after = (start["ns"], start["name"])
            except (ValueError, KeyError, TypeError) as exc:
                raise bad_request("continue key is not valid") from exc
        limit = int(q(query, "limit") or 0)
        limit = max(limit, 0)
        # One more than the page, to know whether a next page exists.
        with self.store.lock:
            items, unread = self.store.scan(
                t.res.plural,
                t.namespace,
                lambda o: labels(o) and fields(o),
                after=after,
                count=limit + 1 if limit else 0,
            )
            rv = self.store.resource_version
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if limit and len(items) > limit:
            items = items[:limit]
            lmd = items[-1]["metadata"]
            meta["continue"] = base64.urlsafe_b64encode(
                json.dumps({"ns": lmd.get("namespace") or "", "name": lmd["name"], "rv": rv}).encode()
            ).decode()
            # As kube-apiserver: the count only for an unfiltered list (a filtered one would have to be read whole).
            if not q(query, "labelSelector") and not q(query, "fieldSelector"):
                meta["remainingItemCount"] = unread + 1
        if tables.wants_table(headers.get("accept", "")):
            include = q(query, "includeObject", "") or ""
            return Response(200, tables.table(t.res, items, self.sim.clock.now(), meta, include, t.served_version))
        return Response(
            200, {"kind": f"{t.res.kind}List", "apiVersion": t.res.api_version, "metadata": meta, "items": items}
        )

    # ---- writes ------------------------------------------------------------------------------------------
    def create(self, t: Target, query: Query, headers: dict[str, str], body: bytes) -> Response:
        dry = write_options("CreateOptions", query)
        obj = self.admission.check_identity(t, read_json(body))
        # The creator owns every field it wrote (operation Update), as kube-apiserver records it.
        manager = fieldmanager.manager_from(q(query, "fieldManager"), headers.get("user-agent", ""))
        obj["metadata"]["managedFields"] = [fieldmanager.created(obj, manager, rfc3339(self.sim.clock.now()))]
        with self.store.lock:
            return self._create_admitted(t, obj, query, dry)

    def _create_admitted(self, t: Target, obj: dict, query: Query, dry: bool) -> Response:
        """Admission and store of a new object (create, or an apply that finds nothing); the store lock held. A dry
        run is admitted alike and answered as created; a generated name is drawn but not kept."""
        for dropped in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "generation"):
            obj["metadata"].pop(dropped, None)
        self.admission.require_namespace(t, creating=True)
        obj, warnings = self.admission.admit(t, obj, None, query, status_only=False)
        if not obj["metadata"].get("name"):
            obj["metadata"]["name"] = self.store.free_name(t.res.plural, t.namespace, obj["metadata"]["generateName"])
        try:
            created = self.store.create(t.res.plural, obj, dry_run=dry)
        except AlreadyExists as exc:
            raise already_exists(t.res, obj["metadata"]["name"]) from exc
        return self._settled(201, created, warnings, dry)

    def _write(
        self,
        t: Target,
        old: dict,
        new: dict,
        query: Query,
        headers: dict[str, str],
        dry: bool,
        applying: bool = False,
    ) -> Response:
        """Shared tail of update, patch and apply: field ownership, admission then store write (a dry run: the
        store's answer without the write); status kept or replaced per path."""
        if not applying:
            manager = fieldmanager.manager_from(q(query, "fieldManager"), headers.get("user-agent", ""))
            fieldmanager.track_update(old, new, manager, rfc3339(self.sim.clock.now()), t.sub)
        status_only = t.sub == "status"
        if t.sub not in (None, "status", "finalize"):
            raise method_not_allowed(t.sub)
        if status_only:
            final = copy.deepcopy(old)
            final["status"] = new.get("status")
            if final["status"] is None:
                final.pop("status")
            final["metadata"]["resourceVersion"] = new["metadata"].get("resourceVersion")
            if "managedFields" in new["metadata"]:
                final["metadata"]["managedFields"] = new["metadata"]["managedFields"]
        else:
            final = new
            if "status" in t.res.subresources:
                final.pop("status", None)
                if "status" in old:
                    final["status"] = copy.deepcopy(old["status"])
        final, warnings = self.admission.admit(t, final, old, query, status_only)
        try:
            if status_only:
                saved = self.store.update_status(t.res.plural, final, dry_run=dry)
            else:
                saved = self.store.update(t.res.plural, final, dry_run=dry)
        except Conflict as exc:
            raise conflict(t.res, t.name or "", str(exc)) from exc
        except NotFound as exc:
            raise not_found(t.res, t.name or "") from exc
        return self._settled(200, saved, warnings, dry)

    def update(self, t: Target, query: Query, headers: dict[str, str], body: bytes) -> Response:
        dry = write_options("UpdateOptions", query)
        obj = self.admission.check_identity(t, read_json(body))
        with self.store.lock:
            self.admission.require_namespace(t, creating=False)
            old = existing(self.store, t)
            return self._write(t, old, obj, query, headers, dry)

    def patch(self, t: Target, query: Query, headers: dict[str, str], body: bytes) -> Response:
        ctype = headers.get("content-type", "").split(";")[0].strip()
        accepted = "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
        if ctype != APPLY_PATCH and (
            (ctype == "application/strategic-merge-patch+json" and t.res.crd) or ctype not in PATCH_TYPES
        ):
            if not t.res.crd:
                accepted += ", application/strategic-merge-patch+json"
            raise APIError(
                415,
                f"the body of the request was in an unknown format - accepted media types include: {accepted}",
                "UnsupportedMediaType",
            )
        dry = write_options("PatchOptions", query, apply=ctype == APPLY_PATCH)
        if ctype == APPLY_PATCH:
            return self._apply(t, query, headers, body, dry)
        patch = read_json(body)
        with self.store.lock:
            old = existing(self.store, t)
            try:
                if ctype == "application/json-patch+json":
                    new = json_patch(old, patch)
                elif ctype == "application/merge-patch+json":
                    new = merge_patch(old, patch)
                else:
                    new = strategic_merge_patch(old, patch)
            except PatchError as exc:
                raise APIError(422, str(exc), "Invalid") from exc
            if not isinstance(patch, list) and not (
                isinstance(patch, dict) and "resourceVersion" in (patch.get("metadata") or {})
            ):
                new.setdefault("metadata", {})["resourceVersion"] = old["metadata"]["resourceVersion"]
            new = self.admission.check_identity(t, new)
            return self._write(t, old, new, query, headers, dry)

    def _apply(self, t: Target, query: Query, headers: dict[str, str], body: bytes, dry: bool) -> Response:
        """Server-side apply (kubesim.apiserver.storage.fieldmanager): creates the object when it does not exist."""
        try:
            applied = yaml.safe_load(body or b"")
        except yaml.YAMLError as exc:
            raise bad_request(f"error decoding YAML: {exc}") from exc
        if not isinstance(applied, dict) or not applied.get("apiVersion") or not applied.get("kind"):
            raise bad_request("an apply patch must be an object with apiVersion and kind")
        manager = q(query, "fieldManager") or ""
        applied = self.admission.check_identity(t, applied)
        now = rfc3339(self.sim.clock.now())
        force = truthy(q(query, "force"))
        with self.store.lock:
            live = self.store.get(t.res.plural, t.namespace, t.name or "")
            if live is None:
                if t.sub is not None:
                    raise not_found(t.res, t.name or "")
                obj = fieldmanager.apply(None, applied, manager, force, now)
                return self._create_admitted(t, obj, query, dry)
            want_rv = applied["metadata"].get("resourceVersion")
            if want_rv and want_rv != live["metadata"]["resourceVersion"]:
                raise conflict(
                    t.res,
                    t.name or "",
                    "the object has been modified; please apply your changes to the latest version and try again",
                )
            new = fieldmanager.apply(live, applied, manager, force, now, t.sub)
            new["metadata"]["resourceVersion"] = live["metadata"]["resourceVersion"]
            return self._write(t, live, self.admission.check_identity(t, new), query, headers, dry, applying=True)

    def scale(self, verb: str, t: Target, query: Query, headers: dict[str, str], body: bytes) -> Response:
        """The scale subresource (autoscaling/v1 Scale) of a Deployment or LeaderWorkerSet: spec.replicas read and
        written through it."""
        whole = Target(t.res, t.namespace, t.name, None, requester=t.requester)
        with self.store.lock:
            obj = existing(self.store, whole)
            if verb == "get":
                return Response(200, _scale_of(obj))
            if verb not in ("update", "patch"):
                raise method_not_allowed(verb)
            dry = write_options("UpdateOptions" if verb == "update" else "PatchOptions", query)
            current = _scale_of(obj)
            ctype = headers.get("content-type", "").split(";")[0].strip()
            try:
                if verb == "update":
                    wanted = read_json(body)
                elif ctype == "application/json-patch+json":
                    wanted = json_patch(current, read_json(body))
                else:
                    wanted = merge_patch(current, read_json(body))
            except PatchError as exc:
                raise APIError(422, str(exc), "Invalid") from exc
            replicas = ((wanted or {}).get("spec") or {}).get("replicas") if isinstance(wanted, dict) else None
            if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
                cause = Cause("spec.replicas", "FieldValueInvalid", "must be greater than or equal to 0")
                raise APIError(
                    422,
                    f'Scale.autoscaling "{t.name}" is invalid: spec.replicas: Invalid value: {replicas}: must be '
                    "greater than or equal to 0",
                    "Invalid",
                    {"name": t.name, "group": "autoscaling", "kind": "Scale", "causes": [cause.as_dict()]},
                )
            new = copy.deepcopy(obj)
            new["spec"]["replicas"] = replicas
            saved = self._write(whole, obj, new, query, headers, dry)
            return Response(200, _scale_of(saved.body), warnings=saved.warnings)

    # ---- deletes -----------------------------------------------------------------------------------------
    def _delete_options(self, query: Query, body: bytes) -> dict:
        """DeleteOptions as kube-apiserver reads them: from the body when the request has one (its query is then
        ignored), else from the query; checked as apimachinery's ValidateDeleteOptions checks them."""
        if body:
            opts = read_json(body)
            if opts is None:
                opts = {}
            if not isinstance(opts, dict):
                raise bad_request("the request body must be a DeleteOptions object")
        else:
            opts = {}
            if q(query, "propagationPolicy") is not None:
                opts["propagationPolicy"] = q(query, "propagationPolicy")
            if q(query, "orphanDependents") is not None:
                opts["orphanDependents"] = truthy(q(query, "orphanDependents"))
            if q(query, "gracePeriodSeconds") is not None:
                opts["gracePeriodSeconds"] = q(query, "gracePeriodSeconds")
            if "dryRun" in query:
                opts["dryRun"] = query["dryRun"]
        causes = []
        policy = opts.get("propagationPolicy")
        if policy is not None and opts.get("orphanDependents") is not None:
            why = "orphanDependents and deletionPropagation cannot be both set"
            causes.append(Cause("propagationPolicy", "FieldValueInvalid", f'Invalid value: "{policy}": {why}'))
        if policy is not None and policy not in ("Orphan", "Background", "Foreground"):
            message = f'Unsupported value: "{policy}": supported values: "Foreground", "Background", "Orphan", "nil"'
            causes.append(Cause("propagationPolicy", "FieldValueNotSupported", message))
        grace = opts.get("gracePeriodSeconds")
        if grace is not None:
            try:
                opts["gracePeriodSeconds"] = int(grace)
            except (TypeError, ValueError):
                raise bad_request(f'invalid gracePeriodSeconds "{grace}": an integer') from None
        causes += dry_run_problems(opts.get("dryRun") or [])
        if causes:
            raise options_invalid("DeleteOptions", causes)
        if opts.get("orphanDependents") is not None:
            opts["propagationPolicy"] = "Orphan" if opts["orphanDependents"] else "Background"
        return opts

    def delete(self, t: Target, query: Query, headers: dict[str, str], body: bytes) -> Response:
        if t.sub is not None:
            raise method_not_allowed(None)
        opts = self._delete_options(query, body)
        warnings = []
        policy = opts.get("propagationPolicy")
        if policy is None:
            # batch/v1 Jobs keep the legacy orphan default (kubectl sets Background explicitly).
            policy = "Orphan" if t.res.plural == "jobs" else "Background"
            if t.res.plural == "jobs":
                warnings.append(JOB_ORPHAN_WARNING)
        with self.store.lock:
            old = existing(self.store, t)
            pre = opts.get("preconditions") or {}
            if pre.get("uid") and pre["uid"] != old["metadata"]["uid"]:
                raise conflict(
                    t.res,
                    t.name or "",
                    f"Precondition failed: UID in precondition: {pre['uid']}, "
                    f"UID in object meta: {old['metadata']['uid']}",
                )
            if pre.get("resourceVersion") and pre["resourceVersion"] != old["metadata"]["resourceVersion"]:
                raise conflict(
                    t.res,
                    t.name or "",
                    "Precondition failed: ResourceVersion in precondition: "
                    f"{pre['resourceVersion']}, ResourceVersion in object meta: "
                    f"{old['metadata']['resourceVersion']}",
                )
            dry = bool(opts.get("dryRun"))
            try:
                result = self.store.delete(t.res.plural, t.namespace, t.name or "", policy, dry_run=dry,
                                           grace_seconds=opts.get("gracePeriodSeconds"))
            except NotFound as exc:
                raise not_found(t.res, t.name or "") from exc
            if not result["metadata"].get("deletionTimestamp") and t.res.plural not in RETURNS_DELETED_OBJECT:
                result = _deleted_status(t, result)
            return self._settled(200, result, warnings, dry)

    def delete_collection(self, t: Target, query: Query, headers: dict[str, str], body: bytes) -> Response:
        labels, fields = matchers(query)
        opts = self._delete_options(query, body)
        policy = opts.get("propagationPolicy") or ("Orphan" if t.res.plural == "jobs" else "Background")
        dry = bool(opts.get("dryRun"))
        with self.store.lock:
            items = [o for o in self.store.list(t.res.plural, t.namespace) if labels(o) and fields(o)]
            deleted = []
            for o in items:
                md = o["metadata"]
                try:
                    deleted.append(
                        self.store.delete(t.res.plural, md.get("namespace"), md["name"], policy, dry_run=dry,
                                          grace_seconds=opts.get("gracePeriodSeconds"))
                    )
                except NotFound:
                    continue
            if not dry:
                self.sim.after_write()
            return Response(
                200,
                {
                    "kind": f"{t.res.kind}List",
                    "apiVersion": t.res.api_version,
                    "metadata": {"resourceVersion": str(self.store.resource_version)},
                    "items": deleted,
                },
            )


def _deleted_status(t: Target, deleted: dict) -> dict:
    """The generic registry's answer to a delete that removed the object: Success, naming it (kind is the plural)."""
    details = {
        "name": deleted["metadata"]["name"],
        "group": t.res.group,
        "kind": t.res.plural,
        "uid": deleted["metadata"]["uid"],
    }
    if not details["group"]:
        del details["group"]
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}


def _scale_of(obj: dict) -> dict:
    md = obj["metadata"]
    selector = ((obj.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    shown = (obj.get("status") or {}).get("hpaPodSelector")  # a LeaderWorkerSet's scale selector path
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {k: md[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp") if k in md},
        "spec": {"replicas": (obj.get("spec") or {}).get("replicas", 1)},
        "status": {
            "replicas": (obj.get("status") or {}).get("replicas", 0),
            "selector": shown or ",".join(f"{k}={v}" for k, v in sorted(selector.items())),
        },
    }
