"""Work submitted outside the portal in the GPU-hour reports: showback by user groups what no user is named on as
"outside the portal" (page, CSV, API); "who held the cards" names its submitter as the lists do; another department
sees none of it; the pages' query counts stay pinned with it mixed in."""

from __future__ import annotations

import pytest

from apps.org.models import NodePool, Project
from tests.factories import WorkloadFactory

from .reports_support import interval, workload
from .test_reports_pages import MARCH, csv_rows, holder_csv, table_rows

HOLDERS = "node_pool=h100&start=2026-03-01T00:00&end=2026-03-31T00:00"


def outside(*, project: str = "vision", **extra):
    return WorkloadFactory(outside=True, project=Project.objects.get(slug=project),
                           node_pool=NodePool.objects.get(slug="h100"), status="running", **extra)


@pytest.fixture
def ledger(demo):
    """alice's own run (2 GPUs x 5 h), a kubectl Job no user is named on (4 x 2 h), one attributed to alice (4 x 1 h),
    and carol's department's kubectl Job (4 x 3 h)."""
    interval(workload(demo["alice"], gpus=2), "2026-03-02 00:00", "2026-03-02 05:00")
    interval(outside(name="kubectl-anon"), "2026-03-03 00:00", "2026-03-03 02:00", units=4)
    interval(outside(name="argo-alice", owner=demo["alice"], submitted_by="argo"), "2026-03-04 00:00",
             "2026-03-04 01:00", units=4)
    interval(outside(name="kubectl-carol", project="forecasting"), "2026-03-05 00:00", "2026-03-05 03:00", units=4)
    return demo


def test_showback_by_user_counts_work_of_no_user_as_outside_the_portal(ledger, client_for):
    page = client_for("admin").get(f"/usage/reports/?{MARCH}&group=user")
    rows = {cells[1]: cells for cells in table_rows(page)[1:]}
    assert rows["outside the portal"][0] == "" and rows["outside the portal"][2] == "20.000"  # 8 + 12
    assert {cells[0]: cells for cells in table_rows(page)[1:]}["alice"][2] == "14.000"  # 10 own + 4 attributed
    assert "None" not in page.content.decode()
    lines = csv_rows(client_for("admin").get(f"/usage/reports.csv?{MARCH}&group=user"))
    by_name = {line[1]: line for line in lines[1:]}
    assert by_name["outside the portal"][:3] == ["", "outside the portal", "20.000"]
    assert all("None" not in line for line in lines)


def test_the_api_names_the_group_of_no_user(ledger, client_for):
    response = client_for("lead").get("/api/v1/usage/", {"group_by": "user", "start": "2026-03-01",
                                                        "end": "2026-04-01"})
    assert response.status_code == 200
    rows = {row["name"]: row for row in response.json()["rows"]}
    assert rows["outside the portal"]["user"] is None and rows["outside the portal"]["gpu_hours"] == 8.0
    alice = next(row for row in response.json()["rows"] if row["username"] == "alice")
    assert alice["gpu_hours"] == 14.0  # her own 10 and the pipeline's 4 attributed to her


def test_holders_name_the_submitter_as_the_lists_do(ledger, client_for):
    page = client_for("admin").get(f"/usage/holders/?{HOLDERS}")
    content = page.content.decode()
    assert "<td>outside the portal (kubectl-create)</td>" in content and "<td>alice</td>" in content
    assert "<td>None</td>" not in content and "· None ·" not in content
    lines = holder_csv(client_for("admin").get(f"/usage/holders.csv?{HOLDERS}"))
    users = {line[2]: line[5] for line in lines[1:]}
    assert users["kubectl-anon"] == "outside the portal (kubectl-create)" and users["argo-alice"] == "alice"
    assert users["kubectl-carol"] == "outside the portal (kubectl-create)"


def test_another_department_sees_none_of_it(ledger, client_for):
    lines = holder_csv(client_for("alice").get(f"/usage/holders.csv?{HOLDERS}"))
    assert "kubectl-carol" not in {line[2] for line in lines[1:]}
    carol = holder_csv(client_for("carol").get(f"/usage/holders.csv?{HOLDERS}"))
    assert {line[2] for line in carol[1:]} == {"kubectl-carol"}
    report = client_for("carol").get("/api/v1/usage/", {"group_by": "user", "start": "2026-03-01",
                                                        "end": "2026-04-01"}).json()
    assert [(row["name"], row["gpu_hours"]) for row in report["rows"]] == [("outside the portal", 12.0)]


def test_holders_query_count_stays_pinned_with_outside_work(ledger, client_for, django_assert_num_queries):
    client = client_for("admin")
    client.get("/usage/reports/")  # warm the session
    with django_assert_num_queries(11):  # as tests/apps/usage/test_reports_pages.PAGE_QUERIES says
        client.get(f"/usage/holders/?{HOLDERS}")
    for number in range(6):
        interval(outside(name=f"more-{number}"), "2026-03-06 00:00", "2026-03-06 01:00", units=4)
    with django_assert_num_queries(11):
        client.get(f"/usage/holders/?{HOLDERS}")
