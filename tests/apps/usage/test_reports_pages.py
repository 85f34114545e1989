"""The showback page, its CSV, "who held the cards" and GET /api/v1/usage/: scoping, CSV content, query counts."""

from __future__ import annotations

import csv
import html
import io
import re
from decimal import Decimal

import pytest

from apps.org.models import Budget, Department, Project
from apps.usage.models import UsageInterval

from .reports_support import at, interval, priced, quotas_in_force_since, workload

MARCH = "month=2026-03"


@pytest.fixture
def ledger(demo):
    """Three projects in two departments, two users of vision, a MIG row, a preempted-and-requeued workload; the
    demo's quotas in force since January."""
    quotas_in_force_since("2026-01-01 00:00")
    interval(workload(demo["alice"], project="vision", gpus=2, preemptible=False, model_label="llama",
                      data_class="pii"), "2026-03-02 00:00", "2026-03-02 05:00")  # 10 within
    requeued = workload(demo["lead"], project="vision", gpus=4, name="sweep")
    interval(requeued, "2026-03-03 00:00", "2026-03-03 01:00", reason="Preempted: InCohortReclamation")  # 4
    interval(requeued, "2026-03-03 02:00", "2026-03-03 03:30", reason="Succeeded")  # 6
    interval(workload(demo["bob"], project="nlp", pool="a100-mig-3g40gb", gpus=7), "2026-03-04 00:00",
             "2026-03-04 01:00")  # 3
    interval(workload(demo["carol"], project="forecasting", gpus=1), "2026-03-05 00:00", "2026-03-05 08:00")  # 8
    return demo


def table_rows(response) -> list[list[str]]:
    content = response.content.decode()
    table = re.search(r'<table class="usage-table">(.*?)</table>', content, re.S).group(1)
    body = re.sub(r"<tfoot>.*?</tfoot>", "", table, flags=re.S)
    rows = []
    for row in re.findall(r"<tr>(.*?)</tr>", body, re.S):
        cells = [html.unescape(re.sub(r"<[^>]+>", "", cell)).strip() for cell in re.findall(
            r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)]
        if cells and "No GPU-hours" not in cells[0]:
            rows.append(cells)
    return rows


def csv_rows(response) -> list[list[str]]:
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"].startswith('attachment; filename="gpu-hours-by-')
    return list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))


def test_showback_page_lists_visible_projects_with_hours(ledger, client_for):
    response = client_for("admin").get(f"/usage/reports/?{MARCH}&group=project")
    assert response.status_code == 200
    rows = {cells[0]: cells for cells in table_rows(response)[1:]}
    # GPU-hours, within deserved, over quota: lead's 4 preemptible H100 stay inside Vision's 4 deserved.
    assert rows["vision"][3:6] == ["20.000", "20.000", "0.000"]
    assert rows["nlp"][3] == "3.000" and rows["forecasting"][3] == "8.000"
    assert rows["etl"][3] == "0.000"  # quota, no use
    assert 'class="usage-chart"' in response.content.decode()


def test_csv_is_exactly_the_pages_table(ledger, client_for):
    client = client_for("deptadmin")
    for query in (f"{MARCH}&group=project", f"{MARCH}&group=user", f"{MARCH}&group=pool",
                  "start=2026-02-01&end=2026-04-30&group=month", f"{MARCH}&group=department&project=vision"):
        page = table_rows(client.get(f"/usage/reports/?{query}"))
        exported = csv_rows(client.get(f"/usage/reports.csv?{query}"))
        assert exported == page, query
        assert exported[0][:2] and len(exported) > 1


def test_csv_cells_that_a_spreadsheet_would_run_are_neutralised(ledger, client_for):
    Project.objects.filter(slug="vision").update(name='=HYPERLINK("http://evil.example","x")')
    Project.objects.filter(slug="nlp").update(name="@SUM(1+1)")
    Project.objects.filter(slug="forecasting").update(name="\tplain")
    exported = {cells[0]: cells for cells in csv_rows(
        client_for("admin").get(f"/usage/reports.csv?{MARCH}&group=project"))[1:]}
    assert exported["vision"][1] == '\'=HYPERLINK("http://evil.example","x")'
    assert exported["nlp"][1] == "'@SUM(1+1)"
    assert exported["forecasting"][1] == "'\tplain"
    assert exported["vision"][3] == "20.000"  # numbers stay numbers


def test_htmx_filter_change_renders_only_the_report(ledger, client_for):
    response = client_for("alice").get(f"/usage/reports/?{MARCH}&group=user", HTTP_HX_REQUEST="true")
    content = response.content.decode()
    assert content.lstrip().startswith('<div id="usage-report">') and "<html" not in content
    assert [row[0] for row in table_rows(response)[1:]] == ["alice", "lead"]  # 10 each: by name


def test_researcher_sees_own_projects_only(ledger, client_for):
    client = client_for("alice")
    rows = [cells[0] for cells in table_rows(client.get(f"/usage/reports/?{MARCH}&group=project"))[1:]]
    assert rows == ["vision"]
    users = [cells[0] for cells in csv_rows(client.get(f"/usage/reports.csv?{MARCH}&group=user"))[1:]]
    assert sorted(users) == ["alice", "lead"]
    # Another department's project is not a choice: the form refuses it and nothing is shown or exported.
    response = client.get(f"/usage/reports/?{MARCH}&project=forecasting")
    content = response.content.decode()
    assert "No project &#x27;forecasting&#x27; that you may see." in content and 'class="usage-table"' not in content
    assert client.get(f"/usage/reports.csv?{MARCH}&project=forecasting").status_code == 400


def test_department_admin_sees_own_department(ledger, client_for):
    rows = table_rows(client_for("deptadmin").get(f"/usage/reports/?{MARCH}&group=department"))
    assert [cells[0] for cells in rows[1:]] == ["research"]
    assert rows[1][2] == "23.000"


def test_invalid_periods_are_explained(ledger, client_for):
    client = client_for("admin")
    content = client.get("/usage/reports/?start=2026-03-05&end=2026-03-01").content.decode()
    assert "The end date is before the start date." in content
    content = client.get("/usage/reports/?start=2025-01-01&end=2026-03-01").content.decode()
    assert "at most 400 days" in content
    assert "Give both ends" in client.get("/usage/reports/?start=2026-03-05").content.decode()
    assert "Choose a month" in client.get("/usage/reports/?month=2026-13").content.decode()


def test_custom_range_end_day_is_inclusive(ledger, client_for):
    rows = table_rows(client_for("admin").get("/usage/reports/?start=2026-03-02&end=2026-03-03&group=project"))
    assert {cells[0]: cells[3] for cells in rows[1:]}["vision"] == "20.000"
    rows = table_rows(client_for("admin").get("/usage/reports/?start=2026-03-02&end=2026-03-02&group=project"))
    assert {cells[0]: cells[3] for cells in rows[1:]}["vision"] == "10.000"


def grow(demo, n: int) -> None:
    """n more projects in research with quotas, each with intervals of several users; a price per pool that changes
    in March (each pool's cost then sums its priced stretches)."""
    from decimal import Decimal

    from apps.org import services
    from apps.org.models import Budget, Department, NodePool, NodePoolPrice

    research = Department.objects.get(slug="research")
    pools = list(NodePool.objects.all())
    for i in range(n):
        NodePoolPrice.objects.create(node_pool=pools[i % 3], price_per_card_hour=Decimal(i + 1),
                                     valid_from=at(f"2026-03-{10 + i:02d} 01:30"))
        project = services.project_create(actor=demo["admin"], department=research, slug=f"grown-{i}",
                                          name=f"Grown {i}")
        services.quota_set(actor=demo["admin"], node_pool=pools[i % 3], project=project, deserved=0, limit=None)
        for metric in ("gpu_hours", "cost"):
            Budget.objects.create(project=project, metric=metric, amount=Decimal(100))
        for who in ("alice", "bob", "lead"):
            work = workload(demo[who], project=project.slug, pool=pools[i % 3].slug)
            interval(work, "2026-03-10 00:00", "2026-03-10 03:00")
            interval(work, "2026-03-11 00:00", None)


# Pinned query counts: session, user and the viewer's role bindings (3) come first everywhere.
PAGE_QUERIES = {
    # + the report (pending ledger recomputes, pools, price history, ledger aggregate, deserved quotas, project
    # names) + the filter's choices (departments, projects, users, pools)
    # + the budgets the viewer may see with this period's figures, 6 however many budgets (the budgets, prices now,
    # price history, the month's sums, the running work, the recent runs of its projects for its forecast ends;
    # apps/usage/budgets.py budget_statuses)
    f"/usage/reports/?{MARCH}&group=project": 19,
    f"/usage/reports/?{MARCH}&group=user": 18,  # users have no deserved quota: no quota query
    f"/usage/reports.csv?{MARCH}&group=department": 9,  # the report only
    # + pending recomputes, the pool named in the filter, the count and one page of intervals (with workload,
    # project, user), choices
    "/usage/holders/?node_pool=h100&start=2026-03-01T00:00&end=2026-03-31T00:00": 11,
    "/usage/holders.csv?node_pool=h100&start=2026-03-01T00:00&end=2026-03-31T00:00": 6,  # + pool, rows (chunks)
}


@pytest.mark.parametrize("username", ["admin", "deptadmin", "alice"])
def test_page_and_csv_query_counts_are_pinned_and_do_not_grow(ledger, client_for, django_assert_num_queries,
                                                              username):
    client = client_for(username)
    client.get("/usage/reports/")  # warm the session
    research = Department.objects.get(slug="research")
    for metric in ("gpu_hours", "cost"):
        Budget.objects.create(department=research, metric=metric, amount=Decimal(1000))

    def measure() -> None:
        for url, queries in PAGE_QUERIES.items():
            with django_assert_num_queries(queries):
                response = client.get(url)
                b"".join(response.streaming_content) if response.streaming else response.content

    measure()
    grow(ledger, 12)
    measure()


# --- who held the cards -------------------------------------------------------------------------------------------


def holder_csv(response) -> list[list[str]]:
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"].startswith('attachment; filename="card-holders-')
    return list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))


def test_holders_timeline_and_table(ledger, client_for):
    response = client_for("admin").get("/usage/holders/?node_pool=h100&start=2026-03-01T00:00&end=2026-03-06T00:00")
    content = response.content.decode()
    assert response.status_code == 200
    ids = [int(pk) for pk in re.findall(r'data-interval="(\d+)"', content)]
    expected = list(UsageInterval.objects.filter(node_pool__slug="h100").order_by("started_at").values_list(
        "pk", flat=True))
    assert ids == expected and len(ids) == 4
    assert content.count('class="holders-track"') == 4
    # The first stretch is 5 hours of a 5-day window, starting a day in: left 20%, width 4.167%.
    assert 'data-bar-left="20.000" data-bar-width="4.167"' in content  # applied by static/js/portal.js (CSP)
    assert "llama" in content and "pii" in content


def test_holders_filters_and_csv(ledger, client_for):
    client = client_for("admin")
    base = "node_pool=h100&start=2026-03-01T00:00&end=2026-04-01T00:00"
    rows = holder_csv(client.get(f"/usage/holders.csv?{base}"))
    assert rows[0][:3] == ["Interval", "Workload", "Workload name"] and len(rows) == 5
    sweep = [row for row in rows[1:] if row[2] == "sweep"]
    assert [(row[4], row[5], row[7], row[14], row[15]) for row in sweep] == [
        ("vision", "lead", "4", "Preempted: InCohortReclamation", "4.000"), ("vision", "lead", "4", "Succeeded",
                                                                            "6.000")]
    assert [row[5] for row in holder_csv(client.get(f"/usage/holders.csv?{base}&user=alice"))[1:]] == ["alice"]
    assert [row[4] for row in holder_csv(client.get(f"/usage/holders.csv?{base}&project=forecasting"))[1:]] == [
        "forecasting"]
    by_label = holder_csv(client.get(f"/usage/holders.csv?{base}&model_label=LLAMA&data_class=pii"))
    assert [(row[10], row[11]) for row in by_label[1:]] == [("llama", "pii")]
    mig = holder_csv(client.get("/usage/holders.csv?node_pool=a100-mig-3g40gb&start=2026-03-01T00:00"
                                "&end=2026-04-01T00:00"))
    assert [(row[7], row[8], row[15]) for row in mig[1:]] == [("7", "3/7", "3.000")]


def test_holders_are_scoped(ledger, client_for):
    base = "start=2026-03-01T00:00&end=2026-04-01T00:00"
    alice = client_for("alice")
    projects = {row[4] for row in holder_csv(alice.get(f"/usage/holders.csv?node_pool=h100&{base}"))[1:]}
    assert projects == {"vision"}
    assert holder_csv(alice.get(f"/usage/holders.csv?node_pool=a100-mig-3g40gb&{base}"))[1:] == []
    assert alice.get(f"/usage/holders/?node_pool=h100&project=forecasting&{base}").status_code == 200
    assert "No project &#x27;forecasting&#x27; that you may see." in alice.get(
        f"/usage/holders/?project=forecasting&{base}").content.decode()
    assert alice.get(f"/usage/holders.csv?project=forecasting&{base}").status_code == 400
    assert client_for("admin").get("/usage/holders/?start=2026-03-02T00:00&end=2026-03-01T00:00").content.decode(
    ).count("The end must be after the start.") == 1


def test_pages_need_a_login(client):
    assert client.get("/usage/reports/").status_code == 302
    assert client.get("/usage/holders.csv").status_code == 302


# --- the API ------------------------------------------------------------------------------------------------------


def test_api_rows_name_their_group(ledger, client_for):
    client = client_for("admin")
    body = client.get("/api/v1/usage/?group_by=project&start=2026-03-01&end=2026-04-01").json()
    vision = next(row for row in body["rows"] if row["project_slug"] == "vision")
    assert vision["project"] == Project.objects.get(slug="vision").pk and vision["department_slug"] == "research"
    assert (vision["gpu_hours"], vision["gpu_hours_within_quota"], vision["gpu_hours_borrowed"]) == (20.0, 20.0, 0.0)
    assert vision["deserved_gpu_hours"] == pytest.approx((4 + 3 * 3 / 7 + 1) * 31 * 24, abs=1e-3)
    assert vision["cost"] is None
    assert body["total"]["gpu_hours"] == 31.0 == sum(row["gpu_hours"] for row in body["rows"])
    assert body["start"] == "2026-03-01T00:00:00Z" and body["end"] == "2026-04-01T00:00:00Z"
    for group_by, id_field, slug_field, slug in [("department", "department", "department_slug", "research"),
                                                 ("user", "user", "username", "alice"),
                                                 ("pool", "node_pool", "node_pool_slug", "a100-mig-3g40gb")]:
        rows = client.get(f"/api/v1/usage/?group_by={group_by}&start=2026-03-01&end=2026-04-01").json()["rows"]
        row = next(row for row in rows if row[slug_field] == slug)
        assert isinstance(row[id_field], int) and row["gpu_hours"] > 0
    users = client.get("/api/v1/usage/?group_by=user&start=2026-03-01&end=2026-04-01").json()["rows"]
    assert all(row["deserved_gpu_hours"] is None for row in users)


def test_api_cost_when_priced(ledger, client_for):
    from apps.org.models import NodePool

    priced("h100", "3", "2026-02-01 00:00")
    client = client_for("admin")
    march = "/api/v1/usage/?group_by=pool&start=2026-03-01&end=2026-04-01"
    rows = client.get(march).json()["rows"]
    assert {row["node_pool_slug"]: row["cost"] for row in rows}["h100"] == 84.0  # 28 card-hours x 3
    # A new price is in force from now on: March keeps the price it was used at.
    h100 = NodePool.objects.get(slug="h100")
    response = client.patch(f"/api/v1/node-pools/{h100.pk}/", {"price_per_card_hour": "5"},
                            content_type="application/json")
    assert response.status_code == 200, response.content
    assert [entry["price_per_card_hour"] for entry in response.json()["price_history"]] == ["3.0000", "5.0000"]
    assert {row["node_pool_slug"]: row["cost"] for row in client.get(march).json()["rows"]}["h100"] == 84.0


def test_api_is_scoped_and_filters_leak_nothing(ledger, client_for):
    alice = client_for("alice")
    rows = alice.get("/api/v1/usage/?group_by=project&start=2026-03-01&end=2026-04-01").json()["rows"]
    assert [row["project_slug"] for row in rows] == ["vision"]
    for project in ("forecasting", "no-such-project"):
        response = alice.get(f"/api/v1/usage/?group_by=project&start=2026-03-01&end=2026-04-01&project={project}")
        assert response.status_code == 400
        assert response.json() == {"project": [f"No project '{project}' that you may see."]}
    rows = client_for("deptadmin").get("/api/v1/usage/?group_by=user&start=2026-03-01&end=2026-04-01").json()["rows"]
    assert sorted(row["username"] for row in rows) == ["alice", "bob", "lead"]
    assert client_for("admin").get(
        "/api/v1/usage/?group_by=project&start=2026-03-01&end=2026-04-01&user=carol").json()["total"][
        "gpu_hours"] == 8.0


def test_api_validation_messages(ledger, client_for):
    client = client_for("admin")
    cases = [
        ("group_by=team&start=2026-03-01&end=2026-04-01",
         {"group_by": ["Choose one of: department, project, user, pool."]}),
        ("group_by=project&start=2026-04-01&end=2026-03-01", {"end": ["The end must be after the start."]}),
        ("group_by=project&start=2025-01-01&end=2026-04-01",
         {"end": ["A report spans at most 400 days; choose a shorter period."]}),
        ("group_by=project&start=March&end=2026-04-01",
         {"start": ["'March' is not an ISO date (2026-03-01) or date-time (2026-03-01T08:00Z)."]}),
        ("group_by=project&end=2026-04-01",
         {"start": ["Give start as an ISO date (2026-03-01) or date-time (2026-03-01T08:00Z)."]}),
    ]
    for query, errors in cases:
        response = client.get(f"/api/v1/usage/?{query}")
        assert (response.status_code, response.json()) == (400, errors), query
    assert client.get("/api/v1/usage/?group_by=project&start=2026-03-01T06:00:00%2B02:00&end=2026-03-02").json()[
        "start"] == "2026-03-01T04:00:00Z"


@pytest.mark.parametrize("username", ["admin", "alice"])
def test_api_query_count_is_pinned_and_constant(ledger, client_for, django_assert_num_queries, username):
    client = client_for(username)
    url = "/api/v1/usage/?group_by=project&start=2026-03-01&end=2026-04-01"
    client.get(url)
    # session, user, role bindings, pending ledger recomputes, pools, price history, the ledger aggregate,
    # deserved quotas, project names
    with django_assert_num_queries(9):
        assert client.get(url).status_code == 200
    grow(ledger, 10)
    with django_assert_num_queries(9):
        assert client.get(url).status_code == 200


def test_api_needs_authentication(client):
    assert client.get("/api/v1/usage/?group_by=project&start=2026-03-01&end=2026-04-01").status_code in {401, 403}


def test_admin_sets_a_price_per_card_hour_on_the_pool_form(demo, client_for):
    from decimal import Decimal

    from apps.core.models import AuditEvent
    from apps.org.forms import NodePoolForm
    from apps.org.models import NodePool

    pool = NodePool.objects.get(slug="h100")
    initial = NodePoolForm(instance=pool).initial
    data = {name: value for name, value in initial.items() if value not in (None, False)}
    data["price_per_card_hour"] = "2.75"
    response = client_for("admin").post("/pools/h100/edit/", data)
    assert response.status_code == 302, response.content.decode()[:2000]
    pool.refresh_from_db()
    assert pool.price_per_card_hour == Decimal("2.75")
    event = AuditEvent.objects.filter(action="node_pool.update", object_id=str(pool.pk)).latest("at")
    assert (event.before["price_per_card_hour"], event.after["price_per_card_hour"]) == (None, "2.75")
    assert "2.75 / card-h" in client_for("viewer").get("/pools/").content.decode()
    data["price_per_card_hour"] = "-1"
    assert client_for("admin").post("/pools/h100/edit/", data).status_code == 200  # refused on the form
    assert client_for("alice").post("/pools/h100/edit/", {**data, "price_per_card_hour": "0"}).status_code == 403


def test_the_page_shows_the_budgets_the_viewer_may_see(ledger, client_for):
    research, forecasting = Department.objects.get(slug="research"), Project.objects.get(slug="forecasting")
    shown = Budget.objects.create(department=research, amount=Decimal(1000))
    hidden = Budget.objects.create(project=forecasting, amount=Decimal(10))
    content = client_for("alice").get(f"/usage/reports/?{MARCH}").content.decode()
    assert f'data-budget="{shown.pk}"' in content and f'data-budget="{hidden.pk}"' not in content
    assert "Burn rate per day" in content and "/ 1000 GPU-hours" in content
    assert "Manage budgets" not in content  # alice sets no budgets
    assert "Manage budgets" in client_for("lead").get("/usage/reports/").content.decode()
    # A filter change re-renders the report alone.
    assert 'id="budget-summary"' not in client_for("alice").get(
        f"/usage/reports/?{MARCH}", HTTP_HX_REQUEST="true").content.decode()
