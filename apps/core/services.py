"""Write helpers every app's services share."""

from __future__ import annotations

from typing import Any, cast

from django.core.exceptions import FieldDoesNotExist, ValidationError
from django.db import IntegrityError, connection, models, transaction
from django.db.models import ForeignObjectRel
from django.db.models.deletion import ProtectedError, RestrictedError, get_candidate_relations_to_delete
from django.utils import timezone

from .models import AuditEvent, SealedSecretModel, VersionedModel


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


def lock_for_transaction(key: str) -> None:
    """Serialise the writers that name `key` until the current transaction ends (a transaction-level advisory lock on
    PostgreSQL; SQLite serialises writers anyway). Call inside `transaction.atomic()`."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [key])


def lock_many_for_transaction(keys: list[str]) -> None:
    """`lock_for_transaction` for many keys in one statement, taken in sorted order (two writers naming some of the
    same keys cannot deadlock)."""
    if connection.vendor == "postgresql" and keys:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(pg_advisory_xact_lock(hashtextextended(key, 0))) FROM "
                           "(SELECT unnest(%s::text[]) AS key ORDER BY 1) AS sorted_keys", [sorted(keys)])


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


def version_check_locked(obj: VersionedModel, expected_version: int | None, *, label: str | None = None) -> None:
    """For a change that does not otherwise lock the row (a delete): lock it, then `version_check`. Without an
    `expected_version` nothing is read."""
    if expected_version is None:
        return
    locked = type(obj)._default_manager.select_for_update().get(pk=obj.pk)
    version_check(locked, expected_version, label=label)


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


def sealed_secret_applied(*, model: type[SealedSecretModel], pk: int, sealed: str, error: str = "") -> None:
    """The worker wrote (or failed to write) the row's Secret from `sealed`: forget the values, unless they were
    replaced meanwhile (then the newer ones wait for their own write); a failure is kept to be shown."""
    if error:
        model._default_manager.filter(pk=pk).update(apply_error=error[:500])
        return
    model._default_manager.filter(pk=pk, sealed=sealed).update(sealed="", applied_at=timezone.now(), apply_error="")
