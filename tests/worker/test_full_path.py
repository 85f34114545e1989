"""The whole path with real processes' parts: a browser form POST -> the Celery worker on the broker (Redis in CI)
-> a Kueue-labelled Job in kubesim over HTTP -> Kueue admits it per the quota tree -> the watcher records it."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from apps.workloads import selectors
from apps.workloads.models import Kind, Status, Workload, WorkloadEvent
from tests.apps.workloads.helpers import submit_payload
from tests.worker.conftest import kueue_workload, signed_in, wait_for
from worker import tasks

pytestmark = pytest.mark.slow


@pytest.fixture
def alice(org):
    return signed_in(org["alice"])


@pytest.mark.parametrize(("preemptible", "queue"), [(True, "elastic-h100"), (False, "guaranteed-h100")])
def test_form_post_reaches_kueue_through_the_worker(alice, cluster, kubesim, celery_worker, watcher, preemptible,
                                                     queue):
    payload = submit_payload("training", gpus="2", pods="2", priority_class="train" if preemptible else "build",
                             preemptible="on" if preemptible else None, command="sleep 600")
    response = alice.post(reverse("workloads:submit", args=["training"]), payload)
    assert response.status_code == 302
    workload = Workload.objects.get()
    wait_for(lambda: Workload.objects.get(pk=workload.pk).k8s_uid)  # the worker created the Job
    workload.refresh_from_db()
    job = cluster.get("Job", workload.job_name, namespace="proj-vision")
    labels = job["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == queue
    assert labels["kueue.x-k8s.io/priority-class"] == ("train" if preemptible else "build")
    assert labels["portal.gpu/workload-id"] == str(workload.pk) and job["spec"]["completionMode"] == "Indexed"
    kubesim.advance(1)
    admitted = kueue_workload(cluster, workload)
    assert admitted["status"]["admission"]["clusterQueue"] == f"proj-vision-h100-{queue.split('-')[0]}"
    assert admitted["status"]["admission"]["podSetAssignments"][0]["count"] == 2
    wait_for(lambda: Workload.objects.get(pk=workload.pk).status == Status.RUNNING)


def test_idle_notebooks_are_stopped_with_an_event_that_says_so(alice, cluster, kubesim, watcher):
    response = alice.post(reverse("workloads:submit", args=["notebook"]),
                          submit_payload("notebook", pool="l40s-shared", notebook_idle_timeout_minutes="30"))
    assert response.status_code == 302
    notebook = Workload.objects.get(kind=Kind.NOTEBOOK)
    assert tasks.workload_submit.apply(args=[notebook.pk]).get() == "submitted"
    kubesim.advance(1)
    wait_for(lambda: Workload.objects.get(pk=notebook.pk).status == Status.RUNNING)
    assert tasks.notebooks_cull_idle.apply().get() == 0  # not idle yet
    # The owner has been away for 31 minutes.
    Workload.objects.filter(pk=notebook.pk).update(last_activity_at=timezone.now() - timedelta(minutes=31))
    assert [w.pk for w in selectors.notebooks_idle()] == [notebook.pk]
    assert tasks.notebooks_cull_idle.apply().get() == 1
    assert tasks.workload_stop.apply(args=[notebook.pk]).get() == "stopped"
    stopped = Workload.objects.get(pk=notebook.pk)
    assert stopped.status == Status.STOPPED and stopped.status_reason == "IdleTimeout"
    event = WorkloadEvent.objects.filter(workload=notebook).order_by("-id").first()
    assert event.message.startswith("Stopped after 30 minutes without activity (no sign of use in the notebook or "
                                    "the portal since ")
    assert not cluster.list("Job", namespace="proj-vision")
