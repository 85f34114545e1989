"""The workload API's endpoints beyond submit/list/stop: logs (tail and follow), resubmit, keep-alive, templates;
and the API's conditional reads (ETag, 304)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.cache import cache
from django.test import Client
from django.utils import timezone

from apps.core.models import AuditEvent
from apps.workloads.api.logs import new_lines
from apps.workloads.models import Kind, Status, Workload, WorkloadLogTail, WorkloadTemplate
from tests.api_support import call, personal_token
from tests.apps.workloads.test_views_queue import running

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def clean_cache():
    cache.clear()
    yield
    cache.clear()


def _tail(workload, text, *, pod="run-0", at=None):
    WorkloadLogTail.objects.update_or_create(workload=workload, pod=pod, defaults={
        "text": text, "fetched_at": at or timezone.now()})


# --- logs --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("sent", "current", "expected"), [
    ([], ["a", "b"], ["a", "b"]),
    (["a", "b"], ["a", "b", "c"], ["c"]),
    (["a", "b", "c"], ["b", "c", "d", "e"], ["d", "e"]),  # the window moved on
    (["a", "b"], ["a", "b"], []),
    (["x"], ["a", "b"], ["a", "b"]),  # no overlap: everything is new
    (["step", "step"], ["step", "step", "step"], ["step"]),  # repeated lines: the longest overlap counts
])
def test_new_lines_follow_what_was_sent(sent, current, expected):
    assert new_lines(sent, current) == expected


def test_logs_answer_the_stored_tails_and_ask_for_a_fresh_read(client_for, make_workload, monkeypatch,
                                                               django_capture_on_commit_callbacks):
    from apps.workloads import logs
    from apps.workloads.api import logs as api_logs

    sent = []
    monkeypatch.setattr(logs, "enqueue_on_commit", lambda name, *args: sent.append(args))
    monkeypatch.setattr(api_logs, "FIRST_READ_SECONDS", 0.3)  # no worker here: the first read waits in vain
    workload = running(make_workload("alice", gpus=1))
    response = call(client_for("alice"), "GET", f"workloads/{workload.pk}/logs/")
    assert response.status_code == 200
    assert response.json() == {"workload": workload.pk, "status": "running", "pending": True, "pods": []}
    assert sent == [(workload.pk,)]
    _tail(workload, "one\ntwo\nthree\n")
    body = call(client_for("bob"), "GET", f"workloads/{workload.pk}/logs/?lines=2")
    assert body.status_code == 404  # bob may not see alice's vision work
    body = call(client_for("lead"), "GET", f"workloads/{workload.pk}/logs/?lines=2").json()
    assert body["pending"] is False and body["pods"][0]["lines"] == ["two", "three"]
    assert body["pods"][0]["exit_code"] is None and body["pods"][0]["exit_reason"] == ""
    WorkloadLogTail.objects.filter(workload=workload).update(exit_code=137, exit_reason="OOMKilled")
    pod = call(client_for("alice"), "GET", f"workloads/{workload.pk}/logs/").json()["pods"][0]
    assert (pod["exit_code"], pod["exit_reason"]) == (137, "OOMKilled")
    for bad in ("lines=0", "lines=abc", "lines=101", "follow=maybe", "timeout=0"):
        refused = call(client_for("alice"), "GET", f"workloads/{workload.pk}/logs/?{bad}")
        assert refused.status_code == 400 and bad.split("=")[0] in refused.json(), bad


def test_the_first_read_of_a_running_workload_waits_for_the_workers_read(make_workload):
    from apps.workloads.api import logs as api_logs

    workload = running(make_workload("alice", gpus=1))
    waits = []

    def worker_reads_meanwhile(seconds: float) -> bool:
        waits.append(seconds)
        if len(waits) == 3:
            _tail(workload, "kubesim: container main started\n")
        return True

    (tail,) = api_logs.first_read(workload=workload, wait=worker_reads_meanwhile)
    assert tail.text == "kubesim: container main started\n" and len(waits) == 3
    # Stored already: no wait. Queued (no pods yet): nothing to wait for.
    assert api_logs.first_read(workload=workload, wait=lambda _s: pytest.fail("waited")) == [tail]
    queued = make_workload("alice", gpus=1, name="later")
    assert api_logs.first_read(workload=queued, wait=lambda _s: pytest.fail("waited")) == []


def test_a_client_that_hangs_up_ends_the_wait_between_polls():
    import socket
    import time

    from apps.workloads.api.logs import client_waiter

    server, client = socket.socketpair()
    with server, client:
        wait = client_waiter({"gunicorn.socket": server})
        started = time.monotonic()
        assert wait(0.2) is True and time.monotonic() - started >= 0.2  # still there: a full wait
        client.close()
        started = time.monotonic()
        assert wait(5) is False and time.monotonic() - started < 1  # gone: at once
    server, client = socket.socketpair()
    with server, client:
        wait = client_waiter({"gunicorn.socket": server})
        client.sendall(b"GET / HTTP/1.1\r\n")  # bytes sent ahead (pipelining) are no hang-up, nor a busy loop
        started = time.monotonic()
        assert wait(0.2) is True and time.monotonic() - started >= 0.2


def test_following_a_finished_workload_sends_its_lines_once_and_closes(client_for, make_workload, monkeypatch):
    from apps.workloads.api import logs as api_logs

    monkeypatch.setattr(api_logs, "enqueue_on_commit", lambda *args: None)
    workload = running(make_workload("alice", gpus=1))
    finished = timezone.now() - timedelta(minutes=1)
    Workload.objects.filter(pk=workload.pk).update(status=Status.SUCCEEDED, finished_at=finished)
    _tail(workload, "started\nstep 1\nexited with code 0\n")  # read after it finished: nothing more will come
    response = client_for("alice").get(f"/api/v1/workloads/{workload.pk}/logs/?follow=true&timeout=1")
    assert response.status_code == 200 and response.streaming
    assert response["Content-Type"].startswith("text/plain") and "ETag" not in response
    # The tail was read before the follow saw the finish: it waits for one more read, here in vain (timeout).
    assert b"".join(response.streaming_content).decode() == "started\nstep 1\nexited with code 0\n"
    # The worker's read after the finish, stamped later than the follow below starts (however slow the machine).
    client = client_for("alice")
    WorkloadLogTail.objects.filter(workload=workload).update(fetched_at=timezone.now() + timedelta(seconds=30))
    followed = client.get(f"/api/v1/workloads/{workload.pk}/logs/?follow=true&timeout=5")
    text = b"".join(followed.streaming_content).decode()
    assert text == "started\nstep 1\nexited with code 0\n[run succeeded]\n"


def test_following_sends_new_lines_as_the_tail_moves(make_workload, monkeypatch):
    from apps.workloads import logs
    from apps.workloads.api import logs as api_logs

    monkeypatch.setattr(logs, "enqueue_on_commit", lambda *args: None)
    monkeypatch.setattr(api_logs, "enqueue_on_commit", lambda *args: None)
    workload = running(make_workload("alice", gpus=1))
    _tail(workload, "a\nb\n")
    moves = iter([
        lambda: _tail(workload, "b\nc\nd\n"),
        lambda: Workload.objects.filter(pk=workload.pk).update(status=Status.FAILED, finished_at=timezone.now()),
        lambda: (_tail(workload, "c\nd\nexit 1\n", at=timezone.now() + timedelta(seconds=1)),
                 WorkloadLogTail.objects.filter(workload=workload).update(exit_code=1, exit_reason="Error")),
    ])
    lines = list(api_logs.follow(workload_id=workload.pk, timeout=60, multi_pod=True,
                                 sleep=lambda _seconds: (next(moves)(), True)[1]))
    assert lines == ["run-0 | a\n", "run-0 | b\n", "run-0 | c\n", "run-0 | d\n", "run-0 | exit 1\n",
                     "[run failed: exit code 1]\n"]


def test_following_ends_when_the_client_has_gone(make_workload, monkeypatch):
    from apps.workloads import logs
    from apps.workloads.api import logs as api_logs

    monkeypatch.setattr(logs, "enqueue_on_commit", lambda *args: None)
    workload = running(make_workload("alice", gpus=1))
    _tail(workload, "a\n")
    assert list(api_logs.follow(workload_id=workload.pk, timeout=3600, multi_pod=False,
                                sleep=lambda _seconds: False)) == ["a\n"]


def test_lines_of_successive_pods_carry_their_pod(client_for, make_workload, monkeypatch):
    """A batch run's completions run one after another (parallelism 1): its lines are prefixed from the start; a
    workload of one pod gets prefixes once a second pod turns up (a retry)."""
    from apps.workloads import logs
    from apps.workloads.api import logs as api_logs

    monkeypatch.setattr(logs, "enqueue_on_commit", lambda *args: None)
    batch = running(make_workload("alice", gpus=1, kind=Kind.BATCH, completions=3, parallelism=1))
    _tail(batch, "first\n", pod="wl-b-0")
    text = b"".join(client_for("alice").get(
        f"/api/v1/workloads/{batch.pk}/logs/?follow=true&timeout=1").streaming_content).decode()
    assert text == "wl-b-0 | first\n"
    single = running(make_workload("alice", gpus=1, name="single"))
    _tail(single, "try 1\n", pod="wl-s-a")
    moves = iter([lambda: _tail(single, "try 2\n", pod="wl-s-b"),
                  lambda: Workload.objects.filter(pk=single.pk).update(status=Status.FAILED, started_at=None)])
    lines = list(api_logs.follow(workload_id=single.pk, timeout=60, multi_pod=single.pods_over_life > 1,
                                 sleep=lambda _seconds: (next(moves)(), True)[1]))
    assert lines == ["try 1\n", "wl-s-b | try 2\n", "[single failed]\n"]


# --- resubmit and keep-alive ----------------------------------------------------------------------------------------


def test_resubmit_submits_the_same_request_changed_by_the_body(client_for, make_workload):
    old = make_workload("alice", gpus=1, env=[{"name": "EPOCHS", "value": "3"}], command=["python", "t.py"])
    again = call(client_for("alice"), "POST", f"workloads/{old.pk}/resubmit/", {"gpus": 2})
    assert again.status_code == 201, again.content
    new = again.json()
    assert new["id"] != old.pk and new["resubmitted_from"] == old.pk and new["name"] == old.name
    assert new["gpus"] == 2 and new["command"] == ["python", "t.py"] and new["env"] == old.env
    assert new["labels"] == {"model": "resnet", "data_class": "public"} and new["node_pool"] == "h100"
    refused = call(client_for("alice"), "POST", f"workloads/{old.pk}/resubmit/", {"gpus": 0, "colour": "red"})
    assert refused.status_code == 400 and {"gpus", "colour"} <= set(refused.json())
    assert call(client_for("bob"), "POST", f"workloads/{old.pk}/resubmit/", {}).status_code == 404
    assert call(client_for("viewer"), "POST", f"workloads/{old.pk}/resubmit/", {}).status_code == 403
    assert Workload.objects.count() == 2


def test_keep_alive_is_for_the_owners_notebooks(client_for, make_workload):
    notebook = running(make_workload("alice", kind=Kind.NOTEBOOK, command=[], notebook_idle_timeout_minutes=30))
    Workload.objects.filter(pk=notebook.pk).update(last_activity_at=timezone.now() - timedelta(minutes=20))
    kept = call(client_for("alice"), "POST", f"workloads/{notebook.pk}/keep-alive/")
    assert kept.status_code == 200 and kept.json()["id"] == notebook.pk
    assert timezone.now() - Workload.objects.get(pk=notebook.pk).last_activity_at < timedelta(seconds=10)
    assert call(client_for("lead"), "POST", f"workloads/{notebook.pk}/keep-alive/").status_code == 403
    training = make_workload("alice")
    refused = call(client_for("alice"), "POST", f"workloads/{training.pk}/keep-alive/")
    assert refused.status_code == 400 and refused.json() == {"non_field_errors": ["Only notebooks have an idle "
                                                                                  "timeout."]}


# --- templates --------------------------------------------------------------------------------------------------


TEMPLATE = {"name": "bert-finetune", "kind": "training", "description": "BERT on one card", "values": {
    "image": "pytorch/pytorch:2.4.0", "node_pool": "h100", "gpus": 1, "memory_gib": 16, "command": "python ft.py",
    "model_label": "bert", "data_class": "public", "max_runtime_minutes": 30}}


def test_admins_create_templates_everyone_reads_them(client_for):
    made = call(client_for("admin"), "POST", "templates/", TEMPLATE)
    assert made.status_code == 201, made.content
    assert AuditEvent.objects.filter(action="workload_template.create").count() == 1
    listed = call(client_for("alice"), "GET", "templates/").json()["results"]
    assert [row["name"] for row in listed] == ["bert-finetune"]
    assert listed[0]["submission"] == {
        "kind": "training", "image": "pytorch/pytorch:2.4.0", "node_pool": "h100", "gpus": 1, "memory": 16,
        "command": ["python", "ft.py"], "max_runtime_seconds": 1800, "labels": {"model": "bert",
                                                                               "data_class": "public"}}
    one = call(client_for("viewer"), "GET", f"templates/{listed[0]['id']}/")
    assert one.status_code == 200 and one["ETag"] == 'W/"1"'
    # The submission starts a POST /workloads/ body as it is.
    submitted = call(client_for("alice"), "POST", "workloads/", {**listed[0]["submission"], "project": "vision",
                                                                  "name": "ft-1"})
    assert submitted.status_code == 201, submitted.content


def test_template_refusals(client_for):
    assert call(client_for("alice"), "POST", "templates/", TEMPLATE).status_code == 403
    bad = call(client_for("admin"), "POST", "templates/", {**TEMPLATE, "values": {"gpus": 0, "colour": "red"}})
    assert bad.status_code == 400 and "colour" in " ".join(bad.json()["values"])
    assert call(client_for("admin"), "POST", "templates/", {**TEMPLATE, "extra": 1}).json() == {
        "extra": ["Unknown field."]}
    assert call(client_for("admin"), "POST", "templates/", {**TEMPLATE, "values": "x"}).status_code == 400
    assert not WorkloadTemplate.objects.exists()


# --- conditional reads --------------------------------------------------------------------------------------------


def test_every_read_has_an_etag_and_answers_304_while_it_is_unchanged(demo, make_workload):
    workload = make_workload("alice")
    client = Client(HTTP_AUTHORIZATION=f"Token {personal_token(demo['alice'])}")
    for path in (f"workloads/{workload.pk}/", "workloads/", "me/", "usage/quota/", "departments/research/quotas/",
                 "projects/"):
        first = call(client, "GET", path)
        assert first.status_code in (200, 403) and (first.status_code != 200 or first["ETag"]), path
        if first.status_code != 200:
            continue
        again = call(client, "GET", path, HTTP_IF_NONE_MATCH=first["ETag"])
        assert again.status_code == 304 and again["ETag"] == first["ETag"] and not again.content, path
        assert "Authorization" in again["Vary"]
    before = call(client, "GET", f"workloads/{workload.pk}/")["ETag"]
    Workload.objects.filter(pk=workload.pk).update(status=Status.QUEUED)
    changed = call(client, "GET", f"workloads/{workload.pk}/", HTTP_IF_NONE_MATCH=before)
    assert changed.status_code == 200 and changed["ETag"] != before


def test_a_project_read_sees_its_quotas_change(client_for, users):
    from apps.org import services
    from apps.org.models import Quota

    client = client_for("admin")
    project = next(row for row in call(client, "GET", "projects/").json()["results"] if row["slug"] == "vision")
    read = call(client, "GET", f"projects/{project['id']}/")
    quota = Quota.objects.filter(project_id=project["id"]).first()
    services.quota_update(actor=users["admin"], quota=quota, over_quota_weight=quota.over_quota_weight + 1)
    # The project's own version did not move, its quotas' did: not a 304, and If-Match still takes its ETag.
    again = call(client, "GET", f"projects/{project['id']}/", HTTP_IF_NONE_MATCH=read["ETag"])
    assert again.status_code == 200 and again["ETag"] != read["ETag"]
    assert again["ETag"].split(".")[0] == read["ETag"].split(".")[0]
    patched = call(client, "PATCH", f"projects/{project['id']}/", {"description": "x"}, HTTP_IF_MATCH=read["ETag"])
    assert patched.status_code == 200, patched.content
