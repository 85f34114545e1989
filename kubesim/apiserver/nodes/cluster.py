"""Cluster description (nodes) for --cluster, and the demo cluster of the design's three GPU pools."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import yaml

POOL_LABEL = "portal.gpu/pool"
PRODUCT_LABEL = "nvidia.com/gpu.product"
REPLICAS_LABEL = "nvidia.com/gpu.replicas"
DEFAULT_MAX_PODS = 110


def _pool(
    pool: str, count: int, product: str, resource: str, per_node: int, cpu: str, memory: str, **labels: str
) -> list[dict]:
    return [
        {
            "name": f"{pool}-node-{i}",
            "labels": {POOL_LABEL: pool, PRODUCT_LABEL: product, **labels},
            "allocatable": {resource: str(per_node), "cpu": cpu, "memory": memory, "pods": "110"},
        }
        for i in range(count)
    ]


def demo_cluster() -> list[dict]:
    """H100 full cards, A100 MIG 3g.40gb slices (one card per node, two slices), L40S time-sliced replicas (8 per
    card, one card per node). Labels as NVIDIA's GPU feature discovery sets them (card memory in MiB, card count,
    MIG layout, sharing strategy and replicas)."""
    return (
        _pool("h100", 2, "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu", 8, "112", "2000Gi",
              **{"nvidia.com/gpu.memory": "81559", "nvidia.com/gpu.count": "8"})
        + _pool("a100-mig-3g40gb", 8, "NVIDIA-A100-SXM4-80GB", "nvidia.com/mig-3g.40gb", 2, "64", "1000Gi",
                **{"nvidia.com/gpu.memory": "81920", "nvidia.com/gpu.count": "1",
                   "nvidia.com/mig.config": "all-3g.40gb"})
        + _pool("l40s-shared", 6, "NVIDIA-L40S-SHARED", "nvidia.com/gpu", 8, "64", "512Gi",
                **{REPLICAS_LABEL: "8", "nvidia.com/gpu.memory": "46068", "nvidia.com/gpu.count": "1",
                   "nvidia.com/gpu.sharing-strategy": "time-slicing"})
    )


def kai_demo_pool() -> list[dict]:
    """The embedded demo's KAI pool: four nodes of four RTX PRO 6000 96 GB cards, labelled for KAI's node-pool shard
    and with GPU fractions on (kubesim/README.md, KAI Scheduler). Not in `demo_cluster`, whose pools the tests'
    organisation matches exactly."""
    return _pool("rtx-pro-6000", 4, "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition", "nvidia.com/gpu", 4, "64",
                 "512Gi", **{"kai.scheduler/node-pool": "rtx-pro-6000", "kubesim.io/kai-gpu-sharing": "true",
                             "nvidia.com/gpu.memory": "97887", "nvidia.com/gpu.count": "4"})


def load_cluster(path: str | None) -> list[dict]:
    """Nodes from a YAML/JSON file: a list of {name, labels, allocatable, taints?} or {nodes: [...]}."""
    if not path:
        return demo_cluster()
    text = Path(path).read_text()
    data = json.loads(text) if path.endswith(".json") else yaml.safe_load(text)
    nodes = data["nodes"] if isinstance(data, dict) else data
    for n in nodes:
        if "name" not in n:
            raise ValueError(f"cluster node without a name: {n!r}")
    return nodes


def internal_ip(name: str) -> str:
    """A node's InternalIP in 10.0.0.0/16, fixed by its name (a kubelet reports its host's address)."""
    h = zlib.crc32(name.encode()) % (254 * 254)
    return f"10.0.{h // 254 + 1}.{h % 254 + 1}"


def node_object(spec: dict) -> dict:
    """The core/v1 Node a cluster entry describes."""
    name = spec["name"]
    # A kubelet always reports how many pods it takes (its maxPods, 110 by default); cpu and memory come from the file.
    allocatable = {"pods": str(DEFAULT_MAX_PODS), **{k: str(v) for k, v in (spec.get("allocatable") or {}).items()}}
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        **(spec.get("labels") or {}),
    }
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"taints": spec["taints"]} if spec.get("taints") else {},
        "status": {
            "capacity": dict(allocatable),
            "allocatable": allocatable,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                }
            ],
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": f"boot-{name}",
                "containerRuntimeVersion": "containerd://2.0.0",
                "kernelVersion": "6.8.0-kubesim",
                "kubeProxyVersion": "v1.34.0",
                "kubeletVersion": "v1.34.0",
                "machineID": f"machine-{name}",
                "operatingSystem": "linux",
                "osImage": "kubesim",
                "systemUUID": f"uuid-{name}",
            },
            "addresses": [{"type": "InternalIP", "address": internal_ip(name)}, {"type": "Hostname", "address": name}],
        },
    }
