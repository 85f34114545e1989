"""A submission's request id follows it from the web request through the Celery task into the Job's annotations and
the worker's log lines."""

import logging

import pytest
from django.urls import reverse

from apps.core.kueue_names import REQUEST_ID_ANNOTATION
from apps.org.models import NodePool, Project
from apps.workloads import services
from apps.workloads.models import Kind, Workload
from tests.apps.workloads.helpers import submit_payload
from tests.worker.conftest import signed_in, wait_for
from worker import tasks

pytestmark = pytest.mark.slow


@pytest.fixture
def celery_records(caplog):
    """caplog, also fed directly by Celery's own loggers at INFO: an earlier in-process worker may have left them
    with a higher level, disabled or not propagating (Celery configures its logging once per process)."""
    caplog.set_level(logging.INFO)
    names = ["celery", *(name for name in logging.root.manager.loggerDict if name.startswith("celery."))]
    loggers = [logging.getLogger(name) for name in names]
    saved = [(logger.level, logger.disabled) for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.INFO)
        logger.disabled = False
        logger.addHandler(caplog.handler)
    yield caplog
    for logger, (level, disabled) in zip(loggers, saved, strict=True):
        logger.removeHandler(caplog.handler)
        logger.setLevel(level)
        logger.disabled = disabled


def test_the_request_id_reaches_the_job_and_the_task_logs(org, cluster, celery_worker, celery_records):
    caplog = celery_records
    alice = signed_in(org["alice"])
    response = alice.post(reverse("workloads:submit", args=["training"]),
                          submit_payload("training", gpus="1", command="sleep 600"),
                          headers={"X-Request-ID": "trace-4711"})
    assert response.status_code == 302 and response["X-Request-ID"] == "trace-4711"
    workload = wait_for(lambda: Workload.objects.filter(k8s_uid__gt="").first())
    job = cluster.get("Job", workload.job_name, namespace="proj-vision")
    assert job["metadata"]["annotations"][REQUEST_ID_ANNOTATION] == "trace-4711"
    task_lines = [record for record in caplog.records if record.name.startswith("celery")
                  and getattr(record, "request_id", "") == "trace-4711"]
    assert task_lines, "the worker's log lines of the task carry the request id"


def test_work_without_a_request_gets_no_annotation(synced, demo):
    workload = services.workload_submit(
        actor=demo["alice"], project=Project.objects.get(slug="vision"), kind=Kind.TRAINING, name="swept",
        image="pytorch/pytorch:2.4.0", command=["sleep", "60"], node_pool=NodePool.objects.get(slug="h100"), gpus=1,
        model_label="resnet", data_class="public", preemptible=True)
    assert tasks.workload_submit.apply(args=[workload.pk]).get() == "submitted"
    job = synced.get("Job", f"wl-{workload.pk}", namespace="proj-vision")
    assert REQUEST_ID_ANNOTATION not in job["metadata"]["annotations"]
