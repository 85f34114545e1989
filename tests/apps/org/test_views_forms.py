"""Create/edit/delete pages: shape errors from the forms, service refusals on the right field, audit rows."""

from __future__ import annotations

import re
from fractions import Fraction

import pytest
from django.urls import reverse

from apps.core.models import AuditEvent
from apps.org.models import Department, NodePool, PriorityClass, Project

from .view_helpers import pool_payload


def errors_of(response) -> dict[str, list[str]]:
    form = response.context["form"]
    return {name: list(messages) for name, messages in form.errors.items()}


def test_pool_create_parses_labels_taints_and_fraction(page_client, users):
    payload = pool_payload(slug="a100-mig-1g10gb", name="A100 1g.10gb", gpu_resource="nvidia.com/mig-1g.10gb",
                           cut="mig", mig_profile="1g.10gb", capacity="14", card_fraction="1/7",
                           node_labels="portal.gpu/pool=a100-1g\nnvidia.com/gpu.product = A100",
                           node_taints="nvidia.com/gpu=present:NoSchedule\ndedicated:NoExecute",
                           over_subscribable="on")
    response = page_client("admin").post(reverse("org:pool_create"), payload, follow=True)
    assert "Node pool created." in response.content.decode()
    pool = NodePool.objects.get(slug="a100-mig-1g10gb")
    assert pool.node_labels == {"portal.gpu/pool": "a100-1g", "nvidia.com/gpu.product": "A100"}
    assert pool.node_taints == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
                                {"key": "dedicated", "effect": "NoExecute"}]
    assert pool.card_fraction == Fraction(1, 7) and pool.over_subscribable
    event = AuditEvent.objects.get(action="node_pool.create", object_id=str(pool.pk))
    assert event.actor == users["admin"] and event.before is None and event.after["capacity"] == 14


def test_pool_edit_round_trips_its_text_fields(page_client):
    client = page_client("admin")
    client.post(reverse("org:pool_create"), pool_payload(node_taints="gpu=b200:NoSchedule", card_fraction="1"))
    form = client.get(reverse("org:pool_edit", args=["b200"])).context["form"]
    assert form.initial["node_labels"] == "portal.gpu/pool=b200"
    assert form.initial["node_taints"] == "gpu=b200:NoSchedule"
    assert client.get(reverse("org:pool_edit", args=["a100-mig-3g40gb"])).context["form"].initial[
        "card_fraction"] == "3/7"


@pytest.mark.parametrize(("overrides", "field", "message"), [
    ({"node_labels": "no-equals-sign"}, "node_labels", "Line 1: write key=value"),
    ({"node_labels": "bad key!=x"}, "node_labels", "is not a valid Kubernetes label key"),
    ({"node_taints": "gpu=yes:Sometimes"}, "node_taints", "Effect one of NoSchedule, PreferNoSchedule, NoExecute"),
    ({"node_labels": "\n".join(f"portal.gpu/l{i}=x" for i in range(9))}, "node_labels",
     "9 node labels: Kueue's ResourceFlavor takes at most 8."),
    ({"node_taints": "\n".join(f"t{i}:NoSchedule" for i in range(9))}, "node_taints",
     "9 node taints: Kueue's ResourceFlavor takes at most 8"),
    ({"node_taints": "gpu=a:NoSchedule\ngpu=b:NoSchedule"}, "node_taints",
     "Taints 1 and 2 have the same key and effect (gpu:NoSchedule)"),
    ({"card_fraction": "7/3"}, "card_fraction", "A unit is a part of one card"),
    ({"card_fraction": "half"}, "card_fraction", "Write a fraction such as 1, 3/7 or 1/8."),
    ({"slug": "B200_big"}, "slug", "Kubernetes DNS-1123 label"),
    ({"cut": "mig", "mig_profile": ""}, "mig_profile", "A MIG pool needs its profile"),
    ({"cut": "time-sliced", "replicas_per_card": "1"}, "replicas_per_card", "at least 2 replicas"),
    ({"capacity": ""}, "capacity", "This field is required."),
    ({"gpu_resource": "nvidia.com/gpu;rm"}, "gpu_resource", "is not a valid extended resource name"),
    ({"gpu_resource": "gpu"}, "gpu_resource", "use a domain-prefixed name such as nvidia.com/gpu"),
    ({"gpu_resource": "kubernetes.io/gpu"}, "gpu_resource", "the kubernetes.io namespace is Kubernetes"),
])
def test_pool_form_shape_errors(page_client, overrides, field, message):
    response = page_client("admin").post(reverse("org:pool_create"), pool_payload(**overrides))
    assert response.status_code == 200
    assert any(message in text for text in errors_of(response)[field]), errors_of(response)
    assert not NodePool.objects.filter(name="B200").exists()


def test_pool_duplicate_slug_is_refused_by_the_service_on_the_slug_field(page_client):
    response = page_client("admin").post(reverse("org:pool_create"), pool_payload(slug="h100"))
    assert "Node pool with this Slug already exists." in errors_of(response)["slug"]


def test_pool_capacity_below_assigned_quotas_is_refused_on_the_capacity_field(page_client):
    payload = pool_payload(slug="h100", name="H100 80GB", capacity="10", node_labels="portal.gpu/pool=h100",
                           version=NodePool.objects.get(slug="h100").version)
    response = page_client("admin").post(reverse("org:pool_edit", args=["h100"]), payload)
    assert any("Departments hold 16 deserved units on h100, more than a capacity of 10" in text
               for text in errors_of(response)["capacity"])
    assert NodePool.objects.get(slug="h100").capacity == 16


def test_pool_in_use_cannot_be_deleted(page_client):
    response = page_client("admin").post(reverse("org:pool_delete", args=["h100"]), follow=True)
    assert "quotas still use h100; remove them first." in response.content.decode()
    assert NodePool.objects.filter(slug="h100").exists()


def test_pool_page_explains_over_subscription(page_client):
    html = page_client("admin").get(reverse("org:pool_create")).content.decode()
    assert "Allow over-subscription" in html
    assert "may add up to more than its capacity" in html


def test_department_create_edit_and_bounds(page_client, users):
    client = page_client("admin")
    bad = client.post(reverse("org:department_create"),
                      {"slug": "robotics", "name": "Robotics", "min_project_weight": "5", "max_project_weight": "2"})
    assert "The highest weight cannot be below the lowest." in errors_of(bad)["max_project_weight"]
    duplicate = client.post(reverse("org:department_create"),
                            {"slug": "robotics", "name": "Research", "min_project_weight": "0",
                             "max_project_weight": "2"})
    assert "Department with this Name already exists." in errors_of(duplicate)["name"]
    assert not Department.objects.filter(slug="robotics").exists()
    edit = client.post(reverse("org:department_edit", args=["research"]),
                       {"slug": "ignored", "name": "Research", "min_project_weight": "1", "max_project_weight": "4",
                        "version": Department.objects.get(slug="research").version})
    assert edit.status_code == 302
    research = Department.objects.get(slug="research")
    assert (research.min_project_weight, research.max_project_weight) == (1, 4)
    event = AuditEvent.objects.filter(action="department.update").latest("id")
    assert event.before["max_project_weight"] == "10" and event.after["max_project_weight"] == "4"


def test_department_with_projects_cannot_be_deleted(page_client):
    response = page_client("admin").post(reverse("org:department_delete", args=["research"]), follow=True)
    assert "Research still has 2 projects; move or delete them first." in response.content.decode()


def test_project_create_defaults_namespace_and_validates(page_client, users):
    client = page_client("deptadmin")
    url = reverse("org:project_create", args=["research"])
    train = PriorityClass.objects.get(name="train")
    response = client.post(url, {"slug": "speech", "name": "Speech", "does_not_lend": "on",
                                 "default_priority_class": train.pk})
    assert response.status_code == 302
    project = Project.objects.get(slug="speech")
    assert (project.namespace, project.does_not_lend, project.default_priority_class, project.department.slug) == (
        "proj-speech", True, train, "research")
    event = AuditEvent.objects.get(action="project.create", object_id=str(project.pk))
    assert event.actor == users["deptadmin"] and event.department.slug == "research"
    taken = client.post(url, {"slug": "speech2", "name": "Speech 2", "namespace": "proj-speech"})
    assert "Project with this Namespace already exists." in errors_of(taken)["namespace"]
    same_name = client.post(url, {"slug": "speech3", "name": "Speech"})
    assert "This department already has a project with that name." in " ".join(
        response_errors(same_name))


def response_errors(response) -> list[str]:
    return [message for messages in response.context["form"].errors.values() for message in messages]


def test_project_edit_keeps_slug_and_namespace(page_client):
    response = page_client("deptadmin").post(reverse("org:project_edit", args=["vision"]),
                                             {"slug": "other", "namespace": "other", "name": "Vision X",
                                              "version": Project.objects.get(slug="vision").version})
    assert response.status_code == 302
    vision = Project.objects.get(slug="vision")
    assert (vision.name, vision.namespace, vision.does_not_lend) == ("Vision X", "proj-vision", False)


def test_priority_class_create_and_rename_refused(page_client, users):
    client = page_client("admin")
    duplicate = client.post(reverse("org:priority_class_create"), {"name": "train", "value": "10"})
    assert "Priority class with this Name already exists." in errors_of(duplicate)["name"]
    client.post(reverse("org:priority_class_edit", args=["train"]),
                {"name": "training", "value": "60", "version": PriorityClass.objects.get(name="train").version})
    assert PriorityClass.objects.filter(name="train", value=60).exists()
    event = AuditEvent.objects.filter(action="priority_class.update").latest("id")
    assert (event.before["value"], event.after["value"], event.actor) == (50, 60, users["admin"])


def test_delete_pages_confirm_before_deleting(page_client):
    html = page_client("admin").get(reverse("org:priority_class_delete", args=["build"])).content.decode()
    assert "Delete priority class build?" in html and 'method="post"' in html
    assert PriorityClass.objects.filter(name="build").exists()
    page_client("admin").post(reverse("org:priority_class_delete", args=["build"]))
    event = AuditEvent.objects.filter(action="priority_class.delete").latest("id")
    assert event.before["name"] == "build" and event.after is None


def test_forms_carry_and_require_the_csrf_token(users):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(users["admin"])
    page = client.get(reverse("org:department_create")).content.decode()
    assert 'name="csrfmiddlewaretoken"' in page
    assert "X-CSRFToken" in page  # htmx requests send it as a header (base.html hx-headers)
    refused = client.post(reverse("org:department_create"), {"slug": "robotics", "name": "Robotics",
                                                              "min_project_weight": "0", "max_project_weight": "1"})
    assert refused.status_code == 403
    assert not Department.objects.filter(slug="robotics").exists()


REQUIRED = ('<span class="required-mark" aria-hidden="true">*</span><span class="visually-hidden"> (required)'
            '</span></label>')


def test_required_fields_are_marked(page_client):
    """Every form page marks its required fields (an asterisk, and "(required)" for screen readers) and says what
    the asterisk means; optional fields carry no mark."""
    html = page_client("admin").get(reverse("org:pool_create")).content.decode()
    assert re.search(rf'<label for="id_slug">[^<]*{re.escape(REQUIRED)}', html)
    assert re.search(r'<label for="id_description">[^<]*</label>', html)  # optional: no mark
    assert "marks a required field." in html
