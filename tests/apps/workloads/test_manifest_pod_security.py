"""The Pod Security Standards on a manifest's pod templates, control by control: baseline refuses what it forbids
(and accepts its allowed values), restricted adds its own; through the API the profile is a setting."""

from __future__ import annotations

import filecmp
from pathlib import Path
from typing import Any

import pytest
import yaml

from apps.workloads.manifests import BASELINE, RESTRICTED
from apps.workloads.manifests.podsecurity import pod_security_errors
from apps.workloads.models import Workload
from tests.api_support import call


def pod(**spec: Any) -> dict[str, Any]:
    container = {"name": "main", "image": "busybox", **spec.pop("container", {})}
    return {"containers": [container], **spec}


def ctx(**context: Any) -> dict[str, Any]:
    return {"securityContext": context}


# (id, pod spec, the path baseline refuses)
BASELINE_REFUSES = [
    ("host-network", pod(hostNetwork=True), "spec.hostNetwork"),
    ("host-pid", pod(hostPID=True), "spec.hostPID"),
    ("host-ipc", pod(hostIPC=True), "spec.hostIPC"),
    ("privileged", pod(container=ctx(privileged=True)), "spec.containers[0].securityContext.privileged"),
    ("init-privileged", {**pod(), "initContainers": [{"name": "i", "image": "x", **ctx(privileged=True)}]},
     "spec.initContainers[0].securityContext.privileged"),
    ("ephemeral-privileged", {**pod(), "ephemeralContainers": [{"name": "e", "image": "x", **ctx(privileged=True)}]},
     "spec.ephemeralContainers[0].securityContext.privileged"),
    ("sys-admin", pod(container=ctx(capabilities={"add": ["SYS_ADMIN"]})),
     "spec.containers[0].securityContext.capabilities.add[0]"),
    ("net-admin", pod(container=ctx(capabilities={"add": ["CHOWN", "NET_ADMIN"]})),
     "spec.containers[0].securityContext.capabilities.add[1]"),
    ("host-path", pod(volumes=[{"name": "h", "hostPath": {"path": "/"}}]), "spec.volumes[0].hostPath"),
    ("host-port", pod(container={"ports": [{"containerPort": 80, "hostPort": 80}]}),
     "spec.containers[0].ports[0].hostPort"),
    ("unsafe-sysctl", pod(securityContext={"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}),
     "spec.securityContext.sysctls[0].name"),
    ("seccomp-unconfined", pod(securityContext={"seccompProfile": {"type": "Unconfined"}}),
     "spec.securityContext.seccompProfile.type"),
    ("container-seccomp-unconfined", pod(container=ctx(seccompProfile={"type": "Unconfined"})),
     "spec.containers[0].securityContext.seccompProfile.type"),
    ("apparmor-unconfined", pod(container=ctx(appArmorProfile={"type": "Unconfined"})),
     "spec.containers[0].securityContext.appArmorProfile.type"),
    ("selinux-type", pod(securityContext={"seLinuxOptions": {"type": "spc_t"}}),
     "spec.securityContext.seLinuxOptions.type"),
    ("selinux-user", pod(container=ctx(seLinuxOptions={"user": "root"})),
     "spec.containers[0].securityContext.seLinuxOptions.user"),
    ("selinux-role", pod(container=ctx(seLinuxOptions={"role": "sysadm_r"})),
     "spec.containers[0].securityContext.seLinuxOptions.role"),
    ("proc-mount", pod(container=ctx(procMount="Unmasked")), "spec.containers[0].securityContext.procMount"),
    ("host-process", pod(securityContext={"windowsOptions": {"hostProcess": True}}),
     "spec.securityContext.windowsOptions.hostProcess"),
]

BASELINE_ALLOWS = [
    ("plain", pod()),
    ("allowed-capabilities", pod(container=ctx(capabilities={"add": ["CHOWN", "NET_BIND_SERVICE", "KILL"]}))),
    ("safe-sysctl", pod(securityContext={"sysctls": [{"name": "net.ipv4.tcp_syncookies", "value": "1"}]})),
    ("runtime-default", pod(securityContext={"seccompProfile": {"type": "RuntimeDefault"}})),
    ("container-selinux-type", pod(container=ctx(seLinuxOptions={"type": "container_t"}))),
    ("host-port-zero", pod(container={"ports": [{"containerPort": 80, "hostPort": 0}]})),
    ("privileged-false", pod(container=ctx(privileged=False))),
    ("nfs-volume", pod(volumes=[{"name": "n", "nfs": {"server": "s", "path": "/"}}])),
]

HARDENED = ctx(allowPrivilegeEscalation=False, runAsNonRoot=True, seccompProfile={"type": "RuntimeDefault"},
               capabilities={"drop": ["ALL"]})
RESTRICTED_REFUSES = [
    ("escalation", pod(container={**HARDENED, "securityContext": {**HARDENED["securityContext"],
                                                                  "allowPrivilegeEscalation": True}}),
     "spec.containers[0].securityContext.allowPrivilegeEscalation"),
    ("root", pod(container={"securityContext": {**HARDENED["securityContext"], "runAsNonRoot": False}}),
     "spec.containers[0].securityContext.runAsNonRoot"),
    ("uid-zero", pod(container={"securityContext": {**HARDENED["securityContext"], "runAsUser": 0}}),
     "spec.containers[0].securityContext.runAsUser"),
    ("no-seccomp", pod(container={"securityContext": {k: v for k, v in HARDENED["securityContext"].items()
                                                      if k != "seccompProfile"}}),
     "spec.containers[0].securityContext.seccompProfile.type"),
    ("no-drop", pod(container={"securityContext": {**HARDENED["securityContext"], "capabilities": {}}}),
     "spec.containers[0].securityContext.capabilities.drop"),
    ("chown", pod(container={"securityContext": {**HARDENED["securityContext"],
                                                 "capabilities": {"drop": ["ALL"], "add": ["CHOWN"]}}}),
     "spec.containers[0].securityContext.capabilities.add[0]"),
    ("nfs", pod(container=HARDENED, volumes=[{"name": "n", "nfs": {"server": "s", "path": "/"}}]),
     "spec.volumes[0].nfs"),
]


@pytest.mark.parametrize(("spec", "path"), [case[1:] for case in BASELINE_REFUSES],
                         ids=[case[0] for case in BASELINE_REFUSES])
def test_baseline_refuses_each_control_by_its_path(spec, path):
    errors = pod_security_errors(spec, "spec", profile=BASELINE)
    assert any(error.startswith(f"{path}:") for error in errors), errors


@pytest.mark.parametrize("spec", [case[1] for case in BASELINE_ALLOWS], ids=[case[0] for case in BASELINE_ALLOWS])
def test_baseline_allows_its_allowed_values(spec):
    assert pod_security_errors(spec, "spec", profile=BASELINE) == []


def test_apparmor_annotations_are_checked():
    errors = pod_security_errors(pod(), "spec", profile=BASELINE, annotations={
        "container.apparmor.security.beta.kubernetes.io/main": "unconfined"}, annotations_path="metadata.annotations")
    assert errors and errors[0].startswith("metadata.annotations.container.apparmor.security.beta.kubernetes.io/main")


@pytest.mark.parametrize(("spec", "path"), [case[1:] for case in RESTRICTED_REFUSES],
                         ids=[case[0] for case in RESTRICTED_REFUSES])
def test_restricted_adds_its_controls(spec, path):
    assert pod_security_errors(spec, "spec", profile=BASELINE) == [] or path == "spec.volumes[0].nfs"
    errors = pod_security_errors(spec, "spec", profile=RESTRICTED)
    assert any(error.startswith(f"{path}:") for error in errors), errors


def test_a_hardened_pod_meets_restricted():
    assert pod_security_errors(pod(container=HARDENED), "spec", profile=RESTRICTED) == []


def _job(container: dict[str, Any]) -> str:
    return yaml.safe_dump({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {
        "template": {"spec": {"restartPolicy": "Never", "containers": [{
            "name": "main", "image": "busybox", "resources": {"requests": {"nvidia.com/gpu": 1},
                                                              "limits": {"nvidia.com/gpu": 1}}, **container}]}}}})


def test_the_setting_steps_the_api_up_to_restricted(client_for, settings):
    body = {"project": "vision", "kind": "manifest", "manifest": _job({}), "node_pool": "h100",
            "labels": {"model": "m", "data_class": "public"}}
    settings.MANIFEST_POD_SECURITY = RESTRICTED
    refused = call(client_for("alice"), "POST", "workloads/", body)
    assert refused.status_code == 400
    assert any(m.startswith("spec.template.spec.containers[0].securityContext.allowPrivilegeEscalation")
               for m in refused.json()["manifest"])
    assert not Workload.objects.exists()
    hardened = call(client_for("alice"), "POST", "workloads/", {**body, "manifest": _job(HARDENED)})
    assert hardened.status_code == 201, hardened.content
    settings.MANIFEST_POD_SECURITY = BASELINE
    assert call(client_for("alice"), "POST", "workloads/", body).status_code == 201


def test_the_portals_crd_schemas_are_kubesims():
    ours = Path("apps/workloads/manifests/crds")
    theirs = Path("kubesim/apiserver/registry/crds")
    files = sorted(path.name for path in ours.glob("*.json"))
    assert len(files) == 6
    _, mismatch, errors = filecmp.cmpfiles(ours, theirs, files, shallow=False)
    assert not mismatch and not errors, (mismatch, errors)
