"""Node pools: the GPU shapes the cluster offers (a pool in use keeps its name: it names its Kueue objects).

A pool's scheduler (Kueue or KAI) changes only while no work is live on it: that work was queued by the scheduler it
has now, and would be lost to the other (the workloads app refuses such a change, signals.py).

A pool's price per card-hour has a history (NodePoolPrice): a price given with a new pool prices all of its use; a
change prices use from the moment it is saved, so past hours and closed months keep the price they had (README,
"Cost and chargeback").
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any, cast

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from apps.accounts.access import Action
from apps.core.actors import Actor
from apps.core.audit import audit_record, snapshot
from apps.core.services import model_delete, model_save, model_update, version_check, version_check_locked
from apps.org import signals
from apps.org.models import PRICED_FROM_THE_START, NodePool, NodePoolPrice, Quota, ServingReservation

from .common import _field_errors, _require
from .kueue_sync import _org_changed

NODE_POOL_FIELDS = {
    "slug", "name", "description", "gpu_resource", "gpu_product", "cut", "mig_profile", "replicas_per_card",
    "node_labels", "node_taints", "capacity", "card_fraction_numerator", "card_fraction_denominator",
    "over_subscribable", "serving", "price_per_card_hour", "scheduler", "gpu_fractions",
}


def _pool_capacity_error(pool: NodePool) -> str | None:
    if pool.over_subscribable:
        return None
    assigned = Quota.objects.filter(node_pool=pool, department__isnull=False).aggregate(total=Sum("deserved"))["total"]
    if assigned and assigned > pool.capacity:
        return (f"Departments hold {assigned} deserved units on {pool.slug}, more than a capacity of {pool.capacity}. "
                "Lower their quotas first, or mark the pool over-subscribable.")
    return None


def _serving_errors(pool: NodePool) -> dict[str, list[str]]:
    """A serving pool holds reservations and no quotas (it has no Kueue queues), and its reservations fit in it."""
    errors: dict[str, list[str]] = {}
    if pool.serving and pool.quotas.exists():
        errors["serving"] = [f"{pool.slug} has quotas, which a serving pool cannot have (it has no Kueue queues); "
                             "remove them first."]
    reserved = ServingReservation.objects.filter(node_pool=pool).aggregate(total=Sum("cards"))["total"] or 0
    if not pool.serving and reserved:
        errors["serving"] = [f"Projects reserve {reserved} units of {pool.slug} for serving; remove their "
                             "reservations first."]
    elif reserved > pool.capacity:
        errors["capacity"] = [f"Projects reserve {reserved} units of {pool.slug} for serving, more than a capacity of "
                              f"{pool.capacity}. Lower their reservations first."]
    return errors


def _scheduler_change_errors(pool: NodePool) -> dict[str, list[str]]:
    """Every refusal of the pool's new scheduler by the apps above (signals.node_pool_scheduler_change_proposed: the
    workloads app's, for work live on the pool)."""
    errors: dict[str, list[str]] = {}
    for _, response in signals.node_pool_scheduler_change_proposed.send(sender=NodePool, node_pool=pool):
        refusals = cast("Mapping[str, list[str]] | None", response)  # the stubs type a response as a string
        for name, messages in (refusals or {}).items():
            errors.setdefault(name, []).extend(messages)
    return errors


def _price_history_add(*, pool: NodePool, price: Decimal | None, actor: Actor, at: datetime) -> datetime:
    """The pool's price is `price` from `at` on (from the latest row's moment when the clock is behind it, which it
    then replaces); returns the moment it took effect. Call with the pool row locked."""
    latest = NodePoolPrice.objects.filter(node_pool=pool).order_by("-valid_from").first()
    if latest is not None and latest.price_per_card_hour == price:  # the same price, written another way
        return latest.valid_from
    if latest is not None and latest.valid_from >= at:
        latest.price_per_card_hour, latest.set_by = price, actor
        latest.save(update_fields=["price_per_card_hour", "set_by"])
        return latest.valid_from
    NodePoolPrice.objects.create(node_pool=pool, price_per_card_hour=price, valid_from=at, set_by=actor)
    return at


def node_pool_create(*, actor: Actor, **fields: Any) -> NodePool:
    """A new pool; a price given with it prices all of the pool's use (the first row of its price history)."""
    _require(actor, Action.MANAGE)
    pool = NodePool()
    model_update(pool, fields, NODE_POOL_FIELDS)
    with transaction.atomic():
        model_save(pool)
        after = snapshot(pool)
        if pool.price_per_card_hour is not None:
            valid_from = _price_history_add(pool=pool, price=pool.price_per_card_hour, actor=actor,
                                            at=PRICED_FROM_THE_START)
            after["price_valid_from"] = valid_from.isoformat()
        audit_record(actor=actor, action="node_pool.create", obj=pool, before=None, after=after)
        _org_changed()
    return pool


def node_pool_update(*, actor: Actor, node_pool: NodePool, expected_version: int | None = None,
                     **changes: Any) -> NodePool:
    """`expected_version`: the version the change was read at (a stale one raises StaleWrite), as in every
    `*_update` service here. A new price is in force from now on (a row of the price history, its moment in the
    audit row's `price_valid_from`); hours before it keep the price they had."""
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
        if not {"capacity", "serving"} & set(errors):
            for name, messages in _serving_errors(pool).items():
                errors.setdefault(name, []).extend(messages)
        if "scheduler" in changed and "scheduler" not in errors:
            for name, messages in _scheduler_change_errors(pool).items():
                errors.setdefault(name, []).extend(messages)
        if errors:
            raise ValidationError(errors)
        model_save(pool, update_fields=[*changed, "updated_at"])
        after = snapshot(pool)
        if "price_per_card_hour" in changed:
            valid_from = _price_history_add(pool=pool, price=pool.price_per_card_hour, actor=actor, at=timezone.now())
            after["price_valid_from"] = valid_from.isoformat()
        audit_record(actor=actor, action="node_pool.update", obj=pool, before=before, after=after)
        _org_changed()
    return pool


def node_pool_delete(*, actor: Actor, node_pool: NodePool, expected_version: int | None = None) -> None:
    """`expected_version`: the version the delete was based on (a stale one raises StaleWrite)."""
    _require(actor, Action.MANAGE)
    with transaction.atomic():
        version_check_locked(node_pool, expected_version)
        count = node_pool.quotas.count()
        if count:
            raise ValidationError(
                f"{count} quota{'s' if count != 1 else ''} still use {node_pool.slug}; remove them first."
            )
        audit_record(actor=actor, action="node_pool.delete", obj=node_pool, before=snapshot(node_pool), after=None)
        model_delete(node_pool, what=f"pool {node_pool.slug}")
        _org_changed()
