"""The list rows, the project queue's rows and row badges written in Python (`workload_row`, `queue_waiting_row`,
`queue_holding_row`, `status_badge`, `origin_badge`) render what their templates rendered."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.contrib.auth import get_user_model
from django.template import engines
from django.test import RequestFactory
from django.urls import reverse
from django.utils import timezone

from apps.org.models import Department, NodePool, PriorityClass, Project
from apps.workloads.explain import Explanation
from apps.workloads.explain.reasons import KINDS
from apps.workloads.models import (
    HOLDING_STATUSES,
    ForecastBasis,
    ForecastReason,
    Kind,
    Origin,
    Status,
    Workload,
    WorkloadForecast,
)
from apps.workloads.selectors.queue import PENDING_STATUSES

User = get_user_model()

TAGS = engines["django"].from_string("{% load workload_tags %}{% status_badge w %}|{% origin_badge w %}")
PARTIALS = engines["django"].from_string('{% include "workloads/partials/_status_badge.html" with workload=w %}|'
                                         '{% include "workloads/partials/_origin_badge.html" with workload=w %}')


@pytest.mark.parametrize("status", list(Status))
def test_status_badge_is_the_partial_byte_for_byte(status):
    workload = Workload(status=status, kind=Kind.TRAINING, origin=Origin.PORTAL)
    assert TAGS.render({"w": workload}) == PARTIALS.render({"w": workload})


@pytest.mark.parametrize(("submitted_by", "object_name"), [("", "train-1"), ('system:serviceaccount:ml:<ci> & "x"',
                                                                              "job<1>")])
def test_origin_badge_is_the_partial_byte_for_byte(submitted_by, object_name):
    for origin in Origin:
        workload = Workload(status=Status.RUNNING, kind=Kind.BATCH, origin=origin, submitted_by=submitted_by,
                            object_name=object_name)
        rendered = TAGS.render({"w": workload})
        assert rendered == PARTIALS.render({"w": workload})
        assert ('data-origin="outside"' in rendered) == (origin == Origin.OUTSIDE)


# partials/_list_table.html's row (its loop's body) as the template wrote it before `workload_row` did, kept beside
# this file to compare with.
LIST_ROW_TEMPLATE = (Path(__file__).parent / "list_row_before.html").read_text()
OLD_ROWS = engines["django"].from_string("{% load workload_tags %}{% for w in rows %}" + LIST_ROW_TEMPLATE +
                                         "{% endfor %}")
NEW_ROWS = engines["django"].from_string("{% load workload_tags %}{% for w in rows %}{% workload_row w %}{% endfor %}")


def listed(status, *, now, index, may_stop, origin=Origin.PORTAL, forecast=None, explanation=None):
    """A row as the list page hands it to the template (joined, annotated, `may_stop` set), in memory."""
    department = Department(pk=3, slug="re<search>", name="Research")
    workload = Workload(
        pk=100 + index, status=status, kind=list(Kind)[index % len(Kind)], origin=origin, name=f"run-{index} <&>",
        project=Project(pk=5, slug="vision_2-b", name="Vision", department=department),
        node_pool=NodePool(pk=2, slug="h100", name="H100"), gpus=index % 3 + 1,
        gpu_fraction=Decimal("0.5") if index % 4 == 0 else None, pods=1 + index % 2, preemptible=index % 2 == 0,
        priority_class=PriorityClass(name="high <p>") if index % 3 else None, submitted_by='ci "bot"',
        status_reason=["", "Running", "QuotaReserved", "Evicted <by> 'x'"][index % 4],
        created_at=now - timedelta(days=index % 5, hours=index, minutes=30), object_name=f"job-{index}")
    workload.may_stop = may_stop
    workload.explanation = explanation
    workload.position_label = f"{index} of 9 <in queue>" if index % 2 else ""
    workload.runtime = timedelta(seconds=index * 3671) if index % 3 else None
    if forecast is not None:
        workload.forecast = forecast
    else:  # read with the row and found missing, as select_related("forecast") leaves it
        workload._state.fields_cache["forecast"] = None
    return workload


def forecasts(now):
    # Ages and forecasts are said from now: half a minute (or an hour) from their next change.
    now += timedelta(seconds=30)
    estimated = {"earliest": now + timedelta(minutes=25), "likely": now + timedelta(minutes=30),
                 "latest": now + timedelta(minutes=40)}
    return [None, WorkloadForecast(computed_at=now, basis=ForecastBasis.HISTORY, **estimated),
            WorkloadForecast(computed_at=now, basis=ForecastBasis.MIXED, reason="", **estimated),
            WorkloadForecast(computed_at=now, basis=ForecastBasis.NONE, reason=ForecastReason.NEVER_FITS,
                             message="needs 9 <GPUs> & more"),
            WorkloadForecast(computed_at=now, basis=ForecastBasis.NONE, reason=ForecastReason.KAI_POOL)]


@pytest.mark.parametrize("may_stop_any", [False, True])
@pytest.mark.parametrize("may_submit", [False, True])
def test_workload_row_is_the_list_template_row_byte_for_byte(may_stop_any, may_submit):
    explanation = SimpleNamespace(kind="quota", reason="quota_<full>", sentence='Waits for "8" GPUs & <more>.')
    now = timezone.now()
    rows = [listed(status, now=now, index=index, may_stop=may_stop_any and index % 2 == 0,
                   origin=Origin.OUTSIDE if index % 5 == 0 else Origin.PORTAL,
                   forecast=forecasts(now)[index % 5], explanation=explanation if index % 3 == 0 else None)
            for index, status in enumerate(list(Status) * 2)]
    request = RequestFactory().get("/workloads/", {"scope": "all", "q": 'a&b <c> "d" é', "page": "2"})
    context = {"rows": rows, "may_stop_any": may_stop_any, "may_submit": may_submit, "request": request,
               "stop_consequences": 'Its Job & pods are "deleted" <now>.'}
    new = NEW_ROWS.render(context)
    assert new == OLD_ROWS.render(context)
    assert new.count("<tr data-workload") == len(rows)
    assert ("data-start-forecast" in new) and ('data-forecast-reason="kai_pool"' in new)
    assert ('name="ids"' in new) is may_stop_any
    assert ("Submit again" in new) is may_submit


# partials/_project_queue_live.html's two row loops' bodies as the template wrote them before `queue_waiting_row` and
# `queue_holding_row` did, kept beside this file to compare with. The view then gave each row its `detail_url`.
OLD_QUEUE_ROWS = engines["django"].from_string(
    "{% load workload_tags %}{% for w in waiting %}" + (Path(__file__).parent / "queue_waiting_row_before.html")
    .read_text() + "{% endfor %}|{% for w in holding %}" + (Path(__file__).parent / "queue_holding_row_before.html")
    .read_text() + "{% endfor %}")
NEW_QUEUE_ROWS = engines["django"].from_string(
    "{% load workload_tags %}{% for w in waiting %}{% queue_waiting_row w %}{% endfor %}|"
    "{% for w in holding %}{% queue_holding_row w %}{% endfor %}")


def queued(status, *, now, index, viewer, forecast, explanation):
    """A row as the project queue hands it to the template (annotated by `annotate_live`), in memory: every shape
    of row the page meets (owner the viewer or another or none, a gang, a share of a card, outside work, with and
    without a position, a priority class, a message, a forecast, an explanation and a runtime)."""
    workload = listed(status, now=now, index=index, may_stop=False,
                      origin=Origin.OUTSIDE if index % 7 == 0 else Origin.PORTAL, forecast=forecast,
                      explanation=explanation)
    workload.owner = None if index % 7 == 0 else (viewer if index % 3 == 0 else User(pk=viewer.pk + 1 + index % 2,
                                                                                      username=f"u{index} <&>"))
    workload.queue_position_local = None if index % 4 == 3 else index % 4
    workload.status_message = ["", "couldn't assign flavors to pod set main: insufficient quota <gpu> & \"more\""][
        index % 2]
    workload.position_label = f"#{index % 4 + 1} in {workload.queue_name}" if index % 4 != 3 else ""
    workload.detail_url = reverse("workloads:detail", args=[workload.pk])
    return workload


def explanations():
    """One explanation of each reason (so each kind), words that need escaping; and none."""
    return [None, *(Explanation(reason=reason, sentence=f'Waits: {reason} for "8" GPUs & <more>.', headline="h")
                    for reason in KINDS)]


def test_queue_rows_are_the_queue_template_rows_byte_for_byte():
    now = timezone.now()
    viewer = User(pk=41, username="me")
    reasons = explanations()
    waiting = [queued(status, now=now, index=index, viewer=viewer, forecast=forecasts(now)[index % 5],
                      explanation=reasons[index % len(reasons)])
               for index, status in enumerate([*sorted(PENDING_STATUSES), *Status] * 7)]
    holding = [queued(status, now=now, index=index, viewer=viewer, forecast=None, explanation=None)
               for index, status in enumerate([*sorted(HOLDING_STATUSES), *Status] * 2)]
    for gang in waiting[::5] + holding[::3]:
        gang.pods, gang.gpu_fraction = 4, None
    request = RequestFactory().get("/workloads/projects/vision_2-b/queue/")
    request.user = viewer
    for context in ({"waiting": waiting, "holding": holding, "request": request},
                    {"waiting": waiting, "holding": holding}):
        new = NEW_QUEUE_ROWS.render(context)
        assert new == OLD_QUEUE_ROWS.render(context)
    new = NEW_QUEUE_ROWS.render({"waiting": waiting, "holding": holding, "request": request})
    assert new.count("<tr data-workload") == len(waiting) + len(holding)
    for kind in set(KINDS.values()):
        assert f'data-explanation="{kind}"' in new, kind
    for shown in ('<span class="badge">you</span>', 'data-origin="outside"', "data-start-forecast",
                  'data-forecast-reason="kai_pool"', " · non-preemptible", '<span class="muted">preemptible</span>',
                  "&lt;more&gt;", 'data-position=""', "<strong>#1 in"):
        assert shown in new, shown
