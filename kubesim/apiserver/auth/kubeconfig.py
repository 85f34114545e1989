"""A kubeconfig for the insecure HTTP server with a static token user."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

TOKEN = "kubesim-token"  # noqa: S105 - a fixed, public token: the cluster admin's when RBAC is on (kubesim.apiserver.auth.rbac)


def write_kubeconfig(path: str, url: str, namespace: str = "default", token: str = TOKEN) -> None:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "kubesim", "cluster": {"server": url}}],
        "users": [{"name": "kubesim", "user": {"token": token}}],
        "contexts": [{"name": "kubesim", "context": {"cluster": "kubesim", "user": "kubesim", "namespace": namespace}}],
        "current-context": "kubesim",
        "preferences": {},
    }
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(yaml.safe_dump(config, sort_keys=False))
    os.replace(tmp, target)
