"""Name rules shared by models, forms, the API and the worker: what Kubernetes accepts, and which namespaces a
project may have."""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# Slugs end up inside longer Kubernetes names (proj-<slug>-<pool>-guaranteed, label values <= 63).
SLUG_MAX_LENGTH = 40


def validate_dns_label(value: str) -> None:
    """A DNS-1123 label: lower-case letters, digits and '-', starting and ending alphanumeric."""
    if not DNS1123_LABEL.match(value or ""):
        raise ValidationError(
            "Use lower-case letters, digits and '-', starting and ending with a letter or digit "
            "(a Kubernetes DNS-1123 label).",
            code="dns1123",
        )
    if len(value) > 63:
        raise ValidationError("At most 63 characters (a Kubernetes DNS-1123 label).", code="dns1123_length")


def validate_slug(value: str) -> None:
    validate_dns_label(value)
    if len(value) > SLUG_MAX_LENGTH:
        raise ValidationError(
            f"At most {SLUG_MAX_LENGTH} characters: it becomes part of longer Kubernetes names.", code="slug_length"
        )


LABEL_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def validate_label_key(key: str) -> None:
    name = key.rsplit("/", 1)[-1]
    prefix = key[: -len(name) - 1] if "/" in key else ""
    if not LABEL_KEY.match(key) or len(name) > 63 or len(prefix) > 253:
        raise ValidationError(f"{key!r} is not a valid Kubernetes label key.", code="label_key")


def validate_label_value(value: str) -> None:
    if len(value) > 63 or not LABEL_VALUE.match(value):
        raise ValidationError(
            f"{value!r} is not a valid Kubernetes label value (at most 63 letters, digits, '-', '_' or '.', "
            "starting and ending alphanumeric).",
            code="label_value",
        )


# --- a node pool's ResourceFlavor -------------------------------------------------------------------------------
# Kueue's ResourceFlavor CRD takes at most 8 node labels, 8 node taints and 8 tolerations (the portal writes one per
# taint), and its webhook refuses two taints with the same key and effect
# (kubesim/apiserver/registry/crds/resourceflavors.json, kubesim/kueue/webhooks/resource_flavor.py). A pool past
# these bounds would make every reconcile's write of its flavor fail, so it is refused before it is saved.

FLAVOR_MAX_NODE_LABELS = 8
FLAVOR_MAX_NODE_TAINTS = 8
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def _messages(check: Any, value: str) -> list[str]:
    try:
        check(value)
    except ValidationError as exc:
        return list(exc.messages)
    return []


def too_many_node_labels(count: int) -> str | None:
    if count <= FLAVOR_MAX_NODE_LABELS:
        return None
    return (f"{count} node labels: Kueue's ResourceFlavor takes at most {FLAVOR_MAX_NODE_LABELS}. Select the pool's "
            "nodes with fewer labels.")


def node_labels_errors(labels: Any) -> list[str]:
    """Every reason Kueue would refuse `labels` as a ResourceFlavor's nodeLabels (syntax of each, then the count)."""
    if not isinstance(labels, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
        return ["Node labels are a mapping of label keys to label values."]
    errors = [message for key, value in labels.items()
              for message in _messages(validate_label_key, key) + _messages(validate_label_value, value)]
    if too_many := too_many_node_labels(len(labels)):
        errors.append(too_many)
    return errors


def node_taints_bound_errors(taints: list[dict[str, str]]) -> list[str]:
    """What Kueue refuses of well-formed taints as a whole: more than 8, or two with the same key and effect."""
    errors = []
    first_of: dict[tuple[str, str], int] = {}
    for number, taint in enumerate(taints, start=1):
        pair = (taint.get("key", ""), taint.get("effect", ""))
        if pair in first_of:
            errors.append(f"Taints {first_of[pair]} and {number} have the same key and effect ({pair[0]}:{pair[1]}); "
                          "Kueue takes one taint per key and effect.")
        else:
            first_of[pair] = number
    if len(taints) > FLAVOR_MAX_NODE_TAINTS:
        errors.append(f"{len(taints)} node taints: Kueue's ResourceFlavor takes at most {FLAVOR_MAX_NODE_TAINTS} "
                      "(and as many tolerations).")
    return errors


def node_taints_errors(taints: Any) -> list[str]:
    """Every reason Kueue would refuse `taints` as a ResourceFlavor's nodeTaints: the shape and syntax of each, then
    the bounds of the whole."""
    shape = "Node taints are a list of {key, value (optional), effect}."
    if not isinstance(taints, list) or not all(isinstance(taint, dict) for taint in taints):
        return [shape]
    errors = []
    for number, taint in enumerate(taints, start=1):
        if set(taint) - {"key", "value", "effect"} or not all(isinstance(v, str) for v in taint.values()):
            errors.append(f"Taint {number}: {shape}")
            continue
        errors += _messages(validate_label_key, taint.get("key", ""))
        if taint.get("value"):
            errors += _messages(validate_label_value, taint["value"])
        if taint.get("effect") not in TAINT_EFFECTS:
            errors.append(f"Taint {number}: the effect must be one of {', '.join(TAINT_EFFECTS)}.")
    return errors + node_taints_bound_errors(taints)


def validate_extended_resource_name(value: str) -> None:
    """A Kubernetes extended resource name, as the API server checks it (IsExtendedResourceName): a qualified name
    with a domain prefix (`vendor.tld/name`) outside the kubernetes.io namespace, also valid as a quota's
    `requests.<name>`."""
    domain, slash, name = (value or "").partition("/")
    example = "use a domain-prefixed name such as nvidia.com/gpu or nvidia.com/mig-3g.40gb"
    if not slash or not domain:
        raise ValidationError(f"{value!r} is not an extended resource name: {example}.", code="extended_resource")
    if "kubernetes.io/" in value:
        raise ValidationError(f"{value!r} is not an extended resource name: the kubernetes.io namespace is "
                              f"Kubernetes' own; {example}.",
                              code="extended_resource_native")
    if not LABEL_KEY.match(value) or len(name) > 63 or len(f"requests.{domain}") > 253:
        raise ValidationError(
            f"{value!r} is not a valid extended resource name (a DNS domain, '/', then at most 63 letters, digits, "
            f"'-', '_' or '.', starting and ending alphanumeric); {example}.", code="extended_resource")


# --- project namespaces -----------------------------------------------------------------------------------------

SYSTEM_NAMESPACE_PREFIX = "kube-"
SYSTEM_NAMESPACES = frozenset({"default"})


def project_namespace_rule() -> str:
    """The rule in words, as every refusal starts."""
    return f"Project namespaces start with '{settings.KUEUE_PROJECT_PREFIX}' (or are on the approved list)"


def project_namespace_error(namespace: str) -> str | None:
    """Why `namespace` may not be a project's namespace, or None when it may.

    Namespaces are the portal's own: a project namespace starts with settings.KUEUE_PROJECT_PREFIX or is on the
    admins' list settings.PORTAL_EXTRA_PROJECT_NAMESPACES, and is never a system namespace (kube-*, default) nor
    the portal's own (settings.PORTAL_NAMESPACE), whatever the list says. Services refuse such a namespace on
    create; the reconcile skips (and reports) projects that still have one. Another project's namespace is the
    services' part of the rule (it needs the database). Pure apart from settings; no queries.
    """
    if not namespace:
        return None
    rule = project_namespace_rule()
    if namespace in SYSTEM_NAMESPACES or namespace.startswith(SYSTEM_NAMESPACE_PREFIX):
        return f"{rule}; '{namespace}' is a system namespace."
    if settings.PORTAL_NAMESPACE and namespace == settings.PORTAL_NAMESPACE:
        return f"{rule}; '{namespace}' is the portal's own namespace."
    prefix = settings.KUEUE_PROJECT_PREFIX
    if (namespace.startswith(prefix) and len(namespace) > len(prefix)) or (
        namespace in settings.PORTAL_EXTRA_PROJECT_NAMESPACES
    ):
        return None
    return f"{rule}; '{namespace}' does not start with '{prefix}' and is not on the approved list."


# Namespaces of the cluster itself and of Kueue: no project's work runs there.
CLUSTER_NAMESPACES = frozenset({"kueue-system"})


def mapped_namespace_error(namespace: str) -> str | None:
    """Why `namespace` may not be mapped to a project (apps.org.models.ProjectNamespace), or None when it may: never
    a system namespace (kube-*), Kueue's, nor the portal's own. Which project holds it is the service's part (it
    needs the database). Pure apart from settings; no queries."""
    if namespace.startswith(SYSTEM_NAMESPACE_PREFIX) or namespace in CLUSTER_NAMESPACES:
        return f"'{namespace}' is a system namespace; no project's work runs there."
    if settings.PORTAL_NAMESPACE and namespace == settings.PORTAL_NAMESPACE:
        return f"'{namespace}' is the portal's own namespace."
    return None


# --- data sources, credentials and their mount paths -------------------------------------------------------------

# Where a mount would hide what the container needs to run (or what Kubernetes itself mounts).
SYSTEM_PATHS = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib64", "/proc", "/run", "/sbin", "/sys", "/usr",
                "/var/run", "/var/lib/kubelet")
MOUNT_PATH_MAX_LENGTH = 255


def mount_path_errors(path: Any) -> list[str]:
    """Why `path` cannot be a mount path: absolute, plain (no '..', '//', trailing '/'), not a system directory."""
    if not isinstance(path, str) or not path:
        return ["Give an absolute path, e.g. /data/imagenet."]
    if len(path) > MOUNT_PATH_MAX_LENGTH or "\x00" in path or any(c.isspace() for c in path):
        return [f"A mount path is at most {MOUNT_PATH_MAX_LENGTH} characters, without spaces or NUL."]
    if not path.startswith("/") or path == "/":
        return [f"{path!r} is not an absolute path below /; use e.g. /data/imagenet."]
    parts = path[1:].split("/")
    if any(part in ("", ".", "..") for part in parts) or ":" in path:
        return [f"{path!r} must be a plain path: no '..', '.', '//', ':' or trailing '/'."]
    for system in SYSTEM_PATHS:
        if path == system or path.startswith(system + "/") or system.startswith(path + "/"):
            return [f"{path} would shadow the system directory {system}; mount below /data, /mnt or /home instead."]
    return []


def mount_collisions(paths: list[tuple[str, str]]) -> list[str]:
    """(label, path) pairs: one message per pair where one path is the other or lies inside it."""
    problems = []
    for index, (label, path) in enumerate(paths):
        for other_label, other in paths[index + 1:]:
            if path == other or path.startswith(other + "/") or other.startswith(path + "/"):
                problems.append(f"{label} ({path}) and {other_label} ({other}) would mount over each other; "
                                "give them separate paths.")
    return problems


def validate_mount_path(value: str) -> None:
    if errors := mount_path_errors(value):
        raise ValidationError(errors)


# --- hosts: NFS servers and image registries ---------------------------------------------------------------------
# Both end up verbatim in what the cluster acts on (a pod's nfs volume, the key of a dockerconfigjson Secret's
# "auths"), so each is exactly a host (and a registry's optional port): no scheme, user, path, options or spaces.

HOST_NAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]{0,61}"
                       r"[A-Za-z0-9])?)*$")


def _is_host(value: str) -> bool:
    """A DNS host name, an IPv4 address, or an IPv6 address (bare or in brackets)."""
    bare = value[1:-1] if value.startswith("[") and value.endswith("]") else value
    try:
        ipaddress.ip_address(bare)
    except ValueError:
        return bare == value and bool(HOST_NAME.match(value)) and not value.replace(".", "").isdigit()
    return bare == value or ":" in bare  # brackets only around IPv6


def _host_and_port(value: str) -> tuple[str, str | None]:
    """Split `host:port` ("[v6]:port" for IPv6); a bare IPv6 address is all host."""
    if value.startswith("[") and "]:" in value:
        host, _, port = value.rpartition(":")
        return host, port
    if value.count(":") == 1:
        host, _, port = value.partition(":")
        return host, port
    return value, None


def nfs_server_errors(value: str) -> list[str]:
    """Why `value` cannot be an NFS volume's server: a host name or IP address, without a port."""
    if not value:
        return ["Give the NFS server's host name or IP address, e.g. nfs.example.org or 10.0.0.5."]
    if _is_host(value):
        return []
    host, port = _host_and_port(value)
    if port is not None and _is_host(host):
        return [f"{value!r}: give the NFS server's host name or IP address without a port (an NFS volume has no port "
                "field), e.g. nfs.example.org."]
    return [f"{value!r} is not a host name or IP address of an NFS server, e.g. nfs.example.org or 10.0.0.5."]


def nfs_path_errors(path: str) -> list[str]:
    """Why `path` cannot be an NFS export path: absolute and plain, and no mount options (a comma starts them)."""
    if not path.startswith("/"):
        return ["Give the export's absolute path on the server, e.g. /exports/imagenet."]
    if "," in path:
        return [f"{path!r}: no commas; mount options cannot be set here, give the export's path only."]
    if path != "/" and (any(part in ("", ".", "..") for part in path[1:].split("/"))
                        or any(c.isspace() or not c.isprintable() for c in path)):
        return [f"{path!r} must be a plain path: no '..', '.', '//', spaces or trailing '/'."]
    return []


REGISTRY_EXAMPLE = "e.g. nvcr.io or registry.example.org:5000"


def registry_host_errors(value: str) -> list[str]:
    """Why `value` cannot be a pull secret's registry: a host and an optional port, nothing else (it becomes the key
    of the Secret's dockerconfigjson, which the kubelet matches against image names)."""
    def refuse(why: str) -> list[str]:
        return [f"{value!r} is not a registry host: {why}; {REGISTRY_EXAMPLE}."]

    if not value or any(c.isspace() or not c.isprintable() for c in value):
        return refuse("give a registry host and an optional port, without spaces")
    if "://" in value or re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:/", value):
        return refuse("give the host and port only, no scheme such as https://")
    if "@" in value:
        return refuse("no user name or password here (they have their own fields)")
    if "/" in value:
        return refuse("give the host and port only, no path")
    host, port = _host_and_port(value)
    if port is not None and not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
        return refuse("the port must be a number from 1 to 65535")
    if not _is_host(host):
        return refuse("give a registry host (a DNS name or an IP address) and an optional port")
    return []


DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def validate_dns_subdomain(value: str) -> None:
    """An object name such as a PersistentVolumeClaim's or a Secret's."""
    if not value or len(value) > 253 or not DNS1123_SUBDOMAIN.match(value):
        raise ValidationError(f"{value!r} is not a valid Kubernetes name: lower-case letters, digits, '-' and '.', "
                              "at most 253 characters.")
