"""The row badges written in Python (`status_badge`, `origin_badge`) render what their partials render."""

from __future__ import annotations

import pytest
from django.template import engines

from apps.workloads.models import Kind, Origin, Status, Workload

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
