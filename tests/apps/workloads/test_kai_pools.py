"""Work on KAI pools: checked as KAI Scheduler judges its queues (quota row, limits with KAI's 0, non-preemptible
within deserved), GPU fractions only where KAI shares cards and for one pod, what only Kueue offers refused by field;
every refusal at once, from the service, the API (400) and the form alike."""

import csv
import io
import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from django.db.models import F
from django.urls import reverse
from django.utils import timezone

from apps.org import services as org_services
from apps.org.models import Department, NodePool, Project, Quota
from apps.workloads import services
from apps.workloads.models import Status, Workload, WorkloadUtilisation
from tests.api_support import call

from .helpers import submit_payload


@pytest.fixture
def kai_pool(demo):
    """RTX PRO 6000 scheduled by KAI with fractions: Research 6 (limit 8), Vision 4 (unlimited), NLP 2 (limit 2)."""
    pool = org_services.node_pool_create(actor=demo["admin"], slug="rtx", name="RTX PRO 6000",
                                         gpu_resource="nvidia.com/gpu", capacity=16, scheduler="kai",
                                         gpu_fractions=True)
    org_services.quota_set(actor=demo["admin"], node_pool=pool, department=Department.objects.get(slug="research"),
                           deserved=6, limit=8)
    org_services.quota_set(actor=demo["admin"], node_pool=pool, project=Project.objects.get(slug="vision"),
                           deserved=4, limit=None)
    org_services.quota_set(actor=demo["admin"], node_pool=pool, project=Project.objects.get(slug="nlp"),
                           deserved=2, limit=2)
    return pool


@pytest.fixture
def whole_kai_pool(demo):
    """A KAI pool without GPU sharing, Vision 4 there."""
    pool = org_services.node_pool_create(actor=demo["admin"], slug="kai-a100", name="A100 KAI",
                                         gpu_resource="nvidia.com/gpu", capacity=8, scheduler="kai")
    org_services.quota_set(actor=demo["admin"], node_pool=pool, department=Department.objects.get(slug="research"),
                           deserved=4, limit=None)
    org_services.quota_set(actor=demo["admin"], node_pool=pool, project=Project.objects.get(slug="vision"),
                           deserved=4, limit=None)
    return pool


def submit(demo, pool, *, kind="notebook", project="vision", user="alice", **fields):
    values = {"kind": kind, "name": "x", "image": "pytorch/pytorch:2.4.0", "node_pool": pool, "gpus": 1,
              "model_label": "m", "data_class": "public", "preemptible": True, **fields}
    return services.workload_submit(actor=demo[user], project=Project.objects.get(slug=project), **values)


def refusal(demo, pool, **fields):
    with pytest.raises(ValidationError) as caught:
        submit(demo, pool, **fields)
    return caught.value.message_dict


@pytest.mark.parametrize("kind", ["training", "batch", "notebook"])
def test_whole_gpu_work_on_a_kai_pool_is_accepted(demo, kai_pool, kind):
    workload = submit(demo, kai_pool, kind=kind, gpus=2)
    assert workload.status == Status.SUBMITTING and workload.gpu_fraction is None
    assert workload.events.get().message == "Submitted to KAI Scheduler's proj-vision-rtx queue"


def test_a_notebook_on_half_a_card(demo, kai_pool):
    workload = submit(demo, kai_pool, gpus=0, gpu_fraction=Decimal("0.5"))
    assert workload.gpu_fraction == Decimal("0.5") and workload.gpus == 0 and workload.gpu_units == 0
    assert workload.gpus_text == "0.5 GPU" and workload.gpu_amount_text == "0.5"


def test_a_project_without_quota_on_the_kai_pool_is_refused(demo, kai_pool):
    errors = refusal(demo, kai_pool, project="forecasting", user="admin")
    assert errors["node_pool"] == ["Forecasting has no quota on RTX PRO 6000; choose a pool listed for the project "
                                   "or ask your department admin for quota there."]


def test_limits_cap_what_kai_schedules_the_project_and_its_department(demo, kai_pool):
    errors = refusal(demo, kai_pool, project="nlp", user="bob", kind="training", gpus=3)
    assert errors["gpus"] == ["This asks for 3 RTX PRO 6000 units but NLP may hold at most 2 units there (its limit, "
                              "which KAI Scheduler enforces); ask for fewer GPUs or pods."]
    errors = refusal(demo, kai_pool, kind="training", gpus=9)
    assert errors["gpus"] == ["This asks for 9 RTX PRO 6000 units but Research may hold at most 8 units there (its "
                              "limit, which KAI Scheduler enforces); ask for fewer GPUs or pods."]


def test_a_limit_of_0_allows_nothing(demo, kai_pool):
    quota = Quota.objects.get(project__slug="nlp", node_pool=kai_pool)
    org_services.quota_set(actor=demo["admin"], node_pool=kai_pool, project=quota.project, deserved=0, limit=0)
    errors = refusal(demo, kai_pool, project="nlp", user="bob", gpus=0, gpu_fraction=Decimal("0.25"))
    assert errors == {"gpus": ["This asks for 0.25 RTX PRO 6000 units but NLP may hold no units there (its limit, "
                               "which KAI Scheduler enforces); ask for fewer GPUs or pods."]}


def test_non_preemptible_work_must_fit_the_deserved_quota(demo, kai_pool):
    errors = refusal(demo, kai_pool, kind="training", gpus=5, preemptible=False)
    assert errors["preemptible"] == [
        "Non-preemptible work must fit in Vision's deserved quota on RTX PRO 6000 (4 units) and this asks for 5. Mark "
        "it preemptible to use idle capacity, or ask for fewer GPUs."]
    assert submit(demo, kai_pool, kind="training", gpus=5, preemptible=True).pk  # over quota, within the limits


def test_running_shares_of_cards_keep_the_deserved_quota_they_need_rounded_up_after_adding(demo, kai_pool):
    """A non-preemptible half card holds a whole deserved unit (the portal's quota is whole units; KAI keeps the
    half within it); two halves on one card still need only one."""
    vision = Project.objects.get(slug="vision")
    halves = [submit(demo, kai_pool, gpus=0, gpu_fraction=Decimal("0.5"), preemptible=False) for _ in range(2)]
    Workload.objects.filter(pk=halves[0].pk).update(status=Status.RUNNING)
    with pytest.raises(ValidationError) as caught:
        org_services.quota_set(actor=demo["admin"], node_pool=kai_pool, project=vision, deserved=0, limit=None)
    assert caught.value.message_dict["deserved"] == [
        "Running non-preemptible work in this project holds 1 rtx units; the deserved quota cannot go below that "
        "until it finishes or is stopped."]
    Workload.objects.filter(pk=halves[1].pk).update(status=Status.ADMITTED)
    org_services.quota_set(actor=demo["admin"], node_pool=kai_pool, project=vision, deserved=1, limit=None)
    assert Quota.objects.get(node_pool=kai_pool, project=vision).deserved == 1


def test_fractions_are_refused_on_kueue_pools_and_kai_pools_without_sharing(demo, whole_kai_pool):
    kueue = NodePool.objects.get(slug="h100")
    errors = refusal(demo, kueue, gpus=0, gpu_fraction=Decimal("0.5"))
    assert errors["gpu_fraction"] == [f"{kueue.name} is scheduled by Kueue, which counts whole GPUs: a fraction of "
                                      "a GPU runs only on a KAI pool with GPU fractions on. Choose such a pool, or "
                                      "ask for whole GPUs."]
    errors = refusal(demo, whole_kai_pool, gpus=0, gpu_fraction=Decimal("0.5"))
    assert errors["gpu_fraction"] == ["A100 KAI is scheduled by KAI Scheduler without GPU sharing: a fraction of a "
                                      "GPU runs only on a KAI pool with GPU fractions on. Choose such a pool, or ask "
                                      "for whole GPUs."]


def test_fractions_are_for_one_pod(demo, kai_pool):
    errors = refusal(demo, kai_pool, kind="training", pods=2, gpus=0, gpu_fraction=Decimal("0.5"))
    assert errors["gpu_fraction"] == [
        "This training runs 2 pods at once; a fraction of a GPU is for a single pod (a notebook, a one-pod training, "
        "a batch run with parallelism 1). Ask for whole GPUs, or run one pod."]
    errors = refusal(demo, kai_pool, kind="batch", completions=4, parallelism=2, gpus=0, gpu_fraction=Decimal("0.5"))
    assert "batch run runs 2 pods at once" in errors["gpu_fraction"][0]
    assert submit(demo, kai_pool, kind="batch", completions=4, parallelism=1, gpus=0, gpu_fraction=Decimal("0.5"))


@pytest.mark.parametrize("fraction", ["0", "1", "1.5", "-0.5", "0.125"])
def test_a_fraction_is_above_0_below_1_in_hundredths(demo, kai_pool, fraction):
    errors = refusal(demo, kai_pool, gpus=0, gpu_fraction=Decimal(fraction))
    assert errors["gpu_fraction"] == ["Give a share of one GPU above 0 and below 1, in hundredths, e.g. 0.25, 0.5 or "
                                      "0.75."]


def test_every_refusal_at_once(demo, whole_kai_pool):
    errors = refusal(demo, whole_kai_pool, kind="training", pods=2, gpus=1, gpu_fraction=Decimal("1.5"),
                     framework="ray", ray_entrypoint="python x.py")
    assert len(errors["gpu_fraction"]) == 4  # range, pool, pods, framework
    assert errors["gpus"] == ["With a fraction of a GPU the pod asks for no whole GPUs: set GPUs to 0 (this asks for 1 "
                              "and 1.5)."]
    assert errors["framework"] == ["A100 KAI is scheduled by KAI Scheduler, where the portal runs its own Jobs only; "
                                   "leave the framework out, or choose a Kueue pool."]


def test_no_gpu_at_all_is_refused(demo, kai_pool):
    assert refusal(demo, kai_pool, gpus=0)["gpus"] == [
        "Ask for at least 1 GPU, or for a fraction of one (gpu_fraction) on a KAI pool that shares GPUs."]


def test_a_budget_hold_refuses_preemptible_work_on_a_kai_pool(demo, kai_pool, monkeypatch):
    vision = Project.objects.get(slug="vision")
    monkeypatch.setattr("apps.workloads.services.submissions.budget_holds", lambda: ({vision.pk}, set()))
    errors = refusal(demo, kai_pool)
    assert errors["preemptible"][0].startswith("Vision's budget is spent, so its new preemptible work is held; RTX "
                                               "PRO 6000 is scheduled by KAI Scheduler, which cannot hold work")
    assert submit(demo, kai_pool, preemptible=False).pk


def test_a_manifest_is_refused_on_a_kai_pool(demo, kai_pool):
    manifest = ("apiVersion: batch/v1\nkind: Job\nmetadata: {name: m}\nspec:\n  template:\n    spec:\n"
                "      restartPolicy: Never\n      containers:\n      - name: main\n        image: busybox:1.36\n"
                "        resources: {limits: {nvidia.com/gpu: 1}, requests: {nvidia.com/gpu: 1}}\n")
    with pytest.raises(ValidationError) as caught:
        services.workload_manifest_validate(actor=demo["alice"], project=Project.objects.get(slug="vision"),
                                            manifest=manifest, node_pool=kai_pool, model_label="m",
                                            data_class="public")
    assert caught.value.message_dict["node_pool"] == [
        "RTX PRO 6000 is scheduled by KAI Scheduler; a manifest runs through Kueue's queues, which it has not. Submit "
        "the work with the training, batch or notebook form there, or choose a Kueue pool."]


def test_the_api_takes_a_fraction_and_shows_it(client_for, demo, kai_pool):
    body = {"project": "vision", "kind": "notebook", "name": "half", "image": "jupyter/base-notebook:latest",
            "node_pool": "rtx", "gpu_fraction": 0.5, "labels": {"model": "m", "data_class": "public"}}
    created = call(client_for("alice"), "POST", "workloads/", body)
    assert created.status_code == 201, created.content
    assert created.json()["gpu_fraction"] == 0.5 and created.json()["gpus"] == 0
    assert created.json()["queue_name"] == "proj-vision-rtx"
    listed = call(client_for("alice"), "GET", "workloads/").json()["results"]
    assert [row["gpu_fraction"] for row in listed if row["id"] == created.json()["id"]] == [0.5]
    again = call(client_for("alice"), "POST", f"workloads/{created.json()['id']}/resubmit/", {"gpus": 1})
    assert again.status_code == 201, again.content
    assert again.json()["gpu_fraction"] is None and again.json()["gpus"] == 1


def test_the_api_gives_every_refusal_in_one_400(client_for, demo, kai_pool):
    body = {"project": "vision", "kind": "training", "name": "Bad Name", "image": "pytorch/pytorch:2.4.0",
            "node_pool": "h100", "gpus": 1, "pods": 2, "gpu_fraction": "0.333",
            "labels": {"model": "m", "data_class": "public"}}
    refused = call(client_for("alice"), "POST", "workloads/", body)
    assert refused.status_code == 400, refused.content
    errors = refused.json()
    assert len(errors["gpu_fraction"]) == 3 and errors["gpus"] and errors["name"]
    not_a_number = call(client_for("alice"), "POST", "workloads/", {**body, "gpu_fraction": "half"})
    assert not_a_number.status_code == 400
    assert not_a_number.json()["gpu_fraction"] == ["Give a share of one GPU as a number, e.g. 0.5."]
    assert not_a_number.json()["name"]


def test_the_form_takes_a_fraction_and_the_pages_show_it(page_client, demo, kai_pool):
    client = page_client("alice")
    posted = client.post(reverse("workloads:submit", args=["notebook"]),
                         submit_payload("notebook", pool="rtx", gpus="0", gpu_fraction="0.5"))
    assert posted.status_code == 302, posted.context["form"].errors if posted.context else posted
    workload = Workload.objects.get(node_pool=kai_pool)
    assert workload.gpu_fraction == Decimal("0.5")
    detail = client.get(reverse("workloads:detail", args=[workload.pk])).content.decode()
    assert "0.5 GPU" in detail and "proj-vision-rtx" in detail
    listed = client.get(reverse("workloads:list")).content.decode()
    assert '<td data-col="gpus_requested" class="num">0.5</td>' in listed


def test_a_running_share_of_a_card_is_shown_as_that_share_wherever_gpus_held_are_counted(page_client, client_for,
                                                                                         demo, kai_pool):
    """Half a card held by a running notebook is 0.5 (it was 0) in the list's and CSV's GPUs allocated, the project
    queue's holders, the held-idle page, and the held-idle and dry-run APIs' gpu_fraction."""
    workload = submit(demo, kai_pool, gpus=0, gpu_fraction=Decimal("0.5"))
    Workload.objects.filter(pk=workload.pk).update(status=Status.RUNNING)
    now = timezone.now()
    WorkloadUtilisation.objects.create(workload=workload, samples=30, mean_percent=1.5, last_percent=0.0,
                                       idle_since=now - timedelta(minutes=45), idle_flagged_at=now)
    client = page_client("alice")
    listed = client.get(reverse("workloads:list")).content.decode()
    assert '<td data-col="gpus_allocated" class="num">0.5</td>' in listed
    exported = b"".join(client.get(reverse("workloads:export")).streaming_content).decode()
    (row,) = [row for row in csv.DictReader(io.StringIO(exported)) if row["Workload"] == workload.name]
    assert (row["GPUs requested"], row["GPUs allocated"]) == ("0.5", "0.5")
    queue = client.get(reverse("workloads:project_queue", args=["vision"])).content.decode()
    assert '<td>rtx</td><td class="num">0.5</td>' in queue
    held_idle = page_client("admin").get(reverse("workloads:held_idle")).content.decode()
    assert "<td>0.5 x rtx</td>" in held_idle
    (flagged,) = call(client_for("admin"), "GET", "held-idle/").json()["results"]
    assert (flagged["gpu_units"], flagged["gpu_fraction"]) == (0, 0.5)
    dry = call(client_for("alice"), "POST", "workloads/?dry_run=true", {
        "project": "vision", "kind": "notebook", "name": "half", "image": "jupyter/base-notebook:latest",
        "node_pool": "rtx", "gpu_fraction": 0.25, "labels": {"model": "m", "data_class": "public"}})
    assert dry.status_code == 200, dry.content
    assert (dry.json()["gpu_units"], dry.json()["gpu_fraction"]) == (0, 0.25)


def test_the_list_sorts_shares_of_a_card_by_their_share(page_client, client_for, demo, kai_pool):
    """Sorted by GPUs, a quarter comes before a half and a half before a whole GPU (shares sorted as 0 before)."""
    half = submit(demo, kai_pool, gpus=0, gpu_fraction=Decimal("0.5"))
    whole = submit(demo, kai_pool, gpus=1)
    quarter = submit(demo, kai_pool, gpus=0, gpu_fraction=Decimal("0.25"))
    ours = [quarter.pk, half.pk, whole.pk]
    listed = page_client("alice").get(reverse("workloads:list"), {"ordering": "gpus"}).content.decode()
    assert [pk for pk in map(int, re.findall(r'data-workload="(\d+)"', listed)) if pk in ours] == ours
    api = call(client_for("alice"), "GET", "workloads/?ordering=-gpus").json()["results"]
    assert [row["id"] for row in api if row["id"] in ours] == ours[::-1]


def test_the_form_refuses_a_fraction_on_a_kueue_pool_with_every_error(page_client, demo, kai_pool):
    posted = page_client("alice").post(reverse("workloads:submit", args=["training"]),
                                       submit_payload("training", gpus="1", pods="2", gpu_fraction="0.5",
                                                      name="Bad Name"))
    assert posted.status_code == 200
    errors = posted.context["form"].errors
    assert len(errors["gpu_fraction"]) == 2 and errors["gpus"] and errors["name"]


def test_work_on_a_kai_pool_is_said_to_wait_for_kai_scheduler(demo, kai_pool):
    workload = submit(demo, kai_pool, gpus=0, gpu_fraction=Decimal("0.5"))
    assert services.workload_mark_submitted(workload=workload, uid="uid-1", manifest={})
    workload.refresh_from_db()
    said = f"Job {workload.job_name} created in {workload.project.namespace}; waiting for KAI Scheduler"
    assert workload.status == Status.QUEUED and workload.status_message == said
    assert workload.events.get(to_status=Status.QUEUED).message == said


def test_a_preemption_of_kai_work_without_a_known_reason_is_kai_schedulers(demo, kai_pool):
    """The notification's plain reason falls back to the pool's scheduler, not to Kueue."""
    from apps.org.models import NotificationDelivery
    from apps.workloads.observation import Observation

    org_services.notification_channel_create(actor=demo["alice"], name="mine", kind="email",
                                             events=["workload.preempted"])
    workload = submit(demo, kai_pool, kind="training", gpus=1)
    Workload.objects.filter(pk=workload.pk).update(status=Status.RUNNING)
    services.workload_observe(workload_id=workload.pk, observation=Observation(
        status=Status.PREEMPTED, reason="Evicted", message="The pod was evicted"))
    (delivery,) = NotificationDelivery.objects.filter(event="workload.preempted")
    assert delivery.payload["object"]["plain_reason"] == "Preempted by KAI Scheduler."


def test_the_api_names_a_kai_gangs_pod_group_as_its_object_and_a_one_pod_run_its_job(client_for, demo, kai_pool):
    gang = submit(demo, kai_pool, kind="training", pods=2)
    single = submit(demo, kai_pool, kind="training", pods=1)
    Workload.objects.filter(pk__in=[gang.pk, single.pk]).update(job_name=F("name"))  # as the worker names them
    objects = {row["id"]: row["object"] for row in call(client_for("alice"), "GET", "workloads/").json()["results"]}
    assert objects[gang.pk] == {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "name": "x"}
    assert objects[single.pk] == {"apiVersion": "batch/v1", "kind": "Job", "name": "x"}
