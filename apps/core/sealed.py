"""Secret values on their way to the cluster, encrypted at rest (Fernet: AES-128-CBC with an HMAC).

The portal never keeps a credential's value: a service seals it into the row that asks the worker to write the
Kubernetes Secret, and the worker unseals it, writes the Secret and clears the sealed text in the same step
(README "Notebooks, data and credentials"). The key is settings.CREDENTIALS_KEY, or one derived from SECRET_KEY.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings


class SealBroken(Exception):
    """The sealed text cannot be opened with this installation's key (it changed, or the text was altered)."""


def _fernet() -> Fernet:
    key = settings.CREDENTIALS_KEY
    if not key:
        digest = hashlib.sha256(f"gpu-portal credentials:{settings.SECRET_KEY}".encode()).digest()
        key = base64.urlsafe_b64encode(digest).decode()
    return Fernet(key)


def seal(values: dict[str, Any]) -> str:
    return _fernet().encrypt(json.dumps(values, sort_keys=True).encode()).decode()


def unseal(text: str) -> dict[str, Any]:
    try:
        return json.loads(_fernet().decrypt(text.encode()))
    except InvalidToken as exc:
        raise SealBroken("the sealed values cannot be opened with this installation's key") from exc


def derived_token(purpose: str, subject: str) -> str:
    """A stable secret for `subject` (e.g. a notebook's access token): an HMAC of SECRET_KEY, so neither the web
    process nor the worker needs to store it, and both compute the same one."""
    mac = hmac.new(str(settings.SECRET_KEY).encode(), f"{purpose}:{subject}".encode(), hashlib.sha256)
    return mac.hexdigest()[:48]
