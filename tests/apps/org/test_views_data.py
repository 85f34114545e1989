"""The Data and registries page: admins and department admins add a project's data sources and pull secrets (every
refusal on its field, nothing saved); others are refused; a password is never rendered back."""

from __future__ import annotations

from django.urls import reverse

from apps.org.models import DataSource, ImagePullSecret, Project


def test_researchers_and_viewers_may_not_manage_data(client_for):
    for name in ("alice", "viewer", "lead"):
        assert client_for(name).get(reverse("org:data")).status_code == 403


def test_a_department_admin_adds_data_sources_with_every_refusal_at_once(client_for, demo):
    client = client_for("deptadmin")
    vision = Project.objects.get(slug="vision")
    page = client.get(reverse("org:data")).content.decode()
    assert "Vision" in page and "ETL" not in page  # only the department's projects are offered
    refused = client.post(reverse("org:data"), {"form": "data_source", "source-project": vision.pk,
                                                "source-name": "imagenet", "source-kind": "pvc",
                                                "source-claim_name": "", "source-mount_path": "/etc/data"})
    assert refused.status_code == 200
    text = refused.content.decode()
    assert "shadow the system directory /etc" in text and "is not a valid Kubernetes name" in text
    assert not DataSource.objects.exists()
    etl = Project.objects.get(slug="etl")
    other = client.post(reverse("org:data"), {"form": "data_source", "source-project": etl.pk, "source-name": "x",
                                              "source-kind": "pvc", "source-claim_name": "c",
                                              "source-mount_path": "/data/x"})
    assert other.status_code == 200 and not DataSource.objects.exists()  # not a choice for this department admin
    saved = client.post(reverse("org:data"), {"form": "data_source", "source-project": vision.pk,
                                              "source-name": "imagenet", "source-kind": "pvc",
                                              "source-claim_name": "imagenet-pvc",
                                              "source-mount_path": "/data/imagenet", "source-read_only": "on"})
    assert saved.status_code == 302
    source = DataSource.objects.get()
    assert (source.project, source.claim_name, source.read_only) == (vision, "imagenet-pvc", True)
    assert client_for("alice").get(reverse("org:data_source_delete", args=[source.pk])).status_code == 404
    assert client.post(reverse("org:data_source_delete", args=[source.pk])).status_code == 302
    assert not DataSource.objects.exists()


def test_a_refused_pull_secret_never_shows_its_password(client_for, demo):
    client = client_for("admin")
    vision = Project.objects.get(slug="vision")
    refused = client.post(reverse("org:data"), {"form": "pull_secret", "registry-project": vision.pk,
                                                "registry-name": "Bad Name", "registry-registry": "nvcr.io",
                                                "registry-username": "u", "registry-password": "hunter2-secret"})
    assert refused.status_code == 200 and "hunter2-secret" not in refused.content.decode()
    assert not ImagePullSecret.objects.exists()
