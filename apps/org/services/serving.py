"""Serving pools and their reservations: a fixed number of a serving pool's units per project, for inference
services (docs/architecture.md, Inference services). The reservations on a pool add up to at most its capacity, so
every project can always start what it was promised; none of it goes through Kueue.

Lowering a reservation below what a project's services hold now stops nothing: it refuses their next submit or
scale-up until they fit (the workloads app, above this one, does that check).
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Sum

from apps.accounts.access import Action
from apps.core.actors import Actor
from apps.core.audit import audit_record, snapshot
from apps.core.services import model_delete, model_save, version_check, version_check_locked
from apps.org.models import NodePool, Project, ServingReservation

from .common import _field_errors, _require

SERVING_RESERVATION_FIELDS = {"project", "node_pool", "cards"}


def _reservation_errors(reservation: ServingReservation, errors: dict[str, list[str]]) -> dict[str, list[str]]:
    """Every refusal of `reservation` as it would be saved: its fields, then the pool's rules. Call with the pool
    row locked, so two reservations saved at once cannot both take the last free units."""
    _field_errors(reservation, errors)
    pool = reservation.node_pool
    if "cards" in errors:
        return errors
    if not pool.serving:
        errors.setdefault("node_pool", []).append(
            f"{pool.slug} is not a serving pool; mark it as serving before reserving its cards.")
        return errors
    others = (ServingReservation.objects.filter(node_pool=pool).exclude(pk=reservation.pk)
              .aggregate(total=Sum("cards"))["total"] or 0)
    if others + reservation.cards > pool.capacity:
        room = max(0, pool.capacity - others)
        errors.setdefault("cards", []).append(
            f"{pool.slug} has {pool.capacity} units and other projects reserve {others}, so at most {room} can be "
            "reserved here.")
    return errors


def _locked_pool(pool: NodePool) -> NodePool:
    return NodePool.objects.select_for_update().get(pk=pool.pk)


def serving_reservation_create(*, actor: Actor, project: Project, node_pool: NodePool,
                               cards: int) -> ServingReservation:
    """A project's reservation on a serving pool; admins only."""
    _require(actor, Action.MANAGE)
    with transaction.atomic():
        reservation = ServingReservation(project=project, node_pool=_locked_pool(node_pool), cards=cards)
        if errors := _reservation_errors(reservation, {}):
            raise ValidationError(errors)
        model_save(reservation)
        audit_record(actor=actor, action="serving_reservation.create", obj=reservation, before=None,
                     after=snapshot(reservation), project=reservation.project)
    return reservation


def serving_reservation_update(*, actor: Actor, serving_reservation: ServingReservation,
                               expected_version: int | None = None, **changes: Any) -> ServingReservation:
    """Only the number of cards changes; the project and the pool are the reservation's identity (delete and
    create instead)."""
    _require(actor, Action.MANAGE)
    errors: dict[str, list[str]] = {
        name: ["A reservation's project and pool cannot change; delete it and create another."]
        for name in ("project", "node_pool")
        if name in changes and changes[name] != getattr(serving_reservation, name)
    }
    if unknown := sorted(set(changes) - SERVING_RESERVATION_FIELDS):
        errors["non_field_errors"] = [f"These fields cannot be changed here: {', '.join(unknown)}."]
    with transaction.atomic():
        _locked_pool(serving_reservation.node_pool)
        reservation = ServingReservation.objects.select_for_update().get(pk=serving_reservation.pk)
        version_check(reservation, expected_version)
        before = snapshot(reservation)
        if "cards" in changes:
            reservation.cards = changes["cards"]
        if errors := _reservation_errors(reservation, errors):
            raise ValidationError(errors)
        if reservation.cards == before["cards"]:
            return reservation
        model_save(reservation, update_fields=["cards", "updated_at"])
        audit_record(actor=actor, action="serving_reservation.update", obj=reservation, before=before,
                     after=snapshot(reservation), project=reservation.project)
    return reservation


def serving_reservation_delete(*, actor: Actor, serving_reservation: ServingReservation,
                               expected_version: int | None = None) -> None:
    """Running services keep running; the project cannot start or scale up services on the pool any more."""
    _require(actor, Action.MANAGE)
    with transaction.atomic():
        version_check_locked(serving_reservation, expected_version)
        audit_record(actor=actor, action="serving_reservation.delete", obj=serving_reservation,
                     before=snapshot(serving_reservation), after=None, project=serving_reservation.project)
        model_delete(serving_reservation, what=f"reservation {serving_reservation}")
