"""Quota over time: a project's deserved, in use and borrowed units on a pool per step, from the
ledger, worked out by hand on fixed ledger rows; the page's choices are scoped to what the viewer may see."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from apps.org.models import NodePool, Project, Quota
from apps.usage.history import quota_history
from apps.usage.models import DeservedPeriod
from tests.apps.usage.reports_support import at, interval, quotas_in_force_since, workload

HISTORY = "/usage/quota/history/"


@pytest.fixture(autouse=True)
def _quotas_in_force_since_january(db):
    quotas_in_force_since("2026-01-01 00:00")


def _history(span: str = "day", now: str = "2026-03-02 12:07"):
    return quota_history(
        project=Project.objects.get(slug="vision"), pool=NodePool.objects.get(slug="h100"), span=span, now=at(now)
    )


def test_a_day_in_quarter_hours_by_hand(users):
    """Vision deserves 4 H100 units. 6 units from 10:00 to 11:00 (2 of them over quota); 4 units for the second
    half of the 09:00 quarter; 2 units from 11:30 on, still held at 12:07."""
    alice = users["alice"]
    interval(workload(alice, name="wide", gpus=6), "2026-03-02 10:00", "2026-03-02 11:00")
    interval(workload(alice, name="brief", gpus=4), "2026-03-02 09:07:30", "2026-03-02 09:15")
    interval(workload(alice, name="open", gpus=2), "2026-03-02 11:30", None)
    history = _history()
    assert history.step == timedelta(minutes=15) and len(history.used) == 96
    assert history.start == at("2026-03-01 12:15") and history.times[-1] == at("2026-03-02 12:00")
    by_time = {
        moment: (deserved, used, borrowed)
        for moment, deserved, used, borrowed in zip(
            history.times, history.deserved, history.used, history.borrowed, strict=True
        )
    }
    assert by_time[at("2026-03-02 09:00")] == (4, 2, 0)  # 4 units for half the quarter
    for quarter in ("10:00", "10:15", "10:30", "10:45"):
        assert by_time[at(f"2026-03-02 {quarter}")] == (4, 6, 2)
    assert by_time[at("2026-03-02 11:00")] == (4, 0, 0)
    assert by_time[at("2026-03-02 11:45")] == (4, 2, 0)
    assert by_time[at("2026-03-02 12:00")] == (4, 2, 0)  # the current quarter, averaged over its 7 minutes so far
    assert history.borrowed_card_hours == pytest.approx(2.0)  # 2 units over quota for one hour
    # Unit-hours: 6 x 1 h, 4 x 7.5 min, and 2 x 37 min (two full quarters and the 7 minutes of the current one).
    held = sum(history.used[:-1]) * 0.25 + history.used[-1] * history.current_seconds / 3600
    assert held == pytest.approx(6 + 0.5 + 2 * 37 / 60)


def test_a_quota_change_moves_deserved_and_the_borrowed_split(users):
    """Deserved goes from 4 to 2 at 10:30: the same 6 units borrow 2 before and 4 after (the ledger's split)."""
    alice = users["alice"]
    quota = Quota.objects.select_related("project__department", "node_pool").get(
        project__slug="vision", node_pool__slug="h100"
    )
    DeservedPeriod.objects.filter(project=quota.project, node_pool=quota.node_pool).update(
        ended_at=at("2026-03-02 10:30")
    )
    DeservedPeriod.objects.create(
        project=quota.project,
        department=quota.project.department,
        node_pool=quota.node_pool,
        deserved=2,
        started_at=at("2026-03-02 10:30"),
        in_force_from=at("2026-03-02 10:30"),
    )
    interval(workload(alice, name="wide", gpus=6), "2026-03-02 10:00", "2026-03-02 11:00")
    history = _history()
    rows = dict(zip(history.times, zip(history.deserved, history.used, history.borrowed, strict=True), strict=True))
    assert rows[at("2026-03-02 10:15")] == (4, 6, 2)
    assert rows[at("2026-03-02 10:30")] == (2, 6, 4)
    assert rows[at("2026-03-02 11:15")] == (2, 0, 0)


def test_week_and_month_steps(users):
    interval(workload(users["alice"], name="long", gpus=8), "2026-02-25 00:00", "2026-02-26 00:00")
    week = _history("week")
    assert week.step == timedelta(hours=1) and len(week.used) == 168
    assert week.borrowed_card_hours == pytest.approx(4 * 24)
    month = _history("month")
    assert month.step == timedelta(hours=6) and len(month.used) == 120
    assert month.used.count(8) == 4 and month.borrowed.count(4) == 4


def test_the_page_draws_the_chosen_project_and_pool_with_the_kept_library(client_for, users):
    now = timezone.now()
    work = workload(users["alice"], name="now", gpus=6)
    start = (now - timedelta(hours=3)).strftime("%Y-%m-%d %H:%M")
    interval(work, start, (now - timedelta(hours=1)).strftime("%Y-%m-%d %H:%M"))
    response = client_for("alice").get(HISTORY, {"project": "vision", "pool": "h100", "span": "day"})
    assert response.status_code == 200
    content = response.content.decode()
    assert "/static/vendor/uplot/uPlot.iife.min.js" in content and "/static/js/quota-history.js" in content
    assert "https://" not in re.sub(r"<a [^>]*>", "", content.split("<body")[0])  # nothing from a CDN
    data = json.loads(
        re.search(r'<script id="quota-history-data" type="application/json">(.*?)</script>', content, re.S).group(1)
    )
    assert len(data["t"]) == 96 and max(data["used"]) == 6 and max(data["borrowed"]) == 2
    assert set(data["deserved"]) == {4}
    assert 'data-fact="borrowed_hours">4.0<' in content  # 2 over quota for 2 hours
    # Defaults: the first project the viewer sees and its first pool, over a week.
    default = client_for("alice").get(HISTORY)
    assert default.status_code == 200 and 'data-history="vision/' in default.content.decode()
    assert "/week" in re.search(r'data-history="([^"]+)"', default.content.decode()).group(1)


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"project": "nlp"}, "No such project among those you may see."),  # another project of alice's department
        ({"project": "forecasting"}, "No such project among those you may see."),
        ({"project": "vision", "pool": "nope"}, "Vision has no quota on that pool."),
        ({"project": "vision", "span": "year"}, "Select a valid choice."),
        ({"project": "vi\x00sion"}, "Null characters are not allowed."),
    ],
)
def test_the_page_refuses_what_the_viewer_may_not_see_or_what_does_not_exist(client_for, query, message):
    response = client_for("alice").get(HISTORY, query)
    assert response.status_code == 400
    assert message in response.content.decode()
    assert 'id="quota-history-data"' not in response.content.decode()


def test_the_dashboard_links_each_project_row_to_its_history(client_for):
    content = client_for("lead").get(reverse("usage:quota")).content.decode()
    assert f'href="{HISTORY}?project=vision&amp;pool=h100" data-history-link' in content


def test_the_page_makes_a_fixed_number_of_queries(client_for, users, django_assert_max_num_queries):
    client = client_for("alice")
    now = timezone.now()
    for hours in range(1, 4):
        interval(
            workload(users["alice"], name=f"run-{hours}", gpus=1),
            (now - timedelta(hours=hours + 1)).strftime("%Y-%m-%d %H:%M"),
            (now - timedelta(hours=hours)).strftime("%Y-%m-%d %H:%M"),
        )
    with django_assert_max_num_queries(10) as few:
        client.get(HISTORY, {"project": "vision", "pool": "h100", "span": "month"})
    for hours in range(5, 40):
        interval(
            workload(users["alice"], name=f"more-{hours}", gpus=1),
            (now - timedelta(hours=hours + 1)).strftime("%Y-%m-%d %H:%M"),
            (now - timedelta(hours=hours)).strftime("%Y-%m-%d %H:%M"),
        )
    with django_assert_max_num_queries(len(few.captured_queries)):
        client.get(HISTORY, {"project": "vision", "pool": "h100", "span": "month"})
