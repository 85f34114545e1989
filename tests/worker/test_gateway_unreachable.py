"""An API server that does not answer reads as "cannot reach the cluster at <host>", never as a refusal: in the
gateway's error, a workload's submit message, `manage.py sync_kueue` and the cluster sync page."""

import socket

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from kubernetes import client

from apps.org.models import NodePool, Project
from apps.workloads import services
from apps.workloads.models import Kind, Status
from worker import tasks
from worker.gateway import ClusterError, Gateway, reset_gateway


@pytest.fixture
def closed_port_gateway():
    """The worker's gateway pointed at a port on 127.0.0.1 nothing listens on (bound, then closed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    configuration = client.Configuration()
    configuration.host = f"http://127.0.0.1:{port}"
    gw = Gateway(client.ApiClient(configuration))
    reset_gateway(gw)
    yield gw
    reset_gateway(None)


def test_a_closed_port_is_unreachable_and_transient(closed_port_gateway):
    with pytest.raises(ClusterError) as caught:
        closed_port_gateway.list("Namespace")
    error = caught.value
    assert error.unreachable and error.transient and not error.not_found
    assert error.message.startswith(f"cannot reach the cluster at {closed_port_gateway.host}: ")
    assert error.describe() == error.message  # no HTTP status: the API server never answered


def test_submit_against_an_unreachable_cluster_says_so(demo, closed_port_gateway):
    workload = services.workload_submit(
        actor=demo["alice"], project=Project.objects.get(slug="vision"), kind=Kind.TRAINING, name="run",
        image="pytorch/pytorch:2.4.0", command=["sleep", "60"], node_pool=NodePool.objects.get(slug="h100"), gpus=1,
        model_label="resnet", data_class="public", preemptible=True)
    task = tasks.workload_submit
    assert task.apply(args=[workload.pk], retries=task.max_retries).get() == "submit_failed"
    workload.refresh_from_db()
    assert workload.status == Status.SUBMIT_FAILED
    assert f"cannot reach the cluster at {closed_port_gateway.host}" in workload.status_message
    assert "refused the" not in workload.status_message


def test_sync_command_and_sync_page_say_the_cluster_cannot_be_reached(demo, client_for, closed_port_gateway):
    with pytest.raises(CommandError) as caught:
        call_command("sync_kueue")
    assert str(caught.value).startswith(f"cannot reach the cluster at {closed_port_gateway.host}")
    runs = client_for("admin").get(reverse("org:cluster_sync"), headers={"HX-Request": "true"}).content.decode()
    assert f"cannot reach the cluster at {closed_port_gateway.host}" in runs
    assert "refused the" not in runs
