"""The API lists refuse what a page's form lets by: an empty value of a typed filter, a yes/no that is neither, a
list with an empty item. Free text may still be empty, and a page still reads `?status=` as "(any)"."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("path", "query", "field"), [
    ("/api/v1/workloads/", "status=", "status"),
    ("/api/v1/workloads/", "kind=job,", "kind"),
    ("/api/v1/workloads/", "kind=,", "kind"),
    ("/api/v1/workloads/", "origin=", "origin"),
    ("/api/v1/workloads/", "ordering=", "ordering"),
    ("/api/v1/audit-events/", "since=", "since"),
    ("/api/v1/notification-channels/", "enabled=", "enabled"),
    ("/api/v1/notification-channels/", "enabled=9664833149237770.0", "enabled"),
    ("/api/v1/notification-channels/", "enabled=yes", "enabled"),
])
def test_an_empty_or_unreadable_typed_filter_is_refused(client_for, path, query, field):
    response = client_for("admin").get(f"{path}?{query}")
    assert response.status_code == 400, response.content
    assert list(response.json()) == [field]


@pytest.mark.parametrize(("path", "query"), [
    ("/api/v1/workloads/", "q="),
    ("/api/v1/workloads/", "project="),
    ("/api/v1/workloads/", "kind=job,batch&status=live"),
    ("/api/v1/notification-channels/", "enabled=FALSE"),
    ("/api/v1/notification-channels/", "enabled=1"),
])
def test_free_text_may_be_empty_and_typed_values_pass(client_for, path, query):
    assert client_for("admin").get(f"{path}?{query}").status_code == 200


def test_a_page_reads_an_empty_choice_as_any(client_for):
    response = client_for("admin").get("/workloads/?status=&kind=&origin=&ordering=")
    assert response.status_code == 200


def test_a_multipart_body_without_a_named_field_is_refused(client_for, demo):
    """A part without its Content-Disposition name is skipped by Django's parser: the body would read as an empty
    change and succeed. It is a 400, and nothing changes."""
    from apps.org.models import Department

    research = Department.objects.get(slug="research")
    boundary = "a222103b9b30b1f9e8be6882ecedb1d2"
    response = client_for("admin").generic(
        "PATCH", f"/api/v1/departments/{research.pk}/", f"--{boundary}\r\n[]--{boundary}--\r\n".encode(),
        content_type=f"multipart/form-data; boundary={boundary}")
    assert response.status_code == 400, response.content
    assert "no named form field" in response.json()["detail"]
    assert Department.objects.get(pk=research.pk).version == research.version
