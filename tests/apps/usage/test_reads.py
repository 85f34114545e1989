"""The dashboard's reads compiled once per process and run together: each department's rows are the ORM's."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.org.models import Department, Quota
from apps.usage import selectors
from apps.usage.reads import ScopedRead, read_together
from apps.workloads.models import WAITING_STATUSES
from apps.workloads.selectors import tally_rows

pytestmark = pytest.mark.django_db


def _quota_rows(department_ids):
    return Quota.objects.filter(**({} if department_ids is None else {"department_id__in": department_ids})).values(
        "department_id", "deserved").order_by("pk")


def _deserved(department_ids):
    return Quota.objects.filter(**({} if department_ids is None else {"department_id__in": department_ids})).values(
        "deserved").order_by("pk")


def test_each_department_reads_its_own_rows_from_one_compiled_query(demo):
    read, other = ScopedRead(_quota_rows), ScopedRead(_deserved)
    departments = list(Department.objects.values_list("pk", flat=True))
    assert len(departments) >= 2
    for department_id in departments:  # the same shape: compiled once, run with each id in its place
        assert read_together([department_id], read, other) == [list(_quota_rows([department_id])),
                                                               list(_deserved([department_id]))]
    assert read_together(departments, read) == [list(_quota_rows(departments))]
    assert read_together(None, read, other) == [list(_quota_rows(None)), list(_deserved(None))]
    assert any(read_together(None, read)[0])


def test_reads_run_together_in_one_round_trip(demo):
    departments = list(Department.objects.values_list("pk", flat=True))
    with CaptureQueriesContext(connection) as queries:
        read_together(departments, ScopedRead(_quota_rows), ScopedRead(_deserved))
    assert len(queries.captured_queries) == 1


def test_no_department_reads_nothing_without_a_query(demo):
    with CaptureQueriesContext(connection) as queries:
        assert read_together([], ScopedRead(_quota_rows)) == [[]]
    assert not queries.captured_queries


def test_a_department_id_the_query_does_not_take_as_a_parameter_is_refused():
    read = ScopedRead(lambda department_ids: Quota.objects.filter(deserved__gt=0).values("deserved"))
    with pytest.raises(ValueError, match="stand-in"):
        read_together([1], read)


def test_the_dashboard_reads_are_those_of_the_orm(demo):
    """The four reads give what their querysets give through the ORM, for one department and for everything."""
    department_ids = sorted(Department.objects.values_list("pk", flat=True))[:1]
    for scope in (department_ids, None):
        where = {} if scope is None else {"project__department_id__in": scope}
        quotas, reservations, states, tallies = read_together(
            scope, selectors._QUOTAS, selectors._RESERVATIONS, selectors._STATES, selectors._TALLIES)
        assert quotas  # the demo's department holds quota
        for rows, build in ((quotas, selectors._quotas), (reservations, selectors._reservations),
                            (states, selectors._states)):
            assert sorted(map(repr, rows)) == sorted(map(repr, build(scope)))
        assert sorted(tuple(row.values()) for row in tallies) == sorted(tally_rows(statuses=WAITING_STATUSES,
                                                                                   **where))
