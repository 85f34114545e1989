"""Write helpers every app's services share."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, models, transaction


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
