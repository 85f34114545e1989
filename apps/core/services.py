"""Write helpers every app's services share."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import FieldDoesNotExist, ValidationError
from django.db import IntegrityError, models, transaction
from django.utils import timezone

from .models import AuditEvent, VersionedModel


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


# --- versions: a save based on an older read is refused -----------------------------------------------------------


class StaleWrite(ValidationError):
    """A save based on an older read of a row: refused, nothing saved. The message names what changed meanwhile
    and who changed it (as far as the audit log knows); `current_version` is the row's version now."""

    def __init__(self, message: str, *, current_version: int) -> None:
        self.current_version = current_version
        super().__init__(message, code="stale")


def _field_label(obj: models.Model, name: str) -> str:
    try:
        field = obj._meta.get_field(name.removesuffix("_id"))
    except FieldDoesNotExist:
        return name.replace("_", " ")
    return str(getattr(field, "verbose_name", name.replace("_", " ")))


def stale_message(obj: VersionedModel, read_version: int, *, label: str | None = None) -> str:
    """What changed on `obj` since `read_version` and who changed it, from the audit rows written since (each
    snapshot carries the version it made); `label` names the row (default: its kind and name)."""
    label = label or f"{obj._meta.verbose_name} {obj}"
    events = list(AuditEvent.objects.filter(
        object_type=obj._meta.model_name or "", object_id=str(obj.pk), after__version__gt=read_version,
    ).select_related("actor").order_by("at", "id"))
    reload = "Nothing was saved; reload to see the current values, then make your change again."
    if not events:
        return (f"{label[:1].upper()}{label[1:]} was changed since you opened it (it is at version {obj.version}, "
                f"your copy at {read_version}). {reload}")
    fields: list[str] = []
    for event in events:
        before, after = event.before or {}, event.after or {}
        for name in after:
            if name != "version" and before.get(name) != after[name] and name not in fields:
                fields.append(name)
    actors = []
    for event in events:
        name = event.actor.get_username() if event.actor else "the system"
        if name not in actors:
            actors.append(name)
    when = timezone.localtime(events[-1].at).strftime("%Y-%m-%d %H:%M:%S")
    if events[0].before is None:
        return (f"{label[:1].upper()}{label[1:]} was created by {', '.join(actors)} since you opened it (last "
                f"change at {when}). {reload}")
    what = ", ".join(_field_label(obj, name) for name in fields) or "no field you can see"
    return (f"{label[:1].upper()}{label[1:]} was changed by {', '.join(actors)} since you opened it (last at "
            f"{when}): {what}. {reload}")


def version_check(obj: VersionedModel, expected_version: int | None, *, label: str | None = None) -> None:
    """Refuse a save based on an older read: call it on the row as locked for the update (select_for_update),
    before anything changes. `expected_version` None means the caller did not say which version it read (an API
    PATCH without If-Match or `version`): the save goes ahead. Pages always say."""
    if expected_version is not None and obj.version != expected_version:
        raise StaleWrite(stale_message(obj, expected_version, label=label), current_version=obj.version)
