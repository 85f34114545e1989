"""End to end with a real Prometheus (Debian's `prometheus`, a temporary data dir, loopback, scraping every second):
kubesim's emulated DCGM exporters -> Prometheus -> the worker's refresh -> the detail page, showback and its API;
the idle notebook is flagged, mailed and culled with the event, the busy job keeps running."""

from __future__ import annotations

import os
import re
import shutil
import time
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from kubernetes import client

from apps.accounts.services import notification_preference_set
from apps.core.kueue_names import WORKLOAD_ID_LABEL
from apps.org.models import Project
from apps.workloads import services
from apps.workloads.models import IdlePolicy, Kind, Status, Workload, WorkloadEvent, WorkloadUtilisation
from kubesim.apiserver.nodes import dcgm
from kubesim.prometheus import PrometheusProcess
from kubesim.testing import serve
from tests.apps.workloads.helpers import submit_payload
from tests.worker.conftest import serving_pool, signed_in, wait_for
from tests.worker.test_watcher_outside import batch_job, create_job
from worker import tasks

pytestmark = pytest.mark.slow
TOLERANCE = 6.0  # percentage points: the busy pattern is 93-98 %, idle 0 %


@pytest.fixture(scope="module")
def kubesim():
    """Real clock: Prometheus samples in wall-clock time and the patterns follow kubesim's clock."""
    with serve(clock="real", default_run_seconds=3600) as served:
        yield served


@pytest.fixture(scope="module")
def prometheus(kubesim, tmp_path_factory):
    if shutil.which("prometheus") is None:
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail("prometheus is not installed; .ci/run installs Debian's prometheus package")
        pytest.skip("Debian's prometheus is not installed (apt-get install prometheus)")
    with PrometheusProcess(kubesim.url, str(tmp_path_factory.mktemp("prometheus")), interval_seconds=1) as running:
        yield running


@pytest.fixture
def measured(prometheus, settings):
    settings.PROMETHEUS_URL = prometheus.url
    settings.UTILISATION_STEP_SECONDS = 1
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    return prometheus


def test_busy_and_idle_workloads_through_a_real_prometheus(org, kubesim, cluster, celery_worker, watcher, measured,
                                                          mailoutbox):
    alice_user = org["alice"]
    alice_user.email = "alice@example.org"
    alice_user.save(update_fields=["email"])
    notification_preference_set(user=alice_user, on_admitted=False, on_preempted=False, on_finished=False,
                                on_failed=False, on_idle=True)
    IdlePolicy.objects.update_or_create(pk=1, defaults={"threshold_percent": 5, "idle_seconds": 6,
                                                        "cull_notebooks": True, "warning_minutes": 0})
    alice = signed_in(alice_user)
    assert alice.post(reverse("workloads:submit", args=["training"]),
                      submit_payload("training", command="sleep 3600", name="busy-train")).status_code == 302
    assert alice.post(reverse("workloads:submit", args=["notebook"]),
                      submit_payload("notebook", pool="l40s-shared", name="idle-nb")).status_code == 302
    assert alice.post(reverse("workloads:submit", args=["training"]),
                      submit_payload("training", pool="a100-mig-3g40gb", command="sleep 3600",
                                     name="mig-half")).status_code == 302
    # And a Job someone ran with kubectl, idle on its MIG slice (a pool no figure below averages): measured and
    # flagged as the portal's own work is.
    manifest = batch_job("kubectl-idle", queue="guaranteed-a100-mig-3g40gb", pods=1, gpus=1, seconds=3600)
    container = manifest["spec"]["template"]["spec"]["containers"][0]
    container["resources"] = {"requests": {"nvidia.com/mig-3g.40gb": "1"}, "limits": {"nvidia.com/mig-3g.40gb": "1"}}
    create_job(kubesim, manifest)
    busy = Workload.objects.get(name="busy-train")
    idle = Workload.objects.get(kind=Kind.NOTEBOOK)
    mig = Workload.objects.get(name="mig-half")
    for workload in (busy, idle, mig):
        wait_for(lambda w=workload: Workload.objects.get(pk=w.pk).status == Status.RUNNING, timeout=60)
    outside = wait_for(lambda: Workload.objects.filter(object_name="kubectl-idle", admitted_at__isnull=False).first(),
                       timeout=60)
    core = client.CoreV1Api(kubesim.api_client())
    for pod in wait_for(lambda: core.list_namespaced_pod("proj-vision", label_selector="job-name=kubectl-idle").items):
        core.patch_namespaced_pod(pod.metadata.name, "proj-vision",
                                  {"metadata": {"annotations": {dcgm.PATTERN_ANNOTATION: "idle"}}})
    for workload, pattern in ((busy, "busy"), (idle, "idle"), (mig, "50")):
        workload.refresh_from_db()
        pods = wait_for(lambda w=workload: core.list_namespaced_pod(
            w.project.namespace, label_selector=f"{WORKLOAD_ID_LABEL}={w.pk}").items)
        for pod in pods:
            core.patch_namespaced_pod(pod.metadata.name, workload.project.namespace,
                                      {"metadata": {"annotations": {dcgm.PATTERN_ANNOTATION: pattern}}})

    def flagged() -> bool:
        tasks.utilisation_refresh.apply().get()
        return WorkloadUtilisation.objects.filter(workload__in=[idle, outside], idle_flagged_at__isnull=False).count() \
            == 2

    wait_for(flagged, timeout=60, interval=1.0,
             describe=lambda: list(WorkloadUtilisation.objects.values("workload_id", "samples", "mean_percent")))
    time.sleep(2)
    tasks.utilisation_refresh.apply().get()
    busy_row = WorkloadUtilisation.objects.get(workload=busy)
    idle_row = WorkloadUtilisation.objects.get(workload=idle)
    # The first samples may predate the annotations (the default pattern, training-like, ramps up): judge the last.
    assert abs(busy_row.last_percent - 95.5) <= TOLERANCE and busy_row.idle_flagged_at is None
    assert busy_row.mean_percent > 50 and len(busy_row.series) >= 5
    assert idle_row.last_percent == 0 and idle_row.idle_since is not None
    # A MIG slice has no device utilisation: its graphics engine activity stands in.
    assert WorkloadUtilisation.objects.get(workload=mig).last_percent == pytest.approx(50)

    # The detail pages show what was measured, and the idle flag.
    page = alice.get(reverse("workloads:detail", args=[busy.pk])).content.decode()
    mean = int(re.search(r'data-utilisation="mean">(\d+)%', page).group(1))
    assert abs(mean - busy_row.mean_percent) <= 1 and "<polyline" in page
    idle_page = alice.get(reverse("workloads:detail", args=[idle.pk])).content.decode()
    assert 'data-utilisation="idle"' in idle_page
    shown = int(re.search(r'data-utilisation="mean">(\d+)%', idle_page).group(1))
    assert abs(shown - idle_row.mean_percent) <= 1

    # Showback and its API: the mean utilisation of the allocated GPU-hours per project, and the idle hours.
    today = timezone.localdate()
    window = {"start": (today - timedelta(days=1)).isoformat(), "end": (today + timedelta(days=1)).isoformat()}
    response = alice.get("/api/v1/usage/", {"group_by": "pool", **window})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["utilisation_available"] is True
    pools = {row["node_pool_slug"]: row for row in body["rows"]}
    assert abs(pools["h100"]["gpu_utilisation"] * 100 - busy_row.mean_percent) <= 1
    assert abs(pools["l40s-shared"]["gpu_utilisation"] * 100 - idle_row.mean_percent) <= 1
    assert pools["l40s-shared"]["idle_gpu_hours"] > 0
    assert pools["h100"]["idle_gpu_hours"] <= pools["l40s-shared"]["idle_gpu_hours"] * 8
    showback = alice.get(reverse("usage:reports"), {"group": "pool", **window}).content.decode()
    assert "GPU utilisation" in showback and "Allocated but idle GPU-hours" in showback

    # The owner was told, the admins' list has it, and the culler stops the idle notebook (the busy job stays).
    wait_for(lambda: any("idle-nb" in mail.subject for mail in mailoutbox), timeout=30)
    admin = signed_in(org["admin"])
    held = admin.get(reverse("workloads:held_idle")).content.decode()
    assert "idle-nb" in held and "busy-train" not in held
    assert "kubectl-idle" in held and "outside the portal" in held
    assert tasks.notebooks_cull_idle.apply().get() == 1
    wait_for(lambda: Workload.objects.get(pk=idle.pk).status == Status.STOPPED, timeout=60)
    stopped = Workload.objects.get(pk=idle.pk)
    assert stopped.status_reason == "IdleTimeout"
    assert stopped.status_message == "Stopped after its GPUs stayed below 5% for 6 s"
    assert WorkloadEvent.objects.filter(workload=idle, reason="GpuIdle").exists()
    assert WorkloadEvent.objects.filter(workload=idle, to_status=Status.STOPPED, reason="IdleTimeout").exists()
    assert Workload.objects.get(pk=busy.pk).status == Status.RUNNING


def test_an_inference_service_is_measured_like_any_work(org, kubesim, cluster, celery_worker, watcher, measured):
    """A served model's replicas are its pods (a Deployment's `<name>-<hash>-<id>`): measured, charted and in the
    showback like a Job's, on its serving pool, the mean over its replicas; and each replica on its own, so one left
    idle beside a busy one shows on the detail page and in the API's detail."""
    pool = serving_pool(kubesim, org, cards=2)
    vision = Project.objects.get(slug="vision")
    service = services.inference_submit(
        actor=org["alice"], project=vision, node_pool=pool, name="llama", image="vllm/vllm-openai:v0.6.3", gpus=1,
        replicas=2, model_label="llama-3-8b", data_class="public")
    wait_for(lambda: Workload.objects.get(pk=service.pk).ready_replicas == 2, timeout=60,
             describe=lambda: Workload.objects.filter(pk=service.pk).values("status", "ready_replicas").first())
    core = client.CoreV1Api(kubesim.api_client())
    pods = wait_for(lambda: core.list_namespaced_pod(
        vision.namespace, label_selector=f"{WORKLOAD_ID_LABEL}={service.pk}").items)
    assert len(pods) == 2
    busy, idle = sorted(pod.metadata.name for pod in pods)
    for name, pattern in ((busy, "busy"), (idle, "idle")):
        core.patch_namespaced_pod(name, vision.namespace,
                                  {"metadata": {"annotations": {dcgm.PATTERN_ANNOTATION: pattern}}})

    def replicas() -> dict[str, dict]:
        row = WorkloadUtilisation.objects.filter(workload=service).first()
        return {replica["pod"]: replica for replica in (row.replicas if row else [])}

    def measured_apart() -> bool:
        tasks.utilisation_refresh.apply().get()
        found = replicas()
        return set(found) == {busy, idle} and min(r["samples"] for r in found.values()) >= 3 and \
            abs(found[busy]["last_percent"] - 95.5) <= TOLERANCE and found[idle]["last_percent"] == 0

    wait_for(measured_apart, timeout=60, interval=1.0, describe=replicas)
    row = WorkloadUtilisation.objects.get(workload=service)
    assert row.idle_flagged_at is None and len(row.series) >= 3
    # The mean over the replicas is what idle detection and showback use: half busy, half idle.
    assert abs(row.last_percent - 95.5 / 2) <= TOLERANCE
    assert row.samples == max(replica["samples"] for replica in row.replicas)
    alice = signed_in(org["alice"])
    page = alice.get(reverse("workloads:detail", args=[service.pk])).content.decode()
    assert 'data-utilisation="mean"' in page
    table = page.split('data-utilisation="replicas"')[1].split("</table>")[0]
    shown = dict(re.findall(r'data-replica="([^"]+)">.*?data-utilisation="replica-mean">(\d+)%', table, re.S))
    assert set(shown) == {busy, idle} and int(shown[idle]) == 0 and int(shown[busy]) > int(shown[idle])
    detail = alice.get(f"/api/v1/workloads/{service.pk}/").json()["utilisation"]
    assert {r["pod"]: r["last_percent"] for r in detail["replicas"]} == {
        busy: replicas()[busy]["last_percent"], idle: 0}
    today = timezone.localdate()
    window = {"start": (today - timedelta(days=1)).isoformat(), "end": (today + timedelta(days=1)).isoformat()}
    body = alice.get("/api/v1/usage/", {"group_by": "pool", **window}).json()
    serving = {r["node_pool_slug"]: r for r in body["rows"]}[pool.slug]
    assert serving["gpu_utilisation"] is not None and serving["gpu_utilisation"] > 0.2
