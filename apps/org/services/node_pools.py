"""Node pools: the GPU shapes the cluster offers (a pool in use keeps its name: it names its Kueue objects)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Sum

from apps.accounts.access import Action
from apps.core.actors import Actor
from apps.core.audit import audit_record, snapshot
from apps.core.services import model_delete, model_save, model_update, version_check
from apps.org.models import NodePool, Quota

from .common import _field_errors, _require
from .kueue_sync import _org_changed

NODE_POOL_FIELDS = {
    "slug", "name", "description", "gpu_resource", "gpu_product", "cut", "mig_profile", "replicas_per_card",
    "node_labels", "node_taints", "capacity", "card_fraction_numerator", "card_fraction_denominator",
    "over_subscribable", "price_per_card_hour",
}


def _pool_capacity_error(pool: NodePool) -> str | None:
    if pool.over_subscribable:
        return None
    assigned = Quota.objects.filter(node_pool=pool, department__isnull=False).aggregate(total=Sum("deserved"))["total"]
    if assigned and assigned > pool.capacity:
        return (f"Departments hold {assigned} deserved units on {pool.slug}, more than a capacity of {pool.capacity}. "
                "Lower their quotas first, or mark the pool over-subscribable.")
    return None


def node_pool_create(*, actor: Actor, **fields: Any) -> NodePool:
    _require(actor, Action.MANAGE)
    pool = NodePool()
    model_update(pool, fields, NODE_POOL_FIELDS)
    with transaction.atomic():
        model_save(pool)
        audit_record(actor=actor, action="node_pool.create", obj=pool, before=None, after=snapshot(pool))
        _org_changed()
    return pool


def node_pool_update(*, actor: Actor, node_pool: NodePool, expected_version: int | None = None,
                     **changes: Any) -> NodePool:
    """`expected_version`: the version the change was read at (a stale one raises StaleWrite), as in every
    `*_update` service here."""
    _require(actor, Action.MANAGE)
    with transaction.atomic():
        pool = NodePool.objects.select_for_update().get(pk=node_pool.pk)
        version_check(pool, expected_version)
        before = snapshot(pool)
        errors: dict[str, list[str]] = {}
        if "slug" in changes and changes["slug"] != pool.slug and pool.quotas.exists():
            errors["slug"] = ["The name of a pool in use cannot change: it names its Kueue objects."]
        changed = model_update(pool, changes, NODE_POOL_FIELDS)
        if not changed:
            return pool
        _field_errors(pool, errors)
        if not {"capacity", "over_subscribable"} & set(errors) and (capacity_error := _pool_capacity_error(pool)):
            errors["capacity"] = [capacity_error]
        if errors:
            raise ValidationError(errors)
        model_save(pool, update_fields=[*changed, "updated_at"])
        audit_record(actor=actor, action="node_pool.update", obj=pool, before=before, after=snapshot(pool))
        _org_changed()
    return pool


def node_pool_delete(*, actor: Actor, node_pool: NodePool) -> None:
    _require(actor, Action.MANAGE)
    with transaction.atomic():
        count = node_pool.quotas.count()
        if count:
            raise ValidationError(
                f"{count} quota{'s' if count != 1 else ''} still use {node_pool.slug}; remove them first."
            )
        audit_record(actor=actor, action="node_pool.delete", obj=node_pool, before=snapshot(node_pool), after=None)
        model_delete(node_pool, what=f"pool {node_pool.slug}")
        _org_changed()
