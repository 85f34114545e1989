"""The JobSet operator's admission webhooks (sigs.k8s.io/jobset v0.12.0, default feature gates: InPlaceRestart,
RestartJob and ElasticJobSet off): mjobset.kb.io defaults a new JobSet, vjobset.kb.io validates creates and updates.

Its refusals are apierrors.NewInvalid, which the API server relays with their code and causes: 422 Invalid,
`admission webhook "vjobset.kb.io" denied the request: JobSet.jobset.x-k8s.io "<name>" is invalid: <errors>`.
On update the replicatedJobs are immutable, except that while the JobSet is (or is being) suspended their pod
templates' labels, annotations, nodeSelector, tolerations and scheduling gates may change: what Kueue writes.
"""

from __future__ import annotations

import json
import re

from kubesim.kernel.metadata import (
    DNS1035_LABEL,
    DNS1035_LABEL_ERROR,
    DNS1123_SUBDOMAIN,
    LABEL_VALUE,
    LABEL_VALUE_ERROR,
    SUBDOMAIN_ERROR,
    Cause,
    field_value,
)

MUTATING, VALIDATING = "mjobset.kb.io", "vjobset.kb.io"
MAX_INT32 = 2**31 - 1
MAX_MANAGED_BY = 63
JOB_FAILURE_REASONS = (
    "BackoffLimitExceeded",
    "DeadlineExceeded",
    "FailedIndexes",
    "MaxFailedIndexesExceeded",
    "PodFailurePolicy",
)
RULE_NAME = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
_PATH_CHARS = re.compile(r"^[A-Za-z0-9/\-._~%!$&'()*+,;=:]+$")
COORDINATOR = "jobset.sigs.k8s.io/coordinator"


def _spec(obj: dict) -> dict:
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else {}


def _rjobs(obj: dict) -> list[dict]:
    return [rj for rj in _spec(obj).get("replicatedJobs") or [] if isinstance(rj, dict)]


def _job_spec(rj: dict) -> dict:
    return ((rj.get("template") or {}).get("spec")) or {}


def _internal(message: str) -> Cause:
    """A plain error the webhook wraps as field.InternalError without a path."""
    return Cause("", "InternalError", f"Internal error: {message}")


def _invalid(path: str, value: object, message: str) -> Cause:
    return Cause(path, "FieldValueInvalid", f"Invalid value: {field_value(value)}: {message}")


def _dns1035(value: str, too_long: str | None = None) -> list[str]:
    """IsDNS1035Label's messages; JobSet swaps the length message for its own."""
    out = []
    if len(value) > 63:
        out.append(too_long or "must be no more than 63 characters")
    if not DNS1035_LABEL.match(value):
        out.append(DNS1035_LABEL_ERROR)
    return out


def default(obj: dict) -> None:
    """Default(): success policy All, startup policy AnyOrder, Indexed child Jobs whose pods restart OnFailure, DNS
    hostnames (and not-ready addresses) on, failure policy rule names, volume claim retention Delete."""
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    spec.setdefault("successPolicy", {"operator": "All"})
    spec.setdefault("startupPolicy", {"startupPolicyOrder": "AnyOrder"})
    for rj in _rjobs(obj):
        job_spec = rj.setdefault("template", {}).setdefault("spec", {})
        job_spec.setdefault("completionMode", "Indexed")
        pod_spec = job_spec.setdefault("template", {}).setdefault("spec", {})
        if not pod_spec.get("restartPolicy"):
            pod_spec["restartPolicy"] = "OnFailure"
    network = spec.setdefault("network", {})
    network.setdefault("enableDNSHostnames", True)
    network.setdefault("publishNotReadyAddresses", True)
    for i, rule in enumerate((spec.get("failurePolicy") or {}).get("rules") or []):
        if not rule.get("name"):
            rule["name"] = f"failurePolicyRule{i}"
    for policy in spec.get("volumeClaimPolicies") or []:
        policy.setdefault("retentionPolicy", {"whenDeleted": "Delete"})


def validate(obj: dict, old: dict | None) -> list[Cause]:
    return _on_create(obj) if old is None else _on_update(old, obj)


def _on_create(js: dict) -> list[Cause]:
    """ValidateCreate."""
    spec, name, errors = _spec(js), (js.get("metadata") or {}).get("name", ""), []
    failure = spec.get("failurePolicy") or {}
    if failure.get("restartStrategy") == "InPlaceRestart":
        errors.append(
            _internal("InPlaceRestart restart strategy cannot be set when InPlaceRestart feature gate is disabled")
        )
    rjobs = _rjobs(js)
    if rjobs and rjobs[0].get("dependsOn") is not None:
        errors.append(_internal("DependsOn can't be set for the first ReplicatedJob"))
    errors += _subdomain(spec)
    errors += _managed_by(spec)
    names: set[str] = set()
    for i, rj in enumerate(rjobs):
        names.add(rj.get("name", ""))
        errors += _replicated_job(name, rj, f"spec.replicatedJobs[{i}]", names)
    for target in (spec.get("successPolicy") or {}).get("targetReplicatedJobs") or []:
        if target not in names:
            errors.append(_internal(f"invalid replicatedJob name '{target}' does not appear in .spec.ReplicatedJobs"))
    if spec.get("failurePolicy") is not None:
        errors += _failure_policy(failure, rjobs, names)
    if spec.get("coordinator") is not None:
        errors += _coordinator(js, spec["coordinator"], rjobs)
    return errors


def _subdomain(spec: dict) -> list[Cause]:
    value = (spec.get("network") or {}).get("subdomain") or ""
    if not value:
        return []
    path, out = "spec.network.subdomain", []
    if len(value) > 253:
        out.append(_invalid(path, value, "must be no more than 253 characters"))
    if not DNS1123_SUBDOMAIN.match(value):
        out.append(_invalid(path, value, SUBDOMAIN_ERROR))
    too_long = ".spec.network.subdomain is too long, must be less than 63 characters"
    return out + [_invalid(path, value, m) for m in _dns1035(value, too_long)]


def _managed_by(spec: dict) -> list[Cause]:
    manager = spec.get("managedBy")
    if manager is None:
        return []
    path, out = "spec.managedBy", []
    host, slash, rest = manager.partition("/")
    if not slash:
        out.append(_invalid(path, manager, 'must be a domain-prefixed path (such as "acme.io/foo")'))
    else:
        if len(host) > 253 or not DNS1123_SUBDOMAIN.match(host):
            out.append(_invalid(path, host, SUBDOMAIN_ERROR))
        if not _PATH_CHARS.match(rest):
            out.append(_invalid(path, rest, "Invalid path"))
    if len(manager) > MAX_MANAGED_BY:
        out.append(Cause(path, "FieldValueTooLong", f"Too long: may not be more than {MAX_MANAGED_BY} bytes"))
    return out


def _replicated_job(js_name: str, rj: dict, path: str, names: set[str]) -> list[Cause]:
    out: list[Cause] = []
    rj_name, replicas = rj.get("name", ""), int(rj.get("replicas", 1))
    job_spec = _job_spec(rj)
    parallelism = job_spec.get("parallelism")
    if (1 if parallelism is None else int(parallelism)) * replicas > MAX_INT32:
        out.append(
            _internal(
                f"the product of replicas and parallelism must not exceed {MAX_INT32} for replicatedJob '{rj_name}'"
            )
        )
    group = rj.get("groupName", "default")
    too_long = ".spec.replicatedJob[].groupName is too long, must be less than 63 characters"
    out += [_invalid(f"{path}.groupName", group, m) for m in _dns1035(group, too_long)]
    longest_job = f"{js_name}-{rj_name}-{replicas - 1}"
    too_long = "JobSet name is too long, job names generated for this JobSet will exceed 63 characters"
    out += [_invalid(f"{path}.name", longest_job, m) for m in _dns1035(longest_job, too_long)]
    completions = job_spec.get("completions")
    if job_spec.get("completionMode") == "Indexed" and completions is not None:
        longest_pod = f"{js_name}-{rj_name}-{replicas - 1}-{int(completions) - 1}-abcde"
        too_long = "JobSet name is too long, pod names generated for this JobSet will exceed 63 characters"
        out += [_invalid(f"{path}.name", longest_job, m) for m in _dns1035(longest_pod, too_long)]
    for dep in rj.get("dependsOn") or []:
        if dep.get("name") not in names:
            out.append(_internal(f"replicatedJob: {rj_name} cannot depend on replicatedJob: {dep.get('name')}"))
    return out


def _failure_policy(policy: dict, rjobs: list[dict], names: set[str]) -> list[Cause]:
    rules = policy.get("rules") or []
    if any(r.get("action") in ("RestartJob", "RestartJobAndIgnoreMaxRestarts") for r in rules):
        return [
            _internal(
                "RestartJob and RestartJobAndIgnoreMaxRestarts failure policy actions are not allowed when RestartJob "
                "feature gate is disabled"
            )
        ]
    out: list[Cause] = []
    by_name: dict[str, list[int]] = {}
    for i, rule in enumerate(rules):
        name = rule.get("name", "")
        if not 1 <= len(name) <= 128:
            out.append(
                _internal(
                    f"invalid failure policy rule name of length {len(name)}, the rule name must be at least 1 "
                    "characters long and at most 128 characters long"
                )
            )
        by_name.setdefault(name, []).append(i)
        if not RULE_NAME.match(name):
            out.append(
                _internal(
                    f"invalid failure policy rule name '{name}', a failure policy rule name must start with an "
                    "alphabetic character, optionally followed by a string of alphanumeric characters or '_,:', and "
                    "must end with an alphanumeric character or '_'"
                )
            )
        for target in rule.get("targetReplicatedJobs") or []:
            if target not in names:
                out.append(
                    _internal(
                        f"invalid replicatedJob name '{target}' in failure policy does not appear in "
                        ".spec.ReplicatedJobs"
                    )
                )
        for reason in rule.get("onJobFailureReasons") or []:
            if reason not in JOB_FAILURE_REASONS:
                out.append(
                    _internal(
                        f"invalid job failure reason '{reason}' in failure policy is not a recognized job failure "
                        "reason"
                    )
                )
    for name, indices in by_name.items():
        if len(indices) > 1:
            shown = "[" + " ".join(str(i) for i in indices) + "]"
            out.append(
                _internal(f"rule names are not unique, rules with indices {shown} all have the same name '{name}'")
            )
    return out


def _coordinator(js: dict, coordinator: dict, rjobs: list[dict]) -> list[Cause]:
    out: list[Cause] = []
    target = coordinator.get("replicatedJob", "")
    rj = next((r for r in rjobs if r.get("name") == target), None)
    job_index, pod_index = int(coordinator.get("jobIndex", 0)), int(coordinator.get("podIndex", 0))
    if rj is None:
        out.append(_internal(f"coordinator replicatedJob {target} does not exist"))
    elif not 0 <= job_index < int(rj.get("replicas", 1)):
        out.append(_internal(f"coordinator job index {job_index} is invalid for replicatedJob {target}"))
    elif _job_spec(rj).get("completionMode") != "Indexed" or _job_spec(rj).get("completions") is None:
        out.append(
            _internal("job for coordinator pod must be indexed completion mode, and completions number must be set")
        )
    elif not 0 <= pod_index < int(_job_spec(rj)["completions"]):
        out.append(
            _internal(f"coordinator pod index {pod_index} is invalid for replicatedJob {target} job index {job_index}")
        )
    subdomain = (_spec(js).get("network") or {}).get("subdomain") or js["metadata"].get("name", "")
    value = f"{js['metadata'].get('name', '')}-{target}-{job_index}-{pod_index}.{subdomain}"
    problems = (["must be no more than 63 characters"] if len(value) > 63 else []) + (
        [LABEL_VALUE_ERROR] if not LABEL_VALUE.match(value) else []
    )
    if problems:
        out.append(
            _internal(
                f'spec will lead to invalid label value "{value}" for coordinator label "{COORDINATOR}" (long JobSet / '
                f"ReplicatedJob / SubDomain name?): {', '.join(problems)}"
            )
        )
    return out


# -- update --------------------------------------------------------------------------------------------------

_MUTABLE_WHILE_SUSPENDED = (
    ("metadata", "labels"),
    ("metadata", "annotations"),
    ("spec", "nodeSelector"),
    ("spec", "tolerations"),
    ("spec", "schedulingGates"),
)


def _pruned(value: object) -> object:
    """apimachinery's semantic equality: an empty map or list equals an absent one."""
    if isinstance(value, dict):
        out = {k: _pruned(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v not in ({}, [], None)}
    if isinstance(value, list):
        return [_pruned(v) for v in value]
    return value


def _on_update(old: dict, new: dict) -> list[Cause]:
    """ValidateUpdate: replicatedJobs immutable but for Kueue's pod template fields while suspended; managedBy
    immutable."""
    munged = json.loads(json.dumps(_spec(new).get("replicatedJobs") or []))
    old_rjobs = {rj.get("name"): rj for rj in _rjobs(old)}
    if _spec(old).get("suspend") or _spec(new).get("suspend"):
        for rj in munged:
            before = old_rjobs.get(rj.get("name"))
            if before is None:
                continue
            template = rj.setdefault("template", {}).setdefault("spec", {}).setdefault("template", {})
            old_template = _job_spec(before).get("template") or {}
            for part, key in _MUTABLE_WHILE_SUSPENDED:
                value = (old_template.get(part) or {}).get(key)
                section = template.setdefault(part, {})
                if value is None:
                    section.pop(key, None)
                else:
                    section[key] = value
    out: list[Cause] = []
    if _pruned(munged) != _pruned(_spec(old).get("replicatedJobs") or []):
        # kube prints the Go value (%#v of []ReplicatedJob); kubesim names its type
        out.append(
            Cause(
                "spec.replicatedJobs",
                "FieldValueInvalid",
                "Invalid value: []v1alpha2.ReplicatedJob{...}: field is immutable",
            )
        )
    if _spec(new).get("managedBy") != _spec(old).get("managedBy"):
        out.append(_invalid("spec.managedBy", _spec(new).get("managedBy"), "field is immutable"))
    return out
