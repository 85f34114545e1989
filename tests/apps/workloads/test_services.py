"""Submission rules through the service: what can never run is refused with a reason, and nothing is saved."""

from datetime import timedelta

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from apps.core.models import Intent
from apps.org import services as org_services
from apps.org.models import NodePool, PriorityClass, Project, Quota
from apps.usage import services as usage_services
from apps.usage.models import UsageInterval
from apps.workloads import services
from apps.workloads.models import Kind, Status, Workload, WorkloadEvent
from apps.workloads.observation import Observation
from tests.conftest import demo_users
from tests.factories import NodePoolFactory
from tests.write_transactions import described, transactions


def submit(user, **overrides):
    values = {"project": Project.objects.get(slug="vision"), "kind": Kind.TRAINING, "name": "run",
              "image": "nvcr.io/nvidia/pytorch:24.05-py3", "node_pool": NodePool.objects.get(slug="h100"),
              "gpus": 1, "model_label": "resnet50", "data_class": "public"}
    values.update(overrides)
    return services.workload_submit(actor=user, **values)


def refused(user, **overrides):
    with pytest.raises(ValidationError) as caught:
        submit(user, **overrides)
    assert not Workload.objects.exists()
    return caught.value.message_dict


def test_accepted_submission_is_a_submitting_row_with_an_event(demo, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:
        workload = submit(demo["alice"], pods=2, gpus=2)
    assert len(callbacks) == 1
    assert workload.status == Status.SUBMITTING and workload.job_name == f"wl-{workload.pk}"
    assert workload.gpu_units == 4 and workload.queue_name == "elastic-h100"
    assert workload.priority_class.name == "train"
    event = WorkloadEvent.objects.get(workload=workload)
    assert (event.to_status, event.reason) == (Status.SUBMITTING, "Submitted")


@pytest.mark.parametrize(("overrides", "field", "text"), [
    ({"node_pool": "missing"}, "node_pool", "has no quota on"),
    ({"gpus": 9}, "gpus", "may use at most 8 there (its limit)"),
    ({"gpus": 3, "pods": 3}, "gpus", "asks for 9"),
    ({"gpus": 17}, "gpus", "has 16 units in all"),
    ({"gpus": 5, "preemptible": False}, "preemptible", "Non-preemptible work must fit in Vision's deserved quota"),
    ({"image": "not an image"}, "image", "is not a valid image reference"),
    ({"image": "UPPER/case:1"}, "image", "is not a valid image reference"),
    ({"name": "Bad_Name"}, "name", "DNS-1123"),
    ({"env": [{"name": "1BAD", "value": "x"}]}, "env", "is not a valid environment variable name"),
    ({"env": [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]}, "env", "A is set twice"),
    ({"env": [{"name": "PORTAL_X", "value": "1"}]}, "env", "set by the portal"),
    ({"model_label": ""}, "model_label", "The model audit label is required."),
    ({"data_class": "has space"}, "data_class", "not a valid Kubernetes label value"),
    ({"kind": Kind.NOTEBOOK, "pods": 2}, "pods", "A notebook runs in exactly one pod."),
    ({"kind": Kind.BATCH, "completions": 2, "parallelism": 3}, "parallelism", "cannot exceed the number of"),
    ({"gpus": 100}, "gpus", "less than or equal to 64"),
    ({"cpu": -1}, "cpu", "greater than or equal to 0"),
    ({"memory_gib": 100000}, "memory_gib", "less than or equal to 4096"),
    ({"max_runtime_seconds": 10}, "max_runtime_seconds", "greater than or equal to 60"),
    ({"command": ["ok", 3]}, "command", "list of strings"),
])
def test_refusals(demo, overrides, field, text):
    if overrides.get("node_pool") == "missing":
        overrides["node_pool"] = NodePoolFactory(slug="h200", name="H200")
    errors = refused(demo["alice"], **overrides)
    assert field in errors, errors
    assert any(text in message for message in errors[field]), errors


def test_preemptible_work_that_could_never_hold_its_units_is_refused(demo):
    """Kueue's potential capacity with every queue idle: Serving lends nothing (not even to its own elastic queue)
    and has no over-quota, so its preemptible work can never start; ETL (deserved 0) borrows only through
    Production, whose only H100 quota is Serving's and which may not borrow from the pool."""
    admin = demo["admin"]
    h100 = NodePool.objects.get(slug="h100")
    errors = refused(admin, project=Project.objects.get(slug="serving"), gpus=2, preemptible=True)
    assert errors["preemptible"] == [
        "Preemptible work of Serving can hold at most 0 H100 80GB units, even with the pool idle (Serving does not "
        "lend its deserved quota, even to its own preemptible work, and its limit leaves no over-quota); this asks "
        "for 2. Mark it non-preemptible to run inside the deserved quota (4 units), or ask for fewer GPUs."]
    errors = refused(admin, project=Project.objects.get(slug="etl"), node_pool=h100, gpus=1, preemptible=True)
    assert errors["preemptible"] == ["Preemptible work of ETL can hold at most 0 H100 80GB units, even with the pool "
                                     "idle; this asks for 1. Ask for fewer GPUs."]
    # Vision lends and borrows: its preemptible work may take its limit, 8.
    errors = refused(admin, gpus=3, pods=3, preemptible=True)
    assert "preemptible" not in errors and "may use at most 8 there" in errors["gpus"][0]
    assert submit(admin, project=Project.objects.get(slug="serving"), gpus=2, preemptible=False).pk
    assert submit(admin, gpus=4, pods=2, preemptible=True).gpu_units == 8


def test_cpu_and_memory_quota_are_checked_per_pod(demo):
    Quota.objects.filter(project__slug="vision", node_pool__slug="h100").update(cpu_cores=8, memory_gib=64)
    assert "cpu" in refused(demo["alice"], pods=3, cpu=3)
    assert "memory_gib" in refused(demo["alice"], pods=2, memory_gib=40)
    assert submit(demo["alice"], pods=2, cpu=4, memory_gib=32).pk


def test_only_members_submit(demo):
    with pytest.raises(PermissionDenied):
        submit(demo["bob"])
    with pytest.raises(PermissionDenied):
        submit(demo["viewer"])
    assert not Workload.objects.exists()


def test_non_preemptible_default_priority_class(demo):
    workload = submit(demo["alice"], preemptible=False, gpus=2)
    assert workload.priority_class == PriorityClass.objects.get(name="build")
    assert workload.queue_name == "guaranteed-h100"


def test_stop_rules(demo, django_capture_on_commit_callbacks):
    workload = submit(demo["alice"])
    with pytest.raises(PermissionDenied):
        services.workload_stop(actor=demo["bob"], workload=workload)
    with pytest.raises(PermissionDenied):
        services.workload_stop(actor=demo["viewer"], workload=workload)
    with django_capture_on_commit_callbacks() as callbacks:
        services.workload_stop(actor=demo["lead"], workload=workload)
    assert len(callbacks) == 1
    workload.refresh_from_db()
    assert workload.status == Status.STOPPING and workload.stop_requested_by == demo["lead"]
    from apps.core.models import AuditEvent

    assert AuditEvent.objects.filter(action="workload.stop", actor=demo["lead"]).exists()
    with pytest.raises(ValidationError, match="nothing to stop"):
        services.workload_stop(actor=demo["alice"], workload=workload)


def test_submit_own_stop_resubmit_and_bulk_stop_are_audited_where_admins_read_the_log(demo, client_for):
    from django.urls import reverse

    from apps.core.models import AuditEvent

    alice = demo["alice"]
    first = submit(alice, name="first")
    services.workload_stop(actor=alice, workload=first)
    again = submit(alice, name="again", resubmitted_from=first)
    second = submit(alice, name="second")
    services.workloads_stop(actor=alice, workloads=[second, again])
    rows = [(e.action, int(e.object_id), e.actor.username, e.project.slug, e.department.slug)
            for e in AuditEvent.objects.filter(object_type="workload").select_related(
                "actor", "project", "department").order_by("id")]
    assert rows == [("workload.submit", first.pk, "alice", "vision", "research"),
                    ("workload.stop", first.pk, "alice", "vision", "research"),
                    ("workload.resubmit", again.pk, "alice", "vision", "research"),
                    ("workload.submit", second.pk, "alice", "vision", "research"),
                    ("workload.stop", again.pk, "alice", "vision", "research"),
                    ("workload.stop", second.pk, "alice", "vision", "research")]
    resubmitted = AuditEvent.objects.get(action="workload.resubmit")
    assert resubmitted.after["resubmitted_from_id"] == first.pk and resubmitted.after["gpus"] == 1
    assert [e.after["bulk"] for e in AuditEvent.objects.filter(action="workload.stop").order_by("id")] == [
        False, True, True]
    page = client_for("admin").get(reverse("org:audit"), {"object_type": "workload"}).content.decode()
    shown = [action for action in ("workload.submit", "workload.resubmit", "workload.stop")
             for _ in range(page.count(f'<tr data-action="{action}">'))]
    assert sorted(shown) == sorted(action for action, *_ in rows)


def test_deserved_cannot_drop_below_running_non_preemptible_work(demo):
    workload = submit(demo["alice"], preemptible=False, gpus=3)
    Workload.objects.filter(pk=workload.pk).update(status=Status.RUNNING)
    pool = NodePool.objects.get(slug="h100")
    vision = Project.objects.get(slug="vision")
    with pytest.raises(ValidationError) as caught:
        org_services.quota_set(actor=demo["admin"], node_pool=pool, project=vision, deserved=2, limit=8,
                               over_quota_weight=2)
    assert "Running non-preemptible work in this project holds 3 h100 units" in caught.value.message_dict["deserved"][0]
    assert Quota.objects.get(project=vision, node_pool=pool).deserved == 4
    # Preemptible or finished work does not hold the guarantee.
    Workload.objects.filter(pk=workload.pk).update(status=Status.SUCCEEDED)
    assert org_services.quota_set(actor=demo["admin"], node_pool=pool, project=vision, deserved=2, limit=8,
                                  over_quota_weight=2).deserved == 2


def test_claim_is_exclusive(demo):
    workload = submit(demo["alice"])
    first = services.workload_claim_submit(workload_id=workload.pk)
    assert first.workload is not None and not first.busy and len(first.intents.ids) == 1
    [intent] = Intent.objects.filter(kind="workload.submit", target_id=workload.pk)
    assert intent.claimed_until is not None and intent.attempts == 1
    assert Workload.objects.get(pk=workload.pk).submit_attempts == 1
    assert services.workload_claim_submit(workload_id=workload.pk).busy  # its intents are leased
    # The lease ran out while the row's claim is live (a slow worker): not ours, and the lease goes back.
    Intent.objects.filter(pk=intent.pk).update(claimed_until=timezone.now() - timedelta(seconds=1))
    second = services.workload_claim_submit(workload_id=workload.pk)
    assert second.workload is None and not second.busy
    intent.refresh_from_db()
    assert intent.claimed_until is None and intent.done_at is None and intent.attempts == 2
    assert Workload.objects.get(pk=workload.pk).submit_attempts == 1


def test_a_claim_of_a_row_no_longer_submitting_closes_its_intents(demo):
    workload = submit(demo["alice"])
    Workload.objects.filter(pk=workload.pk).update(status=Status.QUEUED)  # the watcher saw its Job first
    claim = services.workload_claim_submit(workload_id=workload.pk)
    assert claim.workload is None and not claim.busy
    intent = Intent.objects.get(kind="workload.submit", target_id=workload.pk)
    assert intent.done_at is not None and intent.outcome == "not submitting" and intent.claimed_until is None


def test_a_submission_is_one_write_transaction_of_five_statements(demo):
    """The POST's transaction: on SQLite it holds the database's one write lock, so it carries only the writes (the
    department of the audit row is its project's id, and a submission without attachments writes none)."""
    with CaptureQueriesContext(connection) as captured:
        submit(demo["alice"])
    [written] = transactions(captured.captured_queries)
    assert described(written) == ["INSERT workloads_workload", "UPDATE workloads_workload",
                                  "INSERT workloads_workloadevent", "INSERT core_intent", "INSERT core_auditevent"]


def test_queue_positions_write_only_what_changed_in_one_transaction(demo):
    first, second, third = (submit(demo["alice"], name=f"run-{index}") for index in range(3))
    Workload.objects.filter(pk__in=[first.pk, second.pk, third.pk]).update(status=Status.QUEUED)
    Workload.objects.filter(pk=third.pk).update(queue_position_local=5, queue_position_cluster=9)
    listed = {first.pk: (1, 1), second.pk: (2, 3)}  # Kueue no longer lists the third
    with CaptureQueriesContext(connection) as captured:
        assert services.workload_positions_set(positions=listed, at=timezone.now(), queued={
            first.pk: (None, None), second.pk: (2, 3), third.pk: (5, 9)}) == 2
    [written] = transactions(captured.captured_queries)
    assert described(written) == ["UPDATE workloads_workload", "UPDATE workloads_workload"]
    assert dict(Workload.objects.values_list("pk", "queue_position_local")) == {
        first.pk: 1, second.pk: None, third.pk: None}  # the second was written by nobody: it had (2, 3) when read
    # Nothing changed since: nothing is written, not even a transaction begun.
    with CaptureQueriesContext(connection) as captured:
        assert services.workload_positions_set(positions=listed, at=timezone.now(), queued={
            first.pk: (1, 1), second.pk: (2, 3), third.pk: (None, None)}) == 0
    assert not captured.captured_queries


def test_the_watcher_moves_a_row_it_locked_without_reading_it_again(demo):
    """workload_observe locks the row first, read with its project (its namespace for the event's message): its
    transition is the conditional UPDATE alone (no second read, no savepoint)."""
    workload = submit(demo["alice"])
    with CaptureQueriesContext(connection) as captured:
        moved = services.workload_observe(workload_id=workload.pk, observation=Observation(
            status=Status.QUEUED, reason="Pending", message="waiting for quota", kueue_name=f"job-{workload.job_name}"))
    assert moved == [Status.QUEUED]
    [observed] = transactions(captured.captured_queries)
    assert described(observed) == [
        "SELECT workloads_workload",  # the row, locked, with its project, owner and pool
        "UPDATE workloads_workload", "INSERT workloads_workloadevent", "UPDATE core_intent",  # the transition
        "SELECT org_notificationchannel", "UPDATE workloads_workload"]  # who listens; the mirror of Kueue's Workload
    assert Workload.objects.get(pk=workload.pk).kueue_name == f"job-{workload.job_name}"


def test_a_batch_of_rows_is_observed_in_one_transaction_reading_rows_and_listeners_once(demo):
    """workloads_observe: the rows are read and locked in one statement and the notification channels read once for
    the batch; what remains is each row's own writes, the status and what Kueue says in one UPDATE."""
    rows = [submit(demo["alice"], name=f"run-{index}") for index in range(4)]
    Workload.objects.filter(pk__in=[row.pk for row in rows]).update(status=Status.QUEUED)
    now = timezone.now()
    admitted = Observation(status=Status.ADMITTED, reason="Admitted", message="admitted by cq", at=now,
                           kueue_name="wl", cluster_queue="cq", admission={"clusterQueue": "cq"}, admitted_at=now)
    with CaptureQueriesContext(connection) as captured, usage_services.ledger_deferred():  # as the watcher runs it
        moved = services.workloads_observe(observations=[(row.pk, admitted, None) for row in rows])
    assert moved == {row.pk: [Status.ADMITTED] for row in rows}
    [observed] = transactions(captured.captured_queries)
    assert not [query for query in captured.captured_queries if query["sql"].startswith("SAVEPOINT")][1:]
    statements = described(observed)
    # The rows with their project, owner and pool, locked; who listens and who wants e-mail, once each; then each
    # row's own: its status and Kueue's mirror in one UPDATE, its event, its ledger stretch (checked, written, its
    # timeline marked).
    assert statements == ["SELECT workloads_workload", *[
        statement for index in range(len(rows)) for statement in (
            ["UPDATE workloads_workload", "INSERT workloads_workloadevent"]
            + ["SELECT org_notificationchannel"] * (index == 0)
            + ["SELECT usage_usageinterval", "INSERT usage_usageinterval", "INSERT usage_pendingrecompute"]
            + ["SELECT accounts_notificationpreference"] * (index == 0))]]
    assert set(Workload.objects.filter(pk__in=[row.pk for row in rows]).values_list(
        "status", "cluster_queue", "admitted_at")) == {(Status.ADMITTED, "cq", now)}
    assert UsageInterval.objects.filter(workload__in=rows, started_at=now, ended_at=None).count() == len(rows)


def test_a_reason_longer_than_the_portal_keeps_is_cut_not_refused(demo):
    """A condition reason may run to 1,024 characters (another controller's): the row and its event keep the first
    100, and the observation is recorded, not failed at every retry."""
    workload = submit(demo["alice"])
    reason = "Waiting" + "X" * 500
    moved = services.workload_observe(workload_id=workload.pk, observation=Observation(
        status=Status.QUEUED, reason=reason, message="long", kueue_name="wl"))
    assert moved == [Status.QUEUED]
    services.workload_observe(workload_id=workload.pk, observation=Observation(
        status=Status.ADMITTED, reason=reason, message="long", kueue_name="wl", at=timezone.now(),
        admitted_at=timezone.now()))
    row = Workload.objects.get(pk=workload.pk)
    assert (row.status, row.status_reason) == (Status.ADMITTED, reason[:100])
    assert row.events.get(to_status=Status.ADMITTED).reason == reason[:100]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="row locks are PostgreSQL's (SQLite has one writer)")
def test_a_batch_does_not_wait_for_a_transaction_whose_rows_name_its_workloads(transactional_db):
    """Another transaction that inserts a row naming a workload (an Event's, whose foreign key is checked with a key
    share lock) holds that lock until it commits: the batch locks its rows as an UPDATE does, which that lock lets
    through, so neither waits for the other (waiting both ways was a deadlock under load)."""
    import psycopg

    workload = submit(demo_users()["alice"])
    settings = connection.settings_dict
    other = psycopg.connect(host=settings["HOST"], port=settings["PORT"] or 5432, user=settings["USER"],
                            password=settings["PASSWORD"], dbname=settings["NAME"])
    try:
        other.execute("SET CONSTRAINTS ALL IMMEDIATE")  # the foreign key checked now, its lock held until commit
        other.execute("INSERT INTO workloads_workloadevent (workload_id, at, from_status, to_status, reason, message, "
                      "details) VALUES (%s, now(), '', '', 'Other', '', '{}')", [workload.pk])
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '2s'")  # a wait would fail the batch instead of hanging the test
        try:
            moved = services.workloads_observe(observations=[(workload.pk, Observation(
                status=Status.QUEUED, reason="Pending", message="waiting", kueue_name="wl"), None)])
        finally:
            with connection.cursor() as cursor:
                cursor.execute("SET lock_timeout = 0")
        assert moved == {workload.pk: [Status.QUEUED]}
        other.commit()
    finally:
        other.close()
    assert WorkloadEvent.objects.filter(workload=workload, reason="Other").exists()
