"""The `certified_oidc` fixture: panva's oidc-provider (an OpenID Certified implementation, independent of the portal
and of tests/oidc_provider) in a Node process on 127.0.0.1, one per clock offset asked for, each stopped by its
recorded pid at the end of the test session.

Without `node` the tests skip on a developer's machine and fail under CI=true; without the npm package installed
(`npm ci` in this folder) they fail and say so.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import pytest
import requests

HERE = Path(__file__).resolve().parent
PORTAL_CALLBACK = "http://testserver/accounts/oidc/callback/"


@dataclass
class CertifiedProvider:
    """One running provider: its issuer and discovery document, the portal's client, and its users."""

    issuer: str
    pid: int
    client_id: str
    client_secret: str
    users_file: Path
    clock_offset: int
    discovery: dict[str, Any] = field(default_factory=dict)

    def portal_settings(self) -> dict[str, Any]:
        """The portal settings its discovery document gives (what OIDC_* environment variables would be set to)."""
        return {
            "OIDC_ENABLED": True, "OIDC_RP_CLIENT_ID": self.client_id, "OIDC_RP_CLIENT_SECRET": self.client_secret,
            "OIDC_OP_ISSUER": self.discovery["issuer"],
            "OIDC_OP_AUTHORIZATION_ENDPOINT": self.discovery["authorization_endpoint"],
            "OIDC_OP_TOKEN_ENDPOINT": self.discovery["token_endpoint"], "OIDC_OP_USER_ENDPOINT": "",
            "OIDC_OP_JWKS_ENDPOINT": self.discovery["jwks_uri"], "OIDC_RP_SCOPES": "openid email profile groups",
            "OIDC_PROVIDER_NAME": "Certified IdP",
        }

    def set_user(self, username: str, *, groups: list[str], email: str = "", given_name: str = "",
                 family_name: str = "") -> None:
        """Create or change a user (the provider reads the file at every sign-in)."""
        users = json.loads(self.users_file.read_text())
        password = users.get(username, {}).get("password") or secrets.token_urlsafe(12)
        users[username] = {"password": password, "groups": groups, "email": email, "given_name": given_name,
                           "family_name": family_name}
        self.users_file.write_text(json.dumps(users))

    def sign_in(self, authorize_url: str, username: str) -> str:
        """Play the browser at the provider: follow its redirects, fill its login form with the user's password,
        and return the URL it finally sends the browser to (the portal's callback, with code and state)."""
        password = json.loads(self.users_file.read_text())[username]["password"]
        browser = requests.Session()
        url = authorize_url
        for _ in range(10):
            response = browser.get(url, allow_redirects=False, timeout=10)
            if response.status_code == 200:
                action = re.search(r'<form method="post" action="([^"]+)"', response.text)
                assert action, response.text[:500]
                url = urljoin(url, action.group(1))
                response = browser.post(url, allow_redirects=False, timeout=10,
                                        data={"username": username, "password": password})
            assert response.status_code in (302, 303), (response.status_code, response.text[:500])
            url = urljoin(url, response.headers["Location"])
            if not url.startswith(self.issuer):
                return url
        raise AssertionError("too many redirects at the provider")


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail("node is not installed, and CI runs the certified OpenID provider's tests")
        pytest.skip("node is not installed: the tests against the certified OpenID provider (oidc-provider) skipped")
    if not (HERE / "node_modules" / "oidc-provider" / "package.json").exists():
        pytest.fail(f"oidc-provider is not installed: run `npm ci` in {HERE}")
    return node


def _start(node: str, workdir: Path, clock_offset: int) -> tuple[CertifiedProvider, subprocess.Popen]:
    users_file = workdir / f"users{clock_offset:+d}.json"
    users_file.write_text("{}")
    log = workdir / f"provider{clock_offset:+d}.log"
    client_id, client_secret = "gpu-portal-tests", secrets.token_urlsafe(24)
    env = {**os.environ, "OIDC_TEST_CLIENT_ID": client_id, "OIDC_TEST_CLIENT_SECRET": client_secret,
           "OIDC_TEST_REDIRECT_URIS": PORTAL_CALLBACK, "OIDC_TEST_USERS_FILE": str(users_file),
           "OIDC_TEST_CLOCK_OFFSET_SECONDS": str(clock_offset)}
    with log.open("wb") as output:
        process = subprocess.Popen([node, str(HERE / "provider.mjs")], cwd=HERE, env=env, stdout=output,
                                   stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = re.search(r"^listening (\S+)$", log.read_text(), re.MULTILINE)
        if found:
            issuer = found.group(1)
            discovery = requests.get(f"{issuer}/.well-known/openid-configuration", timeout=10).json()
            return CertifiedProvider(issuer=issuer, pid=process.pid, client_id=client_id, client_secret=client_secret,
                                     users_file=users_file, clock_offset=clock_offset,
                                     discovery=discovery), process
        if process.poll() is not None:
            break
        time.sleep(0.1)
    _stop(process.pid, process)
    raise RuntimeError(f"the certified OpenID provider did not start:\n{log.read_text()[-3000:]}")


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
def certified_oidc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., CertifiedProvider]]:
    """certified_oidc(clock_offset=0) -> a running provider whose clock is that many seconds ahead of the machine's
    (behind when negative); one process per offset for the whole session."""
    workdir = tmp_path_factory.mktemp("certified-oidc")
    running: dict[int, tuple[CertifiedProvider, subprocess.Popen]] = {}

    def provider(clock_offset: int = 0) -> CertifiedProvider:
        if clock_offset not in running:
            running[clock_offset] = _start(_node(), workdir, clock_offset)
        return running[clock_offset][0]

    try:
        yield provider
    finally:
        for started, process in running.values():
            _stop(started.pid, process)
