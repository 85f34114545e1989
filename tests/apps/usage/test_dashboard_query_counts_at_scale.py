"""The dashboards and the other pages that show what the workloads add up to (the quota dashboard and its polls, the
queue pages, the held-idle list) make the same number of queries at 10,000 workloads as at 100, for viewers who see
everything, a department or one project, and those numbers are pinned."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.apps.workloads.test_query_counts_at_scale import add_rows, queries

pytestmark = [pytest.mark.django_db, pytest.mark.slow]


def test_dashboards_make_as_many_queries_at_10000_rows_as_at_100(client_for, users):
    poll = {"HTTP_HX_REQUEST": "true"}
    surfaces = {
        "admin's quota dashboard": ("admin", reverse("usage:quota"), {}),
        "lead's quota dashboard": ("lead", reverse("usage:quota"), {}),
        "alice's quota dashboard": ("alice", reverse("usage:quota"), {}),
        "alice's quota dashboard, polled": ("alice", reverse("usage:quota"), poll),
        "admin's quota dashboard, polled": ("admin", reverse("usage:quota"), poll),
        "admin's cluster queues": ("admin", reverse("usage:queues"), {}),
        "alice's cluster queues": ("alice", reverse("usage:queues"), {}),
        "lead's cohorts": ("lead", reverse("usage:queues_tab", args=["cohorts"]), {}),
        "admin's held-idle list": ("admin", reverse("workloads:held_idle"), {}),
    }
    clients = {username: client_for(username) for username in ("admin", "lead", "alice")}

    def measure() -> dict[str, int]:
        return {label: queries(lambda u=username, p=path, h=headers: clients[u].get(p, **h))
                for label, (username, path, headers) in surfaces.items()}

    add_rows(100, 0, users)
    measure()  # warm: sessions and first-use stamps are written once
    at_100 = measure()
    add_rows(9_900, 100, users)
    at_10000 = measure()
    assert at_10000 == at_100
    # Pinned: session, user and grants, then each surface's own fixed reads; the quota dashboard reads its figures
    # in one round trip, which also says whether the viewer's departments hold a budget (none here: the budgets' own
    # queries do not run), and its polls add the figures' fingerprint, five reads in one round trip more
    # (bench/README.md, "Live-state pages and the watcher"). A change here is a change of the page's floor, to be
    # measured there.
    assert at_100 == {"admin's quota dashboard": 4, "lead's quota dashboard": 4, "alice's quota dashboard": 4,
                      "alice's quota dashboard, polled": 5, "admin's quota dashboard, polled": 5,
                      "admin's cluster queues": 9, "alice's cluster queues": 9, "lead's cohorts": 11,
                      "admin's held-idle list": 5}
