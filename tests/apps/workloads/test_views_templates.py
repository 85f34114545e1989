"""Admin-authored workload templates: create, edit, delete; values may only name fields of the kind's form and must
be values that form accepts."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from apps.core.models import AuditEvent
from apps.workloads import services
from apps.workloads.models import Kind, WorkloadTemplate

from .helpers import field_errors

NEW = reverse("workloads:template_create")


def post(client, url=NEW, **fields):
    data = {"name": "Fine-tune", "description": "", "kind": "training",
            "values": json.dumps({"image": "pytorch/pytorch:2.4.0", "gpus": 2, "node_pool": "h100"})}
    data.update({key: json.dumps(value) if key == "values" and not isinstance(value, str) else value
                 for key, value in fields.items()})
    return client.post(url, data)


def test_admin_creates_a_template_with_a_message_and_an_audit_row(page_client):
    client = page_client("admin")
    response = post(client)
    assert response.status_code == 302 and response["Location"] == reverse("workloads:templates")
    template = WorkloadTemplate.objects.get()
    assert template.values == {"image": "pytorch/pytorch:2.4.0", "gpus": 2, "node_pool": "h100"}
    assert "Template created." in client.get(response["Location"]).content.decode()
    assert AuditEvent.objects.filter(action="workload_template.create", object_id=str(template.pk)).exists()


@pytest.mark.parametrize(("case", "kind", "values", "message"), [
    ("unknown field", "training", {"gpu": 2}, "Not a field of the training form: gpu"),
    ("field of another kind", "notebook", {"pods": 2}, "Not a field of the notebook form: pods"),
    ("project is the submitter's", "training", {"project": "vision"}, "Not a field of the training form: project"),
    ("not an object", "training", "[1, 2]", "Write a JSON object"),
    ("not JSON", "training", "{gpus: 2}", "Not valid JSON"),
    ("bad number", "training", {"gpus": "many"}, "gpus: Enter a whole number."),
    ("absurd size", "training", {"gpus": 1000}, "gpus: At most 64"),
    ("unknown pool", "training", {"node_pool": "b300"}, "node_pool: no node pool is called 'b300'"),
    ("unknown priority class", "batch", {"priority_class": "urgent"}, "priority_class: no priority class"),
    ("bad env line", "training", {"env": "NOEQUALS"}, "env: Line 1: write NAME=value"),
    # Values the submission itself refuses (validate_shape), not only the form field.
    ("bad image", "training", {"image": "BAD IMAGE"}, "image: 'BAD IMAGE' is not a valid image reference"),
    ("bad name", "batch", {"name": "Not_A_Label"}, "name:"),
    ("reserved env name", "training", {"env": ["PORTAL_X=1"]}, "env: Names starting with PORTAL_"),
    ("bad audit label", "notebook", {"model_label": "has spaces"}, "model_label:"),
    ("parallelism above completions", "batch", {"completions": 2, "parallelism": 4},
     "parallelism: Parallelism cannot exceed the number of completions."),
    ("null value", "training", {"gpus": None}, "gpus: This field is required."),
    ("NUL in a value", "training", {"image": "busybox\u0000"}, "NUL character"),
    ("nested too deeply", "training", "[" * 100_000 + "]" * 100_000, "nested too deeply"),
])
def test_template_values_are_checked_against_the_kinds_form(page_client, case, kind, values, message):
    response = post(page_client("admin"), kind=kind, values=values if isinstance(values, str) else json.dumps(values))
    assert response.status_code == 200
    assert message in field_errors(response, "values"), case
    assert WorkloadTemplate.objects.count() == 0


def test_admin_edits_and_deletes_a_template(page_client, users):
    template = services.workload_template_create(actor=users["admin"], name="nb", kind=Kind.NOTEBOOK,
                                                 values={"gpus": 1})
    client = page_client("admin")
    edit_url = reverse("workloads:template_edit", args=[template.pk])
    assert '&quot;gpus&quot;: 1' in client.get(edit_url).content.decode()
    response = post(client, url=edit_url, name="nb", kind="notebook", values={"gpus": 2, "notebook_port": 9999},
                    version=template.version)
    assert response.status_code == 302
    template.refresh_from_db()
    assert template.values == {"gpus": 2, "notebook_port": 9999}
    response = client.post(reverse("workloads:template_delete", args=[template.pk]))
    assert response.status_code == 302 and not WorkloadTemplate.objects.exists()
    actions = set(AuditEvent.objects.filter(object_type="workloadtemplate").values_list("action", flat=True))
    assert actions == {"workload_template.create", "workload_template.update", "workload_template.delete"}


def test_template_names_are_unique(page_client, users):
    services.workload_template_create(actor=users["admin"], name="Fine-tune", kind=Kind.TRAINING,
                                      values={"gpus": 1})
    response = post(page_client("admin"))
    assert response.status_code == 200 and "already exists" in field_errors(response, "name")


def test_the_template_list_offers_to_try_each_template(page_client, users):
    template = services.workload_template_create(actor=users["admin"], name="nb", kind=Kind.NOTEBOOK,
                                                 values={"gpus": 1})
    content = page_client("admin").get(reverse("workloads:templates")).content.decode()
    assert f"/workloads/submit/notebook/?template={template.pk}" in content


def test_services_refuse_non_admins(users):
    from django.core.exceptions import PermissionDenied

    with pytest.raises(PermissionDenied):
        services.workload_template_create(actor=users["lead"], name="x", kind=Kind.TRAINING, values={})


def test_a_stale_template_save_is_refused_saying_what_changed(page_client, users):
    template = services.workload_template_create(actor=users["admin"], name="nb", kind=Kind.NOTEBOOK,
                                                 values={"gpus": 1})
    client = page_client("admin")
    edit_url = reverse("workloads:template_edit", args=[template.pk])
    read = int(client.get(edit_url).context["form"]["version"].value())
    services.workload_template_update(actor=users["admin"], template=template, description="theirs")
    audit_rows = AuditEvent.objects.count()
    response = post(client, url=edit_url, name="nb", kind="notebook", values={"gpus": 4}, version=read)
    assert response.status_code == 200
    message = " ".join(response.context["form"].non_field_errors())
    assert "Workload template nb was changed by admin since you opened it" in message and "description" in message
    template.refresh_from_db()
    assert (template.values, template.description, template.version) == ({"gpus": 1}, "theirs", read + 1)
    assert AuditEvent.objects.count() == audit_rows
    fresh = post(client, url=edit_url, name="nb", kind="notebook", values={"gpus": 4}, version=read + 1)
    assert fresh.status_code == 302
    template.refresh_from_db()
    assert (template.values, template.version) == ({"gpus": 4}, read + 2)


def test_a_template_save_without_its_version_is_refused(page_client, users):
    template = services.workload_template_create(actor=users["admin"], name="nb", kind=Kind.NOTEBOOK,
                                                 values={"gpus": 1})
    response = post(page_client("admin"), url=reverse("workloads:template_edit", args=[template.pk]), name="nb",
                    kind="notebook", values={"gpus": 4})
    assert response.status_code == 200 and "does not say which version" in response.content.decode()
    template.refresh_from_db()
    assert template.values == {"gpus": 1}


@pytest.mark.parametrize("username", ["alice", "lead", "viewer", "deptadmin"])
def test_everyone_reads_the_templates_page_without_the_admins_buttons(page_client, users, username):
    """Everyone who signs in reads the templates (as the API and the submit form's "Start from template" let them);
    only admins see the way to create, edit or delete one."""
    template = services.workload_template_create(actor=users["admin"], name="bert-finetune", kind=Kind.TRAINING,
                                                 values={"gpus": 2})
    response = page_client(username).get(reverse("workloads:templates"))
    assert response.status_code == 200
    content = response.content.decode()
    assert "bert-finetune" in content
    # who may submit is offered to start from it; a viewer reads it only
    assert (f"/workloads/submit/training/?template={template.pk}" in content) == (username != "viewer")
    for admin_only in (NEW, reverse("workloads:template_edit", args=[template.pk]),
                       reverse("workloads:template_delete", args=[template.pk])):
        assert admin_only not in content
    assert 'href="' + reverse("workloads:templates") + '"' in content  # in the menu
    assert page_client(username).get(NEW).status_code == 403
    assert post(page_client(username)).status_code == 403 and WorkloadTemplate.objects.count() == 1


def test_the_admins_template_list_offers_to_edit_and_delete(page_client, users):
    template = services.workload_template_create(actor=users["admin"], name="nb", kind=Kind.NOTEBOOK,
                                                 values={"gpus": 1})
    content = page_client("admin").get(reverse("workloads:templates")).content.decode()
    assert NEW in content and reverse("workloads:template_edit", args=[template.pk]) in content


def test_the_template_form_reports_every_error_at_once(page_client, users):
    """A duplicate name, an unknown field and two bad values are all reported by one save, not one per attempt."""
    services.workload_template_create(actor=users["admin"], name="Fine-tune", kind=Kind.TRAINING, values={"gpus": 1})
    response = post(page_client("admin"), values={"gpu": 2, "gpus": "many", "node_pool": "b300",
                                                  "image": "BAD IMAGE"})
    assert response.status_code == 200
    assert "already exists" in field_errors(response, "name")
    values_errors = field_errors(response, "values")
    for message in ("Not a field of the training form: gpu", "gpus: Enter a whole number.",
                    "node_pool: no node pool is called 'b300'", "image: 'BAD IMAGE' is not a valid image reference"):
        assert message in values_errors
    assert WorkloadTemplate.objects.count() == 1


@pytest.mark.parametrize(("values", "message"), [
    ({"framework": "ray", "ray_entrypoint": "python tune.py", "command": ["python", "tune.py"]},
     "command: A Ray job runs its entrypoint on the cluster"),
    ({"framework": "ray", "ray_entrypoint": "python tune.py", "ray_version": "latest"},
     "ray_version: 'latest' is not a Ray version"),
    ({"framework": "pytorch", "ray_entrypoint": "python tune.py"},
     "ray_entrypoint: Only Ray training has this"),
    ({"framework": "pytorch", "env": ["PET_NNODES=4"]}, "env: PET_NNODES: set by the portal"),
    ({"framework": "ray", "env": ["RAY_ADDRESS=x"]}, "env: RAY_ADDRESS: set by KubeRay"),
])
def test_a_templates_framework_is_held_to_the_frameworks_rules(page_client, values, message):
    response = post(page_client("admin"), values=values)
    assert response.status_code == 200 and message in field_errors(response, "values"), field_errors(
        response, "values")
    assert not WorkloadTemplate.objects.exists()


def test_a_ray_template_leaves_its_entrypoint_to_the_submitter_and_prefills_the_framework(page_client):
    client = page_client("admin")
    assert post(client, values={"framework": "ray", "image": "rayproject/ray:2.9.0-gpu"}).status_code == 302
    template = WorkloadTemplate.objects.get()
    html = page_client("alice").get(reverse("workloads:submit", args=["training"]),
                                    {"template": template.pk}).content.decode()
    assert '<option value="ray" selected>' in html


def test_save_as_template_keeps_the_framework_and_its_launch(page_client, make_workload):
    from django.utils import timezone

    from apps.cluster import services as mirror
    from apps.workloads.models import Framework

    mirror.watcher_served_kinds(kinds=["job", "jobset", "pod", "rayjob", "trainjob"], at=timezone.now(),
                                torch_runtime="torch-h100")
    ray = make_workload(framework=Framework.RAY, name="tune", pods=2, command=[], image="rayproject/ray:2.9.0-gpu",
                        ray_entrypoint="python tune.py --trials 8", ray_working_dir="/work", ray_version="2.9.0",
                        max_runtime_seconds=3600)
    admin = page_client("admin")
    detail = admin.get(reverse("workloads:detail", args=[ray.pk])).content.decode()
    assert f'href="{NEW}?from={ray.pk}">Save as template</a>' in detail
    alices = page_client("alice").get(reverse("workloads:detail", args=[ray.pk])).content.decode()
    assert "Save as template" not in alices
    page = admin.get(NEW, {"from": ray.pk})
    values = json.loads(page.context["form"].initial["values"])
    assert values == {"name": "tune", "image": "rayproject/ray:2.9.0-gpu", "framework": "ray", "ray_version": "2.9.0",
                      "ray_entrypoint": "python tune.py --trials 8", "ray_working_dir": "/work", "node_pool": "h100",
                      "gpus": 1, "cpu": 1, "memory_gib": 8, "pods": 2, "priority_class": ray.priority_class.name,
                      "preemptible": True, "max_runtime_minutes": 60, "model_label": "resnet",
                      "data_class": "public"}, values
    # Saved as it is prefilled, it offers the same framework and launch on the submit page.
    saved = post(admin, name="Ray tune", kind="training", values=values)
    assert saved.status_code == 302, field_errors(saved, "values")
    template = WorkloadTemplate.objects.get()
    html = page_client("alice").get(reverse("workloads:submit", args=["training"]),
                                    {"template": template.pk}).content.decode()
    assert '<option value="ray" selected>' in html and 'value="python tune.py --trials 8"' in html
    torch = make_workload(framework=Framework.PYTORCH, name="ddp", pods=2, command=["torchrun", "train.py"],
                          args=["--epochs", "3"])
    values = json.loads(admin.get(NEW, {"from": torch.pk}).context["form"].initial["values"])
    assert (values["framework"], values["command"], values["args"]) == ("pytorch", ["torchrun", "train.py"],
                                                                        ["--epochs", "3"])


def test_save_as_template_is_for_admins_and_form_submissions(page_client, make_workload, make_outside):
    run = make_workload()
    assert page_client("alice").get(NEW, {"from": run.pk}).status_code == 403
    assert page_client("admin").get(NEW, {"from": make_outside().pk}).status_code == 400
    assert page_client("admin").get(NEW, {"from": 10**9}).status_code == 404
    assert page_client("admin").get(NEW, {"from": "x"}).status_code == 404
