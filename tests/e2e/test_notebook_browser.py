"""Browser: alice submits a notebook, clicks Connect and works in it through the portal (kubesim serves it as a
Jupyter server behind the API server's service proxy); bob and the viewer get 404 even with its URLs; idle culling
leaves it running while it is used and stops it, with an event that says why, once it is not."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from tests.e2e.test_submit_browser import fill_common
from tests.worker.conftest import celery_worker, cluster, kubesim, wait_for, watcher  # noqa: F401 - fixtures

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_alice_opens_her_notebook_others_cannot_and_idleness_stops_it(login, cluster, kubesim,  # noqa: F811
                                                                        celery_worker, watcher, settings):  # noqa: F811
    from django.urls import reverse
    from django.utils import timezone

    from apps.workloads import notebooks
    from apps.workloads.models import Kind, Status, Workload, WorkloadEvent
    from worker import tasks
    from worker.kueue_sync import desired_from_database, reconcile

    settings.KUBECONFIG = kubesim.kubeconfig_path
    notebooks.forget_client()
    page = login("alice")
    reconcile(cluster, desired_from_database())

    page.goto("/workloads/submit/notebook/")
    page.select_option("#id_node_pool", label="L40S time-sliced (l40s-shared)")
    fill_common(page, name="explore", image="quay.io/jupyter/base-notebook:2024-05-27", model="eda")
    page.fill("#id_notebook_idle_timeout_minutes", "30")
    page.fill("#id_memory_gib", "16")
    page.fill("#id_shm_gib", "2")
    page.click("button[type=submit] >> text=Submit notebook")
    page.wait_for_url(re.compile(r"/workloads/\d+/$"))
    notebook = Workload.objects.get(kind=Kind.NOTEBOOK)
    wait_for(lambda: Workload.objects.get(pk=notebook.pk).k8s_uid)  # the real worker created Job, token and Service
    kubesim.advance(1)
    wait_for(lambda: Workload.objects.get(pk=notebook.pk).status == Status.RUNNING)
    kubesim.advance(30)

    page.reload()
    assert notebooks.token(notebook.pk) not in page.content()
    with page.context.expect_page() as opened:
        page.click("#connect")
    jupyter = opened.value
    jupyter.wait_for_load_state()
    assert jupyter.title() == "JupyterLab"
    assert "Jupyter server in pod" in jupyter.inner_text("body")
    assert notebooks.token(notebook.pk) not in jupyter.url and notebooks.token(notebook.pk) not in jupyter.content()
    assert jupyter.url.endswith(reverse("workloads:notebook", args=[notebook.pk, "lab"]))

    connect_url = reverse("workloads:connect", args=[notebook.pk])
    notebook_url = reverse("workloads:notebook", args=[notebook.pk, "lab"])
    for name in ("bob", "viewer"):
        other = login(name)
        for url in (connect_url, notebook_url):
            response = other.goto(url)
            assert response is not None and response.status == 404, (name, url)
            assert "JupyterLab" not in other.content()

    # Her visit was activity in the notebook: though the portal saw no keep-alive for 31 minutes, it keeps running.
    away = timezone.now() - timedelta(minutes=31)
    Workload.objects.filter(pk=notebook.pk).update(last_activity_at=away)
    assert tasks.notebooks_cull_idle.apply().get() == 0
    assert Workload.objects.get(pk=notebook.pk).status == Status.RUNNING
    # Nothing more for 31 minutes, in the notebook or the portal: stopped, and the page says why.
    Workload.objects.filter(pk=notebook.pk).update(server_activity_at=away)
    assert tasks.notebooks_cull_idle.apply().get() == 1
    wait_for(lambda: Workload.objects.get(pk=notebook.pk).status == Status.STOPPED)
    event = WorkloadEvent.objects.get(workload=notebook, reason="IdleTimeout", to_status=Status.STOPPING)
    assert event.message.startswith("Stopped after 30 minutes without activity")
    page.goto(reverse("workloads:detail", args=[notebook.pk]))
    assert "Stopped after 30 minutes without activity" in page.inner_text("#workload-live")
    assert page.locator("#connect").count() == 0
    response = page.goto(notebook_url)
    assert response is not None and response.status == 404
    notebooks.forget_client()
