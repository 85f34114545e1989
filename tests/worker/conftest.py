import weakref

import pytest

from kubesim.testing import InProcessKubesim, serve
from tests.conftest import demo_users
from worker.gateway import Gateway, reset_gateway


@pytest.fixture(scope="module")
def kubesim():
    """A kubesim on a free port for this test module, manual clock."""
    with serve(clock="manual") as served:
        yield served


# kubesim -> (the objects the organisation asked for, the cluster right after reconciling them into a clean one)
_reconciled: weakref.WeakKeyDictionary[InProcessKubesim, tuple[list[dict], dict]] = weakref.WeakKeyDictionary()


def reconcile_organisation(kubesim: InProcessKubesim, gateway: Gateway) -> None:
    """The organisation in the database reconciled into the clean cluster, as kueue sync does. The first time per
    kubesim for a given organisation it reconciles for real and keeps a snapshot of the result; afterwards it puts
    that snapshot back (the same objects, in milliseconds instead of a second)."""
    from worker.kueue_sync import desired_from_database, reconcile

    desired = desired_from_database()
    known = _reconciled.get(kubesim)
    if known is not None and known[0] == desired:
        kubesim.restore(known[1])
        return
    reconcile(gateway, desired)
    _reconciled[kubesim] = (desired, kubesim.snapshot())


@pytest.fixture
def cluster(kubesim):
    """A clean cluster and the worker's gateway pointed at it."""
    kubesim.reset()
    gw = Gateway(kubesim.api_client())
    reset_gateway(gw)
    yield gw
    reset_gateway(None)


@pytest.fixture
def synced(demo, kubesim, cluster):
    """The demo organisation (inside this test's transaction) reconciled into the cluster; the worker's gateway."""
    reconcile_organisation(kubesim, cluster)
    return cluster


@pytest.fixture
def org(kubesim, cluster, transactional_db):
    """For tests with the real worker or watcher threads (committed rows): the demo organisation (committed, put back
    after each transactional test) reconciled into the cluster; username -> user."""
    users = demo_users()
    reconcile_organisation(kubesim, cluster)
    return users


def signed_in(user):
    """A Django test client signed in as `user`."""
    from django.test import Client

    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def celery_worker(transactional_db, settings):
    """A real Celery worker (thread, solo pool) consuming this run's queues on the configured broker: the default
    one and the notifications one (tests/worker/test_notification_queue.py keeps them apart)."""
    yield from _celery_worker(settings, [settings.CELERY_TASK_DEFAULT_QUEUE, settings.NOTIFICATIONS_QUEUE])


@pytest.fixture
def default_queue_worker(transactional_db, settings):
    """A real Celery worker (thread, solo pool) consuming this run's default queue only, as the deployments' worker."""
    yield from _celery_worker(settings, [settings.CELERY_TASK_DEFAULT_QUEUE])


def _celery_worker(settings, queues: list[str]):
    from celery.contrib.testing.worker import start_worker

    from portal.celery import app

    (settings.BROKER_DIR / "control").mkdir(parents=True, exist_ok=True)
    app.conf.task_default_queue = settings.CELERY_TASK_DEFAULT_QUEUE
    with app.connection_for_write() as connection:
        for queue in queues:
            connection.default_channel.queue_purge(queue)  # leftovers of an aborted run
    import threading

    from celery.signals import task_postrun
    from django.db import connection

    def close_connection(**_: object) -> None:
        """After each task in the worker's thread, its own connection (kept for CONN_MAX_AGE otherwise, it would
        outlive the test and hold the test database open at teardown); tasks applied in the test's thread keep
        theirs."""
        if threading.current_thread() is not threading.main_thread():
            connection.close()

    task_postrun.connect(close_connection, weak=False)
    try:
        with start_worker(app, pool="solo", concurrency=1, perform_ping_check=False, shutdown_timeout=30,
                          queues=queues) as worker:
            yield worker
    finally:
        task_postrun.disconnect(close_connection)


def wait_for(predicate, timeout: float = 30.0, interval: float = 0.1, describe=None):
    """Poll until predicate() is truthy (work done by another thread or process); fail after timeout."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    detail = f": {describe()}" if describe else ""
    raise AssertionError(f"condition not met within {timeout}s{detail}")


def kueue_workload(cluster, workload):
    """Kueue's Workload object for a portal workload's Job (None until Kueue made one)."""
    items = cluster.list("Workload", namespace=workload.project.namespace,
                         label_selector=f"kueue.x-k8s.io/job-uid={workload.k8s_uid}")
    return items[0] if items else None


@pytest.fixture
def watcher(kubesim, cluster, transactional_db):
    """The real watcher, in threads of this process, against the test's kubesim."""
    from worker.watcher import Watcher

    running = Watcher(cluster, resync_seconds=3600, positions_seconds=0.2, watch_timeout_seconds=2)
    running.start()
    yield running
    stop_watcher(running, kubesim)


def stop_watcher(running, kubesim) -> None:
    """Watcher.stop(), without waiting up to a watch timeout for the open watch streams to notice."""
    running.stopping.set()  # the loops end at their next wake-up ...
    if isinstance(kubesim, InProcessKubesim):
        kubesim.end_watches()  # ... which for a watch stream is now
    running.stop()


GPU = "nvidia.com/gpu"


def serving_pool(kubesim, org, *, cards: int):
    """A serving pool of one 4-GPU node, with vision reserving `cards` of its cards."""
    from kubernetes import client

    from apps.org import services as org_services
    from apps.org.models import Project

    core = client.CoreV1Api(kubesim.api_client())
    node = core.create_node({"metadata": {"name": "serve-l4-node-0", "labels": {"portal.gpu/pool": "serve-l4"}}})
    node.status = {"allocatable": {GPU: "4", "cpu": "32", "memory": "256Gi", "pods": "110"},
                   "capacity": {GPU: "4", "cpu": "32", "memory": "256Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]}
    core.replace_node_status("serve-l4-node-0", node)
    pool = org_services.node_pool_create(actor=org["admin"], slug="serve-l4", name="L4 serving", gpu_resource=GPU,
                                         capacity=4, serving=True, node_labels={"portal.gpu/pool": "serve-l4"})
    org_services.serving_reservation_create(actor=org["admin"], project=Project.objects.get(slug="vision"),
                                            node_pool=pool, cards=cards)
    return pool


@pytest.fixture
def web_reaches_kubesim(kubesim, settings):
    """The web process's relay (notebooks, inference endpoints) talks to this kubesim through the API server's
    service proxy."""
    from apps.workloads import notebooks

    settings.KUBECONFIG = kubesim.kubeconfig_path
    settings.NOTEBOOK_EXPOSE = "proxy"
    notebooks.forget_client()
    yield
    notebooks.forget_client()


def run_submit_task(workload) -> None:
    """Run the submit task for a workload in this process; when a test runs a Celery worker too, the task sent on
    commit may get there first ('busy' or 'not claimed' here): then wait for its submission instead."""
    from apps.workloads.models import Status, Workload
    from worker import tasks

    def status():
        return Workload.objects.get(pk=workload.pk).status

    outcome = tasks.workload_submit.apply(args=[workload.pk]).get()
    if outcome != "submitted":
        assert outcome in ("busy", "not claimed"), outcome
        wait_for(lambda: status() != Status.SUBMITTING)
    assert status() not in (Status.SUBMITTING, Status.SUBMIT_FAILED)
