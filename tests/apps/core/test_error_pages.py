"""The styled error pages: the layout with the navigation and the view's own message; the API keeps its JSON; the
500 page needs neither the database nor a context processor."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import SuspiciousOperation
from django.test import Client, RequestFactory
from django.urls import get_resolver, reverse

from apps.core import views


def test_a_missing_row_gets_the_404_page_with_navigation_and_the_views_message(page_client):
    response = page_client("alice").get(reverse("workloads:detail", args=[999_999]))
    content = response.content.decode()
    assert response.status_code == 404 and response.templates[0].name == "404.html"
    assert "No such workload." in content and 'data-error="404"' in content
    assert '<nav class="nav" aria-label="Main">' in content and f'href="{reverse("workloads:list")}"' in content


def test_a_refusal_gets_the_403_page_with_the_views_message(page_client):
    response = page_client("viewer").get(reverse("workloads:submit", args=["training"]))
    content = response.content.decode()
    assert response.status_code == 403 and 'data-error="403"' in content
    assert "You may not submit work in any project." in content and '<nav class="nav"' in content


def test_an_unknown_address_says_so_in_words_not_the_resolvers_dict(page_client):
    content = page_client("alice").get("/no-such-page/").content.decode()
    assert "There is nothing at this address, or nothing you may see." in content and "tried" not in content
    anonymous = Client().get("/no-such-page/")
    assert anonymous.status_code == 404 and reverse("accounts:login") in anonymous.content.decode()


def test_the_api_keeps_answering_json(page_client):
    unknown = page_client("alice").get("/api/v1/no-such-resource/")
    assert unknown.status_code == 404 and unknown["Content-Type"] == "application/json"
    assert json.loads(unknown.content) == {"detail": "Not found."}
    missing = page_client("alice").get("/api/v1/workloads/999999/")
    assert missing.status_code == 404 and missing["Content-Type"] == "application/json"
    broken = views.server_error(RequestFactory().get("/api/v1/workloads/"))
    assert broken.status_code == 500 and json.loads(broken.content) == {"detail": "A server error occurred."}


@pytest.mark.django_db
def test_the_500_page_uses_no_database_and_no_context_processor(django_assert_num_queries):
    assert get_resolver().resolve_error_handler(500) is views.server_error
    request = RequestFactory().get("/workloads/")  # no user, no session: the middleware may be what failed
    with django_assert_num_queries(0):
        response = views.server_error(request)
    content = response.content.decode()
    assert response.status_code == 500 and "Something went wrong" in content and 'data-error="500"' in content


def test_a_bad_request_before_the_authentication_middleware_still_renders():
    response = views.bad_request(RequestFactory().get("/"), SuspiciousOperation("bad host"))
    assert response.status_code == 400 and 'data-error="400"' in response.content.decode()
    assert "bad host" not in response.content.decode()  # Django's reason is for the log, not the visitor


def test_the_portal_has_an_icon_so_browsers_asking_for_favicon_ico_get_no_404(db):
    from django.contrib.staticfiles import finders

    answer = Client().get("/favicon.ico")
    assert answer.status_code == 301 and answer["Location"].endswith("/favicon.svg")
    assert finders.find("favicon.svg") is not None
    page = Client().get(reverse("accounts:login")).content.decode()
    assert 'rel="icon"' in page and "favicon.svg" in page
