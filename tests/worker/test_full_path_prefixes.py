"""The whole path in an installation with its own Kueue name prefixes (settings.KUEUE_*_PREFIX): the organisation is
reconciled into kubesim under those names, an API submission goes through the Celery worker to a Job that Kueue
admits, the watcher mirrors it, and "why am I waiting" still finds the queue's numbers for work that waits."""

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.urls import reverse

from apps.cluster.models import ClusterQueueState
from apps.org.demo import seed_demo
from apps.workloads.explain import QUOTA, explain_workloads
from apps.workloads.models import Status, Workload
from tests.api_support import call
from tests.worker.conftest import kueue_workload, signed_in, wait_for
from worker.kueue_sync import desired_from_database, read_owned, reconcile

pytestmark = pytest.mark.slow

PREFIXES = {"KUEUE_PROJECT_PREFIX": "team-", "KUEUE_ROOT_COHORT_PREFIX": "root-",
            "KUEUE_DEPARTMENT_COHORT_PREFIX": "d-"}
DEFAULT_PREFIXES = ("proj-", "portal-", "dept-")


@pytest.fixture
def prefixed(settings, cluster, transactional_db):
    """The demo organisation created and reconciled in an installation with non-default prefixes."""
    for name, value in PREFIXES.items():
        setattr(settings, name, value)
    # The session's demo was created under the default prefixes (a project's namespace is fixed when it is created):
    # start from an empty database, as every transactional test ends with one.
    call_command("flush", interactive=False, verbosity=0)
    seed_demo()
    reconcile(cluster, desired_from_database())
    return signed_in(get_user_model().objects.get(username="alice"))


def submit(client, name: str, gpus: int) -> Workload:
    """A non-preemptible training run in Vision's guaranteed H100 queue, through the API (the worker submits it)."""
    response = call(client, "POST", "workloads/", {
        "project": "vision", "kind": "training", "name": name, "image": "pytorch/pytorch:2.4.0",
        "command": ["sleep", "600"], "node_pool": "h100", "gpus": gpus, "preemptible": False,
        "labels": {"model": "resnet50", "data_class": "public"},
    })
    assert response.status_code == 201, response.content
    workload_id = response.json()["id"]
    wait_for(lambda: Workload.objects.get(pk=workload_id).k8s_uid)  # the worker created the Job
    return Workload.objects.get(pk=workload_id)


def test_prefixed_installation_admits_and_explains(prefixed, cluster, kubesim, celery_worker, watcher):
    # Every name the portal gave the cluster carries this installation's prefixes, and none the defaults.
    assert cluster.get("Namespace", "team-vision")["metadata"]["name"] == "team-vision"
    assert cluster.get("LocalQueue", "guaranteed-h100", namespace="team-vision")["spec"]["clusterQueue"] == (
        "team-vision-h100-guaranteed")
    assert cluster.get("ClusterQueue", "team-vision-h100-guaranteed")["spec"]["cohortName"] == "team-vision-h100"
    assert cluster.get("ClusterQueue", "team-vision-h100-elastic")["spec"]["cohortName"] == "team-vision-h100"
    assert cluster.get("Cohort", "team-vision-h100")["spec"]["parentName"] == "d-research-h100"
    assert cluster.get("Cohort", "d-research-h100")["spec"]["parentName"] == "root-h100"
    assert "parentName" not in cluster.get("Cohort", "root-h100")["spec"]
    owned = read_owned(cluster)
    named = {name for kind, _, name in owned if kind in ("Namespace", "Cohort", "ClusterQueue")}
    named |= {namespace for _, namespace, _ in owned if namespace}
    assert named and not [name for name in named if name.startswith(DEFAULT_PREFIXES)]

    # Vision's guaranteed H100 queue holds its deserved 4: a 4-unit run is admitted there and runs.
    first = submit(prefixed, "fills", gpus=4)
    job = cluster.get("Job", first.job_name, namespace="team-vision")
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "guaranteed-h100"
    kubesim.advance(1)
    admitted = kueue_workload(cluster, Workload.objects.get(pk=first.pk))
    assert admitted["status"]["admission"]["clusterQueue"] == "team-vision-h100-guaranteed"
    wait_for(lambda: Workload.objects.get(pk=first.pk).status == Status.RUNNING)

    # Two more units cannot borrow for non-preemptible work: it waits, and the explanation has the numbers.
    second = submit(prefixed, "waits", gpus=2)
    kubesim.advance(1)
    wait_for(lambda: Workload.objects.get(pk=second.pk).status == Status.QUEUED)
    wait_for(lambda: ClusterQueueState.objects.filter(name="team-vision-h100-guaranteed", used=4).exists(),
             describe=lambda: list(ClusterQueueState.objects.values_list("name", "used")))
    waiting = Workload.objects.select_related("project__department", "node_pool").get(pk=second.pk)
    # Not admitted, so Kueue named no ClusterQueue: the explanation finds the queue by the configured name.
    assert waiting.cluster_queue == "" and waiting.cluster_queue_name == "team-vision-h100-guaranteed"
    explanation = explain_workloads([waiting])[waiting.pk]
    assert explanation.kind == QUOTA
    assert explanation.numbers["deserved"] == 4 and explanation.numbers["queue_used"] == 4
    assert "your project's guaranteed queue has 4 of 4 in use" in explanation.sentence
    assert "?" not in explanation.sentence
    page = prefixed.get(reverse("workloads:detail", args=[waiting.pk])).content.decode()
    assert 'data-explanation="quota"' in page and "has 4 of 4 in use" in page
