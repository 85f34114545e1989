"""Opt-in e-mail about admitted, preempted, finished and failed workloads."""

from django.core import mail

from apps.accounts.services import notification_preference_set
from apps.org.models import NodePool, Project
from apps.workloads import services
from apps.workloads.models import Kind, Status, Workload
from apps.workloads.observation import Observation
from worker import tasks


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
    assert "Queue position: #1 in " in message.body  # counted from 1, as the pages and the CLI count
    running = make(demo)
    Workload.objects.filter(pk=running.pk).update(status=Status.RUNNING)
    tasks.workload_notify.apply(args=[running.pk, Status.ADMITTED]).get()
    assert "Why it waits" not in mail.outbox[1].body  # it does not wait


def test_the_preempted_mail_says_when_by_whom_and_why_in_one_plain_sentence(demo, settings):
    """Preempted by NLP's work (alice may not see NLP), then requeued: the mail says it as the detail page does,
    without Kueue's UIDs and cohort paths, and the workload is `requeued` with its own event."""
    from datetime import UTC, datetime

    from apps.workloads.observation import Preemption

    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    demo["alice"].email = "alice@example.com"
    demo["alice"].save()
    workload = make(demo)
    Workload.objects.filter(pk=workload.pk).update(status=Status.RUNNING)
    preemptor = services.workload_submit(
        actor=demo["bob"], project=Project.objects.get(slug="nlp"), kind=Kind.TRAINING, name="reclaim",
        image="pytorch/pytorch:2.4.0", node_pool=NodePool.objects.get(slug="h100"), gpus=2, model_label="m",
        data_class="public", preemptible=False)
    Workload.objects.filter(pk=preemptor.pk).update(status=Status.RUNNING, k8s_uid="job-uid-r")
    at = datetime(2026, 3, 1, 10, 0, 5, tzinfo=UTC)
    message = ("Preempted to accommodate a workload (UID: kueue-uid-r, JobUID: job-uid-r) due to reclamation within "
               "the cohort; preemptor path: /portal-h100/dept-research/proj-nlp; preemptee path: "
               "/portal-h100/dept-research/proj-vision")
    preemption = Preemption(at=at, reason="InCohortReclamation", message=message,
                            preemptor_workload_uid="kueue-uid-r", preemptor_job_uid="job-uid-r")
    moved = services.workload_observe(workload_id=workload.pk, observation=Observation(
        status=Status.PREEMPTED, reason="InCohortReclamation", message=message, at=at, preemption=preemption))
    assert moved == [Status.PREEMPTED]
    moved = services.workload_observe(workload_id=workload.pk, observation=Observation(
        status=Status.QUEUED, reason="Pending", message="couldn't assign flavors", at=at, preemption=preemption))
    assert moved == [Status.REQUEUED]
    assert Workload.objects.get(pk=workload.pk).status == Status.REQUEUED
    assert tasks.workload_notify.apply(args=[workload.pk, Status.PREEMPTED]).get() is True
    (mail_sent,) = mail.outbox
    assert ("Preempted on 2026-03-01 10:00:05 UTC by a workload of a project you cannot see, to give back borrowed "
            "quota to the project that deserves it.") in mail_sent.body.splitlines()
    for raw in ("UID", "preemptor path", "/portal-h100", "Kueue says"):
        assert raw not in mail_sent.body
