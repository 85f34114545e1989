"""Notification channels (docs/architecture.md, Notification channels): who sets them up, what a channel must say,
and the outbox rows that carry events to them.

- A channel belongs to one user (their own; anyone signed in) or one project (its leads, department admins and
  admins; audited). Its URL and webhook secret are sealed at rest and never read back.
- An event is recorded as one `NotificationDelivery` per matching channel, in the transaction of the change it is
  about, with an intent (apps.core.intents) whose task sends it after commit; the sweep sends it again if the message
  is lost. The delivery is unique per (channel, event, key), the key naming the object and its transition, so a
  replayed observation or a second sweep sends nothing twice.
- The worker writes what each attempt got (`notification_delivery_attempted`); a receiver that is down or slow only
  delays its own deliveries, never a page or a submit, which only write rows.
- Nor the worker's other tasks (the ones that send submitted work to the cluster among them), which share its
  processes: a request takes at most `NOTIFICATIONS_TIMEOUT` in all (apps.core.outbound), and a receiver that did not
  answer pauses its channel (`notification_channel_reached`): while paused its deliveries wait without trying, and
  when the pause ends one of them tries first (`notification_channel_turn`). The pause grows with the time the
  receiver has been silent (30 s, then as long as it has been, at most 15 minutes), so a dead receiver costs one
  timeout per pause, not one per event and retry.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import F, Q
from django.urls import reverse
from django.utils import timezone

from apps.accounts import access
from apps.core import intents, outbound, sealed
from apps.core.actors import Actor
from apps.core.audit import audit_record, snapshot
from apps.core.models import AuditEvent
from apps.core.services import model_update, version_check, version_check_locked
from apps.org.models import NotificationChannel, NotificationDelivery, NotificationEvent, Project, Quota
from apps.org.selectors import notification_channels_listening

from .common import DENIED, _field_errors

NOTIFICATION_DELIVER_TASK = "worker.tasks.notification_deliver"
NOTIFICATION_INTENT = "notification.deliver"
# Not sent by then (the broker lost the message): the sweep sends it again. The task's own retries move it later.
NOTIFICATION_DEADLINE = timedelta(seconds=30)
NOTIFICATION_MAX_ATTEMPTS = 6  # then the delivery is failed for good (about 15 minutes of backoff)
RETRY_BASE = timedelta(seconds=30)
MAX_PAUSE = timedelta(minutes=15)
NOTIFICATION_GIVE_UP = timedelta(days=1)  # a delivery still paused a day after its event fails for good
MIN_SECRET = 16
MAX_SECRET = 256
HOOK_KINDS = frozenset({NotificationChannel.Kind.SLACK, NotificationChannel.Kind.TEAMS,
                        NotificationChannel.Kind.WEBHOOK})
CHANNEL_FIELDS = {"name", "kind", "email", "events", "enabled"}
CHANNEL_CHANGEABLE = CHANNEL_FIELDS - {"kind"}


def _snapshot(channel: NotificationChannel) -> dict[str, Any]:
    """The audit snapshot: never the sealed URL and secret."""
    data = snapshot(channel)
    data.pop("sealed", None)
    return data


def _require_manager(actor: Actor, channel: NotificationChannel) -> None:
    if channel.project is not None:
        if not access.can_manage_notifications_of(actor, channel.project):
            raise PermissionDenied(DENIED)
    elif channel.user_id != actor.pk:
        raise PermissionDenied(DENIED)


def _host_text(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme.lower()}://{parts.netloc.rsplit('@', 1)[-1]}"


def _channel_errors(channel: NotificationChannel, *, url: str, secret: str) -> dict[str, list[str]]:
    """Every reason the channel cannot be saved, at once: the fields' own, then what its kind needs."""
    errors = _field_errors(channel, {})
    kind = channel.kind
    if isinstance(channel.events, list) and not channel.events and "events" not in errors:
        errors["events"] = ["Choose at least one event."]
    if kind in HOOK_KINDS:
        if not url:
            errors.setdefault("url", []).append("Give the receiver's URL.")
        else:
            errors.setdefault("url", []).extend(outbound.url_errors(url))
        if channel.email:
            errors.setdefault("email", []).append("Only e-mail channels have an address.")
    elif kind == NotificationChannel.Kind.EMAIL:
        if url:
            errors.setdefault("url", []).append("An e-mail channel has no URL.")
        if not channel.email and (channel.project_id is not None or not (channel.user and channel.user.email)):
            errors.setdefault("email", []).append(
                "Give the address to send to." if channel.project_id is not None
                else "Give the address to send to (your account has none).")
    if kind == NotificationChannel.Kind.WEBHOOK:
        if not secret:
            errors.setdefault("secret", []).append("Give a secret: the receiver checks each request's signature "
                                                   "with it.")
        elif not MIN_SECRET <= len(secret) <= MAX_SECRET:
            errors.setdefault("secret", []).append(f"Give a secret of {MIN_SECRET} to {MAX_SECRET} characters.")
    elif secret:
        errors.setdefault("secret", []).append("Only webhook channels sign their requests with a secret.")
    return {name: messages for name, messages in errors.items() if messages}


def _seal(channel: NotificationChannel, url: str, secret: str) -> None:
    channel.sealed = sealed.seal({"url": url, "secret": secret}) if url else ""
    channel.url_host = _host_text(url) if url else ""


def channel_hook(channel: NotificationChannel) -> dict[str, str]:
    """The sealed URL and secret (for the worker; never for a page or the API)."""
    values = sealed.unseal(channel.sealed) if channel.sealed else {}
    return {"url": str(values.get("url", "")), "secret": str(values.get("secret", ""))}


def notification_channel_create(*, actor: Actor, project: Project | None = None, url: str = "", secret: str = "",
                                **fields: Any) -> NotificationChannel:
    """A channel of the actor's own, or of `project` for those who manage its channels."""
    channel = NotificationChannel(project=project, user=None if project is not None else actor, created_by=actor)
    if project is not None and not access.can_manage_notifications_of(actor, project):
        raise PermissionDenied(DENIED)
    model_update(channel, fields, CHANNEL_FIELDS)
    errors = _channel_errors(channel, url=url, secret=secret)
    if errors:
        raise ValidationError(errors)
    _seal(channel, url, secret)
    with transaction.atomic():
        channel.save()
        if project is not None:
            audit_record(actor=actor, action="notification_channel.create", obj=channel, before=None,
                         after=_snapshot(channel), project=project)
    return channel


def notification_channel_update(*, actor: Actor, channel: NotificationChannel, expected_version: int | None = None,
                                url: str | None = None, secret: str | None = None,
                                **changes: Any) -> NotificationChannel:
    """Change a channel; `url` and `secret` are replaced only when given (they are never read back to edit)."""
    fixed = sorted(set(changes) & {"kind", "project", "user"})
    if fixed:
        raise ValidationError({name: ["A channel's kind and owner cannot change; delete it and create another."]
                               for name in fixed})
    _require_manager(actor, channel)
    with transaction.atomic():
        channel = NotificationChannel.objects.select_for_update(of=("self",)).select_related(
            "project__department", "user").get(pk=channel.pk)
        version_check(channel, expected_version)
        before = _snapshot(channel)
        changed = model_update(channel, changes, CHANNEL_CHANGEABLE)
        current = channel_hook(channel)
        new_url = current["url"] if url is None else url
        new_secret = current["secret"] if secret is None else secret
        errors = _channel_errors(channel, url=new_url, secret=new_secret)
        if errors:
            raise ValidationError(errors)
        if (new_url, new_secret) != (current["url"], current["secret"]):
            _seal(channel, new_url, new_secret)
            changed += ["sealed", "url_host"]
            if new_url != current["url"] and channel.unreachable_since is not None:
                channel.unreachable_since = channel.paused_until = None  # another receiver: tried at once
                changed += ["unreachable_since", "paused_until"]
        if not changed:
            return channel
        channel.save(update_fields=[*changed, "updated_at"])
        if channel.project_id is not None:
            after = _snapshot(channel)
            if "sealed" in changed:
                after["receiver_changed"] = True
            audit_record(actor=actor, action="notification_channel.update", obj=channel, before=before, after=after,
                         project=channel.project)
    return channel


def notification_channel_delete(*, actor: Actor, channel: NotificationChannel,
                                expected_version: int | None = None) -> None:
    _require_manager(actor, channel)
    with transaction.atomic():
        version_check_locked(channel, expected_version)
        if channel.project_id is not None:
            audit_record(actor=actor, action="notification_channel.delete", obj=channel, before=_snapshot(channel),
                         after=None, project=channel.project)
        channel.delete()


def _record(channel: NotificationChannel, *, event: str, key: str,
            payload: dict[str, Any]) -> NotificationDelivery | None:
    delivery, created = NotificationDelivery.objects.get_or_create(
        channel=channel, event=event, key=key[:200], defaults={"payload": payload})
    if not created:
        return None
    intents.intent_record(kind=NOTIFICATION_INTENT, task=NOTIFICATION_DELIVER_TASK, target_id=delivery.pk,
                          deadline=NOTIFICATION_DEADLINE)
    return delivery


def _payload(*, event: str, key: str, obj: dict[str, Any], summary: str, link: str) -> dict[str, Any]:
    return {"event": event, "id": f"{event}:{key}", "timestamp": timezone.now().isoformat(), "summary": summary,
            "object": obj, "link": link}


def notification_channel_test(*, actor: Actor, channel: NotificationChannel, link: str) -> NotificationDelivery:
    """Send the channel a test event now (the "send test" button), whatever events it listens to."""
    _require_manager(actor, channel)
    key = f"test:{timezone.now().isoformat()}:{actor.pk}"
    payload = _payload(event=NotificationEvent.TEST, key=key, link=link,
                       obj={"type": "channel", "id": channel.pk, "name": channel.name},
                       summary=f"Test from GPU Portal: the channel {channel.name} works.")
    with transaction.atomic():
        delivery = _record(channel, event=NotificationEvent.TEST, key=key, payload=payload)
    assert delivery is not None  # the key is new
    return delivery


def notifications_emit(*, event: str, key: str, obj: dict[str, Any], summary: str, link: str,
                       user_ids: Iterable[int] = (), project_ids: Iterable[int] = (),
                       channels: list[NotificationChannel] | None = None) -> int:
    """Record `event` for every enabled channel of these users and projects that listens to it (in the caller's
    transaction; sent after commit). Idempotent per (channel, event, key); returns how many deliveries are new.
    `channels`: those listening, when the caller has read them already (`notification_channels_listening`, to say
    nothing when nobody listens)."""
    if channels is None:
        channels = notification_channels_listening(event=event, user_ids=user_ids, project_ids=project_ids)
    if not channels:
        return 0
    payload = _payload(event=event, key=key, obj=obj, summary=summary, link=link)
    with transaction.atomic():
        return sum(_record(channel, event=event, key=key, payload=payload) is not None for channel in channels)


def quota_channels_record(*, changes: list[tuple[Quota, AuditEvent]]) -> int:
    """`quota.changed` for the channels of each changed quota's project (of every project of its department, for a
    department's own quota), in the change's transaction; each audit row names its change. Two queries at most
    however many quotas changed (a quota table saves many at once): the departments' projects, the channels."""
    departments = {quota.department_id for quota, _ in changes if not quota.project_id and quota.department_id}
    of_department: dict[int, list[int]] = defaultdict(list)
    if departments:
        for project_id, department_id in Project.objects.filter(department_id__in=departments).values_list(
                "pk", "department_id"):
            of_department[department_id].append(project_id)
    targets = [(quota, audit, [quota.project_id] if quota.project_id else of_department[quota.department_id or 0])
               for quota, audit in changes]
    projects = {project_id for _, _, ids in targets for project_id in ids}
    channels = [channel for channel in NotificationChannel.objects.filter(project_id__in=projects, enabled=True)
                if NotificationEvent.QUOTA_CHANGED in channel.events] if projects else []
    recorded = 0
    for quota, audit, project_ids in targets:
        listening = [channel for channel in channels if channel.project_id in project_ids]
        if not listening:
            continue
        key, summary, obj = _quota_change(quota, audit)
        payload = _payload(event=NotificationEvent.QUOTA_CHANGED, key=key, obj=obj, summary=summary,
                           link=f"{settings.PORTAL_BASE_URL}{reverse('usage:quota')}")
        with transaction.atomic():
            recorded += sum(_record(channel, event=NotificationEvent.QUOTA_CHANGED, key=key, payload=payload)
                            is not None for channel in listening)
    return recorded


def _quota_change(quota: Quota, audit: AuditEvent) -> tuple[str, str, dict[str, Any]]:
    """A quota change's delivery key, its sentence and the object the message carries."""
    after = audit.after or {}
    owner = quota.project if quota.project_id else quota.department
    pool = quota.node_pool
    if audit.after is None:
        summary = f"{owner}'s quota on {pool.name} was removed."
    else:
        limit = after.get("limit")
        summary = (f"{owner}'s quota on {pool.name} is now {after.get('deserved')} deserved, "
                   f"{'no limit' if limit is None else f'limit {limit}'}, over-quota weight "
                   f"{after.get('over_quota_weight')}.")
    values = after or audit.before or {}
    return f"quota:{quota.pk}:audit:{audit.pk}", summary, {
        "type": "quota", "id": quota.pk, "node_pool": pool.slug, "project": quota.project_id,
        "department": quota.department_id if not quota.project_id else None, "action": audit.action,
        **{name: values.get(name) for name in ("deserved", "limit", "over_quota_weight")},
        "removed": audit.after is None}


# --- the worker's writes ------------------------------------------------------------------------------------------


def notification_retry_at(attempts: int) -> timedelta:
    """How long after its `attempts`-th failed attempt a delivery is tried again: 30 s, 1, 2, 4, 8 minutes."""
    return RETRY_BASE * 2 ** max(0, attempts - 1)


def notification_channel_turn(*, channel: NotificationChannel) -> datetime | None:
    """None when a delivery of `channel` may try its receiver now; else when to try again, the channel being paused.
    At the end of a pause one delivery takes the turn (a conditional UPDATE moving the pause past its attempt), so
    the deliveries that waited do not all try a silent receiver at once."""
    if channel.unreachable_since is None:
        return None
    now = timezone.now()
    probe = now + 2 * timedelta(seconds=settings.NOTIFICATIONS_TIMEOUT)
    if NotificationChannel.objects.filter(pk=channel.pk).filter(
            Q(paused_until__isnull=True) | Q(paused_until__lte=now)).update(paused_until=probe):
        return None
    return NotificationChannel.objects.filter(pk=channel.pk).values_list("paused_until", flat=True).first() or now


def notification_channel_reached(*, channel: NotificationChannel, answered: bool) -> None:
    """Whether the receiver answered an attempt (any HTTP status) or not (a timeout, no connection): an answer ends
    a pause; silence pauses the channel for as long as the receiver has been silent (30 s at first, at most 15
    minutes). Plain updates: a channel's version is its owner's edits, not the worker's."""
    rows = NotificationChannel.objects.filter(pk=channel.pk)
    if answered:
        if channel.unreachable_since is not None:
            rows.update(unreachable_since=None, paused_until=None)
        return
    now = timezone.now()
    since = rows.values_list("unreachable_since", flat=True).first() or now
    rows.update(unreachable_since=since, paused_until=now + min(max(RETRY_BASE, now - since), MAX_PAUSE))


def notification_delivery_attempted(*, delivery_id: int, delivered: bool, final: bool, status_code: int | None,
                                    error: str = "") -> None:
    """Write what one attempt got: delivered, failed for good (`final`), or to be tried again. An error stays in
    `last_error` after a later success, so the log says what went wrong on the way."""
    now = timezone.now()
    changes: dict[str, Any] = {"attempts": F("attempts") + 1, "attempted_at": now, "status_code": status_code}
    if error:
        changes["last_error"] = error[:intents.ERROR_CHARS]
    if delivered:
        changes.update(status=NotificationDelivery.Status.DELIVERED, delivered_at=now)
    elif final:
        changes["status"] = NotificationDelivery.Status.FAILED
    NotificationDelivery.objects.filter(pk=delivery_id, status=NotificationDelivery.Status.PENDING).update(**changes)
