"""The pager's count stops at its cap: one COUNT over at most cap + 1 rows, and no page past the cap."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from apps.core.filters import CappedPaginator

pytestmark = pytest.mark.django_db


@pytest.fixture
def rows():
    user_model = get_user_model()
    user_model.objects.bulk_create(user_model(username=f"pager-{number}") for number in range(7))
    return user_model.objects.filter(username__startswith="pager-").order_by("username")


@pytest.mark.parametrize(("cap", "count", "capped", "pages"), [(10, 7, False, 4), (7, 7, False, 4), (6, 6, True, 3),
                                                              (3, 3, True, 2)])
def test_counts_up_to_the_cap(rows, cap, count, capped, pages, django_assert_num_queries):
    paginator = CappedPaginator(rows, 2, cap=cap)
    with django_assert_num_queries(1):
        assert (paginator.count, paginator.capped, paginator.num_pages) == (count, capped, pages)
    assert paginator.get_page(99).number == pages
