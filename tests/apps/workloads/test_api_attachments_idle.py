"""What the workload pages show beside the workload itself, in the API: a running notebook's Connect address (for
those who may open it), one's own credentials (names and keys, never values), and held but idle with its rule
(admins; everyone else a 404, as the page)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.core.models import AuditEvent
from apps.org.models import NodePool, PriorityClass, Project
from apps.workloads import services
from apps.workloads.models import Credential, IdlePolicy, Kind, Status, WorkloadUtilisation
from tests.api_support import call
from tests.factories import WorkloadFactory


def notebook(owner, *, status=Status.RUNNING, project="vision"):
    return WorkloadFactory(project=Project.objects.get(slug=project), owner=owner, kind=Kind.NOTEBOOK, status=status,
                           node_pool=NodePool.objects.get(slug="h100"),
                           priority_class=PriorityClass.objects.get(name="train"), notebook_idle_timeout_minutes=60,
                           notebook_port=8888)


def test_a_running_notebook_gives_its_connect_address_to_who_may_open_it(client_for, demo):
    running = notebook(demo["alice"])
    shown = call(client_for("alice"), "GET", f"workloads/{running.pk}/").json()
    assert shown["connect_url"] == f"http://testserver/workloads/{running.pk}/connect/"
    # The lead sees the workload but may not open another's notebook until the project shares them (leads submit).
    assert call(client_for("lead"), "GET", f"workloads/{running.pk}/").json()["connect_url"] is None
    Project.objects.filter(slug="vision").update(notebooks_shared=True)
    assert call(client_for("lead"), "GET", f"workloads/{running.pk}/").json()["connect_url"] == shown["connect_url"]
    assert call(client_for("carol"), "GET", f"workloads/{running.pk}/").status_code == 404
    queued = notebook(demo["alice"], status=Status.QUEUED)
    assert call(client_for("alice"), "GET", f"workloads/{queued.pk}/").json()["connect_url"] is None
    training = WorkloadFactory(project=Project.objects.get(slug="vision"), owner=demo["alice"], status=Status.RUNNING,
                               node_pool=NodePool.objects.get(slug="h100"),
                               priority_class=PriorityClass.objects.get(name="train"))
    assert call(client_for("alice"), "GET", f"workloads/{training.pk}/").json()["connect_url"] is None
    assert "connect_url" not in call(client_for("alice"), "GET", "workloads/").json()["results"][0]  # detail only


def test_credentials_are_ones_own_names_and_keys_never_values(client_for, demo, django_assert_num_queries):
    vision = Project.objects.get(slug="vision")
    mine = services.credential_create(actor=demo["alice"], project=vision, name="wandb",
                                      values={"WANDB_API_KEY": "top-secret-value"})
    bobs = services.credential_create(actor=demo["bob"], project=Project.objects.get(slug="nlp"), name="s3",
                                      values={"AWS_SECRET_ACCESS_KEY": "another-secret"})
    alice = client_for("alice")
    listed = call(alice, "GET", "credentials/")
    assert [row["name"] for row in listed.json()["results"]] == ["wandb"]
    assert listed.json()["results"][0] == {**listed.json()["results"][0], "project_slug": "vision",
                                           "keys": ["WANDB_API_KEY"], "secret_name": f"portal-cred-{mine.pk}"}
    assert "top-secret-value" not in listed.content.decode() and "sealed" not in listed.json()["results"][0]
    assert call(alice, "GET", f"credentials/{bobs.pk}/").status_code == 404  # another's: not found
    assert call(client_for("admin"), "GET", f"credentials/{bobs.pk}/").status_code == 404  # not even for admins
    with django_assert_num_queries(4) as counted:  # session, user, count, rows with their project
        assert call(alice, "GET", "credentials/").status_code == 200
    for number in range(5):
        services.credential_create(actor=demo["alice"], project=vision, name=f"more-{number}", values={"K": "v"})
    with django_assert_num_queries(len(counted.captured_queries)):
        assert call(alice, "GET", "credentials/").json()["count"] == 6
    assert Credential.objects.count() == 7


def flag_idle(workload, *, minutes: int = 45) -> None:
    now = timezone.now()
    WorkloadUtilisation.objects.create(workload=workload, samples=30, mean_percent=1.5, last_percent=0.0,
                                       idle_since=now - timedelta(minutes=minutes), idle_flagged_at=now)


def test_held_idle_lists_what_the_rule_flagged_for_admins_only(client_for, demo, django_assert_num_queries):
    idle = notebook(demo["alice"])
    flag_idle(idle)
    flag_idle(notebook(demo["carol"], project="forecasting"), minutes=90)
    admin = client_for("admin")
    rows = call(admin, "GET", "held-idle/").json()["results"]
    assert [row["project_slug"] for row in rows] == ["forecasting", "vision"]  # longest idle first
    assert rows[1] == {**rows[1], "id": idle.pk, "submitter_label": "alice", "node_pool": "h100", "gpu_units": 1,
                       "mean_percent": 1.5, "department_slug": "research"}
    for username in ("deptadmin", "lead", "alice"):
        assert call(client_for(username), "GET", "held-idle/").status_code == 404
    with django_assert_num_queries(5) as counted:  # session, user, grants, count, rows with project, pool, owner
        assert call(admin, "GET", "held-idle/").status_code == 200
    for _ in range(4):
        flag_idle(notebook(demo["bob"], project="nlp"))
    with django_assert_num_queries(len(counted.captured_queries)):
        assert call(admin, "GET", "held-idle/").json()["count"] == 6


def test_the_idle_rule_is_read_and_changed_as_on_the_page(client_for):
    admin = client_for("admin")
    assert call(admin, "GET", "idle-policy/").json() == {
        "threshold_percent": 5, "idle_minutes": 30, "idle_seconds": 1800, "cull_notebooks": True,
        "warning_minutes": 15, "utilisation_available": False}
    changed = call(admin, "PATCH", "idle-policy/", {"idle_minutes": 60, "cull_notebooks": False, "warning_minutes": 0})
    assert changed.status_code == 200 and changed.json()["idle_seconds"] == 3600
    policy = IdlePolicy.current()
    assert (policy.threshold_percent, policy.idle_seconds, policy.cull_notebooks, policy.warning_minutes) == (
        5, 3600, False, 0)
    assert AuditEvent.objects.filter(action="idle_policy.update").count() == 1
    for body, field in (({"threshold_percent": 0}, "threshold_percent"), ({"idle_minutes": 10081}, "idle_minutes"),
                        ({"idle_seconds": 5}, "idle_seconds"), ({"nope": 1}, "nope"),
                        ({"threshold_percent": 1.0}, "threshold_percent")):
        refused = call(admin, "PATCH", "idle-policy/", body)
        assert refused.status_code == 400 and field in refused.json(), (body, refused.content)
    assert call(admin, "PATCH", "idle-policy/", [1]).status_code == 400
    for username in ("deptadmin", "alice"):
        assert call(client_for(username), "GET", "idle-policy/").status_code == 404
        assert call(client_for(username), "PATCH", "idle-policy/", {"idle_minutes": 5}).status_code == 404
    assert IdlePolicy.current().idle_seconds == 3600


@pytest.mark.parametrize("username", ["alice", "carol"])
def test_no_attachment_leaks_across_departments(client_for, demo, username):
    vision = Project.objects.get(slug="vision")
    services.credential_create(actor=demo["alice"], project=vision, name="wandb", values={"K": "v"})
    listed = call(client_for(username), "GET", "credentials/").json()
    assert listed["count"] == (1 if username == "alice" else 0)
