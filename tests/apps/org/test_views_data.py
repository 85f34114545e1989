"""The Data and registries page: admins and department admins add a project's data sources and pull secrets (every
refusal on its field, nothing saved); others are refused; a password is never rendered back."""

from __future__ import annotations

import pytest
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


def form_errors(response, form: str) -> dict[str, list[str]]:
    return {name: list(messages) for name, messages in response.context[form].errors.items()}


@pytest.mark.parametrize(("registry", "message"), [
    ("http://nvcr.io", "no scheme"),
    ("file:///etc/passwd", "no scheme"),
    ("user:pw@registry.example.org", "no user name or password"),
    ("nvcr.io\nevil.example.org", "a registry host"),
    ("nvcr.io/../v2", "no path"),
    ("nvcr.io/v2", "no path"),
    ("..", "a registry host"),
    ("registry.example.org:99999", "port"),
    ("-nvcr.io", "a registry host"),
    ("nvcr..io", "a registry host"),
])
def test_a_pull_secret_registry_is_a_host_and_port_only(client_for, demo, registry, message):
    """The registry is written into the project's dockerconfigjson Secret: host[:port], nothing else."""
    refused = client_for("admin").post(reverse("org:data"), {
        "form": "pull_secret", "registry-project": Project.objects.get(slug="vision").pk, "registry-name": "nvcr",
        "registry-registry": registry, "registry-username": "u", "registry-password": "p"})
    assert refused.status_code == 200
    [error] = form_errors(refused, "secret_form")["registry"]
    assert message in error and "e.g. nvcr.io or registry.example.org:5000" in error
    assert not ImagePullSecret.objects.exists()


@pytest.mark.parametrize("registry", ["nvcr.io", "registry.example.org:5000", "10.0.0.7:5000", "[fd00::7]:5000",
                                      "localhost:5000"])
def test_a_pull_secret_registry_host_and_port_is_saved(client_for, demo, registry):
    saved = client_for("admin").post(reverse("org:data"), {
        "form": "pull_secret", "registry-project": Project.objects.get(slug="vision").pk, "registry-name": "nvcr",
        "registry-registry": registry, "registry-username": "u", "registry-password": "p"})
    assert saved.status_code == 302
    assert ImagePullSecret.objects.get().registry == registry


NFS_FORM = {"form": "data_source", "source-name": "imagenet", "source-kind": "nfs", "source-claim_name": "",
            "source-nfs_server": "nfs.example.org", "source-nfs_path": "/exports/imagenet",
            "source-mount_path": "/data/imagenet"}


@pytest.mark.parametrize(("field", "value", "message"), [
    ("nfs_server", "nfs.example.org:2049", "without a port"),
    ("nfs_server", "10.0.0.5:2049", "without a port"),
    ("nfs_server", "user@nfs.example.org", "a host name or IP address"),
    ("nfs_server", "nfs.example.org\nrogue", "a host name or IP address"),
    ("nfs_server", "-o.example.org", "a host name or IP address"),
    ("nfs_path", "/x,ro=false", "no commas"),
    ("nfs_path", "exports/x", "absolute"),
    ("nfs_path", "/exports/../etc", "plain"),
    ("nfs_path", "/exports//x", "plain"),
    ("nfs_path", "/exports/x\nrw", "plain"),
    ("nfs_path", "/exports/a b", "plain"),
])
def test_an_nfs_source_names_a_host_and_a_clean_absolute_export(client_for, demo, field, value, message):
    refused = client_for("admin").post(reverse("org:data"), {
        **NFS_FORM, "source-project": Project.objects.get(slug="vision").pk, f"source-{field}": value})
    assert refused.status_code == 200
    assert any(message in error for error in form_errors(refused, "source_form")[field]), form_errors(
        refused, "source_form")
    assert not DataSource.objects.exists()


@pytest.mark.parametrize(("server", "path"), [("nfs.example.org", "/exports/imagenet"), ("10.0.0.5", "/"),
                                              ("fd00::5", "/exports/x_1.v2"), ("[fd00::5]", "/exports/x")])
def test_an_nfs_host_and_export_path_are_saved(client_for, demo, server, path):
    saved = client_for("admin").post(reverse("org:data"), {
        **NFS_FORM, "source-project": Project.objects.get(slug="vision").pk, "source-nfs_server": server,
        "source-nfs_path": path})
    assert saved.status_code == 302, form_errors(saved, "source_form")
    assert (DataSource.objects.get().nfs_server, DataSource.objects.get().nfs_path) == (server, path)
