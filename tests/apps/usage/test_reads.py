"""The dashboard's reads compiled once per process: the rows of each department are those the ORM reads."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.org.models import Department, Quota
from apps.usage import selectors
from apps.usage.reads import ScopedRead
from apps.workloads.models import WAITING_STATUSES
from apps.workloads.selectors import tally_rows

pytestmark = pytest.mark.django_db


def _quota_rows(department_ids):
    return Quota.objects.filter(**({} if department_ids is None else {"department_id__in": department_ids})).values(
        "department_id", "deserved").order_by("pk")


def test_each_department_reads_its_own_rows_from_one_compiled_query(demo):
    read = ScopedRead(_quota_rows)
    departments = list(Department.objects.values_list("pk", flat=True))
    assert len(departments) >= 2
    for department_id in departments:  # the same shape: compiled once, run with each id in its place
        assert read.dicts([department_id]) == list(_quota_rows([department_id]))
    assert read.dicts(departments) == list(_quota_rows(departments))
    assert read.dicts(None) == list(_quota_rows(None))
    assert read.tuples([departments[0]]) == [tuple(row.values()) for row in _quota_rows([departments[0]])]


def test_no_department_reads_nothing_without_a_query(demo):
    with CaptureQueriesContext(connection) as queries:
        assert ScopedRead(_quota_rows).dicts([]) == []
    assert not queries.captured_queries


def test_a_department_id_the_query_does_not_take_as_a_parameter_is_refused():
    read = ScopedRead(lambda department_ids: Quota.objects.filter(deserved__gt=0).values("deserved"))
    with pytest.raises(ValueError, match="stand-in"):
        read.dicts([1])


def test_the_dashboard_reads_are_those_of_the_orm(demo):
    """The four reads give what their querysets give through the ORM, for one department and for everything."""
    department_ids = sorted(Department.objects.values_list("pk", flat=True))[:1]
    assert selectors._QUOTAS.dicts(department_ids)  # the demo's department holds quota
    for read, build in ((selectors._QUOTAS, selectors._quotas), (selectors._RESERVATIONS, selectors._reservations),
                        (selectors._STATES, selectors._states)):
        for scope in (department_ids, None):
            assert sorted(map(repr, read.dicts(scope))) == sorted(map(repr, build(scope)))
    for scope in (department_ids, None):
        where = {} if scope is None else {"project__department_id__in": scope}
        assert sorted(selectors._TALLIES.tuples(scope)) == sorted(tally_rows(statuses=WAITING_STATUSES, **where))
