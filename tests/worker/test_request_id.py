"""A submission's request id follows it from the web request through the Celery task into the Job's annotations and
the worker's log lines."""

import logging

import pytest
from django.urls import reverse

from apps.core import request_ids
from apps.core.kueue_names import REQUEST_ID_ANNOTATION
from apps.org.models import NodePool, Project
from apps.workloads import services
from apps.workloads.models import Kind, Workload
from tests.apps.workloads.helpers import submit_payload
from tests.worker.conftest import signed_in, wait_for
from worker import tasks

pytestmark = pytest.mark.slow


def test_the_request_id_reaches_the_job_and_the_task_logs(org, cluster, celery_worker):
    alice = signed_in(org["alice"])
    response = alice.post(reverse("workloads:submit", args=["training"]),
                          submit_payload("training", gpus="1", command="sleep 600"),
                          headers={"X-Request-ID": "trace-4711"})
    assert response.status_code == 302 and response["X-Request-ID"] == "trace-4711"
    workload = wait_for(lambda: Workload.objects.filter(k8s_uid__gt="").first())
    job = cluster.get("Job", workload.job_name, namespace="proj-vision")
    assert job["metadata"]["annotations"][REQUEST_ID_ANNOTATION] == "trace-4711"
    # The annotation is read from the id bound inside the task, so the task ran with it; every log record made
    # there carries it (the record factory). Celery's own handlers are process-global and configured once, so the
    # records are read here from a handler of the test's own rather than from caplog.
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    probe = logging.getLogger("tests.request-id-probe")
    probe.setLevel(logging.DEBUG)  # whatever levels the process' logging configuration left above it
    probe.propagate = False
    probe.addHandler(handler)
    try:
        token = request_ids.bind("trace-4711")
        probe.warning("inside the task's context")
        request_ids.unbind(token)
        probe.warning("outside it")
    finally:
        probe.removeHandler(handler)
    assert [record.request_id for record in records] == ["trace-4711", ""]


def test_work_without_a_request_gets_no_annotation(synced, demo):
    workload = services.workload_submit(
        actor=demo["alice"], project=Project.objects.get(slug="vision"), kind=Kind.TRAINING, name="swept",
        image="pytorch/pytorch:2.4.0", command=["sleep", "60"], node_pool=NodePool.objects.get(slug="h100"), gpus=1,
        model_label="resnet", data_class="public", preemptible=True)
    assert tasks.workload_submit.apply(args=[workload.pk]).get() == "submitted"
    job = synced.get("Job", f"wl-{workload.pk}", namespace="proj-vision")
    assert REQUEST_ID_ANNOTATION not in job["metadata"]["annotations"]
