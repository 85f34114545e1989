"""The submit forms: every refusal through a POST lands next to its field with nothing saved and nothing enqueued;
the htmx branches (pool panel, live check); templates prefill; submit again records where it came from."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse
from django.utils import timezone

from apps.org import services as org
from apps.org.models import Department, NodePool, PriorityClass, Project
from apps.workloads import services
from apps.workloads.models import PORTAL_KIND_VALUES, Kind, Status, Workload
from tests.factories import NodePoolFactory

from .helpers import all_errors, field_errors, preemptible_checked, submit_payload

HTMX = {"HTTP_HX_REQUEST": "true"}


def url(kind: str = "training") -> str:
    return reverse("workloads:submit", args=[kind])


@pytest.fixture
def b200(users):
    """A pool no project has quota on."""
    return NodePoolFactory(slug="b200", name="B200")


# --- success ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", PORTAL_KIND_VALUES)
def test_every_kind_submits_and_redirects_to_its_detail_page(page_client, users, kind,
                                                             django_capture_on_commit_callbacks):
    client = page_client("alice")
    with django_capture_on_commit_callbacks() as callbacks:
        response = client.post(url(kind), submit_payload(kind))
    workload = Workload.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse("workloads:detail", args=[workload.pk])
    assert len(callbacks) == 1  # the submit task, after commit
    assert workload.kind == kind and workload.owner == users["alice"] and workload.status == Status.SUBMITTING
    page = client.get(response["Location"])
    assert f"Submitted my-{kind}" in page.content.decode()


# An inference service has a page of its own at submit/inference/ (tests/apps/workloads/test_views_inference.py).
@pytest.mark.parametrize("kind", sorted(set(Kind.values) - set(PORTAL_KIND_VALUES) - {Kind.INFERENCE}))
def test_the_clusters_kinds_have_no_submit_form(page_client, kind):
    """Work of the cluster's kinds is submitted outside the portal (kubectl, pipelines); the portal only mirrors it."""
    client = page_client("alice")
    assert client.get(url(kind)).status_code == 404
    assert client.post(url(kind), submit_payload("training")).status_code == 404
    assert not Workload.objects.exists()


def test_the_form_fields_reach_the_row(page_client):
    page_client("alice").post(url("training"), submit_payload(
        "training", command='python train.py --note "two words"', args="--lr 3e-4", env="A=1\nB=x=y\n\n",
        pods="2", gpus="2", max_runtime_minutes="90", preemptible=None, priority_class="build"))
    workload = Workload.objects.get()
    assert workload.command == ["python", "train.py", "--note", "two words"]
    assert workload.args == ["--lr", "3e-4"]
    assert workload.env == [{"name": "A", "value": "1"}, {"name": "B", "value": "x=y"}]
    assert (workload.pods, workload.gpus, workload.gpu_units) == (2, 2, 4)
    assert workload.max_runtime_seconds == 90 * 60
    assert workload.preemptible is False and workload.priority_class.name == "build"
    assert workload.queue_name == "guaranteed-h100"


def test_batch_keeps_completions_and_parallelism(page_client):
    page_client("alice").post(url("batch"), submit_payload("batch", completions="10", parallelism="3"))
    workload = Workload.objects.get()
    assert (workload.completions, workload.parallelism, workload.pods) == (10, 3, 1)


def test_notebook_form_has_its_own_fields(page_client):
    content = page_client("alice").get(url("notebook")).content.decode()
    assert 'name="notebook_idle_timeout_minutes"' in content and 'name="notebook_port"' in content
    assert 'name="pods"' not in content and 'name="command"' not in content
    page_client("alice").post(url("notebook"), submit_payload("notebook", notebook_idle_timeout_minutes="30"))
    workload = Workload.objects.get()
    assert (workload.notebook_idle_timeout_minutes, workload.notebook_port) == (30, 8888)


def test_unknown_kind_is_404(page_client):
    assert page_client("alice").get("/workloads/submit/serving/").status_code == 404


# --- refusals -----------------------------------------------------------------------------------------------------

REFUSALS = [
    # (case, kind, overrides, field, message)
    ("pool without quota", "training", {"node_pool": "b200"}, "node_pool", "Vision has no quota on B200"),
    ("more than the limit", "training", {"gpus": "3", "pods": "3"}, "gpus",
     "asks for 9 H100 80GB units but Vision may use at most 8 there"),
    ("non-preemptible beyond deserved", "training", {"gpus": "5", "preemptible": None}, "preemptible",
     "Non-preemptible work must fit in Vision's deserved quota on H100 80GB (4 units)"),
    ("more GPUs per pod than the pool has", "training", {"gpus": "17"}, "gpus", "has 16 units in all"),
    ("invalid image", "training", {"image": "Not An Image!"}, "image", "is not a valid image reference"),
    ("image with a bad tag", "notebook", {"image": "jupyter/base:bad tag"}, "image",
     "is not a valid image reference"),
    ("invalid name", "training", {"name": "My_Run"}, "name", "DNS-1123"),
    ("name too long for the model", "training", {"name": "a" * 50}, "name", "at most 40 characters"),
    ("invalid env name", "training", {"env": "1BAD=x"}, "env", "is not a valid environment variable name"),
    ("reserved env name", "batch", {"env": "PORTAL_ID=1"}, "env", "set by the portal"),
    ("duplicate env name", "training", {"env": "A=1\nA=2"}, "env", "A is set twice"),
    ("env name of the launcher wiring", "training", {"env": "WORLD_SIZE=1"}, "env",
     "WORLD_SIZE is set by the portal"),
    ("empty command", "training", {"command": '""'}, "command", "The command's first entry is the program to run"),
    ("zero CPU", "training", {"cpu": "0"}, "cpu", ""),
    ("negative zero CPU", "training", {"cpu": "-0"}, "cpu", ""),
    ("zero memory", "training", {"memory_gib": "0"}, "memory_gib", ""),
    ("env line without =", "training", {"env": "JUSTANAME"}, "env", "Line 1: write NAME=value"),
    ("invalid model label", "training", {"model_label": "not valid!"}, "model_label", ""),
    ("missing data class", "notebook", {"data_class": ""}, "data_class", "This field is required"),
    ("absurd GPUs", "training", {"gpus": "1000"}, "gpus", "At most 64 GPU units per pod"),
    ("absurd pods", "training", {"pods": "100000"}, "pods", "At most 512 pods"),
    ("absurd CPU", "notebook", {"cpu": "100000"}, "cpu", ""),
    ("absurd memory", "training", {"memory_gib": "99999"}, "memory_gib", "At most 4096 GiB per pod"),
    ("zero GPUs", "training", {"gpus": "0"}, "gpus", "Ask for at least 1 GPU, or for a fraction of one"),
    ("absurd runtime", "training", {"max_runtime_minutes": "10000000"}, "max_runtime_minutes", "At most 43200"),
    ("parallelism above completions", "batch", {"completions": "2", "parallelism": "3"}, "parallelism",
     "Parallelism cannot exceed the number of completions"),
    ("unbalanced quotes", "training", {"command": 'python -c "print(1)'}, "command", "check the quotes"),
    ("idle timeout too short", "notebook", {"notebook_idle_timeout_minutes": "1"}, "notebook_idle_timeout_minutes",
     "At least 5"),
    ("port out of range", "notebook", {"notebook_port": "70000"}, "notebook_port", "At most 65535"),
]


@pytest.mark.parametrize(("case", "kind", "overrides", "field", "message"), REFUSALS, ids=[r[0] for r in REFUSALS])
def test_refusals_show_next_to_their_field_and_save_nothing(page_client, b200, case, kind, overrides, field, message,
                                                            django_capture_on_commit_callbacks):
    if overrides.get("node_pool") == "b200":
        overrides = {**overrides, "node_pool": b200.pk}
    before = Workload.objects.count()
    with django_capture_on_commit_callbacks() as callbacks:
        response = page_client("alice").post(url(kind), submit_payload(kind, **overrides))
    assert response.status_code == 200
    errors = field_errors(response, field)
    assert errors, f"no error next to {field}: {all_errors(response)}"
    assert message in errors
    assert "Nothing was submitted" in response.content.decode()
    assert Workload.objects.count() == before
    assert callbacks == []


def test_a_project_named_in_the_post_that_the_user_may_not_submit_to_is_404(page_client):
    response = page_client("alice").post(url(), submit_payload(project="nlp"))
    assert response.status_code == 404 and Workload.objects.count() == 0


# --- htmx: pool panel and live check ------------------------------------------------------------------------------


def test_pool_panel_shows_what_the_project_has_on_the_pool(page_client):
    vision, h100 = Project.objects.get(slug="vision"), NodePool.objects.get(slug="h100")
    response = page_client("alice").get(url(), {"panel": "1", "project": vision.pk, "node_pool": h100.pk, "gpus": "2",
                                            "pods": "1"}, **HTMX)
    content = response.content.decode()
    assert response.status_code == 200 and "<html" not in content
    assert 'data-fact="deserved">4 units' in content
    assert 'data-fact="limit">8 units' in content
    assert "up to 4 more units" in content
    assert "nvidia.com/gpu" in content and "fits non-preemptible" in content
    assert "4 of 4 deserved units free" in content


def test_pool_panel_for_a_mig_pool_and_a_request_only_preemptible_work_can_have(page_client):
    vision, mig = Project.objects.get(slug="vision"), NodePool.objects.get(slug="a100-mig-3g40gb")
    content = page_client("alice").get(url(), {"panel": "1", "project": vision.pk, "node_pool": mig.pk, "gpus": "5"},
                                   **HTMX).content.decode()
    assert "nvidia.com/mig-3g.40gb" in content and "3/7 of a card" in content
    assert "preemptible only" in content


def test_pool_panel_counts_held_non_preemptible_units(page_client, make_workload):
    workload = make_workload("alice", gpus=3, preemptible=False, priority_class=PriorityClass.objects.get(
        name="build"))
    Workload.objects.filter(pk=workload.pk).update(status=Status.RUNNING)
    vision, h100 = Project.objects.get(slug="vision"), NodePool.objects.get(slug="h100")
    content = page_client("alice").get(url(), {"panel": "1", "project": vision.pk, "node_pool": h100.pk, "gpus": "2"},
                                   **HTMX).content.decode()
    assert "1 of 4 deserved units free" in content and "waits for running non-preemptible work" in content


def test_pool_panel_counts_shares_of_a_card_asked_for_and_held(page_client, users):
    """On a KAI pool that shares cards, a notebook asking for half a card asks for 0.5 units (not 0, and not nothing
    to say), and a running non-preemptible half card holds 0.5 of the deserved units: KAI packs another half beside
    it, so 1.5 of a deserved 2 are free and the half fits now."""
    rtx = org.node_pool_create(actor=users["admin"], slug="rtx", name="RTX", gpu_resource="nvidia.com/gpu",
                               capacity=16, scheduler="kai", gpu_fractions=True)
    vision = Project.objects.get(slug="vision")
    org.quota_set(actor=users["admin"], node_pool=rtx, department=vision.department, deserved=4, limit=None)
    org.quota_set(actor=users["admin"], node_pool=rtx, project=vision, deserved=2, limit=None)
    Workload.objects.create(project=vision, owner=users["alice"], kind=Kind.NOTEBOOK, name="held-half",
                            image="busybox", node_pool=rtx, gpus=0, gpu_fraction="0.5", preemptible=False,
                            status=Status.RUNNING)
    content = page_client("alice").get(url("notebook"), {
        "panel": "1", "project": vision.pk, "node_pool": rtx.pk, "gpus": "0", "gpu_fraction": "0.5"},
        **HTMX).content.decode()
    assert "This asks for <strong>0.5</strong> units" in content
    assert "1.5 of 2 deserved units free (0.5 held by running non-preemptible work)" in content
    assert "fits non-preemptible" in content and "waits for running non-preemptible work" not in content


def test_pool_panel_says_when_the_project_has_no_quota(page_client, b200):
    vision = Project.objects.get(slug="vision")
    content = page_client("alice").get(url(), {"panel": "1", "project": vision.pk, "node_pool": b200.pk},
                                   **HTMX).content.decode()
    assert 'data-fact="no-quota"' in content and "could never run" in content


def test_policy_panel_shows_each_limit_with_the_policy_it_comes_from_before_anyone_types(page_client, users):
    research, vision = Department.objects.get(slug="research"), Project.objects.get(slug="vision")
    org.policy_create(actor=users["admin"], max_runtime_seconds=7200, required_labels=["model"])
    org.policy_create(actor=users["admin"], department=research, max_gpus_per_workload=4,
                      allowed_images=["nvcr.io/*"])
    org.policy_create(actor=users["admin"], project=vision, max_gpus_per_workload=2, default_runtime_seconds=3600)
    content = page_client("alice").get(url(), {"project": vision.pk}).content.decode()
    panel = content[content.index('id="policy-panel"'):]
    assert "Policy for Vision" in panel

    def fact(name: str) -> str:
        return re.search(rf'data-policy="{name}">(.*?)</dd>', panel, re.S).group(1)

    assert fact("max_gpus_per_workload").startswith("2 GPU units") and "Vision project&#x27;s policy" in fact(
        "max_gpus_per_workload")
    assert "nvcr.io/*" in fact("allowed_images") and "Research department&#x27;s policy" in fact("allowed_images")
    assert fact("max_runtime_seconds").startswith("2 h") and "organisation&#x27;s policy" in fact(
        "max_runtime_seconds")
    assert fact("default_runtime_seconds").startswith("1 h") and "Vision" in fact("default_runtime_seconds")
    assert "model" in fact("required_labels") and "organisation" in fact("required_labels")
    assert fact("allowed_priority_classes").startswith("no limit") and "(" not in fact("allowed_priority_classes")


def test_policy_panel_follows_the_chosen_project_in_the_live_check(page_client, users):
    nlp = Project.objects.get(slug="nlp")
    org.policy_create(actor=users["admin"], project=nlp, max_notebook_idle_minutes=30)
    lead = page_client("deptadmin")
    before = lead.post(url("notebook"), {**submit_payload("notebook"), "_validate": "1"}, **HTMX)
    after = lead.post(url("notebook"), {**submit_payload("notebook", project="nlp"), "_validate": "1"}, **HTMX)
    assert 'id="policy-panel"' in before.content.decode() and "30 min" not in before.content.decode()
    content = after.content.decode()
    assert "Policy for NLP" in content and re.search(r'data-policy="max_notebook_idle_minutes">30 min', content)


def test_pool_panel_of_a_project_outside_scope_is_404(page_client):
    nlp, h100 = Project.objects.get(slug="nlp"), NodePool.objects.get(slug="h100")
    response = page_client("alice").get(url(), {"panel": "1", "project": nlp.pk, "node_pool": h100.pk}, **HTMX)
    assert response.status_code == 404


def test_the_full_page_shows_the_panel_for_the_initial_pool(page_client):
    content = page_client("alice").get(url()).content.decode()
    assert 'id="pool-panel"' in content and "Vision on" in content
    assert 'hx-post="/workloads/submit/training/"' in content and "_validate" in content


def test_live_check_returns_errors_and_saves_nothing(page_client, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:
        response = page_client("alice").post(url(), {**submit_payload(gpus="3", pods="3"), "_validate": "1"}, **HTMX)
    content = response.content.decode()
    assert response.status_code == 200 and "<html" not in content
    assert 'id="errors-gpus"' in content and 'name="gpus"' not in content  # errors swapped, inputs left alone
    assert "Vision may use at most 8 there" in field_errors(response, "gpus")
    assert 'id="pool-panel"' in content and 'hx-swap-oob="true"' in content and "over the limit" in content
    assert Workload.objects.count() == 0 and callbacks == []


def test_live_check_of_a_valid_form_saves_nothing_either(page_client, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:
        response = page_client("alice").post(url(), {**submit_payload(), "_validate": "1"}, **HTMX)
    assert "The cluster would accept this" in response.content.decode()
    assert all_errors(response) == ""
    assert Workload.objects.count() == 0 and callbacks == []


def test_live_check_of_a_half_filled_form_shows_quota_refusals_but_not_missing_fields(page_client):
    data = submit_payload(name="", image="", model_label="", data_class="", gpus="5", preemptible=None)
    response = page_client("alice").post(url(), {**data, "_validate": "1"}, **HTMX)
    assert field_errors(response, "name") == "" and field_errors(response, "image") == ""
    assert "Non-preemptible work must fit" in field_errors(response, "preemptible")
    assert Workload.objects.count() == 0


def test_live_check_shows_a_bad_value_the_user_typed(page_client):
    response = page_client("alice").post(url(), {**submit_payload(image="Bad Image"), "_validate": "1"}, **HTMX)
    assert "is not a valid image reference" in field_errors(response, "image")


@pytest.mark.parametrize(("priority_class", "checked"), [("build", False), ("inference", False), ("train", True),
                                                         ("interactive-preemptible", True)])
def test_choosing_a_priority_class_sets_the_preemptible_default(page_client, priority_class, checked):
    pc = PriorityClass.objects.get(name=priority_class)
    data = submit_payload(priority_class=priority_class, preemptible=None if checked else "on")
    response = page_client("alice").post(url(), {**data, "_validate": "1", "_changed": "priority_class"}, **HTMX)
    content = response.content.decode()
    assert preemptible_checked(content) is checked, pc


def test_other_changes_keep_the_users_preemptible_choice(page_client):
    data = submit_payload(priority_class="build", preemptible="on")
    content = page_client("alice").post(url(), {**data, "_validate": "1", "_changed": "gpus"}, **HTMX).content.decode()
    assert 'name="preemptible"' not in content  # the box the user set is not touched


def test_the_initial_preemptible_default_follows_the_projects_priority_class(page_client):
    serving = Project.objects.get(slug="serving")
    serving.default_priority_class = PriorityClass.objects.get(name="inference")
    serving.save()
    content = page_client("admin").get(url(), {"project": "serving"}).content.decode()
    assert preemptible_checked(content) is False


# --- templates and submit again -----------------------------------------------------------------------------------


@pytest.fixture
def template(users):
    return services.workload_template_create(
        actor=users["admin"], name="ResNet on MIG", kind=Kind.TRAINING, description="Small fine-tuning run",
        values={"image": "nvcr.io/nvidia/pytorch:24.05-py3", "command": ["python", "finetune.py"], "gpus": 2,
                "node_pool": "a100-mig-3g40gb", "priority_class": "build", "preemptible": False,
                "env": [{"name": "EPOCHS", "value": "3"}], "model_label": "resnet50"})


def test_a_template_prefills_the_form(page_client, template):
    response = page_client("alice").get(url(), {"template": template.pk})
    content = response.content.decode()
    assert response.status_code == 200
    assert 'value="nvcr.io/nvidia/pytorch:24.05-py3"' in content
    assert 'value="python finetune.py"' in content and "EPOCHS=3" in content
    mig = NodePool.objects.get(slug="a100-mig-3g40gb")
    assert f'<option value="{mig.pk}" selected>' in content
    assert "Prefilled from template" in content and "ResNet on MIG" in content
    assert preemptible_checked(content) is False


def test_the_template_picker_lists_the_kinds_templates(page_client, template):
    assert "ResNet on MIG" in page_client("alice").get(url("training")).content.decode()
    assert "ResNet on MIG" not in page_client("alice").get(url("notebook")).content.decode()


def test_a_template_of_another_kind_redirects_to_its_form(page_client, template):
    response = page_client("alice").get(url("notebook"), {"template": template.pk})
    assert response.status_code == 302 and response["Location"].startswith(url("training"))


def test_a_prefilled_template_submits(page_client, template):
    data = submit_payload(image="nvcr.io/nvidia/pytorch:24.05-py3", pool="a100-mig-3g40gb", gpus="2")
    assert page_client("alice").post(url(), data).status_code == 302


def test_submit_again_prefills_from_an_old_workload_and_records_where_it_came_from(page_client, make_workload):
    old = make_workload("alice", name="first-run", gpus=2, env=[{"name": "SEED", "value": "7"}],
                        args=["--lr", "0.1"])
    Workload.objects.filter(pk=old.pk).update(status=Status.FAILED)
    client = page_client("alice")
    page = client.get(url(), {"from": old.pk})
    content = page.content.decode()
    assert page.status_code == 200 and 'value="first-run"' in content and "SEED=7" in content
    assert f'name="resubmitted_from" value="{old.pk}"' in content and "Submitting again from" in content
    response = client.post(url(), {**submit_payload(name="first-run"), "resubmitted_from": old.pk})
    assert response.status_code == 302
    new = Workload.objects.exclude(pk=old.pk).get()
    assert new.resubmitted_from_id == old.pk
    assert f"#{old.pk} first-run" in client.get(response["Location"]).content.decode()


def test_submit_again_of_another_kind_redirects_to_its_form(page_client, make_workload):
    old = make_workload("alice", kind=Kind.NOTEBOOK, name="nb", image="jupyter/base-notebook:latest")
    response = page_client("alice").get(url("training"), {"from": old.pk})
    assert response.status_code == 302 and response["Location"].startswith(url("notebook"))


def test_a_lead_may_submit_again_from_a_workload_of_their_team(page_client, make_workload):
    old = make_workload("alice")
    page = page_client("lead").get(url(), {"from": old.pk})
    assert page.status_code == 200 and "Submitting again" in page.content.decode()


def test_submit_again_from_a_workload_the_user_cannot_see_is_404(page_client, make_workload):
    old = make_workload("alice")
    assert page_client("bob").get(url(), {"from": old.pk}).status_code == 404
    response = page_client("bob").post(url(), {**submit_payload(project="nlp"), "resubmitted_from": old.pk})
    assert response.status_code == 404 and Workload.objects.count() == 1


def test_submit_shows_every_error_at_once(page_client, django_capture_on_commit_callbacks):
    """A field's own error (a typo in the environment), the service's shape refusals (name, image) and its quota
    refusals (over the limit, non-preemptible beyond deserved) all come back in one answer."""
    data = submit_payload(name="My_Run", image="Bad Image", env="no equals sign", gpus="3", pods="3",
                          preemptible=None)
    with django_capture_on_commit_callbacks() as callbacks:
        response = page_client("alice").post(url(), data)
    assert response.status_code == 200
    assert "Line 1: write NAME=value" in field_errors(response, "env")
    assert "Kubernetes DNS-1123 label" in field_errors(response, "name")
    assert "is not a valid image reference" in field_errors(response, "image")
    assert "Vision may use at most 8 there" in field_errors(response, "gpus")
    assert "Non-preemptible work must fit in Vision's deserved quota" in field_errors(response, "preemptible")
    assert Workload.objects.count() == 0 and callbacks == []


def test_live_check_shows_every_error_at_once_too(page_client):
    data = submit_payload(image="Bad Image", gpus="lots", cpu="0", memory_gib="100000", pods="3")
    response = page_client("alice").post(url(), {**data, "_validate": "1"}, **HTMX)
    assert "Enter a whole number." in field_errors(response, "gpus")
    assert field_errors(response, "cpu") != ""
    assert "At most" in field_errors(response, "memory_gib")
    assert "is not a valid image reference" in field_errors(response, "image")
    assert Workload.objects.count() == 0


def test_a_failed_size_field_leaves_out_only_the_quota_checks_that_need_it(page_client, b200):
    """With the GPUs unreadable the units are unknown: no made-up "over the limit", but the pool is still checked."""
    response = page_client("alice").post(url(), submit_payload(gpus="lots", pool="b200"))
    assert field_errors(response, "gpus").strip() == "Enter a whole number."
    assert "Vision has no quota on" in field_errors(response, "node_pool")


def test_required_fields_are_marked(page_client):
    html = page_client("alice").get(url()).content.decode()
    mark = '<span class="required-mark" aria-hidden="true">*</span><span class="visually-hidden"> (required)</span>'
    for field in ("name", "image", "gpus", "model_label", "data_class"):
        assert re.search(rf'<label for="id_{field}">[^<]*{re.escape(mark)}</label>', html), field
    for field in ("command", "env", "max_runtime_minutes"):
        assert re.search(rf'<label for="id_{field}">[^<]*</label>', html), field
    assert "marks a required field." in html


def test_pool_panel_says_whether_the_work_would_start_now_or_wait(page_client):
    from apps.cluster.models import ClusterQueueState

    vision, h100 = Project.objects.get(slug="vision"), NodePool.objects.get(slug="h100")
    query = {"panel": "1", "project": vision.pk, "node_pool": h100.pk, "gpus": "2", "pods": "1"}
    content = page_client("alice").get(url(), query, **HTMX).content.decode()
    assert 'data-reason="admitting"' in content
    assert "Would start now (4 of 4 deserved H100 80GB free)." in content
    ClusterQueueState.objects.create(name="proj-vision-h100-elastic", project=vision, node_pool=h100,
                                     guaranteed=False, used=8, observed_at=timezone.now())
    response = page_client("alice").post(url(), {**submit_payload(gpus="2"), "_validate": "1"}, **HTMX)
    assert "Would wait: Vision is at its limit (8 of 8 H100 80GB); 2 more H100 80GB needed." in \
        response.content.decode()


LIVE_CHECK_QUERIES = 19  # session, user, grants; the form (project, pool, class, the policies that apply); the
# panel (project, pool, class, its quotas, held non-preemptible units) and its forecast (quotas, ClusterQueues,
# stopped LocalQueue, ahead, the stored start forecasts of the work ahead)


def test_live_check_query_count_is_pinned(page_client, users, make_workload, django_assert_num_queries):
    """The live check with its forecast costs the same whatever is queued or running on the pool."""
    client = page_client("alice")
    data = {**submit_payload(gpus="2"), "_validate": "1"}
    with django_assert_num_queries(LIVE_CHECK_QUERIES):
        assert client.post(url(), data, **HTMX).status_code == 200
    for number in range(3):
        make_workload("alice", name=f"queued-{number}")
        make_workload("bob", project="nlp", name=f"other-{number}")
    Workload.objects.update(status=Status.QUEUED)
    with django_assert_num_queries(LIVE_CHECK_QUERIES):
        assert client.post(url(), data, **HTMX).status_code == 200
