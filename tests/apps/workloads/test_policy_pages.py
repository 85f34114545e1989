"""The policies page: everyone signed in reads what they see, admins and department admins set policies through the
services (every refusal at once, CSRF, 404 outside their scope), and the preview lists the live work a proposed
policy would refuse without saving it."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from apps.core.models import AuditEvent
from apps.org import services as org
from apps.org.models import Department, Policy, Project
from apps.workloads.models import Status, Workload

HTMX = {"HTTP_HX_REQUEST": "true"}
LIST = reverse("workloads:policies")
NEW = reverse("workloads:policy_create")


def _form(**values: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"department": "", "project": "", "max_gpus_per_workload": "", "max_runtime_seconds": "",
                            "default_runtime_seconds": "", "allowed_images": "", "default_priority_class": "",
                            "max_notebook_idle_minutes": "", "pod_security": ""}
    data.update(values)
    return data


@pytest.fixture
def vision_policy(users) -> Policy:
    return org.policy_create(actor=users["admin"], project=Project.objects.get(slug="vision"), max_gpus_per_workload=4,
                             allowed_images=["nvcr.io/*"])


def test_everyone_reads_the_list_but_only_setters_see_the_forms(page_client, vision_policy):
    admin = page_client("admin").get(LIST).content.decode()
    assert "The Vision project&#x27;s policy" in admin
    assert reverse("workloads:policy_edit", args=[vision_policy.pk]) in admin
    assert NEW in admin
    alice = page_client("alice")
    content = alice.get(LIST).content.decode()
    assert "The Vision project&#x27;s policy" in content and "nvcr.io/*" in content
    assert "policies/new" not in content and "/edit/" not in content
    assert alice.get(NEW).status_code == 403
    assert alice.post(reverse("workloads:policy_edit", args=[vision_policy.pk]), _form()).status_code == 403


def test_a_policy_outside_the_users_scope_is_404(page_client, users):
    forecasting = org.policy_create(actor=users["admin"], project=Project.objects.get(slug="forecasting"),
                                    max_gpus_per_workload=2)
    for name in ("alice", "deptadmin"):
        client = page_client(name)
        assert client.get(reverse("workloads:policy_edit", args=[forecasting.pk])).status_code == 404
        assert client.post(reverse("workloads:policy_delete", args=[forecasting.pk])).status_code == 404
    assert Policy.objects.filter(pk=forecasting.pk).exists()


def test_a_create_shows_every_refusal_at_once_and_saves_nothing(page_client):
    vision = Project.objects.get(slug="vision")
    response = page_client("deptadmin").post(NEW, _form(
        project=vision.pk, allowed_images="nvcr.io/(a+)+$", max_runtime_seconds="600",
        default_runtime_seconds="1200"))
    content = response.content.decode()
    assert response.status_code == 200
    assert "is not an image pattern" in content and "no regular expressions" in content
    assert "The default runtime cannot be above this policy" in content
    assert not Policy.objects.exists()


def test_a_department_admin_creates_edits_and_deletes_a_project_policy_audited(page_client):
    client, vision = page_client("deptadmin"), Project.objects.get(slug="vision")
    response = client.post(NEW, _form(project=vision.pk, max_gpus_per_workload="3", allowed_images="nvcr.io/*\n",
                                      required_labels=["model"], allowed_priority_classes=["train"]))
    assert response.status_code == 302 and response["Location"] == LIST
    policy = Policy.objects.get(project=vision)
    assert (policy.max_gpus_per_workload, policy.allowed_images, policy.required_labels,
            policy.allowed_priority_classes) == (3, ["nvcr.io/*"], ["model"], ["train"])
    edit = reverse("workloads:policy_edit", args=[policy.pk])
    page = client.get(edit).content.decode()
    assert 'name="version"' in page and "nvcr.io/*" in page
    response = client.post(edit, _form(project=vision.pk, max_gpus_per_workload="2", version=policy.version))
    assert response.status_code == 302
    policy.refresh_from_db()
    assert policy.max_gpus_per_workload == 2 and policy.allowed_images is None
    assert client.post(reverse("workloads:policy_delete", args=[policy.pk])).status_code == 302
    assert not Policy.objects.exists()
    assert list(AuditEvent.objects.filter(action__startswith="policy.").order_by("pk").values_list(
        "action", flat=True)) == ["policy.create", "policy.update", "policy.delete"]


def test_a_department_admin_cannot_set_the_organisations_policy(page_client):
    response = page_client("deptadmin").post(NEW, _form(max_gpus_per_workload="2"))
    assert response.status_code == 200 and "errorlist" in response.content.decode()
    assert not Policy.objects.exists()


def test_posts_without_the_csrf_token_are_refused(users):
    client = Client(enforce_csrf_checks=True)
    client.force_login(users["admin"])
    response = client.post(NEW, _form(department=Department.objects.get(slug="research").pk,
                                      max_gpus_per_workload="2"))
    assert response.status_code == 403 and not Policy.objects.exists()


def test_the_preview_lists_the_live_work_it_would_refuse_and_saves_nothing(page_client, make_workload):
    work = make_workload("alice", gpus=4, image="docker.io/me/trainer:1")
    Workload.objects.filter(pk=work.pk).update(status=Status.RUNNING)
    vision = Project.objects.get(slug="vision")
    data = _form(project=vision.pk, max_gpus_per_workload="2", allowed_images="nvcr.io/*", _preview="1")
    response = page_client("deptadmin").post(NEW, data, **HTMX)
    content = response.content.decode()
    assert response.status_code == 200 and "<html" not in content
    assert f'data-breaking="{work.pk}"' in content
    assert "allows at most 2 GPUs per workload" in content and "docker.io/me/trainer:1 matches none" in content
    # Without htmx the page itself shows the preview under the form.
    page = page_client("deptadmin").post(NEW, data).content.decode()
    assert "<html" in page and f'data-breaking="{work.pk}"' in page and 'name="allowed_images"' in page
    assert not Policy.objects.exists()


def test_the_preview_of_a_form_it_cannot_read_says_so(page_client):
    vision = Project.objects.get(slug="vision")
    response = page_client("deptadmin").post(NEW, _form(project=vision.pk, max_gpus_per_workload="two",
                                                        _preview="1"), **HTMX)
    assert 'data-preview="invalid"' in response.content.decode() and "Enter a whole number" in response.content.decode()


def test_the_preview_of_a_policy_that_could_not_be_saved_names_its_mistakes(page_client):
    vision = Project.objects.get(slug="vision")
    response = page_client("deptadmin").post(NEW, _form(project=vision.pk, allowed_images="nvcr.io/(a+)+$",
                                                        _preview="1"), **HTMX)
    content = response.content.decode()
    assert 'data-preview="invalid"' in content and "is not an image pattern" in content
    assert "data-breaking" not in content


def test_only_a_setter_of_that_scope_previews(page_client, users):
    research = Department.objects.get(slug="research")
    lead = page_client("lead")
    response = lead.post(NEW, _form(department=research.pk, max_gpus_per_workload="1", _preview="1"), **HTMX)
    assert response.status_code == 403
