"""Helpers for the organisation page tests: form payloads built from the stored state."""

from __future__ import annotations

from typing import Any

from apps.org.models import Department, NodePool, Project


def cell_key(owner: Department | Project, pool: NodePool) -> str:
    return f"d-{pool.pk}" if isinstance(owner, Department) else f"p{owner.pk}-{pool.pk}"


def quota_payload(department: Department, changes: dict[tuple[Any, str, str], Any] | None = None) -> dict[str, str]:
    """The quota table's POST data with every cell at its stored value and version (0: no quota), then `changes`:
    {(owner, pool slug, "deserved" | "limit" | "weight" | "version"): value}."""
    pools = list(NodePool.objects.all())
    owners: list[Department | Project] = [department, *department.projects.all()]
    data: dict[str, str] = {}
    for owner in owners:
        quotas = {q.node_pool_id: q for q in owner.quotas.all()}
        for pool in pools:
            quota, key = quotas.get(pool.pk), cell_key(owner, pool)
            data[f"{key}-deserved"] = "" if quota is None else str(quota.deserved)
            data[f"{key}-limit"] = "" if quota is None or quota.limit is None else str(quota.limit)
            data[f"{key}-weight"] = "" if quota is None else format(quota.over_quota_weight.normalize(), "f")
            data[f"{key}-version"] = "0" if quota is None else str(quota.version)
    pools_by_slug = {pool.slug: pool for pool in pools}
    for (owner, pool_slug, part), value in (changes or {}).items():
        data[f"{cell_key(owner, pools_by_slug[pool_slug])}-{part}"] = "" if value is None else str(value)
    return data


def pool_payload(**overrides: Any) -> dict[str, Any]:
    data = {
        "slug": "b200", "name": "B200", "description": "", "gpu_resource": "nvidia.com/gpu",
        "gpu_product": "NVIDIA-B200", "cut": "full", "mig_profile": "", "replicas_per_card": "1",
        "node_labels": "portal.gpu/pool=b200", "node_taints": "", "capacity": "8", "card_fraction": "1",
        "scheduler": "kueue",
    }
    data.update(overrides)
    return {key: value for key, value in data.items() if value is not None}
