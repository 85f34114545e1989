"""Browser: the pages work under the Content-Security-Policy (no violation anywhere, htmx and our scripts run, the
bars get their geometry, the API docs render from their sidecar assets), and single sign-on through a real
OpenID Connect provider in chromium."""

from __future__ import annotations

import re

import pytest

from tests.e2e.conftest import watch_csp

pytestmark = pytest.mark.browser

PAGES = ["/", "/workloads/", "/usage/quota/", "/usage/reports/", "/usage/holders/", "/usage/over-time/",
         "/workloads/submit/training/",
         "/departments/", "/departments/research/quotas/", "/weights/", "/pools/", "/pools/h100/",
         "/priority-classes/", "/audit/",
         "/cluster-sync/", "/accounts/role-bindings/", "/accounts/group-rules/", "/accounts/group-rules/new/",
         "/accounts/tokens/", "/accounts/settings/", "/workloads/templates/", "/django-admin/"]


def test_no_csp_violations_on_any_page(login):
    page = login("admin")
    violations: list[str] = []
    watch_csp(page, violations)
    for path in PAGES:
        response = page.goto(path)
        assert response is not None and response.status == 200, path
        assert "'self'" in response.headers["content-security-policy"]
        page.wait_for_load_state("networkidle")
    assert not violations, violations


def test_the_watch_sees_what_the_policy_blocks(browser, live_server, transactional_db):
    """The violation watch of every browser test is not blind: an injected inline style and handler are reported."""
    context = browser.new_context(base_url=live_server.url)
    violations: list[str] = []
    try:
        page = context.new_page()
        watch_csp(page, violations)
        page.goto("/accounts/login/")
        page.evaluate("""() => {
          const style = document.createElement("style");
          style.textContent = "body { color: red }";
          document.head.append(style);
          document.body.insertAdjacentHTML("beforeend", '<img src="/static/none.png" onerror="window.x = 1">');
        }""")
        page.wait_for_timeout(500)
    finally:
        context.close()
    assert any("style-src" in v for v in violations) and any("script-src" in v for v in violations), violations


def test_scripts_run_under_the_policy(login):
    page = login("admin")
    page.goto("/usage/quota/")
    # portal.js gave the bars their widths from data-bar-width (style attributes would be blocked).
    widths = page.eval_on_selector_all(
        ".qbar-seg[data-bar-width]", "els => els.map(e => [e.dataset.barWidth, e.style.width])")
    assert widths and all(float(style.rstrip("%")) == float(width) for width, style in widths)
    lefts = page.eval_on_selector_all(
        ".qbar-mark[data-bar-left]", "els => els.map(e => [e.dataset.barLeft, e.style.left])")
    assert lefts and all(float(style.rstrip("%")) == float(left) for left, style in lefts)
    assert any(float(left) > 0 for left, _ in lefts)  # the deserved marks stand somewhere along the bars
    # htmx runs (from django-htmx's static) with its injected styles off and no eval.
    assert page.evaluate("htmx.config.allowEval") is False
    assert page.evaluate("htmx.config.includeIndicatorStyles") is False
    # An htmx request works: the workloads filter swaps the table in place.
    page.goto("/workloads/")
    with page.expect_request(re.compile(r"/workloads/\\?")) as request:
        page.locator("form.filters select").first.select_option(index=1)
    assert request.value.headers.get("hx-request") == "true"


def test_api_docs_render_under_the_policy(login):
    page = login("viewer")
    page.goto("/api/v1/docs/")
    page.wait_for_selector(".swagger-ui .info .title", timeout=15_000)
    assert "GPU Portal API" in page.inner_text(".swagger-ui .info .title")


def test_single_sign_on_in_the_browser(browser, live_server, transactional_db, oidc_provider, settings):
    """A person clicks "Sign in with Example Org", signs in at the provider and lands in the portal with the
    bindings the IdP group rules give."""
    from apps.accounts import services
    from apps.accounts.models import RoleBinding
    from apps.org.demo import seed_demo

    seed_demo()
    admin = RoleBinding.objects.get(role="admin").user
    services.group_role_rule_create(actor=admin, group_pattern="gpu-*", role="viewer")
    for name, value in oidc_provider.portal_settings().items():
        setattr(settings, name, value)
    settings.LOCAL_LOGIN = False
    oidc_provider.allow_redirect(f"{live_server.url}/accounts/oidc/callback/")
    oidc_provider.set_user("olga", groups=["gpu-research"], email="olga@example.org", password="olgas-passphrase")
    context = browser.new_context(base_url=live_server.url)
    violations: list[str] = []
    try:
        page = context.new_page()
        watch_csp(page, violations)
        page.goto("/accounts/login/?next=/usage/quota/")
        assert page.locator("input[name=password]").count() == 0
        page.click("#sso-sign-in")
        page.wait_for_selector("#idp-username")
        page.fill("#idp-username", "olga")
        page.fill("#idp-password", "olgas-passphrase")
        page.click("#idp-submit")
        page.wait_for_url(re.compile(r"/usage/quota/$"))
        assert "olga" in page.inner_text(".user-menu")
    finally:
        context.close()
    assert not violations, violations
    assert RoleBinding.objects.filter(user__username="olga", role="viewer", source="group_rule").exists()
