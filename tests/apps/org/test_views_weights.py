"""The team-lead weights page: inline weight and default priority changes, saved or refused with the reason."""

from __future__ import annotations

import pytest
from django.urls import reverse

from apps.core.models import AuditEvent
from apps.org import services
from apps.org.models import PriorityClass, Project, Quota

HTMX = {"HTTP_HX_REQUEST": "true"}
URL = "org:weights"


@pytest.fixture
def vision_h100(users):
    return Quota.objects.get(project__slug="vision", node_pool__slug="h100")



def weight(quota: Quota, value: str) -> dict[str, str | int]:
    """The weight form of one cell as the page renders it: with the quota's stored version."""
    return {"quota": quota.pk, "over_quota_weight": value, "version": Quota.objects.get(pk=quota.pk).version}

def test_lead_sees_only_projects_in_scope(page_client):
    html = page_client("lead").get(reverse(URL)).content.decode()
    assert 'data-project="vision"' in html and 'data-project="nlp"' in html
    assert 'data-project="serving"' not in html and 'data-project="forecasting"' not in html
    assert "Current weighted share" in html and "data-weighted-share" in html
    assert 'hx-post="/weights/"' in html


def test_weight_saved_over_htmx(page_client, users, vision_h100):
    response = page_client("lead").post(reverse(URL), weight(vision_h100, "5"), **HTMX)
    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith(("<tr", "\n<tr")) or "<tr id=\"weights-project-" in html
    assert "<html" not in html
    assert "Saved" in html
    vision_h100.refresh_from_db()
    assert vision_h100.over_quota_weight == 5
    event = AuditEvent.objects.filter(action="quota.weight").latest("id")
    assert event.actor == users["lead"]
    assert (event.before["over_quota_weight"], event.after["over_quota_weight"]) == ("2", "5")
    assert event.project.slug == "vision" and event.department.slug == "research"


def test_weight_outside_department_bounds_is_refused(page_client, vision_h100):
    audit = AuditEvent.objects.count()
    response = page_client("lead").post(reverse(URL), weight(vision_h100, "50"), **HTMX)
    html = response.content.decode()
    assert response.status_code == 200
    assert "Choose a weight between 0 and 10, the bounds set for Research." in html
    assert "Saved" not in html
    assert 'value="50"' in html  # the refused value stays in the field, next to its reason
    vision_h100.refresh_from_db()
    assert vision_h100.over_quota_weight == 2
    assert AuditEvent.objects.count() == audit


def test_department_admin_is_not_bound_by_the_team_lead_bounds(page_client, vision_h100):
    response = page_client("deptadmin").post(reverse(URL), weight(vision_h100, "50"),
                                             **HTMX)
    assert "Saved" in response.content.decode()
    vision_h100.refresh_from_db()
    assert vision_h100.over_quota_weight == 50


@pytest.mark.parametrize(("value", "message"), [
    ("heavy", "Enter a number."),
    ("2000", "Ensure this value is less than or equal to 1000."),
    ("-1", "Ensure this value is greater than or equal to 0."),
])
def test_weight_shape_errors(page_client, vision_h100, value, message):
    html = page_client("lead").post(reverse(URL), weight(vision_h100, value),
                                    **HTMX).content.decode()
    assert message in html
    vision_h100.refresh_from_db()
    assert vision_h100.over_quota_weight == 2


def test_weight_without_htmx_redirects_with_a_message(page_client, vision_h100):
    response = page_client("lead").post(reverse(URL), weight(vision_h100, "3"),
                                        follow=True)
    assert response.redirect_chain[-1][0] == reverse(URL)
    assert "Saved." in response.content.decode()
    refused = page_client("lead").post(reverse(URL), weight(vision_h100, "30"),
                                       follow=True)
    assert "the bounds set for Research" in refused.content.decode()


def test_default_priority_class_saved(page_client, users):
    vision = Project.objects.get(slug="vision")
    build = PriorityClass.objects.get(name="build")
    response = page_client("lead").post(reverse(URL), {"project": vision.pk, "default_priority_class": build.pk,
                                                           "version": vision.version},
                                        **HTMX)
    assert "Saved" in response.content.decode()
    vision.refresh_from_db()
    assert vision.default_priority_class == build
    event = AuditEvent.objects.filter(action="project.default_priority_class").latest("id")
    assert event.actor == users["lead"]
    assert event.after["default_priority_class_id"] == build.pk


def test_default_priority_class_of_a_project_outside_scope(page_client):
    serving = Project.objects.get(slug="serving")
    data = {"project": serving.pk, "default_priority_class": "", "version": serving.version}
    assert page_client("lead").post(reverse(URL), data, **HTMX).status_code == 404
    assert page_client("viewer").post(reverse(URL), data, **HTMX).status_code == 403


def test_unknown_quota_answers_404(page_client):
    assert page_client("lead").post(reverse(URL), {"quota": "999999", "over_quota_weight": "1"}).status_code == 404
    assert page_client("lead").post(reverse(URL), {"quota": "x", "over_quota_weight": "1"}).status_code == 404


def test_a_stale_weight_or_default_is_refused_and_the_row_shows_the_current_one(page_client, users, vision_h100):
    read = weight(vision_h100, "3")
    vision = Project.objects.get(slug="vision")
    read_default = {"project": vision.pk, "default_priority_class": "", "version": vision.version}
    page_client("deptadmin").post(reverse(URL), weight(vision_h100, "7"), **HTMX)
    services.project_update(actor=users["deptadmin"], project=vision, description="theirs")
    audit = AuditEvent.objects.count()
    for data in (read, read_default):
        html = page_client("lead").post(reverse(URL), data, **HTMX).content.decode().replace("&#x27;", "'")
        assert "was changed by deptadmin since you opened it" in html and "Saved" not in html
    assert 'value="7"' in html  # the row re-renders with what is stored now, and its new version
    assert f'name="version" value="{Quota.objects.get(pk=vision_h100.pk).version}"' in html
    assert Quota.objects.get(pk=vision_h100.pk).over_quota_weight == 7
    assert Project.objects.get(pk=vision.pk).default_priority_class is not None
    assert AuditEvent.objects.count() == audit


def test_a_weight_post_without_its_version_is_refused(page_client, vision_h100):
    html = page_client("lead").post(reverse(URL), {"quota": vision_h100.pk, "over_quota_weight": "3"},
                                    **HTMX).content.decode()
    assert "does not say which version" in html
    assert Quota.objects.get(pk=vision_h100.pk).over_quota_weight == 2
