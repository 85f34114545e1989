"""Opt-in e-mail about admitted, preempted, finished and failed workloads."""

from django.core import mail

from apps.accounts.services import notification_preference_set
from apps.org.models import NodePool, Project
from apps.workloads import services
from apps.workloads.models import Kind, Status, Workload
from worker import tasks
from worker.status_map import Observation


def make(demo):
    workload = services.workload_submit(
        actor=demo["alice"], project=Project.objects.get(slug="vision"), kind=Kind.TRAINING, name="resnet",
        image="pytorch/pytorch:2.4.0", node_pool=NodePool.objects.get(slug="h100"), gpus=2, model_label="m",
        data_class="public")
    Workload.objects.filter(pk=workload.pk).update(status=Status.QUEUED)
    return workload


def test_nothing_is_sent_without_opting_in(demo, django_capture_on_commit_callbacks):
    workload = make(demo)
    with django_capture_on_commit_callbacks() as callbacks:
        services.workload_observe(workload_id=workload.pk, observation=Observation(status=Status.ADMITTED))
    assert callbacks == []


def test_opted_in_owner_gets_one_mail_per_transition(demo, django_capture_on_commit_callbacks, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    demo["alice"].email = "alice@example.com"
    demo["alice"].save()
    notification_preference_set(user=demo["alice"], on_admitted=True, on_preempted=False, on_finished=True,
                                on_failed=True)
    workload = make(demo)
    with django_capture_on_commit_callbacks() as callbacks:
        services.workload_observe(workload_id=workload.pk, observation=Observation(
            status=Status.ADMITTED, message="The workload is admitted"))
    assert len(callbacks) == 1
    assert tasks.workload_notify.apply(args=[workload.pk, Status.ADMITTED]).get() is True
    (message,) = mail.outbox
    assert message.to == ["alice@example.com"] and message.subject == "[GPU Portal] resnet admitted"
    assert "Kueue says: The workload is admitted" in message.body and f"/workloads/{workload.pk}/" in message.body
    # Replaying the same observation sends nothing more; preemption was not asked for.
    with django_capture_on_commit_callbacks() as callbacks:
        services.workload_observe(workload_id=workload.pk, observation=Observation(status=Status.ADMITTED))
        services.workload_observe(workload_id=workload.pk, observation=Observation(status=Status.QUEUED,
                                                                                   reason="Pending"))
    assert callbacks == []


def test_the_preempted_mail_says_why_it_waits_as_its_owner_may_read_it(demo, settings):
    """Preempted and requeued while Vision is at its limit: the mail gives the same sentence as the pages, with the
    numbers, worded for the owner."""
    from decimal import Decimal

    from django.utils import timezone

    from apps.cluster.models import ClusterQueueState

    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    demo["alice"].email = "alice@example.com"
    demo["alice"].save()
    workload = make(demo)
    vision, h100 = Project.objects.get(slug="vision"), NodePool.objects.get(slug="h100")
    ClusterQueueState.objects.create(name="proj-vision-h100-elastic", project=vision, node_pool=h100,
                                     used=Decimal(8), observed_at=timezone.now())
    Workload.objects.filter(pk=workload.pk).update(status=Status.QUEUED, status_reason="Requeued",
                                                   queue_position_local=0)
    assert tasks.workload_notify.apply(args=[workload.pk, Status.PREEMPTED]).get() is True
    (message,) = mail.outbox
    assert ("Why it waits: Waiting for 2 x H100 80GB: Vision is at its limit there, 8 of 8 in use, so 2 more are "
            "needed") in message.body
    running = make(demo)
    Workload.objects.filter(pk=running.pk).update(status=Status.RUNNING)
    tasks.workload_notify.apply(args=[running.pk, Status.ADMITTED]).get()
    assert "Why it waits" not in mail.outbox[1].body  # it does not wait
