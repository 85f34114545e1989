"""Kueue's ProvisioningRequest admission check (controllerName kueue.x-k8s.io/provisioning-request) on kubesim's
store, with kubesim standing in for the cluster autoscaler that answers the requests.

Behaviour learned from Kueue v0.20's pkg/controller/admissionchecks/provisioning (written here in kubesim's own
structure): the check is Active only while its parameters name an existing ProvisioningRequestConfig; on quota
reservation one ProvisioningRequest `<workload>-<check>-<attempt>` is created per check that needs one, with one
PodTemplate `ppt-<request>-<podset>` per pod set (pod sets alike under the config's podSetMergePolicy share the
first one's; each template is the pod set's own with its flavors' node labels and tolerations merged in); the
request's conditions drive the check (Provisioned -> Ready with podSetUpdates, Failed / BookingExpired before
admission -> Retry with backoff while the attempt is within the config's backoffLimitCount, then Rejected,
CapacityRevoked -> Rejected, also after admission); requests of a finished or evicted workload
(CleanupProvisioningRequestsOnEviction) and requests no longer in use are deleted; a Ready check keeps its state
when its request is deleted (a running workload goes on). Kueue watches Workloads, their requests, AdmissionChecks
and configs, never PodTemplates: a template another client changes or deletes is left so, and the request stands.
Kueue's "inconsistent podSet assignments" error (a covered pod set without an assignment) has no counterpart: the
Workload CRD's rules (one assignment per pod set while QuotaReserved, names unique, each naming a pod set) keep such
an admission from being stored."""

from __future__ import annotations

import hashlib
import re
from datetime import datetime, timedelta

from kubesim.kernel.quantity import decimal_value
from kubesim.kernel.store import Store
from kubesim.kueue import constants as C
from kubesim.kueue import workload_status as ws
from kubesim.kueue.cache import clone
from kubesim.kueue.config import KueueConfig
from kubesim.kueue.features import CLEANUP_PROVISIONING_REQUESTS_ON_EVICTION
from kubesim.kueue.integrations.podsets import PodSetConflict, PodSetInfo, merge_into
from kubesim.kueue.scheduler.model import EPOCH, condition_true, parse_time

CONFIG_KIND = "ProvisioningRequestConfig"
INACTIVE = "the check is not active"
NOT_NEEDED = "the provisioning request is not needed"
CLASS_ANNOTATION = "autoscaling.x-k8s.io/provisioning-class-name"
PARAM_ANNOTATION_PREFIX = "provreq.kueue.x-k8s.io/"
MANAGED_LABEL = "kueue.x-k8s.io/managed"
AUTOSCALING_API = "autoscaling.x-k8s.io/v1"
_HASH = 5
_MAX_PREFIX = 252 - _HASH


def limit_name(name: str) -> str:
    """Kueue's limitObjectName: a name longer than 247 characters is cut there and ends in `-` and the first five
    hex digits of the full name's SHA-1."""
    if len(name) <= _MAX_PREFIX:
        return name
    digest = hashlib.sha1(name.encode()).hexdigest()[:_HASH]  # noqa: S324 (a name, not a secret)
    return f"{name[:_MAX_PREFIX]}-{digest}"


def request_name(workload: str, check: str, attempt: int) -> str:
    return limit_name(f"{workload}-{check}-{attempt}")


def template_name(request: str, podset: str) -> str:
    return limit_name(f"ppt-{request}-{podset}")


def attempt_of(name: str, workload: str, check: str) -> int | None:
    """The attempt a request name carries for this workload and check; None when it belongs to neither."""
    m = re.fullmatch(re.escape(limit_name(f"{workload}-{check}-")) + r"([0-9]+)", name)
    return int(m.group(1)) if m else None


def _true(obj: dict, ctype: str) -> dict | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype and c.get("status") == "True":
            return c
    return None


def config_for(store: Store, check: dict) -> tuple[dict | None, str]:
    """The ProvisioningRequestConfig an AdmissionCheck's parameters name, or None and why not."""
    ref = (check.get("spec") or {}).get("parameters")
    if not ref:
        return None, "missing parameters reference"
    if not ref.get("name"):
        return None, "empty name: bad parameters reference"
    if ref.get("apiGroup") != C.KUEUE_GROUP:
        return None, f'wrong group "{ref.get("apiGroup", "")}", expecting "{C.KUEUE_GROUP}": bad parameters reference'
    if ref.get("kind") != CONFIG_KIND:
        return None, f'wrong kind "{ref.get("kind", "")}", expecting "{CONFIG_KIND}": bad parameters reference'
    prc = store.get("provisioningrequestconfigs", None, ref["name"], copy=False)
    if prc is None:
        return None, f'provisioningrequestconfigs.{C.KUEUE_GROUP} "{ref["name"]}" not found'
    return prc, ""


def _retry(prc: dict) -> tuple[int, int, int]:
    rs = (prc.get("spec") or {}).get("retryStrategy") or {}
    return (
        int(rs.get("backoffLimitCount", 3)),
        int(rs.get("backoffBaseSeconds", 60)),
        int(rs.get("backoffMaxSeconds", 1800)),
    )


def _uses(podset: dict, resources: set[str]) -> bool:
    spec = (podset.get("template") or {}).get("spec") or {}
    for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        r = c.get("resources") or {}
        if resources & (set(r.get("requests") or {}) | set(r.get("limits") or {})):
            return True
    return False


def _needed_podsets(wl: dict, prc: dict) -> list[tuple[dict, dict, int]]:
    """The pod sets the request covers, each with its assignment and admitted count: count above zero, using a
    managed resource (any when the config manages none)."""
    managed = set((prc.get("spec") or {}).get("managedResources") or [])
    assignments = {
        a.get("name"): a for a in ((wl.get("status") or {}).get("admission") or {}).get("podSetAssignments") or []
    }
    out = []
    for ps in (wl.get("spec") or {}).get("podSets") or []:
        count = int(ps.get("count", 1))
        if count <= 0 or (managed and not _uses(ps, managed)):
            continue
        psa = assignments.get(ps.get("name"))
        if psa is None:
            continue
        admitted = int(psa["count"]) if psa.get("count") is not None else count
        if admitted > 0:
            out.append((ps, psa, admitted))
    return out


def _merged_podsets(wl: dict, prc: dict) -> list[tuple[dict, dict, int]]:
    """The request's pod sets: the needed ones, those the config's podSetMergePolicy finds alike folded into the
    first of them (its template, assignment and name; their counts added)."""
    policy = (prc.get("spec") or {}).get("podSetMergePolicy")
    merged: list[tuple[dict, dict, int]] = []
    for ps, psa, count in _needed_podsets(wl, prc):
        i = next((i for i, (first, _, _) in enumerate(merged) if policy and _alike(first, ps, policy)), None)
        if i is None:
            merged.append((ps, psa, count))
        else:
            first, first_psa, total = merged[i]
            merged[i] = (first, first_psa, total + count)
    return merged


def _alike(a: dict, b: dict, policy: str) -> bool:
    """IdenticalPodTemplates: the whole pod templates are equal. IdenticalWorkloadSchedulingRequirements: what the
    autoscaler schedules by is equal (each container's requests, pod-level resources, nodeSelector, tolerations,
    affinity, resource claims); names, images, labels and priority class may differ."""
    ta, tb = _canonical(a.get("template") or {}), _canonical(b.get("template") or {})
    if policy == "IdenticalPodTemplates":
        return ta == tb
    if policy != "IdenticalWorkloadSchedulingRequirements":
        return False
    sa, sb = ta.get("spec") or {}, tb.get("spec") or {}
    for kind in ("containers", "initContainers"):
        ca, cb = sa.get(kind) or [], sb.get(kind) or []
        if len(ca) != len(cb) or any(
            ((x.get("resources") or {}).get("requests") or {}) != ((y.get("resources") or {}).get("requests") or {})
            for x, y in zip(ca, cb, strict=True)
        ):
            return False
    fields = ("resources", "nodeSelector", "tolerations", "affinity", "resourceClaims")
    return all((sa.get(f) or None) == (sb.get(f) or None) for f in fields)


def _canonical(template: dict) -> dict:
    """A pod template with its containers' quantities as numbers, so `1` and `1000m` compare equal (Kueue compares
    with apimachinery's semantic equality)."""
    out = clone(template)
    spec = out.get("spec") or {}
    for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        for part in ("requests", "limits"):
            values = (c.get("resources") or {}).get(part)
            if values:
                c["resources"][part] = {k: decimal_value(v) for k, v in values.items()}
    return out


def _synced(pr: dict, prc: dict) -> bool:
    spec, cfg = pr.get("spec") or {}, prc.get("spec") or {}
    if spec.get("provisioningClassName") != cfg.get("provisioningClassName"):
        return False
    params = spec.get("parameters") or {}
    return all(params.get(k) == v for k, v in (cfg.get("parameters") or {}).items())


class Provisioning:
    """The provisioning check's part of a Workload reconcile, and kubesim's cluster-autoscaler stand-in."""

    def __init__(self, config: KueueConfig) -> None:
        self.config = config

    # -- AdmissionCheck Active ---------------------------------------------------------------------------------

    def activate(self, store: Store, checks: list[dict], now: datetime) -> bool:
        wrote = False
        for obj in checks:
            if (obj.get("spec") or {}).get("controllerName") != C.PROVISIONING_CONTROLLER:
                continue
            prc, why = config_for(store, obj)
            status, reason, message = ("True", "Active", "The admission check is active")
            if prc is None:
                status, reason, message = "False", "BadParametersRef", why
            new = clone(obj)
            if not ws.set_condition(new, "Active", status, reason, message, now):
                continue  # as it is (a reason or message changing under the same status is written too)
            store.update_status("admissionchecks", new)
            wrote = True
        return wrote

    # -- requests of one workload ---------------------------------------------------------------------------------

    @staticmethod
    def owned(store: Store, wl: dict) -> list[dict]:
        uid = wl["metadata"].get("uid")
        return [obj for _, obj in store.dependents(uid, "provisioningrequests")] if uid else []

    def cleanup(self, store: Store, wl: dict) -> bool:
        """A finished workload, or an evicted one (CleanupProvisioningRequestsOnEviction), loses its requests."""
        cleanup = self.config.enabled(CLEANUP_PROVISIONING_REQUESTS_ON_EVICTION)
        if not (condition_true(wl, C.FINISHED) or (cleanup and condition_true(wl, C.EVICTED))):
            return False
        wrote = False
        for pr in self.owned(store, wl):
            store.delete("provisioningrequests", pr["metadata"]["namespace"], pr["metadata"]["name"])
            wrote = True
        return wrote

    def sync(self, store: Store, wl: dict, checks: dict[str, dict], now: datetime) -> bool:
        """wl: a reserved, not evicted, not finished Workload (a clone, changed in place); checks: the provisioning
        AdmissionChecks by name. Updates its check states, then deletes and creates requests."""
        name = wl["metadata"]["name"]
        owned = self.owned(store, wl)
        configs: dict[str, dict | None] = {}
        for state in wl["status"].get("admissionChecks") or []:
            ac = checks.get(state.get("name", ""))
            if ac is not None:
                configs[state["name"]] = config_for(store, ac)[0]
        last: dict[str, dict] = {}
        for check, prc in configs.items():
            if prc is None or not _needed_podsets(wl, prc):
                continue
            for pr in owned:
                attempt = attempt_of(pr["metadata"]["name"], name, check)
                if attempt is None or not _synced(pr, prc):
                    continue
                if check not in last or (attempt_of(last[check]["metadata"]["name"], name, check) or 0) < attempt:
                    last[check] = pr
        changed = False
        for check, prc in configs.items():
            changed = self._check_state(store, wl, check, prc, last.get(check), now) or changed
        keep = {pr["metadata"]["name"] for pr in last.values()}
        for pr in owned:
            if pr["metadata"]["name"] not in keep:
                store.delete("provisioningrequests", pr["metadata"]["namespace"], pr["metadata"]["name"])
        for check, prc in configs.items():
            if prc is not None:
                changed = self._create(store, wl, check, prc, last.get(check), now) or changed
        return changed

    def _check_state(
        self, store: Store, wl: dict, check: str, prc: dict | None, pr: dict | None, now: datetime
    ) -> bool:
        state = next(c for c in wl["status"]["admissionChecks"] if c["name"] == check)
        before = dict(state)
        extra: dict[str, object]
        if prc is None:
            new_state, message, extra = C.CHECK_PENDING, INACTIVE, {}
        elif not _needed_podsets(wl, prc):
            if state.get("state") == C.CHECK_READY:
                return False
            new_state, message, extra = C.CHECK_READY, NOT_NEEDED, {}
            state.pop("podSetUpdates", None)
        elif pr is None:
            return False
        else:
            res = self._from_request(wl, check, prc, pr, state, now)
            if res is None:
                return False
            new_state, message, extra = res
        ws.set_check_state(wl, check, new_state, message, now, **extra)
        if before.get("state") != new_state:
            text = f"Admission check {check} updated state from {before.get('state')} to {new_state}"
            if message:
                text += f" with message: {message}"
            store.record_event(wl, "Normal", "AdmissionCheckUpdated", text[:1024], C.CONTROLLER_NAME)
        return state != before

    def _from_request(
        self, wl: dict, check: str, prc: dict, pr: dict, state: dict, now: datetime
    ) -> tuple[str, str, dict] | None:
        """The check state a request's conditions call for (None: leave it)."""
        limit, base, cap = _retry(prc)
        attempt = attempt_of(pr["metadata"]["name"], wl["metadata"]["name"], check) or 1
        retries = int(state.get("retryCount") or 0)
        current = state.get("state", C.CHECK_PENDING)

        def retry_or_reject(cond: dict, what: str) -> tuple[str, str, dict]:
            if attempt > limit:
                return C.CHECK_REJECTED, cond.get("message", ""), {}
            message = f"Retrying after {what}: {cond.get('message', '')}"
            if attempt > retries:
                wait = min(base * 2**retries, cap)  # base * 2^(n-1) for the n-th requeue, capped
                return C.CHECK_RETRY, message, {"requeueAfterSeconds": int(wait)}
            return current, message, {}

        if failed := _true(pr, "Failed"):
            return retry_or_reject(failed, "failure")
        if revoked := _true(pr, "CapacityRevoked"):
            if not (wl.get("spec") or {}).get("active", True) or condition_true(wl, C.FINISHED):
                return None
            return C.CHECK_REJECTED, revoked.get("message", ""), {}
        if expired := _true(pr, "BookingExpired"):
            if condition_true(wl, C.ADMITTED):
                return None
            return retry_or_reject(expired, "booking expired")
        if provisioned := _true(pr, "Provisioned"):
            if current == C.CHECK_READY:
                return None
            return C.CHECK_READY, provisioned.get("message", ""), {"podSetUpdates": self._updates(wl, pr, prc)}
        if _true(pr, "Accepted"):
            cond = next((c for c in pr["status"]["conditions"] if c["type"] == "Provisioned"), None)
            if cond is None:
                return None
            return C.CHECK_PENDING, cond.get("message", ""), {}
        return C.CHECK_PENDING, "", {}

    @staticmethod
    def _updates(wl: dict, pr: dict, prc: dict) -> list[dict]:
        by_template = {
            template_name(pr["metadata"]["name"], ps.get("name", "")): ps.get("name", "")
            for ps in (wl.get("spec") or {}).get("podSets") or []
        }
        details = (pr.get("status") or {}).get("provisioningClassDetails") or {}
        selectors = (((prc.get("spec") or {}).get("podSetUpdates") or {}).get("nodeSelector")) or None
        out = []
        for ps in pr["spec"].get("podSets") or []:
            update: dict = {
                "name": by_template.get(ps["podTemplateRef"]["name"], ""),
                "annotations": {
                    C.CONSUME_PROVISIONING_REQUEST: pr["metadata"]["name"],
                    CLASS_ANNOTATION: pr["spec"].get("provisioningClassName", ""),
                },
            }
            node_selector = {
                s["key"]: details[s["valueFromProvisioningClassDetail"]]
                for s in selectors or []
                if s.get("valueFromProvisioningClassDetail") in details
            }
            if node_selector:  # an empty map is omitted, as Go's omitempty drops it
                update["nodeSelector"] = node_selector
            out.append(update)
        return out

    def _create(self, store: Store, wl: dict, check: str, prc: dict, last: dict | None, now: datetime) -> bool:
        """Creates the check's next request when one is due, after its PodTemplates (each owned by the Workload
        until the request exists, then passed to it), as Kueue does. A template whose flavors' node labels clash
        with its own nodeSelector is not made, nor are the request and the templates after it (those before it
        stay, the Workload's); a request of that name that is not the Workload's is not replaced: the check's
        message and a FailedCreate event say why. True when the check changed."""
        podsets = _merged_podsets(wl, prc)
        if not podsets:
            return False
        state = next(c for c in wl["status"]["admissionChecks"] if c["name"] == check)
        if state.get("state") == C.CHECK_READY:
            return False
        name = wl["metadata"]["name"]
        attempt = int(state.get("retryCount") or 0) + 1
        if last is not None:
            retry = _true(last, "Failed") or (_true(last, "BookingExpired") and not condition_true(wl, C.ADMITTED))
            if not (retry and state.get("state") == C.CHECK_PENDING):
                return False
            attempt = (attempt_of(last["metadata"]["name"], name, check) or 1) + 1
        ns = wl["metadata"]["namespace"]
        pr_name = request_name(name, check, attempt)
        spec = prc.get("spec") or {}
        params = dict(spec.get("parameters") or {})
        for key, value in (wl["metadata"].get("annotations") or {}).items():
            if key.startswith(PARAM_ANNOTATION_PREFIX):
                params[key[len(PARAM_ANNOTATION_PREFIX) :]] = value
        request_podsets = []
        for ps, psa, count in podsets:
            pt_name = template_name(pr_name, ps.get("name", ""))
            request_podsets.append({"podTemplateRef": {"name": pt_name}, "count": count})
            if store.get("podtemplates", ns, pt_name, copy=False) is not None:
                continue
            try:
                template = _pod_template(store, ns, pt_name, ps, psa)
            except PodSetConflict as exc:
                return self._failed(store, wl, state, f'Error creating PodTemplate "{pt_name}": {exc}', now)
            # owned by the Workload until the request exists, so a template is not left behind if it is never made
            template["metadata"]["ownerReferences"] = [_owner(wl, "kueue.x-k8s.io/v1beta2", "Workload")]
            store.create("podtemplates", template)
        if store.get("provisioningrequests", ns, pr_name, copy=False) is not None:  # not this workload's own
            why = f'provisioningrequests.autoscaling.x-k8s.io "{pr_name}" already exists'
            return self._failed(store, wl, state, f'Error creating ProvisioningRequest "{pr_name}": {why}', now)
        request = {
            "apiVersion": AUTOSCALING_API,
            "kind": "ProvisioningRequest",
            "metadata": {
                "name": pr_name,
                "namespace": ns,
                "labels": {MANAGED_LABEL: "true"},
                "ownerReferences": [_owner(wl, "kueue.x-k8s.io/v1beta2", "Workload")],
            },
            "spec": {
                "provisioningClassName": spec.get("provisioningClassName", ""),
                "parameters": params,
                "podSets": request_podsets,
            },
        }
        created = store.create("provisioningrequests", request)
        store.record_event(
            wl, "Normal", "ProvisioningRequestCreated", f'Created ProvisioningRequest: "{pr_name}"', C.CONTROLLER_NAME
        )
        _adopt_templates(store, wl, created)
        return False

    @staticmethod
    def _failed(store: Store, wl: dict, state: dict, message: str, now: datetime) -> bool:
        """A template or request that could not be made: a FailedCreate event, and the check's message says why
        (its state kept). True when the check changed."""
        store.record_event(wl, "Warning", "FailedCreate", message[:1024], C.CONTROLLER_NAME)
        return ws.set_check_state(wl, state["name"], state.get("state", C.CHECK_PENDING), message[:1024], now)

    # -- the cluster autoscaler stand-in ------------------------------------------------------------------------

    def autoscale(self, store: Store, now: datetime) -> bool:
        """Accept each request kubesim has not answered yet, and mark it Provisioned once the delay since its
        creation has passed."""
        if not self.config.provisioning_autoscaler:
            return False
        wrote = False
        for pr in store.list("provisioningrequests", None, copy=False):
            conds = (pr.get("status") or {}).get("conditions") or []
            if any(c["type"] in ("Provisioned", "Failed") and c["status"] == "True" for c in conds):
                continue
            name = pr["metadata"]["name"]
            new = clone(pr)
            if self._provisioned_at(pr) <= now:
                ws.set_condition(new, "Accepted", "True", "Accepted", "The request was accepted", now)
                ws.set_condition(
                    new, "Provisioned", "True", "Provisioned", f"ProvisioningRequest {name} is provisioned", now
                )
            elif not any(c["type"] == "Accepted" for c in conds):
                ws.set_condition(new, "Accepted", "True", "Accepted", "The request was accepted", now)
                waiting = f"Waiting for ProvisioningRequest {name} to be provisioned"
                ws.set_condition(new, "Provisioned", "False", "Waiting", waiting, now)
            else:
                continue
            store.update_status("provisioningrequests", new)
            wrote = True
        return wrote

    def _provisioned_at(self, pr: dict) -> datetime:
        created = parse_time(pr["metadata"].get("creationTimestamp")) or EPOCH
        return created + timedelta(seconds=self.config.provisioning_delay_seconds)

    def next_deadline(self, store: Store, now: datetime) -> datetime | None:
        if not self.config.provisioning_autoscaler:
            return None
        times = [
            at
            for pr in store.list("provisioningrequests", None, copy=False)
            if not _true(pr, "Provisioned") and not _true(pr, "Failed") and (at := self._provisioned_at(pr)) > now
        ]
        return min(times) if times else None


def _owner(obj: dict, api_version: str, kind: str) -> dict:
    md = obj["metadata"]
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": md["name"],
        "uid": md.get("uid", ""),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _adopt_templates(store: Store, wl: dict, request: dict) -> None:
    """The request's PodTemplates pass to it: the Workload's controller reference is dropped and the request's set,
    unless another object controls the template (Kueue's syncProvisionRequestsPodTemplates; a missing template is
    not made again)."""
    ns = request["metadata"]["namespace"]
    wl_uid, pr_uid = wl["metadata"].get("uid"), request["metadata"].get("uid")
    for ps in request["spec"].get("podSets") or []:
        pt = store.get("podtemplates", ns, ps["podTemplateRef"]["name"], copy=False)
        if pt is None:
            continue
        refs = pt["metadata"].get("ownerReferences") or []
        kept = [r for r in refs if not (r.get("controller") and r.get("uid") == wl_uid)]
        controller = next((r for r in kept if r.get("controller")), None)
        if controller is not None and controller.get("uid") != pr_uid:
            continue  # another controller's: Kueue's reconcile fails there and leaves it
        if controller is None:
            kept.append(_owner(request, AUTOSCALING_API, "ProvisioningRequest"))
        if kept != refs:
            new = clone(pt)
            new["metadata"]["ownerReferences"] = kept
            store.update("podtemplates", new)


def _pod_template(store: Store, ns: str, name: str, ps: dict, psa: dict) -> dict:
    """The pod set's template as the request's pods: all of it (affinity, tolerations, priority class, ...) with
    what its assigned flavors add merged in as Kueue merges it into a job (node labels as nodeSelector, their
    tolerations; podset.FromAssignment), and limits standing for the requests a container leaves out. Raises
    PodSetConflict when a flavor's node label clashes with the template's nodeSelector."""
    template = clone(ps.get("template") or {})
    info = PodSetInfo(name=ps.get("name", ""), count=int(psa.get("count") or ps.get("count", 1)))
    for flavor in sorted(set((psa.get("flavors") or {}).values())):
        rf = ((store.get("resourceflavors", None, flavor, copy=False) or {}).get("spec")) or {}
        info.node_selector.update(rf.get("nodeLabels") or {})
        info.tolerations += clone(rf.get("tolerations") or [])
    merge_into(template, info)
    spec = template.get("spec") or {}
    for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        res = c.setdefault("resources", {})
        limits = res.get("limits") or {}
        if limits:  # limits stand for the requests a container leaves out
            res["requests"] = {**limits, **(res.get("requests") or {})}
    return {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": name, "namespace": ns, "labels": {MANAGED_LABEL: "true"}},
        "template": template,
    }
