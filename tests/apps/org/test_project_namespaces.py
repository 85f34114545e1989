"""Namespaces are the portal's own: project create refuses system namespaces, namespaces without the configured
prefix (unless an admin approved them) and other projects' namespaces, with one message through the services, the
API and the form page; nothing is saved and no audit row is written. Rows older than the rule still render and
stay editable."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from apps.core.models import AuditEvent
from apps.org import services
from apps.org.models import Department, Project
from tests.api_support import call, org_state

RULE = "Project namespaces start with 'proj-' (or are on the approved list)"


def system(name: str, prefix: str = "proj-") -> str:
    return f"Project namespaces start with '{prefix}' (or are on the approved list); '{name}' is a system namespace."


def unprefixed(name: str, prefix: str = "proj-") -> str:
    return (f"Project namespaces start with '{prefix}' (or are on the approved list); '{name}' does not start with "
            f"'{prefix}' and is not on the approved list.")


PORTAL_OWN = f"{RULE}; 'gpu-portal' is the portal's own namespace."
RESERVED = f"{RULE}; 'proj-shared' is reserved for project shared."
TAKEN = "Project with this Namespace already exists."


@pytest.fixture
def approved(settings):
    """An installation whose admins approved two extra namespaces and whose portal runs in gpu-portal; the list
    names gpu-portal and kube-system too, which the rule refuses whatever the list says."""
    settings.PORTAL_EXTRA_PROJECT_NAMESPACES = ["ml-shared", "research-legacy", "gpu-portal", "kube-system"]
    settings.PORTAL_NAMESPACE = "gpu-portal"
    return settings


FORBIDDEN = [
    ("kube-system", system("kube-system")),
    ("default", system("default")),
    ("kube-public", system("kube-public")),
    ("kube-node-lease", system("kube-node-lease")),
    ("kube-anything", system("kube-anything")),
    ("gpu-portal", PORTAL_OWN),
    ("team-speech", unprefixed("team-speech")),
    ("speech", unprefixed("speech")),
    ("proj-vision", TAKEN),  # the demo's vision project holds it
]


def state() -> tuple[Any, ...]:
    return (list(Project.objects.order_by("pk").values_list("pk", "slug", "namespace")), AuditEvent.objects.count())


def refused_by_service(actor: Any, **fields: Any) -> dict[str, list[str]]:
    before = state()
    with pytest.raises(ValidationError) as caught:
        services.project_create(actor=actor, department=Department.objects.get(slug="research"), **fields)
    assert state() == before
    return caught.value.message_dict


@pytest.mark.parametrize(("namespace", "message"), FORBIDDEN)
def test_service_refuses_namespaces_that_are_not_the_portals(demo, approved, namespace, message):
    for actor in (demo["admin"], demo["deptadmin"]):
        errors = refused_by_service(actor, slug="speech", name="Speech", namespace=namespace)
        assert errors == {"namespace": [message]}


def test_a_namespace_named_after_another_project_is_reserved_for_it(demo, approved):
    research = Department.objects.get(slug="research")
    shared = services.project_create(actor=demo["deptadmin"], department=research, slug="shared", name="Shared",
                                     namespace="ml-shared")
    assert shared.namespace == "ml-shared"
    errors = refused_by_service(demo["deptadmin"], slug="other", name="Other", namespace="proj-shared")
    assert errors == {"namespace": [RESERVED]}
    # Its own prefixed name stays free for a project of that slug.
    assert services.project_create(actor=demo["deptadmin"], department=research, slug="shared2", name="Shared 2",
                                   namespace="proj-shared2").namespace == "proj-shared2"


def test_every_error_at_once(demo, approved):
    errors = refused_by_service(demo["deptadmin"], slug="speech", name="", namespace="kube-system")
    assert errors == {"name": ["This field cannot be blank."], "namespace": [system("kube-system")]}


def test_prefixed_default_and_approved_namespaces_are_accepted(demo, approved):
    research = Department.objects.get(slug="research")
    default = services.project_create(actor=demo["deptadmin"], department=research, slug="speech", name="Speech")
    prefixed = services.project_create(actor=demo["deptadmin"], department=research, slug="robots", name="Robots",
                                       namespace="proj-robots-lab")
    listed = services.project_create(actor=demo["deptadmin"], department=research, slug="legacy", name="Legacy",
                                     namespace="research-legacy")
    assert (default.namespace, prefixed.namespace, listed.namespace) == (
        "proj-speech", "proj-robots-lab", "research-legacy")
    assert AuditEvent.objects.filter(action="project.create", object_id=str(listed.pk)).count() == 1


def test_the_rule_follows_the_configured_prefix(demo, settings):
    settings.KUEUE_PROJECT_PREFIX = "team-"
    research = Department.objects.get(slug="research")
    assert services.project_create(actor=demo["deptadmin"], department=research, slug="speech",
                                   name="Speech").namespace == "team-speech"
    errors = refused_by_service(demo["deptadmin"], slug="robots", name="Robots", namespace="proj-robots")
    assert errors == {"namespace": [unprefixed("proj-robots", prefix="team-")]}


def test_without_a_list_nothing_unprefixed_is_approved(demo, settings):
    settings.PORTAL_EXTRA_PROJECT_NAMESPACES = []
    settings.PORTAL_NAMESPACE = ""
    errors = refused_by_service(demo["deptadmin"], slug="speech", name="Speech", namespace="ml-shared")
    assert errors == {"namespace": [unprefixed("ml-shared")]}


# --- the API ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("namespace", "message"), FORBIDDEN)
def test_api_refuses_with_the_field_message(client_for, demo, approved, namespace, message):
    research = Department.objects.get(slug="research").pk
    before = org_state()
    response = call(client_for("deptadmin"), "POST", "projects/",
                    {"slug": "speech", "name": "Speech", "department": research, "namespace": namespace})
    assert response.status_code == 400, response.content
    assert response.json() == {"namespace": [message]}
    assert org_state() == before


def test_api_accepts_an_approved_namespace(client_for, demo, approved):
    research = Department.objects.get(slug="research").pk
    response = call(client_for("deptadmin"), "POST", "projects/",
                    {"slug": "shared", "name": "Shared", "department": research, "namespace": "ml-shared"})
    assert response.status_code == 201, response.content
    assert response.json()["namespace"] == "ml-shared"


# --- the form page ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("namespace", "message"), FORBIDDEN)
def test_form_shows_the_refusal_on_the_namespace_field(page_client, approved, namespace, message):
    before = state()
    response = page_client("deptadmin").post(reverse("org:project_create", args=["research"]),
                                             {"slug": "speech", "name": "Speech", "namespace": namespace})
    assert response.status_code == 200
    assert dict(response.context["form"].errors) == {"namespace": [message]}
    assert message.replace("'", "&#x27;") in response.content.decode()
    assert state() == before


def test_form_accepts_an_approved_namespace_and_explains_the_rule(page_client, approved):
    url = reverse("org:project_create", args=["research"])
    page = page_client("deptadmin").get(url).content.decode()
    assert "Others must start with &#x27;proj-&#x27; or be on the admins&#x27; approved list." in page
    response = page_client("deptadmin").post(url, {"slug": "shared", "name": "Shared", "namespace": "ml-shared"})
    assert response.status_code == 302
    assert Project.objects.get(slug="shared").namespace == "ml-shared"


# --- rows older than the rule -----------------------------------------------------------------------------------


def test_a_legacy_row_still_renders_and_stays_editable(page_client, client_for, demo):
    Project.objects.filter(slug="nlp").update(namespace="kube-system")  # saved before the rule existed
    for url in (reverse("org:departments"), reverse("org:overview"), reverse("org:project_edit", args=["nlp"])):
        response = page_client("admin").get(url)
        assert response.status_code == 200 and "kube-system" in response.content.decode()
    response = page_client("deptadmin").post(reverse("org:project_edit", args=["nlp"]),
                                             {"slug": "nlp", "name": "NLP renamed", "namespace": "kube-system",
                                              "version": Project.objects.get(slug="nlp").version})
    assert response.status_code == 302
    nlp = Project.objects.get(slug="nlp")
    response = call(client_for("deptadmin"), "PATCH", f"projects/{nlp.pk}/", {"description": "legacy namespace"})
    assert response.status_code == 200, response.content
    nlp.refresh_from_db()
    assert (nlp.name, nlp.description, nlp.namespace) == ("NLP renamed", "legacy namespace", "kube-system")
