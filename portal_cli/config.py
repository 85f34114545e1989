"""Where `gpu login` keeps the portal's address and the token: `$XDG_CONFIG_HOME/gpu-portal/config.json` (by default
`~/.config/gpu-portal/config.json`), readable by its owner only (0600, in a 0700 directory). `GPU_PORTAL_URL` and
`GPU_PORTAL_TOKEN` in the environment take precedence (for CI jobs and notebooks)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Credentials:
    url: str
    token: str


def config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "gpu-portal" / "config.json"


def _stored() -> dict[str, str]:
    path = config_path()
    if not path.exists():
        return {}
    try:
        stored = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return stored if isinstance(stored, dict) else {}


def load() -> Credentials | None:
    """The stored credentials with the environment's overrides; None when neither gives a URL and a token."""
    stored = _stored()
    url = os.environ.get("GPU_PORTAL_URL") or stored.get("url", "")
    token = os.environ.get("GPU_PORTAL_TOKEN") or stored.get("token", "")
    return Credentials(url=url.rstrip("/"), token=token) if url and token else None


def load_stored() -> Credentials | None:
    """What `gpu login` stored, whatever the environment says; None when nothing is."""
    stored = _stored()
    url, token = stored.get("url", ""), stored.get("token", "")
    return Credentials(url=url.rstrip("/"), token=token) if url and token else None


def from_environment() -> bool:
    """Whether the environment names a portal or a token (they override what is stored)."""
    return bool(os.environ.get("GPU_PORTAL_URL") or os.environ.get("GPU_PORTAL_TOKEN"))


def remove() -> Path | None:
    """Delete the stored credentials; the file removed, or None when there was none."""
    path = config_path()
    try:
        path.unlink()
    except FileNotFoundError:
        return None
    return path


def save(credentials: Credentials) -> Path:
    """Write the credentials so that only their owner may read them, whatever the umask; returns the file."""
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    temporary = path.with_suffix(".tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(descriptor, 0o600)  # an existing file keeps its mode through O_CREAT
    with os.fdopen(descriptor, "w") as handle:
        json.dump({"url": credentials.url, "token": credentials.token}, handle)
    os.replace(temporary, path)
    return path
