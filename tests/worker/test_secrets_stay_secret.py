"""Credentials and registry passwords go to the cluster and nowhere else: not the database (before or after the
worker writes the Secret), not the audit log, not the API, not a page's source; and a notebook opens through the
portal for its owner only (proxy mode, through kubesim's service proxy)."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.urls import reverse

from apps.org.models import ImagePullSecret, Project
from apps.workloads import notebooks
from apps.workloads.models import Credential, Kind, Status, Workload
from tests.api_support import call
from tests.apps.workloads.helpers import submit_payload
from tests.worker.conftest import signed_in, wait_for
from worker import tasks

pytestmark = pytest.mark.slow

CREDENTIAL_VALUE = "s3-secret-key-9d1e77c0aa"
REGISTRY_PASSWORD = "registry-token-41f0c2bb39"
ROTATED_VALUE = "rotated-key-5be20d71f3"


def _rows_holding(text: str) -> list[str]:
    """Every row of every table whose values contain `text` (model and primary key)."""
    found = []
    for model in apps.get_models():
        for row in model.objects.all().values():
            if text in str(row):
                found.append(f"{model._meta.label} {row.get('id')}")
    return found


@pytest.fixture
def saved(org, cluster):
    """alice's credential and the admin's registry password, saved through their pages."""
    admin, alice = signed_in(org["admin"]), signed_in(org["alice"])
    vision = Project.objects.get(slug="vision")
    refused = alice.post(reverse("workloads:credentials"), {"project": vision.pk, "name": "Not A Name",
                                                            "values": f"AWS_SECRET_ACCESS_KEY={CREDENTIAL_VALUE}"})
    assert refused.status_code == 200 and CREDENTIAL_VALUE not in refused.content.decode()  # never echoed back
    assert alice.post(reverse("workloads:credentials"), {
        "project": vision.pk, "name": "s3", "values": f"AWS_ACCESS_KEY_ID=AKIA1\nAWS_SECRET_ACCESS_KEY="
                                                      f"{CREDENTIAL_VALUE}"}).status_code == 302
    assert admin.post(reverse("org:data"), {
        "form": "pull_secret", "registry-project": vision.pk, "registry-name": "private",
        "registry-registry": "registry.example.org:5000", "registry-username": "robot",
        "registry-password": REGISTRY_PASSWORD}).status_code == 302
    return {"alice": alice, "admin": admin, "credential": Credential.objects.get(name="s3"),
            "registry": ImagePullSecret.objects.get(name="private")}


def test_secret_values_are_never_kept_audited_served_or_shown(saved, cluster, org):
    assert _rows_holding(CREDENTIAL_VALUE) == [] and _rows_holding(REGISTRY_PASSWORD) == []  # sealed on the way
    credential, registry = saved["credential"], saved["registry"]
    # While sealed the API serves names, keys, registry and user name only.
    listed = [call(saved["alice"], "GET", "credentials/"), call(saved["admin"], "GET", "pull-secrets/"),
              call(saved["alice"], "GET", f"credentials/{credential.pk}/")]
    assert [row["keys"] for row in listed[0].json()["results"]] == [["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"]]
    assert [(row["registry"], row["username"]) for row in listed[1].json()["results"]] == [
        ("registry.example.org:5000", "robot")]
    for answer in listed:
        text = answer.content.decode()
        assert answer.status_code == 200 and "sealed" not in text
        assert credential.sealed[-40:] not in text and registry.sealed[-40:] not in text
    assert credential.keys == ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"] and credential.sealed
    assert tasks.credential_sync.apply(args=[credential.pk]).get() == "applied"
    assert tasks.pull_secret_sync.apply(args=[registry.pk]).get() == "applied"
    assert Credential.objects.get(pk=credential.pk).sealed == "" and ImagePullSecret.objects.get(
        pk=registry.pk).sealed == ""
    assert cluster.get("Secret", credential.secret_name, namespace="proj-vision")["type"] == "Opaque"
    assert _rows_holding(CREDENTIAL_VALUE) == [] and _rows_holding(REGISTRY_PASSWORD) == []
    alice, admin = saved["alice"], saved["admin"]
    response = alice.post(reverse("workloads:submit", args=["training"]),
                          submit_payload("training", credentials=[credential.pk]))
    assert response.status_code == 302
    workload = Workload.objects.get()
    assert tasks.workload_submit.apply(args=[workload.pk]).get() == "submitted"
    api = call(alice, "GET", f"workloads/{workload.pk}/")
    assert api.status_code == 200 and api.json()["credentials"] == ["s3"]
    pages = [alice.get(reverse("workloads:detail", args=[workload.pk])), alice.get(reverse("workloads:credentials")),
             admin.get(reverse("org:data")), admin.get(reverse("org:audit")), call(alice, "GET", "workloads/"),
             call(alice, "GET", "credentials/"), call(admin, "GET", "pull-secrets/")]
    for page in [api, *pages]:
        assert page.status_code == 200
        text = page.content.decode()
        assert CREDENTIAL_VALUE not in text and REGISTRY_PASSWORD not in text
    assert "AWS_SECRET_ACCESS_KEY" in pages[1].content.decode()  # the keys are shown, the values never
    # Rotation: new values replace all the old ones, sealed until the worker rewrites the Secret; only the owner.
    rotate = reverse("workloads:credential_values", args=[credential.pk])
    assert signed_in(org["bob"]).get(rotate).status_code == 404
    assert signed_in(org["bob"]).post(rotate, {"values": "X=1"}).status_code == 404
    refused = alice.post(rotate, {"values": f"not a pair\nAWS_SECRET_ACCESS_KEY={ROTATED_VALUE}"})
    assert refused.status_code == 200 and ROTATED_VALUE not in refused.content.decode()
    assert Credential.objects.get(pk=credential.pk).sealed == ""  # nothing changed
    assert alice.post(rotate, {"values": f"AWS_SECRET_ACCESS_KEY={ROTATED_VALUE}"}).status_code == 302
    rotated = Credential.objects.get(pk=credential.pk)
    assert rotated.keys == ["AWS_SECRET_ACCESS_KEY"] and rotated.sealed and rotated.applied_at is None
    assert _rows_holding(ROTATED_VALUE) == []
    assert tasks.credential_sync.apply(args=[credential.pk]).get() == "applied"
    secret = cluster.get("Secret", credential.secret_name, namespace="proj-vision")
    assert set(secret.get("data") or secret.get("stringData") or {}) == {"AWS_SECRET_ACCESS_KEY"}
    assert Credential.objects.get(pk=credential.pk).sealed == "" and _rows_holding(ROTATED_VALUE) == []
    audit = admin.get(reverse("org:audit")).content.decode()
    assert "credential.replace_values" in audit and ROTATED_VALUE not in audit
    # Deleting takes the Secret out of the cluster, then the row.
    assert alice.post(reverse("workloads:credential_delete", args=[credential.pk])).status_code == 302
    assert tasks.credential_sync.apply(args=[credential.pk]).get() == "deleted"
    assert not Credential.objects.filter(pk=credential.pk).exists()
    names = [secret["metadata"]["name"] for secret in cluster.list("Secret", namespace="proj-vision")]
    assert credential.secret_name not in names and registry.secret_name in names


def test_a_notebook_opens_through_the_portal_for_its_owner_only(org, cluster, kubesim, watcher, settings):
    settings.KUBECONFIG = kubesim.kubeconfig_path
    notebooks.forget_client()
    alice = signed_in(org["alice"])
    assert alice.post(reverse("workloads:submit", args=["notebook"]), submit_payload(
        "notebook", pool="l40s-shared")).status_code == 302
    notebook = Workload.objects.get(kind=Kind.NOTEBOOK)
    assert tasks.workload_submit.apply(args=[notebook.pk]).get() == "submitted"
    kubesim.advance(1)
    wait_for(lambda: Workload.objects.get(pk=notebook.pk).status == Status.RUNNING)
    detail = alice.get(reverse("workloads:detail", args=[notebook.pk])).content.decode()
    connect = reverse("workloads:connect", args=[notebook.pk])
    assert connect in detail and notebooks.token(notebook.pk) not in detail
    redirect = alice.get(connect)
    assert redirect.status_code == 302 and redirect["Location"] == reverse("workloads:notebook",
                                                                           args=[notebook.pk, "lab"])
    page = alice.get(redirect["Location"])
    assert page.status_code == 200 and "<title>JupyterLab</title>" in page.content.decode()
    assert "sandbox" in page["Content-Security-Policy"] and notebooks.token(notebook.pk) not in page.content.decode()
    # The relay serves the notebook's pages only: no climbing to other API paths with the portal's credentials.
    climb = reverse("workloads:notebook", args=[notebook.pk, "lab"]).replace("/lab", "/../../../secrets")
    assert alice.get(climb).status_code == 404
    assert notebooks.service_proxy_path("ns", 1, "lab/a b%2F..") == \
        "/api/v1/namespaces/ns/services/wl-1:http/proxy/lab/a%20b%252F.."
    with pytest.raises(notebooks.NotANotebookPath):
        notebooks.service_proxy_path("ns", 1, "lab/../../../secrets")
    for name in ("bob", "viewer", "lead"):  # lead sees the workload (team lead of vision), still may not open it
        other = signed_in(org[name])
        assert other.get(connect).status_code == 404
        assert other.get(redirect["Location"]).status_code == 404
    # Where the admins let project members share notebooks, a member of the project may open it.
    Project.objects.filter(slug="vision").update(notebooks_shared=True)
    assert signed_in(org["lead"]).get(connect).status_code == 302
    assert signed_in(org["bob"]).get(connect).status_code == 404  # bob is not in vision
    assert signed_in(org["viewer"]).get(connect).status_code == 404  # viewers submit nowhere
    notebooks.forget_client()
