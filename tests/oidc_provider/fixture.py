"""The `oidc_provider` fixture: a real OpenID Connect provider (django-oauth-toolkit) in a subprocess on a free
127.0.0.1 port, started once per test session (per xdist worker) and stopped by its recorded pid."""

from __future__ import annotations

import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import pytest
import requests

ROOT = Path(__file__).resolve().parents[2]
PORTAL_CALLBACK = "http://testserver/accounts/oidc/callback/"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Provider:
    """A running provider: its URLs, the portal's client credentials, and a way to set its users and groups."""

    port: int
    pid: int
    client_id: str
    client_secret: str
    control_token: str
    users: dict[str, str] = field(default_factory=dict)  # username -> password

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def issuer(self) -> str:
        return f"{self.base}/o"

    def portal_settings(self) -> dict[str, Any]:
        """The portal settings that point it at this provider (what OIDC_* environment variables would give)."""
        return {
            "OIDC_ENABLED": True, "OIDC_RP_CLIENT_ID": self.client_id, "OIDC_RP_CLIENT_SECRET": self.client_secret,
            "OIDC_OP_ISSUER": self.issuer, "OIDC_OP_AUTHORIZATION_ENDPOINT": f"{self.issuer}/authorize/",
            "OIDC_OP_TOKEN_ENDPOINT": f"{self.issuer}/token/", "OIDC_OP_USER_ENDPOINT": f"{self.issuer}/userinfo/",
            "OIDC_OP_JWKS_ENDPOINT": f"{self.issuer}/.well-known/jwks.json", "OIDC_PROVIDER_NAME": "Example Org",
        }

    def set_user(self, username: str, *, groups: list[str], email: str = "", first_name: str = "",
                 last_name: str = "", password: str | None = None) -> None:
        """Create or change a user at the provider (its groups are what the next sign-in's token carries)."""
        password = password or self.users.get(username) or secrets.token_urlsafe(12)
        response = requests.post(f"{self.base}/control/users/", timeout=10, headers={
            "X-Control-Token": self.control_token}, json={
            "username": username, "password": password, "groups": groups, "email": email,
            "first_name": first_name, "last_name": last_name})
        response.raise_for_status()
        self.users[username] = password

    def allow_redirect(self, uri: str) -> None:
        """Register another callback URL of the portal (a live server's) with the provider."""
        requests.post(f"{self.base}/control/redirects/", timeout=10, headers={"X-Control-Token": self.control_token},
                      json={"uri": uri}).raise_for_status()

    def sign_in(self, authorize_url: str, username: str, password: str | None = None) -> str:
        """Play the browser at the provider: follow redirects, fill its login form, and return the URL it finally
        sends the browser to (the portal's callback, with code and state)."""
        browser = requests.Session()
        url = authorize_url
        for _ in range(10):
            response = browser.get(url, allow_redirects=False, timeout=10)
            if response.status_code == 200 and "csrfmiddlewaretoken" in response.text:
                token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', response.text)
                next_url = re.search(r'name="next" value="([^"]*)"', response.text)
                assert token and next_url, response.text
                response = browser.post(url, allow_redirects=False, timeout=10, data={
                    "csrfmiddlewaretoken": token.group(1), "next": next_url.group(1).replace("&amp;", "&"),
                    "username": username, "password": password or self.users[username]})
                assert response.status_code == 302, f"the provider refused the sign-in: {response.status_code}"
            assert response.status_code in (301, 302), (response.status_code, response.text[:500])
            url = urljoin(url, response.headers["Location"])
            if not url.startswith(self.base):
                return url
        raise AssertionError("too many redirects at the provider")


def _wait_until_serving(provider: Provider, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the OIDC provider exited ({process.returncode}):\n{log.read_text()[-3000:]}")
        try:
            if requests.get(f"{provider.issuer}/.well-known/openid-configuration", timeout=2).status_code == 200:
                return
        except requests.ConnectionError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"the OIDC provider did not answer within 60 s:\n{log.read_text()[-3000:]}")


def _stop(pid: int, process: subprocess.Popen) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.kill(pid, signal.SIGKILL)
        process.wait(timeout=10)


@pytest.fixture(scope="session")
def oidc_provider(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    workdir = tmp_path_factory.mktemp("oidc-provider")
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    key_file = workdir / "signing-key.pem"
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    log = workdir / "provider.log"
    last_error: Exception | None = None
    for _attempt in range(3):  # a free port can be taken between choosing and binding it
        port = _free_port()
        client_id, client_secret = "gpu-portal-tests", secrets.token_urlsafe(24)
        control_token = secrets.token_urlsafe(24)
        env = {**os.environ, "PYTHONPATH": str(ROOT), "OIDC_PROVIDER_PORT": str(port),
               "OIDC_PROVIDER_DB": str(workdir / f"provider-{port}.sqlite3"), "OIDC_PROVIDER_KEY_FILE": str(key_file),
               "OIDC_PROVIDER_CONTROL_TOKEN": control_token, "OIDC_PROVIDER_CLIENT_ID": client_id,
               "OIDC_PROVIDER_CLIENT_SECRET": client_secret, "OIDC_PROVIDER_REDIRECT_URIS": PORTAL_CALLBACK}
        env.pop("DJANGO_SETTINGS_MODULE", None)
        with log.open("ab") as output:
            process = subprocess.Popen([sys.executable, "-m", "tests.oidc_provider.serve"], cwd=ROOT, env=env,
                                       stdout=output, stderr=subprocess.STDOUT)
        provider = Provider(port=port, pid=process.pid, client_id=client_id, client_secret=client_secret,
                            control_token=control_token)
        try:
            _wait_until_serving(provider, process, log)
        except RuntimeError as exc:
            last_error = exc
            _stop(process.pid, process)
            continue
        try:
            yield provider
        finally:
            _stop(provider.pid, process)
        return
    raise RuntimeError(f"could not start the OIDC provider: {last_error}")


def callback_path(url: str) -> str:
    """The portal-relative part of the callback URL the provider redirected to."""
    parts = urlsplit(url)
    assert f"{parts.scheme}://{parts.netloc}{parts.path}" == PORTAL_CALLBACK, url
    return f"{parts.path}?{parts.query}"
