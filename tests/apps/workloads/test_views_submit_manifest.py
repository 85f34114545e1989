"""The manifest page: who may use it (404 for a project one may not see, 403 for one seen but not submitted to), the
examples it starts from, its Check (the dry run: every refusal at once, each at its line, nothing recorded) and its
Submit (the API's service: one row, history, outbox intent and audit, once per form; refused, a 400 with every error
and the text as typed)."""

from __future__ import annotations

import html
import re
import secrets
from typing import Any

import pytest
import yaml
from django.test import Client
from django.urls import reverse

from apps.accounts.models import Role, RoleBinding
from apps.core.models import AuditEvent, Intent
from apps.org.models import NodePool, PriorityClass, Project, Quota
from apps.workloads.manifests import EXAMPLE_KINDS
from apps.workloads.models import Kind, Origin, Status, Workload, WorkloadEvent
from tests.access_matrix import USERS, row
from tests.apps.workloads.helpers import overridden

URL = reverse("workloads:submit_manifest")
HTMX = {"HTTP_HX_REQUEST": "true"}
GPU = "nvidia.com/gpu"


def job_text(*, gpus: int = 1, name: str = "my-job", **container: Any) -> str:
    obj = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": {
        "parallelism": 2, "completions": 2, "template": {"spec": {"restartPolicy": "Never", "containers": [{
            "name": "main", "image": "pytorch/pytorch:2.4.0", "command": ["sleep", "60"],
            "resources": {"requests": {"cpu": "1", "memory": "1Gi", GPU: gpus}, "limits": {GPU: gpus}},
            **container}]}}}}
    return yaml.safe_dump(obj, sort_keys=False)


BAD_JOB = """apiVersion: batch/v1
kind: Job
metadata:
  name: my-job
  namespace: proj-nlp
spec:
  template:
    spec:
      hostNetwork: true
      restartPolicy: Never
      containers:
      - name: main
        imagePullPolicy: Always
        colour: blue
        resources:
          requests:
            nvidia.com/gpu: 1
          limits:
            nvidia.com/gpu: 2
"""


def payload(*, project: str = "vision", pool: str = "h100", manifest: str | None = None,
            **overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "submission_token": secrets.token_urlsafe(24), "project": Project.objects.get(slug=project).pk,
        "node_pool": NodePool.objects.get(slug=pool).pk, "manifest": job_text() if manifest is None else manifest,
        "priority_class": "", "preemptible": "on", "max_runtime_minutes": "", "model_label": "resnet50",
        "data_class": "public",
    }
    return overridden(data, overrides)


def nothing_recorded() -> None:
    assert not Workload.objects.exists()
    assert not WorkloadEvent.objects.exists()
    assert not Intent.objects.filter(kind="workload.submit").exists()
    assert not AuditEvent.objects.filter(action="workload.submit").exists()


def errors_by_line(content: str) -> dict[str, int | None]:
    """The manifest's errors on the page: "<path>: <message>" -> its line (None when it has none)."""
    found = {}
    block = re.search(r'<ol class="errorlist manifest-errors".*?</ol>', content, re.S)
    for item in re.findall(r"<li(?: data-line=\"(\d+)\")?>(.*?)</li>", block.group(0) if block else "", re.S):
        line, text = item
        text = html.unescape(re.sub(r"<[^>]+>", "", text))
        text = re.sub(r"^line \d+ ", "", text)
        found[text] = int(line) if line else None
    return found


def textarea(content: str) -> str:
    match = re.search(r'<textarea name="manifest"[^>]*>\n?(.*?)</textarea>', content, re.S)
    assert match, "no manifest editor on the page"
    return html.unescape(match.group(1))


# --- access -------------------------------------------------------------------------------------------------------


SUBMIT_VISION_GET = row(200, 200, 200, 200, 404, 404, 403)
SUBMIT_VISION_POST = row(302, 302, 302, 302, 404, 404, 403)


@pytest.mark.parametrize("username", USERS)
def test_only_those_who_may_submit_to_the_project_use_the_page(client_for, username):
    client = client_for(username)
    assert client.get(URL, {"project": "vision"}).status_code == SUBMIT_VISION_GET[username]
    assert client.get(URL).status_code == (403 if username == "viewer" else 200)
    response = client.post(URL, payload())
    assert response.status_code == SUBMIT_VISION_POST[username]
    assert Workload.objects.count() == (1 if response.status_code == 302 else 0)


def test_a_project_seen_but_not_submitted_to_is_403_and_not_offered(client_for, demo):
    RoleBinding.objects.create(user=demo["bob"], role=Role.VIEWER, project=Project.objects.get(slug="vision"),
                               scope="project")
    client = client_for("bob")
    assert client.get(URL, {"project": "vision"}).status_code == 403
    assert client.post(URL, payload()).status_code == 403
    assert client.post(URL, {**payload(), "_check": "1"}, **HTMX).status_code == 403
    options = re.findall(r'<option value="(\d+)"', re.search(
        r'<select name="project".*?</select>', client.get(URL).content.decode(), re.S).group(0))
    assert options == [str(Project.objects.get(slug="nlp").pk)]
    nothing_recorded()


def test_anonymous_users_are_sent_to_login_and_csrf_is_enforced(demo):
    response = Client().get(URL)
    assert response.status_code == 302 and response["Location"].startswith(reverse("accounts:login"))
    client = Client(enforce_csrf_checks=True)
    client.force_login(demo["alice"])
    assert client.post(URL, payload()).status_code == 403
    assert client.post(URL, {**payload(), "_check": "1"}, **HTMX).status_code == 403
    assert 'name="csrfmiddlewaretoken"' in client.get(URL).content.decode()
    nothing_recorded()


def test_the_page_is_linked_from_the_submit_area_and_the_projects_queue(client_for):
    client = client_for("alice")
    assert f'href="{URL}' in client.get(reverse("workloads:submit", args=["training"])).content.decode()
    assert f'href="{URL}' in client.get(reverse("workloads:list")).content.decode()
    queue = client.get(reverse("workloads:project_queue", args=["vision"])).content.decode()
    assert f'href="{URL}?project=vision"' in queue
    # Bob sees NLP's queue only; the viewer may submit nowhere, so no link on a queue she sees.
    assert f'href="{URL}' not in client_for("viewer").get(
        reverse("workloads:project_queue", args=["vision"])).content.decode()


# --- examples -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", EXAMPLE_KINDS)
def test_each_example_fills_the_editor_for_the_chosen_pool_and_checks_clean(client_for, kind):
    client = client_for("alice")
    mig = NodePool.objects.get(slug="a100-mig-3g40gb")
    response = client.get(URL, {"example": kind, "project": "vision", "node_pool": mig.pk}, **HTMX)
    assert response.status_code == 200
    text = textarea(response.content.decode())
    assert f"kind: {kind}\n" in text and f"{mig.gpu_resource}: 1" in text and GPU + ":" not in text
    assert "<html" not in response.content.decode()  # the editor only, swapped in place
    check = client.post(URL, {**payload(pool="a100-mig-3g40gb", manifest=text), "_check": "1"}, **HTMX)
    assert 'id="manifest-accepted"' in check.content.decode(), errors_by_line(check.content.decode())
    nothing_recorded()


def test_without_htmx_an_example_is_the_whole_page_and_an_unknown_one_is_404(client_for):
    client = client_for("alice")
    page = client.get(URL, {"example": "JobSet"}).content.decode()
    assert "<html" in page and "kind: JobSet" in textarea(page)
    assert client.get(URL, {"example": "Deployment"}).status_code == 404


# --- check (the dry run) ------------------------------------------------------------------------------------------


def test_check_shows_every_error_at_once_at_its_line_and_records_nothing(client_for):
    client = client_for("alice")
    response = client.post(URL, {**payload(manifest=BAD_JOB, model_label=""), "_check": "1"}, **HTMX)
    assert response.status_code == 200
    content = response.content.decode()
    assert "<textarea" not in content  # what the user typed is never replaced by a check
    found = errors_by_line(content)
    lines = BAD_JOB.splitlines()

    def line_of(path_start: str) -> int | None:
        return next(line for text, line in found.items() if text.startswith(path_start))

    assert "namespace: proj-nlp" in lines[line_of("metadata.namespace") - 1]
    assert "hostNetwork" in lines[line_of("spec.template.spec.hostNetwork") - 1]
    assert "colour" in lines[line_of("spec.template.spec.containers[0].colour") - 1]
    # A field that is missing points at the nearest one there: the container.
    assert "- name: main" in lines[line_of("spec.template.spec.containers[0].image") - 1]
    # A key with dots in it (the GPU resource) is one step of the path.
    assert "nvidia.com/gpu: 1" in lines[line_of(f"spec.template.spec.containers[0].resources.requests.{GPU}") - 1]
    assert len(found) >= 5
    # The other fields' errors come in the same answer, out of band.
    assert re.search(r'id="errors-model_label"[^>]*hx-swap-oob="true".*?This field is required', content, re.S)
    nothing_recorded()


def test_a_text_that_is_no_yaml_points_at_the_parsers_line(client_for):
    text = "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: [unclosed\n"
    response = client_for("alice").post(URL, {**payload(manifest=text), "_check": "1"}, **HTMX)
    found = errors_by_line(response.content.decode())
    assert len(found) == 1 and next(iter(found.values())) in (4, 5), found
    nothing_recorded()


def test_a_clean_check_says_what_would_run_and_records_nothing(client_for):
    response = client_for("alice").post(URL, {**payload(preemptible=None), "_check": "1"}, **HTMX)
    content = html.unescape(re.sub(r"\s+", " ", response.content.decode()))
    assert "would accept this" in content and "my-job" in content and "guaranteed-h100" in content
    assert "2 pods holding 2 H100 80GB units" in content and "Nothing was submitted" in content
    nothing_recorded()


def test_check_without_htmx_renders_the_page_with_the_text_preserved(client_for):
    response = client_for("alice").post(URL, {**payload(manifest=BAD_JOB), "_check": "1"})
    assert response.status_code == 200
    assert textarea(response.content.decode()) == BAD_JOB
    assert errors_by_line(response.content.decode())
    nothing_recorded()


def test_quota_refusals_land_on_their_fields(client_for):
    # Vision's deserved quota on h100 is 4: non-preemptible work of 2 pods x 3 GPUs does not fit it.
    response = client_for("alice").post(URL, {**payload(manifest=job_text(gpus=3), preemptible=None),
                                              "_check": "1"}, **HTMX)
    content = html.unescape(response.content.decode())
    assert re.search(r'id="errors-preemptible".*?Non-preemptible work must fit', content, re.S)
    nothing_recorded()


# --- submit -------------------------------------------------------------------------------------------------------


def test_submit_records_it_as_the_api_does_and_redirects_to_its_page(client_for, demo,
                                                                      django_capture_on_commit_callbacks):
    client = client_for("alice")
    data = payload(priority_class=PriorityClass.objects.get(name="build").pk, preemptible=None,
                   max_runtime_minutes="90")
    with django_capture_on_commit_callbacks() as callbacks:
        response = client.post(URL, data)
    workload = Workload.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse("workloads:detail", args=[workload.pk])
    assert len(callbacks) == 1  # the submit task, after commit
    assert (workload.kind, workload.origin, workload.name, workload.owner) == (
        Kind.JOB, Origin.PORTAL, "my-job", demo["alice"])
    assert workload.status == Status.SUBMITTING and workload.gpu_units == 2 and not workload.preemptible
    assert workload.priority_class.name == "build" and workload.max_runtime_seconds == 5400
    assert workload.manifest["metadata"]["name"] == f"wl-{workload.pk}"
    assert workload.manifest["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "guaranteed-h100"
    assert Intent.objects.filter(kind="workload.submit", target_id=workload.pk).count() == 1
    assert AuditEvent.objects.get(action="workload.submit").after["manifest"] is True
    assert "Submitted my-job" in client.get(response["Location"]).content.decode()
    # The same form posted again (a double click, the back button) leads to the same workload, even when it would
    # now be refused (here: the quota it was placed on is gone).
    Quota.objects.filter(project__slug="vision", node_pool__slug="h100").delete()
    again = client.post(URL, data)
    assert again["Location"] == response["Location"] and Workload.objects.count() == 1
    assert Intent.objects.filter(kind="workload.submit").count() == 1


def test_a_refused_submit_is_a_400_with_every_error_and_the_text_as_typed(client_for):
    text = BAD_JOB.replace("\n", "\r\n") + "   \r\n"  # a browser's line ends, and trailing space, kept as typed
    response = client_for("alice").post(URL, payload(manifest=text, data_class=""))
    assert response.status_code == 400
    content = response.content.decode()
    assert textarea(content) == text
    assert "Nothing was submitted" in content
    assert len(errors_by_line(content)) >= 5
    assert re.search(r'id="id_data_class_errors".*?This field is required', content, re.S)
    nothing_recorded()


def test_a_post_without_its_submission_token_submits_nothing(client_for):
    response = client_for("alice").post(URL, payload(submission_token=None))
    assert response.status_code == 400 and "no valid submission token" in response.content.decode()
    nothing_recorded()


@pytest.mark.parametrize(("manifest", "expected"), [
    ("", "This field is required"),
    ("kind: Job\x00", "Null characters are not allowed"),
    ("a: 1\n---\nb: 2\n", "several YAML documents"),
    ("a: &x 1\nb: *x\n", "anchors and aliases"),
    ("- just\n- a list\n", "must hold one object"),
    ("x" * (1024 * 1024 + 1), "at most 1048576 characters"),
    ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n", "not a kind the portal submits"),
], ids=["empty", "nul", "two-documents", "alias", "list", "too-long", "deployment"])
def test_bad_text_is_a_4xx_never_a_500(client_for, manifest, expected):
    client = client_for("alice")
    for extra, headers in (({}, {}), ({"_check": "1"}, HTMX)):
        response = client.post(URL, {**payload(manifest=manifest), **extra}, **headers)
        assert response.status_code in (200, 400) and (extra or response.status_code == 400)
        assert expected in html.unescape(response.content.decode()), expected
    nothing_recorded()


def test_a_garbled_project_or_pool_is_a_4xx(client_for):
    client = client_for("alice")
    assert client.post(URL, payload(project="vision") | {"project": "not-a-project"}).status_code == 404
    assert client.post(URL, payload() | {"node_pool": "999999"}).status_code == 400
    assert client.post(URL, payload() | {"node_pool": "٣"}).status_code == 400
    assert client.get(URL, {"project": "\x00"}).status_code == 404
    nothing_recorded()


# --- submit again -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", EXAMPLE_KINDS)
def test_submit_again_prefills_the_manifest_as_given_and_how_it_ran(client_for, kind):
    client = client_for("alice")
    mig = NodePool.objects.get(slug="a100-mig-3g40gb")
    text = textarea(client.get(URL, {"example": kind, "project": "vision", "node_pool": mig.pk}, **HTMX)
                    .content.decode())
    given = yaml.safe_load(text)
    # The submitter's own label and annotation stay; what the portal adds (name, namespace, labels, suspend) goes.
    given["metadata"]["labels"] = {**(given["metadata"].get("labels") or {}), "team": "vision"}
    given["metadata"]["annotations"] = {"note": "sweep 3"}
    build = PriorityClass.objects.get(name="build")
    response = client.post(URL, payload(pool="a100-mig-3g40gb", manifest=yaml.safe_dump(given),
                                        priority_class=build.pk, preemptible=None, max_runtime_minutes="90",
                                        model_label="bert", data_class="internal"))
    assert response.status_code == 302, errors_by_line(response.content.decode())
    first = Workload.objects.get()
    detail = client.get(reverse("workloads:detail", args=[first.pk])).content.decode()
    assert f'href="{URL}?from={first.pk}">Submit again</a>' in detail
    # The list links every row by its kind: the manifest kinds' link leads here too.
    assert client.get(reverse("workloads:submit", args=[kind.lower()]), {"from": first.pk})["Location"] == (
        f"{URL}?from={first.pk}")

    page = client.get(URL, {"from": first.pk})
    assert page.status_code == 200
    content = page.content.decode()
    assert yaml.safe_load(textarea(content)) == given
    assert textarea(content).startswith(f"apiVersion: {given['apiVersion']}\nkind: {kind}\nmetadata:")
    assert "Submitting again from" in content
    assert re.search(rf'<option value="{mig.pk}" selected>', content)
    assert re.search(rf'<option value="{build.pk}" selected>', content)
    assert not re.search(r'<input type="checkbox" name="preemptible"[^>]*checked', content)
    for name, value in (("max_runtime_minutes", "90"), ("model_label", "bert"), ("data_class", "internal")):
        assert re.search(rf'<input[^>]*name="{name}"[^>]*value="{value}"', content), name
    assert f'<input type="hidden" name="resubmitted_from" value="{first.pk}">' in content
    # Submitted as prefilled: a second workload like the first, which it records as its source.
    again = client.post(URL, payload(pool="a100-mig-3g40gb", manifest=textarea(content), priority_class=build.pk,
                                     preemptible=None, max_runtime_minutes="90", model_label="bert",
                                     data_class="internal", resubmitted_from=str(first.pk)))
    assert again.status_code == 302, errors_by_line(again.content.decode())
    second = Workload.objects.exclude(pk=first.pk).get()
    assert second.resubmitted_from == first
    assert AuditEvent.objects.filter(action="workload.resubmit", object_id=str(second.pk)).exists()
    assert (second.kind, second.name, second.pod_sets, second.priority_class, second.preemptible) == (
        first.kind, first.name, first.pod_sets, first.priority_class, first.preemptible)
    assert second.manifest["metadata"]["name"] == f"wl-{second.pk}"


def test_submit_again_of_a_form_workload_or_outside_work_is_not_the_manifest_pages(client_for, make_workload,
                                                                                     make_outside):
    client = client_for("alice")
    trained = make_workload()
    assert client.get(URL, {"from": trained.pk})["Location"] == (
        f"{reverse('workloads:submit', args=['training'])}?from={trained.pk}")
    assert client.get(URL, {"from": make_outside().pk}).status_code == 400
    assert client.get(URL, {"from": 10**9}).status_code == 404
    carols = make_workload("carol", project="forecasting")
    assert client.get(URL, {"from": carols.pk}).status_code == 404  # one alice may not see
