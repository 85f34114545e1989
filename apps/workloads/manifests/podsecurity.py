"""The Kubernetes Pod Security Standards, checked on one pod spec: "baseline", or "restricted" on top of it.

The controls and their allowed values follow the Pod Security Standards page of the Kubernetes documentation
(kubernetes.io/docs/concepts/security/pod-security-standards/) as of Kubernetes 1.32: baseline forbids Windows
HostProcess, host namespaces, privileged containers, capabilities beyond its list, hostPath volumes, host ports,
AppArmor and seccomp profiles that switch confinement off, custom SELinux users and roles (and types outside the
container ones), an unmasked /proc, and sysctls outside the namespaced, safe set; restricted adds the volume types,
no privilege escalation, non-root users, a seccomp profile and dropping every capability. Each violation is reported
with its field path.
"""

from __future__ import annotations

from typing import Any

BASELINE = "baseline"
RESTRICTED = "restricted"
PROFILES = (BASELINE, RESTRICTED)

BASELINE_CAPABILITIES = frozenset({"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                                   "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"})
SAFE_SYSCTLS = frozenset({
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes"})
SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"})
CONFINED_PROFILES = frozenset({"RuntimeDefault", "Localhost"})
RESTRICTED_VOLUMES = frozenset({"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                                "projected", "secret"})
APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"
CONTAINER_GROUPS = ("containers", "initContainers", "ephemeralContainers")


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _one_of(value: Any, allowed: frozenset[str]) -> bool:
    """Whether `value` is one of the allowed names (a list or a mapping where a name belongs is not)."""
    return isinstance(value, str) and value in allowed


def _list(value: Any) -> list[Any]:
    """A list field as a list: a value of another type is the schema check's to report, not to iterate."""
    return value if isinstance(value, list) else []


def _containers(spec: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(f"{group}[{index}]", container) for group in CONTAINER_GROUPS
            for index, container in enumerate(_list(spec.get(group))) if isinstance(container, dict)]


def _context_errors(context: dict[str, Any], where: str, *, pod: bool) -> list[str]:
    """The controls both a pod's and a container's security context carry (baseline)."""
    errors = []
    if _dict(context.get("windowsOptions")).get("hostProcess") is True:
        errors.append(f"{where}.windowsOptions.hostProcess: Windows HostProcess containers are not allowed.")
    selinux = _dict(context.get("seLinuxOptions"))
    if not _one_of(selinux.get("type", ""), SELINUX_TYPES):
        errors.append(f"{where}.seLinuxOptions.type: {selinux['type']!r} is not allowed; use one of the container "
                      "types (container_t, container_init_t, container_kvm_t, container_engine_t) or leave it out.")
    for field in ("user", "role"):
        if selinux.get(field):
            errors.append(f"{where}.seLinuxOptions.{field}: a custom SELinux {field} is not allowed.")
    seccomp = _dict(context.get("seccompProfile")).get("type")
    if seccomp == "Unconfined":
        errors.append(f"{where}.seccompProfile.type: Unconfined is not allowed; use RuntimeDefault or Localhost.")
    apparmor = _dict(context.get("appArmorProfile")).get("type")
    if apparmor is not None and not _one_of(apparmor, CONFINED_PROFILES):
        errors.append(f"{where}.appArmorProfile.type: {apparmor!r} is not allowed; use RuntimeDefault or Localhost.")
    if pod:
        for index, sysctl in enumerate(_list(context.get("sysctls"))):
            name = _dict(sysctl).get("name")
            if not _one_of(name, SAFE_SYSCTLS):
                errors.append(f"{where}.sysctls[{index}].name: {name!r} is not a safe sysctl; allowed: "
                              f"{', '.join(sorted(SAFE_SYSCTLS))}.")
    return errors


def pod_security_errors(spec: dict[str, Any], path: str, *, profile: str,
                        annotations: dict[str, Any] | None = None, annotations_path: str = "") -> list[str]:
    """Every violation of `profile` in one pod spec at `path` (its template's annotations beside it)."""
    errors: list[str] = []
    for field in ("hostNetwork", "hostPID", "hostIPC", "hostUsers"):
        if field != "hostUsers" and spec.get(field) is True:
            errors.append(f"{path}.{field}: sharing the host's namespaces is not allowed.")
    pod_context = _dict(spec.get("securityContext"))
    errors += _context_errors(pod_context, f"{path}.securityContext", pod=True)
    for index, volume in enumerate(_list(spec.get("volumes"))):
        volume = _dict(volume)
        if "hostPath" in volume:
            errors.append(f"{path}.volumes[{index}].hostPath: hostPath volumes are not allowed.")
        elif profile == RESTRICTED:
            kinds = [key for key in volume if key != "name"]
            for kind in kinds:
                if not _one_of(kind, RESTRICTED_VOLUMES):
                    errors.append(f"{path}.volumes[{index}].{kind}: the restricted profile allows only "
                                  f"{', '.join(sorted(RESTRICTED_VOLUMES))} volumes.")
    for key, value in (annotations or {}).items():
        if str(key).startswith(APPARMOR_ANNOTATION) and value != "runtime/default" and not str(value).startswith(
                "localhost/"):
            errors.append(f"{annotations_path}.{key}: AppArmor profile {value!r} is not allowed; use runtime/default "
                          "or localhost/<profile>.")
    containers = _containers(spec)
    for where, container in containers:
        where = f"{path}.{where}"
        context = _dict(container.get("securityContext"))
        at = f"{where}.securityContext"
        if context.get("privileged") is True:
            errors.append(f"{at}.privileged: privileged containers are not allowed.")
        if context.get("procMount") not in (None, "Default"):
            errors.append(f"{at}.procMount: {context['procMount']!r} is not allowed; use Default.")
        capabilities = _dict(context.get("capabilities"))
        allowed = BASELINE_CAPABILITIES if profile == BASELINE else frozenset({"NET_BIND_SERVICE"})
        for index, capability in enumerate(_list(capabilities.get("add"))):
            if not _one_of(capability, allowed):
                errors.append(f"{at}.capabilities.add[{index}]: adding {capability} is not allowed; allowed: "
                              f"{', '.join(sorted(allowed))}.")
        errors += _context_errors(context, at, pod=False)
        for index, port in enumerate(_list(container.get("ports"))):
            if _dict(port).get("hostPort") not in (None, 0):
                errors.append(f"{where}.ports[{index}].hostPort: host ports are not allowed.")
        if profile == RESTRICTED:
            errors += _restricted_container_errors(context, at, pod_context)
    if profile == RESTRICTED and pod_context.get("runAsUser") == 0:
        errors.append(f"{path}.securityContext.runAsUser: running as root (0) is not allowed.")
    return errors


def _restricted_container_errors(context: dict[str, Any], at: str, pod_context: dict[str, Any]) -> list[str]:
    errors = []
    if context.get("allowPrivilegeEscalation") is not False:
        errors.append(f"{at}.allowPrivilegeEscalation: must be false under the restricted profile.")
    non_root = context.get("runAsNonRoot", pod_context.get("runAsNonRoot"))
    if non_root is not True:
        errors.append(f"{at}.runAsNonRoot: must be true (here or in the pod's securityContext) under the restricted "
                      "profile.")
    if context.get("runAsUser") == 0:
        errors.append(f"{at}.runAsUser: running as root (0) is not allowed.")
    seccomp = _dict(context.get("seccompProfile")).get("type") or _dict(pod_context.get("seccompProfile")).get("type")
    if not _one_of(seccomp, CONFINED_PROFILES):
        errors.append(f"{at}.seccompProfile.type: must be RuntimeDefault or Localhost (here or in the pod's "
                      "securityContext) under the restricted profile.")
    if "ALL" not in _list(_dict(context.get("capabilities")).get("drop")):
        errors.append(f"{at}.capabilities.drop: must include ALL under the restricted profile.")
    return errors
