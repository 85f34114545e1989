"""Budget figures from the ledger (apps/usage/budgets.py): spent equals the ledger's sums clipped to the period (cost
at the price in force then), the burn rate is spent per day so far, the projection adds the running work until the
period ends or its runtime is up, and the figures of every visible budget cost the same few queries however many
budgets and intervals there are."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.org.models import Budget, Department, Project
from apps.usage.budgets import budget_status, budget_statuses
from apps.usage.models import UsageInterval
from apps.workloads.models import Workload

from .reports_support import at, expected_hours, interval, priced, workload

pytestmark = pytest.mark.django_db
NOW = at("2026-03-11 00:00")  # ten days into March, in Q1


def budget(owner: str, *, period: str = "month", metric: str = "gpu_hours", amount: str = "100") -> Budget:
    scope = {"project": Project.objects.get(slug=owner)} if Project.objects.filter(slug=owner).exists() else {
        "department": Department.objects.get(slug=owner)}
    return Budget.objects.create(period=period, metric=metric, amount=Decimal(amount), **scope)


@pytest.fixture
def ledger(demo):
    """Vision: 2 H100 for 3 hours in February (outside the month, inside the quarter) and 2 for 5 hours in March;
    NLP: 1 H100 running since 1 March 00:00 with a 20-day runtime limit; Forecasting (another department): 4 H100
    in March. H100 costs 2 per card-hour from January, 3 from 5 March."""
    priced("h100", "2", "2026-01-01 00:00")
    priced("h100", "3", "2026-03-05 00:00")
    alice, bob, carol = demo["alice"], demo["bob"], demo["carol"]
    rows = [interval(workload(alice, gpus=2), "2026-02-10 00:00", "2026-02-10 03:00"),
            interval(workload(alice, gpus=2), "2026-03-04 22:00", "2026-03-05 03:00")]
    running = workload(bob, project="nlp", gpus=1)
    Workload.objects.filter(pk=running.pk).update(max_runtime_seconds=20 * 24 * 3600)
    running.refresh_from_db()
    rows.append(interval(running, "2026-03-01 00:00", None))
    interval(workload(carol, project="forecasting", gpus=4), "2026-03-02 00:00", "2026-03-02 01:00")
    return rows


def test_spent_burn_rate_and_projection_equal_the_ledger(ledger):
    vision, research, cost, quarter = budget("vision"), budget("research", amount="1000"), budget(
        "vision", metric="cost"), budget("research", period="quarter", amount="1000")
    statuses = {status.budget.pk: status for status in budget_statuses([vision, research, cost, quarter], now=NOW)}
    march, q1 = statuses[vision.pk].period, statuses[quarter.pk].period
    assert (march.start, march.end) == (at("2026-03-01 00:00"), at("2026-04-01 00:00"))
    assert (q1.start, q1.end) == (at("2026-01-01 00:00"), at("2026-04-01 00:00"))

    assert statuses[vision.pk].spent == Decimal("10.000")  # 2 cards x 5 h in March
    research_march = expected_hours(ledger, march.start, NOW)  # Vision's 10 and NLP's 240 running hours
    assert float(statuses[research.pk].spent) == pytest.approx(research_march) == 250.0
    assert float(statuses[quarter.pk].spent) == pytest.approx(expected_hours(ledger, q1.start, NOW)) == 256.0
    assert statuses[cost.pk].spent == Decimal("2") * 4 + Decimal("3") * 6  # 2 cards x 2 h at 2, x 3 h at 3

    assert statuses[vision.pk].burn_per_day == Decimal("1.000")  # 10 over ten days
    assert statuses[research.pk].burn_per_day == Decimal("25.000")
    # NLP's run stops at its 20-day limit (21 March): 10 more days of one card, before the month ends.
    assert statuses[research.pk].projected == Decimal("250.000") + Decimal("240.000")
    assert statuses[vision.pk].projected == statuses[vision.pk].spent  # nothing of Vision's is running
    assert statuses[research.pk].percent == pytest.approx(25.0)
    assert statuses[research.pk].projected_percent == pytest.approx(49.0)

    # One budget alone gives the same figures as in a list.
    assert budget_status(research, now=NOW) == statuses[research.pk]


def test_the_figures_of_many_budgets_take_as_many_queries_as_of_one(ledger, demo):
    def count(budgets: list[Budget]) -> int:
        with CaptureQueriesContext(connection) as queries:
            budget_statuses(budgets, now=NOW)
        return len(queries)

    one = count([budget("vision", metric="cost")])
    many = [budget(slug, period=period, metric=metric, amount="100000")
            for slug in ("nlp", "forecasting", "analytics", "data-science")
            for period in ("month", "quarter") for metric in ("gpu_hours", "cost")]
    more = workload(demo["carol"], project="analytics", gpus=1)
    for day in range(1, 9):
        interval(more, f"2026-03-0{day} 00:00", f"2026-03-0{day} 02:00")
    assert count([*Budget.objects.all()]) == one + 1  # the quarter's sums besides the month's
    assert len(many) == 16 and count([]) == 0
    assert UsageInterval.objects.count() > len(ledger) + 8


def test_the_projection_runs_work_to_the_end_similar_recent_runs_forecast(ledger, demo):
    """NLP's run has held its card ten days; similar runs of NLP's (kind and image family) took 12, 14 and 16 days,
    so it is expected to end after 14 (the median of those longer than ten), on 15 March, before its 20-day limit."""
    for start, days in (("2026-02-10", 12), ("2026-02-12", 14), ("2026-02-05", 16)):
        done = workload(demo["bob"], project="nlp", gpus=1)
        Workload.objects.filter(pk=done.pk).update(status="succeeded", admitted_at=at(f"{start} 00:00"),
                                                   finished_at=at(f"{start} 00:00") + timedelta(days=days))
    status = budget_status(budget("research", amount="1000"), now=NOW)
    assert status.spent == Decimal("250.000")
    assert status.projected == Decimal("250.000") + Decimal("96.000")  # four more days of one card
    # Runs of another project say nothing about NLP's: Vision's budget still projects from its own.
    assert budget_status(budget("vision"), now=NOW).projected == Decimal("10.000")


def test_a_budget_of_a_scope_without_work_has_spent_nothing(demo):
    status = budget_status(budget("etl"), now=NOW)
    assert (status.spent, status.burn_per_day, status.projected) == (Decimal(0), Decimal(0), Decimal(0))
    assert not status.exceeded
    assert status.percent == 0.0
    assert budget_status(budget("serving", amount="0"), now=NOW + timedelta(days=1)).percent is None


def test_a_raise_releases_the_hold_only_once_it_ends_the_excess_and_rearms_the_thresholds_not_reached(demo):
    """Held after spending past the amount; a raise still below what was spent keeps the hold (no gap in which
    preemptible work slips in), a raise above it releases it at the budget's own sweep; the thresholds not reached
    under the raised amount notify again once they are."""
    from django.utils import timezone

    from apps.core.models import AuditEvent
    from apps.org import services as org_services
    from apps.org.models import BudgetCrossing, budget_period
    from apps.usage.budgets import budgets_evaluate
    from worker.tasks import budget_evaluate

    now = timezone.now()
    start = budget_period("month", now)[0]
    text = "%Y-%m-%d %H:%M:%S"
    interval(workload(demo["alice"], gpus=2), f"{start:{text}}", f"{start + (now - start) / 2:{text}}")
    created = org_services.budget_create(actor=demo["admin"], project=Project.objects.get(slug="vision"),
                                         amount=Decimal(1), thresholds=[50, 100], on_exceed="hold_preemptible")
    assert budgets_evaluate(budget_ids=[created.pk]) == 2
    spent = budget_status(created).spent  # about the hours since the month began: 2 cards for half of them
    assert spent > 2 and Budget.objects.get(pk=created.pk).held_period_start == start

    def raise_to(amount: Decimal) -> Budget:
        budget = org_services.budget_update(actor=demo["admin"], budget=Budget.objects.get(pk=created.pk),
                                            amount=amount)
        assert budget.held_period_start == start  # the change itself never lifts the hold
        budget_evaluate(created.pk)
        return Budget.objects.get(pk=created.pk)

    not_enough = raise_to((spent * Decimal("0.9")).quantize(Decimal("0.01")))
    assert not_enough.held_period_start == start
    assert sorted(BudgetCrossing.objects.filter(budget=created).values_list("threshold", flat=True)) == [50, 100]

    enough = raise_to((spent * Decimal("1.5")).quantize(Decimal("0.01")))
    assert enough.held_period_start is None
    # 50 % of the new amount was reached when it was recorded; 100 % was not, so it will notify when it is.
    assert list(BudgetCrossing.objects.filter(budget=created).values_list("threshold", flat=True)) == [50]
    assert list(AuditEvent.objects.filter(object_type="budget", object_id=str(created.pk)).order_by(
        "pk").values_list("action", flat=True)) == [
        "budget.create", "budget.hold", "budget.update", "budget.update", "budget.release"]

    lowered = org_services.budget_update(actor=demo["admin"], budget=enough, amount=Decimal(1))
    assert budgets_evaluate(budget_ids=[lowered.pk]) == 1  # 100 % again, of this amount
    assert Budget.objects.get(pk=created.pk).held_period_start == start
