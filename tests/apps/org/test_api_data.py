"""Data sources and image pull secrets in the API: scoped as the Data page and the submit form (another department's
row is a 404 and absent from the list), a pull secret's password never served, in a fixed number of queries."""

from __future__ import annotations

import json

import pytest

from apps.org import services
from apps.org.models import DataSource, ImagePullSecret, Project
from tests.api_support import call


@pytest.fixture
def data(demo):
    admin = demo["admin"]
    made = {}
    for slug in ("vision", "nlp", "forecasting"):
        project = Project.objects.get(slug=slug)
        made[slug] = services.data_source_create(actor=admin, project=project, name=f"{slug}-data", kind="pvc",
                                                 claim_name=f"{slug}-claim", mount_path="/data")
        made[f"{slug}-registry"] = services.pull_secret_create(
            actor=admin, project=project, name=f"{slug}-registry", registry="nvcr.io", username=f"{slug}-bot",
            password="s3cret-password")
    return made


def names(response) -> set[str]:
    assert response.status_code == 200, response.content
    return {row["name"] for row in response.json()["results"]}


def test_data_sources_are_those_of_the_projects_one_manages_or_submits_to(client_for, data):
    assert names(call(client_for("alice"), "GET", "data-sources/")) == {"vision-data"}  # the submit form's
    assert names(call(client_for("carol"), "GET", "data-sources/")) == {"forecasting-data"}
    assert names(call(client_for("deptadmin"), "GET", "data-sources/")) == {"vision-data", "nlp-data"}  # the Data page
    assert len(names(call(client_for("admin"), "GET", "data-sources/"))) == 3
    assert call(client_for("alice"), "GET", f"data-sources/{data['forecasting'].pk}/").status_code == 404
    shown = call(client_for("alice"), "GET", f"data-sources/{data['vision'].pk}/").json()
    assert shown == {**shown, "project_slug": "vision", "kind": "pvc", "source": "pvc/vision-claim",
                     "mount_path": "/data", "read_only": True}


def test_pull_secrets_show_registry_and_user_never_the_password(client_for, data):
    assert names(call(client_for("deptadmin"), "GET", "pull-secrets/")) == {"vision-registry", "nlp-registry"}
    assert names(call(client_for("alice"), "GET", "pull-secrets/")) == set()  # researchers manage none
    assert call(client_for("deptadmin"), "GET", f"pull-secrets/{data['forecasting-registry'].pk}/").status_code == 404
    response = call(client_for("admin"), "GET", f"pull-secrets/{data['vision-registry'].pk}/")
    shown = response.json()
    assert shown == {**shown, "registry": "nvcr.io", "username": "vision-bot", "applied_at": None,
                     "secret_name": f"portal-pull-{data['vision-registry'].pk}"}
    assert "s3cret-password" not in response.content.decode() and "password" not in json.dumps(shown)
    assert "sealed" not in shown


@pytest.mark.parametrize(("path", "queries"), [("data-sources/", 5), ("pull-secrets/", 5)])
def test_lists_cost_a_fixed_number_of_queries(client_for, demo, data, django_assert_num_queries, path, queries):
    client = client_for("admin")  # session, user, grants, count, rows with their project
    with django_assert_num_queries(queries):
        assert call(client, "GET", path).status_code == 200
    vision = Project.objects.get(slug="vision")
    for number in range(6):
        services.data_source_create(actor=demo["admin"], project=vision, name=f"more-{number}", kind="nfs",
                                    nfs_server="nfs.example.org", nfs_path=f"/export/{number}", mount_path="/more")
        services.pull_secret_create(actor=demo["admin"], project=vision, name=f"more-{number}",
                                    registry="registry.example.org", username="bot", password="x")
    with django_assert_num_queries(queries):
        assert call(client, "GET", path).json()["count"] == 9
    assert DataSource.objects.count() == ImagePullSecret.objects.count() == 9
