"""Namespaces admins map to a project: every refusal at once, admins only (service, page and API), audited, and
the rows of the mapping scoped like projects."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.urls import reverse

from apps.core.models import AuditEvent
from apps.org import services
from apps.org.models import Project, ProjectNamespace


@pytest.fixture
def vision(demo):
    return Project.objects.get(slug="vision")


def refusals(actor, project, namespace):
    with pytest.raises(ValidationError) as caught:
        services.project_namespace_map(actor=actor, project=project, namespace=namespace)
    return caught.value.message_dict["namespace"]


@pytest.mark.parametrize(("namespace", "words"), [
    ("kube-system", "is a system namespace"),
    ("kube-public", "is a system namespace"),
    ("kube-node-lease", "is a system namespace"),
    ("kueue-system", "is a system namespace"),
    ("proj-nlp", "is the own namespace of project nlp"),
    ("Not_A_Label", "DNS-1123 label"),
    ("", "cannot be blank"),
])
def test_each_bad_namespace_is_refused_and_nothing_is_saved(demo, vision, namespace, words):
    messages = refusals(demo["admin"], vision, namespace)
    assert any(words in message for message in messages), messages
    assert not ProjectNamespace.objects.exists() and not AuditEvent.objects.filter(
        action="project.namespace_map").exists()


def test_the_portals_own_namespace_and_one_mapped_already_are_refused(demo, vision, settings):
    settings.PORTAL_NAMESPACE = "gpu-portal"
    assert refusals(demo["admin"], vision, "gpu-portal") == ["'gpu-portal' is the portal's own namespace."]
    services.project_namespace_map(actor=demo["admin"], project=vision, namespace="vision-pipelines")
    nlp = Project.objects.get(slug="nlp")
    assert refusals(demo["admin"], nlp, "vision-pipelines") == ["This namespace is mapped to a project already."]
    # A project created later may not take a mapped namespace as its own either.
    services.project_namespace_map(actor=demo["admin"], project=vision, namespace="proj-pipelines")
    with pytest.raises(ValidationError) as caught:
        services.project_create(actor=demo["admin"], department=vision.department, slug="pipelines",
                                name="Pipelines")
    assert "is mapped to a project already" in str(caught.value.message_dict["namespace"])


def test_several_reasons_are_reported_together(demo, vision):
    long_system = "kube-" + "x" * 60
    messages = refusals(demo["admin"], vision, long_system)
    assert any("63" in m for m in messages) and any("system namespace" in m for m in messages)


def test_only_admins_map_and_unmap_and_both_are_audited(demo, vision):
    for name in ("deptadmin", "lead", "alice", "viewer"):
        with pytest.raises(PermissionDenied):
            services.project_namespace_map(actor=demo[name], project=vision, namespace="vision-pipelines")
    mapping = services.project_namespace_map(actor=demo["admin"], project=vision, namespace="vision-pipelines")
    with pytest.raises(PermissionDenied):
        services.project_namespace_unmap(actor=demo["deptadmin"], project_namespace=mapping)
    services.project_namespace_unmap(actor=demo["admin"], project_namespace=mapping)
    assert not ProjectNamespace.objects.exists()
    rows = AuditEvent.objects.filter(action__startswith="project.namespace_").order_by("pk")
    assert [(row.action, row.actor.username, row.project_id) for row in rows] == [
        ("project.namespace_map", "admin", vision.pk), ("project.namespace_unmap", "admin", vision.pk)]
    assert rows[0].after == {"namespace": "vision-pipelines", "project": "vision"} and rows[1].after is None


def test_the_page_maps_and_unmaps_for_admins_only(client_for, demo, vision):
    url = reverse("org:project_namespaces", args=["vision"])
    assert client_for("deptadmin").get(url).status_code == 403
    assert client_for("alice").get(url).status_code in (403, 404)
    assert client_for("carol").get(url).status_code == 404  # another department's project
    admin = client_for("admin")
    assert b"Namespaces" in admin.get(reverse("org:departments")).content
    refused = admin.post(url, {"namespace": "kube-system"})
    assert refused.status_code == 400 and b"is a system namespace" in refused.content
    assert admin.post(url, {"namespace": "vision-pipelines"}).status_code == 302
    mapping = ProjectNamespace.objects.get()
    assert mapping.project == vision and b"vision-pipelines" in admin.get(url).content
    unmap = reverse("org:project_namespace_unmap", args=["vision", mapping.pk])
    assert client_for("deptadmin").post(unmap).status_code == 403
    assert admin.post(unmap).status_code == 302 and not ProjectNamespace.objects.exists()


def test_the_api_maps_for_admins_lists_like_projects_and_is_in_the_schema(client_for, demo, vision):
    admin = client_for("admin")
    created = admin.post("/api/v1/project-namespaces/", {"project": vision.pk, "namespace": "vision-pipelines"},
                         content_type="application/json")
    assert created.status_code == 201, created.content
    assert created.json()["namespace"] == "vision-pipelines" and created.json()["project"] == vision.pk
    refused = admin.post("/api/v1/project-namespaces/", {"project": vision.pk, "namespace": "kube-system"},
                         content_type="application/json")
    assert refused.status_code == 400 and "system namespace" in str(refused.json())
    denied = client_for("deptadmin").post("/api/v1/project-namespaces/",
                                          {"project": vision.pk, "namespace": "other"},
                                          content_type="application/json")
    assert denied.status_code == 403 and ProjectNamespace.objects.count() == 1
    pk = created.json()["id"]
    assert [row["namespace"] for row in client_for("alice").get("/api/v1/project-namespaces/").json()["results"]] \
        == ["vision-pipelines"]
    assert client_for("carol").get("/api/v1/project-namespaces/").json()["results"] == []
    assert client_for("carol").delete(f"/api/v1/project-namespaces/{pk}/").status_code == 404
    assert client_for("alice").delete(f"/api/v1/project-namespaces/{pk}/").status_code == 403
    assert admin.delete(f"/api/v1/project-namespaces/{pk}/").status_code == 204
    assert not ProjectNamespace.objects.exists()
    schema = admin.get("/api/v1/schema/", {"format": "json"}).json()
    assert {"/api/v1/project-namespaces/", "/api/v1/project-namespaces/{id}/"} <= set(schema["paths"])
