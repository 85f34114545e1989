"""The access matrix of the workload pages: every demo role, inside and outside its scope, GET and POST.

Rows a user may not see answer 404, rows they see but may not act on 403, users without the action anywhere 403,
anonymous users are sent to the login page. alice submits in vision only, bob in nlp, carol in forecasting; the
department admin and the team lead cover research (vision and nlp); the viewer sees everything and submits nowhere.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from apps.workloads import services
from apps.workloads.models import PORTAL_KIND_VALUES, Kind, Status, Workload
from tests.access_matrix import USERS, row

from .helpers import submit_payload

ALL = row(200, 200, 200, 200, 200, 200, 200)
ADMIN_ONLY = row(200, 403, 403, 403, 403, 403, 403)
ADMIN_ONLY_POST = row(302, 403, 403, 403, 403, 403, 403)
SUBMITTERS = row(200, 200, 200, 200, 200, 200, 403)
SUBMIT_VISION = row(200, 200, 200, 200, 404, 404, 403)
SUBMIT_VISION_POST = row(302, 302, 302, 302, 404, 404, 403)
SUBMIT_SERVING = row(200, 404, 404, 404, 404, 404, 403)
SUBMIT_SERVING_POST = row(302, 404, 404, 404, 404, 404, 403)
SEE_VISION = row(200, 200, 200, 200, 404, 404, 200)
SEE_NLP = row(200, 200, 200, 404, 200, 404, 200)
SEE_SERVING = row(200, 404, 404, 404, 404, 404, 200)
STOP_VISION = row(302, 302, 302, 302, 404, 404, 403)  # lead stops alice's work; the viewer sees it, may not stop it
STOP_NLP = row(302, 302, 302, 404, 302, 404, 403)  # alice may not stop bob's: she cannot even see it
STOP_SERVING = row(302, 404, 404, 404, 404, 404, 403)
STOP_VISION_GET = row(200, 200, 200, 200, 404, 404, 403)  # the confirmation page, for those who may stop
KEEP_ALICES_NOTEBOOK = row(403, 403, 403, 302, 404, 404, 403)  # only the owner keeps a notebook alive


@pytest.fixture
def workloads(users) -> dict[str, Workload]:
    """A live workload of alice (vision), bob (nlp) and admin (serving), and a running notebook of alice."""
    from apps.org.models import NodePool, Project

    def make(owner: str, project: str, kind: str = Kind.TRAINING, **extra: Any) -> Workload:
        return services.workload_submit(
            actor=users[owner], project=Project.objects.get(slug=project), kind=kind, name=f"{owner}-{kind}",
            image="pytorch/pytorch:2.4.0", node_pool=NodePool.objects.get(slug="l40s-shared"), gpus=1,
            model_label="m", data_class="public", **extra)

    notebook = make("alice", "vision", Kind.NOTEBOOK)
    Workload.objects.filter(pk=notebook.pk).update(status=Status.RUNNING)
    return {"alice": make("alice", "vision"), "bob": make("bob", "nlp"),
            "serving": make("admin", "serving", preemptible=False), "notebook": notebook}


def submit_url(kind: str = "training", project: str | None = None) -> Callable[[dict], str]:
    suffix = f"?project={project}" if project else ""
    return lambda w: reverse("workloads:submit", args=[kind]) + suffix


def detail_url(key: str) -> Callable[[dict], str]:
    return lambda w: reverse("workloads:detail", args=[w[key].pk])


GET_MATRIX: list[tuple[str, Callable[[dict], str], dict[str, int]]] = [
    ("list", lambda w: reverse("workloads:list"), ALL),
    ("list:everything", lambda w: reverse("workloads:list") + "?scope=all", ALL),
    ("submit:training", submit_url("training"), SUBMITTERS),
    ("submit:notebook", submit_url("notebook"), SUBMITTERS),
    ("submit:batch", submit_url("batch"), SUBMITTERS),
    ("submit:inference", lambda w: reverse("workloads:submit_inference"), SUBMITTERS),
    ("submit:inside", submit_url("training", "vision"), SUBMIT_VISION),
    ("submit:outside", submit_url("notebook", "serving"), SUBMIT_SERVING),
    ("submit_again:inside", lambda w: reverse("workloads:submit", args=["training"]) + f"?from={w['alice'].pk}",
     SUBMIT_VISION),
    ("submit_again:outside", lambda w: reverse("workloads:submit", args=["training"]) + f"?from={w['serving'].pk}",
     SUBMIT_SERVING),
    ("detail:vision", detail_url("alice"), SEE_VISION),
    ("detail:nlp", detail_url("bob"), SEE_NLP),
    ("detail:serving", detail_url("serving"), SEE_SERVING),
    ("detail:notebook", detail_url("notebook"), SEE_VISION),
    ("templates", lambda w: reverse("workloads:templates"), ALL),  # everyone reads them, admins write them
    ("template_create", lambda w: reverse("workloads:template_create"), ADMIN_ONLY),
]


@pytest.mark.parametrize(("page", "url", "expected"), GET_MATRIX, ids=[entry[0] for entry in GET_MATRIX])
@pytest.mark.parametrize("username", USERS)
def test_get_matrix(page_client, workloads, page, url, expected, username):
    response = page_client(username).get(url(workloads))
    assert response.status_code == expected[username], (page, username)


@pytest.mark.parametrize("kind", PORTAL_KIND_VALUES)
def test_submit_post_inside_scope(page_client, workloads, kind):
    for username in USERS:
        before = Workload.objects.count()
        response = page_client(username).post(reverse("workloads:submit", args=[kind]), submit_payload(
            kind, project="vision", pool="l40s-shared"))
        assert response.status_code == SUBMIT_VISION_POST[username], (username, response.content[-2000:])
        assert Workload.objects.count() == before + (1 if response.status_code == 302 else 0)


def test_submit_post_outside_scope(page_client, workloads):
    for username in USERS:
        before = Workload.objects.count()
        response = page_client(username).post(reverse("workloads:submit", args=["training"]),
                                          submit_payload(project="serving", pool="l40s-shared",
                                                         priority_class="inference", preemptible=None))
        assert response.status_code == SUBMIT_SERVING_POST[username], username
        assert Workload.objects.count() == before + (1 if response.status_code == 302 else 0)


STOP_MATRIX = [("vision", "alice", STOP_VISION), ("nlp", "bob", STOP_NLP), ("serving", "serving", STOP_SERVING)]


@pytest.mark.parametrize(("case", "key", "expected"), STOP_MATRIX, ids=[entry[0] for entry in STOP_MATRIX])
@pytest.mark.parametrize("username", USERS)
def test_stop_matrix(page_client, workloads, case, key, expected, username):
    workload = workloads[key]
    response = page_client(username).post(reverse("workloads:stop", args=[workload.pk]))
    assert response.status_code == expected[username], (case, username)
    workload.refresh_from_db()
    assert (workload.status == Status.STOPPING) is (response.status_code == 302)


@pytest.mark.parametrize("username", USERS)
def test_stop_get_asks_first_and_changes_nothing(page_client, workloads, username):
    """Was test_stop_is_post_only (GET answered 405): GET is now the confirmation page, the question that
    browsers without JavaScript get before the stop is posted."""
    workload = workloads["alice"]
    response = page_client(username).get(reverse("workloads:stop", args=[workload.pk]), {"next": "/workloads/"})
    assert response.status_code == STOP_VISION_GET[username]
    if response.status_code == 200:
        content = response.content.decode()
        assert "Stop training alice-training?" in content and 'method="post"' in content
        assert 'href="/workloads/"' in content  # Cancel goes back where the user came from
        assert "recorded in the audit log" in content  # every stop is audited, the owner's own too
    workload.refresh_from_db()
    assert workload.status == Status.SUBMITTING


def test_the_confirmed_stop_returns_to_the_list_it_came_from(page_client, workloads):
    url = reverse("workloads:stop", args=[workloads["alice"].pk]) + "?next=/workloads/%3Fscope%3Dall"
    response = page_client("lead").post(url)
    assert response.status_code == 302 and response["Location"] == "/workloads/?scope=all"
    assert Workload.objects.get(pk=workloads["alice"].pk).status == Status.STOPPING


@pytest.mark.parametrize("username", USERS)
def test_keep_alive_matrix(page_client, workloads, username):
    notebook = workloads["notebook"]
    response = page_client(username).post(reverse("workloads:keep_alive", args=[notebook.pk]))
    assert response.status_code == KEEP_ALICES_NOTEBOOK[username], username
    notebook.refresh_from_db()
    assert (notebook.last_activity_at is not None) is (response.status_code == 302)


@pytest.mark.parametrize("username", USERS)
def test_template_pages_post_matrix(page_client, users, username):
    from apps.workloads.models import WorkloadTemplate

    template = services.workload_template_create(actor=users["admin"], name="base", kind=Kind.NOTEBOOK,
                                                 values={"gpus": 1})
    client = page_client(username)
    create = client.post(reverse("workloads:template_create"),
                         {"name": "new", "kind": "training", "values": '{"gpus": 2}'})
    assert create.status_code == ADMIN_ONLY_POST[username]
    edit_get = client.get(reverse("workloads:template_edit", args=[template.pk]))
    assert edit_get.status_code == ADMIN_ONLY[username]
    edit = client.post(reverse("workloads:template_edit", args=[template.pk]),
                       {"name": "base", "kind": "notebook", "values": '{"gpus": 3}', "version": template.version})
    assert edit.status_code == ADMIN_ONLY_POST[username]
    delete_get = client.get(reverse("workloads:template_delete", args=[template.pk]))
    assert delete_get.status_code == ADMIN_ONLY[username]
    delete = client.post(reverse("workloads:template_delete", args=[template.pk]))
    assert delete.status_code == ADMIN_ONLY_POST[username]
    assert WorkloadTemplate.objects.filter(pk=template.pk).exists() is (username != "admin")


def test_stop_button_only_where_allowed(page_client, workloads):
    alices = reverse("workloads:stop", args=[workloads["alice"].pk])
    for username, shown in (("alice", True), ("lead", True), ("deptadmin", True), ("admin", True),
                            ("viewer", False)):
        content = page_client(username).get(reverse("workloads:detail", args=[workloads["alice"].pk])).content.decode()
        assert (alices in content) is shown, username


def test_keep_alive_button_only_for_the_owner(page_client, workloads):
    keep = reverse("workloads:keep_alive", args=[workloads["notebook"].pk])
    detail = reverse("workloads:detail", args=[workloads["notebook"].pk])
    assert keep in page_client("alice").get(detail).content.decode()
    assert keep not in page_client("lead").get(detail).content.decode()


def test_nothing_to_stop_says_so(page_client, workloads):
    workload = workloads["alice"]
    Workload.objects.filter(pk=workload.pk).update(status=Status.SUCCEEDED)
    client = page_client("alice")
    response = client.post(reverse("workloads:stop", args=[workload.pk]), follow=True)
    assert "there is nothing to stop" in response.content.decode()


def test_stop_redirects_back_to_a_local_next_only(page_client, workloads):
    client = page_client("lead")
    response = client.post(reverse("workloads:stop", args=[workloads["alice"].pk]),
                           {"next": "https://evil.example/"})
    assert response["Location"] == reverse("workloads:detail", args=[workloads["alice"].pk])
    response = client.post(reverse("workloads:stop", args=[workloads["bob"].pk]), {"next": "/workloads/?scope=all"})
    assert response["Location"] == "/workloads/?scope=all"


def test_a_stop_of_someone_elses_work_is_audited(page_client, workloads):
    from apps.core.models import AuditEvent

    page_client("lead").post(reverse("workloads:stop", args=[workloads["alice"].pk]))
    assert AuditEvent.objects.filter(action="workload.stop", actor__username="lead").count() == 1


ANONYMOUS_URLS = [
    ("list", lambda w: reverse("workloads:list")),
    ("submit", submit_url()),
    ("detail", detail_url("alice")),
    ("templates", lambda w: reverse("workloads:templates")),
]


@pytest.mark.parametrize(("page", "url"), ANONYMOUS_URLS, ids=[entry[0] for entry in ANONYMOUS_URLS])
def test_anonymous_users_are_sent_to_login(workloads, page, url):
    response = Client().get(url(workloads))
    assert response.status_code == 302 and response["Location"].startswith(reverse("accounts:login"))
    stop = Client().post(reverse("workloads:stop", args=[workloads["alice"].pk]))
    assert stop.status_code == 302 and Workload.objects.get(pk=workloads["alice"].pk).status == Status.SUBMITTING


def test_csrf_is_enforced_on_submit_and_stop(users, workloads):
    client = Client(enforce_csrf_checks=True)
    client.force_login(users["alice"])
    assert client.post(reverse("workloads:submit", args=["training"]), submit_payload()).status_code == 403
    assert client.post(reverse("workloads:stop", args=[workloads["alice"].pk])).status_code == 403
    page = client.get(reverse("workloads:submit", args=["training"])).content.decode()
    assert 'name="csrfmiddlewaretoken"' in page


def test_nav_shows_workloads_and_submit_by_role(page_client, workloads):
    alice = page_client("alice").get(reverse("workloads:list")).content.decode()
    assert 'href="/workloads/"' in alice and 'href="/workloads/submit/training/"' in alice
    assert 'href="/workloads/templates/"' in alice  # everyone reads the templates; admins write them
    assert 'href="/workloads/templates/new/"' not in alice
    viewer = page_client("viewer").get(reverse("workloads:list")).content.decode()
    assert 'href="/workloads/"' in viewer and 'href="/workloads/submit/training/"' not in viewer
    admin = page_client("admin").get(reverse("workloads:list")).content.decode()
    assert 'href="/workloads/templates/"' in admin
