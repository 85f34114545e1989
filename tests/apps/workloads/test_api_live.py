"""The workload detail API's live queue state: position, reason, explanation, admission, preemptions, events."""

from __future__ import annotations

import json

import pytest
from django.utils import timezone

from apps.workloads.models import Status, Workload, WorkloadEvent
from tests.apps.workloads.test_views_queue import mirror, queued, running

pytestmark = pytest.mark.django_db


def detail(client, pk: int) -> dict:
    response = client.get(f"/api/v1/workloads/{pk}/")
    assert response.status_code == 200, response.content
    return response.json()


def test_a_queued_workload_has_a_position_and_an_explanation(client_for, make_workload):
    mirror(elastic=8)
    workload = queued(make_workload("alice", name="w", gpus=4), 2)
    data = detail(client_for("alice"), workload.pk)
    assert data["queue_position"] == {"local_queue": 2, "cluster_queue": 2}
    assert data["reason"] == "Pending" and data["message"] == "couldn't assign flavors"
    assert data["explanation"].startswith("Waiting for 4 x H100 80GB: Vision is at its limit there, 8 of 8 in use")
    assert data["explanation_kind"] == "quota"
    waiting = data["waiting"]
    assert waiting["reason"] == "project_limit" and waiting["sentence"] == data["explanation"]
    assert waiting["headline"] == "4 more H100 80GB needed: Vision is at its limit (8 of 8)"
    numbers = waiting["numbers"]
    assert (numbers["project_used"], numbers["limit"], numbers["requested"], numbers["more_needed"]) == (8, 8, 4, 4)
    assert (numbers["pool_capacity"], numbers["pool_used"], numbers["pool_idle"], numbers["ahead"]) == (16, 8, 8, 2)
    assert data["admission"] is None and data["preemptions"] == []
    assert [e["to"] for e in data["events"]] == ["submitting"]


def test_a_running_workload_has_its_admission_and_no_position(client_for, make_workload):
    workload = running(make_workload("alice", name="r", gpus=4))
    data = detail(client_for("alice"), workload.pk)
    assert data["queue_position"] is None and data["explanation"] is None
    assert data["admission"]["cluster_queue"] == "proj-vision-h100-elastic"
    assert data["admission"]["flavors"] == ["h100"]


def test_preemptions_name_the_preemptor_only_to_those_who_may_see_it(client_for, make_workload):
    victim = running(make_workload("alice", name="victim", gpus=4))
    preemptor = running(make_workload("bob", name="reclaimer", project="nlp", gpus=4))
    Workload.objects.filter(pk=preemptor.pk).update(k8s_uid="uid-r")
    at = timezone.now()
    message = ("Preempted to accommodate a workload (UID: wl-uid-r, JobUID: uid-r) due to reclamation within the "
               "cohort; preemptor path: /portal-h100/dept-research-h100/proj-nlp-h100/proj-nlp-h100-guaranteed; "
               "preemptee path: /portal-h100/dept-research-h100/proj-vision-h100/proj-vision-h100-elastic")
    WorkloadEvent.objects.create(workload=victim, at=at, from_status="running", to_status="preempted",
                                 reason="InCohortReclamation", message=message,
                                 details={"preemptor_job_uid": "uid-r"}, cluster_at=at)
    Workload.objects.filter(pk=victim.pk).update(status=Status.PREEMPTED, status_message=message)
    for_lead = detail(client_for("lead"), victim.pk)
    (seen_by_lead,) = for_lead["preemptions"]
    assert seen_by_lead["reason"] == "InCohortReclamation" and seen_by_lead["message"] == message
    assert seen_by_lead["preemptor"] == {"id": preemptor.pk, "name": "reclaimer", "project": "nlp"}
    for_alice = detail(client_for("alice"), victim.pk)
    (seen_by_alice,) = for_alice["preemptions"]
    assert seen_by_alice["preemptor"] is None and seen_by_alice["reason"] == "InCohortReclamation"
    # Kueue's own words, wherever the API gives them, without the preemptor alice may not see.
    hidden = ("Preempted to accommodate a workload of a project you cannot see due to reclamation within the cohort; "
              "preemptee path: /portal-h100/dept-research-h100/proj-vision-h100/proj-vision-h100-elastic")
    assert seen_by_alice["message"] == for_alice["message"] == for_alice["status_message"] == hidden
    assert [e["message"] for e in for_alice["events"] if e["to"] == "preempted"] == [hidden]
    assert "uid-r" not in json.dumps(for_alice) and "proj-nlp" not in json.dumps(for_alice)


@pytest.mark.parametrize(("username", "expected"), [("admin", 200), ("deptadmin", 200), ("lead", 200),
                                                    ("alice", 200), ("bob", 404), ("carol", 404), ("viewer", 200)])
def test_detail_access(client_for, make_workload, username, expected):
    workload = queued(make_workload("alice", name="w", gpus=1), 0)
    assert client_for(username).get(f"/api/v1/workloads/{workload.pk}/").status_code == expected


def test_the_schema_documents_the_new_fields(client_for):
    schema = client_for("alice").get("/api/v1/schema/", {"format": "json"}).json()
    fields = schema["components"]["schemas"]["WorkloadDetail"]["properties"]
    assert {"queue_position", "reason", "message", "explanation", "admission", "preemptions", "events"} <= set(fields)
    assert "/api/v1/usage/quota/" in schema["paths"]


def test_the_waiting_reason_is_a_documented_code_with_numbers(client_for, make_workload):
    from apps.cluster.models import LocalQueueState
    from apps.org.models import Project

    alice = client_for("alice")
    mirror(elastic=8)
    at_limit = queued(make_workload("alice", name="limit", gpus=4), 0)
    assert detail(alice, at_limit.pk)["waiting"]["reason"] == "project_limit"
    mirror(elastic=4)
    mirror(project="nlp", guaranteed=4, elastic=4)  # Research 12 of 12; alice may not see NLP
    data = detail(alice, at_limit.pk)["waiting"]
    assert data["reason"] == "department_limit"
    assert data["numbers"]["holders"] == [{"project": "Vision", "units": 4}, {"project": None, "units": 8}]
    assert data["headline"] == "4 more H100 80GB needed: Research is at its limit (12 of 12)"
    non_preemptible = queued(make_workload("alice", name="np", gpus=4, preemptible=False), 0)
    mirror(guaranteed=4)
    assert detail(alice, non_preemptible.pk)["waiting"]["reason"] == "project_deserved"
    LocalQueueState.objects.create(namespace="proj-vision", name="elastic-h100", project=Project.objects.get(
        slug="vision"), active=False, active_reason="Stopped", observed_at=timezone.now())
    assert detail(alice, at_limit.pk)["waiting"]["reason"] == "queue_stopped"
    running_one = running(make_workload("alice", name="runs", gpus=1))
    assert detail(alice, running_one.pk)["waiting"] is None


def test_the_schema_documents_the_waiting_reasons_and_numbers(client_for):
    from apps.workloads.explain import REASONS

    schema = client_for("alice").get("/api/v1/schema/", {"format": "json"}).json()
    components = schema["components"]["schemas"]
    assert "waiting" in components["WorkloadDetail"]["properties"]
    waiting = components["Waiting"]["properties"]
    reason = waiting["reason"]
    (ref,) = reason["allOf"]
    assert set(components[ref["$ref"].rsplit("/", 1)[1]]["enum"]) == set(REASONS)
    assert all(f"`{code}`" in reason["description"] for code in REASONS)
    numbers = components["WaitingNumbers"]["properties"]
    assert {"requested", "more_needed", "available", "project_used", "limit", "department_used", "pool_used",
            "pool_capacity", "holders", "held_back", "held_back_by", "victims", "ahead"} <= set(numbers)


def requeued_victim(make_workload, number: int) -> tuple[Workload, Workload]:
    """A Vision run of alice's preempted by one of bob's in NLP and requeued, and the preemptor."""
    from apps.workloads.models import Status

    victim = running(make_workload("alice", name=f"victim{number}", gpus=4))
    preemptor = running(make_workload("bob", name=f"reclaimer{number}", project="nlp", gpus=4),
                        cluster_queue="proj-nlp-h100-guaranteed")
    Workload.objects.filter(pk=preemptor.pk).update(k8s_uid=f"uid-{number}")
    at = timezone.now()
    WorkloadEvent.objects.create(workload=victim, at=at, from_status="running", to_status="preempted",
                                 reason="InCohortReclamation", details={"preemptor_job_uid": f"uid-{number}"},
                                 message=f"Preempted to accommodate a workload (UID: k-{number}, JobUID: uid-{number})",
                                 cluster_at=at)
    queued(victim, number)
    Workload.objects.filter(pk=victim.pk).update(status=Status.REQUEUED, status_reason="Requeued",
                                                 last_preempted_at=at)
    return Workload.objects.get(pk=victim.pk), preemptor


def listed(client, query: str = "") -> dict[int, dict]:
    response = client.get(f"/api/v1/workloads/{query}")
    assert response.status_code == 200, response.content
    return {row["id"]: row for row in response.json()["results"]}


def test_the_list_says_why_each_waits_as_the_detail_does(client_for, make_workload):
    """The list carries the detail's `explanation`, `explanation_kind` and `waiting` (reason code, numbers and the
    preemption sentence), worded for the caller."""
    mirror(elastic=8)
    at_limit = queued(make_workload("alice", name="limit", gpus=4), 0)
    victim, preemptor = requeued_victim(make_workload, 1)
    alice, lead = client_for("alice"), client_for("lead")
    rows = listed(alice)
    for workload in (at_limit, victim):
        one = detail(alice, workload.pk)
        assert {key: rows[workload.pk][key] for key in ("explanation", "explanation_kind", "waiting")} == \
            {key: one[key] for key in ("explanation", "explanation_kind", "waiting")}
    assert rows[at_limit.pk]["waiting"]["reason"] == "project_limit"
    assert rows[at_limit.pk]["waiting"]["numbers"]["more_needed"] == 4
    assert rows[victim.pk]["status"] == "requeued"
    said = rows[victim.pk]["waiting"]["preemption"]
    assert said.startswith("Preempted on ") and said.endswith(
        "UTC by a workload of a project you cannot see, to give back borrowed quota to the project that deserves it.")
    assert "UID" not in said
    assert rows[victim.pk]["waiting"]["numbers"]["preemptor"] == {"id": None, "name": None, "project": None}
    assert rows[victim.pk]["waiting"]["numbers"]["preemption_reason"] == "InCohortReclamation"
    for_lead = listed(lead)[victim.pk]["waiting"]
    assert f"UTC by #{preemptor.pk} reclaimer1 (NLP), to give back" in for_lead["preemption"]
    assert for_lead["numbers"]["preemptor"] == {"id": preemptor.pk, "name": "reclaimer1", "project": "NLP"}
    (preemption,) = detail(lead, victim.pk)["preemptions"]
    assert preemption["sentence"] == for_lead["preemption"]
    assert preemptor.pk not in listed(alice)  # bob's NLP run: alice may not see it


def test_the_status_filter_finds_the_requeued(client_for, make_workload):
    mirror(elastic=8)
    victim, _ = requeued_victim(make_workload, 1)
    never_ran = queued(make_workload("alice", name="fresh", gpus=4), 2)
    alice = client_for("alice")
    assert set(listed(alice, "?status=requeued")) == {victim.pk}
    assert set(listed(alice, "?status=preempted")) == {victim.pk}  # preempted: stopping or requeued
    assert set(listed(alice, "?status=queued")) == {never_ran.pk}
    assert victim.pk in listed(alice, "?status=live")


def test_the_list_with_explanations_makes_a_fixed_number_of_queries(client_for, make_workload,
                                                                    django_assert_num_queries):
    mirror(elastic=8)
    lead = client_for("lead")
    queued(make_workload("alice", name="limit-0", gpus=4), 0)
    requeued_victim(make_workload, 0)
    # session, user, grants, count, rows, their data sources and credentials; explain's quotas, queues and stopped
    # local queues; preemption events and their preemptors; the running rows' runtimes
    expected = 7 + 3 + 2 + 1
    with django_assert_num_queries(expected):
        first = listed(lead)
    for number in range(1, 6):
        queued(make_workload("alice", name=f"limit-{number}", gpus=4), number)
        requeued_victim(make_workload, number + 10)
    with django_assert_num_queries(expected):
        second = listed(lead)
    assert len(second) > len(first)
    assert sum(1 for row in second.values() if row["waiting"]) == 12


def test_the_schema_documents_the_list_reason_and_the_requeued_status(client_for):
    schema = client_for("alice").get("/api/v1/schema/", {"format": "json"}).json()
    components = schema["components"]["schemas"]
    listed_fields = components["Workload"]["properties"]
    assert {"explanation", "explanation_kind", "waiting"} <= set(listed_fields)
    assert "waiting.reason" in components["WorkloadDetail"]["properties"]["reason"]["description"]
    assert "`requeued`" in listed_fields["status"]["description"]
    assert "preemption" in components["Waiting"]["properties"]
    assert "sentence" in components["Preemption"]["properties"]
