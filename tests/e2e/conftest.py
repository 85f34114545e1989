"""Browser tests: Debian's chromium driven by Playwright against Django's live server.

Playwright never downloads a browser here: it launches the system chromium. Without chromium the tests skip
with a clear message on a developer machine, and fail under CI=true (where .ci/run installs it).
"""

from __future__ import annotations

import os
import shutil

import pytest

from tests.conftest import demo_users
from tests.oidc_provider.fixture import oidc_provider  # noqa: F401 - a fixture (single sign-on in the browser)
from tests.worker.conftest import reconcile_organisation, stop_watcher

CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-quic", "--no-first-run",
]


@pytest.fixture(scope="session")
def browser():
    executable = shutil.which("chromium")
    if executable is None:
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail("chromium is not installed; .ci/run installs Debian's chromium package")
        pytest.skip("Debian chromium is not installed (apt-get install chromium); browser tests skipped")
    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in this thread; the live server's ORM calls happen in its own.
    # Only for the browser tests: a later test's subprocess (check --deploy) must not inherit it.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        with sync_playwright() as playwright:
            launched = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, headless=True)
            yield launched
            launched.close()


@pytest.fixture
def login(browser, live_server, transactional_db):
    """login("alice") -> a Playwright page signed in as that demo user (password 'demo')."""
    demo_users()  # committed: the live server's thread reads it
    contexts = []
    violations: list[str] = []

    def sign_in(username: str):
        context = browser.new_context(base_url=live_server.url)
        context.set_default_timeout(10_000)
        contexts.append(context)
        page = context.new_page()
        watch_csp(page, violations)
        page.goto("/accounts/login/")
        page.fill("#id_username", username)
        page.fill("#id_password", "demo")
        page.click("button[type=submit]")
        page.wait_for_url(lambda url: "/accounts/login/" not in url)
        return page

    yield sign_in
    for context in contexts:
        context.close()
    # Every browser test runs under the portal's Content-Security-Policy: whatever it blocked fails the test.
    assert not violations, f"Content-Security-Policy violations: {violations}"


CSP_LISTENER = """
document.addEventListener("securitypolicyviolation", (event) => {
  console.error("CSP violation: " + event.violatedDirective + " blocked " + (event.blockedURI || "inline") +
                " at " + event.sourceFile + ":" + event.lineNumber);
});
"""


def watch_csp(page, violations: list[str]) -> None:
    """Collect the page's CSP violations (the browser's own console report and the DOM event)."""
    page.add_init_script(CSP_LISTENER)
    page.on("console", lambda message: violations.append(message.text) if (
        "Content Security Policy" in message.text or message.text.startswith("CSP violation")) else None)


@pytest.fixture(scope="module")
def kubesim():
    from kubesim.testing import serve

    with serve(clock="manual") as served:
        yield served


@pytest.fixture
def live_cluster(kubesim, login):
    """The demo organisation reconciled into a clean kubesim, and the watcher running against it."""
    from worker.gateway import Gateway, reset_gateway
    from worker.watcher import Watcher

    kubesim.reset()
    gw = Gateway(kubesim.api_client())
    reset_gateway(gw)
    reconcile_organisation(kubesim, gw)  # `login` has seeded the organisation
    watcher = Watcher(gw, resync_seconds=3600, positions_seconds=0.2, watch_timeout_seconds=2)
    watcher.start()
    yield gw
    stop_watcher(watcher, kubesim)
    reset_gateway(None)
