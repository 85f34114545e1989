"""The admins' view of the org -> Kueue reconcile: last runs, errors, and "sync now"."""

import pytest
from django.urls import reverse
from django.utils import timezone

from apps.core.models import AuditEvent
from apps.org.models import KueueSyncRun

URL = reverse("org:cluster_sync")


@pytest.mark.parametrize(("username", "code"), [("admin", 200), ("deptadmin", 403), ("lead", 403), ("alice", 403),
                                                ("viewer", 403)])
def test_only_admins_see_it(client_for, username, code):
    assert client_for(username).get(URL).status_code == code
    assert client_for(username).post(URL).status_code == (302 if code == 200 else 403)


def test_runs_and_errors_are_shown(client_for):
    now = timezone.now()
    KueueSyncRun.objects.create(started_at=now, finished_at=now, ok=True, changes=["updated Cohort proj-vision-h100"])
    KueueSyncRun.objects.create(started_at=now, finished_at=now, ok=False, error="500 InternalError: boom")
    page = client_for("admin").get(URL).content.decode()
    assert "updated Cohort proj-vision-h100" in page and "500 InternalError: boom" in page
    assert 'hx-trigger="every 3s"' not in page  # nothing running: no polling


def test_sync_now_is_audited_and_enqueued(client_for, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:
        response = client_for("admin").post(URL)
    assert response.status_code == 302 and len(callbacks) == 1
    assert AuditEvent.objects.filter(action="kueue_sync.request").exists()
    page = client_for("admin").get(URL, HTTP_HX_REQUEST="true").content.decode()
    assert 'id="sync-runs"' in page and "<html" not in page


def test_projects_left_out_are_shown_on_a_partial_run(client_for):
    now = timezone.now()
    problem = ("Project speech: namespace proj-speech exists in the cluster without the portal's label "
               "app.kubernetes.io/managed-by=gpu-portal")
    KueueSyncRun.objects.create(started_at=now, finished_at=now, ok=True, changes=["updated Cohort proj-vision-h100"],
                                project_errors=[problem])
    page = client_for("admin").get(URL).content.decode()
    assert '<span class="badge warn">partial</span> 1 change; 1 left out or not yet as intended' in page
    assert page.count(problem.replace("'", "&#x27;")) == 2  # the last run's panel and its row in the table
    assert 'hx-trigger="every 3s"' not in page
