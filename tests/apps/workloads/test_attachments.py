"""Data sources, credentials and shared memory on a submission: the same refusals from the form, the API and the
template editor, every one at once, and nothing saved when refused."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.urls import reverse

from apps.org import services as org_services
from apps.org.models import DataSource, Project
from apps.org.validators import mount_collisions, mount_path_errors
from apps.workloads import services
from apps.workloads.models import Credential, Workload
from tests.api_support import call
from tests.apps.workloads.helpers import all_errors, submit_payload


@pytest.fixture
def vision_data(demo):
    vision = Project.objects.get(slug="vision")
    nlp = Project.objects.get(slug="nlp")
    make = org_services.data_source_create
    return {
        "imagenet": make(actor=demo["admin"], project=vision, name="imagenet", kind="pvc", claim_name="imagenet",
                         mount_path="/data/imagenet"),
        "nested": make(actor=demo["admin"], project=vision, name="nested", kind="pvc", claim_name="other",
                       mount_path="/data/imagenet/train"),
        "corpus": make(actor=demo["admin"], project=nlp, name="corpus", kind="nfs", nfs_server="10.0.0.5",
                       nfs_path="/exports/corpus", mount_path="/data/corpus"),
        "wandb": services.credential_create(actor=demo["alice"], project=vision, name="wandb",
                                            values={"WANDB_API_KEY": "k1"}),
        "wandb2": services.credential_create(actor=demo["alice"], project=vision, name="wandb-two",
                                             values={"WANDB_API_KEY": "k2"}),
        "bobs": services.credential_create(actor=demo["bob"], project=Project.objects.get(slug="nlp"), name="hf",
                                           values={"HF_TOKEN": "k3"}),
    }


@pytest.mark.parametrize(("path", "fragment"), [
    ("", "absolute path"), ("data", "not an absolute path"), ("/", "not an absolute path"),
    ("/data/../etc", "plain path"), ("/data//x", "plain path"), ("/data/x/", "plain path"),
    ("/etc/ssl", "shadow the system directory /etc"), ("/dev/shm", "/dev"), ("/usr", "/usr"),
    ("/var", "/var/run"), ("/data/with space", "without spaces"),
])
def test_mount_paths_that_would_break_the_container_are_refused(path, fragment):
    assert fragment in " ".join(mount_path_errors(path))


def test_good_mount_paths_and_collisions():
    assert mount_path_errors("/data/imagenet") == [] and mount_path_errors("/home/jovyan/work") == []
    assert mount_collisions([("a", "/data"), ("b", "/data/x"), ("c", "/mnt")]) == [
        "a (/data) and b (/data/x) would mount over each other; give them separate paths."]
    assert mount_collisions([("a", "/data/x"), ("b", "/data/xy")]) == []


def test_data_source_rules_all_at_once_and_audited(demo):
    vision = Project.objects.get(slug="vision")
    with pytest.raises(ValidationError) as caught:
        org_services.data_source_create(actor=demo["admin"], project=vision, name="Bad_Name", kind="pvc",
                                        claim_name="Not/A/Claim", mount_path="/proc/x")
    assert set(caught.value.message_dict) == {"name", "claim_name", "mount_path"}
    with pytest.raises(ValidationError) as caught:
        org_services.data_source_create(actor=demo["admin"], project=vision, name="n", kind="nfs",
                                        nfs_server="bad server", nfs_path="relative", mount_path="/data/n")
    assert set(caught.value.message_dict) == {"nfs_server", "nfs_path"}
    assert not DataSource.objects.exists()
    with pytest.raises(PermissionDenied):
        org_services.data_source_create(actor=demo["alice"], project=vision, name="n", kind="pvc", claim_name="c",
                                        mount_path="/data/n")
    with pytest.raises(PermissionDenied):  # a department admin of research, not of production
        org_services.data_source_create(actor=demo["deptadmin"], project=Project.objects.get(slug="etl"),
                                        name="n", kind="pvc", claim_name="c", mount_path="/data/n")
    source = org_services.data_source_create(actor=demo["deptadmin"], project=vision, name="n", kind="pvc",
                                             claim_name="c", mount_path="/data/n")
    from apps.core.models import AuditEvent

    event = AuditEvent.objects.get(action="data_source.create")
    assert event.after["mount_path"] == "/data/n" and event.after["target"] == source.target == "pvc/c"


def test_credential_values_are_checked_and_never_kept_in_clear(demo):
    vision = Project.objects.get(slug="vision")
    with pytest.raises(ValidationError) as caught:
        services.credential_create(actor=demo["alice"], project=vision, name="x",
                                   values={"1BAD": "v", "PORTAL_X": "v", "OK": ""})
    assert len(caught.value.message_dict["values"]) == 3
    with pytest.raises(PermissionDenied):
        services.credential_create(actor=demo["viewer"], project=vision, name="x", values={"A": "b"})
    credential = services.credential_create(actor=demo["alice"], project=vision, name="x",
                                            values={"A": "top-secret-value"})
    stored = Credential.objects.get(pk=credential.pk)
    assert stored.keys == ["A"] and "top-secret-value" not in stored.sealed
    with pytest.raises(PermissionDenied):
        services.credential_delete(actor=demo["bob"], credential=stored)


def _submit(client, **fields):
    return client.post(reverse("workloads:submit", args=["training"]), submit_payload("training", **fields))


def test_the_form_refuses_every_attachment_problem_at_once(client_for, vision_data):
    alice = client_for("alice")
    response = _submit(alice, memory_gib="4", shm_gib="8",
                       data_sources=[vision_data["imagenet"].pk, vision_data["nested"].pk],
                       credentials=[vision_data["wandb"].pk, vision_data["wandb2"].pk])
    assert response.status_code == 200
    errors = all_errors(response)
    assert "would mount over each other" in errors
    assert "WANDB_API_KEY is set by both wandb and wandb-two" in errors
    assert "at most 4 GiB here" in errors
    # What alice's projects do not offer is not a choice; a project's data is refused in another project.
    assert "is not one of the available choices" in all_errors(_submit(alice, credentials=[vision_data["bobs"].pk]))
    assert "is not one of the available choices" in all_errors(_submit(alice, data_sources=[
        vision_data["corpus"].pk]))
    assert "Not a data source of Vision: corpus" in all_errors(_submit(client_for("deptadmin"), data_sources=[
        vision_data["corpus"].pk]))
    assert not Workload.objects.exists()


def test_the_form_attaches_what_was_picked(client_for, vision_data):
    response = _submit(client_for("alice"), memory_gib="16", shm_gib="4", data_sources=[vision_data["imagenet"].pk],
                       credentials=[vision_data["wandb"].pk])
    assert response.status_code == 302
    workload = Workload.objects.get()
    assert workload.shm_gib == Decimal("4") and list(workload.data_sources.all()) == [vision_data["imagenet"]]
    assert list(workload.credentials.all()) == [vision_data["wandb"]]
    again = client_for("alice").get(reverse("workloads:submit", args=["training"]) + f"?from={workload.pk}")
    assert _checked(again.content.decode(), "data_sources", vision_data["imagenet"].pk)
    assert not _checked(again.content.decode(), "data_sources", vision_data["nested"].pk)


def _checked(page: str, name: str, pk: int) -> bool:
    tag = next(part for part in page.split("<input")[1:] if f'name="{name}"' in part and f'value="{pk}"' in part)
    return "checked" in tag.split(">")[0]


def _api_body(**changes):
    data = {"project": "vision", "kind": "training", "name": "run", "image": "pytorch/pytorch:2.4.0",
            "node_pool": "h100", "gpus": 1, "memory": "16Gi", "labels": {"model": "m", "data_class": "public"}}
    data.update(changes)
    return data


def test_the_api_takes_names_with_the_forms_checks(client_for, vision_data):
    alice = client_for("alice")
    refused = call(alice, "POST", "workloads/", _api_body(shm="32Gi", data_sources=["imagenet", "nested", "nope"],
                                                          credentials=["hf"]))
    assert refused.status_code == 400
    errors = refused.json()
    assert any("No data source called 'nope' in vision" in message for message in errors["data_sources"])
    assert any("No credential of yours called 'hf'" in message for message in errors["credentials"])
    assert any("at most 16" in message for message in errors["shm"])
    # Names resolved: collisions are found with the other checks in one answer.
    collide = call(alice, "POST", "workloads/", _api_body(data_sources=["imagenet", "nested"], gpus=999))
    assert collide.status_code == 400
    assert "data_sources" in collide.json() and "gpus" in collide.json()
    assert not Workload.objects.exists()
    good = call(alice, "POST", "workloads/", _api_body(shm="2Gi", data_sources=["imagenet"], credentials=["wandb"]))
    assert good.status_code == 201, good.json()
    shown = good.json()
    assert (shown["shm"], shown["data_sources"], shown["credentials"]) == ("2.00", ["imagenet"], ["wandb"])
    again = call(alice, "POST", f"workloads/{shown['id']}/resubmit/", {})  # the attachments come along
    assert again.status_code == 201, again.json()
    assert (again.json()["shm"], again.json()["data_sources"], again.json()["credentials"]) == (
        "2.00", ["imagenet"], ["wandb"])
    changed = call(alice, "POST", f"workloads/{shown['id']}/resubmit/", {"data_sources": [], "shm": None})
    assert changed.status_code == 201, changed.json()
    assert (changed.json()["shm"], changed.json()["data_sources"], changed.json()["credentials"]) == (
        None, [], ["wandb"])


def test_templates_name_data_sources_and_credentials(client_for, vision_data):
    admin = client_for("admin")
    bad = admin.post(reverse("workloads:template_create"), {
        "name": "t", "kind": "training", "values": json.dumps({"data_sources": ["Bad Name"], "credentials": "wandb",
                                                               "shm_gib": "9", "memory_gib": "8"})})
    assert bad.status_code == 200
    text = all_errors(bad)
    assert "data_sources:" in text and "credentials: give a list" in text and "shm_gib:" in text
    good = admin.post(reverse("workloads:template_create"), {
        "name": "t", "kind": "training", "values": json.dumps({"data_sources": ["imagenet"],
                                                               "credentials": ["wandb"], "shm_gib": "2"})})
    assert good.status_code == 302
    from apps.workloads.models import WorkloadTemplate

    template = WorkloadTemplate.objects.get()
    page = client_for("alice").get(reverse("workloads:submit", args=["training"]) +
                                   f"?template={template.pk}&project=vision").content.decode()
    assert _checked(page, "data_sources", vision_data["imagenet"].pk)
    assert _checked(page, "credentials", vision_data["wandb"].pk)
    assert not _checked(page, "credentials", vision_data["wandb2"].pk)
