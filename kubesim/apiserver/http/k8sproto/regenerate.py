"""Regenerate messages.py (beside this file), the field table of the Kubernetes protobuf messages kubesim decodes.

Usage: python -m kubesim.apiserver.http.k8sproto.regenerate DIR
       && ruff format kubesim/apiserver/http/k8sproto/messages.py

DIR holds Kubernetes' published `generated.proto` files (k8s.io/api and k8s.io/apimachinery, Apache-2.0), under any
names. Only the messages reachable from ROOTS are kept, as (field name, number, label, type) rows: field numbers are
the wire contract kubectl speaks, the rest of the .proto files (comments, options) is not needed.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

# The kinds kubectl and client-go send as protobuf (generator commands, auth, tokens), and what they embed.
ROOTS = [
    "k8s.io.apimachinery.pkg.runtime.Unknown",
    "k8s.io.api.core.v1.Namespace",
    "k8s.io.api.core.v1.ConfigMap",
    "k8s.io.api.core.v1.Secret",
    "k8s.io.api.core.v1.ServiceAccount",
    "k8s.io.api.core.v1.Service",
    "k8s.io.api.core.v1.Pod",
    "k8s.io.api.core.v1.PersistentVolumeClaim",
    "k8s.io.api.core.v1.Event",
    "k8s.io.api.batch.v1.Job",
    "k8s.io.api.apps.v1.Deployment",
    "k8s.io.api.networking.v1.Ingress",
    "k8s.io.api.rbac.v1.Role",
    "k8s.io.api.rbac.v1.ClusterRole",
    "k8s.io.api.rbac.v1.RoleBinding",
    "k8s.io.api.rbac.v1.ClusterRoleBinding",
    "k8s.io.api.authorization.v1.SelfSubjectAccessReview",
    "k8s.io.api.authorization.v1.SelfSubjectRulesReview",
    "k8s.io.api.authentication.v1.SelfSubjectReview",
    "k8s.io.api.authentication.v1.TokenRequest",
    "k8s.io.apimachinery.pkg.apis.meta.v1.DeleteOptions",
]
SCALARS = {"string", "bytes", "bool", "int32", "int64", "double", "float", "uint32", "uint64", "fixed64"}
_PACKAGE = re.compile(r"^package\s+([\w.]+);", re.M)
_MESSAGE = re.compile(r"^message\s+(\w+)\s*\{(.*?)^\}", re.M | re.S)
_FIELD = re.compile(r"^\s*(optional|repeated)?\s*([\w.]+|map<\s*\w+\s*,\s*[\w.]+\s*>)\s+(\w+)\s*=\s*(\d+)\s*;", re.M)


def parse(directory: Path) -> dict[str, list[tuple[str, int, str, str]]]:
    """full message name -> [(field, number, label, type)]; type a scalar, a full message name or map<K,V>."""
    raw: dict[str, tuple[str, str]] = {}
    for path in sorted(directory.glob("*.proto")):
        text = re.sub(r"//[^\n]*", "", path.read_text())
        declared = _PACKAGE.search(text)
        if declared is None:
            continue
        for name, body in _MESSAGE.findall(text):
            raw[f"{declared.group(1)}.{name}"] = (declared.group(1), body)
    messages: dict[str, list[tuple[str, int, str, str]]] = {}
    for full, (package, body) in raw.items():
        rows = []
        for label, typ, name, number in _FIELD.findall(body):
            resolved = _resolve(typ.replace(" ", ""), package, raw)
            if resolved is not None:  # a type from a .proto not in DIR (alpha APIs): such fields are skipped
                rows.append((name, int(number), label or "optional", resolved))
        messages[full] = rows
    return messages


def _resolve(typ: str, package: str, known: dict) -> str | None:
    if typ.startswith("map<"):
        key, value = typ[4:-1].split(",")
        target = _resolve(value, package, known)
        return None if target is None else f"map<{key},{target}>"
    if typ in SCALARS:
        return typ
    for candidate in (typ.lstrip("."), f"{package}.{typ}"):
        if candidate in known:
            return candidate
    return None


def reachable(messages: dict[str, list], roots: list[str]) -> dict[str, list]:
    keep: dict[str, list] = {}
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in keep:
            continue
        keep[name] = messages[name]
        for _, _, _, typ in messages[name]:
            target = typ.split(",", 1)[1][:-1] if typ.startswith("map<") else typ
            if target not in SCALARS:
                todo.append(target)
    return dict(sorted(keep.items()))


def render(messages: dict[str, list]) -> str:
    lines = [
        '"""Field table of the Kubernetes protobuf messages kubesim decodes (generated: do not edit).',
        "",
        "Regenerate with `python -m kubesim.apiserver.http.k8sproto.regenerate DIR`; derived from Kubernetes'",
        "generated.proto files (k8s.io/api, k8s.io/apimachinery; Apache-2.0, see NOTICE): message -> (field, number,",
        "label, type).",
        '"""',
        "",
        "MESSAGES: dict[str, tuple[tuple[str, int, str, str], ...]] = {",
    ]
    for name, rows in messages.items():
        lines.append(f'    "{name}": (')
        lines.extend(f'        ("{f}", {n}, "{label}", "{typ}"),' for f, n, label, typ in rows)
        lines.append("    ),")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(__file__).with_name("messages.py")
    out.write_text(render(reachable(parse(Path(argv[0])), ROOTS)))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
