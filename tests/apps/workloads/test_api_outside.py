"""Work submitted outside the portal in the workloads API: its origin, kind, object, submitter and pod sets in the list
and the detail, no owner and no priority class without a 500, the schema saying so; resubmit and logs refused with a
clear 400 (there is no submission to repeat, and the worker reads the logs of the portal's own pods only); scoped
like every workload."""

from __future__ import annotations

import pytest

from apps.workloads.models import Kind, Status, Workload
from tests.api_support import call


def listed(client, **params):
    response = client.get("/api/v1/workloads/", params)
    assert response.status_code == 200, response.content
    return {row["id"]: row for row in response.json()["results"]}


def test_list_and_detail_show_where_it_came_from_and_who_submitted_it(client_for, make_outside, make_workload):
    outside = make_outside(name="kubectl-train")
    own = make_workload("alice", name="mine")
    Workload.objects.filter(pk=own.pk).update(status=Status.QUEUED)
    alice = client_for("alice")
    rows = listed(alice)
    row = rows[outside.pk]
    assert row["origin"] == "outside" and row["kind"] == "job"
    assert row["object"] == {"apiVersion": "batch/v1", "kind": "Job", "name": "kubectl-train"}
    assert row["owner"] is None and row["owner_id"] is None and row["submitter"] is None
    assert row["submitted_by"] == "kubectl-create"
    assert row["submitter_label"] == "outside the portal (kubectl-create)"
    assert row["pod_sets"] == [{"name": "main", "count": 2, "gpus": 2, "cpu": "2.000", "memory_gib": "8.00"}]
    assert row["gpu_units"] == 4 and row["pod_count"] == 2
    assert row["priority_class"] is None and row["priority"] == 0
    # The portal's own work: its Job, its owner, its one pod set.
    mine = rows[own.pk]
    assert mine["origin"] == "portal" and mine["kind"] == "training" and mine["submitter"] == "alice"
    assert mine["object"] == {"apiVersion": "batch/v1", "kind": "Job", "name": own.job_name}
    assert mine["pod_sets"] == [{"name": "main", "count": 1, "gpus": 1, "cpu": "1.000", "memory_gib": "8.00"}]
    assert mine["priority"] == own.priority_class.value

    detail = call(alice, "GET", f"workloads/{outside.pk}/")
    assert detail.status_code == 200
    data = detail.json()
    assert data["origin"] == "outside" and data["manifest"] is None and data["owner"] is None
    assert data["object"]["name"] == "kubectl-train" and data["submitter"] is None


def test_an_attributed_outside_workload_names_its_portal_user(client_for, make_outside, users):
    attributed = make_outside(owner=users["alice"], submitted_by="argo", kind=Kind.JOBSET,
                              object_api_version="jobset.x-k8s.io/v1alpha2", kueue_priority=None)
    row = listed(client_for("alice"), origin="outside")[attributed.pk]
    assert row["submitter"] == "alice" and row["owner"] == "alice" and row["submitter_label"] == "alice"
    assert row["object"] == {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": attributed.name}
    assert row["priority"] == 0


@pytest.mark.parametrize(("kind", "expected"), [(Kind.POD_GROUP, "Pod"), (Kind.TRAINJOB, "TrainJob"),
                                                (Kind.LEADERWORKERSET, "LeaderWorkerSet"), (Kind.OTHER, None)])
def test_the_object_names_the_kubernetes_kind(client_for, make_outside, kind, expected):
    workload = make_outside(kind=kind)
    assert listed(client_for("lead"))[workload.pk]["object"]["kind"] == expected


def test_portal_work_not_yet_submitted_has_no_object(client_for, make_workload):
    workload = make_workload("alice")
    Workload.objects.filter(pk=workload.pk).update(job_name="")
    assert listed(client_for("alice"))[workload.pk]["object"] is None


@pytest.mark.parametrize(("username", "expected"), [("admin", 200), ("deptadmin", 200), ("lead", 200),
                                                    ("alice", 200), ("viewer", 200), ("carol", 404)])
def test_it_is_scoped_like_every_workload(client_for, make_outside, username, expected):
    workload = make_outside()
    client = client_for(username)
    assert call(client, "GET", f"workloads/{workload.pk}/").status_code == expected
    assert (workload.pk in listed(client)) is (expected == 200)
    export = client.get("/api/v1/workloads/export/")
    assert export.status_code == 200
    assert (workload.name in b"".join(export.streaming_content).decode()) is (expected == 200)


def test_resubmit_is_refused_with_a_400_and_changes_nothing(client_for, make_outside):
    workload = make_outside()
    before = Workload.objects.count()
    response = call(client_for("alice"), "POST", f"workloads/{workload.pk}/resubmit/", {"gpus": 1})
    assert response.status_code == 400
    assert "submitted outside the portal" in response.json()["non_field_errors"][0]
    assert Workload.objects.count() == before
    assert call(client_for("carol"), "POST", f"workloads/{workload.pk}/resubmit/").status_code == 404


@pytest.mark.parametrize("follow", ["false", "true"])
def test_logs_say_how_to_read_them_from_the_cluster(client_for, make_outside, follow):
    workload = make_outside(name="kubectl-logs", status=Status.RUNNING)
    response = call(client_for("alice"), "GET", f"workloads/{workload.pk}/logs/?follow={follow}")
    assert response.status_code == 400
    message = response.json()["non_field_errors"][0]
    assert "submitted outside" in message
    assert "kubectl logs -n proj-vision -l batch.kubernetes.io/job-name=kubectl-logs" in message


def test_keep_alive_of_outside_work_is_a_400(client_for, make_outside):
    workload = make_outside(status=Status.RUNNING)
    response = call(client_for("alice"), "POST", f"workloads/{workload.pk}/keep-alive/")
    assert response.status_code == 400


def test_the_schema_documents_outside_work(client_for):
    schema = client_for("alice").get("/api/v1/schema/", {"format": "json"}).json()
    fields = schema["components"]["schemas"]["Workload"]["properties"]
    assert {"origin", "object", "submitted_by", "submitter", "submitter_label", "pod_sets", "priority"} <= set(fields)
    for name in ("owner", "owner_id", "priority_class", "object", "submitter"):
        assert fields[name].get("nullable") is True, name
    kinds = schema["components"]["schemas"]["WorkloadKindEnum"]["enum"]
    assert {"training", "job", "jobset", "trainjob", "rayjob", "leaderworkerset", "podgroup", "other"} <= set(kinds)
    parameters = {p["name"]: p for p in schema["paths"]["/api/v1/workloads/"]["get"]["parameters"]}
    assert parameters["origin"]["schema"]["enum"] == ["outside", "portal"]
    submitted = schema["components"]["schemas"]["PortalKindEnum"]["enum"]
    assert submitted == ["training", "notebook", "batch"]
