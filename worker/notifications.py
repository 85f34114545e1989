"""Sending one notification delivery to its channel (docs/architecture.md, Notification channels): the message each
kind of receiver expects, the webhook's signature, and what an attempt's outcome means for retrying.

- **webhook**: the event as compact JSON (`event`, `id`, `occurred_at`, `timestamp`, `summary`, `object`, `link`),
  with `X-Portal-Signature: sha256=<hex>`, the HMAC-SHA256 of exactly those bytes keyed with the channel's secret.
  `timestamp` is the moment of this attempt, inside the signed body, so a receiver can refuse an old body replayed
  later and still take a retry sent minutes after the event (`occurred_at`; `id` is the same on every attempt).
- **slack**: an incoming webhook's Block Kit message (a section and a button to the portal), with `text` as the
  notification's fallback.
- **teams**: a Teams workflow webhook's message carrying one Adaptive Card (the format Microsoft's Workflows accept
  now that Office 365 connectors and their MessageCards are retired).
- **email**: one mail to the channel's address (or its owner's).

Retry: timeouts, connection errors, 5xx, 408 and 429 are tried again; any other answer, and a URL the SSRF guard
refuses now, fail the delivery for good (the receiver will not change its mind).
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.mail import send_mail
from django.utils import timezone

from apps.core import outbound, sealed
from apps.org import services as org_services
from apps.org.models import NotificationChannel, NotificationDelivery, NotificationEvent

SIGNATURE_HEADER = "X-Portal-Signature"
RETRIED_STATUSES = frozenset({408, 429})
PORTAL_BUTTON = "Open in GPU Portal"


@dataclass(frozen=True)
class Attempt:
    delivered: bool
    retry: bool  # worth trying again later
    status_code: int | None = None
    error: str = ""


def signature(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def _title(payload: dict[str, Any]) -> str:
    event = str(payload.get("event", ""))
    label = NotificationEvent(event).label if event in NotificationEvent.values else event
    return f"GPU Portal: {label}"


def _slack_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_message(payload: dict[str, Any]) -> dict[str, Any]:
    summary = str(payload.get("summary", ""))
    blocks: list[dict[str, Any]] = [{"type": "section", "text": {
        "type": "mrkdwn", "text": f"*{_slack_escape(_title(payload))}*\n{_slack_escape(summary)}"}}]
    if payload.get("link"):
        blocks.append({"type": "actions", "elements": [{
            "type": "button", "text": {"type": "plain_text", "text": PORTAL_BUTTON}, "url": payload["link"]}]})
    return {"text": f"{_title(payload)}: {summary}", "blocks": blocks}


def teams_message(payload: dict[str, Any]) -> dict[str, Any]:
    card: dict[str, Any] = {
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json", "type": "AdaptiveCard", "version": "1.4",
        "body": [{"type": "TextBlock", "text": _title(payload), "weight": "Bolder", "size": "Medium", "wrap": True},
                 {"type": "TextBlock", "text": str(payload.get("summary", "")), "wrap": True}],
    }
    if payload.get("link"):
        card["actions"] = [{"type": "Action.OpenUrl", "title": PORTAL_BUTTON, "url": payload["link"]}]
    return {"type": "message", "attachments": [
        {"contentType": "application/vnd.microsoft.card.adaptive", "contentUrl": None, "content": card}]}


def request_for(channel: NotificationChannel, payload: dict[str, Any], secret: str) -> tuple[bytes, dict[str, str]]:
    """The body and headers a hook channel is sent (now: a webhook's body is signed with the attempt's moment)."""
    headers = {"Content-Type": "application/json"}
    if channel.kind == NotificationChannel.Kind.SLACK:
        return json.dumps(slack_message(payload)).encode(), headers
    if channel.kind == NotificationChannel.Kind.TEAMS:
        return json.dumps(teams_message(payload)).encode(), headers
    signed = {**payload, "occurred_at": payload.get("timestamp"), "timestamp": timezone.now().isoformat()}
    body = json.dumps(signed, sort_keys=True, separators=(",", ":")).encode()
    headers.update({SIGNATURE_HEADER: signature(secret, body), "X-Portal-Event": str(payload.get("event", ""))})
    return body, headers


def _email(channel: NotificationChannel, payload: dict[str, Any]) -> Attempt:
    address = channel.email or (channel.user.email if channel.user is not None else "")
    if not address:
        return Attempt(delivered=False, retry=False, error="The channel has no address to send to.")
    body = "\n".join(filter(None, [str(payload.get("summary", "")), f"Details: {payload['link']}"
                                   if payload.get("link") else ""]))
    try:
        send_mail(f"[GPU Portal] {str(payload.get('summary', ''))[:150]}", body, None, [address])
    except OSError as exc:
        return Attempt(delivered=False, retry=True, error=f"The mail server refused it: {exc}")
    return Attempt(delivered=True, retry=False)


def send(delivery: NotificationDelivery) -> Attempt:
    """One attempt at the delivery; never raises for what the receiver or the network does."""
    channel = delivery.channel
    if channel.kind == NotificationChannel.Kind.EMAIL:
        return _email(channel, delivery.payload)
    try:
        hook = org_services.channel_hook(channel)
    except sealed.SealBroken as exc:
        return Attempt(delivered=False, retry=False, error=f"The channel's URL cannot be read: {exc}")
    body, headers = request_for(channel, delivery.payload, hook["secret"])
    try:
        answer = outbound.post(hook["url"], body, headers=headers, timeout=settings.NOTIFICATIONS_TIMEOUT)
    except outbound.OutboundRefused as exc:
        return Attempt(delivered=False, retry=False, error=str(exc))
    except TimeoutError:
        return Attempt(delivered=False, retry=True, error=f"No answer within {settings.NOTIFICATIONS_TIMEOUT} s.")
    except (OSError, http.client.HTTPException) as exc:
        return Attempt(delivered=False, retry=True, error=f"Could not reach {channel.url_host}: {exc}")
    if 200 <= answer.status < 300:
        return Attempt(delivered=True, retry=False, status_code=answer.status)
    error = f"HTTP {answer.status} {answer.reason}".strip()
    if answer.body.strip():
        error = f"{error}: {answer.body.strip()}"
    retry = answer.status >= 500 or answer.status in RETRIED_STATUSES
    return Attempt(delivered=False, retry=retry, status_code=answer.status, error=error)
