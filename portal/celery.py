"""The Celery app. Tasks live in worker/; the web enqueues them by name through apps.core.tasks.enqueue.

Signals carry the request id (apps/core/request_ids.py) from whoever sends a task into the task's log lines and
whatever it creates, count task failures, and start the worker's metrics port.
"""

import os
from contextvars import Token
from typing import Any

from celery import Celery, bootsteps, signals
from click import Option
from django.conf import settings

from apps.core import metrics, request_ids

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["worker"])


class ThreadedBeat(bootsteps.StartStopStep):
    """`celery worker --beat-thread`: beat as a thread of the worker, the schedule and scheduler of the settings
    (Celery's own `-B` forks a process for it). make run's single worker runs it so, one process fewer; a deployment
    runs beat as its own process (its own liveness probe, one beat for any number of workers)."""

    label = "ThreadedBeat"
    conditional = True

    def __init__(self, worker: Any, beat_thread: bool = False, **options: Any) -> None:
        self.enabled = bool(beat_thread)
        super().__init__(worker, **options)

    def create(self, worker: Any) -> Any:
        from celery.beat import EmbeddedService

        return EmbeddedService(worker.app, thread=True, schedule_filename=worker.schedule_filename,
                               scheduler_cls=worker.scheduler)


app.user_options["worker"].add(Option(["--beat-thread"], is_flag=True, default=False,
                                      help="Run beat (the periodic tasks) in a thread of this worker."))
app.steps["worker"].add(ThreadedBeat)

# The tasks that wait on receivers outside the cluster, each at most its own deadline: notification deliveries to
# webhooks, Slack and Teams (worker/notifications.py) and the e-mails about a workload or a budget (the mail server).
NOTIFICATION_TASKS = frozenset({
    "worker.tasks.notification_deliver",
    "worker.tasks.workload_notify",
    "worker.tasks.workload_idle_notify",
    "worker.tasks.budget_notify",
})


def route_task(name: str, args: Any, kwargs: Any, options: Any, task: Any = None, **_: Any) -> dict[str, str] | None:
    """CELERY_TASK_ROUTES: the notification tasks to the notifications queue, whoever sends them (a service after
    commit, the outbox's sweep, a retry); everything else to the default queue. Read at each send, so a run that
    renames the queues (the tests, one pair per run) routes to its own."""
    if name in NOTIFICATION_TASKS:
        return {"queue": settings.NOTIFICATIONS_QUEUE}
    return None


_bound: dict[str, Token[str]] = {}  # task id -> the token to restore when it ends


@signals.before_task_publish.connect
def _send_request_id(headers: dict[str, Any] | None = None, **_: Any) -> None:
    if headers is not None and request_ids.current():
        headers.setdefault(request_ids.TASK_HEADER, request_ids.current())


@signals.task_prerun.connect
def _bind_request_id(task_id: str = "", task: Any = None, **_: Any) -> None:
    request = task.request if task is not None else None
    sent = getattr(request, request_ids.TASK_HEADER, None) or (getattr(request, "headers", None) or {}).get(
        request_ids.TASK_HEADER)
    if sent:
        _bound[task_id] = request_ids.bind(request_ids.accepted(sent))


@signals.task_postrun.connect
def _unbind_request_id(task_id: str = "", **_: Any) -> None:
    token = _bound.pop(task_id, None)
    if token is not None:
        request_ids.unbind(token)


@signals.task_failure.connect
def _count_failure(sender: Any = None, **_: Any) -> None:
    metrics.TASK_FAILURES.labels(getattr(sender, "name", "unknown")).inc()


@signals.worker_init.connect
def _serve_worker_metrics(**_: Any) -> None:
    metrics.serve_metrics(settings.WORKER_METRICS_PORT)
