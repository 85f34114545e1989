"""Write helpers every app's services share."""

from __future__ import annotations

from typing import Any, cast

from django.core.exceptions import ValidationError
from django.db import IntegrityError, models, transaction
from django.db.models import ForeignObjectRel
from django.db.models.deletion import ProtectedError, RestrictedError, get_candidate_relations_to_delete


def model_update(obj: models.Model, changes: dict[str, Any], allowed: set[str]) -> list[str]:
    """Set the allowed fields that differ on `obj` (not saved); refuses unknown fields by name. Returns what changed."""
    unknown = set(changes) - allowed
    if unknown:
        raise ValidationError(f"These fields cannot be changed here: {', '.join(sorted(unknown))}.")
    changed = []
    for name, value in changes.items():
        if getattr(obj, name) != value:
            setattr(obj, name, value)
            changed.append(name)
    return changed


def model_save(obj: models.Model, *, update_fields: list[str] | None = None) -> None:
    """Validate every field and model constraint, then save; database races surface as ValidationError too."""
    obj.full_clean()
    try:
        with transaction.atomic():
            obj.save(update_fields=update_fields)
    except IntegrityError as exc:  # a concurrent write won a uniqueness race
        raise ValidationError("This conflicts with a change made at the same time; reload and try again.") from exc


def references_in_use(obj: models.Model) -> str:
    """What still points at `obj` through a PROTECT or RESTRICT key, e.g. "3 workloads (1 not finished) and 12
    GPU-hour records"; empty when nothing does. Read from the model graph, so a lower app need not import the apps
    that point at it. A referring model may name its rows (`reference_noun = (singular, plural)`; None when they
    are counted with another model's) and add a note on them (`reference_note(rows) -> str`)."""
    parts = []
    for candidate in get_candidate_relations_to_delete(obj._meta):  # hidden ones (related_name='+') too
        relation = cast(ForeignObjectRel, candidate)
        if relation.on_delete not in (models.PROTECT, models.RESTRICT):
            continue
        model = relation.related_model
        meta = model._meta
        noun = getattr(model, "reference_noun", (meta.verbose_name, meta.verbose_name_plural))
        if noun is None:
            continue
        rows = model._base_manager.filter(**{relation.field.name: obj})
        count = rows.count()
        if not count:
            continue
        note = getattr(model, "reference_note", lambda rows: "")(rows)
        parts.append(f"{count} {noun[0] if count == 1 else noun[1]}{f' ({note})' if note else ''}")
    return " and ".join([", ".join(parts[:-1]), parts[-1]] if len(parts) > 1 else parts)


def model_delete(obj: models.Model, *, what: str) -> None:
    """Delete `obj` unless rows still refer to it: then a ValidationError says which (`what` names `obj` in it),
    and nothing is deleted. History (finished workloads, GPU-hours) is never deleted with what it refers to."""
    if in_use := references_in_use(obj):
        verb = "uses" if in_use.startswith("1 ") and " and " not in in_use else "use"
        raise ValidationError(f"{in_use} still {verb} {what}; it cannot be deleted while they exist.")
    try:
        with transaction.atomic():
            obj.delete()
    except (ProtectedError, RestrictedError) as exc:  # a reference further down a cascade
        raise ValidationError(f"Other records still use {what}; it cannot be deleted.") from exc
