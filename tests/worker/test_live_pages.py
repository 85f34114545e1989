"""The live pages against kubesim's manual clock and the real watcher: dashboard figures equal Kueue's status, the
project queue shows positions in order, and the worker's log tail reads the pods' generated logs and exit codes."""

from decimal import Decimal

import pytest
from django.urls import reverse

from apps.cluster.models import ClusterQueueState
from apps.org.models import NodePool, Project
from apps.workloads import logs, services
from apps.workloads.models import Kind, Status, Workload, WorkloadLogTail
from tests.worker.conftest import signed_in, wait_for
from tests.worker.test_watcher import positions, status_of, submit
from worker import tasks

pytestmark = pytest.mark.slow


def _total(status: dict) -> Decimal:
    return sum((Decimal(str(r["total"])) for f in status.get("flavorsUsage") or [] for r in f["resources"]),
               Decimal(0))


def test_dashboard_numbers_equal_kubesim_cluster_queue_status(kubesim, cluster, org, watcher):
    running = [submit(kubesim, org["alice"], name=f"r-{i}") for i in range(2)]
    guaranteed = submit(kubesim, org["bob"], project="nlp", preemptible=False, gpus=2, name="g")
    waiting = submit(kubesim, org["alice"], name="waits", gpus=4)
    wait_for(lambda: all(status_of(w) == Status.RUNNING for w in [*running, guaranteed]))
    wait_for(lambda: positions([waiting]) == [0])
    names = {"vision": ["proj-vision-h100-guaranteed", "proj-vision-h100-elastic"],
             "nlp": ["proj-nlp-h100-guaranteed", "proj-nlp-h100-elastic"]}
    expected = {project: sum((_total(cluster.get("ClusterQueue", name).get("status") or {}) for name in queues),
                             Decimal(0)) for project, queues in names.items()}

    def mirrored() -> bool:
        return all(sum((row.used for row in ClusterQueueState.objects.filter(name__in=queues)), Decimal(0))
                   == expected[project] for project, queues in names.items())

    wait_for(mirrored)
    data = signed_in(org["admin"]).get("/api/v1/usage/quota/").json()
    (h100,) = [p for p in data["pools"] if p["pool"] == "h100"]
    research = next(d for d in h100["departments"] if d["slug"] == "research")
    by_slug = {p["slug"]: p for p in research["projects"]}
    assert expected["vision"] == 8 and expected["nlp"] == 2
    assert Decimal(str(by_slug["vision"]["used"])) == expected["vision"]
    assert Decimal(str(by_slug["nlp"]["used"])) == expected["nlp"]
    assert by_slug["vision"]["borrowed"] == 4 and by_slug["vision"]["pending"] == 4 and by_slug["nlp"]["lent"] == 2
    for queue in by_slug["vision"]["queues"]:
        status = cluster.get("ClusterQueue", queue["name"]).get("status") or {}
        assert Decimal(str(queue["used"])) == _total(status)
        assert queue["admitted_workloads"] == status.get("admittedWorkloads", 0)
        assert queue["pending_workloads"] == status.get("pendingWorkloads", 0)
    assert Decimal(str(research["used"])) == 10
    # The page shows the same figures.
    page = signed_in(org["alice"]).get(reverse("usage:quota")).content.decode()
    page = page[page.index('data-pool="h100"'):]
    row = page[page.index('data-level="project" data-slug="vision"'):]
    assert 'data-fact="used">8<' in row[:row.index("</tr>")]


def test_project_queue_page_lists_positions_in_order_then_admits_the_head(kubesim, org, watcher):
    alice = org["alice"]
    holders = [submit(kubesim, alice, name=f"h-{i}", seconds=60) for i in range(2)]
    waiting = [submit(kubesim, alice, name=f"w-{i}", seconds=600) for i in range(3)]
    wait_for(lambda: positions(waiting) == [0, 1, 2])
    client = signed_in(alice)
    page = client.get(reverse("workloads:project_queue", args=["vision"])).content.decode()
    order = [page.index(f'data-workload="{w.pk}" data-status="queued"') for w in waiting]
    assert order == sorted(order) and "#1 in elastic-h100" in page and "#3 in elastic-h100" in page
    assert "2 workloads are ahead of you." in page
    kubesim.advance(61)
    wait_for(lambda: all(status_of(w) == Status.SUCCEEDED for w in holders))
    wait_for(lambda: positions(waiting) == [None, None, 0])
    wait_for(lambda: status_of(waiting[0]) == Status.RUNNING)  # positions may land before the start
    page = client.get(reverse("workloads:project_queue", args=["vision"])).content.decode()
    assert f'data-workload="{waiting[0].pk}" data-status="running"' in page
    assert "#1 in elastic-h100" in page and "#2 in elastic-h100" not in page


def test_log_tail_task_reads_the_pods_generated_logs(kubesim, org, watcher):
    workload = submit(kubesim, org["alice"], name="logs", seconds=600)
    wait_for(lambda: status_of(workload) == Status.RUNNING)
    kubesim.advance(120)
    assert tasks.workload_logs_fetch.apply(args=[workload.pk]).get() == 1
    (tail,) = WorkloadLogTail.objects.filter(workload=workload)
    assert tail.pod.startswith(f"wl-{workload.pk}") and not tail.error
    assert "started, image pytorch/pytorch:2.4.0" in tail.text and "step 1: elapsed" in tail.text
    page = signed_in(org["alice"]).get(reverse("workloads:detail", args=[workload.pk])).content.decode()
    assert "step 1: elapsed" in page
    kubesim.advance(600)
    wait_for(lambda: status_of(workload) == Status.SUCCEEDED)
    tasks.workload_logs_fetch.apply(args=[workload.pk]).get()
    tail.refresh_from_db()
    assert "exited with code 0" in tail.text and len(tail.text.splitlines()) <= logs.TAIL_LINES


def test_log_tail_of_a_workload_without_pods_stores_nothing(kubesim, org, watcher):
    holders = [submit(kubesim, org["alice"], name=f"h-{i}") for i in range(2)]
    waiting = submit(kubesim, org["alice"], name="waits")
    wait_for(lambda: all(status_of(w) == Status.RUNNING for w in holders))
    wait_for(lambda: Workload.objects.get(pk=waiting.pk).status == Status.QUEUED)
    assert tasks.workload_logs_fetch.apply(args=[waiting.pk]).get() == 0
    assert not WorkloadLogTail.objects.filter(workload=waiting).exists()


def test_logs_are_read_at_the_start_and_a_failure_keeps_its_exit_code(kubesim, org, watcher, celery_worker):
    """Nobody asks: the watcher's start asks for the first read, its finish for the last, exit code included."""
    workload = services.workload_submit(
        actor=org["alice"], project=Project.objects.get(slug="vision"), kind=Kind.TRAINING, name="fails",
        image="pytorch/pytorch:2.4.0", command=["sh", "-c", "sleep 30; exit 3"],
        node_pool=NodePool.objects.get(slug="h100"), gpus=1, model_label="resnet", data_class="public")
    wait_for(lambda: status_of(workload) == Status.RUNNING)
    wait_for(lambda: WorkloadLogTail.objects.filter(workload=workload, text__contains="started").exists())
    kubesim.advance(31)
    wait_for(lambda: status_of(workload) == Status.FAILED)
    wait_for(lambda: WorkloadLogTail.objects.filter(workload=workload, exit_code__isnull=False).exists())
    (tail,) = WorkloadLogTail.objects.filter(workload=workload)
    assert (tail.exit_code, tail.exit_reason) == (3, "Error") and "exited with code 3" in tail.text
    page = signed_in(org["alice"]).get(reverse("workloads:detail", args=[workload.pk])).content.decode()
    assert "Exit code <strong>3</strong> (Error)" in page
