"""The training form's framework and the detail page of a training on one: the framework's own fields say whose they
are (static/js/framework-fields.js shows them only for it), without the script every field is there and the server
refuses what does not belong to the chosen framework, and the detail page names the framework and the object it runs
as."""

from __future__ import annotations

import re

from django.urls import reverse
from django.utils import timezone

from apps.cluster import services as mirror
from apps.workloads.models import Framework, Workload

from .helpers import field_errors, submit_payload


def input_tag(html: str, name: str) -> str:
    match = re.search(rf'<input[^>]*name="{name}"[^>]*>', html)
    assert match, f"no input {name}"
    return match.group(0)


def test_the_training_form_marks_each_framework_field_and_loads_its_script(page_client):
    html = page_client("alice").get(reverse("workloads:submit", args=["training"])).content.decode()
    assert '<select name="framework"' in html
    for name in ("ray_version", "ray_entrypoint", "ray_working_dir"):
        assert 'data-framework-only="ray"' in input_tag(html, name)
    for name in ("command", "args"):
        assert 'data-framework-not="ray"' in input_tag(html, name)
    assert 'data-framework-only' not in input_tag(html, "image")
    assert re.search(r'<script src="[^"]*js/framework-fields\.js" defer>', html)


def test_without_the_script_every_field_is_sent_and_the_misplaced_ones_are_refused(page_client):
    client = page_client("alice")
    response = client.post(reverse("workloads:submit", args=["training"]), submit_payload(
        "training", framework="pytorch", ray_entrypoint="python tune.py"))
    assert response.status_code == 200
    assert field_errors(response, "ray_entrypoint").strip() == ("Only Ray training has this; choose framework ray, "
                                                                "or leave it out.")
    response = client.post(reverse("workloads:submit", args=["training"]), submit_payload(
        "training", framework="ray", ray_entrypoint="python tune.py"))  # with the payload's command and arguments
    assert response.status_code == 200
    assert field_errors(response, "command").strip().startswith("A Ray job runs its entrypoint on the cluster")
    assert field_errors(response, "args").strip().startswith("A Ray job runs its entrypoint on the cluster")
    assert not Workload.objects.exists()


def test_the_detail_page_shows_the_framework_and_the_object_it_runs_as(page_client, make_workload):
    client = page_client("alice")
    mirror.watcher_served_kinds(kinds=["job", "jobset", "pod", "rayjob", "trainjob"], at=timezone.now(),
                                torch_runtime="torch-h100")
    on_trainer = make_workload(framework=Framework.PYTORCH, name="ddp", pods=2)
    html = client.get(reverse("workloads:detail", args=[on_trainer.pk])).content.decode()
    assert re.search(r"<dd data-framework>PyTorch</dd>", html)
    runs_as = re.search(r"<dd data-object>(.*?)</dd>", html, re.S).group(1)
    assert f"TrainJob <code>{on_trainer.job_name}</code>" in runs_as
    assert "trainer.kubeflow.org/v1alpha1" in runs_as and "<code>torch-h100</code>" in runs_as
    assert "Indexed Job with a headless Service" not in html  # the portal's own wiring is not what it runs with

    mirror.watcher_served_kinds(kinds=["job", "jobset", "pod", "rayjob"], at=timezone.now())
    on_jobset = make_workload(framework=Framework.PYTORCH, name="ddp-jobset", pods=2)
    html = client.get(reverse("workloads:detail", args=[on_jobset.pk])).content.decode()
    runs_as = re.search(r"<dd data-object>(.*?)</dd>", html, re.S).group(1)
    assert f"JobSet <code>{on_jobset.job_name}</code>" in runs_as and "ClusterTrainingRuntime" not in runs_as

    on_ray = make_workload(framework=Framework.RAY, name="tune", command=[], ray_entrypoint="python tune.py")
    html = client.get(reverse("workloads:detail", args=[on_ray.pk])).content.decode()
    assert re.search(r"<dd data-framework>Ray</dd>", html)
    assert f"RayJob <code>{on_ray.job_name}</code>" in html
    assert re.search(r"<dd data-ray>entrypoint <code>python tune.py</code>, version 2\.41\.0</dd>", html)

    plain = make_workload(name="plain", pods=2)
    html = client.get(reverse("workloads:detail", args=[plain.pk])).content.decode()
    assert re.search(r"<dd data-framework>No framework \(an Indexed Job\)</dd>", html)
    assert "<dd data-object>" not in html and "Indexed Job with a headless Service" in html
