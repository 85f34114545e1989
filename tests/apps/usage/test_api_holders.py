"""Who held the cards in the API: the holders page's rows (the same filter form), scoped to the projects one may see,
each stretch with its GPU-hours in the window split into within deserved and over quota, in a fixed number of
queries however many rows."""

from __future__ import annotations

import pytest

from tests.api_support import call
from tests.apps.usage.reports_support import interval, quotas_in_force_since, workload

WINDOW = "node_pool=h100&start=2026-03-01T00:00&end=2026-03-02T00:00"


@pytest.fixture
def ledger(demo):
    quotas_in_force_since("2026-01-01 00:00")
    alice = workload(demo["alice"], name="alice-run", gpus=2)
    carol = workload(demo["carol"], project="forecasting", name="carol-run")
    interval(alice, "2026-03-01 10:00", "2026-03-01 13:00")
    interval(carol, "2026-03-01 11:00", None)
    return {"alice": alice, "carol": carol}


def test_holders_are_the_pages_rows_scoped(client_for, ledger):
    admin = call(client_for("admin"), "GET", f"usage/holders/?{WINDOW}").json()
    assert admin["node_pool"] == "h100" and admin["count"] == 2
    assert [row["workload_name"] for row in admin["results"]] == ["alice-run", "carol-run"]  # oldest first
    alice_row = admin["results"][0]
    assert alice_row == {**alice_row, "workload": ledger["alice"].pk, "project_slug": "vision", "user": "alice",
                         "units": 2, "card_fraction": "1/1", "queue": "elastic", "gpu_hours": 6.0,
                         "ended_at": "2026-03-01T13:00:00Z"}
    assert alice_row["within_deserved"] + alice_row["over_quota"] == 6.0
    carol_row = admin["results"][1]
    assert carol_row["ended_at"] is None and carol_row["gpu_hours"] == 13.0  # still holding: up to the window's end
    # Another department's stretch is not there for alice.
    alice = call(client_for("alice"), "GET", f"usage/holders/?{WINDOW}").json()
    assert [row["workload_name"] for row in alice["results"]] == ["alice-run"]
    assert call(client_for("carol"), "GET", f"usage/holders/?{WINDOW}&project=vision").status_code == 400
    assert call(client_for("admin"), "GET", f"usage/holders/?{WINDOW}&user=carol").json()["count"] == 1
    page = call(client_for("admin"), "GET", f"usage/holders/?{WINDOW}&limit=1").json()
    assert page["count"] == 2 and len(page["results"]) == 1 and page["next"]


@pytest.mark.parametrize(("query", "field"), [("start=2026-03-02T00:00&end=2026-03-01T00:00", "end"),
                                              ("node_pool=nope", "node_pool"), ("start=yesterday", "start"),
                                              ("start=2025-01-01T00:00&end=2026-12-31T00:00", "end")])
def test_bad_filters_answer_400_naming_the_field(client_for, query, field):
    response = call(client_for("alice"), "GET", f"usage/holders/?{query}")
    assert response.status_code == 400 and field in response.json(), response.content


def test_holders_cost_a_fixed_number_of_queries(client_for, demo, ledger, django_assert_num_queries):
    client = client_for("admin")
    with django_assert_num_queries(7) as counted:  # session, user, grants, the pool, ledger settled, count, rows
        assert call(client, "GET", f"usage/holders/?{WINDOW}").status_code == 200
    for number in range(5):
        interval(workload(demo["bob"], project="nlp", name=f"bob-{number}"), f"2026-03-01 0{number}:00",
                 f"2026-03-01 0{number}:30")
    with django_assert_num_queries(len(counted.captured_queries)):
        assert call(client, "GET", f"usage/holders/?{WINDOW}").json()["count"] == 7
